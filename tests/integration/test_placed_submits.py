"""icd/placed_submits.py checked (TESSERA_C_PLACEMENT=check): the driver's C places each submit it can, writes nothing
and changes nothing, and the timeline places the same submit again from the same state and compares the packets,
byte for byte, start times included, and the state after it (counters, the GPU's free times, the queue's class
floors and ends, the times of the semaphores it signals) with what C would have left. Two runs cannot be compared so
(their host times differ); this compares C with Python inside one run. The frame loops of bench/record_cost.c under
`tessera run` (the driver and the layer, whose t<tag> labels are the plans' slots): small fills, dispatches after
push descriptors, whose starts follow the host's submit times; 136 dispatches of 2 µs per frame, which outlast the
host's frame, so the starts follow the state C took at the grant, and the same chained by a binary semaphore each
submit signals and the next waits for, and by a timeline semaphore (each submit waits for the value the previous one
signalled and signals the next, the host waits for it), and (the driver alone) each submit inside two nested queue
labels of the application's, which C keeps as the labels on entry; labelled render passes, by dynamic rendering and
as render pass objects of two subpasses; 16 and 40 command buffers per submit; 4 batches per submit (compute and
transfer batches in turn, on two of the emulated GPU's queues), apart, or each waiting for a binary semaphore or a
timeline value the one before signals (which the timeline has by then: 72 timeline signals, past the 64 kept); 4
secondaries re-recorded and executed by a primary (its events name the secondaries' command buffers).
A start moved by 1 ns, or a semaphore's signal by 1 µs, in the C is found."""
from __future__ import annotations

import os
import re

import pytest
from integration_support import REPO, run

TESSERA = REPO / ".venv" / "bin" / "tessera"
RECORD_COST = REPO / "build" / "bench" / "record_cost"
FRAMES = 24
_CHECKED = re.compile(r"icd INFO: submits placed in C and checked: (\d+), differing: (\d+)")
_UNDER_THE_LAYER = [("8 fills", ["frame", FRAMES, 1, 8, "fill"]),
                    ("8 dispatches after push descriptors", ["frame", FRAMES, 1, 8, "pushed"]),
                    ("136 dispatches", ["frame", FRAMES, 1, 136, "dispatch"]),
                    ("chained by a semaphore", ["frame", FRAMES, 1, 136, "dispatch", "chained"]),
                    ("chained by a timeline semaphore", ["frame", FRAMES, 1, 136, "dispatch", "timeline"]),
                    ("render passes", ["passframe", FRAMES, 1]),
                    ("render passes of two subpasses", ["passframe", FRAMES, 1, "subpasses"]),
                    ("16 buffers", ["buffers", FRAMES, 1]),
                    ("40 buffers", ["buffers", FRAMES, 1, 40]),
                    ("4 batches", ["buffers", FRAMES, 1, 4, "batches"]),
                    ("4 batches, each waiting for the one before", ["buffers", FRAMES, 1, 4, "linked"]),
                    ("4 batches, each waiting for a timeline value the one before signals",
                     ["buffers", FRAMES, 1, 4, "timeline-linked"]),
                    ("4 secondaries executed by a primary", ["buffers", FRAMES, 1, 4, "secondaries"]),
                    ("4 secondaries recorded once", ["buffers", FRAMES, 1, 4, "prerecorded"])]
# (id, `tessera run` options, record_cost's arguments)
CASES = [(i, [], args) for i, args in _UNDER_THE_LAYER] + [
    ("inside queue labels, the driver alone", ["--no-layer"], ["frame", FRAMES, 1, 8, "dispatch", "labelled"])]


@pytest.mark.parametrize("options,args", [pytest.param(o, a, id=i) for i, o, a in CASES])
def test_submits_c_places_are_placed_the_same_by_the_timeline(options, args, shims, tmp_path) -> None:
    env = {**os.environ, "TESSERA_LOG": "info", "TESSERA_C_PLACEMENT": "check"}
    out = run([TESSERA, "run", *options, "--out", tmp_path / "session", "--", RECORD_COST, *args], env)
    assert out.returncode == 0, out.stdout + out.stderr
    found = _CHECKED.search(out.stderr)
    assert found, out.stderr
    checked, differing = int(found.group(1)), int(found.group(2))
    # every frame but the first few (the first recorded, the first read and planned, a grant backing off)
    assert checked >= FRAMES - 4 and differing == 0, (checked, differing)


@pytest.mark.parametrize("options", [pytest.param(["--no-layer"], id="the driver alone"),
                                     pytest.param([], id="under the layer")])
def test_vkcube_buffers_submitted_again_with_semaphores_are_placed_the_same(options, shims, tmp_path,
                                                                           xvfb_display) -> None:
    """vkcube: pre-recorded buffers submitted again, each submit waiting for the swapchain's acquire semaphore and
    signalling the present's. Their plans are attached to the recordings themselves (tessera_cb_attach, by the
    serial the ledger gives), and C places them as the timeline does; under the layer, each submit inside the
    s<submitID> queue label the layer wraps it in (a label C keeps on entry)."""
    env = {**os.environ, "TESSERA_LOG": "info", "TESSERA_C_PLACEMENT": "check", "DISPLAY": xvfb_display}
    out = run([TESSERA, "run", *options, "--out", tmp_path / "session", "--", "vkcube", "--c", FRAMES], env)
    assert out.returncode == 0, out.stdout + out.stderr
    found = _CHECKED.search(out.stderr)
    assert found, out.stderr
    checked, differing = int(found.group(1)), int(found.group(2))
    assert checked >= FRAMES - 8 and differing == 0, (checked, differing)
