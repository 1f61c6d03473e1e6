"""Benchmark of the compiler model: register allocation and whole compile, sparse vs dense.

What it measures, in one run, on one machine:
1. the generated fragment shader (bench/shader_gen.py, 6 passes x 16 dependent
   bicubic taps x 4 noise octaves, glslang + spirv-opt -O, >= 10,000
   instructions, spills): time of register allocation alone (liveness,
   interference, colouring, spilling - incremental for sparse, one full
   rebuild per spilled node for dense) and of the whole compile (parse, IR,
   allocation, costs), sparse allocator vs the 2021 dense baseline, and the
   ratio, with the spill code each one inserted. The dense allocator spills
   one node per full rebuild; on this input it needs minutes, so it is stopped
   after `--dense-timeout` seconds (default 60) and the ratio printed is then a
   lower bound (marked ">=");
2. a smaller generated shader (1 pass, ~2,500 instructions) on which dense
   runs to completion, for an exact ratio;
3. `shader_cost` latency on the examples' shaders (median, cold = cache
   miss, warm = cache hit), the cost the emulated driver adds per pipeline.

Targets (issue 7): allocation <= 0.2 s, whole compile <= 1 s, >= 50x faster
than dense; pipeline-creation latency <= 2 ms warm, <= 20 ms cold.

    .venv/bin/python bench/bench_compiler.py [--dense-timeout SECONDS]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import shader_gen  # noqa: E402

from tessera.compiler.api import clear_cache, compile_module, shader_cost  # noqa: E402
from tessera.compiler.check import check_allocation  # noqa: E402
from tessera.compiler.ra_dense import DenseTimeout  # noqa: E402


def best_of(n: int, fn):
    runs = [fn() for _ in range(n)]
    return min(runs, key=lambda c: c.cost.compile_seconds)


def compare(label: str, data: bytes, dense_timeout: float, sparse_runs: int = 3) -> None:
    print(f"\n== {label}: {shader_gen.instruction_count(data)} SPIR-V instructions")
    s = best_of(sparse_runs, lambda: compile_module(data, "main", "mali-g720", "sparse"))
    assert check_allocation(s.shader, s.allocation.registers) == []
    print(f"sparse: RA {s.allocation.seconds:8.3f} s   compile {s.cost.compile_seconds:8.3f} s   "
          f"vregs {s.shader.vreg_count}  rounds {s.allocation.rounds}  work registers {s.cost.work_registers}  "
          f"spills:fills {s.cost.spills}:{s.cost.fills}  (best of {sparse_runs}; {s.allocation.note})")
    t0 = time.perf_counter()
    try:
        d = compile_module(data, "main", "mali-g720", "dense", dense_deadline=dense_timeout)
    except DenseTimeout as stop:
        total = time.perf_counter() - t0
        print(f"dense:  RA >={stop.seconds:7.1f} s   compile >={total:7.1f} s   stopped by --dense-timeout after "
              f"{stop.rounds} spill rounds (sparse needed {s.cost.spills} spill stores)")
        print(f"ratio:  RA >= {stop.seconds / s.allocation.seconds:.0f}x   compile >= "
              f"{total / s.cost.compile_seconds:.0f}x   (lower bounds)")
        return
    assert check_allocation(d.shader, d.allocation.registers) == []
    print(f"dense:  RA {d.allocation.seconds:8.3f} s   compile {d.cost.compile_seconds:8.3f} s   "
          f"rounds {d.allocation.rounds}  work registers {d.cost.work_registers}  "
          f"spills:fills {d.cost.spills}:{d.cost.fills}")
    print(f"ratio:  RA {d.allocation.seconds / s.allocation.seconds:.0f}x   compile "
          f"{d.cost.compile_seconds / s.cost.compile_seconds:.0f}x")


def pipeline_latency() -> None:
    print("\n== shader_cost latency on examples/shaders (what pipeline creation adds)")
    glslang = shader_gen.tool("glslangValidator")
    with tempfile.TemporaryDirectory() as tmp:
        for src in sorted((ROOT / "examples" / "shaders").glob("*.*")):
            out = Path(tmp) / (src.name + ".spv")
            subprocess.run([glslang, "-V", str(src), "-o", str(out)], check=True, capture_output=True)
            data = out.read_bytes()
            cold, warm = [], []
            for _ in range(15):
                clear_cache()
                t = time.perf_counter()
                shader_cost(data, "main", "mali-g720")
                cold.append(time.perf_counter() - t)
                t = time.perf_counter()
                shader_cost(data, "main", "mali-g720")
                warm.append(time.perf_counter() - t)
            print(f"{src.name:16} cold median {statistics.median(cold) * 1e3:7.2f} ms   "
                  f"warm median {statistics.median(warm) * 1e6:7.1f} us")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dense-timeout", type=float, default=60.0)
    args = ap.parse_args()
    big = shader_gen.build(passes=6, octaves=4)
    small = shader_gen.build(passes=1, octaves=4)
    compile_module(small, "main", "mali-g720")          # load the grammar once, outside the timings
    compare("generated fragment shader, 6 passes (the target input)", big, args.dense_timeout)
    compare("generated fragment shader, 1 pass (dense runs to completion)", small, 600.0)
    pipeline_latency()
    print("\ntargets: RA <= 0.2 s, compile <= 1 s, >= 50x faster than dense; latency <= 2 ms warm, <= 20 ms cold")


if __name__ == "__main__":
    main()
