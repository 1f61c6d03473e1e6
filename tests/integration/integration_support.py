"""Helpers for the integration tests (imported by name: the tests' folder is on sys.path)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def lavapipe_manifest() -> str:
    from tessera.icd.backend import default_manifest

    return str(default_manifest())


def run(argv, env, timeout=300, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], env=env, capture_output=True, text=True, timeout=timeout, **kw)


_MADE_IN_C = re.compile(r"\] (layer|icd) INFO: records made in C so far: (.*)")


def records_made_in_c(stderr: str) -> dict[str, dict[str, int]]:
    """Per shim ("layer", "icd"), the records it made in C, per command, as it says at vkDestroyDevice
    with TESSERA_LOG=info (vkapi/recorder.py Recorder.counts)."""
    return {m.group(1): {name: int(n) for name, n in re.findall(r"(vk\w+) (\d+)", m.group(2))}
            for m in _MADE_IN_C.finditer(stderr)}


_SUBMIT_PATHS = re.compile(r"\] (layer|icd) INFO: submits so far: (\d+) made in C, (\d+) through Python")


def run_submit_path(session: Path, app: Path, ok: str, c_submits: bool) -> tuple[subprocess.CompletedProcess, dict]:
    """Run the Python `app` under the layer and the driver into `session` (spooled; TESSERA_LOG=info), its submits
    through the shims' C path or, unless `c_submits`, all through Python (TESSERA_C_SUBMITS=0); check that it
    printed `ok`. Returns the process and, per shim, (submits made in C, through Python) as it says at
    vkDestroyDevice."""
    from tessera.tools.launch import LaunchConfig, environment

    env = dict(environment(LaunchConfig(session)), TESSERA_LOG="info")
    env.pop("TESSERA_HOSTD", None)
    if not c_submits:
        env["TESSERA_C_SUBMITS"] = "0"
    proc = run([PYTHON, app], env)
    assert proc.returncode == 0 and ok in proc.stdout, proc.stdout + proc.stderr
    return proc, {m.group(1): (int(m.group(2)), int(m.group(3))) for m in _SUBMIT_PATHS.finditer(proc.stderr)}


def run_recorded(session: Path, argv: list, ok: str, c_recording: bool = True,
                 gpu: str | None = None) -> tuple[dict, list]:
    """Run `argv` under the layer and the driver into `session` (spooled; TESSERA_LOG=info; with
    TESSERA_C_RECORDING=0 unless `c_recording`; on `gpu`, default the default GPU), check that it
    printed `ok` and raised nothing, and merge. Returns (records_made_in_c, the merged GPU events as
    (name, duration, {arg: value}) without the handles.* args, which differ between runs)."""
    from tessera.hostd.embedded import merge_session
    from tessera.schemas import perfetto as pf
    from tessera.tools.launch import LaunchConfig, environment

    session.mkdir(parents=True, exist_ok=True)
    env = dict(environment(LaunchConfig(session, gpu=gpu)), TESSERA_LOG="info")
    env.pop("TESSERA_HOSTD", None)
    if not c_recording:
        env["TESSERA_C_RECORDING"] = "0"
    proc = run([PYTHON, *argv], env)
    assert proc.returncode == 0 and ok in proc.stdout, proc.stdout + proc.stderr
    assert "exception" not in proc.stderr.lower(), proc.stderr
    result = merge_session(session)
    assert result.events_without_metadata == 0 and result.metadata_without_events == 0, result.examples
    packets = list(pf.read_packets(result.output))
    assert pf.check_render_stages(packets).problems == []
    events = [(p.gpu_render_stage_event.name, p.gpu_render_stage_event.duration,
               {d.name: d.value for d in p.gpu_render_stage_event.extra_data if not d.name.startswith("handles.")})
              for p in packets if p.HasField("gpu_render_stage_event")]
    return records_made_in_c(proc.stderr), events
