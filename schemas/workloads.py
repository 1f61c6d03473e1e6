"""WORKLOADS (protocol 3): one frame for the workloads of one command buffer's recording.

A WORKLOAD frame describes one tagged workload. The layer describes a command buffer's
workloads in batches instead (at vkEndCommandBuffer, or every `BATCH` workloads): the
envelope carries what they share (`SHARED`: the device and command buffer) and each entry is
the rest of a WORKLOAD payload plus its `tag`. Receivers expand a batch into the WORKLOADs it
stands for (`expand`) and check each against workload.schema.json (`entry_problems`), so a bad
entry costs itself only; the envelope has its own schema (workloads.schema.json).

RECORDED_AGAIN (protocol 5) describes workloads recorded again: each pair [tag, earlier] says that the
workload `tag` is what `earlier` was, so its WORKLOAD is earlier's (`again`). The layer's C path sends it
for a recording equal to one whose WORKLOADS it sent in full before on the same connection or spool, into
the same command buffer (vkapi/runtime/reported_submits.c): ~40 bytes a workload instead of ~360.
Receivers resolve the pairs once a process's frames are read (`Repeats`), so the order in which its files
are read does not matter.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import messages
from .frames import MessageType, json_body

SHARED = ("device", "command_buffer")   # WORKLOAD fields every entry of a batch shares: on the envelope
TAG = "tag"                             # an entry's tagID (a WORKLOAD frame has it in its header)
BATCH = 512                             # entries per frame the layer sends at most (~100 KB of JSON)
PAIRS = "tags"                          # RECORDED_AGAIN's field: its [tag, earlier] pairs


def envelope(device: str, command_buffer: str, entries: list[dict]) -> dict:
    return {"device": device, "command_buffer": command_buffer, "workloads": entries}


def entry(tag: int, workload: dict) -> dict:
    """A batch entry from a WORKLOAD payload without SHARED's fields."""
    return {TAG: tag, **workload}


def expand(payload: dict) -> Iterator[tuple[Any, dict]]:
    """(tag, WORKLOAD payload) for each entry of a WORKLOADS payload that passed its envelope
    schema; the entry's tag is whatever it holds (the envelope schema says an integer)."""
    shared = {k: payload[k] for k in SHARED}
    for e in payload["workloads"]:
        workload = dict(shared)
        workload.update((k, v) for k, v in e.items() if k != TAG)
        yield e[TAG], workload


def recorded_again(pairs) -> dict:
    """A RECORDED_AGAIN payload: each (tag, earlier) pair says `tag` is described by `earlier`'s WORKLOAD."""
    return {PAIRS: [[tag, earlier] for tag, earlier in pairs]}


def again(payload: dict) -> list[tuple[int, int]]:
    """The (tag, earlier) pairs of a RECORDED_AGAIN payload that passed its schema."""
    return [(tag, earlier) for tag, earlier in payload[PAIRS]]


def again_c_text() -> tuple[str, str]:
    """A RECORDED_AGAIN payload's JSON before its first pair and after its last, as json_body writes it
    (vkapi/runtime/reported_submits.c writes the pairs between, `[tag,earlier]` joined by commas)."""
    text = json_body(recorded_again([(1, 2)])).decode()
    return text[:text.index("[1,2]")], text[text.index("[1,2]") + len("[1,2]"):]


class Repeats:
    """Resolves RECORDED_AGAIN pairs against what a reader keeps per tag (`described`, tag -> description):
    a pair whose earlier tag is known takes its description at once; the rest wait for `finish`, which
    resolves what it can (the earlier tag read later, from another file) and returns the pairs left."""

    def __init__(self, described: dict) -> None:
        self.described = described
        self.waiting: list[tuple[int, int]] = []

    def add(self, pairs) -> None:
        described = self.described
        for tag, earlier in pairs:
            found = described.get(earlier)
            if found is None:
                self.waiting.append((tag, earlier))
            else:
                described[tag] = found

    def finish(self) -> list[tuple[int, int]]:
        """Resolve the waiting pairs, chains of them in any order too (each followed once: linear in the
        pairs, a cycle ends it); returns those whose earlier tag is never described, in their order."""
        waiting, self.waiting = self.waiting, []
        described = self.described
        earlier_of = dict(waiting)   # a tag paired twice: its last pair
        dead: set[int] = set()       # tags whose chain reaches no description
        for tag in earlier_of:
            chain, on_chain, at = [], set(), tag
            while at not in described and at not in dead and at in earlier_of and at not in on_chain:
                chain.append(at)
                on_chain.add(at)
                at = earlier_of[at]
            found = described.get(at)
            if found is None:
                dead.update(chain)
            else:
                for t in chain:
                    described[t] = found
        return [(tag, earlier) for tag, earlier in waiting if tag not in described]


def entry_problems(workload: dict, unknown_ok: bool = False) -> list[str]:
    """Schema violations of one expanded entry (messages.problems of a WORKLOAD)."""
    return messages.problems(MessageType.WORKLOAD, workload, unknown_ok=unknown_ok, limit=3)


def described(frames) -> dict[int, dict]:
    """Tag -> WORKLOAD payload of every WORKLOAD and WORKLOADS frame of a stream (Frame objects of
    schemas.frames), for readers that take a stream as it is: no schema check, later wins."""
    out: dict[int, dict] = {}
    repeats = Repeats(out)
    for f in frames:
        if f.type == MessageType.WORKLOAD:
            out[f.tag] = f.payload()
        elif f.type == MessageType.WORKLOADS:
            out.update(expand(f.payload()))
        elif f.type == MessageType.RECORDED_AGAIN:
            repeats.add(again(f.payload()))
    repeats.finish()
    return out


def all_problems(frame_type: int, payload: Any) -> list[str]:
    """messages.problems of a frame's payload and, for a WORKLOADS batch whose envelope is valid,
    its entries' (named by tag): what a reader checking a whole stream wants."""
    out = messages.problems(frame_type, payload)
    if frame_type == MessageType.WORKLOADS and not out:
        out = [f"workloads t{tag}: {p}" for tag, w in expand(payload) for p in entry_problems(w)]
    return out
