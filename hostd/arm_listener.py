"""hostd's second listener: Arm's GPU Timeline layer over Arm's comms protocol.

Role: sockets only, like daemon.py; each connection's bytes go to an
`ArmIngest` (arm_ingest.py), which logs them, decodes them and says what to
reply. Started beside the HostDaemon by `tessera hostd --arm-listen ADDRESS`
(daemon.serve's `extra`), on the same event-loop thread, into the same
output folder.

Addresses (`parse_arm_address`): `abstract:NAME` (Linux abstract Unix
socket; Arm's layer connects to `abstract:lglcomms`), `unix:PATH`, and
`tcp:HOST:PORT` on a loopback address (an Android device's layer reaches it
through `adb forward`/`adb reverse`). An abstract socket has no file
permissions, so a connection is accepted only from a peer with this user's
uid (or root), checked with SO_PEERCRED.

Limits: a connection whose first complete message has not arrived within
`hello_timeout` is closed; beyond `max_connections` open Arm connections new
ones are closed at accept. Shutdown (`stop()`): stop accepting, let
connections finish until `drain_timeout`, close the rest (each fsyncs its
log and writes its record), remove a socket file.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct

from tessera.schemas.arm_wire import ABSTRACT_SOCKET
from tessera.schemas.files import private_folder

from .arm_ingest import ArmIngest
from .ingest import finish, write_failed
from .config import Address, AddressError, DaemonConfig, parse_address

LOG = logging.getLogger("tessera.hostd")
_PEERCRED = struct.Struct("3i")     # struct ucred: pid, uid, gid


def parse_arm_address(text: str) -> Address:
    """`abstract:NAME` (Address kind "abstract", the name in `host`), else parse_address's forms."""
    if text == "abstract":
        text = f"abstract:{ABSTRACT_SOCKET}"
    kind, sep, rest = text.partition(":")
    if kind == "abstract":
        if not rest or "\0" in rest or len(rest.encode()) > 107:
            raise AddressError(f"{text!r}: expected abstract:NAME (1..107 bytes)")
        return Address("abstract", host=rest)
    return parse_address(text)


def describe(address: Address) -> str:
    return f"abstract:{address.host}" if address.kind == "abstract" else str(address)


class _ArmConnection(asyncio.Protocol):
    def __init__(self, listener: "ArmListener") -> None:
        self.listener = listener
        self.transport: asyncio.Transport | None = None
        self.ingest: ArmIngest | None = None
        self.done = listener.loop.create_future()
        self._eof = False
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        cfg = self.listener.cfg
        sock = transport.get_extra_info("socket")
        peer = transport.get_extra_info("peername")
        peer_text = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else "unix"
        if sock is not None and sock.family == socket.AF_UNIX:
            try:
                _, uid, _ = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
            except OSError:
                uid = -1
            if uid not in (os.getuid(), 0):
                LOG.warning("hostd: refusing an Arm layer connection from uid %d (not this user)", uid)
                transport.abort()
                return
        if len(self.listener.connections) > cfg.max_connections:
            LOG.warning("hostd: %d Arm connections open, the limit; closing a new one", cfg.max_connections)
            transport.abort()
            return
        try:
            self.ingest = ArmIngest(cfg, peer_text)
        except OSError as e:
            LOG.error("hostd: cannot open a session folder in %s for an Arm client: %s; refusing it", cfg.out, e)
            transport.abort()
            return
        LOG.info("hostd: %s connected", self.ingest.client)
        self._timer = self.listener.loop.call_later(cfg.hello_timeout, self._silent)

    def _silent(self) -> None:
        self._timer = None
        if self.ingest is not None and self.ingest.messages == 0 and self.ingest.close_reason is None:
            self.ingest.close_reason = f"no complete message within {self.listener.cfg.hello_timeout:g} s"
            LOG.warning("hostd: client %s: %s; closing the connection", self.ingest.client, self.ingest.close_reason)
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.ingest is None or self.ingest.close_reason is not None:
            return
        try:
            keep, reply = self.ingest.feed(data)
            if reply:
                self.transport.write(reply)
        except OSError as e:    # the disk is full (or gone): one line, what is logged stays
            write_failed(self.ingest, e)
            keep = False
        except Exception as e:  # a bug: this connection ends, the daemon carries on
            LOG.exception("hostd: client %s: internal error while ingesting (%s); closing it", self.ingest.client, e)
            self.ingest.close_reason = f"internal error: {e}"
            keep = False
        if self._timer is not None and self.ingest.messages:
            self._timer.cancel()
            self._timer = None
        if not keep:
            self.transport.close()

    def eof_received(self) -> bool:
        self._eof = True
        if self.ingest is not None and self.ingest.close_reason is None:
            self.ingest.eof()
        return False

    def connection_lost(self, exc) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.ingest is not None:
            finish(self.ingest, self._eof, self.listener.stopping, exc)
        self.listener.connections.discard(self)
        if not self.done.done():
            self.done.set_result(None)


class ArmListener:
    """`await start()` returns the bound addresses; `await stop()` ends in order (module docstring)."""

    def __init__(self, cfg: DaemonConfig, addresses: list[Address]) -> None:
        self.cfg = cfg
        self.addresses = addresses
        self.bound: list[Address] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        self.connections: set[_ArmConnection] = set()
        self.stopping = False
        self._servers: list[asyncio.AbstractServer] = []
        self._hurry: asyncio.Event | None = None

    def _protocol(self) -> _ArmConnection:
        c = _ArmConnection(self)
        self.connections.add(c)
        return c

    async def start(self) -> list[Address]:
        from .daemon import DaemonError, _unix_socket

        self.loop = asyncio.get_running_loop()
        self._hurry = asyncio.Event()
        private_folder(self.cfg.out)
        for address in self.addresses:
            if address.kind == "abstract":
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.bind("\0" + address.host)
                except OSError as e:
                    sock.close()
                    raise DaemonError(f"cannot listen on abstract:{address.host}: {e.strerror or e}") from e
                sock.listen(128)
                sock.setblocking(False)
                bound = address
            elif address.kind == "unix":
                sock = _unix_socket(address)
                bound = address
            else:
                try:
                    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
                    sock = socket.create_server((address.host, address.port), family=family, backlog=128)
                except OSError as e:
                    raise DaemonError(f"cannot listen on {address}: {e.strerror or e}") from e
                sock.setblocking(False)
                bound = Address("tcp", host=address.host, port=sock.getsockname()[1])
            self._servers.append(await self.loop.create_server(self._protocol, sock=sock))
            self.bound.append(bound)
            LOG.info("hostd: Arm GPU Timeline layer: listening on %s", describe(bound))
        return self.bound

    def hurry(self) -> None:
        if self._hurry is not None:
            self._hurry.set()

    async def stop(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        for server in self._servers:
            server.close()
        pending = [c.done for c in self.connections]
        if pending:
            drained = asyncio.ensure_future(asyncio.wait(pending, timeout=self.cfg.drain_timeout))
            hurry = asyncio.ensure_future(self._hurry.wait())
            await asyncio.wait([drained, hurry], return_when=asyncio.FIRST_COMPLETED)
            drained.cancel()
            hurry.cancel()
        for c in list(self.connections):
            if c.transport is not None and not c.transport.is_closing():
                c.transport.close()
        if pending:
            await asyncio.gather(*pending)
        for address in self.bound:
            if address.kind == "unix":
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(address.path)
