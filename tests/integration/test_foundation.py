"""The foundation end to end: real loader, real manifests, the emulated Mali
driver over lavapipe, the Tessera layer, real applications."""
from __future__ import annotations

import json
import re
import subprocess

import pytest
import validation_predates
from integration_support import PYTHON, REPO, run

from tessera.icd.profiles import PROFILES
from tessera.icd.vulkan_profile import load

EXAMPLES = ["compute_collatz", "render_passes", "transfers", "debug_labels"]
APPS = REPO / "tests" / "integration" / "apps"
G720 = PROFILES["mali-g720"]


def test_vulkaninfo_sees_one_mali_and_the_layer(tessera_env):
    out = run(["vulkaninfo", "--summary"], tessera_env)
    assert out.returncode == 0, out.stderr
    gpus = re.findall(r"^GPU\d+:", out.stdout, re.M)
    assert len(gpus) == 1
    assert re.search(r"deviceName\s+= Mali-G720 \(emulated\)$", out.stdout, re.M)
    assert re.search(r"vendorID\s+= 0x13b5$", out.stdout, re.M)
    assert re.search(r"deviceType\s+= PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU$", out.stdout, re.M)
    assert re.search(r"driverID\s+= DRIVER_ID_ARM_PROPRIETARY$", out.stdout, re.M)
    assert re.search(r"^VK_LAYER_TESSERA_timeline\s", out.stdout, re.M)


def test_tessera_run_command_passes_exit_code(shims, tmp_path):
    out = run([REPO / ".venv/bin/tessera", "run", "--out", tmp_path / "s", "--", PYTHON, "-c",
               "import sys; sys.exit(7)"], None)
    assert out.returncode == 7
    assert f"session outputs in {tmp_path / 's'}" in out.stderr


