"""GPU profiles of the emulated Mali: identity, per-core rates and the real device each one is.

Role: the one table of the GPUs `tessera run --gpu KEY` (TESSERA_GPU) offers. A GPU with a real
device's Vulkan profile (icd/devices/<key>.json, a gpuinfo.org export; icd/devices/README.md says
where each came from) takes from that file, never from this module:
- fmaRate, texelRate, pixelRate (VkPhysicalDeviceShaderCorePropertiesARM: per core per clock);
- shaderCoreCount, shaderWarpsPerCore (VkPhysicalDeviceShaderCoreBuiltinsPropertiesARM);
- the warp width (VkPhysicalDeviceVulkan11Properties / VkPhysicalDeviceSubgroupProperties
  subgroupSize);
- without VK_ARM_shader_core_builtins, the core count Arm's driver puts in its name ("Mali-G715-
  Immortalis MC11": 11 cores; VkPhysicalDeviceVulkan12Properties / DriverProperties driverName);
- the profile's name and label, which the reports show next to the device's name.
A rate the export lacks comes from Arm's libGPUInfo product table (LIBGPUINFO below); warps per
core it lacks are taken from a named shipped GPU (`like=`), a configuration choice; `sources` says
which is which. The shader
clock is a configuration choice for every GPU: Arm publishes none (the SoC sets it). docs/timing.md
cites each value. A user's own profile (TESSERA_GPU_PROFILE, `tessera run --gpu-profile FILE`)
replaces the GPU's file and its rates where it has them (`with_profile_file`).

Files are read by icd/vulkan_profile.py, the one reader of the format (the emulated device's answers
use the same parse), and only the chosen GPU's: PROFILES builds a GPU when it is first asked for.
"""
from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

ARM_VENDOR_ID = 0x13B5  # PCI-SIG vendor id of Arm Ltd, reported by every Mali driver

# The emulated driver's own release, reported as VkPhysicalDeviceProperties::driverVersion
# whatever the backend is (the backend's packed number means nothing under Arm's vendor ID:
# NVIDIA's 580.159.04 decoded as 580.636.256). Arm names Mali driver (DDK) releases rXpY;
# the number is packed as VK_MAKE_API_VERSION(0, X, Y, 0), so vulkaninfo prints X.Y.0.
# r49p0 is this emulation's configuration choice, not a claim that it behaves like that
# release; docs/backends.md says the same. The real backend is named in driverInfo.
DRIVER_RELEASE = (49, 0)
DRIVER_VERSION = (DRIVER_RELEASE[0] << 22) | (DRIVER_RELEASE[1] << 12)
DRIVER_RELEASE_NAME = f"r{DRIVER_RELEASE[0]}p{DRIVER_RELEASE[1]}"
# Real devices' Vulkan Profiles JSON files (icd/devices/<key>.json): what the emulated device reports
# (icd/device_profile.py); a GPU without one reports its backend's capabilities.
DEVICES = Path(__file__).parent / "devices"
# Shader-core clock of every GPU here: a configuration choice (Arm publishes no clock for its GPUs;
# each SoC sets its own), one value so devices compare core for core. docs/timing.md.
CLOCK_MHZ = 1000

# Arm's libGPUInfo product table (ARM-software/libGPUInfo source/libgpuinfo.cpp at LIBGPUINFO_COMMIT),
# for GPUs whose export lacks VK_ARM_shader_core_properties: product name, fp32 FMAs per execution
# engine, execution engines, texels and pixels per core per clock (fmaRate = FMAs x engines).
LIBGPUINFO_COMMIT = "663cc4dfdcaaeb99daff85976698d2536bac6018"
LIBGPUINFO = {
    "mali-g77": ("Mali-G77", 16, 2, 4, 2),
    "mali-g78": ("Mali-G78", 16, 2, 4, 2),
    "mali-g715": ("Mali-G715", 64, 2, 8, 4),
}


