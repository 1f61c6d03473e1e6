"""Integer (quantized) TOSA operators lowered to the emulated Mali's integer compute kernels.

Role: the int8 / int16 / int32 half of lowering.py: RESCALE, CONV2D and DEPTHWISE_CONV2D (int8 inputs and
weights, int32 bias and accumulator), MATMUL (int8, int32 result), ADD, SUB, MUL (with its rounding shift),
MAXIMUM, MINIMUM, CLAMP, ABS, NEGATE (with zero points), TABLE (int8), CAST, RESHAPE, the data movement (TRANSPOSE,
SLICE, PAD, TILE, REVERSE, CONCAT) and MAX_POOL2D / AVG_POOL2D (zero points, reciprocal_scale), each with
TOSA 1.0's exact integer semantics (shaders/i*.comp and rescale.comp; apply_scale_32 / apply_scale_16 in
shaders/icommon.glsl).
Pure Python, no Vulkan.

Representation: inside a graph every integer tensor value (constants, intermediate tensors) is one int32 word
per element, sign-extended from its TOSA type; only the graph's inputs and outputs keep their format's width
(an int8 tensor is bytes). Each integer kernel's parameter block starts with its operands' and result's element
bytes (p[0..3]), filled in by `widths` once every value has its place.

SPIR-V integer types are signless: every constant and attribute arrives as its raw unsigned bits, and TOSA
reads them signed (zero points, CLAMP's bounds, bias), so they are sign-extended here by the width of the
tensor they belong to (TOSA 1.0: a zero point has its tensor's type); a zero point of an operand read unsigned
(RESCALE's input_unsigned / output_unsigned) is zero-extended instead.

Refused by name (LoweringError at pipeline creation): every other operator on integer tensors; int48
accumulators (int16 convolutions); RESCALE whose multiplier or shift is computed by the graph (a literal
constant or a graph constant works; a graph constant's values are checked when the pipeline's constants are
known, check_constants); zero points from graph constants; unsigned results
wider than 16 bits; int16 TABLE; pooling windows over MAX_WINDOW elements; an integer operator mixing float
tensors other than CAST (TOSA has no such operator); CAST from or to bool or fp16.
"""
from __future__ import annotations

import struct

from .graph import Operator, TensorType
from .lowering import MAX_RANK, Kernel, LoweringError, _strides, matmul_shape

BITS = {"int8": 8, "int16": 16, "int32": 32}
ELTWISE = {"RESHAPE": 0, "ADD": 1, "SUB": 2, "MUL": 3, "MAXIMUM": 4, "MINIMUM": 5, "CLAMP": 6, "ABS": 9,
           "NEGATE": 11, "TABLE": 13, "CAST": 14}
BINARY = frozenset({"ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM"})
REARRANGE = ("TRANSPOSE", "SLICE", "PAD", "TILE", "REVERSE", "CONCAT")
SUPPORTED = tuple(sorted(set(ELTWISE) | set(REARRANGE)
                         | {"CONV2D", "DEPTHWISE_CONV2D", "MATMUL", "RESCALE", "AVG_POOL2D", "MAX_POOL2D"}))
SHADERS = frozenset({"ieltwise", "iconv2d", "imatmul", "rescale", "irearrange", "ipool2d"})
MAX_WINDOW = 1024                  # AVG_POOL2D: a reciprocal_scale per window size 1 .. KH*KW in the parameters
ROUNDING = {1: "SINGLE_ROUND", 2: "INEXACT_ROUND", 3: "DOUBLE_ROUND"}   # TOSA 1.0 rounding_mode_t
ACC_INT32 = 1                                                          # TOSA 1.0 acc_type_t INT32
MULTIPLIERS_AT = 32              # p[32 ..]: rescale.comp's literal shifts, ipool2d.comp's reciprocal scales


def is_integer(t: TensorType) -> bool:
    return t.element in BITS


def element_bytes(t: TensorType) -> int:
    """Bytes of one element of `t` in a tensor of its format (float32 and int32: 4, int16: 2, int8: 1)."""
    return BITS[t.element] // 8 if t.element in BITS else 4


