"""One connection's ingest, sans-IO: bytes in -> session log -> frames -> checks.

Role: the policy of what hostd does with a client's bytes, kept apart from
sockets (daemon.py) so it is tested without any. Every chunk is appended to
the connection's log *before* any frame in it is looked at (storage.py), so
whatever the checks think of it, the bytes are kept; only the frame
boundaries are found first, so that the log's records say where frames
begin (a reader resumes there after damage).

Problems (one log line each, naming client, stream offset, problem, action):
  - a length above `max_frame`, or garbage before a valid HELLO: the
    connection is closed (nothing after it can be trusted);
  - invalid UTF-8/JSON: the frame is skipped;
  - a schema violation: strict rejects the frame (recorded for merge), warn
    logs it, off does not check (fastcheck.py passes the certainly-valid
    payloads quickly, jsonschema decides the rest); a WORKLOADS batch's
    envelope is checked like a frame, each entry on its own (reported, never
    rejected: merge skips a bad entry alone);
  - an unknown message type: kept in the log, skipped, warned once per type;
  - a stream that ends inside a frame: reported at end of stream.
A HELLO is schema-checked in every validation mode: an invalid one closes the connection.
Text from the client (its process name, a problem quoting it) goes into log lines escaped
(`printable`): a newline or U+202E cannot forge or reorder a line.
After `max_problem_lines` lines for one connection the rest are counted and
summarised when it closes, so a garbage client cannot flood the daemon's log.

Owner: the event-loop thread of the daemon; one instance per connection.
"""
from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from tessera.schemas import messages
from tessera.schemas import workloads as batch
from tessera.schemas.frames import PROTOCOL_VERSION, Frame, FrameDecoder, FrameError, MessageType

from . import fastcheck
from .config import DaemonConfig, Validation
from .storage import ConnectionStore

LOG = logging.getLogger("tessera.hostd")


_NAMES = {int(t): t.name for t in MessageType}   # per frame: a dict lookup, not an enum construction


def finish(ingest, eof: bool, stopping: bool, exc: BaseException | None) -> None:
    """End a connection's ingest (Tessera's or Arm's) saying why it ended; an error while
    finishing is logged, never raised into the event loop."""
    how = "client closed" if eof else ("shutdown" if stopping else f"connection lost ({exc})" if exc else "closed")
    try:
        ingest.close(how)
    except Exception as e:
        LOG.exception("hostd: client %s: error while finishing: %s", ingest.client, e)


def write_failed(ingest, error: OSError) -> None:
    """A connection's log could not be written (a full disk): one log line, no traceback; the
    connection is closed by the caller. What the log holds stays; a client that reads
    acknowledgements keeps (and spools) every byte not acknowledged."""
    reason = error.strerror or str(error)
    ingest.close_reason = f"cannot write its session log: {reason}"
    ingest.log.error("hostd: client %s: cannot write its session log (%s); closing the connection "
                     "(the %d bytes logged before stay)", ingest.client, reason, ingest.store.bytes)


def printable(text: str, limit: int = 256) -> str:
    """`text` safe in a log line: each character that is not printable (a newline, an escape,
    U+202E RIGHT-TO-LEFT OVERRIDE and the other format characters) as its escape, at most
    `limit` characters. A client's process name goes into hostd's log lines through this."""
    if text.isprintable() and len(text) <= limit:
        return text
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:limit])
    return out + ("…" if len(text) > limit else "")


def type_name(t: int) -> str:
    name = _NAMES.get(t)
    return name if name is not None else f"0x{t:02x}"


