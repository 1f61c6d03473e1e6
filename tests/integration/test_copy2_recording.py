"""The *2 transfers (vkCmdCopyBuffer2, vkCmdCopyImage2, vkCmdBlitImage2, vkCmdResolveImage2,
vkCmdCopyBufferToImage2, vkCmdCopyImageToBuffer2) recorded in C by both shims (vkapi/recorder.py,
the I code), through the real loader, the emulated driver, the layer and lavapipe.

examples/transfers.py runs twice: with the original commands and with --copy2, which records the
same regions through the *2 commands. Both runs check every byte the backend wrote (the C path
forwards the application's own struct), and the merged traces must be the same but for the
command names and handle addresses: names, durations, label stacks and tags of the driver's GPU
events, and the layer's metadata (subtype, bytes, pixels, regions). The originals' C path was
checked against their Python hooks when it came; the *2 commands' Python hooks size a transfer
with the same table (vkapi/transfers.py), so equal traces are the *2 Python path's trace.
With TESSERA_LOG=info each shim says at vkDestroyDevice which records it made in C: every *2
command is among them.
"""
from __future__ import annotations

from collections import Counter

import pytest
from integration_support import REPO, run_recorded

APP = REPO / "examples" / "transfers.py"
ORIGINAL = {"vkCmdCopyBuffer2": "vkCmdCopyBuffer", "vkCmdCopyImage2": "vkCmdCopyImage",
            "vkCmdBlitImage2": "vkCmdBlitImage", "vkCmdResolveImage2": "vkCmdResolveImage",
            "vkCmdCopyBufferToImage2": "vkCmdCopyBufferToImage", "vkCmdCopyImageToBuffer2": "vkCmdCopyImageToBuffer"}
# examples/transfers.py, by hand (as in test_end_to_end.py): one copy of 2 regions (512 + 100 bytes), a
# buffer->image copy of 2 regions (16x8 + 8x8), a 16x16 image copy, a blit to 32x32, a 32x32 resolve,
# the read-backs of A, B, R (32x32) and C (64x64); fills, update and clears have no *2 variant.
EXPECTED = {"Fill buffer, 4032 bytes": 1, "Copy buffer, 612 bytes": 1, "Fill buffer, 256 bytes": 1,
            "Update buffer, 128 bytes": 1, "Clear image, 1024 pixels": 3, "Clear image, 4096 pixels": 1,
            "Copy buffer to image, 192 pixels": 1, "Copy image, 256 pixels": 1, "Blit image, 1024 pixels": 1,
            "Resolve image, 1024 pixels": 1, "Copy image to buffer, 1024 pixels": 3,
            "Copy image to buffer, 4096 pixels": 1}
COPIES_2 = {"vkCmdCopyBuffer2": 1, "vkCmdCopyBufferToImage2": 1, "vkCmdCopyImage2": 1, "vkCmdBlitImage2": 1,
            "vkCmdResolveImage2": 1, "vkCmdCopyImageToBuffer2": 4}


def _session(tmp_path_factory, copy2: bool) -> dict:
    d = tmp_path_factory.mktemp("copy2" if copy2 else "copy") / "session"
    made, events = run_recorded(d, [APP, *(["--copy2"] if copy2 else [])], "transfers: OK")
    out = []
    for name, duration, extra in events:
        extra["command"] = ORIGINAL.get(extra.get("command"), extra.get("command"))
        out.append((name, duration, tuple(sorted(extra.items()))))
    return {"made": made, "events": out}


@pytest.fixture(scope="module")
def runs(shims, tmp_path_factory) -> dict[bool, dict]:
    return {copy2: _session(tmp_path_factory, copy2) for copy2 in (False, True)}


def test_both_shims_record_every_2_transfer_in_c(runs):
    for shim in ("layer", "icd"):
        made = runs[True]["made"][shim]
        assert {name: made.get(name) for name in COPIES_2} == COPIES_2, (shim, made)
        assert not set(made) & set(ORIGINAL.values()), made   # no original copy in the --copy2 run
        made = runs[False]["made"][shim]
        assert {name: made.get(ORIGINAL[name]) for name in COPIES_2} == COPIES_2, (shim, made)


def test_the_2_transfers_give_the_trace_of_the_originals(runs):
    copy, copy2 = runs[False]["events"], runs[True]["events"]
    assert Counter(name for name, _, _ in copy2) == EXPECTED
    assert copy2 == copy   # names, durations, labels, tags and metadata, in order
    tags = [dict(extra)["tag"] for _, _, extra in copy2]
    assert [dict(extra)["Label stack"] for _, _, extra in copy2] == [f"t{t}" for t in tags]
    assert len(set(tags)) == len(tags) == sum(EXPECTED.values())
