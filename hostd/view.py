"""Serve one trace file to ui.perfetto.dev, as Perfetto's `open_trace_in_ui` does.

The UI fetches `http://127.0.0.1:PORT/<file name>` from the browser, so the
server answers only that path, only on 127.0.0.1, with
`Access-Control-Allow-Origin: https://ui.perfetto.dev` and no caching.
`serve()` returns a running server (a background thread) for tests and for
the command, which waits until interrupted.
"""
from __future__ import annotations

import http.server
import os
import threading
import urllib.parse
from pathlib import Path

UI_ORIGIN = "https://ui.perfetto.dev"
DEFAULT_PORT = 9001


def ui_link(name: str, port: int) -> str:
    return f"{UI_ORIGIN}/#!/?url=http://127.0.0.1:{port}/{urllib.parse.quote(name)}&referrer=tessera"


class _Handler(http.server.BaseHTTPRequestHandler):
    server: "TraceServer"

    def log_message(self, fmt, *args) -> None:  # quiet; the command prints what matters
        pass

    def end_headers(self) -> None:
        self.send_header("Access-Control-Allow-Origin", UI_ORIGIN)
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def do_OPTIONS(self) -> None:
        self.send_response(204)
        self.send_header("Access-Control-Allow-Methods", "GET, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", "*")
        self.end_headers()

    def do_GET(self) -> None:
        if urllib.parse.unquote(self.path.split("?", 1)[0]) != "/" + self.server.trace.name:
            self.send_error(404, "File not found")
            return
        try:
            f = open(self.server.trace, "rb")
        except OSError:
            self.send_error(404, "File not found")
            return
        with f:
            size = os.fstat(f.fileno()).st_size
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            while chunk := f.read(1 << 20):
                self.wfile.write(chunk)
        self.server.served += 1
        self.server.served_event.set()


class TraceServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, trace: Path, port: int) -> None:
        self.trace = Path(trace).resolve()
        self.served = 0
        self.served_event = threading.Event()
        super().__init__(("127.0.0.1", port), _Handler)

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def link(self) -> str:
        return ui_link(self.trace.name, self.port)

    def start(self) -> "TraceServer":
        threading.Thread(target=self.serve_forever, name="tessera-view", daemon=True).start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


# Reading the first packet is enough to tell a trace from something else; bounded so a huge
# file of another kind is refused after reading this much, not after reading it whole.
FIRST_PACKET_LIMIT = 64 << 20


class NotATrace(ValueError):
    """The file is not a Perfetto trace (why, in words)."""


def check_trace(path: Path) -> None:
    """NotATrace unless `path` starts with a `Trace.packet` (field 1, length-delimited) that
    parses as a TracePacket: what the UI would load, as opposed to any file."""
    from tessera.schemas.files import check_input
    from tessera.schemas.perfetto import TracePacket

    check_input(path, "trace")      # schemas.files.InputError for a FIFO (its open would block) or a device
    with open(path, "rb") as f:
        head = f.read(11)
        if not head:
            raise NotATrace("the file is empty")
        if head[0] != 0x0A:
            raise NotATrace(f"first byte 0x{head[0]:02x}: a Perfetto trace starts with a packet (0x0a)")
        length, shift, i = 0, 0, 1
        while True:
            if i >= len(head) or shift > 63:
                raise NotATrace("the first packet's length is not a valid varint")
            byte = head[i]
            length |= (byte & 0x7F) << shift
            shift, i = shift + 7, i + 1
            if not byte & 0x80:
                break
        size = os.fstat(f.fileno()).st_size
        if length > min(FIRST_PACKET_LIMIT, size - i):
            raise NotATrace(f"the first packet claims {length} bytes; the file has {size - i} after its header")
        f.seek(i)
        try:
            TracePacket().ParseFromString(f.read(length))
        except Exception as e:   # protobuf's DecodeError
            raise NotATrace(f"the first packet does not parse ({e})") from None


def serve(trace: Path, port: int = DEFAULT_PORT) -> TraceServer:
    """Start serving `trace` on 127.0.0.1:`port` (0: any free port) in a background thread."""
    return TraceServer(trace, port).start()
