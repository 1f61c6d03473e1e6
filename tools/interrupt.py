"""Interrupting `tessera run`: Ctrl-C or SIGTERM stops the application, and the run still ends in order.

Role: `Interruption` handles SIGINT and SIGTERM for the whole of `tessera run` (`catching()` installs it on
the main thread and restores the previous handlers after; a signal the caller had set to be ignored, as
`nohup` or a shell's `cmd &` do, stays ignored). What a signal does depends on where the run is:

- before the application starts: it is noted, and `check()` (called just before starting it) raises
  Interrupted, so it never starts;
- while it runs (`running(proc)`): the signal is passed on to it (below: unless the terminal already
  gave it the same Ctrl-C); if it is still running KILL_AFTER seconds later, or at a second signal, it is
  killed with SIGKILL. The run then goes on as if it had ended by itself: the daemon lets the
  connections finish, the session is merged;
- while the embedded daemon lets the connections finish (`draining(hurry)`): the drain is cut short;
- while merging (`raising()`): Interrupted is raised on the main thread, and the merge stops (a signal
  that stopped the application does not stop the merge of what arrived: only a later one does).
`signum` keeps the first signal: `tessera run` then exits with 128 + it, as a shell reports a program
that signal ended.

Who gets the signal: the application runs in Tessera's process group when Tessera has a controlling
terminal (job control, and a Ctrl-C typed there, reach it as they reach any program), and in a process
group of its own otherwise; then the whole group (a wrapper script and what it started) is signalled.
A Ctrl-C typed at the terminal reaches every process of the foreground group: when Tessera's group is the
terminal's foreground group, the application has had that SIGINT already, and a second one would
interrupt its cleanup (a Python program's `finally` blocks), so none is sent; if it came from elsewhere
(`kill -INT` while Tessera is in the foreground), the SIGKILL after KILL_AFTER still stops the application.

Threads: the handler runs on the main thread (Python runs signal handlers there, between bytecodes, also
while it waits for the application or joins the daemon's thread); the SIGKILL timer on a thread of its
own. `_lock` (reentrant: the handler may run on the main thread while it holds it) guards `_app`, which
`running()` clears once the application is reaped. Its own pid is signalled through a pidfd, which
cannot reach a process that reused the pid; its group with killpg, only before it is reaped (a reused
pid is not a group leader).
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

SIGNALS = (signal.SIGINT, signal.SIGTERM)
KILL_AFTER = 5.0    # seconds an application may take to end after the signal before it is killed


class Interrupted(Exception):
    """The run was interrupted by `signum` where it could not go on (before the application, or merging)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass
class _App:
    proc: subprocess.Popen
    pidfd: int | None       # None where Linux has no pidfd_open
    group: bool             # its own process group (pgid == pid), signalled as a whole


def terminal_group() -> int | None:
    """The foreground process group of this process's controlling terminal; None without one."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.tcgetpgrp(fd)
    except OSError:
        return None
    finally:
        os.close(fd)


class Interruption:
    def __init__(self, *, own_group: bool | None = None, kill_after: float = KILL_AFTER) -> None:
        self.own_group = terminal_group() is None if own_group is None else own_group
        self.kill_after = kill_after
        self.signum: int | None = None          # the first signal received
        self.forwarded: int | None = None       # the signal passed on to the application
        self.killed: str | None = None          # why the application was killed with SIGKILL
        self._lock = threading.RLock()
        self._app: _App | None = None
        self._timer: threading.Timer | None = None
        self._hurry: Callable[[], None] | None = None
        self._raise = False

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""

    # -- phases of the run ---------------------------------------------------------------------------------

    @contextlib.contextmanager
    def catching(self) -> Iterator["Interruption"]:
        """Handle SIGINT and SIGTERM meanwhile (on the main thread only; elsewhere nothing changes)."""
        previous = {}
        try:
            for signum in SIGNALS:
                old = signal.getsignal(signum)
                if old is not signal.SIG_IGN:
                    previous[signum] = signal.signal(signum, self._handle)
        except ValueError:          # not the main thread: signals stay where they were
            pass
        try:
            yield self
        finally:
            for signum, old in previous.items():
                signal.signal(signum, old)

    def check(self) -> None:
        """Interrupted if a signal came before the application started."""
        if self.signum is not None:
            raise Interrupted(self.signum)

    @contextlib.contextmanager
    def running(self, proc: subprocess.Popen) -> Iterator[None]:
        """`proc` (started in a group of its own when `own_group`) receives the signals until this ends;
        end it once `proc` is reaped."""
        try:
            pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            pidfd = None
        with self._lock:
            self._app = _App(proc, pidfd, self.own_group)
            if self.signum is not None:          # came while it was starting
                self._stop_app(self.signum)
        try:
            yield
        finally:
            with self._lock:
                self._app = None
                if self._timer is not None:
                    self._timer.cancel()
            if pidfd is not None:
                os.close(pidfd)

    @contextlib.contextmanager
    def draining(self, hurry: Callable[[], None]) -> Iterator[None]:
        """A signal calls `hurry` (it must be safe to call from a signal handler) meanwhile."""
        self._hurry = hurry
        try:
            yield
        finally:
            self._hurry = None

    @contextlib.contextmanager
    def raising(self) -> Iterator[None]:
        """A signal raises Interrupted meanwhile (one that came before does not)."""
        self._raise = True
        try:
            yield
        finally:
            self._raise = False

    # -- the handler -------------------------------------------------------------------------------------

    def _handle(self, signum: int, frame) -> None:
        first = self.signum is None
        if first:
            self.signum = signum
        if self._raise:
            raise Interrupted(signum)
        with self._lock:
            if self._app is not None:
                if first:
                    self._stop_app(signum)
                else:
                    self._kill_app(f"a second {signal.Signals(signum).name}")
                return
        if self._hurry is not None:
            self._hurry()

    def _stop_app(self, signum: int) -> None:
        """Pass `signum` on (unless the terminal did), and arm the SIGKILL timer; once (the handler may
        run inside `running()`, between its attaching the application and its own look at `signum`).
        Holding `_lock`."""
        if self._timer is not None:
            return
        app = self._app
        from_terminal = (signum == signal.SIGINT and not app.group and terminal_group() == os.getpgrp())
        if not from_terminal:
            self._send(app, signum)
            self.forwarded = signum
        reason = f"still running {self.kill_after:g} s after {signal.Signals(signum).name}"
        self._timer = threading.Timer(self.kill_after, self._kill_app, args=(reason,))
        self._timer.daemon = True
        self._timer.start()

    def _kill_app(self, reason: str) -> None:
        with self._lock:
            if self._app is not None and self.killed is None:
                self.killed = reason
                self._send(self._app, signal.SIGKILL)

    @staticmethod
    def _send(app: _App, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):   # it ended meanwhile (and is not reaped yet)
            if app.group:
                os.killpg(app.proc.pid, signum)
            elif app.pidfd is not None:
                signal.pidfd_send_signal(app.pidfd, signum)
            else:
                app.proc.send_signal(signum)
