"""The JSON Schemas of every message payload, and validation against them.

`SCHEMAS` maps each MessageType to its schema (schemas/json/*.schema.json).
Validation is for receivers (hostd); the layer never validates on
application threads.
"""
from __future__ import annotations

import functools
import itertools
import json
from pathlib import Path
from typing import Any

from .frames import MessageType

SCHEMA_DIR = Path(__file__).resolve().parent / "json"
SCHEMA_FILES = {
    MessageType.HELLO: "hello.schema.json",
    MessageType.DEVICE: "device.schema.json",
    MessageType.WORKLOAD: "workload.schema.json",
    MessageType.WORKLOADS: "workloads.schema.json",
    MessageType.RECORDED_AGAIN: "recorded_again.schema.json",
    MessageType.FRAME: "frame.schema.json",
    MessageType.SUBMIT: "submit.schema.json",
    MessageType.ANNEX: "annex.schema.json",
    MessageType.SHADER: "shader.schema.json",
    MessageType.INSTRUMENTATION: "instrumentation.schema.json",
    MessageType.REGIONS: "regions.schema.json",
}


@functools.cache
def validator(message_type: MessageType):
    import jsonschema

    schema = json.loads((SCHEMA_DIR / SCHEMA_FILES[message_type]).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def problems(message_type: int, payload: Any, unknown_ok: bool = False, limit: int = 10) -> list[str]:
    """Schema violations of a payload, as readable lines (empty when valid), at most `limit`
    (a hostile payload can break a rule a million times). `unknown_ok`: fields the schema does
    not declare are not a violation (`additionalProperties: false` is for catching drift at
    ingest; a reader can still use the rest)."""
    if message_type not in SCHEMA_FILES:
        return []
    errors = validator(MessageType(message_type)).iter_errors(payload)
    if unknown_ok:
        errors = (e for e in errors if e.validator != "additionalProperties")
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {_short(e.message)}"
            for e in itertools.islice(errors, limit)]


def _short(message: str, limit: int = 200) -> str:
    """jsonschema quotes the offending value whole: a 16 MiB string stays out of the logs."""
    return message if len(message) <= limit else message[:limit] + "…"
