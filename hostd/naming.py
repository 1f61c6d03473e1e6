"""Readable names and args for GPU slices, from a workload's metadata.

Rules (docs/hostd.md): the innermost application debug label wins;
otherwise the workload's type and size, e.g. "Render pass 1920×1080, 12 draws",
"Dispatch 64×1×1 groups (4096 items)", "Copy buffer, 65536 bytes". Labels the
layer itself adds (`t<tagID>`, `s<submitID>`) are never application labels.
Pure functions, no state.
"""
from __future__ import annotations

import json
import re
from typing import Any

from tessera.schemas.labels import SUBMIT_LABEL, TAG_LABEL, is_layer_label

STACK_SEPARATOR = " / "


def split_stack(stack: str | None) -> list[str]:
    return [] if not stack else stack.split(STACK_SEPARATOR)


def tag_of(labels: str | None, stack: list[str]) -> int | None:
    """The tagID: the `Labels` value (`t<N>`), else the innermost `t<N>` of the stack."""
    if labels:
        m = TAG_LABEL.match(labels.strip())
        if m:
            return int(m.group(1))
    for label in reversed(stack):
        m = TAG_LABEL.match(label)
        if m:
            return int(m.group(1))
    return None


def submit_of(stack: list[str]) -> int | None:
    """The submitID of an annexed submit: the innermost `s<M>` label of the stack."""
    for label in reversed(stack):
        m = SUBMIT_LABEL.match(label)
        if m:
            return int(m.group(1))
    return None


def app_labels(meta: dict[str, Any] | None, stack: list[str]) -> list[str]:
    """Application labels, outermost first: the metadata's (annex over workload), else the driver's stack."""
    labels = meta.get("labels") if meta else None
    if isinstance(labels, list) and labels:
        out = [str(x) for x in labels if not is_layer_label(str(x))]
        if out:
            return out
    return [x for x in stack if x and not is_layer_label(x)]


def _n(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _dims(values: Any) -> str | None:
    if isinstance(values, list) and values and all(_int(v) is not None and v >= 0 for v in values):
        return "×".join(str(v) for v in values)
    return None


def _size(meta: dict[str, Any]) -> str | None:
    w, h, d = _int(meta.get("width")), _int(meta.get("height")), _int(meta.get("depth"))
    if (w is None or h is None) and isinstance(meta.get("render_area"), list) and len(meta["render_area"]) == 4:
        w, h = _int(meta["render_area"][2]), _int(meta["render_area"][3])
    if w is None or h is None or w < 0 or h < 0:
        return None
    return f"{w}×{h}×{d}" if d is not None and d > 1 else f"{w}×{h}"


def _subtype(meta: dict[str, Any], default: str) -> str:
    sub = meta.get("subtype")
    return (sub[:1].upper() + sub[1:]) if isinstance(sub, str) and sub else default


def describe(meta: dict[str, Any]) -> str:
    """Workload type and size."""
    kind = meta.get("kind")
    if kind == "render_pass":
        parts = ["Render pass" + (f" {s}" if (s := _size(meta)) else "")]
        draws = _int(meta.get("draw_call_count"))
        if draws is not None and draws >= 0:
            parts.append(_n(draws, "draw"))
        return ", ".join(parts)
    if kind == "dispatch":
        groups = _dims(meta.get("groups"))
        if groups is None:
            return "Dispatch (indirect)" if meta.get("indirect") or meta.get("groups") else "Dispatch"
        items = _int(meta.get("items"))
        return f"Dispatch {groups} groups" + (f" ({_n(items, 'item')})" if items is not None and items >= 0 else "")
    if kind == "trace_rays":
        size = _size(meta)
        return "Trace rays" + (f" {size}" if size else "")
    if kind == "buffer_transfer":
        name = _subtype(meta, "Buffer transfer")
        size = _int(meta.get("bytes"))
        if size is None:
            return name
        return f"{name}, whole size" if size < 0 else f"{name}, {_n(size, 'byte')}"
    if kind == "image_transfer":
        name = _subtype(meta, "Image transfer")
        if size := _size(meta):
            return f"{name} {size}"
        pixels = _int(meta.get("pixels"))
        return f"{name}, {_n(pixels, 'pixel')}" if pixels is not None and pixels >= 0 else name
    if kind == "tensor_copy":
        size = _int(meta.get("bytes"))
        return "Tensor copy" + (f", {_n(size, 'byte')}" if size is not None and size >= 0 else "")
    return str(kind).replace("_", " ").capitalize() if kind else "Workload"


def slice_name(meta: dict[str, Any] | None, stack: list[str], fallback: str) -> str:
    """The GPU slice's name: innermost application label, else describe(meta), else `fallback`."""
    labels = app_labels(meta, stack)
    if labels:
        return labels[-1]
    return describe(meta) if meta else fallback


_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode   # what json.dumps(...) calls
_INTS, _STRS = frozenset({int}), frozenset({str})
_JSON_ESCAPED = re.compile(r'[\x00-\x1f\\"]')     # what JSON escapes in a string when ensure_ascii=False


def arg_value(value: Any) -> str:
    """An extra_data value: strings as they are, everything else as compact JSON.

    Fast paths (the merge calls this for every field of every joined workload) give
    exactly what json.dumps gives: an int's repr, true/false/null, a list of ints, a
    list of strings none of which JSON escapes (with ensure_ascii=False it escapes
    only `"`, `\\` and U+0000..U+001F), in quotes.
    """
    t = type(value)
    if t is str:
        return value
    if t is int:
        return int.__repr__(value)
    if t is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    if t is list:
        types = set(map(type, value))
        if types <= _INTS:
            return "[" + ",".join(map(int.__repr__, value)) + "]"
        if types == _STRS and not _JSON_ESCAPED.search("".join(value)):
            return '["' + '","'.join(value) + '"]'
    if isinstance(value, str):
        return value
    return _JSON(value)
