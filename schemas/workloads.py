"""WORKLOADS (protocol 3): one frame for the workloads of one command buffer's recording.

A WORKLOAD frame describes one tagged workload. The layer describes a command buffer's
workloads in batches instead (at vkEndCommandBuffer, or every `BATCH` workloads): the
envelope carries what they share (`SHARED`: the device and command buffer) and each entry is
the rest of a WORKLOAD payload plus its `tag`. Receivers expand a batch into the WORKLOADs it
stands for (`expand`) and check each against workload.schema.json (`entry_problems`), so a bad
entry costs itself only; the envelope has its own schema (workloads.schema.json).
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import messages
from .frames import MessageType

SHARED = ("device", "command_buffer")   # WORKLOAD fields every entry of a batch shares: on the envelope
TAG = "tag"                             # an entry's tagID (a WORKLOAD frame has it in its header)
BATCH = 512                             # entries per frame the layer sends at most (~100 KB of JSON)


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


def entry_problems(workload: dict, unknown_ok: bool = False) -> list[str]:
    """Schema violations of one expanded entry (messages.problems of a WORKLOAD)."""
    return messages.problems(MessageType.WORKLOAD, workload, unknown_ok=unknown_ok, limit=3)


def described(frames) -> dict[int, dict]:
    """Tag -> WORKLOAD payload of every WORKLOAD and WORKLOADS frame of a stream (Frame objects of
    schemas.frames), for readers that take a stream as it is: no schema check, later wins."""
    out: dict[int, dict] = {}
    for f in frames:
        if f.type == MessageType.WORKLOAD:
            out[f.tag] = f.payload()
        elif f.type == MessageType.WORKLOADS:
            out.update(expand(f.payload()))
    return out


def all_problems(frame_type: int, payload: Any) -> list[str]:
    """messages.problems of a frame's payload and, for a WORKLOADS batch whose envelope is valid,
    its entries' (named by tag): what a reader checking a whole stream wants."""
    out = messages.problems(frame_type, payload)
    if frame_type == MessageType.WORKLOADS and not out:
        out = [f"workloads t{tag}: {p}" for tag, w in expand(payload) for p in entry_problems(w)]
    return out
