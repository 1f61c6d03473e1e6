"""Launching an application under Tessera: the loader environment and the session folder.

`environment()` makes the app see only the emulated Mali driver, with the
Tessera layer enabled (other explicit layers stay discoverable: the layer
folder is *added* to the loader's search path), on top of the user's layers
unless their VK_INSTANCE_LAYERS places it below some of them. The driver is *added*
(`VK_ADD_DRIVER_FILES`) and selected (`VK_LOADER_DRIVERS_SELECT`) rather
than named in `VK_DRIVER_FILES`: a program that reads that variable and
loads the driver itself, bypassing the loader, would run without the layer;
now it finds no such variable and goes through the loader like any other.
With `hostd` set, the layer is told where the host daemon listens
(`TESSERA_HOSTD`); without it the layer spools into the session folder when
no daemon is reachable.

`prepare_session_dir()` checks the session folder before the app starts: it
must be writable (or nothing the run produces could be kept) and must not
hold an earlier session (the merge would mix the two) unless replacing it
was asked for. It first takes the folder's lock (session_lock.py), held until
the run is over: two runs on one folder would mix their events, so the
second is refused, naming the first.

`run()` starts the app and waits for it; with an `Interruption`
(interrupt.py), Ctrl-C and SIGTERM stop the app and the run ends in order.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tessera.schemas import staged
from tessera.schemas.files import private_folder
from tessera.vkapi import paths

from .interrupt import Interruption
from .session_lock import LOCK_NAME, LockError, SessionBusy, SessionLock

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
    instrument: bool = False        # TESSERA_INSTRUMENT: the layer drives shader instrumentation
    regions: str | None = None      # TESSERA_REGIONS: counters ("all" or names) per region of every render pass
    gpu_profile: Path | None = None  # TESSERA_GPU_PROFILE: a Vulkan Profiles JSON the emulated device reports
    content: bool = False           # TESSERA_CONTENT: the layer describes every draw's content (layer/content.py)
    counters: str | None = None     # TESSERA_COUNTERS: modelled, measured (icd/measured_counters.py) or 0 (off)


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


# What Tessera itself writes into a session folder; --force replaces only a folder holding nothing else.
SESSION_FILES = ("gpu.perfetto-trace", "merged.perfetto-trace", "summary.txt", "app-output.txt")
SESSION_SUFFIXES = (".spool", ".perfetto-trace", ".tessera-log", ".json", ".jsonl", ".tmp", ".arm-log", ".metadata")


def _is_session_file(name: str) -> bool:
    """Whether `name` is one Tessera writes in a session folder (a stage: tessera.schemas.staged)."""
    target, sep, pid = name.rpartition(staged.SUFFIX)
    if sep and pid.isdigit():
        name = target
    return name in SESSION_FILES or name.endswith(SESSION_SUFFIXES)


def _is_session_entry(path: Path) -> bool:
    if path.is_dir():   # one folder per connection: conn-<n> or <process>-<pid>-<n>
        return all(p.is_file() and _is_session_file(p.name) for p in path.iterdir())
    return _is_session_file(path.name)


def prepare_session_dir(session: Path, force: bool = False) -> SessionLock:
    """Create `session`, or empty it with `force`, holding its lock (tools/session_lock.py: release it when
    the run is over); LaunchError if it cannot hold this run's outputs or another run holds it."""
    if session.exists() and not session.is_dir():
        raise LaunchError(f"--out {session}: exists and is not a folder")
    try:
        private_folder(session)
        lock = SessionLock.acquire(session)     # before looking inside: a run holding it is writing there
    except SessionBusy as e:
        raise LaunchError(f"--out {session}: {e}") from None
    except LockError as e:
        raise LaunchError(f"--out {session}: {e}") from None
    except OSError as e:
        raise _unwritable(session, e) from e
    try:
        _empty_session_dir(session, force)
        with tempfile.NamedTemporaryFile(dir=session, prefix=".write-check-"):
            pass
    except OSError as e:
        lock.release()
        raise _unwritable(session, e) from e
    except BaseException:
        lock.release()
        raise
    return lock


def _empty_session_dir(session: Path, force: bool) -> None:
    entries = [e for e in session.iterdir() if e.name != LOCK_NAME]
    if entries and not force:
        raise LaunchError(f"--out {session} holds an earlier session ({len(entries)} entries); its "
                          "outputs would be merged with this run's. Choose another folder, or pass "
                          "--force to replace it.")
    foreign = [e.name for e in entries if not _is_session_entry(e)]
    if foreign:
        raise LaunchError(f"--out {session}: not replaced, it holds files Tessera did not write: "
                          f"{', '.join(sorted(foreign)[:5])}")
    for entry in entries:
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


def _unwritable(session: Path, e: OSError) -> LaunchError:
    return LaunchError(f"--out {session}: cannot write there ({e.strerror}); the run's trace and "
                       "metadata would be lost. Choose a writable folder.")


