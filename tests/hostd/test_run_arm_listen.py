"""`tessera run --arm-listen`: the run's embedded daemon also accepts Arm's GPU Timeline layer, into
the run's session folder, and the run's merge joins its records with the GPU trace."""
from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import arm_fixtures as af
import pytest
from click.testing import CliRunner
from hostd_builders import BOOT0, RAW0, GpuTrace

from tessera.hostd.arm_listener import parse_arm_address
from tessera.hostd.daemon import DaemonError
from tessera.hostd.embedded import EmbeddedDaemon, merge_session
from tessera.schemas.perfetto import read_packets
from tessera.tools.cmd_run import run

HERE = Path(__file__).resolve().parent


def _names(trace: Path) -> dict[str, str]:
    out = {}
    for p in read_packets(trace):
        if p.HasField("gpu_render_stage_event"):
            e = p.gpu_render_stage_event
            out[next(d.value for d in e.extra_data if d.name == "Labels")] = e.name
    return out


def test_embedded_daemon_takes_arm_records_into_its_session(tmp_path):
    name = f"tessera-test-{uuid.uuid4().hex[:12]}"
    session = tmp_path / "session"
    with EmbeddedDaemon(session, arm_listen=[parse_arm_address(f"abstract:{name}")]) as d:
        assert [str(a.host) for a in d.arm_bound] == [name]
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect("\0" + name)
        client = af.ArmClient(s)
        endpoint = client.lookup()["GPUTimeline"]
        for record in (af.header(), af.device(0xD1, 55, 51, 0, 3, "Mali-G720"), af.submit(RAW0 + 1000, 0xD1, 7),
                       af.dispatch(1, 4, 2, 1, labels=["Blur"])):
            client.send(endpoint, record)
        s.close()
    assert len(list(session.rglob("session.arm-log"))) == 1
    with pytest.raises(ConnectionRefusedError):         # stopped: the name is free again, nobody listens
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect("\0" + name)
    g = GpuTrace(session / "gpu.perfetto-trace", pid=55)
    g.event(BOOT0 + 1300, 100, "non-fragment", "compute", "t1")
    g.close()
    r = merge_session(session)
    assert r.events_with_metadata == 1 and _names(r.output) == {"t1": "Blur"}


def test_an_arm_address_in_use_fails_at_start_and_the_first_daemon_carries_on(tmp_path):
    address = parse_arm_address(f"abstract:tessera-test-{uuid.uuid4().hex[:12]}")
    with EmbeddedDaemon(tmp_path / "a", arm_listen=[address]) as first:
        second = EmbeddedDaemon(tmp_path / "b", arm_listen=[address])
        with pytest.raises(DaemonError, match="cannot listen on abstract:"):
            second.start()
        s = socket.socket(socket.AF_UNIX)
        s.connect(first.address[5:])                    # the first daemon still accepts our layer
        s.close()


FAKE_ARM_APP = textwrap.dedent('''
    """A stand-in for an app under Arm's GPU Timeline layer and the emulated driver."""
    import os, socket, sys
    sys.path.insert(0, {here!r})
    import arm_fixtures as af
    from hostd_builders import GpuTrace, RAW0, BOOT0
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\\0" + {name!r})
    client = af.ArmClient(s)
    endpoint = client.lookup()["GPUTimeline"]
    for record in (af.header(), af.device(0xD1, os.getpid(), 51, 0, 3, "Mali-G720"),
                   af.submit(RAW0 + 1000, 0xD1, 7), af.renderpass(1, 640, 480, 3, 1, labels=["Shadow pass"]),
                   af.buffer_transfer(2, 256, 1)):
        client.send(endpoint, record)
    s.close()
    g = GpuTrace(os.path.join(os.environ["TESSERA_SESSION_DIR"], "gpu.perfetto-trace"), pid=os.getpid())
    g.event(BOOT0 + 1300, 100, "non-fragment", "binning", "t1", rp=1)
    g.event(BOOT0 + 1400, 100, "fragment", "main", "t1", rp=1)
    g.event(BOOT0 + 1600, 100, "transfer", "fill buffer", "t2")
    g.close()
''')


def test_tessera_run_arm_listen_merges_arms_records(tmp_path):
    name = f"tessera-test-{uuid.uuid4().hex[:12]}"
    app = tmp_path / "fake_arm_app.py"
    app.write_text(FAKE_ARM_APP.format(here=str(HERE), name=name))
    session = tmp_path / "session"
    proc = subprocess.run([sys.executable, "-m", "tessera.tools.cli", "run", "--no-layer", "--arm-listen",
                           f"abstract:{name}", "--out", str(session), "--", sys.executable, str(app)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"Arm GPU Timeline layer accepted on abstract:{name}" in proc.stderr
    assert "merged trace: " in proc.stdout and "render pass" in proc.stdout
    assert _names(session / "merged.perfetto-trace") == {"t1": "Shadow pass", "t2": "Fill buffer, 256 bytes"}
    assert [p.parent.name.startswith("arm-gpu-timeline-") for p in session.rglob("session.arm-log")] == [True]


@pytest.mark.parametrize("args, message", [
    (["--hostd", "unix:/tmp/x.sock", "--arm-listen", "abstract"], "with --hostd, start that daemon with --arm-listen"),
    (["--arm-listen", "tcp:127.0.0.1:0"], "give a port"),
    (["--arm-listen", "abstract:"], "expected abstract:NAME"),
])
def test_run_arm_listen_usage_errors(args, message):
    r = CliRunner().invoke(run, [*args, "--", "true"])
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output
