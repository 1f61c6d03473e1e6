"""Turns tracker state into wire frames (tessera.schemas.frames).

The only module of the layer that knows the message layout; trackers stay
free of it. Payloads follow schemas/json/*.schema.json. Hooks pass these
functions with their arguments to `Transport.send`, which encodes on the
sender thread; so every time in a message is taken by the caller.
"""
from __future__ import annotations

import os
import struct
import sys
import time
from itertools import chain

from tessera.schemas import workloads as batch
from tessera.schemas.frames import PROTOCOL_VERSION, MessageType, encode, json_body

from .trackers import Workload

LAYER_VERSION = "0.1.0"


def hex_handle(address: int) -> str:
    return f"0x{address:x}"


def hello() -> bytes:
    return encode(MessageType.HELLO, {
        "protocol": PROTOCOL_VERSION, "pid": os.getpid(), "process": _process_name(), "layer": LAYER_VERSION,
        "acks": True,
        "clock_sync": {"monotonic_raw_ns": time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW),
                       "boottime_ns": time.clock_gettime_ns(time.CLOCK_BOOTTIME)},
    })


def _process_name() -> str:
    try:
        with open("/proc/self/comm") as f:
            comm = f.read().strip()
    except OSError:
        comm = ""
    argv0 = os.path.basename(sys.argv[0]) if getattr(sys, "argv", None) and sys.argv[0] else ""
    return argv0 if comm.startswith("python") and argv0 else (comm or argv0 or "app")


def device(address: int, name: str, vendor_id: int, device_id: int, driver: str, api: int,
           extensions: list[str], pipe_rates: dict[str, float] | None = None, allocations: dict | None = None) -> bytes:
    return encode(MessageType.DEVICE, {
        "device": hex_handle(address), "name": name, "vendor_id": vendor_id, "device_id": device_id,
        "driver": driver, "api_version": f"{api >> 22}.{(api >> 12) & 0x3FF}.{api & 0xFFF}",
        "extensions": sorted(extensions), **({"pipe_rates": pipe_rates} if pipe_rates else {}),
        **({"allocations": allocations} if allocations else {})})


def workload_fields(w: Workload, kind: str, meta: dict, annex: bool) -> dict:
    """A WORKLOAD payload without the fields a batch shares (schemas.workloads.SHARED)."""
    fields = {"kind": kind, **meta}
    if w.local_labels and not w.pops_below_start:
        fields["labels"] = list(w.local_labels)
    if annex:
        fields["annex"] = True
    return fields


class _EntryTexts:
    """The JSON of WORKLOADS entries but their tags, kept by the identity of their fields dict: a recording
    made again (layer/replay.py) describes its workloads with the same dicts, which nothing changes once
    described, so a steady frame's batches are joined from kept text. An entry keeps its dict, so no
    identity is reused while it lives; bounded (cleared at CACHE)."""
    CACHE = 4096

    def __init__(self) -> None:
        self._texts: dict[int, tuple] = {}

    def entry(self, w: Workload, kind: str, meta: dict, annex: bool) -> str:
        """batch.entry(w.tag, workload_fields(…)) as json_body writes it."""
        return f'{{"{batch.TAG}":{w.tag}{self.after_tag(w, kind, meta, annex)}'

    def after_tag(self, w: Workload, kind: str, meta: dict, annex: bool) -> str:
        """The entry's text after its tag."""
        labels = w.local_labels if w.local_labels and not w.pops_below_start else ()
        hit = self._texts.get(id(meta))
        if hit is None or hit[0] is not meta or hit[1] != kind or hit[2] != labels or hit[3] != annex:
            if len(self._texts) >= self.CACHE:
                self._texts.clear()
            rest = json_body(workload_fields(w, kind, meta, annex)).decode()[1:]   # after its "{"
            hit = self._texts[id(meta)] = (meta, kind, labels, annex, ("," if rest != "}" else "") + rest)
        return hit[4]


_ENTRIES = _EntryTexts()
_HEADS: dict[tuple[int, int], bytes] = {}   # a WORKLOADS envelope's JSON by (device, command buffer); bounded


def workloads(device_address: int, cb_address: int, described: list[tuple[Workload, str, dict, bool]]) -> bytes:
    """One WORKLOADS frame: the (workload, kind, meta, annex) descriptions of one command buffer; the same
    bytes as json_body(batch.envelope(…, [batch.entry(tag, workload_fields(…)), …])) (tests/layer/test_encoder.py)."""
    head = _head(device_address, cb_address)
    entries = ",".join(_ENTRIES.entry(*d) for d in described)
    return encode(MessageType.WORKLOADS, head[:-2] + entries.encode() + head[-2:])


