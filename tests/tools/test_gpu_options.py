"""`tessera run --gpu NAME` and `--gpu-profile FILE`: a wrong choice is one clear error line (exit 2)
before anything is launched; a good one reaches the driver as TESSERA_GPU / TESSERA_GPU_PROFILE."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tessera.icd.profiles import DEVICES, PROFILES, shipped
from tessera.tools.cli import main
from tessera.tools.cmd_run import check_gpu, check_gpu_profile
from tessera.tools.launch import LaunchConfig, environment


def _run(*args: str, tmp_path: Path):
    return CliRunner().invoke(main, ["run", "--out", str(tmp_path / "s"), *args, "--", "true"])


def _error_lines(result) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith("Error:")]


@pytest.mark.parametrize("make, says", [
    (lambda d: d / "missing.json", "no such file"),
    (lambda d: d, "not a file"),
    (lambda d: (d / "a.json").write_text("{\"profiles\": ") and d / "a.json", "not JSON"),
    (lambda d: (d / "a.json").write_text("{\"profiles\": {\"x\": {}}}") and d / "a.json", 'no "capabilities"'),
    (lambda d: (d / "a.json").write_text(json.dumps({"profiles": {"VP_A": {}, "VP_B": {}}, "capabilities": {}}))
     and d / "a.json", "2 profiles (VP_A, VP_B)"),
])
def test_bad_gpu_profile_is_one_line(tmp_path, make, says):
    path = make(tmp_path)
    result = _run("--gpu-profile", str(path), tmp_path=tmp_path)
    assert result.exit_code == 2, result.output
    (line,) = _error_lines(result)
    assert "--gpu-profile" in line and says in line and "Traceback" not in result.output
    assert not (tmp_path / "s").exists()          # refused before the session folder was made


def test_unknown_gpu_lists_the_known_ones(tmp_path):
    result = _run("--gpu", "mali-g999", tmp_path=tmp_path)
    assert result.exit_code == 2
    (line,) = _error_lines(result)
    assert all(k in line for k in PROFILES)


def test_help_names_the_options():
    out = CliRunner().invoke(main, ["run", "--help"]).output
    assert "--gpu NAME" in out and "--gpu-profile FILE.json" in out


def test_choices_reach_the_driver_environment(tmp_path):
    key = shipped()[0]
    assert check_gpu(key.upper()) == key
    profile = check_gpu_profile(str(DEVICES / f"{key}.json"))   # a shipped file is a valid user file too
    env = environment(LaunchConfig(tmp_path, gpu=key, gpu_profile=profile), base={})
    assert env["TESSERA_GPU"] == key and env["TESSERA_GPU_PROFILE"] == str((DEVICES / f"{key}.json").resolve())
    assert "TESSERA_GPU_PROFILE" not in environment(LaunchConfig(tmp_path), base={})
