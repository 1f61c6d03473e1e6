"""Protobuf classes of Arm's GPU Timeline protocol, built at import from `arm_timeline.proto`.

Role: the one place that turns the .proto beside this module into message
classes (`TimelineRecord`, `Frame`, …), with protobuf's runtime descriptor
building: the .proto is read into a `FileDescriptorProto` (a reader for the
subset protoc would accept here: package, enums, messages, singular and
repeated fields of scalar, enum or message type, comments), added to a
private `DescriptorPool` and given classes by `message_factory`. Decoding
and encoding are protobuf's own; nothing here touches varints.
tests/hostd/test_arm_wire.py checks the descriptor against what protoc
(grpcio-tools, a dev dependency) makes of the same file.

Why not a committed `_pb2.py`: generated code is pinned to a protoc/runtime
pairing (STYLE: generated text is made at build time or committed with a
regenerating test); building at import needs neither protoc nor a build
step. Import-time cost: ~2 ms.
"""
from __future__ import annotations

import re
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PROTO_PATH = Path(__file__).with_name("arm_timeline.proto")

_F = descriptor_pb2.FieldDescriptorProto
SCALARS = {
    "double": _F.TYPE_DOUBLE, "float": _F.TYPE_FLOAT, "int64": _F.TYPE_INT64, "uint64": _F.TYPE_UINT64,
    "int32": _F.TYPE_INT32, "uint32": _F.TYPE_UINT32, "bool": _F.TYPE_BOOL, "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES, "sint32": _F.TYPE_SINT32, "sint64": _F.TYPE_SINT64,
    "fixed32": _F.TYPE_FIXED32, "fixed64": _F.TYPE_FIXED64,
}
_TOKEN = re.compile(r'"[^"]*"|[A-Za-z_][A-Za-z0-9_.]*|-?\d+|[{}=;]')
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


class ProtoError(ValueError):
    """The .proto uses something this reader does not handle."""


def parse_proto(text: str, name: str = "arm_timeline.proto") -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto of a proto3 file of the subset described above."""
    tokens = _TOKEN.findall(_COMMENT.sub(" ", text))
    fd = descriptor_pb2.FileDescriptorProto(name=name)
    pos = 0

    def take(expected: str | None = None) -> str:
        nonlocal pos
        if pos >= len(tokens):
            raise ProtoError(f"unexpected end of {name}")
        tok = tokens[pos]
        pos += 1
        if expected is not None and tok != expected:
            raise ProtoError(f"{name}: expected {expected!r}, found {tok!r}")
        return tok

    enums: set[str] = set()
    pending: list[tuple[descriptor_pb2.FieldDescriptorProto, str]] = []
    while pos < len(tokens):
        word = take()
        if word == "syntax":
            take("=")
            fd.syntax = take().strip('"')
            take(";")
        elif word == "package":
            fd.package = take()
            take(";")
        elif word == "option":
            while take() != ";":
                pass
        elif word == "enum":
            e = fd.enum_type.add(name=take())
            enums.add(e.name)
            take("{")
            while (tok := take()) != "}":
                take("=")
                e.value.add(name=tok, number=int(take()))
                take(";")
        elif word == "message":
            m = fd.message_type.add(name=take())
            take("{")
            while (tok := take()) != "}":
                label = _F.LABEL_OPTIONAL
                if tok == "repeated":
                    label, tok = _F.LABEL_REPEATED, take()
                field_name = take()
                take("=")
                f = m.field.add(name=field_name, number=int(take()), label=label,
                                json_name=_json_name(field_name))
                take(";")
                if tok in SCALARS:
                    f.type = SCALARS[tok]
                else:
                    pending.append((f, tok))
        else:
            raise ProtoError(f"{name}: {word!r} is not handled by this reader")
    prefix = f".{fd.package}." if fd.package else "."
    for f, type_name in pending:
        f.type = _F.TYPE_ENUM if type_name in enums else _F.TYPE_MESSAGE
        f.type_name = prefix + type_name
    return fd


def _json_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


FILE = parse_proto(PROTO_PATH.read_text(encoding="utf-8"))
_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(FILE)


def message_class(name: str):
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{FILE.package}.{name}"))


TimelineRecord = message_class("TimelineRecord")
Header = message_class("Header")
DeviceMetadata = message_class("DeviceMetadata")
Frame = message_class("Frame")
Submit = message_class("Submit")
BeginRenderpass = message_class("BeginRenderpass")
ContinueRenderpass = message_class("ContinueRenderpass")
Dispatch = message_class("Dispatch")
DispatchDataGraph = message_class("DispatchDataGraph")
TraceRays = message_class("TraceRays")
ImageTransfer = message_class("ImageTransfer")
BufferTransfer = message_class("BufferTransfer")
AccelerationStructureBuild = message_class("AccelerationStructureBuild")
AccelerationStructureTransfer = message_class("AccelerationStructureTransfer")

# TimelineRecord's member fields, in field-number order.
RECORD_FIELDS = tuple(f.name for f in sorted(TimelineRecord.DESCRIPTOR.fields, key=lambda f: f.number))


def enum_name(enum_type: str, number: int) -> str:
    """The name of an enum value (`str(number)` for a value the .proto does not list)."""
    value = _POOL.FindEnumTypeByName(f"{FILE.package}.{enum_type}").values_by_number.get(number)
    return value.name if value is not None else str(number)
