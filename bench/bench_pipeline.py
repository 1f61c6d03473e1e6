"""Latency the emulated driver adds to pipeline creation, on the examples' pipelines.

What it measures, in one run, on one machine: bench/pipeline_worker.py (Python, `vulkan`
package, the examples' own pipeline helpers) creates the examples' three pipelines (collatz
compute; quad.vert + solid.frag for dynamic rendering; fullscreen.vert + invert.frag in a subpass
with an input attachment) in three loader environments (bench/common.py): plain lavapipe, the
emulated Mali driver alone, driver + Tessera layer. At pipeline creation the driver parses the
SPIR-V (work-group size) and runs the Mali compiler model, cached by SPIR-V hash. Per pipeline:
  first  first creation in a fresh process (median over P processes): cache miss plus any
         one-time set-up of the compiler model;
  cold   creations from SPIR-V made unique per creation (cache miss), median over P x C;
  warm   re-creations from the same SPIR-V (cache hit), median over P x W.
Times include the Python wrapper and lavapipe's own compile, which is why the added latency is the
difference of medians measured in this same run: (mali icd) - (lavapipe). Mesa's on-disk shader
cache is disabled (MESA_SHADER_CACHE_DISABLE=true) in every environment so lavapipe compiles every
time in all of them. Targets (issue 7): added <= 2 ms warm, <= 20 ms cold. A benchmark, not a
test: it never fails on a number.

Run: .venv/bin/python bench/bench_pipeline.py [--processes P] [--cold C] [--warm W]
"""
from __future__ import annotations

import argparse
import statistics
import sys

from common import ICD_ENV, LAVAPIPE_ENV, LAYER_ENV, REPO, bench_environments, build, run_json

KINDS = ("first", "cold", "warm")
TARGET_MS = {"warm": 2.0, "cold": 20.0}


def collect(env: dict[str, str], processes: int, cold: int, warm: int) -> dict[str, dict[str, float]]:
    """pipeline -> kind -> median seconds, over `processes` worker processes."""
    samples: dict[str, dict[str, list[float]]] = {}
    argv = [sys.executable, REPO / "bench" / "pipeline_worker.py", "--cold", cold, "--warm", warm]
    for _ in range(processes):
        for name, times in run_json(argv, env)["pipelines"].items():
            into = samples.setdefault(name, {k: [] for k in KINDS})
            into["first"].append(times["first"])
            into["cold"] += times["cold"]
            into["warm"] += times["warm"]
    return {name: {k: statistics.median(v) for k, v in kinds.items()} for name, kinds in samples.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=3, help="worker processes per environment")
    ap.add_argument("--cold", type=int, default=10, help="cold creations per pipeline per process")
    ap.add_argument("--warm", type=int, default=30, help="warm creations per pipeline per process")
    args = ap.parse_args()
    build()
    with bench_environments() as envs:
        med = {name: collect(dict(env, MESA_SHADER_CACHE_DISABLE="true"), args.processes, args.cold, args.warm)
               for name, env in envs.items()}

    print(f"pipeline creation, median ms ({args.processes} processes; per process 1 first, "
          f"{args.cold} cold, {args.warm} warm per pipeline)")
    print(f"  {'pipeline':11s} {'':5s} {'lavapipe':>9s} {'mali icd':>9s} {'icd adds':>9s} "
          f"{'icd+layer':>10s} {'layer adds':>10s}")
    worst = {k: 0.0 for k in KINDS}
    for name in med[LAVAPIPE_ENV]:
        for kind in KINDS:
            lvp, icd, layer = (med[e][name][kind] * 1e3 for e in (LAVAPIPE_ENV, ICD_ENV, LAYER_ENV))
            worst[kind] = max(worst[kind], icd - lvp)
            print(f"  {name:11s} {kind:5s} {lvp:9.2f} {icd:9.2f} {icd - lvp:+9.2f} {layer:10.2f} {layer - icd:+10.2f}")
    print(f"largest added by the icd: first {worst['first']:.2f} ms, cold {worst['cold']:.2f} ms "
          f"(target <= {TARGET_MS['cold']:.0f}), warm {worst['warm']:.2f} ms (target <= {TARGET_MS['warm']:.0f})")


if __name__ == "__main__":
    main()
