"""The commands: report, merge, view (served over real HTTP), lazy registration, embedded daemon, tessera run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import urllib.request

import pytest

from click.testing import CliRunner
from hostd_builders import RAW0, GpuTrace
from test_merge import build_session

from tessera.hostd.cli import merge, report, view
from tessera.hostd.embedded import EmbeddedDaemon, merge_session, summary
from tessera.hostd.view import serve
from tessera.schemas.perfetto import read_packets

HERE = __import__("pathlib").Path(__file__).resolve().parent


def test_tessera_help_imports_no_hostd_module():
    code = "import sys; from tessera.tools.cli import main\ntry: main(['--help'])\nexcept SystemExit: pass\n" \
           "print(sorted(m for m in sys.modules if m.startswith(('tessera.hostd', 'perfetto', 'cffi'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "hostd" in out and "merge" in out and "report" in out and "view" in out
    assert out.strip().splitlines()[-1] == "[]"


def test_merge_and_report_commands(tmp_path):
    build_session(tmp_path)
    r = CliRunner().invoke(report, [str(tmp_path), "--top", "2"])
    assert r.exit_code == 0, r.output
    assert "frames                      1" in r.output and "render pass" in r.output
    assert "Render pass 1920×1080, 12 draws  [t1]" in r.output
    assert (tmp_path / "merged.perfetto-trace").exists()
    r = CliRunner().invoke(report, [str(tmp_path / "merged.perfetto-trace"), "--json"])
    data = json.loads(r.output)
    assert data["submits"] == 2 and data["gpu_time_ns"]["fragment"] == 3000 and len(data["longest"]) == 7
    r = CliRunner().invoke(merge, [str(tmp_path), "-o", str(tmp_path / "m.perfetto-trace")])
    assert r.exit_code == 0 and "GPU events: 7 (5 with metadata, 2 without)" in r.output
    bad = tmp_path / "bad.perfetto-trace"
    bad.write_bytes(b"\x08garbage")
    r = CliRunner().invoke(report, [str(bad)])
    assert r.exit_code == 1 and "Traceback" not in r.output and "expected a Trace.packet" in r.output


def test_view_serves_with_the_headers_the_ui_needs(tmp_path):
    trace = tmp_path / "merged.perfetto-trace"
    trace.write_bytes(b"\x0a\x00" * 100)
    server = serve(trace, port=0)
    try:
        assert server.link == f"https://ui.perfetto.dev/#!/?url=http://127.0.0.1:{server.port}/merged.perfetto-trace" \
                              "&referrer=tessera"
        assert server.server_address[0] == "127.0.0.1"
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/merged.perfetto-trace") as resp:
            assert resp.headers["Access-Control-Allow-Origin"] == "https://ui.perfetto.dev"
            assert resp.headers["Cache-Control"] == "no-cache"
            assert resp.read() == trace.read_bytes()
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/../../etc/passwd")
            raise AssertionError("served another path")
        except urllib.error.HTTPError as e:
            assert e.code == 404
    finally:
        server.stop()


def test_view_command_prints_the_link_and_exits_after_one_fetch(tmp_path):
    trace = tmp_path / "t.perfetto-trace"
    trace.write_bytes(b"\x0a\x00" * 3)   # three empty packets: the smallest trace the UI loads
    proc = subprocess.Popen([sys.executable, "-m", "tessera.tools.cli", "view", str(trace), "--port", "0", "--once"],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("Open https://ui.perfetto.dev/#!/?url=http://127.0.0.1:")
        url = line.split("url=", 1)[1].split("&", 1)[0]
        with urllib.request.urlopen(url) as resp:
            assert resp.headers["Access-Control-Allow-Origin"] == "https://ui.perfetto.dev"
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_embedded_daemon_then_merge(tmp_path):
    import socket

    from hostd_builders import frame, hello, submit, workload

    session = tmp_path / "session"
    with EmbeddedDaemon(session) as d:
        assert d.address.startswith("unix:")
        s = socket.socket(socket.AF_UNIX)
        s.connect(d.address[5:])
        s.sendall(hello(pid=55) + workload(1, "dispatch", groups=[4, 4, 1], items=1024) + submit(1, RAW0, [1]) +
                  frame(0, RAW0 + 5))
        s.close()
    g = GpuTrace(session / "gpu.perfetto-trace", pid=55)
    g.event(RAW0, 100, "non-fragment", "compute", "t1", ["s1", "t1"])
    g.close()
    result = merge_session(session)
    assert result.events_with_metadata == 1 and result.frames == 1 and result.submits == 1
    table = summary(result)
    assert "Dispatch 4×4×1 groups (1024 items)" in table and "frames                      1" in table
    assert summary(result.output) == summary(result.summary)


FAKE_APP = textwrap.dedent('''
    """A stand-in for a Vulkan app under the layer and driver: talks to TESSERA_HOSTD, writes the GPU trace."""
    import os, socket, sys
    sys.path.insert(0, {here!r})
    from hostd_builders import GpuTrace, RAW0, BOOT0, hello, workload, submit, frame
    kind, _, path = os.environ["TESSERA_HOSTD"].partition(":")
    assert kind == "unix"
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall(hello(pid=os.getpid(), process="fake") + workload(1, "render_pass", width=64, height=64,
              draw_call_count=3) + submit(1, RAW0 + 10, [1]) + frame(0, RAW0 + 20))
    s.close()
    g = GpuTrace(os.path.join(os.environ["TESSERA_SESSION_DIR"], "gpu.perfetto-trace"), pid=os.getpid())
    g.event(BOOT0 + 30, 50, "non-fragment", "binning", "t1", ["t1"], rp=1)
    g.event(BOOT0 + 80, 70, "fragment", "main", "t1", ["t1"], rp=1)
    g.close()
    sys.exit(3)
''')


def test_tessera_run_embedded_daemon_merges_and_prints_the_summary(tmp_path):
    app = tmp_path / "fake_app.py"
    app.write_text(FAKE_APP.format(here=str(HERE)))
    session = tmp_path / "session"
    proc = subprocess.run([sys.executable, "-m", "tessera.tools.cli", "run", "--out", str(session), "--",
                           sys.executable, str(app)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr           # the app's exit code
    assert "merged trace: " + str(session / "merged.perfetto-trace") in proc.stdout
    assert "Render pass 64×64, 3 draws" in proc.stdout and "submits                     1" in proc.stdout
    names = [p.gpu_render_stage_event.name for p in read_packets(session / "merged.perfetto-trace")
             if p.HasField("gpu_render_stage_event")]
    assert names == ["Render pass 64×64, 3 draws"] * 2
    logs = list(session.rglob("*.tessera-log"))
    assert len(logs) == 1 and logs[0].parent.name.startswith("fake-")


def test_tessera_run_with_external_daemon_does_not_merge(tmp_path):
    app = tmp_path / "fake_app.py"
    app.write_text(FAKE_APP.format(here=str(HERE)))
    with EmbeddedDaemon(tmp_path / "external") as d:
        proc = subprocess.run([sys.executable, "-m", "tessera.tools.cli", "run", "--hostd", d.address, "--out",
                               str(tmp_path / "s"), "--", sys.executable, str(app)],
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert "merged trace" not in proc.stdout and not (tmp_path / "s" / "merged.perfetto-trace").exists()
    assert len(list((tmp_path / "external").rglob("*.tessera-log"))) == 1


@pytest.mark.parametrize("content, why", [
    (b"", "the file is empty"),
    (bytes(range(256)) * 4, "first byte 0x00"),
    (b"\x03\x02\x23\x07" + b"\x00" * 60, "first byte 0x03"),                  # SPIR-V's magic, little-endian
    (b"\x0a\xff\xff\xff\x7f" + b"\x00" * 10, "the first packet claims"),       # a length past the file
    (b"\x0a\x02\xff\xff", "the first packet does not parse"),
])
def test_view_refuses_what_is_not_a_trace(tmp_path, content, why):
    path = tmp_path / "x.perfetto-trace"
    path.write_bytes(content)
    r = CliRunner().invoke(view, [str(path), "--port", "0", "--once"])
    assert r.exit_code == 1 and "not a Perfetto trace" in r.output and why in r.output, r.output
    assert "Traceback" not in r.output


def test_view_checks_a_huge_file_without_reading_it_whole(tmp_path, monkeypatch):
    path = tmp_path / "big.perfetto-trace"
    with open(path, "wb") as f:          # 2 GiB, sparse: only the head is ever written
        f.write(b"\x0a\xff\xff\xff\xff\x07")
        f.truncate(2 << 30)
    reads = []
    real_open = open

    class Counting:
        def __init__(self, f):
            self.f = f

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def read(self, n=-1):
            reads.append(n)
            return self.f.read(n)

    import tessera.hostd.view as view_module
    monkeypatch.setattr(view_module, "open", lambda *a, **k: Counting(real_open(*a, **k)), raising=False)
    with pytest.raises(view_module.NotATrace, match="claims"):
        view_module.check_trace(path)
    assert reads and all(0 <= n <= view_module.FIRST_PACKET_LIMIT for n in reads)


def test_view_refuses_a_fifo_without_blocking(tmp_path):
    """Issue 22: a FIFO nobody writes blocked the open (a subprocess: a regression fails on the timeout)."""
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    r = subprocess.run([sys.executable, "-m", "tessera.tools.cli", "view", str(fifo), "--port", "0", "--once"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "not a regular file (a FIFO)" in r.stderr and "Traceback" not in r.stderr, r.stderr
