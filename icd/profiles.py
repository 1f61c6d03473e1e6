"""GPU profiles of the emulated Mali: identity and per-core rates, in one table.

Rates are those of VK_ARM_shader_core_properties (per core per clock) and
VK_ARM_shader_core_builtins. Sources are named per entry; where a value is a
configuration choice of the emulation rather than a published figure, it says so.
"""
from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class GpuProfile:
    key: str
    device_name: str
    device_id: int          # emulation's own id (not Arm's GPU_ID register value)
    shader_cores: int       # VkPhysicalDeviceShaderCoreBuiltinsPropertiesARM::shaderCoreCount
    warps_per_core: int     # ...::shaderWarpsPerCore
    warp_width: int         # threads per warp
    fma_rate: int           # VkPhysicalDeviceShaderCorePropertiesARM::fmaRate (fp32 FMA/clk/core)
    texel_rate: int         # ...::texelRate (bilinear texels/clk/core)
    pixel_rate: int         # ...::pixelRate (pixels/clk/core)
    clock_mhz: int          # shader core clock used by the timing model
    sources: str
    profile_file: str | None = None   # a Vulkan Profiles JSON; None: DEVICES/<key>.json when it exists

    def vulkan_profile(self) -> Path | None:
        """The Vulkan profile the emulated device reports, or None (the backend's capabilities)."""
        if self.profile_file is not None:
            return Path(self.profile_file)
        path = DEVICES / f"{self.key}.json"
        return path if path.is_file() else None

    @property
    def shader_core_mask(self) -> int:
        return (1 << self.shader_cores) - 1


PROFILES: dict[str, GpuProfile] = {
    "mali-g720": GpuProfile(
        key="mali-g720", device_name="Mali-G720 (emulated)", device_id=0x0720,
        shader_cores=8, warps_per_core=64, warp_width=16,
        fma_rate=128, texel_rate=8, pixel_rate=4, clock_mhz=1000,
        sources="fmaRate/texelRate/pixelRate/warps: values Immortalis-G720 reports through "
                "VK_ARM_shader_core_properties/builtins (same 5th-gen core); 8 cores and 1 GHz "
                "are this emulation's configuration choice.",
    ),
    "mali-g78": GpuProfile(
        key="mali-g78", device_name="Mali-G78 (emulated)", device_id=0x0078,
        shader_cores=20, warps_per_core=64, warp_width=16,
        fma_rate=32, texel_rate=4, pixel_rate=2, clock_mhz=850,
        sources="Arm's published Mali-G78 figures: 32 fp32 FMA/clk/core, 4 bilinear texels/clk, "
                "16-wide warps; pixel rate 2/clk; 20 cores, 64 warps and 850 MHz are this "
                "emulation's configuration choice.",
    ),
}
DEFAULT_PROFILE = "mali-g720"
