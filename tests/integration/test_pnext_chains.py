"""The pNext chains three public test programs broke the shims with (issue #23, deliverable 2), through
the real loader, layer, driver and lavapipe: VkBufferUsageFlags2CreateInfo in vkCreateBuffer,
VkRenderPassMultiviewCreateInfo in vkCreateRenderPass (read with --regions), VkFrameBoundaryTensorsARM
behind VkFrameBoundaryEXT in vkQueueSubmit. Before, each hook raised `ffi.error: undefined type name`
(reported, the call forwarded: the layer then passed the frame boundary it emulates to the driver).
tests/vkapi/test_pnext_walkers.py covers every other sType at unit level."""
from __future__ import annotations

import re

import pytest
from integration_support import PYTHON, REPO, run

APP = REPO / "tests" / "integration" / "apps" / "pnext_chains.py"


@pytest.mark.parametrize("regions", [None, "all"], ids=["plain", "regions"])
def test_public_programs_chains_reach_no_undeclared_type(shims, tmp_path, regions):
    from tessera.tools.launch import LaunchConfig, environment

    env = environment(LaunchConfig(tmp_path / "session", regions=regions))
    out = run([PYTHON, APP], env)
    assert out.returncode == 0 and "pnext chains: ok" in out.stdout, out.stdout + out.stderr
    assert "undefined type name" not in out.stderr, out.stderr
    failed = re.findall(r"ERROR: exception in (vkCreateBuffer|vkCreateRenderPass|vkQueueSubmit)\b.*", out.stderr)
    assert not failed, out.stderr
