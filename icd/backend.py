"""The backend driver the emulated Mali executes on (Mesa lavapipe by default).

Finds its manifest, opens its library privately (RTLD_LOCAL, so its
`vk_icd*` exports never clash with ours) and negotiates the loader-ICD
interface with it, exactly as the Khronos loader would.

Default backend, in order (`default_manifest()`, the one place that decides):
1. the private Mesa 25 lavapipe that `make setup` extracts on Debian 12 from
   the bookworm-backports suite (`PRIVATE_MANIFEST`, written by
   tools/backend_setup.py; see docs/backends.md);
2. the system's lavapipe, found by globbing the standard manifest folders
   (`system_manifest()`: Mesa 22.3 names it lvp_icd.<arch>.json, Mesa 25
   lvp_icd.json).

`python -m tessera.icd.backend` prints the default manifest (for VK_DRIVER_FILES in a shell).
"""
from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass
from pathlib import Path

from tessera.vkapi import paths

MANIFEST_DIRS = ("/usr/local/share/vulkan/icd.d", "/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d")
DEFAULT_BACKEND_STEM = "lvp_icd"
# Written by tools/backend_setup.py (`make setup`) next to the extracted Mesa 25 tree.
PRIVATE_BACKEND_DIR = paths.BUILD_DIR / "backend"
PRIVATE_MANIFEST = PRIVATE_BACKEND_DIR / "lvp_icd.json"
MAX_INTERFACE_VERSION = 5  # what this driver implements (loader-ICD interface, LoaderDriverInterface.md)


class BackendError(Exception):
    """The backend driver cannot be found, opened or negotiated with."""


def private_manifest(manifest: Path = PRIVATE_MANIFEST) -> Path | None:
    """The private Mesa 25 lavapipe manifest from `make setup`, if it and its library are there."""
    try:
        return manifest if manifest.is_file() and Path(library_path(manifest)).is_file() else None
    except BackendError:
        return None


def system_manifest(dirs=MANIFEST_DIRS) -> Path:
    """The system's lavapipe manifest (any Mesa): lvp_icd.<this arch>.json or lvp_icd.json.

    Globbed, not named: Mesa 22.3 writes lvp_icd.x86_64.json, Mesa 25 lvp_icd.json.
    A manifest for another architecture (lvp_icd.i686.json) is never chosen.
    """
    xdg = [Path(p) / "vulkan/icd.d" for p in os.environ.get("XDG_DATA_DIRS", "").split(":") if p]
    wanted = {f"{DEFAULT_BACKEND_STEM}.{platform.machine()}.json", f"{DEFAULT_BACKEND_STEM}.json"}
    for d in [*map(Path, dirs), *xdg]:
        for candidate in sorted(d.glob(f"{DEFAULT_BACKEND_STEM}*.json")):
            if candidate.name in wanted and candidate.is_file():
                return candidate
    raise BackendError(f"no lavapipe manifest ({DEFAULT_BACKEND_STEM}*.json) in {', '.join(dirs)}: "
                       "install mesa-vulkan-drivers or set TESSERA_BACKEND_ICD to a driver manifest")


def default_manifest(dirs=MANIFEST_DIRS) -> Path:
    """The backend used when none is named: the private Mesa 25 lavapipe, else the system's."""
    return private_manifest() or system_manifest(dirs)


def library_path(manifest: Path) -> str:
    try:
        data = json.loads(manifest.read_text())
        path = data["ICD"]["library_path"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BackendError(f"backend manifest {manifest}: cannot read ICD.library_path ({e})") from e
    # Per the loader: a path with a separator is relative to the manifest; a bare name is searched.
    if "/" in path and not os.path.isabs(path):
        path = str((manifest.parent / path).resolve())
    return path


@dataclass
class Backend:
    manifest: Path
    library: str
    gipa: object       # PFN_vkGetInstanceProcAddr
    gpdpa: object      # PFN_vkGetPhysicalDeviceProcAddr_loader or None
    negotiate: object  # PFN_vk_icdNegotiateLoaderICDInterfaceVersion or None
    interface_version: int = 0


def open_backend(ffi, lib, manifest: Path) -> Backend:
    path = library_path(manifest)
    handle = lib.dlopen(path.encode(), lib.RTLD_NOW | lib.RTLD_LOCAL)
    if handle == ffi.NULL:
        raise BackendError(f"cannot open backend driver {path} (from {manifest}): "
                           f"{ffi.string(lib.dlerror()).decode()}")

    def sym(name: str, ctype: str):
        p = lib.dlsym(handle, name.encode())
        return ffi.cast(ctype, p) if p != ffi.NULL else None

    gipa = sym("vk_icdGetInstanceProcAddr", "PFN_vkGetInstanceProcAddr")
    if gipa is None:
        raise BackendError(f"backend driver {path} does not export vk_icdGetInstanceProcAddr")
    return Backend(manifest, path, gipa,
                   sym("vk_icdGetPhysicalDeviceProcAddr", "PFN_vkGetPhysicalDeviceProcAddr_loader"),
                   sym("vk_icdNegotiateLoaderICDInterfaceVersion", "PFN_vk_icdNegotiateLoaderICDInterfaceVersion"))


def negotiate(ffi, backend: Backend, loader_version: int) -> int:
    """The interface version all three agree on: loader, this driver, backend."""
    version = min(loader_version, MAX_INTERFACE_VERSION)
    if backend.negotiate is not None:
        v = ffi.new("uint32_t *", version)
        if backend.negotiate(v) != 0:
            raise BackendError(f"backend {backend.library} refused loader-ICD interface version {version}")
        version = min(version, v[0])
    else:
        version = min(version, 1)
    backend.interface_version = version
    return version


if __name__ == "__main__":
    print(default_manifest())