class Ingest:
    def __init__(self, cfg: DaemonConfig, peer: str, logger: logging.Logger = LOG) -> None:
        self.cfg = cfg
        self.peer = peer
        self.log = logger
        self.store = ConnectionStore(cfg.out, cfg.fsync_interval)
        self.client = f"conn-{self.store.number} ({peer})"
        self.decoder = FrameDecoder(cfg.max_frame)
        self.hello: dict[str, Any] | None = None
        self.frames: Counter[str] = Counter()
        self.problems = 0
        self.rejected = 0
        self.skipped = 0
        self.unknown_types: set[int] = set()
        self.close_reason: str | None = None
        self.closed = False

    # -- bytes in ---------------------------------------------------------
    def feed(self, data: bytes) -> bool:
        """Log and process a chunk; False when the connection must be closed."""
        if self.close_reason is not None:
            return False
        start = self.store.bytes
        try:
            frames, error = self.decoder.feed(data), None
        except FrameError as e:
            frames, error = e.frames, e
        finally:
            # Logged whatever the decoder made of it, before any frame is looked at; the frame
            # starts in the chunk let a reader of a damaged log resume (schemas/logfile.py).
            self.store.append(data, self._starts(start, frames))
        for frame in frames:
            if not self._frame(frame):
                return False
        if error is not None:
            return self._fatal(error.offset, error.message)
        return True

    def _starts(self, start: int, frames: list[Frame]) -> list[int]:
        """Stream offsets of the frames that begin at or after `start`: the decoded ones and the
        one the decoder holds a part of."""
        starts = [f.offset for f in frames if f.offset >= start] if frames and frames[-1].offset >= start else []
        if self.decoder.pending and self.decoder.offset >= start:
            starts.append(self.decoder.offset)
        return starts

    def eof(self) -> None:
        """The client closed its side: report a frame cut short."""
        try:
            self.decoder.finish()
        except FrameError as e:
            self._problem(e.offset, f"disconnected inside a frame ({self.decoder.pending} bytes of it received)",
                          "the partial frame is kept in the log only")

    # -- frames -------------------------------------------------------------
    def _frame(self, f: Frame) -> bool:
        if self.hello is None:
            return self._hello(f)
        if not f.known:
            self.skipped += 1
            self.frames[type_name(f.type)] += 1
            if f.type not in self.unknown_types:
                self.unknown_types.add(f.type)
                self._problem(f.offset, f"unknown message type 0x{f.type:02x} ({f.size} bytes)",
                              "kept in the log, skipped (further frames of this type not reported)")
            return True
        try:
            payload = f.payload()
        except FrameError as e:
            self.skipped += 1
            self._problem(f.offset, e.message, "frame skipped")
            return True
        if not self._check(f, payload):
            return True
        self.frames[type_name(f.type)] += 1
        return True

    def _hello(self, f: Frame) -> bool:
        if f.type != MessageType.HELLO:
            return self._fatal(f.offset, f"first frame is {type_name(f.type)}, not HELLO (not a Tessera layer?)")
        try:
            payload = f.payload()
        except FrameError as e:
            return self._fatal(f.offset, f"HELLO: {e.message}")
        if not isinstance(payload, dict) or not isinstance(payload.get("pid"), int) \
                or not isinstance(payload.get("process"), str):
            return self._fatal(f.offset, "HELLO without an integer pid and a process name")
        # A HELLO is checked in every validation mode: an invalid one closes the connection
        # (docs/formats.md), it would name the session folder and own every frame after it.
        errors = [] if fastcheck.valid(f.type, payload) else messages.problems(f.type, payload)
        if errors:
            if self.cfg.validate is Validation.STRICT:
                self.rejected += 1
                self.store.reject(f.offset, f.size, f"HELLO violates its schema: {'; '.join(errors[:3])}")
            return self._fatal(f.offset, f"HELLO violates its schema: {'; '.join(errors[:3])}")
        protocol = payload.get("protocol")
        if isinstance(protocol, int) and protocol > PROTOCOL_VERSION:
            self._problem(f.offset, f"protocol {protocol} is newer than this hostd's {PROTOCOL_VERSION}",
                          "continuing; unknown message types will be skipped")
        self.hello = payload
        self.frames["HELLO"] += 1
        old = self.client
        try:
            self.store.name(payload["process"], payload["pid"])
        except OSError as e:
            self.log.warning("hostd: client %s: cannot rename its folder (%s); keeping %s", old, e, self.store.folder)
        self.client = f"{printable(payload['process'])}[{payload['pid']}]#{self.store.number}"
        self.log.info("hostd: %s is %s, logging to %s", old, self.client, self.store.log_path)
        return True

    def _check(self, f: Frame, payload: Any) -> bool:
        """Schema validation per the configured mode; False when the frame is rejected."""
        if self.cfg.validate is Validation.OFF:
            return True
        # certainly valid (fastcheck.py); else jsonschema decides
        errors = [] if fastcheck.valid(f.type, payload) else messages.problems(f.type, payload)
        if not errors:
            if f.type == MessageType.WORKLOADS:
                self._check_entries(f, payload)
            return True
        what = f"{type_name(f.type)} violates its schema: {'; '.join(errors[:3])}"
        if self.cfg.validate is Validation.STRICT:
            self.rejected += 1
            self.store.reject(f.offset, f.size, what)
            self._problem(f.offset, what, "frame rejected (kept in the log, skipped by merge)")
            return False
        self._problem(f.offset, what, "kept")
        return True

    def _check_entries(self, f: Frame, payload: dict) -> None:
        """A batch's entries are checked one by one: a bad entry is reported (in strict mode too)
        but never costs the frame's other entries; merge skips that entry alone."""
        for tag, workload in batch.expand(payload):
            if not fastcheck.valid(MessageType.WORKLOAD, workload):
                errors = batch.entry_problems(workload)
                if errors:
                    self._problem(f.offset, f"WORKLOADS: the entry of t{tag} violates the WORKLOAD schema: "
                                            f"{'; '.join(errors)}", "kept; merge skips the entry")

    # -- problems ---------------------------------------------------------
    def _problem(self, offset: int, problem: str, action: str) -> None:
        self.problems += 1
        if self.problems <= self.cfg.max_problem_lines:
            self.log.warning("hostd: client %s at byte %d: %s; %s", self.client, offset, printable(problem), action)
        elif self.problems == self.cfg.max_problem_lines + 1:
            self.log.warning("hostd: client %s: more problems; counting them, summary at close", self.client)

    def _fatal(self, offset: int, problem: str) -> bool:
        if self.hello is None and "HELLO" not in problem:
            problem += " (before any HELLO: not a Tessera layer?)"
        self._problem(offset, problem, "closing the connection")
        self.close_reason = f"at byte {offset}: {problem}"
        return False

    # -- end --------------------------------------------------------------
    def close(self, how: str) -> None:
        """Finish writing (fsync, record); `how` says why the connection ended."""
        if self.closed:
            return
        self.closed = True
        if self.problems > self.cfg.max_problem_lines:
            self.log.warning("hostd: client %s: %d problems in all (%d not shown)", self.client, self.problems,
                             self.problems - self.cfg.max_problem_lines)
        record = {
            "client": self.client, "peer": self.peer, "hello": self.hello, "bytes": self.store.bytes,
            "frames": dict(self.frames), "skipped": self.skipped, "rejected": self.rejected,
            "problems": self.problems, "end": self.close_reason or how,
            "validate": self.cfg.validate.value,
        }
        try:
            self.store.close(record)
        except OSError as e:
            self.log.error("hostd: client %s: cannot finish writing %s: %s", self.client, self.store.folder, e)
        self.log.info("hostd: %s closed (%s): %d bytes, %d frames", self.client, record["end"], self.store.bytes,
                      sum(self.frames.values()))
