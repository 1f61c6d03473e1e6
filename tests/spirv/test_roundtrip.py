"""parse -> emit is byte-identical, and disassembly matches spirv-dis, for every corpus module."""

from __future__ import annotations

import subprocess
import sys
from array import array
from pathlib import Path

from tessera.spirv import disassemble, parse

from spirv_corpus import SPIRV_DIS, needs_spirv_tools


def test_corpus_is_complete(corpus: dict[str, Path]) -> None:
    # The hand-written expectations below rely on these; the examples glob adds more.
    for name in ("examples__shaders__collatz.comp", "tests__spirv__corpus__control.comp",
                 "tests__spirv__corpus__shade.vert", "tests__spirv__corpus__shade.frag",
                 "tests__spirv__corpus__tensor.spvasm", "tests__spirv__corpus__localsizeid.spvasm",
                 "examples__shaders__collatz.comp.opt"):
        assert name in corpus


def test_round_trip_bytes(corpus: dict[str, Path]) -> None:
    for name, path in corpus.items():
        data = path.read_bytes()
        module = parse(data)
        assert module.to_bytes() == data, name
        assert sum(1 for _ in module.instructions()) > 5, name


def test_round_trip_words_and_big_endian(corpus: dict[str, Path]) -> None:
    for name, path in corpus.items():
        data = path.read_bytes()
        words = array("I")
        words.frombytes(data)
        assert parse(words.tolist()).to_words().tobytes() == data, name
        swapped = array("I", words)
        swapped.byteswap()
        big = parse(swapped.tobytes())
        assert big.big_endian != (sys.byteorder == "big")
        assert big.to_bytes() == swapped.tobytes(), name


def test_edited_module_reemits_edit(corpus: dict[str, Path]) -> None:
    path = corpus["examples__shaders__collatz.comp"]
    module = parse(path.read_bytes())
    module.generator = 0x12345678
    out = module.to_bytes()
    assert out[8:12] == (0x12345678).to_bytes(4, "little")
    assert out[12:] == path.read_bytes()[12:]


@needs_spirv_tools
def test_disassembly_matches_spirv_dis(corpus: dict[str, Path]) -> None:
    for name, path in corpus.items():
        ours = disassemble(parse(path.read_bytes()))
        ref = subprocess.run([SPIRV_DIS, "--raw-id", "--no-header", "--no-indent", str(path)],
                             capture_output=True, text=True, check=True).stdout
        assert ours.splitlines() == ref.splitlines(), name
