"""The JSON Schemas of every message payload, and validation against them.

`SCHEMAS` maps each MessageType to its schema (schemas/json/*.schema.json).
Validation is for receivers (hostd); the layer never validates on
application threads.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from .frames import MessageType

SCHEMA_DIR = Path(__file__).resolve().parent / "json"
SCHEMA_FILES = {
    MessageType.HELLO: "hello.schema.json",
    MessageType.DEVICE: "device.schema.json",
    MessageType.WORKLOAD: "workload.schema.json",
    MessageType.FRAME: "frame.schema.json",
    MessageType.SUBMIT: "submit.schema.json",
    MessageType.ANNEX: "annex.schema.json",
}


@functools.cache
def validator(message_type: MessageType):
    import jsonschema

    schema = json.loads((SCHEMA_DIR / SCHEMA_FILES[message_type]).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def problems(message_type: int, payload: Any) -> list[str]:
    """Schema violations of a payload, as readable lines (empty when valid)."""
    if message_type not in SCHEMA_FILES:
        return []
    v = validator(MessageType(message_type))
    return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in v.iter_errors(payload)]