def arm_rates(key: str) -> dict[str, int]:
    """fma_rate, texel_rate, pixel_rate of a GPU in Arm's libGPUInfo table."""
    _, fmas, engines, texels, pixels = LIBGPUINFO[key]
    return {"fma_rate": fmas * engines, "texel_rate": texels, "pixel_rate": pixels}


def _libgpuinfo(key: str) -> str:
    name, fmas, engines, texels, pixels = LIBGPUINFO[key]
    return (f"Arm's libGPUInfo ({name}: {fmas} FMA x {engines} engines, {texels} texels, {pixels} pixels per "
            f"clock; ARM-software/libGPUInfo source/libgpuinfo.cpp @{LIBGPUINFO_COMMIT[:12]})")


CORE_PROPERTIES = "VkPhysicalDeviceShaderCorePropertiesARM"          # fmaRate, texelRate, pixelRate
CORE_BUILTINS = "VkPhysicalDeviceShaderCoreBuiltinsPropertiesARM"    # shaderCoreCount, shaderWarpsPerCore
SUBGROUP_STRUCTS = ("VkPhysicalDeviceVulkan11Properties", "VkPhysicalDeviceSubgroupProperties")
DRIVER_STRUCTS = ("VkPhysicalDeviceVulkan12Properties", "VkPhysicalDeviceDriverProperties",
                  "VkPhysicalDeviceDriverPropertiesKHR")
MC_CORES = re.compile(r"\bMC(\d+)$")   # Arm's "MP/MC<n>" core-count suffix of a Mali's name
# GpuProfile field <- (struct, member) of a Vulkan profile
FROM_PROFILE = {
    "fma_rate": (CORE_PROPERTIES, "fmaRate"),
    "texel_rate": (CORE_PROPERTIES, "texelRate"),
    "pixel_rate": (CORE_PROPERTIES, "pixelRate"),
    "shader_cores": (CORE_BUILTINS, "shaderCoreCount"),
    "warps_per_core": (CORE_BUILTINS, "shaderWarpsPerCore"),
}


@dataclass(frozen=True)
class GpuProfile:
    key: str
    device_name: str
    device_id: int          # emulation's own id (not Arm's GPU_ID register value)
    shader_cores: int       # VkPhysicalDeviceShaderCoreBuiltinsPropertiesARM::shaderCoreCount
    warps_per_core: int     # ...::shaderWarpsPerCore
    warp_width: int         # threads per warp (subgroupSize)
    fma_rate: int           # VkPhysicalDeviceShaderCorePropertiesARM::fmaRate (fp32 FMA/clk/core)
    texel_rate: int         # ...::texelRate (bilinear texels/clk/core)
    pixel_rate: int         # ...::pixelRate (pixels/clk/core)
    clock_mhz: int          # shader core clock used by the timing model (CLOCK_MHZ: configuration choice)
    sources: str            # where each value comes from
    profile_file: str | None = None   # a Vulkan Profiles JSON; None: DEVICES/<key>.json when it exists
    profile_name: str | None = None   # the Vulkan profile's name and label, when there is one
    profile_label: str | None = None

    def vulkan_profile(self) -> Path | None:
        """The Vulkan profile the emulated device reports, or None (the backend's capabilities)."""
        if self.profile_file is not None:
            return Path(self.profile_file)
        path = DEVICES / f"{self.key}.json"
        return path if path.is_file() else None

    @property
    def shader_core_mask(self) -> int:
        return (1 << self.shader_cores) - 1

    @property
    def description(self) -> str:
        """The device's name and the real device it reports (for reports and trace metadata)."""
        return f"{self.device_name}: {self.profile_label}" if self.profile_label else self.device_name


@dataclass(frozen=True)
class ProfileFacts:
    """What the timing model and the reports take from a Vulkan Profiles file."""
    path: str
    name: str
    label: str
    values: dict[str, int]          # GpuProfile field -> value, for those the file has
    warp_width: int | None
    driver_name: str | None = None  # set when the core count was read from it (no builtins struct)


