"""Specialization constants: defaults, VkSpecializationInfo values, evaluation.

Role: compute the value of every constant in a module after specialization,
as a driver does at pipeline creation, so work-group sizes and other
spec-dependent values are exact. Values are Python ints (integers masked to
their type's width, booleans as 0/1, floats as their bit pattern) or tuples
for composites. OpSpecConstantOp is evaluated for the integer, boolean and
composite operations the specification allows in shaders, and OpFConvert
between 16-, 32- and 64-bit floats (glslang emits it; Arm's ML emulation
layer's shaders use it) (`SPEC_CONSTANT_OPS`); an op outside that set, or one
with an operand of unknown value, gives the value None.

`spec_values` maps SpecId -> int (the value; for floats the bit pattern) or
bytes (the little-endian data a VkSpecializationMapEntry points at).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .errors import SpirvError
from .grammar import grammar
from .module import Instruction, Module

OP_DECORATE = 71
OP_TYPE_BOOL = 20
OP_TYPE_INT = 21
OP_TYPE_FLOAT = 22
OP_TYPE_VECTOR = 23
OP_CONSTANT_TRUE = 41
OP_CONSTANT_FALSE = 42
OP_CONSTANT = 43
OP_CONSTANT_COMPOSITE = 44
OP_CONSTANT_NULL = 46
OP_SPEC_CONSTANT_TRUE = 48
OP_SPEC_CONSTANT_FALSE = 49
OP_SPEC_CONSTANT = 50
OP_SPEC_CONSTANT_COMPOSITE = 51
OP_SPEC_CONSTANT_OP = 52
DECORATION_SPEC_ID = 1

SpecValue = int | bytes
Value = int | tuple | None


@dataclass(frozen=True, slots=True)
class SpecConstant:
    """A specialization constant: SpecId, result id, type, default value."""

    spec_id: int
    id: int
    type: str       # "bool", "int", "uint" or "float"
    width: int
    default: int    # booleans 0/1, floats as bit patterns


def _signed(value: int, width: int) -> int:
    return value - (1 << width) if value >= 1 << (width - 1) else value


def _int_ops() -> dict[str, Callable[..., int]]:
    """Binary/unary integer ops on (width, operands...) -> unmasked result."""
    def sdiv(w: int, a: int, b: int) -> int:
        x, y = _signed(a, w), _signed(b, w)
        if y == 0:
            raise ZeroDivisionError
        q = abs(x) // abs(y)
        return q if (x < 0) == (y < 0) else -q

    def srem(w: int, a: int, b: int) -> int:
        x, y = _signed(a, w), _signed(b, w)
        return x - sdiv(w, a, b) * y

    def smod(w: int, a: int, b: int) -> int:
        x, y = _signed(a, w), _signed(b, w)
        r = srem(w, a, b)
        return r + y if r and (r < 0) != (y < 0) else r

    return {
        "OpIAdd": lambda w, a, b: a + b,
        "OpISub": lambda w, a, b: a - b,
        "OpIMul": lambda w, a, b: a * b,
        "OpUDiv": lambda w, a, b: a // b,
        "OpUMod": lambda w, a, b: a % b,
        "OpSDiv": sdiv,
        "OpSRem": srem,
        "OpSMod": smod,
        "OpShiftLeftLogical": lambda w, a, b: a << b,
        "OpShiftRightLogical": lambda w, a, b: a >> b,
        "OpShiftRightArithmetic": lambda w, a, b: _signed(a, w) >> b,
        "OpBitwiseOr": lambda w, a, b: a | b,
        "OpBitwiseAnd": lambda w, a, b: a & b,
        "OpBitwiseXor": lambda w, a, b: a ^ b,
        "OpNot": lambda w, a: ~a,
        "OpSNegate": lambda w, a: -a,
    }


_INT_OPS = _int_ops()
_COMPARE_OPS: dict[str, Callable[[int, int, int], bool]] = {
    "OpIEqual": lambda w, a, b: a == b,
    "OpINotEqual": lambda w, a, b: a != b,
    "OpULessThan": lambda w, a, b: a < b,
    "OpUGreaterThan": lambda w, a, b: a > b,
    "OpULessThanEqual": lambda w, a, b: a <= b,
    "OpUGreaterThanEqual": lambda w, a, b: a >= b,
    "OpSLessThan": lambda w, a, b: _signed(a, w) < _signed(b, w),
    "OpSGreaterThan": lambda w, a, b: _signed(a, w) > _signed(b, w),
    "OpSLessThanEqual": lambda w, a, b: _signed(a, w) <= _signed(b, w),
    "OpSGreaterThanEqual": lambda w, a, b: _signed(a, w) >= _signed(b, w),
    "OpLogicalEqual": lambda w, a, b: a == b,
    "OpLogicalNotEqual": lambda w, a, b: a != b,
    "OpLogicalOr": lambda w, a, b: bool(a or b),
    "OpLogicalAnd": lambda w, a, b: bool(a and b),
}
SPEC_CONSTANT_OPS = frozenset(_INT_OPS) | frozenset(_COMPARE_OPS) | frozenset(
    {"OpLogicalNot", "OpSelect", "OpUConvert", "OpSConvert", "OpCompositeExtract",
     "OpCompositeInsert", "OpVectorShuffle", "OpFConvert"})
_FLOAT_FORMATS = {16: "<e", 32: "<f", 64: "<d"}


def spec_ids(module: Module) -> dict[int, int]:
    """Result id -> SpecId for every SpecId decoration."""
    out: dict[int, int] = {}
    for inst in module.globals:
        if inst.opcode == OP_DECORATE and len(inst.words) >= 3 and inst.words[1] == DECORATION_SPEC_ID:
            out[inst.words[0]] = inst.words[2]
    return out


def _scalar_type(module: Module, type_id: int) -> tuple[str, int]:
    t = module.defs.get(type_id)
    if t is None:
        return "unknown", 32
    if t.opcode == OP_TYPE_BOOL:
        return "bool", 1
    if t.opcode == OP_TYPE_INT:
        return ("int" if t.words[2] else "uint"), t.words[1]
    if t.opcode == OP_TYPE_FLOAT:
        return "float", t.words[1]
    return "composite", 0


def _literal(words: list[int]) -> int:
    value = 0
    for i, w in enumerate(words):
        value |= w << (32 * i)
    return value


def spec_constants(module: Module) -> list[SpecConstant]:
    """Scalar specialization constants with their defaults, in SpecId order."""
    ids = spec_ids(module)
    out: list[SpecConstant] = []
    for result_id, spec_id in ids.items():
        inst = module.defs.get(result_id)
        if inst is None:
            continue
        kind, width = _scalar_type(module, inst.type_id)
        if inst.opcode == OP_SPEC_CONSTANT:
            default = _literal(inst.words[2:])
        elif inst.opcode in (OP_SPEC_CONSTANT_TRUE, OP_SPEC_CONSTANT_FALSE):
            default = int(inst.opcode == OP_SPEC_CONSTANT_TRUE)
        else:
            continue
        out.append(SpecConstant(spec_id, result_id, kind, width, default))
    return sorted(out, key=lambda s: s.spec_id)


def _override(spec: SpecConstant, value: SpecValue) -> int:
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        if spec.type == "bool":
            return int(any(raw))
        value = int.from_bytes(raw[: max(1, spec.width // 8)], "little")
    if spec.type == "bool":
        return int(bool(value))
    return int(value) & ((1 << spec.width) - 1)


def evaluate_constants(module: Module, spec_values: Mapping[int, SpecValue] | None = None) -> dict[int, Value]:
    """Value of every constant and spec constant after specialization."""
    specs = {s.id: s for s in spec_constants(module)}
    overrides: dict[int, int] = {}
    for s in specs.values():
        if spec_values and s.spec_id in spec_values:
            overrides[s.id] = _override(s, spec_values[s.spec_id])
    values: dict[int, Value] = {}
    for inst in module.globals:
        op = inst.opcode
        if op in (OP_CONSTANT, OP_SPEC_CONSTANT):
            # a signed literal narrower than 32 bits is sign-extended in its word (SPIR-V 2.2.1): masked here
            width = _scalar_type(module, inst.type_id)[1]
            values[inst.result_id] = overrides.get(inst.result_id, _literal(inst.words[2:]) & ((1 << width) - 1))
        elif op in (OP_CONSTANT_TRUE, OP_SPEC_CONSTANT_TRUE):
            values[inst.result_id] = overrides.get(inst.result_id, 1)
        elif op in (OP_CONSTANT_FALSE, OP_SPEC_CONSTANT_FALSE):
            values[inst.result_id] = overrides.get(inst.result_id, 0)
        elif op in (OP_CONSTANT_COMPOSITE, OP_SPEC_CONSTANT_COMPOSITE):
            parts = tuple(values.get(c) for c in inst.words[2:])
            values[inst.result_id] = None if any(p is None for p in parts) else parts
        elif op == OP_CONSTANT_NULL:
            values[inst.result_id] = _null(module, inst.type_id)
        elif op == OP_SPEC_CONSTANT_OP:
            values[inst.result_id] = _spec_op(module, inst, values)
    return values


def _null(module: Module, type_id: int) -> Value:
    kind, _ = _scalar_type(module, type_id)
    if kind != "composite":
        return 0
    t = module.defs[type_id]
    if t.opcode == OP_TYPE_VECTOR:
        return tuple(0 for _ in range(t.words[2]))
    return None


def _spec_op(module: Module, inst: Instruction, values: dict[int, Value]) -> Value:
    info = grammar().instructions.get(inst.words[2])
    name = info.opname if info else ""
    args = inst.words[3:]
    kind, width = _scalar_type(module, inst.type_id)
    try:
        if name in _INT_OPS:
            operands = [values[a] for a in args]
            if any(not isinstance(v, int) for v in operands):
                return None
            return _INT_OPS[name](width, *operands) & ((1 << width) - 1)
        if name in _COMPARE_OPS:
            a, b = values[args[0]], values[args[1]]
            if not isinstance(a, int) or not isinstance(b, int):
                return None
            operand_width = _scalar_type(module, module.defs[args[0]].type_id)[1]
            return int(_COMPARE_OPS[name](operand_width, a, b))
        if name == "OpLogicalNot":
            return int(not values[args[0]])
        if name == "OpSelect":
            return values[args[1]] if values[args[0]] else values[args[2]]
        if name == "OpUConvert":
            return values[args[0]] & ((1 << width) - 1)
        if name == "OpSConvert":
            source_width = _scalar_type(module, module.defs[args[0]].type_id)[1]
            return _signed(values[args[0]], source_width) & ((1 << width) - 1)
        if name == "OpFConvert":
            return _fconvert(values[args[0]], _scalar_type(module, module.defs[args[0]].type_id)[1], width)
        if name == "OpCompositeExtract":
            value = values[args[0]]
            for index in args[1:]:
                value = value[index]
            return value
        if name == "OpCompositeInsert":
            return _insert(values[args[1]], args[2:], values[args[0]])
        if name == "OpVectorShuffle":
            pool = tuple(values[args[0]]) + tuple(values[args[1]])
            return tuple(None if c == 0xFFFFFFFF else pool[c] for c in args[2:])
    except (KeyError, IndexError, TypeError, ZeroDivisionError):
        return None
    return None


def _fconvert(bits: Value, source: int, width: int) -> Value:
    """A float's bit pattern converted to another width (round to nearest; None when either width
    is not 16, 32 or 64 bits or the value does not fit: OverflowError)."""
    import struct

    if not isinstance(bits, int) or source not in _FLOAT_FORMATS or width not in _FLOAT_FORMATS:
        return None
    value = struct.unpack(_FLOAT_FORMATS[source], bits.to_bytes(source // 8, "little"))[0]
    try:
        return int.from_bytes(struct.pack(_FLOAT_FORMATS[width], value), "little")
    except (OverflowError, struct.error):
        return None


def _insert(composite: Value, path: list[int], part: Value) -> Value:
    if not path:
        return part
    if not isinstance(composite, tuple):
        raise TypeError("insert into a non-composite")
    items = list(composite)
    items[path[0]] = _insert(items[path[0]], path[1:], part)
    return tuple(items)


def spec_values_from_map(entries: list[tuple[int, int, int]], data: bytes) -> dict[int, bytes]:
    """VkSpecializationInfo contents -> SpecId -> bytes.

    `entries` are (constantID, offset, size) triples as in VkSpecializationMapEntry.
    """
    out: dict[int, bytes] = {}
    for constant_id, offset, size in entries:
        if offset + size > len(data):
            raise SpirvError(f"specialization entry {constant_id} reads past the data ({offset}+{size} > {len(data)})")
        out[constant_id] = bytes(data[offset:offset + size])
    return out


def spec_value_from_text(spec: SpecConstant, text: str) -> int:
    """The value a driver would be given for `spec`, from a user's text (`--spec ID=VALUE`): an
    integer in the range of its type (never wrapped to its width; a signed one may be negative),
    true/false/1/0 for a bool, a decimal number or its bit pattern for a float. ValueError says
    what is allowed."""
    import struct

    kind, width = spec.type, spec.width
    if kind == "bool":
        word = text.strip().lower()
        if word in ("true", "1"):
            return 1
        if word in ("false", "0"):
            return 0
        raise ValueError("a bool: true, false, 1 or 0")
    if kind == "float":
        formats = {16: "<e", 32: "<f", 64: "<d"}
        try:
            bits = int(text, 0)
        except ValueError:
            if width not in formats:
                raise ValueError(f"the bit pattern of a {width}-bit float") from None
            try:
                return int.from_bytes(struct.pack(formats[width], float(text)), "little")
            except (ValueError, OverflowError, struct.error):
                raise ValueError(f"a number that fits a {width}-bit float, or its bit pattern") from None
        if not 0 <= bits < 1 << width:
            raise ValueError(f"a {width}-bit float, or its bit pattern 0 to {(1 << width) - 1}")
        return bits
    try:
        number = int(text, 0)
    except ValueError:
        raise ValueError("an integer") from None
    low, high = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if kind == "int" else (0, (1 << width) - 1)
    if not low <= number <= high:
        raise ValueError(f"an integer from {low} to {high} ({'signed' if kind == 'int' else 'unsigned'} "
                         f"{width}-bit)")
    return number


def spec_values_from_text(module: Module, pairs) -> dict[int, int]:
    """(SpecId, text) pairs -> SpecId -> value, each checked against the module's constant of that
    SpecId (`spec_value_from_text`); SpirvError for an unknown SpecId or a value its type cannot hold."""
    known = {s.spec_id: s for s in spec_constants(module)}

    def kind(s: SpecConstant) -> str:
        return s.type if s.type == "bool" else f"{s.type}{s.width}"

    out: dict[int, int] = {}
    for spec_id, text in pairs:
        spec = known.get(spec_id)
        if spec is None:
            have = ", ".join(f"{s.spec_id} ({kind(s)})" for s in known.values()) or "none"
            raise SpirvError(f"{spec_id}={text}: the module has no specialization constant with SpecId {spec_id} "
                             f"(it has: {have})")
        try:
            out[spec_id] = spec_value_from_text(spec, text)
        except ValueError as exc:
            raise SpirvError(f"{spec_id}={text}: SpecId {spec_id} is a {kind(spec)}; VALUE must be {exc}") from None
    return out
