"""A fast "certainly valid" check of message payloads, compiled from the JSON Schemas.

Role: hostd validates every frame (warn and strict modes) and jsonschema
costs ~150 µs for a 1 KB WORKLOAD, so a busy daemon would spend all its time
there. `valid(type, payload)` runs Python generated once per schema from
schemas/json/*.schema.json and answers True only when the payload certainly
satisfies the schema. Anything else (a violation, or a value the fast path
does not decide, such as 3.0 for an integer) returns False, and the caller
asks jsonschema (schemas.messages.problems) for the verdict and the
messages. So the result of validation is exactly jsonschema's; only the
common, valid case is faster.

Supported keywords: type, enum (of strings), required, properties,
additionalProperties (false only), items (one schema), minItems, maxItems,
minimum, maximum, maxLength; annotations (title, description, $schema, $id)
are ignored. A schema using any other keyword is
not compiled: its type always goes to jsonschema (`compiled()` says which).
Conservative on purpose: "integer" accepts only int (not bool, not an
integral float), "number" int or float (not bool), "boolean" only bool.

Two predicates per schema: `valid` (the schema as written, for hostd's
ingest) and `usable` (the same without `additionalProperties: false`, for
the merge: a field a newer layer added is drift to report at ingest, not a
reason to drop the frame's metadata; schemas.messages.problems takes the same
`unknown_ok`).
"""
from __future__ import annotations

import functools
import json
from typing import Any, Callable

from tessera.schemas.frames import MessageType
from tessera.schemas.messages import SCHEMA_DIR, SCHEMA_FILES

_ANNOTATIONS = {"title", "description", "$schema", "$id"}
_KEYWORDS = _ANNOTATIONS | {"type", "enum", "required", "properties", "additionalProperties", "items", "minItems",
                            "maxItems", "minimum", "maximum", "maxLength"}
_TYPES = {"object": "type({v}) is dict", "array": "type({v}) is list", "string": "type({v}) is str",
          "integer": "type({v}) is int", "boolean": "type({v}) is bool",
          "number": "(type({v}) is int or type({v}) is float)"}


class _Unsupported(Exception):
    pass


class _Gen:
    def __init__(self, unknown_ok: bool) -> None:
        self.unknown_ok = unknown_ok    # ignore additionalProperties: false
        self.lines: list[str] = []
        self.consts: dict[str, Any] = {}
        self.n = 0

    def var(self) -> str:
        self.n += 1
        return f"v{self.n}"

    def const(self, value: Any) -> str:
        name = f"c{len(self.consts)}"
        self.consts[name] = value
        return name

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def schema(self, s: Any, v: str, depth: int) -> None:
        """Lines that `return False` unless value `v` certainly satisfies schema `s`."""
        if s is True or s == {}:
            return
        if not isinstance(s, dict) or set(s) - _KEYWORDS:
            raise _Unsupported(s)
        t = s.get("type")
        if t is not None and (not isinstance(t, str) or t not in _TYPES):
            raise _Unsupported(t)
        # One line per value: its type and bounds, the bounds unguarded when the type is known.
        numeric = t in ("integer", "number")
        checks = [_TYPES[t].format(v=v)] if t is not None else []
        if "enum" in s:
            values = s["enum"]
            if not all(isinstance(x, str) for x in values):
                raise _Unsupported(values)
            checks.append(f"type({v}) is str and {v} in {self.const(frozenset(values))}")
        for key, op in (("minimum", ">="), ("maximum", "<=")):
            if key in s:
                m = s[key]
                if type(m) not in (int, float):
                    raise _Unsupported(m)
                # applies to numbers only (not bool); NaN compares False and goes to jsonschema
                checks.append(f"{v} {op} {m!r}" if numeric else
                              f"(not (type({v}) is int or type({v}) is float) or {v} {op} {m!r})")
        if "maxLength" in s:
            # code points, as jsonschema counts them (len of a str)
            n = int(s["maxLength"])
            checks.append(f"len({v}) <= {n}" if t == "string" else f"(type({v}) is not str or len({v}) <= {n})")
        if checks:
            self.emit(depth, f"if not ({' and '.join(checks)}): return False")
        if "additionalProperties" in s and s["additionalProperties"] is not False:
            raise _Unsupported(s["additionalProperties"])
        closed = s.get("additionalProperties") is False and not self.unknown_ok
        obj = [k for k in ("required", "properties") if k in s] or closed
        if obj:
            if t != "object":
                self.emit(depth, f"if type({v}) is dict:")
                depth += 1
            if closed:     # dict keys <= frozenset: a set comparison, nothing allocated
                names = self.const(frozenset(s.get("properties", {})))
                self.emit(depth, f"if not {v}.keys() <= {names}: return False")
            for key in s.get("required", []):
                self.emit(depth, f"if {json.dumps(key)} not in {v}: return False")
            for key, sub in s.get("properties", {}).items():
                x = self.var()
                before = len(self.lines)
                self.schema(sub, x, depth + 1)     # `in` first: most declared properties are absent
                if len(self.lines) > before:
                    self.lines[before:before] = ["    " * depth + f"if {json.dumps(key)} in {v}:",
                                                 "    " * (depth + 1) + f"{x} = {v}[{json.dumps(key)}]"]
            if t != "object":
                depth -= 1
        arr = [k for k in ("items", "minItems", "maxItems") if k in s]
        if arr:
            if t != "array":
                self.emit(depth, f"if type({v}) is list:")
                depth += 1
            if "minItems" in s:
                self.emit(depth, f"if len({v}) < {int(s['minItems'])}: return False")
            if "maxItems" in s:
                self.emit(depth, f"if len({v}) > {int(s['maxItems'])}: return False")
            if "items" in s:
                x = self.var()
                self.emit(depth, f"for {x} in {v}:")
                before = len(self.lines)
                self.schema(s["items"], x, depth + 1)
                if len(self.lines) == before:
                    self.emit(depth + 1, "pass")
            if t != "array":
                depth -= 1


def compile_schema(schema: dict, unknown_ok: bool = False) -> Callable[[Any], bool] | None:
    """A predicate that is True only when `schema` certainly accepts the value (ignoring
    `additionalProperties: false` when `unknown_ok`); None if unsupported."""
    g = _Gen(unknown_ok)
    try:
        g.schema(schema, "v0", 1)
    except _Unsupported:
        return None
    source = "def check(v0):\n" + "\n".join(g.lines + ["    return True"]) + "\n"
    namespace: dict[str, Any] = dict(g.consts)
    exec(compile(source, f"<fastcheck {schema.get('$id', '?')}>", "exec"), namespace)
    check = namespace["check"]
    check.source = source
    return check


@functools.cache
def _checks(unknown_ok: bool = False) -> dict[int, Callable[[Any], bool]]:
    out = {}
    for message_type, name in SCHEMA_FILES.items():
        check = compile_schema(json.loads((SCHEMA_DIR / name).read_text()), unknown_ok)
        if check is not None:
            out[int(message_type)] = check
    return out


def compiled() -> set[MessageType]:
    """The message types with a fast path (the others always go to jsonschema)."""
    return {MessageType(t) for t in _checks()}


def valid(message_type: int, payload: Any) -> bool:
    """True only if `payload` certainly satisfies its type's schema (False: ask jsonschema)."""
    check = _checks().get(message_type)
    return check is not None and check(payload)


def usable(message_type: int, payload: Any) -> bool:
    """`valid`, except that fields the schema does not declare are allowed (the merge's check)."""
    check = _checks(True).get(message_type)
    return check is not None and check(payload)
