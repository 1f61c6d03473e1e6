"""Benchmark: SPIR-V parse + reflect + emit throughput.

Measures tessera.spirv on (1) the largest module of the test corpus
(examples/**/*.comp|vert|frag and tests/spirv/corpus, compiled with
glslangValidator when it is installed) and (2) a synthetic compute module of
>= 100k instructions built here (long straight-line integer arithmetic with
branches every few instructions). Prints MB/s and instructions/s for parse,
reflect and emit, and checks the target: a 100k-instruction module parses and
re-emits in under 0.5 s. Run: .venv/bin/python bench/bench_spirv.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = (".comp", ".vert", ".frag", ".glsl")
TARGET_SECONDS = 0.5


def corpus_largest() -> tuple[str, bytes] | None:
    glslang = shutil.which("glslangValidator")
    if glslang is None:
        return None
    sources = [p for d in (ROOT / "examples", ROOT / "tests/spirv/corpus") if d.exists()
               for p in d.rglob("*") if p.suffix in SUFFIXES]
    best: tuple[str, bytes] | None = None
    with tempfile.TemporaryDirectory() as tmp:
        for src in sources:
            out = Path(tmp) / (src.name + ".spv")
            if subprocess.run([glslang, "-V", str(src), "-o", str(out)], capture_output=True).returncode:
                continue
            data = out.read_bytes()
            if best is None or len(data) > len(best[1]):
                best = (str(src.relative_to(ROOT)), data)
    return best


def synthetic(instructions: int) -> bytes:
    """A valid compute module with about `instructions` instructions."""
    from tessera.spirv import ModuleEditor, parse
    from tessera.spirv.module import Block, Function, Instruction
    seed = [0x07230203, 0x00010000, 0, 1, 0]
    module = parse(seed)
    ed = ModuleEditor(module)
    ed.add_capability("Shader")
    ed.add_global(ed.make("OpMemoryModel", 0, 1, result=False))
    void = ed.type("OpTypeVoid")
    fn_type = ed.type("OpTypeFunction", void)
    uint = ed.type_int()
    boolean = ed.type("OpTypeBool")
    one = ed.constant_uint(1)
    seven = ed.constant_uint(7)
    fn = ed.make("OpFunction", void, 0, fn_type)
    ed.add_global(Instruction.make(ed.g.opcode("OpEntryPoint"), [5, fn.result_id, 0x6E69616D, 0]))
    ed.add_global(Instruction.make(ed.g.opcode("OpExecutionMode"), [fn.result_id, 17, 64, 1, 1]))
    function = Function([fn], [], [ed.make("OpFunctionEnd")])
    module.functions.append(function)
    label = ed.make("OpLabel")
    body: list[Instruction] = [label]
    value = one
    count = 0
    while count < instructions:
        for _ in range(8):
            add = ed.make("OpIAdd", uint, value, seven)
            mul = ed.make("OpIMul", uint, add.result_id, value)
            body += [add, mul]
            value = mul.result_id
        cond = ed.make("OpULessThan", boolean, value, seven)
        merge_label = ed.make("OpLabel")
        then_label = ed.make("OpLabel")
        body += [cond, ed.make("OpSelectionMerge", merge_label.result_id, 0),
                 ed.make("OpBranchConditional", cond.result_id, then_label.result_id, merge_label.result_id)]
        function.blocks.append(Block(body))
        function.blocks.append(Block([then_label, ed.make("OpBranch", merge_label.result_id)]))
        body = [merge_label]
        count += 22
    body.append(ed.make("OpReturn"))
    function.blocks.append(Block(body))
    return module.to_bytes()


def measure(label: str, data: bytes, repeat: int = 3) -> float:
    from tessera.spirv import parse, reflect
    best = [float("inf")] * 3
    count = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        module = parse(data)
        t1 = time.perf_counter()
        reflect(module)
        t2 = time.perf_counter()
        out = module.to_bytes()
        t3 = time.perf_counter()
        assert out == data, "round trip changed the module"
        count = sum(1 for _ in module.instructions())
        best = [min(a, b) for a, b in zip(best, (t1 - t0, t2 - t1, t3 - t2))]
    mb = len(data) / 1e6
    total = sum(best)
    print(f"{label}: {len(data)} bytes, {count} instructions")
    for name, seconds in zip(("parse", "reflect", "emit"), best):
        print(f"  {name:8s} {seconds * 1e3:8.2f} ms  {mb / seconds:8.2f} MB/s  {count / seconds:12,.0f} instr/s")
    print(f"  {'total':8s} {total * 1e3:8.2f} ms  {mb / total:8.2f} MB/s  {count / total:12,.0f} instr/s")
    print(f"  parse+emit {(best[0] + best[2]) * 1e3:.1f} ms")
    return best[0] + best[2]


def main() -> int:
    sys.path.insert(0, str(ROOT))
    t0 = time.perf_counter()
    from tessera.spirv.grammar import grammar
    grammar()
    print(f"grammar load: {(time.perf_counter() - t0) * 1e3:.1f} ms (once per process)")
    largest = corpus_largest()
    if largest is None:
        print("corpus: glslangValidator not installed, skipped")
    else:
        measure(f"corpus largest ({largest[0]})", largest[1])
    seconds = measure("synthetic", synthetic(100_000))
    verdict = "meets" if seconds < TARGET_SECONDS else "MISSES"
    print(f"target: 100k-instruction parse+emit < {TARGET_SECONDS} s: {verdict} ({seconds:.3f} s, "
          f"{TARGET_SECONDS / seconds:.1f}x headroom)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
