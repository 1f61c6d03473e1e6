"""`tessera run --regions` (issue #13): the layer enables the extension on an unmodified
application (examples/render_passes.py, whose pixel checks still pass), hides it, attaches capture to
every render pass instance, and streams schema-valid REGIONS messages whose grids are what the
driver measured; `tessera regions` renders a PNG per instance and counter and prints the grids."""
from __future__ import annotations

import json
import subprocess
import sys

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
    assert "Traceback" not in proc.stderr, proc.stderr   # the DEVICE message was once lost to one (#23)
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


def test_device_message_is_sent_under_regions(session):
    """A --regions run describes its device (a traceback in vkCreateDevice once dropped it, #23)."""
    from tessera.schemas.frames import MessageType
    from tessera.schemas.logfile import read_frames

    devices = [json.loads(f.body) for log in session.rglob("*.tessera-log") for f in read_frames(log)
               if f.type == MessageType.DEVICE]
    # described at vkCreateDevice, and again with its allocations at vkDestroyDevice (layer/allocations.py)
    assert [d["name"] for d in devices] == ["Mali-G720 (emulated)"] * 2 and "allocations" in devices[-1]


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


# ---- examples/overdraw.py (in make demo): its streamed grids equal its own numpy reference ----------
@pytest.fixture(scope="module")
def overdraw(shims, tmp_path_factory):
    out = tmp_path_factory.mktemp("regions-overdraw") / "session"
    proc = subprocess.run([*TESSERA, "run", "--regions", "--out", str(out), "--", str(PYTHON),
                           str(REPO / "examples" / "overdraw.py")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "overdraw: OK" in proc.stdout + proc.stderr
    return out


def test_overdraw_example_grids_equal_its_numpy_reference(overdraw):
    """One render pass instance (labelled "overdraw scene", 160x100: a 5x4 grid whose bottom row is
    4 pixels high): fragment threads and covered samples = the draws' coverage summed per region
    (the 5-deep stack, the half-covered region), killed fragments = the checkerboard's discarded
    cells, tile write-back = 4 bytes per stored RGBA8 pixel."""
    import numpy as np

    sys.path.insert(0, str(REPO / "examples"))
    import overdraw as example

    found = frames(overdraw)
    assert len(found) == 1
    submit, tag, p = found[0]
    assert p["labels"] == [example.LABEL] and p["render_area"] == [0, 0, example.W, example.H]
    assert p["region_size"] == [32, 32] and len(p["arrays"]) == 1
    grids = {c["name"]: np.array(v) for c, v in zip(p["counters"], p["arrays"][0]["values"])}
    threads = example.fragment_threads()
    assert grids["Fragment threads"].shape == (4, 5)
    assert (grids["Fragment threads"] == threads).all() and threads.max() == 5 * 32 * 32
    assert (grids["Covered samples"] == threads).all()
    assert (grids["Killed fragments"] == example.killed_fragments()).all()
    assert grids["Killed fragments"].sum() == 32 * 32 * 2
    stored = example.per_region(np.ones((example.H, example.W), dtype=np.int64)) * 4
    assert (grids["Tile write-back bytes"] == stored).all()


# ---- the layer drives the extension: the application does not see it ------------------------------
def test_extension_hidden_from_the_application_under_regions(shims, tmp_path):
    """Under --regions the layer enables VK_ARM_performance_counters_by_region itself and removes it
    from the device's extension list the application reads; without --regions the same layer
    passes the driver's list through, extension included."""
    from integration_support import run

    from tessera.tools.launch import LaunchConfig, environment

    def extensions(regions: str | None) -> list[str]:
        env = environment(LaunchConfig(tmp_path / f"session-{regions}", regions=regions))
        out = run([PYTHON, REPO / "tests" / "integration" / "apps" / "identity_query.py"], env)
        assert out.returncode == 0, out.stdout + out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])["extensions"]

    assert "VK_ARM_performance_counters_by_region" in extensions(None)
    hidden = extensions("all")
    assert "VK_ARM_performance_counters_by_region" not in hidden
    assert "VK_EXT_frame_boundary" in hidden     # the rest of the list is still there


def test_overdraw_merge_adds_region_args_and_heatmaps_linked_from_report(overdraw):
    """The merge (run by tessera run) puts max / mean / hottest region per counter on the render
    pass's GPU slices and writes every heatmap into SESSION/regions/ without `tessera regions`;
    `tessera report` lists them (text and --json)."""
    import numpy as np

    from tessera.schemas import perfetto as pf

    sys.path.insert(0, str(REPO / "examples"))
    import overdraw as example

    threads, killed = example.fragment_threads(), example.killed_fragments()
    passes = [p.gpu_render_stage_event for p in pf.read_packets(overdraw / "merged.perfetto-trace")
              if p.HasField("gpu_render_stage_event") and p.gpu_render_stage_event.name == example.LABEL]
    assert len(passes) == 2                                  # binning and main phases of the one instance
    for e in passes:
        got = json.loads(pf.extra(e, "Regions Fragment threads"))
        hottest = np.unravel_index(np.argmax(threads), threads.shape)   # first maximum, row-major
        assert got == {"max": int(threads.max()), "mean": round(float(threads.mean()), 2),
                       "hottest": [int(hottest[1]), int(hottest[0])], "subpass": 0, "layer": 0}
        assert json.loads(pf.extra(e, "Regions Killed fragments"))["max"] == int(killed.max())
        assert pf.extra(e, "Regions heatmaps") == f"regions/t{pf.extra(e, 'tag')}-s1-*.png"
    pictures = sorted((overdraw / "regions").glob("*.png"))
    assert len(pictures) == 10                               # one per counter of the one array
    report = subprocess.run([*TESSERA, "report", str(overdraw)], capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    assert all(str(p) in report.stdout for p in pictures)
    report = subprocess.run([*TESSERA, "report", "--json", str(overdraw)], capture_output=True, text=True,
                            timeout=120)
    assert json.loads(report.stdout)["heatmaps"] == [str(p) for p in pictures]
