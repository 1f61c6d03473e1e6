"""The daemon's transport: asyncio listener, one protocol object per connection, ordered shutdown.

Role: sockets only. The listening socket is read by our own accept
callback (not asyncio.Server) so that every accepted client is registered
at once: shutdown then knows every connection, including one accepted an
instant before it. Bytes go straight to the connection's `Ingest`
(ingest.py), which logs, decodes and checks them; this module decides only
when a transport closes. All of it runs on one event-loop thread (the main
thread for `tessera hostd`, a background thread for `EmbeddedDaemon`).

Listening: a Unix socket made owner-only (bound under umask 0177, then
chmod 0600; its folder created 0700 when hostd creates it; a stale socket
left by a dead daemon is replaced, a live one is an error), or TCP on a
loopback address, IPv4 or IPv6 (config.parse_address refuses others). The
folders in `cfg.private_dirs` (the default socket folder) must be this
user's and private, as ssh-agent and tmux require of theirs: another user
may have created them first in a shared /tmp.

Limits (config.py, docs/hostd.md "Limits"): a connection that has not
completed its HELLO within `hello_timeout` is closed (one that has may stay
idle for ever: applications pause between frames); beyond `max_connections`
open connections new ones are closed at accept; the partial frames held by
all connections together may use `max_buffered` bytes, and a connection
whose data takes the total above it is closed (its bytes are in its log).

Shutdown (`stop()`), in order: stop accepting (clients already queued by
the kernel are accepted first: they connected before the stop, and their
bytes must not be lost); let open connections finish
on their own until `drain_timeout` (or a second signal); close the rest
(`Ingest.close` fsyncs and writes each record); remove the socket file.
Everything waits on futures, nothing sleeps and polls.
"""
from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import signal
import socket
import stat

from tessera.schemas.files import private_folder
from tessera.schemas.frames import ACK

from .config import Address, DaemonConfig
from .ingest import Ingest, finish, write_failed

LOG = logging.getLogger("tessera.hostd")


class DaemonError(Exception):
    """The daemon cannot start (address in use, bad folder…)."""