def signed(value: int, bits: int) -> int:
    """`value`'s low `bits` bits read as two's complement (SPIR-V integers are signless)."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _scalar(op: Operator, name: str, bits: int, unsigned: bool = False) -> int:
    """A one-value attribute tensor (zero point, shift) as a TOSA value of `bits` bits."""
    if name in op.inputs:
        raise LoweringError(f"{op.name}: {name} from a graph constant (OpGraphConstantARM) is not supported: the "
                            "driver needs its value when the pipeline is created (a literal constant works)")
    v = op.attributes.get(name, 0)
    values = v if isinstance(v, list) else [v]
    if len(values) != 1:
        raise LoweringError(f"{op.name}: {name} must hold one value, not {len(values)}")
    raw = int(values[0])
    return raw & ((1 << bits) - 1) if unsigned else signed(raw, bits)


def _bits(op: Operator, t: TensorType, what: str) -> int:
    if t.element not in BITS:
        raise LoweringError(f"{op.name}: {what} is a {t} tensor; integer {op.name} takes int8, int16 or int32 "
                            "tensors (TOSA has no mixed float/integer operator; CAST is not supported)")
    return BITS[t.element]


def _head() -> list[int]:
    return [4, 4, 4, 4]             # element bytes of the operands and result: set by widths()


def _eltwise(op: Operator, types: dict[int, TensorType]) -> Kernel:
    out = op.type.shape
    if op.name == "CAST":
        return _cast(op, types)
    operands = [op.inputs["input1" if "input1" in op.inputs else "input"]]
    if op.name in BINARY:
        operands.append(op.inputs["input2"])
    if op.name == "TABLE":
        table = types[op.inputs["table"]]
        if types[operands[0]].element != "int8" or table.element != "int8" or table.shape != (256,) \
                or op.type.element != "int8":
            raise LoweringError(f"TABLE of {types[operands[0]]} by a {table} table to {op.type}: only the int8 "
                                "TABLE (256 int8 entries) is supported (int16 interpolates; not supported)")
        operands.append(op.inputs["table"])
    ins = [types[v] for v in operands]
    for n, t in enumerate(ins):
        _bits(op, t, f"operand {n + 1}")
    out_bits = _bits(op, op.type, "the result")
    rank = len(out) if op.name != "RESHAPE" else 1
    dims = list(out) if op.name != "RESHAPE" else [op.type.count]
    if rank > MAX_RANK:
        raise LoweringError(f"{op.name} on a rank-{rank} tensor (at most {MAX_RANK})")
    if op.name == "RESHAPE":
        if ins[0].count != op.type.count or ins[0].element != op.type.element:
            raise LoweringError(f"RESHAPE of {ins[0]} to {op.type}: element counts or types differ")
        a_str, b_str = [1] + [0] * (MAX_RANK - 1), [0] * MAX_RANK
    else:
        for t in ins[:1] if op.name == "TABLE" else ins:        # a TABLE's table is read whole
            if len(t.shape) != len(out) or any(s not in (1, o) for s, o in zip(t.shape, out)):
                raise LoweringError(f"{op.name}: operand {t} does not broadcast to the result {op.type}")
        a_str = _strides(ins[0].shape, out)
        b_str = _strides(ins[1].shape, out) if len(ins) > 1 else [0] * MAX_RANK
    lo, hi, shift, zp_in, zp_out = -(1 << 31), (1 << 31) - 1, 0, 0, 0
    if op.name == "CLAMP":
        lo, hi = signed(int(op.attributes["min_val"]), out_bits), signed(int(op.attributes["max_val"]), out_bits)
        if lo > hi:
            raise LoweringError(f"CLAMP: min_val {lo} is above max_val {hi}")
    elif op.name == "MUL":
        shift = _scalar(op, "shift", 8)
        if op.type.element != "int32" or not 0 <= shift <= 63 or (shift and ins[0].element != "int32"):
            raise LoweringError(f"MUL of {ins[0]} and {ins[1]} to {op.type} with shift {shift}: TOSA 1.0 takes "
                                "an int32 result, and a shift (0..63) only with int32 operands")
    elif op.name == "TABLE":
        b_str = [0] * MAX_RANK
    elif op.name == "NEGATE":
        zp_in, zp_out = _scalar(op, "input1_zp", BITS[ins[0].element]), _scalar(op, "output_zp", out_bits)
        lo, hi = -(1 << (out_bits - 1)), (1 << (out_bits - 1)) - 1
    params = [*_head(), ELTWISE[op.name], rank, op.type.count, *(dims + [1] * (MAX_RANK - rank)), *a_str, *b_str,
              lo, hi, shift, zp_in, zp_out]
    n = op.type.count
    return Kernel(op.name, "ieltwise", params, n, operands + [operands[0]] * (3 - len(operands)), op.result,
                  ops=n * (0 if op.name == "RESHAPE" else 1),
                  bytes=sum(t.count * element_bytes(t) for t in ins) + n * element_bytes(op.type), shape=out)


def _cast(op: Operator, types: dict[int, TensorType]) -> Kernel:
    """CAST between int8 / int16 / int32 (sign-extending or truncating), from them to fp32 (exact up to 2^24,
    rounded to nearest beyond), and from fp32 (round half to even, saturated to the result type; NaN gives 0)."""
    x = types[op.inputs["input"]]
    kinds = ("int" if x.element in BITS else x.element, "int" if op.type.element in BITS else op.type.element)
    modes = {("int", "int"): 0, ("int", "float32"): 1, ("float32", "int"): 2}
    if kinds not in modes or x.shape != op.type.shape:
        raise LoweringError(f"CAST of {x} to {op.type} is not supported (integer types among themselves and to "
                            "or from float32)")
    bits = BITS.get(op.type.element, 32)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    n = op.type.count
    dims = [n] + [1] * (MAX_RANK - 1)
    params = [*_head(), ELTWISE["CAST"], 1, n, *dims, 1, *[0] * (MAX_RANK - 1), *[0] * MAX_RANK, lo, hi,
              modes[kinds], bits, 0]
    return Kernel("CAST", "ieltwise", params, n, [op.inputs["input"]] * 3, op.result, ops=n,
                  bytes=n * (element_bytes(x) + element_bytes(op.type)), shape=op.type.shape)


def _matmul(op: Operator, types: dict[int, TensorType]) -> Kernel:
    a, b = types[op.inputs["A"]], types[op.inputs["B"]]
    a_bits, b_bits = _bits(op, a, "A"), _bits(op, b, "B")
    if op.type.element != "int32":
        raise LoweringError(f"MATMUL of {a} and {b} to {op.type}: integer MATMUL gives int32 (int48 is not "
                            "supported)")
    n, h, c, w = matmul_shape(op, a, b)
    params = [*_head(), n, h, c, w, _scalar(op, "A_zp", a_bits), _scalar(op, "B_zp", b_bits)]
    return Kernel("MATMUL", "imatmul", params, n * h * w, [op.inputs["A"], op.inputs["B"], op.inputs["A"]],
                  op.result, ops=2 * n * h * w * c,
                  bytes=a.count * element_bytes(a) + b.count * element_bytes(b) + n * h * w * 4, shape=op.type.shape)


def _conv(op: Operator, types: dict[int, TensorType]) -> Kernel:
    from .lowering import _conv as conv_float   # the shapes and attributes are checked as for fp32

    x, wt, bias = types[op.inputs["input"]], types[op.inputs["weight"]], types[op.inputs["bias"]]
    x_bits, w_bits = _bits(op, x, "the input"), _bits(op, wt, "the weight")
    acc = int(op.attributes.get("acc_type", ACC_INT32))
    if acc != ACC_INT32 or op.type.element != "int32" or bias.element != "int32":
        raise LoweringError(f"{op.name} of {x} with {wt} weights, {bias} bias to {op.type} (acc_type {acc}): only "
                            "the int32 accumulator (int8 inputs, int32 bias and result) is supported, not int48")
    checked = conv_float(Operator(op.name, op.result, op.type, {**op.attributes, "input_zp": 0, "weight_zp": 0},
                                  op.inputs), types)
    params = [*_head(), *checked.params, _scalar(op, "input_zp", x_bits), _scalar(op, "weight_zp", w_bits)]
    return Kernel(op.name, "iconv2d", params, checked.items, checked.operands, op.result, ops=checked.ops,
                  bytes=x.count * element_bytes(x) + wt.count * element_bytes(wt) + bias.count * 4
                  + op.type.count * 4, shape=op.type.shape)


def check_scales(multipliers: list[int], shifts: list[int]) -> None:
    """TOSA 1.0 apply_scale's requirements on a RESCALE's multipliers and shifts."""
    for m in multipliers:
        if m < 0:
            raise LoweringError(f"RESCALE: multiplier {m} must be >= 0 (TOSA 1.0 apply_scale)")
    for s in shifts:
        if not 2 <= s <= 62:
            raise LoweringError(f"RESCALE: shift {s} must be within 2..62 (TOSA 1.0 apply_scale)")


def check_constants(plan, data: bytes) -> None:
    """The RESCALE multipliers and shifts that come from graph constants, once the pipeline's constant buffer
    `data` holds them (pipelines.py): LoweringError as for literal ones."""
    for k in plan.kernels:
        if k.shader != "rescale":
            continue
        mult, shift = plan.places[k.operands[1]], plan.places[k.operands[2]]
        words = lambda place: list(struct.unpack_from(f"<{place.type.count}i", data, place.where))  # noqa: E731
        check_scales(words(mult), words(shift) if k.params[17] else [])


def _rescale(op: Operator, types: dict[int, TensorType], constants: dict[int, tuple[TensorType, list]],
             graph_constants: dict) -> Kernel:
    x = types[op.inputs["input"]]
    in_bits, out_bits = _bits(op, x, "the input"), _bits(op, op.type, "the result")
    if x.shape != op.type.shape:
        raise LoweringError(f"RESCALE of {x} to {op.type}: the shapes differ")
    scale32, per_channel = bool(op.attributes["scale32"]), bool(op.attributes["per_channel"])
    in_unsigned, out_unsigned = bool(op.attributes["input_unsigned"]), bool(op.attributes["output_unsigned"])
    mode = int(op.attributes["rounding_mode"])
    if mode not in ROUNDING:
        raise LoweringError(f"RESCALE: rounding_mode {mode} is not one of TOSA 1.0's ({ROUNDING})")
    if (in_unsigned and in_bits > 16) or (out_unsigned and out_bits > 16):
        raise LoweringError(f"RESCALE of {x} to {op.type}: an unsigned input or output is int8 or int16 in TOSA 1.0")
    channels = x.shape[-1] if x.shape else 1
    want = channels if per_channel else 1
    mult_bits = 32 if scale32 else 16
    # the multipliers are read by the kernel from their tensor (a literal constant or a graph constant: both in
    # the pipeline's constant buffer); literal shifts are parameter words, a graph constant's shifts a tensor
    mult_id = op.inputs.get("multiplier")
    mult_type = types.get(mult_id) if mult_id is not None else None
    if mult_type is None or mult_id not in constants and mult_id not in graph_constants:
        raise LoweringError("RESCALE whose multiplier is computed by the graph (not a constant) is not supported")
    if BITS.get(mult_type.element) != mult_bits or mult_type.count != want:
        raise LoweringError(f"RESCALE of {x} (per_channel {per_channel}, scale32 {scale32}): the multiplier is "
                            f"{mult_type}, not {want} int{mult_bits}")
    shift_id = op.inputs.get("shift")
    if shift_id is not None:
        shift_type = types[shift_id]
        if shift_id not in graph_constants or shift_type.element != "int8" or shift_type.count != want:
            raise LoweringError(f"RESCALE: the shift is a {shift_type} tensor, not {want} int8 constants")
        shifts = [0] * want
    else:
        shifts_raw = op.attributes.get("shift")
        shifts = [signed(int(v), 8) for v in (shifts_raw if isinstance(shifts_raw, list) else [shifts_raw])]
        if len(shifts) != want:
            raise LoweringError(f"RESCALE of {x} (per_channel {per_channel}): {len(shifts)} shifts, not {want}")
    multipliers = [signed(int(v), mult_bits) for v in constants[mult_id][1]] if mult_id in constants else []
    check_scales(multipliers, [] if shift_id is not None else shifts)
    in_zp = _scalar(op, "input_zp", in_bits, in_unsigned)
    out_zp = _scalar(op, "output_zp", out_bits, out_unsigned)
    if out_unsigned:
        lo, hi = 0, (1 << out_bits) - 1
    else:
        lo, hi = -(1 << (out_bits - 1)), (1 << (out_bits - 1)) - 1
    params = [*_head(), x.count, channels, int(per_channel), int(scale32 and ROUNDING[mode] == "DOUBLE_ROUND"),
              int(in_unsigned), in_bits, lo, hi, in_zp, out_zp, out_bits, int(out_unsigned), want,
              int(shift_id is not None)]
    params += [0] * (MULTIPLIERS_AT - len(params)) + shifts
    n = op.type.count
    operands = [op.inputs["input"], mult_id, shift_id if shift_id is not None else op.inputs["input"]]
    return Kernel("RESCALE", "rescale", params, n, operands, op.result, ops=3 * n,
                  bytes=n * (element_bytes(x) + element_bytes(op.type)), shape=op.type.shape)


def reciprocal_scale(count: int) -> tuple[int, int]:
    """TOSA 1.0 reciprocal_scale: (multiplier, shift) with multiplier / 2^shift ~ 1 / count."""
    k = (count - 1).bit_length()                  # 32 - count_leading_zeros(count - 1)
    return (((1 << 30) + 1) << k) // count, 30 + k


def _pool(op: Operator, types: dict[int, TensorType]) -> Kernel:
    from .lowering import _pool as pool_float   # the shapes and attributes are checked as for fp32

    x = types[op.inputs["input"]]
    bits = _bits(op, x, "the input")
    if op.type.element != x.element:
        raise LoweringError(f"{op.name} of {x} to {op.type}: the types must agree")
    checked = pool_float(Operator(op.name, op.result, op.type, {**op.attributes, "input_zp": 0, "output_zp": 0},
                                  op.inputs), types)
    kh, kw = checked.params[6], checked.params[7]
    if kh * kw > MAX_WINDOW:
        raise LoweringError(f"{op.name} with a {kh}x{kw} window (at most {MAX_WINDOW} elements)")
    zp_in = _scalar(op, "input_zp", bits) if op.name == "AVG_POOL2D" else 0
    zp_out = _scalar(op, "output_zp", bits) if op.name == "AVG_POOL2D" else 0
    params = [*_head(), *checked.params, zp_in, zp_out, -(1 << (bits - 1)), (1 << (bits - 1)) - 1]
    if op.name == "AVG_POOL2D":
        params += [0] * (MULTIPLIERS_AT - len(params))
        for n in range(1, kh * kw + 1):
            params += list(reciprocal_scale(n))
    size = element_bytes(x)
    return Kernel(op.name, "ipool2d", params, checked.items, checked.operands, op.result, ops=checked.ops,
                  bytes=(x.count + op.type.count) * size, shape=op.type.shape)


def _rearrange(op: Operator, types: dict[int, TensorType]) -> Kernel | list[Kernel]:
    from .lowering import _concat, _rearrange as rearrange_float   # shapes and strides as for fp32

    for v in op.inputs.values():                  # the tensors moved (shapes and pads are attributes)
        _bits(op, types[v], "an input")
    if op.type.element != types[next(iter(op.inputs.values()))].element:
        raise LoweringError(f"{op.name} to {op.type}: the input and result types must agree")
    pad = 0
    if op.name == "PAD":
        values = op.attributes.get("pad_const", [0])
        pad = signed(int(values[0] if isinstance(values, list) else values), BITS[op.type.element])
    attrs = {**op.attributes, "pad_const": [0.0]}
    made = (_concat if op.name == "CONCAT" else rearrange_float)(Operator(op.name, op.result, op.type, attrs,
                                                                         op.inputs), types)
    out = []
    for k in (made if isinstance(made, list) else [made]):
        params = [*_head(), *k.params]
        params[4 + 34] = pad
        size = element_bytes(op.type)
        out.append(Kernel(k.operator, "irearrange", params, k.items, k.operands, k.result, ops=0,
                          bytes=k.bytes // 4 * size, shape=k.shape, part=k.part))
    return out if isinstance(made, list) else out[0]


LOWER = {**{name: _eltwise for name in ELTWISE}, **{name: _rearrange for name in REARRANGE}, "MATMUL": _matmul,
         "CONV2D": _conv, "DEPTHWISE_CONV2D": _conv, "AVG_POOL2D": _pool, "MAX_POOL2D": _pool}


def lower(op: Operator, types: dict[int, TensorType], constants: dict[int, tuple[TensorType, list]],
          graph_constants: dict | None = None) -> Kernel | list[Kernel]:
    """The integer kernel of `op`, or LoweringError naming what is not supported."""
    if op.name == "RESCALE":
        return _rescale(op, types, constants, graph_constants or {})
    if op.name not in LOWER:
        elements = sorted({t.element for t in [op.type, *(types[v] for v in op.inputs.values())] if is_integer(t)})
        raise LoweringError(f"TOSA operator {op.name} on {', '.join(elements)} tensors is not supported by the "
                            f"emulated Mali (integer operators supported: {', '.join(SUPPORTED)})")
    return LOWER[op.name](op, types)


def pack_constant(t: TensorType, values: list) -> bytes:
    """A literal integer constant as int32 words (sign-extended from its type)."""
    bits = BITS[t.element]
    return struct.pack(f"<{t.count}i", *(signed(int(v), bits) for v in values))


def widths(kernels: list[Kernel], width_of) -> None:
    """Each integer kernel's p[0..3]: the element bytes where its operands and result live (width_of(value))."""
    for k in kernels:
        if k.shader in SHADERS:
            k.params[0:4] = [width_of(v) for v in k.operands] + [width_of(k.result)]