def _fail(path, message: str) -> ValueError:
    return ValueError(f"{path}: {message}")


@functools.cache
def profile_facts(path: str) -> ProfileFacts:
    """A Vulkan Profiles file's name, label and the Arm core properties it reports, read by the one
    reader of the format (icd/vulkan_profile.py, which the emulated device's answers use too: the
    file is parsed once per process). Raises ValueError with one line naming the file: unreadable, not
    JSON, no "capabilities", not exactly one profile (the names are listed), a malformed member, or a
    core figure that is not a positive integer."""
    from .vulkan_profile import load

    view = load(path)   # the same key (a str) as the device's answers (icd/device_profile.py): one parse
    props = view.properties
    values: dict[str, int] = {}
    for field_name, (struct, member) in FROM_PROFILE.items():
        v = props.get(struct, {}).get(member)
        if v is None:
            continue
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise _fail(path, f"{struct}.{member}: expected a positive integer, got {json.dumps(v)[:40]}")
        values[field_name] = v
    warp = next((props[s]["subgroupSize"] for s in SUBGROUP_STRUCTS
                 if isinstance(props.get(s, {}).get("subgroupSize"), int)), None)
    driver = next((props[s]["driverName"] for s in DRIVER_STRUCTS
                   if isinstance(props.get(s, {}).get("driverName"), str)), "")
    mc = MC_CORES.search(driver)
    if "shader_cores" not in values and mc and int(mc[1]) > 0:
        values["shader_cores"] = int(mc[1])
    else:
        driver = None
    return ProfileFacts(path, view.name, view.label, values, warp, driver or None)


def _sourced(facts: ProfileFacts) -> str:
    taken = ", ".join(f"{FROM_PROFILE[f][1]}" + (f" (driverName {facts.driver_name!r})"
                                                  if f == "shader_cores" and facts.driver_name else "")
                      for f in FROM_PROFILE if f in facts.values)
    return f"{taken} from {Path(facts.path).name} ({facts.label})" if taken else \
        f"{Path(facts.path).name} ({facts.label}) reports no VK_ARM_shader_core_properties/builtins"


def with_profile_file(base: GpuProfile, path: str | Path) -> GpuProfile:
    """`base` reporting the Vulkan profile in `path` (a user's own export): the file's core counts
    and rates where it has them, `base`'s otherwise; raises ValueError (profile_facts) for a bad file."""
    facts = profile_facts(str(Path(path).resolve()))
    kept = [FROM_PROFILE[f][1] for f in FROM_PROFILE if f not in facts.values]
    sources = _sourced(facts) + (f"; {', '.join(kept)} of {base.key}: {base.sources}" if kept else
                                 f"; clock: configuration choice ({base.clock_mhz} MHz)")
    return replace(base, profile_file=str(path), profile_name=facts.name, profile_label=facts.label,
                   warp_width=facts.warp_width or base.warp_width, sources=sources,
                   **facts.values)


def _device(key: str, device_name: str, device_id: int, like: GpuProfile | None = None,
            why: str = "") -> GpuProfile:
    """A GPU with a real device's profile (DEVICES/<key>.json): everything the file reports from it;
    per-core rates it lacks from Arm's libGPUInfo table; anything else from the shipped GPU `like`
    (a configuration choice, `why` says which). `sources` names each."""
    facts = profile_facts(str(DEVICES / f"{key}.json"))
    arm = {f: v for f, v in (arm_rates(key) if key in LIBGPUINFO else {}).items() if f not in facts.values}
    missing = [f for f in FROM_PROFILE if f not in facts.values and f not in arm]
    if (missing and like is None) or facts.warp_width is None:
        raise ValueError(f"{key}: {facts.path} lacks {missing or 'subgroupSize'} and no GPU to take them from")
    used = {f: getattr(like, f) for f in missing}
    sources = _sourced(facts) + \
        (f"; {', '.join(FROM_PROFILE[f][1] for f in arm)} from {_libgpuinfo(key)}" if arm else "") + \
        (f"; {', '.join(FROM_PROFILE[f][1] for f in used)} assumed equal to {like.key}'s ({why}): "
         "configuration choice" if used else "") + f"; clock {CLOCK_MHZ} MHz: configuration choice"
    return GpuProfile(key=key, device_name=device_name, device_id=device_id, warp_width=facts.warp_width,
                      clock_mhz=CLOCK_MHZ, sources=sources, profile_name=facts.name,
                      profile_label=facts.label, **{**used, **arm, **facts.values})


