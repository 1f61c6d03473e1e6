"""One connection from Arm's GPU Timeline layer, sans-IO: bytes in -> session log -> messages -> replies.

Role: hostd's side of Arm's comms protocol (schemas/arm_wire.py) for the
`GPUTimeline` service, kept apart from sockets (arm_listener.py) like
ingest.py is for our own layer. Owner: the daemon's event-loop thread; one
instance per connection.

Storage: Arm's stream is kept byte for byte, registry requests included, in
the same checksummed record format as our own logs (schemas/logfile.py,
records cut at Arm message starts) but in its own file kind,
`session.arm-log`, so no reader mistakes it for our frames:

    OUT/conn-<n>/                               at accept, before anything is decoded
    OUT/arm-gpu-timeline-<pid>-<n>/             renamed once a DeviceMetadata names the process
        session.arm-log                         the stream, as received
        session.json                            at close: peer, protocol header, devices, records by kind,
                                                problems, how it ended

Every chunk is logged before any message in it is interpreted; the merge
decodes the log again (`read_arm_log`), so what hostd thought of a message
never decides what is kept.

Replies: the registry (endpoint 0) answers a TX_RX with the services hostd
hosts (SERVICES: `registry`, `GPUTimeline` on endpoint 1, `GPUProfile` on
endpoint 2); a TX_RX to any other endpoint gets an empty reply so a client
waiting for one is not stuck.

`GPUProfile` is Arm's layer_gpu_profile (its host side: lglpy
`comms/service_gpu_profile.py`): JSON objects with a `type` (start_frame,
end_frame, frame, or a workload's type with its `labels` and `counters`).
They are logged like everything else and read back by `read_profile_log`
(hostd/arm_profile.py turns them into counters, docs/counters.md); a payload
that is not a JSON object with a string `type` is reported and skipped.

Problems (one log line each, naming client, stream offset, action):
  - a header that cannot be right (unknown message type, payload above
    `max_frame`): the connection is closed;
  - a GPUTimeline payload that is not a TimelineRecord (protobuf cannot
    decode it, or it sets more than one member): the connection is closed
    (the layer's state machine is lost; nothing after can be placed);
  - a message to an endpoint hostd does not host: skipped, warned once.
Bytes already received (all of them are in the log) and other connections
are never affected.
"""
from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError

from tessera.schemas import arm_wire as wire
from tessera.schemas.arm_timeline import TimelineRecord
from tessera.schemas.logfile import iter_records, log_version

from .arm_metadata import ArmNester
from .config import DaemonConfig
from .storage import ConnectionStore

LOG = logging.getLogger("tessera.hostd")

ARM_LOG_NAME = "session.arm-log"
TIMELINE_ENDPOINT = 1
PROFILE_ENDPOINT = 2
SERVICES = {wire.REGISTRY_ENDPOINT: wire.REGISTRY_NAME, TIMELINE_ENDPOINT: wire.TIMELINE_SERVICE,
            PROFILE_ENDPOINT: wire.PROFILE_SERVICE}
FOLDER_PROCESS = "arm-gpu-timeline"


def record_kind(record) -> str:
    fields = record.ListFields()
    return fields[0][0].name if len(fields) == 1 else ("empty" if not fields else "several")


