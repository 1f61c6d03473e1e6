"""`tessera run` as a user meets it: exit status, the session folder, the loader environment
(issue #16 items 4, 5, 7 and the --out rules; issue #10 item 4's launch errors)."""
from __future__ import annotations

import json
import os
import sys

from integration_support import PYTHON, REPO, run

TESSERA = REPO / ".venv" / "bin" / "tessera"
APPS = REPO / "tests" / "integration" / "apps"


def _run(*args, env=None):
    return run([TESSERA, "run", *args], env)


def test_death_by_signal_exits_as_a_shell_reports_it(shims, tmp_path):
    out = _run("--out", tmp_path / "s", "--no-merge", "--", PYTHON, "-c",
               "import os, signal; os.kill(os.getpid(), signal.SIGABRT)")
    assert out.returncode == 128 + 6, out.stderr
    assert "killed by SIGABRT (signal 6; exit status 134)" in out.stderr


def test_out_folder_with_an_earlier_session_is_refused_then_replaced_with_force(shims, tmp_path):
    session = tmp_path / "s"
    app = [PYTHON, REPO / "examples" / "compute_collatz.py"]
    first = _run("--out", session, "--", *app)
    assert first.returncode == 0, first.stderr
    earlier = sorted(p.name for p in session.iterdir())
    second = _run("--out", session, "--", PYTHON, "-c", "print('app ran')")
    assert second.returncode == 1
    assert "holds an earlier session" in second.stderr and "--force" in second.stderr
    assert "app ran" not in second.stdout                       # refused before the app started
    assert sorted(p.name for p in session.iterdir()) == earlier   # and nothing touched
    third = _run("--out", session, "--force", "--", *app)
    assert third.returncode == 0, third.stderr
    summary = third.stdout
    assert "submits" in summary
    logs = [p for p in session.iterdir() if p.is_dir()]
    assert len(logs) == 1, logs                                  # only this run's connection


def test_force_never_deletes_files_tessera_did_not_write(shims, tmp_path):
    session = tmp_path / "s"
    session.mkdir()
    (session / "thesis.tex").write_text("precious")
    out = _run("--out", session, "--force", "--", PYTHON, "-c", "pass")
    assert out.returncode == 1
    assert "holds files Tessera did not write: thesis.tex" in out.stderr
    assert (session / "thesis.tex").read_text() == "precious"


def test_force_replaces_stages_a_killed_run_left_but_nothing_else(shims, tmp_path):
    """A stage (schemas/staged.py) is Tessera's when what it stages for is: `<session file>.staged-<pid>`."""
    session = tmp_path / "s"
    session.mkdir()
    for name in ("gpu.perfetto-trace", "gpu.perfetto-trace.staged-41", "layer-41.spool.staged-41"):
        (session / name).write_bytes(b"earlier")
    out = _run("--out", session, "--force", "--no-merge", "--", PYTHON, "-c", "pass")
    assert out.returncode == 0, out.stderr
    assert not list(session.glob("*.staged-*"))
    (session / "thesis.tex.staged-1").write_text("precious")
    out = _run("--out", session, "--force", "--", PYTHON, "-c", "pass")
    assert out.returncode == 1 and "holds files Tessera did not write: thesis.tex.staged-1" in out.stderr


def test_unwritable_out_is_refused_before_the_app_runs(shims, tmp_path):
    out = _run("--out", "/proc/tessera-cannot-be-here", "--", PYTHON, "-c", "print('app ran')")
    assert out.returncode == 1
    assert "cannot write there" in out.stderr and "Traceback" not in out.stderr
    assert "app ran" not in out.stdout


def test_program_that_is_not_executable_gets_a_clear_error(shims, tmp_path):
    script = tmp_path / "app.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    out = _run("--out", tmp_path / "s", "--", script)
    assert out.returncode == 1
    assert "not executable" in out.stderr and "Traceback" not in out.stderr
    missing = _run("--out", tmp_path / "s2", "--", "no-such-program-tessera")
    assert missing.returncode == 1 and "no such file on PATH" in missing.stderr


def test_driver_is_selected_without_naming_it_in_driver_variables(tessera_env):
    """A program that loads the driver named in VK_DRIVER_FILES itself would bypass the layer."""
    assert "VK_DRIVER_FILES" not in tessera_env and "VK_ICD_FILENAMES" not in tessera_env
    out = run([PYTHON, APPS / "identity_query.py"], tessera_env)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout.strip().splitlines()[-1])
    assert info["device_count"] == 1 and info["deviceName"] == "Mali-G720 (emulated)"


def test_frame_boundary_listed_with_the_device_extensions(tessera_env):
    """The layer provides VK_EXT_frame_boundary; programs look for it in the pLayerName == NULL list."""
    out = run([PYTHON, APPS / "identity_query.py"], tessera_env)
    info = json.loads(out.stdout.strip().splitlines()[-1])
    assert "VK_EXT_frame_boundary" in info["extensions"]
    without_layer = {k: v for k, v in tessera_env.items() if k != "VK_INSTANCE_LAYERS"}
    out = run([PYTHON, APPS / "identity_query.py"], without_layer)
    assert "VK_EXT_frame_boundary" not in json.loads(out.stdout.strip().splitlines()[-1])["extensions"]


def test_summary_says_loudly_when_gpu_work_came_without_the_layer(shims, tmp_path):
    app = [PYTHON, REPO / "examples" / "compute_collatz.py"]
    out = _run("--out", tmp_path / "a", "--", "env", "VK_LOADER_LAYERS_DISABLE=VK_LAYER_TESSERA_timeline", *app)
    assert out.returncode == 0, out.stderr
    warning = [line for line in out.stdout.splitlines() if line.startswith("WARNING:")]
    assert len(warning) == 1 and "arrived without the Tessera layer" in warning[0], out.stdout
    with_layer = _run("--out", tmp_path / "b", "--", *app)
    assert with_layer.returncode == 0 and "WARNING:" not in with_layer.stdout
