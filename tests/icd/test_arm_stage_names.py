"""Every render stage the emulated driver can write is one Arm's own trace reader accepts
(issue #15 item 1: lglpy's raw_trace.py STAGE_REMAP rejected 'copy image to buffer', 'copy
buffer to image', 'update buffer' and 'tensor copy'); the finer kind stays in extra_data."""
from __future__ import annotations

from tessera.icd import trace
from tessera.vkapi.transfers import TRANSFERS

# The stage names Arm's reader knows (FACTS.md, from libGPULayers lglpy/timeline/data/raw_trace.py).
ARM_STAGES = {
    "clear image", "copy image", "blit image", "resolve image", "generate mipmap", "copy buffer", "fill buffer",
    "copy query", "compute", "trace_rays", "non-fragment", "advanced geometry", "vertex", "binning", "fragment",
    "main", "acceleration structure 'fast build' build", "acceleration structure 'fast trace' build",
    "acceleration structure copy to memory", "acceleration structure copy from memory",
    "acceleration structure update",
}


def test_every_interned_stage_is_an_arm_stage():
    assert set(trace.STAGES) <= ARM_STAGES


def test_every_transfer_kind_maps_to_an_arm_stage():
    """The finer kinds the transfer table (vkapi/transfers.py) and the tensor copies produce."""
    import re
    from pathlib import Path

    source = Path(TRANSFERS["vkCmdCopyBuffer"].__code__.co_filename).read_text()
    kinds = set(re.findall(r'"((?:copy|fill|update|clear|blit|resolve)[a-z ]*)"', source)) | {"tensor copy"}
    assert {"copy buffer to image", "copy image to buffer", "update buffer"} <= kinds
    for kind in kinds:
        assert trace.ARM_STAGE.get(kind, kind) in trace.STAGES, kind
