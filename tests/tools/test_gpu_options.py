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


def test_doctor_lists_the_gpus_with_the_files_labels():
    result = CliRunner().invoke(main, ["doctor", "--gpu", "mali-g78"])
    assert result.exit_code == 0, result.output
    for key in shipped():                      # each real device, named by its file's own label
        (profile,) = json.loads((DEVICES / f"{key}.json").read_text())["profiles"].values()
        assert any(line.split()[0] == key and profile["label"] in line for line in result.output.splitlines())
    assert "GPU mali-g78: Mali-G78 (emulated)" in result.output
    assert "reports its backend's capabilities" in result.output and PROFILES["mali-g78"].sources in result.output


def test_doctor_rejects_an_unknown_gpu_in_one_line():
    result = CliRunner().invoke(main, ["doctor", "--gpu", "mali-g1"])
    assert result.exit_code == 2 and len(_error_lines(result)) == 1 and "mali-g720" in result.output


def test_doctor_reports_each_difference_with_its_reason():
    """Over the real backend (vulkaninfo's export of it): the count line matches the lines listed,
    each names a path of the profile and a reason; the G715's figures say where they come from."""
    result = CliRunner().invoke(main, ["doctor", "--gpu", "mali-g715"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    at = next(i for i, line in enumerate(lines) if "difference(s) between the profile" in line)
    listed = lines[at + 1:]
    assert int(lines[at].split()[0]) == len(listed) > 0
    assert all(line.startswith("    ") and " -> " in line and line.endswith(")") for line in listed)
    assert any(line.strip().startswith("extensions.VK_ARM_tensors: - -> ") for line in listed)   # Tessera adds it
    sources = next(line for line in lines if line.strip().startswith("sources"))
    assert "'Mali-G715-Immortalis MC11'" in sources and "libGPUInfo" in sources and "configuration choice" in sources