_AGAIN: dict[tuple, tuple] = {}   # (id(rows), device, command buffer) -> (rows, the frame's JSON in pieces,
                                   # the tag index of each piece after the first); bounded
_DECIMAL = b"%d".__mod__


def workloads_again(device_address: int, recordings: list[tuple[int, tuple, list[int]]]) -> bytes:
    """The WORKLOADS frames, one after the other, of recordings made again from kept ones (layer/replay.py; a
    submit's buffers read without their hooks, sent together): each (command buffer address, `rows` its
    product's (tag index, workload, kind, meta, annex), `tags` the recording's own); the same bytes as
    `workloads` of the restored descriptions. Each frame's JSON is kept as the bytes between its tags, joined
    with the recording's tags in decimal (a product is reported every frame: a %-format would scan every
    byte of its descriptions each time), held with the rows so that no identity is reused while kept."""
    out = []
    for cb_address, rows, tags in recordings:
        hit = _AGAIN.get((id(rows), device_address, cb_address))
        if hit is None or hit[0] is not rows:
            hit = _again_pieces(device_address, cb_address, rows)
        pieces = hit[1]
        digits = map(_DECIMAL, map(tags.__getitem__, hit[2]))
        out.append(encode(MessageType.WORKLOADS, b"".join(chain.from_iterable(zip(pieces, chain(digits, (b"",)))))))
    return b"".join(out)


def report_template(device_address: int, cb_address: int, rows: tuple, plain: tuple[int, ...],
                    plain_labels: tuple = ()) -> bytes:
    """What C needs to report a submit of a recording made again from a kept product (layer/reported_submits.py,
    vkapi/runtime/reported_submits.c), the product's WORKLOADS `rows`, `plain` its tag indices a SUBMIT lists and
    `plain_labels` those workloads' own labels: u32 the plain count and each index; u32 the WORKLOADS frame's
    JSON pieces (0: no frame), the tag index written between each two, and each piece (u32 length, bytes) as
    `workloads_again` joins them; u32 how many workloads' labels follow (the plain count, or 0), and for each
    the JSON of its labels between the brackets of a list (u16 length, bytes): what its ANNEX adds after the
    queue's labels (`annexes`) inside them."""
    out = [struct.pack(f"<I{len(plain)}I", len(plain), *plain)]
    if not rows:
        out.append(struct.pack("<I", 0))
    else:
        hit = _AGAIN.get((id(rows), device_address, cb_address))
        if hit is None or hit[0] is not rows:
            hit = _again_pieces(device_address, cb_address, rows)
        _, pieces, gaps = hit
        out.append(struct.pack(f"<I{len(gaps)}I", len(pieces), *gaps))
        out += [struct.pack("<I", len(piece)) + piece for piece in pieces]
    texts = [json_body(list(labels))[1:-1] for labels in plain_labels]
    if len(texts) != len(plain) or any(len(t) > 0xFFFF for t in texts):
        texts = []
    out.append(struct.pack("<I", len(texts)))
    out += [struct.pack("<H", len(t)) + t for t in texts]
    return b"".join(out)


def _again_pieces(device_address: int, cb_address: int, rows: tuple) -> tuple:
    if len(_AGAIN) >= _EntryTexts.CACHE:
        _AGAIN.clear()
    after_tag = _ENTRIES.after_tag
    head = _head(device_address, cb_address)
    opening = f'{{"{batch.TAG}":'.encode()
    pieces, before = [], head[:-2]   # the envelope's text up to its entries' "]}"
    for i, (_, w, kind, meta, annex) in enumerate(rows):
        pieces.append(before + (b"," if i else b"") + opening)
        before = after_tag(w, kind, meta, annex).encode()
    pieces.append(before + head[-2:])
    found = _AGAIN[(id(rows), device_address, cb_address)] = (rows, tuple(pieces), tuple(k for k, *_ in rows))
    return found


def _head(device_address: int, cb_address: int) -> bytes:
    """A WORKLOADS envelope's JSON with no entries, kept."""
    head = _HEADS.get((device_address, cb_address))
    if head is None:
        if len(_HEADS) >= _EntryTexts.CACHE:
            _HEADS.clear()
        head = _HEADS[(device_address, cb_address)] = json_body(
            batch.envelope(hex_handle(device_address), hex_handle(cb_address), []))
    return head


_JSON_TEXTS: dict[str, str] = {}   # a queue's name or a frame's source as JSON; bounded


def _json_text(text: str) -> str:
    """`text` as JSON, kept (callers look in _JSON_TEXTS first: a frame's submit and present are hot)."""
    if len(_JSON_TEXTS) >= _EntryTexts.CACHE:
        _JSON_TEXTS.clear()
    found = _JSON_TEXTS[text] = json_body(text).decode()
    return found