# No public Vulkan profile of a Mali-G78 is known to this project (ARM-software/tracetooltests
# ships none): a timing-only GPU that reports its backend's capabilities.
_G78 = GpuProfile(
    key="mali-g78", device_name="Mali-G78 (emulated)", device_id=0x0078,
    shader_cores=20, warps_per_core=64, warp_width=16, clock_mhz=850, **arm_rates("mali-g78"),
    sources=f"no real device's profile: timing only (the backend's capabilities). fmaRate, texelRate, "
            f"pixelRate from {_libgpuinfo('mali-g78')}; 16-wide warps (Valhall); 20 cores, 64 warps "
            "and 850 MHz are this emulation's configuration choice.",
)


class _Gpus(Mapping[str, GpuProfile]):
    """The GPUs by key, each built when first asked for: a GPU with a real device's profile reads its
    file (~250 KB of JSON), which a process pays only for the GPU it emulates."""

    def __init__(self, makers: dict[str, Callable[[], GpuProfile]]) -> None:
        self._makers = makers
        self._built: dict[str, GpuProfile] = {}

    def __getitem__(self, key: str) -> GpuProfile:
        gpu = self._built.get(key)
        if gpu is None:
            gpu = self._built[key] = self._makers[key]()
        return gpu

    def __iter__(self) -> Iterator[str]:
        return iter(self._makers)

    def __len__(self) -> int:
        return len(self._makers)

    def __contains__(self, key: object) -> bool:
        return key in self._makers


PROFILES: Mapping[str, GpuProfile] = _Gpus({
    # The Immortalis-G720 (r49p0, Debian 12): every rate and count from its export.
    "mali-g720": lambda: _device("mali-g720", "Mali-G720 (emulated)", 0x0720),
    # The Immortalis-G925 (r49p1, Android 16, a Xiaomi 25032RP42C): every rate and count from its export.
    "mali-g925": lambda: _device("mali-g925", "Mali-G925 (emulated)", 0x0925),
    # The Immortalis-G715 MC11 (r38p1, Android 13, a vivo V2242A): 11 cores by its driverName; its
    # export has no VK_ARM_shader_core_properties/builtins: rates from libGPUInfo, warps per core the
    # G720's (its successor, the nearest GPU here whose driver reports them).
    "mali-g715": lambda: _device("mali-g715", "Mali-G715 (emulated)", 0x0715, like=PROFILES["mali-g720"],
                                 why="the export reports no VK_ARM_shader_core_builtins; the G720 is its successor"),
    # The Mali-G77 (r38p1, Android 13, a Samsung SM-G980F; Vulkan 1.1): its driver names no core
    # count and reports no Arm core properties: rates from libGPUInfo, cores and warps the G78's
    # (the same Valhall generation; configuration choices either way).
    "mali-g77": lambda: _device("mali-g77", "Mali-G77 (emulated)", 0x0077, like=_G78,
                                why="the export names no core count; the G78 is the same Valhall generation"),
    "mali-g78": lambda: _G78,
})
# The default: the current Mali whose export reports ray tracing (VK_KHR_ray_query and
# VK_KHR_ray_tracing_pipeline) and Arm's core properties; docs/backends.md says why.
DEFAULT_PROFILE = "mali-g720"


def shipped() -> list[str]:
    """The keys of the GPUs with a real device's profile (a file in DEVICES), sorted."""
    return sorted(k for k in PROFILES if (DEVICES / f"{k}.json").is_file())
