"""The `spirv` click group: dis and reflect, and clean user errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from spirv_corpus import corpus_entry

from tessera.spirv.cli import spirv


def test_dis_and_reflect(corpus: dict[str, Path], tmp_path: Path) -> None:
    path = str(corpus_entry(corpus, "examples/shaders/collatz.comp"))
    runner = CliRunner()
    dis = runner.invoke(spirv, ["dis", path])
    assert dis.exit_code == 0 and "OpEntryPoint GLCompute %4 \"main\"" in dis.output
    out = runner.invoke(spirv, ["reflect", path, "--spec", "0=128", "--entry", "main"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["entry_points"][0]["workgroup_size"] == [128, 1, 1]
    assert [len(f["blocks"]) for f in doc["functions"]] == [5, 9]
    assert doc["functions"][1]["blocks"][1]["construct"] == "loop"
    bad = tmp_path / "bad.spv"
    bad.write_bytes(b"\0" * 20)
    err = runner.invoke(spirv, ["reflect", str(bad)])
    assert err.exit_code == 1 and "bad magic" in err.output and "Traceback" not in err.output
    assert runner.invoke(spirv, ["reflect", path, "--spec", "zero"]).exit_code == 2
    assert "no entry point" in runner.invoke(spirv, ["reflect", path, "--entry", "nope"]).output


# -- issue 22: inputs that never end, values that would wrap, modules cut short ---------------------
def test_dis_and_reflect_refuse_what_is_not_a_file(tmp_path: Path) -> None:
    """/dev/zero never ends and a FIFO blocks its open: both refused at once (subprocesses, so a
    regression fails on the timeout rather than hanging the suite)."""
    import os
    import subprocess
    import sys

    fifo = tmp_path / "module.fifo"
    os.mkfifo(fifo)
    for command, path, kind in (("dis", "/dev/zero", "a character device"), ("reflect", str(fifo), "a FIFO")):
        r = subprocess.run([sys.executable, "-m", "tessera.tools.cli", "spirv", command, path], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 1 and f"not a regular file ({kind})" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr


def test_a_file_larger_than_any_module_is_refused(tmp_path: Path, monkeypatch) -> None:
    import tessera.spirv.cli as cli

    monkeypatch.setattr(cli, "MAX_MODULE", 1 << 20)
    big = tmp_path / "big.spv"
    big.write_bytes(b"\0" * ((1 << 20) + 4))
    r = CliRunner().invoke(spirv, ["dis", str(big)])
    assert r.exit_code == 1 and "larger than 1 MiB" in r.output


@pytest.mark.parametrize("value, why", [
    ("0=-5", "from 0 to 4294967295"),                  # collatz's SpecId 0 is a uint32
    ("0=99999999999", "from 0 to 4294967295"),
    ("0=4294967296", "from 0 to 4294967295"),
    ("0=1.5", "an integer"),
    ("7=1", "no specialization constant with SpecId 7"),
])
def test_spec_values_outside_their_type_or_unknown_ids_are_refused(corpus: dict[str, Path], value: str,
                                                                   why: str) -> None:
    path = str(corpus_entry(corpus, "examples/shaders/collatz.comp"))
    r = CliRunner().invoke(spirv, ["reflect", path, "--spec", value])
    assert r.exit_code == 2 and why in r.output and "Traceback" not in r.output, r.output


def test_spec_values_at_the_edges_of_their_type_are_taken(corpus: dict[str, Path]) -> None:
    path = str(corpus_entry(corpus, "examples/shaders/collatz.comp"))
    r = CliRunner().invoke(spirv, ["reflect", path, "--spec", "0=4294967295"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["entry_points"][0]["workgroup_size"] == [4294967295, 1, 1]


def test_signed_bool_and_float_spec_values() -> None:
    from types import SimpleNamespace as Spec

    from tessera.spirv.spec import spec_value_from_text

    assert spec_value_from_text(Spec(type="int", width=32), "-5") == -5
    assert spec_value_from_text(Spec(type="int", width=32), "-2147483648") == -(1 << 31)
    for text in ("2147483648", "-2147483649"):
        with pytest.raises(ValueError):
            spec_value_from_text(Spec(type="int", width=32), text)
    assert spec_value_from_text(Spec(type="bool", width=1), "true") == 1
    with pytest.raises(ValueError):
        spec_value_from_text(Spec(type="bool", width=1), "2")
    assert spec_value_from_text(Spec(type="float", width=32), "1.0") == 0x3F800000
    assert spec_value_from_text(Spec(type="float", width=32), "0x3f800000") == 0x3F800000
    with pytest.raises(ValueError):
        spec_value_from_text(Spec(type="float", width=32), "1e300")


def test_reflect_refuses_a_module_cut_at_any_instruction_boundary(corpus: dict[str, Path], tmp_path: Path) -> None:
    from array import array

    data = corpus_entry(corpus, "examples/shaders/collatz.comp").read_bytes()
    words = array("I", data)
    cuts, i = [], 5
    while i < len(words):
        cuts.append(i)
        i += words[i] >> 16
    cut = tmp_path / "cut.spv"
    for n in cuts:
        cut.write_bytes(data[:4 * n])
        r = CliRunner().invoke(spirv, ["reflect", str(cut)])
        assert r.exit_code == 1 and "Traceback" not in r.output, (n, r.output)


def test_every_corpus_module_is_complete(corpus: dict[str, Path]) -> None:
    from tessera.spirv.decoder import check_complete, parse

    for name, path in corpus.items():
        check_complete(parse(path.read_bytes()))
