"""`make bench`: every benchmark in bench/, one after the other (each prints its own ratios)."""
from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
# An entry may carry arguments. bench_merge runs a 250,000-event session here (~15 s with generation);
# its default, the 1,000,000 events, takes ~1.5 min: run it directly for that.
SCRIPTS = ["bench_startup.py", "bench_instrument.py", "bench_foundation.py", "bench_layer.py", "python_calls.py", "instructions.py", "bench_placement.py", "bench_emulation.py", "bench_pipeline.py", "bench_spirv.py",
           "bench_hostd_ingest.py", "bench_merge.py --events 250000", "bench_ci_tables.py --sessions 100 --events-per-session 1000",
           "bench_compiler.py --dense-timeout 20"]


def main() -> int:
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, "
          f"{len(__import__('os').sched_getaffinity(0))} cores, Python {platform.python_version()}")
    failed = 0
    for script in SCRIPTS:
        print(f"\n== {script}", flush=True)
        name, *args = script.split()
        failed |= subprocess.call([sys.executable, BENCH / name, *args]) != 0
    return failed


if __name__ == "__main__":
    sys.exit(main())
