"""An application killed mid-run: the driver's trace stays readable and holds every
completed submit; the layer's spool keeps everything written before the kill."""
from __future__ import annotations

import signal
import subprocess

from integration_support import PYTHON, REPO

from tessera.schemas import frames as fr
from tessera.schemas import perfetto as pf

APP = REPO / "tests" / "integration" / "apps" / "submit_loop.py"


def test_killed_app_leaves_a_valid_trace_with_every_completed_submit(tessera_env, tmp_path):
    session = tmp_path / "session"
    proc = subprocess.Popen([PYTHON, str(APP), "100000"], env=tessera_env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    completed = 0
    for line in proc.stdout:
        completed = int(line.split()[1])
        if completed >= 25:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert completed == 25

    packets = list(pf.read_packets(session / "gpu.perfetto-trace"))   # raises if a packet were cut
    assert pf.check_render_stages(packets).problems == []
    fills = [p.gpu_render_stage_event for p in packets if p.HasField("gpu_render_stage_event")]
    assert len(fills) >= completed                     # each completed submit's transfer is there
    assert len({e.submission_id for e in fills}) >= completed

    spool = next(session.glob("layer-*.spool"))
    decoder = fr.FrameDecoder()
    frames = decoder.feed(spool.read_bytes())          # whole frames up to the kill
    submits = [f for f in frames if f.type == fr.MessageType.SUBMIT]
    assert len(submits) >= completed - 3               # the sender thread may trail by a batch or two
