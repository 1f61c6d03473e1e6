"""`make bench`: every benchmark in bench/, one after the other (each prints its own ratios)."""
from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
SCRIPTS = ["bench_foundation.py", "bench_layer.py", "bench_emulation.py", "bench_pipeline.py", "bench_spirv.py"]


def main() -> int:
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, "
          f"{len(__import__('os').sched_getaffinity(0))} cores, Python {platform.python_version()}")
    failed = 0
    for script in SCRIPTS:
        print(f"\n== {script}", flush=True)
        failed |= subprocess.call([sys.executable, BENCH / script]) != 0
    return failed


if __name__ == "__main__":
    sys.exit(main())
