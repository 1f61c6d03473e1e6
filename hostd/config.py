"""Daemon settings, parsed once at the edge (CLI or embedding API) into frozen dataclasses.

`parse_address()` turns the `TESSERA_HOSTD` / `--listen` form (`unix:PATH` or
`tcp:HOST:PORT`) into an `Address`; TCP is accepted only on a loopback
address, because the stream carries application details and hostd has no
authentication.
"""
from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from tessera.schemas.frames import DEFAULT_MAX_JSON

DEFAULT_FSYNC_INTERVAL = 1.0   # seconds between fsyncs of a busy log (see docs/hostd.md)
DEFAULT_DRAIN_TIMEOUT = 10.0   # seconds connections get to finish at shutdown before they are closed
# Limits (docs/hostd.md "Limits"). Only a connection that has sent no HELLO is ever timed out:
# an application may stay idle between frames for as long as it likes.
DEFAULT_HELLO_TIMEOUT = 10.0               # seconds a new connection gets to complete its HELLO
DEFAULT_MAX_CONNECTIONS = 256              # open connections; more are closed at accept
DEFAULT_MAX_BUFFERED = 256 * 1024 * 1024   # bytes of partial frames held across all connections


class Validation(enum.Enum):
    STRICT = "strict"   # a schema violation is logged and the frame rejected (recorded, skipped by merge)
    WARN = "warn"       # logged, kept
    OFF = "off"         # not checked


@dataclass(frozen=True)
class Address:
    kind: str                    # "unix" or "tcp"
    path: Path | None = None     # unix
    host: str | None = None      # tcp
    port: int | None = None      # tcp (0: any free port, the bound one is reported)

    def __str__(self) -> str:
        if self.kind == "unix":
            return f"unix:{self.path}"
        host = f"[{self.host}]" if ":" in (self.host or "") else self.host   # IPv6, as in URLs
        return f"tcp:{host}:{self.port}"


class AddressError(ValueError):
    """An address hostd refuses to listen on or cannot parse."""


def parse_address(text: str) -> Address:
    kind, sep, rest = text.partition(":")
    if not sep or not rest:
        raise AddressError(f"{text!r}: expected unix:PATH or tcp:127.0.0.1:PORT")
    if kind == "unix":
        return Address("unix", path=Path(rest))
    if kind != "tcp":
        raise AddressError(f"{text!r}: unknown transport {kind!r} (unix or tcp)")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise AddressError(f"{text!r}: expected tcp:HOST:PORT with a port number")
    host = host.strip("[]")
    if host == "localhost":
        host = "127.0.0.1"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise AddressError(f"{text!r}: the host must be a loopback IP address such as 127.0.0.1") from None
    if not ip.is_loopback:
        raise AddressError(f"{text!r}: refusing to listen on non-loopback address {host} "
                           "(hostd has no authentication; use 127.0.0.1 or ::1)")
    return Address("tcp", host=str(ip), port=int(port))


@dataclass(frozen=True)
class DaemonConfig:
    listen: Address
    out: Path
    validate: Validation = Validation.WARN
    max_frame: int = DEFAULT_MAX_JSON           # largest JSON payload accepted; a larger length closes the connection
    fsync_interval: float = DEFAULT_FSYNC_INTERVAL
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT
    max_problem_lines: int = 10                 # per connection; further problems are counted, summarised at close
    hello_timeout: float = DEFAULT_HELLO_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_buffered: int = DEFAULT_MAX_BUFFERED
    # Folders of the socket path that must be this user's and private (0700), created so if
    # missing: the default folder, which another user could have made first in a shared /tmp.
    private_dirs: tuple[Path, ...] = ()