def check_executable(argv: list[str], env: dict[str, str]) -> None:
    """LaunchError unless argv[0] names a program the OS can start (found on PATH, executable)."""
    program = argv[0]
    found = shutil.which(program, path=env.get("PATH")) if os.sep not in program else program
    if found is None or not Path(found).exists():
        raise LaunchError(f"cannot run {program!r}: no such file" + ("" if os.sep in program else " on PATH"))
    if Path(found).is_dir():
        raise LaunchError(f"cannot run {program!r}: it is a folder")
    if not os.access(found, os.X_OK):
        raise LaunchError(f"cannot run {program!r}: not executable (chmod +x it, or run it through its "
                          "interpreter, e.g. `tessera run -- python3 script.py`)")


def environment(cfg: LaunchConfig, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    for name in ("VK_DRIVER_FILES", "VK_ICD_FILENAMES"):   # they would override the selection below
        env.pop(name, None)
    env["VK_ADD_DRIVER_FILES"] = str(ICD_MANIFEST)
    env["VK_LOADER_DRIVERS_SELECT"] = f"*{ICD_MANIFEST.name}"
    if cfg.layer:
        named = [n for n in env.get("VK_INSTANCE_LAYERS", "").split(os.pathsep) if n]
        # Tessera's layer goes on top, unless the user's VK_INSTANCE_LAYERS names it below other layers (e.g. Arm's
        # ML Graph emulation layer above it, docs/ml.md): then their order stands, and Tessera's folder comes after
        # theirs on the path, since loader 1.3.239 stacks explicit layers in the order their folders are searched.
        below = LAYER_NAME in named and named[0] != LAYER_NAME
        folders = [env.get("VK_ADD_LAYER_PATH"), str(paths.LAYER_MANIFEST_DIR)]
        env["VK_ADD_LAYER_PATH"] = os.pathsep.join(filter(None, folders if below else folders[::-1]))
        env["VK_INSTANCE_LAYERS"] = os.pathsep.join(named if below else
                                                    [LAYER_NAME, *(n for n in named if n != LAYER_NAME)])
    env["TESSERA_SESSION_DIR"] = str(cfg.session_dir.resolve())
    if cfg.backend_manifest:
        env["TESSERA_BACKEND_ICD"] = str(Path(cfg.backend_manifest).resolve())
    if cfg.gpu:
        env["TESSERA_GPU"] = cfg.gpu
    if cfg.gpu_profile:
        env["TESSERA_GPU_PROFILE"] = str(Path(cfg.gpu_profile).resolve())
    if cfg.hostd:
        env["TESSERA_HOSTD"] = cfg.hostd
    if cfg.instrument:
        env["TESSERA_INSTRUMENT"] = "1"
    if cfg.regions:
        env["TESSERA_REGIONS"] = cfg.regions
    if cfg.content:
        env["TESSERA_CONTENT"] = "1"
    if cfg.counters is not None:
        env["TESSERA_COUNTERS"] = {"off": "0"}.get(cfg.counters, cfg.counters)
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    return env


def run(cfg: LaunchConfig, argv: list[str], *, interruption: Interruption | None = None, **popen) -> int:
    """Run the app to completion under Tessera; its exit code, -N when signal N ended it (`popen`: e.g.
    stdout=). With `interruption` (tools/interrupt.py), SIGINT and SIGTERM stop the app: Interrupted if
    one came before it started."""
    ensure_shims()
    private_folder(cfg.session_dir)
    env = environment(cfg)
    check_executable(argv, env)
    if interruption is not None:
        interruption.check()
        if interruption.own_group:
            popen["process_group"] = 0
    try:
        proc = subprocess.Popen(argv, env=env, **popen)
    except OSError as e:
        raise LaunchError(f"cannot run {argv[0]!r}: {e.strerror}") from e
    with proc:
        if interruption is not None:
            with interruption.running(proc):
                return proc.wait()
        try:
            return proc.wait()
        except BaseException:       # as subprocess.call: nothing outlives the caller
            proc.kill()
            raise


def run_with_embedded_daemon(cfg: LaunchConfig, argv: list[str], *, arm_listen: tuple = (),
                             interruption: Interruption | None = None, **popen) -> int:
    """Run the app with a host daemon of its own for the run; returns once the logs are complete.
    `arm_listen`: addresses (hostd.arm_listener.parse_arm_address) where that daemon also accepts
    Arm's GPU Timeline layer, into the same session folder. `interruption`: as for run(); a signal
    while the daemon lets the connections finish cuts that short."""
    from dataclasses import replace

    from tessera.hostd.daemon import DaemonError
    from tessera.hostd.embedded import EmbeddedDaemon

    private_folder(cfg.session_dir)
    daemon = EmbeddedDaemon(cfg.session_dir, arm_listen=arm_listen)
    try:
        daemon.start()
    except DaemonError as e:        # e.g. an Arm address another daemon holds
        raise LaunchError(f"cannot start the host daemon for the run: {e}") from e
    try:
        return run(replace(cfg, hostd=daemon.address), argv, interruption=interruption, **popen)
    finally:
        if interruption is None:
            daemon.stop()
        else:
            with interruption.draining(daemon.hurry):
                daemon.stop()