def _identity(env) -> dict:
    out = run([PYTHON, APPS / "identity_query.py"], env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_identity_and_properties2_chain(tessera_env, lavapipe_env):
    mali, backend = _identity(tessera_env), _identity(lavapipe_env)
    assert mali["device_count"] == 1
    assert (mali["vendorID"], mali["deviceType"]) == (0x13B5, 1)           # INTEGRATED_GPU = 1
    assert mali["deviceName"] == mali["props2_deviceName"] == "Mali-G720 (emulated)"
    assert mali["props2_vendorID"] == 0x13B5
    assert mali["driverID"] == mali["v12_driverID"] == 9                    # VK_DRIVER_ID_ARM_PROPRIETARY
    assert backend["deviceName"] in mali["driverInfo"]                      # what really executes
    assert (mali["pixelRate"], mali["texelRate"], mali["fmaRate"]) == (G720.pixel_rate, G720.texel_rate,
                                                                        G720.fma_rate)
    assert (mali["shaderCoreCount"], mali["shaderWarpsPerCore"]) == (G720.shader_cores, G720.warps_per_core)
    assert mali["shaderCoreMask"] == (1 << G720.shader_cores) - 1
    # The rest of the chain stays the backend's truth; the core properties are the device profile's
    # clamped to the backend (icd/device_clamp.py): the lower apiVersion, the lower limit.
    for key in ("deviceUUID", "driverUUID", "conformance"):
        assert mali[key] == backend[key], key
    device = load(G720.vulkan_profile())
    limits = device.properties["VkPhysicalDeviceProperties"]["limits"]
    assert mali["apiVersion"] == min(backend["apiVersion"], device.api_version)
    assert mali["limits_maxImageDimension2D"] == min(backend["limits_maxImageDimension2D"],
                                                     limits["maxImageDimension2D"])
    for ext in ("VK_ARM_shader_core_properties", "VK_ARM_shader_core_builtins", "VK_EXT_debug_marker"):
        assert ext in mali["extensions"] and ext not in backend["extensions"]
    assert mali["shaderCoreBuiltins_feature"] == 1    # the driver lowers the built-ins (test_core_builtins_driver)
    # Emulated extensions and their feature struct are stripped before the backend sees them.
    assert mali["created_with"] and mali["device_created"] is True


def test_gpu_profile_is_selectable(tessera_env):
    g78 = PROFILES["mali-g78"]
    mali = _identity(dict(tessera_env, TESSERA_GPU="mali-g78"))
    assert mali["deviceName"] == "Mali-G78 (emulated)"
    assert (mali["fmaRate"], mali["shaderCoreCount"]) == (g78.fma_rate, g78.shader_cores)


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_under_tessera(example, tessera_env):
    out = run([PYTHON, REPO / "examples" / f"{example}.py"], tessera_env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith(f"{example}: OK"), out.stdout
    assert "on Mali-G720 (emulated)" in out.stdout
    assert "Traceback" not in out.stderr


def test_c_example_under_tessera(tessera_env):
    subprocess.run(["make", "-s", "-C", REPO / "examples"], check=True)
    out = run([REPO / "build/examples/compute_and_draw"], tessera_env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stderr


def test_vkcube_under_tessera(tessera_env, xvfb_display):
    out = run(["vkcube", "--c", "20"], dict(tessera_env, DISPLAY=xvfb_display), timeout=180)
    assert out.returncode == 0, out.stderr
    assert "Selected GPU 0: Mali-G720 (emulated)" in out.stdout + out.stderr


# `tessera run` options the validation layer checks too, as the environment they set.
VALIDATED_MODES = {"plain": {}, "instrument": {"TESSERA_INSTRUMENT": "1"}, "regions": {"TESSERA_REGIONS": "all"}}


@pytest.mark.parametrize("mode", sorted(VALIDATED_MODES))
@pytest.mark.parametrize("example", EXAMPLES)
def test_validation_layer_below_tessera_finds_nothing(example, mode, tessera_env):
    """Khronos validation between our layer and the driver checks what the layer sends down
    (labels, indirect-capture copies and barriers, wrapped submits; with --instrument and --regions,
    the instrumented pipelines, the region counters). The installed release (1.3.239) predates the
    structures those two chain: exactly the messages listed in validation_predates.py are accepted."""
    env = dict(tessera_env, VK_INSTANCE_LAYERS="VK_LAYER_TESSERA_timeline:VK_LAYER_KHRONOS_validation",
               **VALIDATED_MODES[mode])
    out = run([PYTHON, REPO / "examples" / f"{example}.py"], env)
    found = validation_predates.messages(out.stderr)
    assert validation_predates.unexplained(out.stderr) == [], out.stderr
    assert "Validation Error" not in out.stdout    # nothing reported before the example's messenger existed
    if mode == "plain":
        assert found == [], out.stderr
    if found:   # the example counts every message and fails with their number, its own checks passed
        assert out.returncode == 1 and f"{example}: FAIL {len(found)} validation message(s)" in out.stderr, out.stderr
    else:
        assert out.returncode == 0, out.stdout + out.stderr


def test_only_the_listed_messages_are_accepted():
    """validation_predates matches VUID and structure type (or extension) together, nothing looser."""
    line = ("[validation ERROR] Validation Error: [ {} ] Object 0: VK_NULL_HANDLE | MessageID = 0x901f59ec | "
            "vkCreateDevice: pCreateInfo->pNext chain includes a structure with unknown VkStructureType ({}); ...")
    warning = ("[validation WARNING] Validation Warning: [ VUID_Undefined ] Object 0: handle = 0x1 | "
               "Device Extension {} is not supported by this layer.  Using this extension may ...")
    accepted = [line.format("VUID-VkDeviceCreateInfo-pNext-pNext", 1000607000),
                warning.format("VK_ARM_shader_instrumentation")]
    refused = [line.format("VUID-VkDeviceCreateInfo-pNext-pNext", 1000607001),   # another sType
               line.format("VUID-VkBufferCreateInfo-pNext-pNext", 1000607000),   # another VUID
               warning.format("VK_ARM_tensors"),
               "[validation ERROR] Validation Error: [ VUID-vkCmdDraw-None-02699 ] Object 0: ... | anything else"]
    text = "\n".join(accepted + refused)
    assert validation_predates.messages(text) == accepted + refused
    assert validation_predates.unexplained(text) == refused

def test_two_instances_and_devices_in_one_process(tessera_env):
    out = run([PYTHON, APPS / "two_devices.py"], tessera_env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "two_devices: OK" in out.stdout


def test_failing_intercept_never_breaks_the_call(tessera_env):
    env = dict(tessera_env, TESSERA_LAYER_FAULT="vkCmdDispatch")
    out = run([PYTHON, REPO / "examples" / "compute_collatz.py"], env)
    assert out.returncode == 0, out.stdout + out.stderr      # results still correct
    assert out.stderr.count("exception in vkCmdDispatch") == 1  # reported once, with a traceback
    assert "InjectedFault" in out.stderr
