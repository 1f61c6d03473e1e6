"""VK_ARM_shader_core_builtins on the emulated Mali: a real shader reads the built-ins,
the driver lowers them for the backend, and the values follow the documented model
(spirv/passes/core_builtins.py), computed here by hand from the GPU profile."""
from __future__ import annotations

import json

import pytest
from integration_support import PYTHON, REPO, run

from tessera.icd.profiles import PROFILES

APP = REPO / "tests" / "integration" / "apps" / "core_builtins.py"
GROUPS, LOCAL = 20, 64


@pytest.mark.parametrize("gpu", ["mali-g720", "mali-g78"])
def test_core_builtins_follow_the_profile(gpu, tessera_env):
    p = PROFILES[gpu]
    out = run([PYTHON, APP, str(GROUPS)], dict(tessera_env, TESSERA_GPU=gpu))
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["properties"] == [p.shader_cores, p.warps_per_core, (1 << p.shader_cores) - 1]
    for invocation, values in enumerate(result["values"]):
        group, local = divmod(invocation, LOCAL)
        expected = [p.shader_cores, p.shader_cores - 1, p.warps_per_core - 1,
                    group % p.shader_cores, (local // p.warp_width) % p.warps_per_core]
        assert values == expected, invocation
