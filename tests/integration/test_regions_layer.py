"""`tessera run --regions` (issue #13): the layer enables the extension on an unmodified
application (examples/render_passes.py, whose pixel checks still pass), hides it, attaches capture to
every render pass instance, and streams schema-valid REGIONS messages whose grids are what the
driver measured; `tessera regions` renders a PNG per instance and counter and prints the grids."""
from __future__ import annotations

import json
import subprocess

import pytest
from integration_support import PYTHON, REPO

TESSERA = [str(REPO / ".venv" / "bin" / "tessera")]


@pytest.fixture(scope="module")
def session(shims, tmp_path_factory):
    out = tmp_path_factory.mktemp("regions-layer") / "session"
    proc = subprocess.run([*TESSERA, "run", "--regions", "--out", str(out), "--", str(PYTHON),
                           str(REPO / "examples" / "render_passes.py")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "render_passes: OK" in proc.stdout + proc.stderr
    return out


def frames(session):
    from tessera.schemas.frames import MessageType
    from tessera.schemas.logfile import read_frames
    from tessera.schemas.messages import problems

    out = []
    for log in session.rglob("*.tessera-log"):
        for f in read_frames(log):
            if f.type == MessageType.REGIONS:
                payload = json.loads(f.body)
                assert problems(f.type, payload) == []
                out.append((f.sequence, f.tag, payload))
    return out


def test_every_render_pass_instance_streams_regions(session):
    found = frames(session)
    # render_passes.py: a 2-subpass render pass, dynamic rendering, a pass suspended/resumed (captured once)
    assert len(found) >= 3
    for submit, tag, p in found:
        assert submit >= 1 and tag >= 1 and p["region_size"] == [32, 32]
        assert [c["name"] for c in p["counters"]][0] == "Fragment threads"
        x, y, w, h = p["render_area"]
        for array in p["arrays"]:
            assert len(array["values"]) == len(p["counters"])
            assert len(array["values"][0]) == -(-h // 32) and len(array["values"][0][0]) == -(-w // 32)
    subpasses = {a["subpass"] for _, _, p in found for a in p["arrays"]}
    assert subpasses == {0, 1}
    threads = sum(v for _, _, p in found for a in p["arrays"] for row in a["values"][0] for v in row)
    assert threads > 0


def test_regions_command_writes_heatmaps_and_json(session):
    proc = subprocess.run([*TESSERA, "regions", str(session)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    pictures = [line for line in proc.stdout.splitlines() if line.endswith(".png")]
    assert pictures and all((session / "regions").joinpath(p.rsplit("/", 1)[-1]).exists() for p in pictures)
    from PIL import Image

    assert Image.open(pictures[0]).size[0] > 64
    proc = subprocess.run([*TESSERA, "regions", str(session), "--json", "--counter", "fragment threads"],
                          capture_output=True, text=True, timeout=120)
    data = json.loads(proc.stdout)
    assert all(len(a["counters"]) == 1 and a["counters"][0]["name"] == "Fragment threads"
               for entry in data for a in entry["arrays"])
    grids = {(e["tag"], e["submit"], a["subpass"], a["layer"]): a["counters"][0]["grid"] for e in data
             for a in e["arrays"]}
    assert grids == {(t, s, a["subpass"], a["layer"]): a["values"][0] for s, t, p in frames(session)
                     for a in p["arrays"]}
