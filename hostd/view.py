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


def serve(trace: Path, port: int = DEFAULT_PORT) -> TraceServer:
    """Start serving `trace` on 127.0.0.1:`port` (0: any free port) in a background thread."""
    return TraceServer(trace, port).start()
