"""The `spirv` click group: dis and reflect, and clean user errors."""

from __future__ import annotations

import json
from pathlib import Path

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