class _Connection(asyncio.Protocol):
    def __init__(self, daemon: "HostDaemon") -> None:
        self.daemon = daemon        # registers us in daemon.connections; connection_lost removes us
        self.transport: asyncio.Transport | None = None
        self.ingest: Ingest | None = None
        self.done = daemon.loop.create_future()
        self._eof = False
        self.logged = 0             # bytes of this client's stream appended to its session log
        self.held = 0               # bytes of a partial frame its decoder holds (daemon.held counts all)
        self._hello_timer: asyncio.TimerHandle | None = None
        self._ack_socket: socket.socket | None = None   # a duplicate of the client's socket, for ACKs
        self._ack_rest = b""        # the unsent end of an ACK partly written

    def connection_made(self, transport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self._ack_socket = socket.fromfd(sock.fileno(), sock.family, sock.type)
        peer = transport.get_extra_info("peername")
        peer_text = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else "unix"
        try:
            self.ingest = Ingest(self.daemon.cfg, peer_text)
        except OSError as e:
            LOG.error("hostd: cannot open a session folder in %s for a %s client: %s; refusing it",
                      self.daemon.cfg.out, peer_text, e)
            transport.abort()
            return
        LOG.info("hostd: %s connected", self.ingest.client)
        self._hello_timer = self.daemon.loop.call_later(self.daemon.cfg.hello_timeout, self._no_hello)

    def _no_hello(self) -> None:
        self._hello_timer = None
        if self.ingest.hello is None and self.ingest.close_reason is None:
            self._close_for(f"no HELLO within {self.daemon.cfg.hello_timeout:g} s")
            self.transport.close()

    def _close_for(self, reason: str) -> None:
        LOG.warning("hostd: client %s: %s; closing the connection", self.ingest.client, reason)
        self.ingest.close_reason = reason

    def _hold(self) -> bool:
        """Count this connection's partial frame in the daemon-wide budget; False to close it."""
        held = self.ingest.decoder.pending
        daemon = self.daemon
        daemon.held += held - self.held
        self.held = held
        if held == 0 or daemon.held <= daemon.cfg.max_buffered:
            return True
        self._close_for(f"partial frames of all clients would hold {daemon.held} bytes (this one {held}), "
                        f"above the budget of {daemon.cfg.max_buffered}")
        return False

    def data_received(self, data: bytes) -> None:
        if self.ingest is None or self.ingest.close_reason is not None:
            return
        try:
            keep = self.ingest.feed(data)
            self.logged += len(data)
            if self._hello_timer is not None and self.ingest.hello is not None:
                self._hello_timer.cancel()
                self._hello_timer = None
            keep = keep and self._hold()
            # Acknowledge what the session log holds to clients that asked (HELLO "acks"), so they
            # can spool what this daemon might lose if it dies (schemas.frames.ACK).
            if self.ingest.hello is not None and self.ingest.hello.get("acks") is True:
                self._acknowledge()
        except OSError as e:    # the disk is full (or gone): one line, what is logged stays
            write_failed(self.ingest, e)
            keep = False
        except Exception as e:  # a bug: this connection ends, the daemon carries on
            LOG.exception("hostd: client %s: internal error while ingesting (%s); closing it", self.ingest.client, e)
            self.ingest.close_reason = f"internal error: {e}"
            keep = False
        if not keep:
            self.transport.close()

    def _acknowledge(self) -> None:
        """Send ACK(logged) on the socket itself, never with transport.write: when a write fails (the
        client was killed, its earlier ACKs perhaps unread) asyncio aborts the transport and drops
        what the client sent that is not read yet, which are the frames a killed program wrote last.
        A client that cannot take ACKs any more gets none; its stream is still read to the end. An
        ACK that finds the socket full is dropped whole (a later one says the same and more); one
        written in part is finished first, so the client never reads a torn ACK."""
        if self._ack_socket is None:
            return
        ack = ACK.pack(self.logged)
        data = self._ack_rest + ack
        try:
            sent = self._ack_socket.send(data, socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
        except BlockingIOError:
            sent = 0
        except OSError:             # the client is gone: read on, acknowledge no more
            self._close_ack_socket()
            return
        rest = len(self._ack_rest)
        if sent < rest:
            self._ack_rest = self._ack_rest[sent:]          # this ACK is dropped whole
        else:
            written = sent - rest
            self._ack_rest = ack[written:] if 0 < written < len(ack) else b""

    def _close_ack_socket(self) -> None:
        if self._ack_socket is not None:
            self._ack_socket.close()
            self._ack_socket = None

    def eof_received(self) -> bool:
        self._eof = True
        if self.ingest is not None and self.ingest.close_reason is None:
            self.ingest.eof()
        return False  # close our side too

    def connection_lost(self, exc) -> None:
        self._close_ack_socket()
        if self._hello_timer is not None:
            self._hello_timer.cancel()
            self._hello_timer = None
        self.daemon.held -= self.held
        self.held = 0
        if self.ingest is not None:
            finish(self.ingest, self._eof, self.daemon.stopping, exc)
        self.daemon.connections.discard(self)
        if not self.done.done():
            self.done.set_result(None)

    def shut(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


class HostDaemon:
    """Start with `await start()` (returns the bound address), end with `await stop()`."""

    def __init__(self, cfg: DaemonConfig) -> None:
        self.cfg = cfg
        self.loop: asyncio.AbstractEventLoop | None = None
        self.connections: set[_Connection] = set()
        self.stopping = False
        self.address: Address | None = None
        self._tasks: set[asyncio.Task] = set()
        self._socket: socket.socket | None = None
        self._hurry: asyncio.Event | None = None
        self.held = 0                # bytes of partial frames held by all connections
        self.refused = 0             # connections closed at accept (max_connections)

    async def start(self) -> Address:
        self.loop = asyncio.get_running_loop()
        self._hurry = asyncio.Event()
        try:
            private_folder(self.cfg.out)
        except OSError as e:
            raise DaemonError(f"cannot create the output folder {self.cfg.out}: {e}") from e
        listen = self.cfg.listen
        for folder in self.cfg.private_dirs:
            private_dir(folder)
        if listen.kind == "unix":
            self._socket = _unix_socket(listen)
            self.address = listen
        else:
            try:
                family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
                self._socket = socket.create_server((listen.host, listen.port), family=family, backlog=128)
            except OSError as e:
                raise DaemonError(f"cannot listen on {listen}: {e.strerror or e}") from e
            self._socket.setblocking(False)
            self.address = Address("tcp", host=listen.host, port=self._socket.getsockname()[1])
        self.loop.add_reader(self._socket.fileno(), self._accept)
        LOG.info("hostd: listening on %s; sessions in %s", self.address, self.cfg.out)
        return self.address

    def _accept(self) -> None:
        """Accept every client the kernel has queued; each is registered before any await."""
        while self._socket is not None:
            try:
                conn, _ = self._socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:   # EMFILE and the like: the client stays queued, try again later
                LOG.warning("hostd: cannot accept a client: %s", e)
                return
            if len(self.connections) >= self.cfg.max_connections:
                conn.close()             # the layer spools and retries later
                self.refused += 1
                if self.refused == 1 or self.refused % 100 == 0:
                    LOG.warning("hostd: %d connections open, the limit; closing new ones (%d so far)",
                                len(self.connections), self.refused)
                continue
            conn.setblocking(False)
            protocol = _Connection(self)
            self.connections.add(protocol)
            task = self.loop.create_task(self._attach(conn, protocol))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _attach(self, conn: socket.socket, protocol: "_Connection") -> None:
        try:
            await self.loop.connect_accepted_socket(lambda: protocol, conn)
        except Exception as e:
            LOG.warning("hostd: cannot set up a connection: %s", e)
            conn.close()
            protocol.connection_lost(e)

    def hurry(self) -> None:
        """Skip the rest of the drain (second SIGINT/SIGTERM)."""
        if self._hurry is not None:
            self._hurry.set()

    async def stop(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        if self._socket is not None:                   # 1. stop accepting, keeping the clients the
            self.loop.remove_reader(self._socket.fileno())   # kernel already queued (their bytes count)
            self._accept()
            self._socket.close()
            self._socket = None
        pending = [c.done for c in self.connections]
        if pending:                                    # 2. let connections finish on their own
            LOG.info("hostd: stopping; waiting up to %.0f s for %d connection(s) to finish",
                     self.cfg.drain_timeout, len(pending))
            drained = asyncio.ensure_future(asyncio.wait(pending, timeout=self.cfg.drain_timeout))
            hurry = asyncio.ensure_future(self._hurry.wait())
            await asyncio.wait([drained, hurry], return_when=asyncio.FIRST_COMPLETED)
            drained.cancel()
            hurry.cancel()
        for c in list(self.connections):               # 3. close the rest; each finishes writing
            c.shut()
        if pending:
            await asyncio.gather(*pending)
        if self.cfg.listen.kind == "unix":             # 4. remove the socket
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.cfg.listen.path)
        LOG.info("hostd: stopped")


def private_dir(path, uid: int | None = None) -> None:
    """Create `path` 0700 if it is missing; refuse it unless it is a real folder owned by `uid`
    (this user) that no one else may enter (tmux checks its socket folder the same way)."""
    uid = os.getuid() if uid is None else uid
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise DaemonError(f"cannot create {path}: {e.strerror or e}") from e
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise DaemonError(f"{path} is not a folder (a symbolic link?); refusing to put the socket there")
    if st.st_uid != uid or st.st_mode & 0o077:
        raise DaemonError(f"{path} belongs to uid {st.st_uid} with mode {stat.S_IMODE(st.st_mode):04o}; "
                          f"the socket folder must be yours and private (0700): remove it, or use --listen")


def _unix_socket(address: Address) -> socket.socket:
    path = address.path
    parent = path.parent
    if not parent.exists():
        try:
            parent.mkdir(mode=0o700, parents=True)
        except OSError as e:
            raise DaemonError(f"cannot create {parent}: {e}") from e
    if os.path.lexists(path):
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            raise DaemonError(f"{path} exists and is not a socket; not replacing it")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(os.fspath(path))
        except OSError as e:
            if e.errno not in (errno.ECONNREFUSED, errno.ENOENT):
                raise DaemonError(f"cannot check {path}: {e}") from e
            os.unlink(path)                             # stale: its daemon is gone
        else:
            raise DaemonError(f"another daemon is listening on {path}")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(os.fspath(path))
    except OSError as e:
        sock.close()
        raise DaemonError(f"cannot listen on {address}: {e.strerror or e}") from e
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def serve(cfg: DaemonConfig, ready=None, extra=()) -> None:
    """Run until SIGINT/SIGTERM (a second one skips the drain); `ready(address)` once listening.
    `extra`: more listeners (e.g. arm_listener.ArmListener) with start()/stop()/hurry(), started
    after the daemon and stopped with it."""
    daemon = HostDaemon(cfg)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_signal(signame: str) -> None:
        if stop.is_set():
            LOG.warning("hostd: %s again: closing connections now", signame)
            daemon.hurry()
            for x in extra:
                x.hurry()
        else:
            LOG.info("hostd: %s: shutting down", signame)
            stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):      # before listening: a client may signal as soon as it sees us
        loop.add_signal_handler(sig, on_signal, sig.name)
    try:
        address = await daemon.start()
        for x in extra:
            await x.start()
        if ready is not None:
            ready(address)
        await stop.wait()
        await asyncio.gather(daemon.stop(), *(x.stop() for x in extra))
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
