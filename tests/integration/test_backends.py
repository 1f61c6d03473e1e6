"""The emulated Mali over each lavapipe backend, through `tessera run --backend` and the real loader.

The default backend (`default_manifest()`: on Debian 12 the private Mesa 25 copy that `make setup`
extracts) and the system's lavapipe (Mesa 22.3 on Debian 12, found by glob) both run
examples/compute_collatz.py; the emulated device reports each backend's own apiVersion (1.4.x on
Mesa 25, 1.3.x on Mesa 22.3), the emulated driver's own driverVersion (never the backend's packed
number) and names the backend in driverInfo. What each backend gives: docs/backends.md.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from integration_support import PYTHON, REPO, run

from tessera.icd.backend import BackendError, default_manifest, private_manifest, system_manifest
from tessera.icd.profiles import DRIVER_RELEASE, PROFILES
from tessera.icd.vulkan_profile import load
from tessera.tools.backend_setup import CODENAME, os_codename
from tessera.tools.doctor import backend_env, probe

TESSERA = REPO / ".venv/bin/tessera"


def _manifest(which: str) -> Path:
    try:
        return default_manifest() if which == "default" else system_manifest()
    except BackendError as e:
        pytest.skip(str(e))


def _api(version: int) -> tuple[int, int]:
    return (version >> 22) & 0x7F, (version >> 12) & 0x3FF


def _summary(text: str) -> dict[str, str]:
    return dict(re.findall(r"^\s*(\w+)\s*= (.*)$", text, re.M))


@pytest.mark.parametrize("which", ["default", "system"])
def test_example_and_identity_on_backend(which, shims, tmp_path):
    manifest = _manifest(which)
    backend = probe(backend_env(manifest))          # the backend alone, through the loader

    out = run([TESSERA, "run", "--no-merge", "--out", tmp_path / "info", "--backend", manifest, "--",
               "vulkaninfo", "--summary"], None)
    assert out.returncode == 0, out.stdout + out.stderr
    mali = _summary(out.stdout)
    assert mali["deviceName"] == "Mali-G720 (emulated)"
    # the device profile's apiVersion, lowered to the backend's (icd/device_clamp.py)
    major, minor = _api(min(backend["apiVersion"], load(PROFILES["mali-g720"].vulkan_profile()).api_version))
    assert mali["apiVersion"].startswith(f"{major}.{minor}."), (mali["apiVersion"], backend["apiVersion"])
    assert mali["driverVersion"] == f"{DRIVER_RELEASE[0]}.{DRIVER_RELEASE[1]}.0"   # the emulated driver's own
    assert backend["driverInfo"] in mali["driverInfo"]                              # the backend, named

    out = run([TESSERA, "run", "--out", tmp_path / "collatz", "--backend", manifest, "--",
               PYTHON, REPO / "examples/compute_collatz.py"], None)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("compute_collatz: OK"), out.stdout
    assert "on Mali-G720 (emulated)" in out.stdout
    assert "Traceback" not in out.stderr


@pytest.mark.skipif(os_codename() != CODENAME or private_manifest() is None,
                    reason="the private Mesa 25 backend exists only on Debian 12 after `make setup`")
def test_debian12_default_is_mesa25_and_system_is_mesa22():
    default, system = probe(backend_env(default_manifest())), probe(backend_env(system_manifest()))
    assert default_manifest() == private_manifest()
    assert "Mesa 25." in default["driverInfo"] and _api(default["apiVersion"]) == (1, 4)
    assert "Mesa 22." in system["driverInfo"] and _api(system["apiVersion"]) == (1, 3)
    for ext in ("VK_KHR_maintenance5", "VK_EXT_shader_object", "VK_KHR_ray_tracing_pipeline", "VK_KHR_ray_query",
                "VK_KHR_acceleration_structure"):
        assert ext in default["extensions"] and ext not in system["extensions"], ext


@pytest.mark.parametrize("which", ["default", "system"])
def test_maintenance5_structs_reach_a_backend_that_knows_them(which, shims, tmp_path):
    """Device-creation pNext structs are stripped only when the backend lacks them (icd/device.py
    strip_chain): with maintenance5 (Mesa 25) its feature struct is passed down and the pipeline's
    VkPipelineCreateFlags2CreateInfoKHR reaches the backend; without it (Mesa 22.3) the app cannot
    enable the extension and a feature struct it chains anyway is dropped, with a log line."""
    from tessera.tools.launch import LaunchConfig, environment

    manifest = _manifest(which)
    has_m5 = "VK_KHR_maintenance5" in probe(backend_env(manifest))["extensions"]
    log = tmp_path / "icd.log"
    # mali-g78 has no profile: it reports what each backend has (a profiled GPU reports maintenance5 only
    # where its device and the backend both have it)
    env = dict(environment(LaunchConfig(tmp_path / "s", backend_manifest=manifest, layer=False, gpu="mali-g78")),
               TESSERA_LOG="info", TESSERA_LOG_FILE=str(log))
    out = run([PYTHON, REPO / "tests/integration/apps/maintenance5_app.py"], env)
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["pipeline"] is True
    assert result["maintenance5"] is has_m5 and result["vkGetRenderingAreaGranularityKHR"] is has_m5
    stripped = "backend does not know VkPhysicalDeviceMaintenance5Features" in log.read_text()
    assert stripped is not has_m5
