"""A daemon inside another program (`tessera run`), on a private Unix socket.

    with EmbeddedDaemon(session_dir) as hostd:
        env["TESSERA_HOSTD"] = hostd.address
        subprocess.call(app, env=env)
    # here every connection has ended (or was closed after drain_timeout)
    # and every log is fsynced and has its session.json
    result = merge_session(session_dir)

Threads: the daemon's event loop runs on one background thread, started
in `__enter__` and joined in `__exit__`; the caller's thread only waits on
threading events. The socket lives in a fresh 0700 folder from
`tempfile.mkdtemp` (short path: Unix socket paths are limited to ~107 bytes),
removed at exit. `listen=` picks another address instead (tests, TCP).

`hurry()` (any thread, or a signal handler) closes the connections still open
while `stop()` waits for them: `tessera run` calls it at a signal then.

`arm_listen=` (addresses from arm_listener.parse_arm_address, e.g. `abstract:lglcomms`)
also starts an ArmListener on the same loop thread, with the same settings and
output folder, as `tessera hostd --arm-listen` does: Arm's GPU Timeline layer
then streams into the run's session (`tessera run --arm-listen`, docs/arm.md).
It is started after the daemon and stopped with it (in parallel, each in
order); `arm_bound` lists where it listens. arm_listener is imported only then.
"""
from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tessera.schemas.frames import DEFAULT_MAX_JSON

from .config import (DEFAULT_DRAIN_TIMEOUT, DEFAULT_HELLO_TIMEOUT, DEFAULT_MAX_BUFFERED, DEFAULT_MAX_CONNECTIONS,
                     Address, DaemonConfig, Validation)
from .daemon import HostDaemon

if TYPE_CHECKING:   # imported when used: the merge loads the Perfetto protos
    from .merge import MergeResult
    from .summary import Summary


class EmbeddedDaemon:
    def __init__(self, session_dir: Path, *, validate: Validation = Validation.WARN,
                 max_frame: int = DEFAULT_MAX_JSON, drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
                 socket_dir: Path | None = None, listen: Address | None = None,
                 hello_timeout: float = DEFAULT_HELLO_TIMEOUT, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 max_buffered: int = DEFAULT_MAX_BUFFERED, arm_listen: Sequence[Address] = ()) -> None:
        self.session_dir = Path(session_dir)
        self._listen = listen
        self._arm_listen = tuple(arm_listen)
        self.arm_bound: list[Address] = []
        self._options = dict(validate=validate, max_frame=max_frame, drain_timeout=drain_timeout,
                             hello_timeout=hello_timeout, max_connections=max_connections, max_buffered=max_buffered)
        self._socket_root = socket_dir
        self._socket_dir: Path | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._listeners: list = []          # the ArmListener, when arm_listen asks for one
        self._error: BaseException | None = None
        self.daemon: HostDaemon | None = None
        self.bound: Address | None = None

    @property
    def address(self) -> str:
        """The `TESSERA_HOSTD` value for the application."""
        if self.bound is None:
            raise RuntimeError("the embedded daemon is not running")
        return str(self.bound)

    def __enter__(self) -> "EmbeddedDaemon":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        listen = self._listen
        if listen is None:
            self._socket_dir = Path(tempfile.mkdtemp(prefix="tessera-hostd-", dir=self._socket_root))
            listen = Address("unix", path=self._socket_dir / "hostd.sock")
        cfg = DaemonConfig(listen, self.session_dir, **self._options)
        self._thread = threading.Thread(target=self._main, args=(cfg,), name="tessera-hostd", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            self._cleanup()
            raise self._error

    def stop(self) -> None:
        """Stop in order (stop accepting, drain, close, finish writing) and wait for it."""
        if self._thread is None:
            return
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join()
        self._thread = None
        self._cleanup()
        if self._error is not None:
            raise self._error

    def hurry(self) -> None:
        """Cut `stop()`'s wait for the open connections short: they are closed now (each still finishes
        writing its log), as a second signal does to `tessera hostd`. From any thread, also a signal
        handler; nothing happens unless the daemon is running."""
        loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self._hurry)
        except RuntimeError:    # the loop has closed: stop() has finished
            pass

    def _hurry(self) -> None:
        for x in [self.daemon, *self._listeners]:
            if x is not None:
                x.hurry()

    def _cleanup(self) -> None:
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None

    def _main(self, cfg: DaemonConfig) -> None:
        try:
            asyncio.run(self._serve(cfg))
        except BaseException as e:  # reported to the caller's thread
            self._error = e
        finally:
            self._ready.set()

    async def _serve(self, cfg: DaemonConfig) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self.daemon = HostDaemon(cfg)
        self.bound = await self.daemon.start()
        listeners = []
        if self._arm_listen:
            from .arm_listener import ArmListener

            arm = ArmListener(cfg, list(self._arm_listen))
            try:
                self.arm_bound = await arm.start()
            except BaseException:
                await asyncio.gather(self.daemon.stop(), arm.stop())
                raise
            listeners.append(arm)
        self._listeners = listeners
        self._ready.set()
        await self._stop.wait()
        await asyncio.gather(self.daemon.stop(), *(x.stop() for x in listeners))


def __getattr__(name: str):
    """merge_session and MergeResult, re-exported for embedders, imported when first asked for: merge and
    summary load the Perfetto protos (~25 ms), which `tessera run` needs only once the program has ended."""
    if name in ("merge_session", "MergeResult"):
        from . import merge
        return getattr(merge, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def summary(source: "MergeResult | Summary | Path", top: int = 10) -> str:
    """The report table (frames, submits, workloads by type, GPU time per queue, longest workloads)
    of a MergeResult, a Summary, or a merged trace file."""
    from .merge import MergeResult
    from .summary import Summary, format_summary, summarize_trace

    if isinstance(source, MergeResult):
        return format_summary(source.summary) + "".join(f"\n{line}" for line in layer_warnings(source))
    if isinstance(source, Summary):
        return format_summary(source)
    return format_summary(summarize_trace(Path(source), top))


def layer_warnings(result: "MergeResult") -> list[str]:
    """One loud line per process whose GPU work arrived without any metadata from the layer."""
    return [f"WARNING: {count} GPU event(s) of pid {pid} arrived without the Tessera layer: it never loaded in "
            "that process, so nothing is tagged (was it disabled, e.g. VK_LOADER_LAYERS_DISABLE, or did the "
            "program load the driver itself? its stderr says if the layer refused to load)"
            for pid, count in sorted(result.events_without_layer.items())]
