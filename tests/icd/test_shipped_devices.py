"""The real devices' Vulkan profiles Tessera ships (icd/devices/) and what the GPU table takes from them.

Each file is checked against what icd/devices/README.md says of it (length of its source, profile
name, label: an edit or a truncated copy fails), and the table's per-core rates and core counts are
compared with the values read from the file with json here, never with typed numbers.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tessera.icd import profiles
from tessera.icd.profiles import DEVICES, PROFILES, profile_facts, with_profile_file
from tessera.icd.settings import IcdSettings
from tessera.icd.vulkan_profile import load

README = (DEVICES / "README.md").read_text()
# | `key.json` | `share/chameleon/devices/X/gpu.json` | commit | `PROFILE` / "label" | characters |
ROWS = {m["file"]: m for m in re.finditer(
    r"^\| `(?P<file>[\w.-]+\.json)` \| `(?P<source>[^`]+)` \| (?P<commit>[0-9a-f]{40}) \| `(?P<name>\w+)` / "
    r'"(?P<label>[^"]+)" \| (?P<chars>\d+) \|$', README, re.M)}
SHIPPED = profiles.shipped()


def test_every_shipped_file_is_in_the_readme_and_has_a_gpu():
    files = sorted(p.name for p in DEVICES.glob("*.json"))
    assert files and files == sorted(ROWS), "icd/devices/README.md's table and the files differ"
    assert sorted(f"{k}.json" for k in SHIPPED) == files


@pytest.mark.parametrize("key", SHIPPED)
def test_file_is_the_unmodified_export(key):
    path = DEVICES / f"{key}.json"
    row = ROWS[path.name]
    text = path.read_text(encoding="utf-8")
    assert len(text) == int(row["chars"])          # the source's length, as read_file reported it
    doc = json.loads(text)
    assert list(doc["profiles"]) == [row["name"]]
    assert doc["profiles"][row["name"]]["label"] == row["label"]
    assert doc["profiles"][row["name"]]["description"] == "Exported from https://vulkan.gpuinfo.org"
    view = load(path)                               # the driver's strict reader takes it as it is
    assert (view.name, view.label) == (row["name"], row["label"])
    assert PROFILES[key].vulkan_profile() == path


def _device(doc: dict) -> dict:
    """The merged properties of the file's one profile, read here independently of profiles.py."""
    (profile,) = doc["profiles"].values()
    merged: dict = {}
    for cap in profile["capabilities"]:
        for struct, members in doc["capabilities"][cap].get("properties", {}).items():
            merged.setdefault(struct, {}).update(members)
    return merged


@pytest.mark.parametrize("key", SHIPPED)
def test_rates_and_cores_come_from_the_file(key):
    props = _device(json.loads((DEVICES / f"{key}.json").read_text()))
    gpu = PROFILES[key]
    core = props.get("VkPhysicalDeviceShaderCorePropertiesARM")
    if core is not None:
        assert (gpu.fma_rate, gpu.texel_rate, gpu.pixel_rate) == (core["fmaRate"], core["texelRate"], core["pixelRate"])
    else:   # Arm's libGPUInfo figures, cited in sources
        assert "libGPUInfo" in gpu.sources and key in profiles.LIBGPUINFO
    builtins = props.get("VkPhysicalDeviceShaderCoreBuiltinsPropertiesARM")
    if builtins is not None:
        assert (gpu.shader_cores, gpu.warps_per_core) == (builtins["shaderCoreCount"], builtins["shaderWarpsPerCore"])
    else:   # Arm's driver names its core count ("Mali-G715-Immortalis MC11"), or another GPU's is taken
        driver = next(props[s]["driverName"] for s in profiles.DRIVER_STRUCTS if s in props)
        if re.search(r"\bMC\d+$", driver):
            assert driver.rsplit(" ", 1)[1] == f"MC{gpu.shader_cores}" and repr(driver) in gpu.sources
        else:
            assert "shaderCoreCount, shaderWarpsPerCore assumed equal to" in gpu.sources
    assert gpu.warp_width == next(props[s]["subgroupSize"] for s in profiles.SUBGROUP_STRUCTS if s in props)
    assert gpu.profile_label == json.loads((DEVICES / f"{key}.json").read_text())["profiles"][gpu.profile_name]["label"]
    assert gpu.clock_mhz == profiles.CLOCK_MHZ and "configuration choice" in gpu.sources


