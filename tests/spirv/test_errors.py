"""Malformed input raises SpirvError naming the word offset; hypothesis finds nothing else."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tessera.spirv import SpirvError, disassemble, parse, reflect

HEADER = [0x07230203, 0x00010000, 0, 10, 0]
CAP_SHADER = [(2 << 16) | 17, 1]


def words(*ws: int) -> bytes:
    return struct.pack(f"<{len(ws)}I", *ws)


@pytest.mark.parametrize("data, offset, text", [
    (b"\x03\x02\x23", 0, "not a whole number of words"),
    (words(0x07230203, 0x10000), 2, "5-word header"),
    (words(0xDEADBEEF, 0, 0, 1, 0), 0, "bad magic"),
    (words(*HEADER, (3 << 16) | 17, 1), 5, "only 2 remain"),
    (words(*HEADER, (0 << 16) | 17), 5, "word count is 0"),
    (words(*HEADER, (1 << 16) | 0xFFF0), 5, "unknown opcode"),
    (words(*HEADER, *CAP_SHADER, (3 << 16) | 21, 9, 32), 7, "OpTypeInt has 3 words"),  # no signedness
    (words(*HEADER, (2 << 16) | 19, 10), 6, "outside the bound"),                 # OpTypeVoid %10, bound 10
    (words(*HEADER, (2 << 16) | 19, 3, (2 << 16) | 19, 3), 7, "defined twice"),
    (words(*HEADER, (3 << 16) | 5, 1, 0x41414141), 5, "nul-terminated"),          # OpName without a nul
    (words(*HEADER, (5 << 16) | 54, 1, 2, 0, 3), 10, "ends inside a function"),
    (words(*HEADER, (3 << 16) | 62, 1, 2, (4 << 16) | 62, 1, 2, 0x2), 8, "OpStore ends inside operand"),  # Aligned, no literal
], ids=lambda v: v if isinstance(v, str) else None)
def test_documented_errors(data: bytes, offset: int, text: str) -> None:
    with pytest.raises(SpirvError, match=text) as info:
        parse(data)
    assert info.value.offset == offset
    assert f"word {offset}" in str(info.value)


def collatz_bytes() -> bytes:
    from spirv_corpus import ROOT, GLSLANG
    import subprocess
    import tempfile
    if GLSLANG is None:
        pytest.skip("glslangValidator is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "c.spv"
        subprocess.run([GLSLANG, "-V", str(ROOT / "examples/shaders/collatz.comp"), "-o", str(out)],
                       check=True, capture_output=True)
        return out.read_bytes()


SEED = collatz_bytes()


def exercise(data: bytes) -> None:
    try:
        module = parse(data)
        disassemble(module)
        reflect(module)
    except SpirvError:
        pass


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=256))
def test_random_bytes(data: bytes) -> None:
    exercise(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(5, len(SEED) // 4 - 1), st.integers(0, 0xFFFFFFFF)), min_size=1, max_size=4),
       st.integers(0, len(SEED) // 4))
def test_mutated_module(mutations: list[tuple[int, int]], cut: int) -> None:
    ws = list(struct.unpack(f"<{len(SEED) // 4}I", SEED))
    for index, value in mutations:
        ws[index] = value
    exercise(words(*ws[: max(cut, 5)]))
    exercise(words(*ws))


@settings(max_examples=200, deadline=None)
@given(st.integers(5, len(SEED) // 4 - 1), st.sampled_from([0, 1, 0xFFFF, 0x10000, 0xFFFFFFFF, 0x7FFF0000]))
@example(index=211, value=0)  # found in CI: an OpTypeInt of width 0 made the disassembler shift by -1
def test_mutated_word_kinds(index: int, value: int) -> None:
    ws = list(struct.unpack(f"<{len(SEED) // 4}I", SEED))
    ws[index] = value
    exercise(words(*ws))