class ArmIngest:
    def __init__(self, cfg: DaemonConfig, peer: str, logger: logging.Logger = LOG) -> None:
        self.cfg = cfg
        self.peer = peer
        self.log = logger
        self.store = ConnectionStore(cfg.out, cfg.fsync_interval, ARM_LOG_NAME)
        self.client = f"arm conn-{self.store.number} ({peer})"
        self.decoder = wire.ArmDecoder(cfg.max_frame)
        self.nester = ArmNester()
        self.records: Counter[str] = Counter()
        self.messages = 0
        self.problems = 0
        self.close_reason: str | None = None
        self.named = False
        self._warned: set[int] = set()
        self._lines = 0

    def problem(self, offset: int, message: str, action: str) -> None:
        self.problems += 1
        self._lines += 1
        if self._lines <= self.cfg.max_problem_lines:
            self.log.warning("hostd: client %s at byte %d: %s; %s", self.client, offset, message, action)

    def feed(self, data: bytes) -> tuple[bool, bytes]:
        """Log `data`, then handle the messages it completes. Returns (keep the connection?, reply bytes)."""
        start = self.store.bytes
        error: wire.ArmWireError | None = None
        try:
            messages = self.decoder.feed(data)
        except wire.ArmWireError as e:
            error, messages = e, e.messages
        starts = [m.offset for m in messages if m.offset >= start]
        if error is None and self.decoder.pending and self.decoder.offset >= start:
            starts.append(self.decoder.offset)
        elif error is not None and error.offset >= start:
            starts.append(error.offset)
        self.store.append(data, starts)
        replies = []
        for m in messages:
            reply = self._handle(m)
            if reply is not None:
                replies.append(reply)
            if self.close_reason is not None:
                return False, b"".join(replies)
        if error is not None:
            self.problem(error.offset, error.message, "closing the connection")
            self.close_reason = error.message
            return False, b"".join(replies)
        return True, b"".join(replies)

    def _handle(self, m: wire.ArmMessage) -> bytes | None:
        self.messages += 1
        if m.endpoint == wire.REGISTRY_ENDPOINT:
            self.records["registry"] += 1
            payload = wire.registry_payload(SERVICES)
            return wire.encode(m.type, 0, m.message_id, payload) if m.type == wire.ArmMessageType.TX_RX else None
        if m.endpoint == PROFILE_ENDPOINT:
            message = profile_message(m.payload)
            if isinstance(message, str):
                self.problem(m.offset, f"GPUProfile payload of {len(m.payload)} bytes: {message}",
                             "skipped (kept in the log)")
                self.records["profile: unreadable"] += 1
            else:
                self.records[f"profile: {message['type']}"] += 1
            return wire.encode(m.type, 0, m.message_id) if m.type == wire.ArmMessageType.TX_RX else None
        if m.endpoint != TIMELINE_ENDPOINT:
            if m.endpoint not in self._warned:
                self._warned.add(m.endpoint)
                self.problem(m.offset, f"message to endpoint {m.endpoint}, which hostd does not host",
                             "skipped (kept in the log)")
            self.records["unknown endpoint"] += 1
            return wire.encode(m.type, 0, m.message_id) if m.type == wire.ArmMessageType.TX_RX else None
        try:
            record = TimelineRecord.FromString(m.payload)
            kind = record_kind(record)
            if kind == "several":
                raise ValueError(f"it sets {len(record.ListFields())} members, one expected")
            if self.records.total() - self.records["registry"] == 0 and kind not in ("header", "empty"):
                self.problem(m.offset, f"first GPUTimeline record is {kind}, not a Header (an older layer?)",
                             "reading on")
            self.nester.feed(record)
        except (DecodeError, ValueError) as e:
            reason = f"GPUTimeline payload of {len(m.payload)} bytes is not a TimelineRecord ({e})"
            self.problem(m.offset, reason, "closing the connection")
            self.close_reason = reason
            return None
        self.records[kind] += 1
        if kind == "metadata" and not self.named and self.nester.pid is not None:
            self.named = True
            old = self.client
            self.store.name(FOLDER_PROCESS, self.nester.pid)
            self.client = f"arm {FOLDER_PROCESS}[{self.nester.pid}]#{self.store.number}"
            self.log.info("hostd: %s is %s", old, self.client)
        return wire.encode(m.type, 0, m.message_id) if m.type == wire.ArmMessageType.TX_RX else None

    def eof(self) -> None:
        if self.decoder.pending:
            self.problem(self.decoder.offset, f"stream ends inside a message ({self.decoder.pending} bytes)",
                         "the partial message stays in the log only")

    def close(self, how: str) -> None:
        record: dict[str, Any] = {
            "protocol": "arm-gpu-timeline", "peer": self.peer, "client": self.client,
            "header_version": self.nester.version, "pid": self.nester.pid,
            "devices": list(self.nester.devices.values()), "bytes": self.store.bytes, "messages": self.messages,
            "records": dict(self.records), "problems": self.problems,
            "end": self.close_reason or how, "clean": self.close_reason is None and not self.decoder.pending,
        }
        if self._lines > self.cfg.max_problem_lines:
            self.log.warning("hostd: client %s: %d more problem(s) not shown", self.client,
                             self._lines - self.cfg.max_problem_lines)
        self.store.close(record)
        self.log.info("hostd: %s closed (%s): %d message(s)", self.client, record["end"], self.messages)


