"""The emulated device reports a real device's Vulkan profile: `vulkaninfo --json=0 -o` under Tessera
(the layer and the driver, through the real loader, over lavapipe) equals each shipped profile
(icd/devices/*.json) and a user's profile file, except the differences icd/device_clamp.py lists
(computed from lavapipe's own vulkaninfo export, independently of the driver's run); and a program
enabling a feature or extension the profile lacks fails at vkCreateDevice as on the device, while
the same program passes with a profile that has it."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

import pytest
from integration_support import PYTHON, REPO, run

from tessera.icd import device_report
from tessera.icd.device_clamp import plain
from tessera.icd.profiles import PROFILES
from tessera.icd.vulkan_profile import VulkanProfile, load
from tessera.layer.shim_spec import LAYER_DEVICE_EXTENSIONS

APP = REPO / "tests" / "integration" / "apps" / "device_request.py"
SHIPPED = sorted(k for k, gpu in PROFILES.items() if gpu.vulkan_profile() is not None)


def vulkaninfo_profile(env, out: Path) -> VulkanProfile:
    r = run(["vulkaninfo", "--json=0", "-o", str(out)], env)
    assert r.returncode == 0, r.stderr[-2000:]
    return load(out)


@pytest.fixture(scope="module")
def backend_file(tmp_path_factory) -> Path:
    """lavapipe's own capabilities, exported by vulkaninfo without Tessera."""
    return device_report.backend_export(tmp_path_factory.mktemp("backend") / "lavapipe.json")


@pytest.fixture(scope="module")
def backend(backend_file) -> VulkanProfile:
    return load(backend_file)


def mismatches(profile: VulkanProfile, got: VulkanProfile) -> dict[str, tuple]:
    """Every path where `got` (what vulkaninfo saw) differs from the profile: (profile's, got's)."""
    out: dict[str, tuple] = {}
    for n in profile.extensions.keys() | got.extensions.keys():
        if profile.extensions.get(n) != got.extensions.get(n):
            out[f"extensions.{n}"] = (profile.extensions.get(n), got.extensions.get(n))
    for s, members in profile.features.items():
        for k, v in members.items():
            if got.features.get(s, {}).get(k) != v:
                out[f"features.{s}.{k}"] = (v, got.features.get(s, {}).get(k))

    def walk(prefix: str, p: Mapping, g: Mapping | None) -> None:
        for k, v in p.items():
            gv = g.get(k) if g is not None else None
            if isinstance(v, Mapping):
                walk(f"{prefix}.{k}", v, gv)
            elif plain(v) != plain(gv):
                out[f"{prefix}.{k}"] = (plain(v), plain(gv))
    for s, members in profile.properties.items():
        walk(f"properties.{s}", members, got.properties.get(s))
    for f, structs in profile.formats.items():
        for s, members in structs.items():
            for k, v in members.items():
                g = got.formats.get(f, {}).get(s, {}).get(k, 0)
                if plain(v) != plain(g):
                    out[f"formats.{f}.{s}.{k}"] = (plain(v), plain(g))
    for i, q in enumerate(profile.queue_families):
        g = got.queue_families[i] if i < len(got.queue_families) else None
        for attr, name in (("flags", "queueFlags"), ("count", "queueCount"),
                           ("timestamp_valid_bits", "timestampValidBits"),
                           ("min_image_transfer_granularity", "minImageTransferGranularity")):
            if g is None or getattr(q, attr) != getattr(g, attr):
                out[f"queueFamiliesProperties[{i}].{name}"] = (getattr(q, attr), getattr(g, attr, None))
    return out


def unexported(path: str, got: VulkanProfile, backend: VulkanProfile) -> bool:
    """A struct this vulkaninfo exports neither for the emulated device nor for the backend (it
    prints the promoted core struct instead, or does not know the struct): nothing to compare."""
    kind, _, rest = path.partition(".")
    struct = rest.split(".")[0]
    if kind == "features":
        return struct not in got.features and struct not in backend.features
    if kind == "properties":
        return struct not in got.properties and struct not in backend.properties
    return False


