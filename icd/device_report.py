"""The differences between a GPU's real-device profile and what its emulation reports, for people.

Role: `tessera doctor --gpu NAME` and docs/backends.md show, for a GPU with a Vulkan profile, every
capability the emulated device reports other than the real device, with its reason. The rules are
icd/device_clamp.py's (the same the driver applies); the backend's own capabilities come from
`vulkaninfo --json=0 -o FILE` run on the backend driver alone (a Vulkan Profiles file, read by
icd/vulkan_profile.py). Runs in the tool's process, never in the driver's.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .device_clamp import Difference, differences
from .vulkan_profile import VulkanProfile, load


def backend_export(out: Path, backend_manifest: Path | None = None, timeout: float = 120) -> Path:
    """Write the backend driver's capabilities (lavapipe's by default), as vulkaninfo exports them,
    to `out`."""
    from .backend import default_manifest

    vulkaninfo = shutil.which("vulkaninfo")
    if vulkaninfo is None:
        raise RuntimeError("vulkaninfo is missing: `make setup` installs vulkan-tools")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VK_", "TESSERA_"))}
    env.update(VK_DRIVER_FILES=str(backend_manifest or default_manifest()),
               XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"))
    r = subprocess.run([vulkaninfo, "--json=0", "-o", str(out)], env=env, capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode != 0 or not out.exists():
        raise RuntimeError(f"vulkaninfo on the backend failed ({r.returncode}): {r.stderr.strip()[-400:]}")
    return out


def backend_profile(backend_manifest: Path | None = None) -> VulkanProfile:
    """The backend driver's capabilities (lavapipe's by default), read from vulkaninfo's export."""
    with tempfile.TemporaryDirectory(prefix="tessera-backend-") as tmp:
        return load(backend_export(Path(tmp) / "backend.json", backend_manifest))


def gpu_differences(profile_file: Path, backend: VulkanProfile,
                    layer_extensions: dict[str, int] | None = None) -> list[Difference]:
    """Every difference between the profile and what the emulated device reports over `backend`:
    the extensions the driver adds or withholds included, and `layer_extensions`, those the Tessera
    layer adds above it when it runs (layer/shim_spec.py LAYER_DEVICE_EXTENSIONS; the caller passes
    them: icd/ does not import layer/)."""
    from tessera.vkapi.commands import UNTRACKED_WORKLOAD_EXTENSIONS

    from .identity import EMULATED_DEVICE_EXTENSIONS

    return differences(load(profile_file), backend, EMULATED_DEVICE_EXTENSIONS, UNTRACKED_WORKLOAD_EXTENSIONS,
                       layer_extensions or {})


def _show(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, int) and not isinstance(v, bool) and v > 0xFFFF and v & (v - 1) == 0:
        return hex(v)
    text = str(v)
    return text if len(text) <= 60 else text[:57] + "..."


def lines(found: list[Difference]) -> list[str]:
    """One line per difference: path, the profile's value -> the reported one, and why."""
    return [f"{d.path}: {_show(d.profile)} -> {_show(d.reported)}  ({d.reason})" for d in found]
