"""`tessera doctor` on the user's Python environment (issue #31): what it says for another
environment active, PYTHONHOME set, or another Python version first on PATH."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tessera.tools.doctor import report_python_environment

OURS = f"{sys.version_info[0]}.{sys.version_info[1]}"


def _env(path: str, **extra: str) -> dict[str, str]:
    return dict(PATH=path, **extra)


def test_the_projects_own_environment_is_ok():
    lines = report_python_environment(_env(str(Path(sys.executable).parent)))
    assert lines == [f"  ok       Python environment: the project's ({sys.executable}, Python {OURS})"]


def test_pythonhome_and_an_active_venv_are_named_and_c_programs_said_unaffected(tmp_path):
    root = tmp_path / "other"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(root)], check=True)
    lines = report_python_environment(_env(f"{root}/bin:{os.defpath}", VIRTUAL_ENV=str(root), PYTHONHOME="/usr"))
    text = "\n".join(lines)
    assert f"VIRTUAL_ENV={root}" in text and "PYTHONHOME=/usr" in text
    assert f"python3 on PATH is {root}/bin/python3" in text
    assert "C/C++/Rust programs: unaffected" in text


def test_another_python_version_first_on_path_is_said_to_be_refused():
    other = next((p for p in sorted(Path.home().glob(".pyenv/versions/3.*/bin/python3"))
                  if subprocess.run([str(p), "-c", f"import sys; sys.exit(sys.version_info[:2] == {sys.version_info[:2]})"]
                                    ).returncode == 0), None)
    if other is None:
        pytest.skip("no CPython of another minor version on this machine")
    text = "\n".join(report_python_environment(_env(f"{other.parent}:{os.defpath}")))
    assert "the shims refuse it" in text and f"run them with a Python {OURS}" in text