def read_arm_log(path: Path, problem: Callable[[int, str], None],
                 max_payload: int = wire.DEFAULT_MAX_PAYLOAD) -> Iterator[Any]:
    """The TimelineRecords of a `session.arm-log`, in order. A damaged record of the log costs
    the messages overlapping it (decoding restarts at the next record's first message start); a
    payload that is not a TimelineRecord is reported and skipped; a bad header ends reading."""
    for messages in _arm_messages(path, problem, max_payload):
        yield from _records(messages, problem)


def profile_message(payload: bytes) -> dict[str, Any] | str:
    """A GPUProfile payload as Arm's service reads it (a JSON object with a string `type`), or why not."""
    try:
        message = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        return f"not JSON ({e})"
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        return "not a JSON object with a string \"type\""
    return message


def read_profile_log(path: Path, problem: Callable[[int, str], None],
                     max_payload: int = wire.DEFAULT_MAX_PAYLOAD) -> Iterator[dict[str, Any]]:
    """The GPUProfile messages of a `session.arm-log`, in order, read as read_arm_log reads; one that
    is not a JSON object with a string `type` is reported and skipped."""
    for messages in _arm_messages(path, problem, max_payload):
        for m in messages:
            if m.endpoint == PROFILE_ENDPOINT:
                message = profile_message(m.payload)
                if isinstance(message, str):
                    problem(m.offset, f"stream byte {m.offset}: GPUProfile payload: {message}; skipped")
                else:
                    yield message


def _arm_messages(path: Path, problem: Callable[[int, str], None], max_payload: int) -> Iterator[list]:
    """The Arm messages of a `session.arm-log`, a list per log record (read_arm_log's rules)."""
    with open(path, "rb") as f:
        if log_version(f) != 2:
            problem(0, "not a session log (no log file header); not read")
            return
        decoder = wire.ArmDecoder(max_payload)
        expected = 0
        lost = False
        for r in iter_records(f, problem):
            data = r.payload
            if r.offset != expected or lost:
                if not lost:
                    problem(r.at, f"stream bytes {expected}..{r.offset} lost; resuming at the next message start")
                    lost = True
                if r.first is None:
                    expected = r.offset + len(data)
                    continue
                lost = False
                decoder = wire.ArmDecoder(max_payload)
                decoder.offset = r.offset + r.first
                data = data[r.first:]
            expected = r.offset + len(r.payload)
            try:
                messages = decoder.feed(data)
            except wire.ArmWireError as e:
                yield e.messages
                problem(e.offset, f"stream {e}; the rest of the log is not read")
                return
            yield messages


def _records(messages, problem) -> Iterator[Any]:
    for m in messages:
        if m.endpoint != TIMELINE_ENDPOINT:
            continue
        try:
            record = TimelineRecord.FromString(m.payload)
        except DecodeError as e:
            problem(m.offset, f"stream byte {m.offset}: GPUTimeline payload is not a TimelineRecord ({e}); skipped")
            continue
        if len(record.ListFields()) > 1:
            problem(m.offset, f"stream byte {m.offset}: TimelineRecord sets several members; skipped")
            continue
        yield record
