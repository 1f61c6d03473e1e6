"""Ingest throughput of the real host daemon: 4 concurrent clients sending ~1 KB WORKLOAD frames.

The daemon runs as a `tessera hostd` subprocess (its own interpreter, as in
production) on a private Unix socket. Each client is a separate process with
a blocking socket: it connects, sends HELLO, waits for the start signal, then
sends M WORKLOAD frames (JSON ~1 KB, valid against workload.schema.json)
pre-encoded in 64 KiB writes, shuts down its write side and reads until the
daemon closes the connection. The daemon closes a connection only after it
has logged, decoded and checked every byte and written its session.json
(eof_received -> close -> Ingest.close), so the clock runs from the start
signal (first byte) to the last client seeing EOF.

Runs: for each --validate mode (default: warn, then off), without acks
(HELLO has no "acks"; the daemon sends nothing back) and with "acks": true
(each client reads the daemon's u64 acknowledgements on a second thread; the
last must equal its byte count). After each run the daemon is stopped
(SIGTERM) and each session folder is checked: session.tessera-log holds
every byte sent (compared byte for byte), session.json counts HELLO + M
WORKLOADs and no problem.

Run: .venv/bin/python bench/bench_hostd_ingest.py [--frames M] [--clients N] [--validate warn,off] [--runs R]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tessera.schemas import messages  # noqa: E402
from tessera.schemas.frames import ACK, MessageType, encode  # noqa: E402
from tessera.schemas.logfile import read_stream  # noqa: E402

TARGET = 100_000        # messages/s (issue 6)
CHUNK = 64 << 10        # bytes per sendall, like a layer flushing a full buffer


def workload_payload(tag: int) -> dict:
    """A render pass described as the layer does, padded to ~1 KB of JSON."""
    return {
        "kind": "render_pass", "device": "0x55d0c8a1f2b0", "command_buffer": f"0x55d0c8b{tag % 4096:05x}0",
        "command": "vkCmdBeginRenderPass2",
        "labels": ["Frame", f"Frame {tag // 16}", "Scene", "Deferred shading: G-buffer fill (opaque geometry)",
                   "Shadow cascades 0-3, PCF 5x5 filtering, depth bias 1.25"],
        "annex": False, "width": 1920, "height": 1080, "render_area": [0, 0, 1920, 1080],
        "subpass_count": 1, "draw_call_count": 12 + tag % 64, "dynamic": False,
        "attachments": [
            {"aspect": "color", "format": "VK_FORMAT_R8G8B8A8_UNORM", "samples": 1,
             "load_op": "VK_ATTACHMENT_LOAD_OP_CLEAR", "store_op": "VK_ATTACHMENT_STORE_OP_STORE"},
            {"aspect": "color", "format": "VK_FORMAT_A2B10G10R10_UNORM_PACK32", "samples": 1,
             "load_op": "VK_ATTACHMENT_LOAD_OP_CLEAR", "store_op": "VK_ATTACHMENT_STORE_OP_STORE"},
            {"aspect": "color", "format": "VK_FORMAT_R16G16B16A16_SFLOAT", "samples": 1,
             "load_op": "VK_ATTACHMENT_LOAD_OP_DONT_CARE", "store_op": "VK_ATTACHMENT_STORE_OP_STORE"},
            {"aspect": "depth_stencil", "format": "VK_FORMAT_D24_UNORM_S8_UINT", "samples": 1,
             "load_op": "VK_ATTACHMENT_LOAD_OP_CLEAR", "store_op": "VK_ATTACHMENT_STORE_OP_DONT_CARE"},
        ],
    }


def client_stream(pid: int, frames: int, acks: bool) -> tuple[bytes, bytes]:
    hello = {"protocol": 1, "pid": pid, "process": f"bench{pid}", "layer": "0.1",
             "clock_sync": {"monotonic_raw_ns": 1_000_000_000, "boottime_ns": 5_000_000_000}}
    if acks:
        hello["acks"] = True
    body = b"".join(encode(MessageType.WORKLOAD, workload_payload(tag), tag=tag) for tag in range(1, frames + 1))
    return encode(MessageType.HELLO, hello), body


def client(address: str, hello: bytes, body: bytes, acks: bool, ready, go, results) -> None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(address)
    last_ack = [0]
    ack_buf = bytearray()

    def read_acks() -> None:
        while data := s.recv(1 << 16):
            ack_buf.extend(data)
        n = len(ack_buf) // ACK.size
        if n:
            last_ack[0] = ACK.unpack_from(ack_buf, (n - 1) * ACK.size)[0]

    s.sendall(hello)
    ready.wait()
    go.wait()
    reader = None
    if acks:
        reader = threading.Thread(target=read_acks)
        reader.start()
    view = memoryview(body)
    for i in range(0, len(view), CHUNK):
        s.sendall(view[i:i + CHUNK])
    s.shutdown(socket.SHUT_WR)
    if reader is not None:
        reader.join()
    else:
        while s.recv(1 << 16):   # the daemon closes once it has logged and decoded everything
            pass
    s.close()
    results.put((time.perf_counter(), len(ack_buf) // ACK.size, last_ack[0]))


def start_daemon(tmp: Path, validate: str) -> tuple[subprocess.Popen, str, Path]:
    sock = tmp / "hostd.sock"
    out = tmp / "out"
    proc = subprocess.Popen([sys.executable, "-m", "tessera.tools.cli", "hostd", "--listen", f"unix:{sock}",
                             "--out", str(out), "--validate", validate],
                            stderr=subprocess.PIPE, text=True, cwd=tmp)
    lines = []
    for line in proc.stderr:          # "tessera hostd: listening on …" once ready
        lines.append(line)
        if "listening on" in line:
            break
    else:
        raise SystemExit("hostd did not start:\n" + "".join(lines))
    return proc, str(sock), out


def run(validate: str, clients: int, frames: int, acks: bool, streams) -> dict:
    with tempfile.TemporaryDirectory(prefix="tessera-bench-ingest-") as tmpname:
        tmp = Path(tmpname)
        proc, address, out = start_daemon(tmp, validate)
        drain = threading.Thread(target=proc.stderr.read, daemon=True)   # warnings, if any
        ctx = mp.get_context("fork")
        ready = ctx.Barrier(clients + 1)
        go = ctx.Event()
        results = ctx.Queue()
        workers = [ctx.Process(target=client, args=(address, streams[i][0], streams[i][1], acks, ready, go, results))
                   for i in range(clients)]
        for w in workers:
            w.start()
        ready.wait()                  # every client connected and sent its HELLO
        time.sleep(0.2)
        t0 = time.perf_counter()
        go.set()
        ends = [results.get(timeout=600) for _ in workers]
        elapsed = max(e[0] for e in ends) - t0
        for w in workers:
            w.join()
        proc.send_signal(signal.SIGTERM)
        drain.start()
        proc.wait(timeout=60)
        # Verify: every byte in the logs, every frame decoded, nothing reported.
        sent = {f"bench{1000 + i}": streams[i][0] + streams[i][1] for i in range(clients)}
        folders = sorted(p for p in out.iterdir() if p.is_dir())
        assert len(folders) == clients, folders
        for folder in folders:
            record = json.loads((folder / "session.json").read_text())
            data = sent[record["hello"]["process"]]
            log = read_stream(folder / "session.tessera-log")   # the client's bytes, out of the log's records
            assert len(log) == len(data) and log == data, f"{folder}: log {len(log)} bytes, sent {len(data)}"
            assert record["bytes"] == len(data), record
            assert record["frames"] == {"HELLO": 1, "WORKLOAD": frames}, record["frames"]
            assert record["problems"] == 0 and record["skipped"] == 0, record
            assert record["end"] == "client closed", record["end"]
        if acks:
            for (_, n, last), (pid, data) in zip(sorted(ends), sorted(sent.items())):
                assert n > 0, "no acknowledgement"
            assert sorted(e[2] for e in ends) == sorted(len(d) for d in sent.values()), ends
        total = sum(len(d) for d in sent.values())
        return {"seconds": elapsed, "messages": clients * (frames + 1), "bytes": total,
                "acks": [e[1] for e in ends]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=25_000, help="WORKLOAD frames per client (default 25000)")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--validate", default="warn,off", help="comma-separated modes (default warn,off)")
    ap.add_argument("--runs", type=int, default=1, help="best of R runs per configuration")
    args = ap.parse_args()

    streams = [client_stream(1000 + i, args.frames, False) for i in range(args.clients)]
    streams_acks = [client_stream(1000 + i, args.frames, True) for i in range(args.clients)]
    sample = workload_payload(1)
    size = len(json.dumps(sample, separators=(",", ":")))
    assert not messages.problems(MessageType.WORKLOAD, sample)
    mb = sum(len(h) + len(b) for h, b in streams) / 1e6
    print(f"hostd ingest: {args.clients} clients x {args.frames} WORKLOAD frames (JSON {size} bytes, "
          f"frame {size + 13} bytes), {mb:.1f} MB in all; `tessera hostd` subprocess, unix socket")
    for mode in args.validate.split(","):
        for acks in (False, True):
            best = None
            for _ in range(args.runs):
                r = run(mode, args.clients, args.frames, acks, streams_acks if acks else streams)
                best = r if best is None or r["seconds"] < best["seconds"] else best
            rate = best["messages"] / best["seconds"]
            note = (f", {sum(best['acks'])} acks read" if acks else "")
            print(f"  validate={mode:5s} acks={'yes' if acks else 'no ':3s} {best['seconds']:7.3f} s  "
                  f"{rate:10,.0f} msg/s  {best['bytes'] / best['seconds'] / 1e6:7.1f} MB/s  "
                  f"{'meets' if rate >= TARGET else 'below'} {TARGET:,} msg/s{note}  (logs verified)", flush=True)


if __name__ == "__main__":
    main()
