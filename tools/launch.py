"""Launching an application under Tessera: the loader environment and the session folder.

`environment()` makes the app see only the emulated Mali driver, with the
Tessera layer enabled (other explicit layers stay discoverable: the layer
folder is *added* to the loader's search path). With `hostd` set, the layer
is told where the host daemon listens (`TESSERA_HOSTD`); without it the
layer spools into the session folder when no daemon is reachable.
"""
from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tessera.vkapi import paths

LAYER_NAME = "VK_LAYER_TESSERA_timeline"
ICD_MANIFEST = paths.ICD_MANIFEST_DIR / "tessera_mali_icd.json"
LAYER_MANIFEST = paths.LAYER_MANIFEST_DIR / "VkLayer_tessera_timeline.json"


class LaunchError(Exception):
    """Tessera cannot launch the application (what is missing, and the fix)."""


@dataclass(frozen=True)
class LaunchConfig:
    session_dir: Path
    backend_manifest: Path | None = None
    gpu: str | None = None
    layer: bool = True
    hostd: str | None = None        # TESSERA_HOSTD for the app: unix:PATH or tcp:127.0.0.1:PORT


def ensure_shims() -> None:
    """Build the shims if they are missing (`make setup` normally has)."""
    if ICD_MANIFEST.exists() and LAYER_MANIFEST.exists():
        return
    from . import build_shims

    build_shims.main([])
    if not (ICD_MANIFEST.exists() and LAYER_MANIFEST.exists()):
        raise LaunchError(f"shims not built in {paths.BUILD_DIR}: run `make setup`")


def default_session_dir(app: str, root: Path = Path("tessera-out")) -> Path:
    return root / f"{Path(app).name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


def environment(cfg: LaunchConfig, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env["VK_DRIVER_FILES"] = str(ICD_MANIFEST)
    env["VK_ICD_FILENAMES"] = str(ICD_MANIFEST)  # name used by loaders before 1.3.207
    if cfg.layer:
        env["VK_ADD_LAYER_PATH"] = os.pathsep.join(filter(None, [str(paths.LAYER_MANIFEST_DIR),
                                                                   env.get("VK_ADD_LAYER_PATH")]))
        layers = [n for n in env.get("VK_INSTANCE_LAYERS", "").split(os.pathsep) if n and n != LAYER_NAME]
        env["VK_INSTANCE_LAYERS"] = os.pathsep.join([LAYER_NAME, *layers])
    env["TESSERA_SESSION_DIR"] = str(cfg.session_dir.resolve())
    if cfg.backend_manifest:
        env["TESSERA_BACKEND_ICD"] = str(Path(cfg.backend_manifest).resolve())
    if cfg.gpu:
        env["TESSERA_GPU"] = cfg.gpu
    if cfg.hostd:
        env["TESSERA_HOSTD"] = cfg.hostd
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    return env


def run(cfg: LaunchConfig, argv: list[str], **popen) -> int:
    """Run the app to completion under Tessera; its exit code (`popen`: e.g. stdout=)."""
    ensure_shims()
    cfg.session_dir.mkdir(parents=True, exist_ok=True)
    try:
        return subprocess.call(argv, env=environment(cfg), **popen)
    except FileNotFoundError as e:
        raise LaunchError(f"cannot run {argv[0]!r}: {e.strerror}") from e


def run_with_embedded_daemon(cfg: LaunchConfig, argv: list[str], **popen) -> int:
    """Run the app with a host daemon of its own for the run; returns once the logs are complete."""
    from dataclasses import replace

    from tessera.hostd.embedded import EmbeddedDaemon

    cfg.session_dir.mkdir(parents=True, exist_ok=True)
    with EmbeddedDaemon(cfg.session_dir) as daemon:
        return run(replace(cfg, hostd=daemon.address), argv, **popen)
