"""Cost of the foundation, measured side by side in one run.

1. Recording N vkCmdDispatch (build/bench/dispatch_cost, C): plain lavapipe,
   the emulated Mali driver alone, and driver + Tessera layer (which wraps
   each dispatch in a t<tagID> label: three commands down instead of one).
   Reported as ns/call and as ratios to plain lavapipe.
2. Wall time of each example app: plain lavapipe vs `tessera run` (driver +
   layer, including the embedded Python start-up), best of R runs, as a ratio.

Run: .venv/bin/python bench/bench_foundation.py [--calls N] [--runs R]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tessera.tools.launch import LaunchConfig, ensure_shims, environment  # noqa: E402

LAVAPIPE = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"
EXAMPLES = ["compute_collatz", "render_passes", "transfers", "debug_labels"]


def envs(session: Path) -> dict[str, dict[str, str]]:
    base = dict(os.environ, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"))
    base.pop("VK_INSTANCE_LAYERS", None)
    return {
        "lavapipe": dict(base, VK_DRIVER_FILES=LAVAPIPE),
        "mali icd": environment(LaunchConfig(session, layer=False), base),
        "mali icd + layer": environment(LaunchConfig(session), base),
    }


def dispatch_cost(env: dict[str, str], calls: int) -> float:
    out = subprocess.run([REPO / "build/bench/dispatch_cost", str(calls), "5"], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["ns_per_call"]


def wall(argv: list, env: dict[str, str], runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(argv, env=env, capture_output=True, check=True)
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    ensure_shims()
    subprocess.run(["make", "-s", "-C", REPO / "examples"], check=True)
    e = envs(REPO / "build" / "bench-session")

    print(f"vkCmdDispatch recording cost ({args.calls} calls, best of 5)")
    base = None
    for name, env in e.items():
        ns = dispatch_cost(env, args.calls)
        base = base or ns
        print(f"  {name:18s} {ns:9.1f} ns/call   x{ns / base:6.1f} vs lavapipe")

    print(f"example wall time (best of {args.runs})")
    for ex in EXAMPLES:
        argv = [sys.executable, REPO / "examples" / f"{ex}.py"]
        plain = wall(argv, e["lavapipe"], args.runs)
        tessera = wall(argv, e["mali icd + layer"], args.runs)
        print(f"  {ex:18s} lavapipe {plain:6.3f} s   tessera {tessera:6.3f} s   x{tessera / plain:5.2f}")


if __name__ == "__main__":
    main()