def assert_reports_profile(profile_file: Path, got: VulkanProfile, backend: VulkanProfile) -> None:
    profile = load(profile_file)
    listed = {d.path: d for d in device_report.gpu_differences(profile_file, backend, LAYER_DEVICE_EXTENSIONS)}

    def listing(path: str):
        while path:
            if path in listed:
                return listed[path]
            path = path.rpartition(".")[0]
        return None
    unexplained, wrong = [], []
    for path, (want, seen) in sorted(mismatches(profile, got).items()):
        d = listing(path)
        if unexported(path, got, backend):
            continue
        if d is None:
            unexplained.append(f"{path}: profile {want!r}, reported {seen!r}")
        elif d.path == path and d.reported is not None and plain(d.reported) != seen:
            wrong.append(f"{path}: listed as {d.reported!r} ({d.reason}), reported {seen!r}")
    assert not unexplained, "differences not listed:\n" + "\n".join(unexplained[:40])
    assert not wrong, "listed differences reported otherwise:\n" + "\n".join(wrong[:40])
    # and every listed difference is one vulkaninfo sees (the list is not padded)
    seen_paths = mismatches(profile, got)
    stale = [p for p, d in listed.items() if d.reported is not None and d.path.count(".") >= 2
             and not any(s == p or s.startswith(p + ".") for s in seen_paths)]
    assert not stale, f"listed but not different: {stale[:20]}"


@pytest.mark.parametrize("gpu", SHIPPED)
def test_vulkaninfo_reports_the_shipped_profile(gpu, tessera_env, backend, tmp_path):
    got = vulkaninfo_profile(dict(tessera_env, TESSERA_GPU=gpu), tmp_path / "mali.json")
    assert_reports_profile(PROFILES[gpu].vulkan_profile(), got, backend)


def user_profile(backend_file: Path, out: Path, features: dict[str, dict[str, bool]],
                 drop_extensions: tuple[str, ...] = (), limits: dict | None = None,
                 drop_formats: tuple[str, ...] = (), optimal: dict[str, list[str]] | None = None) -> Path:
    """The backend's own export with some features off, extensions gone and limits lowered: a device
    the backend can fully honour, so only what the test changed (and identity) may differ."""
    doc = json.loads(backend_file.read_text())
    device = next(iter(doc["capabilities"].values()))
    for struct, members in features.items():
        device["features"][struct].update(members)
    for name in drop_extensions:
        device["extensions"].pop(name)
    device["properties"]["VkPhysicalDeviceProperties"]["limits"].update(limits or {})
    for name in drop_formats:
        device["formats"].pop(name)
    for name, flags in (optimal or {}).items():
        for struct, members in device["formats"][name].items():
            if "optimalTilingFeatures" in members:
                members["optimalTilingFeatures"] = [f.replace("FORMAT_FEATURE_", "FORMAT_FEATURE_2_")
                                                    if struct == "VkFormatProperties3" else f for f in flags]
    out.write_text(json.dumps(doc))
    return out


def test_vulkaninfo_reports_a_users_profile(tessera_env, backend, backend_file, tmp_path):
    path = user_profile(backend_file, tmp_path / "user.json",
                        {"VkPhysicalDeviceFeatures": {"fillModeNonSolid": False, "multiViewport": False}},
                        drop_extensions=("VK_EXT_mesh_shader",),
                        limits={"maxBoundDescriptorSets": 7, "maxComputeWorkGroupCount": [1024, 1024, 64]})
    got = vulkaninfo_profile(dict(tessera_env, TESSERA_GPU_PROFILE=str(path)), tmp_path / "mali.json")
    assert_reports_profile(path, got, backend)
    assert got.features["VkPhysicalDeviceFeatures"]["fillModeNonSolid"] is False
    assert "VK_EXT_mesh_shader" not in got.extensions and "VK_ARM_tensors" in got.extensions
    limits = got.properties["VkPhysicalDeviceProperties"]["limits"]
    assert limits["maxBoundDescriptorSets"] == 7 and limits["maxComputeWorkGroupCount"] == (1024, 1024, 64)