def test_the_default_is_a_shipped_mali_with_ray_tracing():
    assert profiles.DEFAULT_PROFILE in SHIPPED
    exts = json.loads((DEVICES / f"{profiles.DEFAULT_PROFILE}.json").read_text())["capabilities"]["device"]["extensions"]
    assert {"VK_KHR_ray_query", "VK_KHR_ray_tracing_pipeline", "VK_ARM_shader_core_properties"} <= set(exts)


def test_a_timing_only_gpu_reports_the_backend():
    assert PROFILES["mali-g78"].vulkan_profile() is None and "mali-g78" not in SHIPPED


def _user_file(tmp_path: Path, core: dict | None, builtins: dict | None, profiles_n: int = 1) -> Path:
    props = {"VkPhysicalDeviceVulkan11Properties": {"subgroupSize": 8}}
    if core is not None:
        props["VkPhysicalDeviceShaderCorePropertiesARM"] = core
    if builtins is not None:
        props["VkPhysicalDeviceShaderCoreBuiltinsPropertiesARM"] = builtins
    doc = {"profiles": {f"VP_MINE_{i}": {"version": 1, "api-version": "1.3.0", "label": f"my phone {i}",
                                         "capabilities": ["device"]} for i in range(profiles_n)},
           "capabilities": {"device": {"properties": props}}}
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_users_profile_drives_the_rates_it_has(tmp_path):
    path = _user_file(tmp_path, {"fmaRate": 64, "texelRate": 4, "pixelRate": 2}, None)
    s = IcdSettings.from_environ({"TESSERA_GPU": "mali-g720", "TESSERA_GPU_PROFILE": str(path)})
    base = PROFILES["mali-g720"]
    assert (s.profile.fma_rate, s.profile.texel_rate, s.profile.pixel_rate, s.profile.warp_width) == (64, 4, 2, 8)
    # the file has no VK_ARM_shader_core_builtins: the --gpu's core count stays, and sources say so
    assert (s.profile.shader_cores, s.profile.warps_per_core) == (base.shader_cores, base.warps_per_core)
    assert "shaderCoreCount" in s.profile.sources and s.profile.profile_label == "my phone 0"
    assert s.profile.vulkan_profile() == path
    assert s.profile.description == "Mali-G720 (emulated): my phone 0"


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("{", "not JSON: line 1 column 2"),
    ('{"profiles": {"a": {}}}', 'no "capabilities" object'),
    ('[1, 2]', 'no "capabilities" object'),
])
def test_bad_user_profiles_are_one_line_errors(tmp_path, content, message):
    path = tmp_path / "p.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValueError) as e:
        with_profile_file(PROFILES["mali-g720"], path)
    assert message in str(e.value) and str(path.resolve()) in str(e.value) and "\n" not in str(e.value)


def test_several_profiles_are_named(tmp_path):
    path = _user_file(tmp_path, None, None, profiles_n=2)
    with pytest.raises(ValueError, match=r"2 profiles \(VP_MINE_0, VP_MINE_1\)"):
        profile_facts(str(path))


def test_a_directory_is_not_a_profile(tmp_path):
    with pytest.raises(ValueError, match="not a file"):
        profile_facts(str(tmp_path))


@pytest.mark.parametrize("key", SHIPPED)
def test_the_compiler_model_prices_with_the_files_rates(key):
    """compiler/costs.py sits below icd/ and repeats FMA and T: they must be the file's."""
    from tessera.compiler.costs import GPUS

    core = _device(json.loads((DEVICES / f"{key}.json").read_text())).get("VkPhysicalDeviceShaderCorePropertiesARM")
    rates = GPUS[key].rates
    if core is not None:
        assert (rates["FMA"].per_clock, rates["T"].per_clock) == (core["fmaRate"], core["texelRate"])
    gpu = PROFILES[key]     # without the struct: the icd table's (libGPUInfo) figures
    assert (rates["FMA"].per_clock, rates["T"].per_clock) == (gpu.fma_rate, gpu.texel_rate)
