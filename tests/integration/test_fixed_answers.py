"""The driver's fixed answers (vkapi/answers.py): once Python has answered vkEnumeratePhysicalDevices,
vkEnumeratePhysicalDeviceGroups, vkGetPhysicalDeviceProperties or vkEnumerateDeviceExtensionProperties
for an instance or physical device, its C guard answers later calls itself, until vkDestroyInstance.

tests/integration/apps/fixed_answers.py asks each query four times per instance in two instances
(one after the other: the second gets the first's addresses here, so answers kept for the first
must be gone), through the real loader and straight from the driver's library, with answers kept
in C and with TESSERA_C_ANSWERS=0 (Python answers every call, as before). Both must give the same
answers, call after call, with the two-call idiom's semantics; with answers kept in C no Python
hook of these queries runs after the first round.
"""
from __future__ import annotations

import json

import pytest
from integration_support import PYTHON, REPO, run

APP = REPO / "tests" / "integration" / "apps" / "fixed_answers.py"
VK_SUCCESS, VK_INCOMPLETE = 0, 5
ARM_VENDOR_ID = 0x13B5


@pytest.fixture
def icd_env(shims, tmp_path):
    """The emulated driver alone (no layer): only the driver's hooks run in the app's interpreter."""
    from tessera.tools.launch import LaunchConfig, environment

    return environment(LaunchConfig(tmp_path / "session", layer=False))


def _answers(mode: str, env: dict, c_answers: str) -> dict:
    from tessera.icd.shim_spec import LIBRARY
    from tessera.vkapi.paths import BUILD_DIR

    out = run([PYTHON, APP, mode, BUILD_DIR / LIBRARY], dict(env, TESSERA_C_ANSWERS=c_answers), timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _check_two_call_idiom(answers: dict, mode: str) -> None:
    devices = answers["devices"]
    total = devices["count"][1]
    assert devices["count"] == [VK_SUCCESS, total] and total >= 1
    assert devices["full"] == [VK_SUCCESS, total]
    assert devices["short"] == [VK_INCOMPLETE, total - 1, list(range(total - 1)), True]

    groups = answers["groups"]
    n_groups = groups["count"][1]
    assert groups["count"] == [VK_SUCCESS, n_groups] and n_groups >= 1
    result, count, items, kept = groups["full"]
    assert (result, count) == (VK_SUCCESS, n_groups)
    assert sorted(d for g in items for d in g["devices"]) == list(range(total))   # every device, once
    result, count, short_items, short_kept = groups["short"]
    assert (result, count, short_items) == (VK_INCOMPLETE, n_groups - 1, items[:n_groups - 1])
    if mode == "icd":   # the driver never writes sType/pNext (loader 1.3.239 rewrites pNext itself)
        assert kept and short_kept

    assert len(answers["properties"]) == total
    for props in answers["properties"]:
        assert props["vendorID"] == ARM_VENDOR_ID and "(emulated)" in props["deviceName"]
    for extensions in answers["extensions"]:
        n = extensions["count"][1]
        assert extensions["count"] == [VK_SUCCESS, n] and n >= 1
        result, count, names = extensions["full"]
        assert (result, count) == (VK_SUCCESS, n) and len(names) == n
        assert extensions["short"] == [VK_INCOMPLETE, n - 1, names[:n - 1]]


@pytest.mark.parametrize("mode", ["loader", "icd"])
def test_fixed_answers_from_c_are_the_python_hooks_answers(icd_env, mode):
    kept = _answers(mode, icd_env, "1")
    python = _answers(mode, icd_env, "0")
    first = python["instances"][0][0]   # Python's answers to the first round
    _check_two_call_idiom(first, mode)
    for run_ in (python, kept):
        for rounds in run_["instances"]:
            for answers in rounds:
                assert answers == first
    # The comparison was between the two paths: Python answered every round without kept answers,
    # and none after the first round with them.
    assert set(python["hook_calls_after_first_round"]) == {
        "vkEnumeratePhysicalDevices", "vkEnumeratePhysicalDeviceGroups", "vkGetPhysicalDeviceProperties",
        "vkEnumerateDeviceExtensionProperties"}
    assert kept["hook_calls_after_first_round"] == {}