def submit(submit_id: int, device_address: int, queue: str, cb_addresses: list[int], tags: list[int],
           frame: int, annexed: bool, time_ns: int, duration_ns: int) -> bytes:
    """`time_ns`: CLOCK_MONOTONIC_RAW when the application called the submit; `duration_ns`: how long it took.
    Written as one format (a frame's submit is reported every frame), the same bytes as json_body of the
    payload (tests/layer/test_encoder.py)."""
    buffers = '"' + '","'.join(map(hex, cb_addresses)) + '"' if cb_addresses else ""
    name = _JSON_TEXTS.get(queue) or _json_text(queue)
    body = (f'{{"device":"{hex(device_address)}","queue":{name},"time_ns":{time_ns},'   # submit_prefix, then
            f'"duration_ns":{duration_ns},'
            f'"command_buffers":[{buffers}],"tags":[{",".join(map(str, tags))}],"frame":{frame},'
            f'"annexed":{"true" if annexed else "false"}}}')
    return encode(MessageType.SUBMIT, body.encode(), sequence=submit_id)


def submit_prefix(device_address: int, queue: str) -> bytes:
    """A SUBMIT's JSON up to its time, as `submit` writes it (C writes the rest: vkapi/runtime/reported_submits.c)."""
    name = _JSON_TEXTS.get(queue) or _json_text(queue)
    return f'{{"device":"{hex(device_address)}","queue":{name},"time_ns":'.encode()


def annex(submit_id: int, tag: int, fields: dict) -> bytes:
    return encode(MessageType.ANNEX, fields, tag=tag, sequence=submit_id)


_LABELS_ANNEX: dict[tuple[str, ...], bytes] = {}   # an ANNEX of labels alone: its JSON by the labels; bounded


def annexes(submit_id: int, fields_of: dict[int, dict]) -> bytes:
    """The ANNEX frames of a submit, tag -> fields, one after the other: the same bytes as `annex` of each. One
    of labels alone (a workload inside the queue's labels) takes its JSON from those labels' kept text: a frame
    loop inside its queue's labels annexes every workload of every frame so."""
    out = []
    for tag, fields in fields_of.items():
        labels = fields.get("labels") if len(fields) == 1 else None
        if type(labels) is list:
            key = tuple(labels)
            body = _LABELS_ANNEX.get(key)
            if body is None:
                if len(_LABELS_ANNEX) >= _EntryTexts.CACHE:
                    _LABELS_ANNEX.clear()
                body = _LABELS_ANNEX[key] = json_body(fields)
            out.append(encode(MessageType.ANNEX, body, tag=tag, sequence=submit_id))
        else:
            out.append(annex(submit_id, tag, fields))
    return b"".join(out)


def frame(number: int, device_address: int, queue: str, source: str, time_ns: int,
          images: tuple[int, ...] | None = None) -> bytes:
    """`time_ns`: CLOCK_MONOTONIC_RAW when the frame ended; `images`: the frame's output images (what a
    present showed, a VkFrameBoundaryEXT's pImages; 0: an image the layer does not know; None: none named).
    Written as one format (every present sends one), the same bytes as json_body of the payload
    (tests/layer/test_encoder.py)."""
    shown = "" if images is None else ',"images":[' + ",".join([f'"{hex(i)}"' for i in images]) + "]"
    body = f'{{"frame":{number},"time_ns":{time_ns}{frame_middle(device_address, queue, source)}{shown}}}'
    return encode(MessageType.FRAME, body.encode())


def frame_middle(device_address: int, queue: str, source: str) -> str:
    """A FRAME's JSON between its time and its images, as `frame` writes it (C writes the rest of a present's:
    vkapi/runtime/reported_submits.c)."""
    name, said = _JSON_TEXTS.get(queue) or _json_text(queue), _JSON_TEXTS.get(source) or _json_text(source)
    return f',"device":"{hex(device_address)}","queue":{name},"source":{said}'


def instrumentation(submit_id: int, tag: int, device_address: int, actions: list[dict]) -> bytes:
    return encode(MessageType.INSTRUMENTATION, {"device": hex_handle(device_address), "actions": actions},
                  tag=tag, sequence=submit_id)


def shader(device_address: int, pipeline: int, stage: str, entry: str, blocks: list[dict]) -> bytes:
    return encode(MessageType.SHADER, {"device": hex_handle(device_address), "pipeline": hex_handle(pipeline),
                                       "stage": stage, "entry": entry, "blocks": blocks})


def regions(submit_id: int, tag: int, device_address: int, payload: dict) -> bytes:
    return encode(MessageType.REGIONS, {"device": hex_handle(device_address), **payload}, tag=tag,
                  sequence=submit_id)


def now_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