def request(env, *args) -> dict:
    r = run([PYTHON, APP, *args], env)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_create_device_fails_as_on_the_device(tessera_env, backend_file, tmp_path):
    lacking = user_profile(backend_file, tmp_path / "lacking.json",
                           {"VkPhysicalDeviceFeatures": {"fillModeNonSolid": False},
                            "VkPhysicalDeviceVulkan12Features": {"shaderInt8": False}},
                           drop_extensions=("VK_EXT_mesh_shader",))
    having = user_profile(backend_file, tmp_path / "having.json", {})
    without, with_ = (dict(tessera_env, TESSERA_GPU_PROFILE=str(p)) for p in (lacking, having))
    for args, error in ((["fillModeNonSolid"], "VK_ERROR_FEATURE_NOT_PRESENT"),
                        (["v12.shaderInt8"], "VK_ERROR_FEATURE_NOT_PRESENT"),
                        (["ext:VK_EXT_mesh_shader"], "VK_ERROR_EXTENSION_NOT_PRESENT")):
        refused, passed = request(without, *args), request(with_, *args)
        assert refused["result"] == error, (args, refused)
        assert passed["result"] == "VK_SUCCESS", (args, passed)
        assert all(v is False for v in refused["reported"].values()), refused
        assert all(v is True for v in passed["reported"].values()), passed
    # image formats: one the profile does not list, a usage its format features do not allow
    storage = "VK_FORMAT_R8G8B8A8_UNORM"
    narrow = user_profile(backend_file, tmp_path / "narrow.json", {}, drop_formats=("VK_FORMAT_R16G16_SFLOAT",),
                          optimal={storage: ["VK_FORMAT_FEATURE_SAMPLED_IMAGE_BIT"]})
    wide_env, narrow_env = with_, dict(tessera_env, TESSERA_GPU_PROFILE=str(narrow))
    asks = ("image:R16G16_SFLOAT:SAMPLED", "image:R8G8B8A8_UNORM:STORAGE", "image:R8G8B8A8_UNORM:SAMPLED")
    wide, thin = request(wide_env, *asks)["images"], request(narrow_env, *asks)["images"]
    assert all(r == ["VK_SUCCESS"] * 2 for r in wide.values()), wide
    assert thin == {asks[0]: ["VK_ERROR_FORMAT_NOT_SUPPORTED"] * 2, asks[1]: ["VK_ERROR_FORMAT_NOT_SUPPORTED"] * 2,
                    asks[2]: ["VK_SUCCESS"] * 2}, thin
    # queues beyond what the family reports
    asked = request(with_, "queues:2")
    assert asked["queue_counts"] == [1] and asked["result"] == "VK_ERROR_INITIALIZATION_FAILED"


def test_a_malformed_profile_refuses_the_driver_and_says_where(tessera_env, backend_file, tmp_path):
    doc = json.loads(backend_file.read_text())
    limits = next(iter(doc["capabilities"].values()))["properties"]["VkPhysicalDeviceProperties"]["limits"]
    limits["framebufferColorSampleCounts"] = ["VK_SAMPLE_COUNT_3_BIT"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    r = run(["vulkaninfo", "--summary"], dict(tessera_env, TESSERA_GPU_PROFILE=str(bad)))
    assert r.returncode != 0
    # the driver reads the profile with its settings (icd/profiles.py, the one reader) and refuses to load
    assert (f"tessera: emulated Mali driver unavailable: {bad}: capabilities.device.properties."
            "VkPhysicalDeviceProperties.limits.framebufferColorSampleCounts[0]: 'VK_SAMPLE_COUNT_3_BIT'") in r.stderr


def test_extensions_the_backend_has_under_another_name_are_the_devices(tessera_env):
    """The Immortalis-G720 lists VK_EXT_global_priority(_query), VK_KHR_calibrated_timestamps and
    VK_EXT_tooling_info; lavapipe has them as VK_KHR_global_priority, VK_EXT_calibrated_timestamps and
    Vulkan 1.3 (vk.xml promotedto): the device lists them, enables them and has their commands."""
    wanted = ("VK_EXT_global_priority", "VK_EXT_global_priority_query", "VK_KHR_calibrated_timestamps",
              "VK_EXT_tooling_info")
    got = request(tessera_env, *(f"ext:{e}" for e in wanted), "proc:vkGetCalibratedTimestampsKHR")
    assert got["result"] == "VK_SUCCESS" and got["procs"] == {"vkGetCalibratedTimestampsKHR": True}, got


def test_the_doctor_lines_of_the_default_gpu(backend):
    """What `tessera doctor --gpu mali-g720` prints (tools/doctor.py)."""
    found = device_report.lines(device_report.gpu_differences(PROFILES["mali-g720"].vulkan_profile(), backend,
                                                              LAYER_DEVICE_EXTENSIONS))
    assert "queueFamiliesProperties[0].queueCount: 2 -> 1  (the backend has fewer queues; no second queue is " \
           "emulated)" in found
    assert any(line.startswith("extensions.VK_EXT_fragment_density_map: 2 -> -") for line in found)
    assert not any(line.startswith("extensions.VK_EXT_global_priority:") for line in found)   # lavapipe's KHR one
