"""TOSA operators lowered to the emulated Mali's compute kernels, with their modelled cost.

Role: from a graph (graph.py) to a `Plan`: where every tensor value lives (an input or output binding,
the pipeline's constant buffer, the session's transient memory) and, in order, one `Kernel` per operator
(its shader in shaders/, its parameter words, its element count, its operands), plus each operator's
cost: arithmetic ops (a multiply-add counts 2), bytes moved (every operand read once, the result written
once) and a modelled time on the profile's GPU (the larger of the ops at the shader cores' fp32 FMA rate
and the bytes at the timing model's memory bandwidth, icd/timing.py). Pure Python, no Vulkan.

Supported (fp32 tensors; TOSA's accumulator attribute, even FP16 on fp32 tensors, computes in fp32):
ADD, SUB, MUL (shift 0), MAXIMUM, MINIMUM, POW (with broadcasting), CLAMP, SIGMOID, TANH, ABS, EXP, NEGATE
(zero points 0), RECIPROCAL, FLOOR, CEIL, LOG, RSQRT, SIN, COS, RESHAPE, TRANSPOSE, SLICE, PAD, TILE, REVERSE,
CONCAT, REDUCE_SUM / MAX / MIN / PRODUCT, MATMUL (zero points 0), CONV2D and DEPTHWISE_CONV2D (any kernel size, padding, stride, dilation; zero points
0), AVG_POOL2D (zero points 0), MAX_POOL2D. An operator on int8 / int16 / int32 tensors is lowered by
quantized.py (RESCALE, integer CONV2D / DEPTHWISE_CONV2D / MATMUL / ADD / CLAMP …, TOSA 1.0's exact integer
rules). Any other operator, element type or attribute value raises LoweringError naming it, so
vkCreateDataGraphPipelinesARM refuses the pipeline at creation.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .graph import Graph, Operator, TensorType

ELEMENT_BYTES = 4                  # fp32 (and int32: inside a graph an integer element is one int32 word)
ALIGN = 256                        # offsets of tensors and parameter blocks (≥ minStorageBufferOffsetAlignment)
MAX_RANK = 6                       # TOSA's maximum rank (the element-wise shader's parameter block holds 6)
ELTWISE = {"RESHAPE": 0, "ADD": 1, "SUB": 2, "MUL": 3, "MAXIMUM": 4, "MINIMUM": 5, "CLAMP": 6, "SIGMOID": 7,
           "TANH": 8, "ABS": 9, "EXP": 10, "NEGATE": 11, "RECIPROCAL": 12, "FLOOR": 13, "CEIL": 14, "LOG": 15,
           "RSQRT": 16, "SIN": 17, "COS": 18, "POW": 19}
BINARY = frozenset({"ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "POW"})
# arithmetic ops per element of the element-wise operators (exp-based ones cost more)
ELTWISE_OPS = {"RESHAPE": 0, "SIGMOID": 4, "TANH": 4, "EXP": 2, "RECIPROCAL": 2, "LOG": 2, "RSQRT": 2, "SIN": 4,
               "COS": 4, "POW": 4}
REDUCE = {"REDUCE_SUM": 0, "REDUCE_MAX": 1, "REDUCE_MIN": 2, "REDUCE_PRODUCT": 3}
REARRANGE = ("TRANSPOSE", "SLICE", "PAD", "TILE", "REVERSE")   # and CONCAT: one strided copy per input
SUPPORTED = tuple(sorted(set(ELTWISE) | set(REDUCE) | set(REARRANGE)
                         | {"CONCAT", "MATMUL", "CONV2D", "DEPTHWISE_CONV2D", "AVG_POOL2D", "MAX_POOL2D"}))


class LoweringError(Exception):
    """An operator the emulated Mali does not run: the message names it."""


@dataclass(frozen=True)
class Place:
    """Where a tensor value lives: kind "input" / "output" (index of the graph's interface), "const" or
    "transient" (byte offset into the pipeline's constant buffer or the session's memory)."""
    kind: str
    where: int
    type: TensorType


@dataclass
class Kernel:
    operator: str                  # TOSA name (COPY for an output written from another value)
    shader: str                    # shaders/<shader>.comp
    params: list[int]              # parameter words
    items: int                     # invocations (one per output element)
    operands: list[int]            # value ids bound at bindings 1, 2, 3
    result: int                    # value id written (binding 4)
    ops: int = 0
    bytes: int = 0
    shape: tuple[int, ...] = ()
    part: int = 0                  # > 0: a further kernel of the operator before it (CONCAT's later inputs)

    def time_ns(self, fma_per_ns: float, bytes_per_ns: float) -> float:
        """Modelled time: the larger of its arithmetic at the GPU's FMA rate and its bytes at memory speed."""
        return max(self.ops / (2.0 * fma_per_ns), self.bytes / bytes_per_ns)


@dataclass
class Plan:
    kernels: list[Kernel]
    places: dict[int, Place]
    constants: dict[int, bytes]     # value id -> packed fp32 / int32 bytes (literal constants; graph constants later)
    constant_bytes: int             # size of the constant buffer (graph constants included)
    transient_bytes: int            # size of the session's transient memory
    graph_constants: dict[int, int] = field(default_factory=dict)   # value id -> constant id (data from the app)


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _f(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _zero(op: Operator, *names: str) -> None:
    for name in names:
        if name in op.inputs:
            raise LoweringError(f"{op.name}: {name} from a graph constant (OpGraphConstantARM) is not supported: "
                                "the driver needs its value when the pipeline is created (a literal constant works)")
        v = op.attributes.get(name)
        values = v if isinstance(v, list) else [v]
        if v is not None and any(x != 0 for x in values):
            raise LoweringError(f"{op.name} with a non-zero {name} ({v}) is not supported (fp32 zero points are 0)")


def _strides(shape: tuple[int, ...], out: tuple[int, ...]) -> list[int]:
    """Element strides of `shape` read at `out`'s coordinates (0 on a broadcast dimension), padded to MAX_RANK."""
    strides, s = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = 0 if shape[d] == 1 and out[d] != 1 else s
        s *= shape[d]
    return strides + [0] * (MAX_RANK - len(strides))


def _eltwise(op: Operator, types: dict[int, TensorType]) -> Kernel:
    out = op.type.shape
    operands = [op.inputs["input1" if "input1" in op.inputs else "input"]]
    if op.name in BINARY:
        operands.append(op.inputs["input2"])
    if op.name == "MUL":
        _zero(op, "shift")
    if op.name == "NEGATE":
        _zero(op, "input1_zp", "output_zp")
    rank = len(out) if op.name != "RESHAPE" else 1
    dims = list(out) if op.name != "RESHAPE" else [op.type.count]
    if rank > MAX_RANK:
        raise LoweringError(f"{op.name} on a rank-{rank} tensor (at most {MAX_RANK})")
    ins = [types[v] for v in operands]
    if op.name == "RESHAPE":
        if ins[0].count != op.type.count:
            raise LoweringError(f"RESHAPE of {ins[0]} to {op.type}: element counts differ")
        a_str, b_str = [1] + [0] * (MAX_RANK - 1), [0] * MAX_RANK
    else:
        for t in ins:
            if len(t.shape) != len(out) or any(s not in (1, o) for s, o in zip(t.shape, out)):
                raise LoweringError(f"{op.name}: operand {t} does not broadcast to the result {op.type}")
        a_str = _strides(ins[0].shape, out)
        b_str = _strides(ins[1].shape, out) if len(ins) > 1 else [0] * MAX_RANK
    lo, hi = 0.0, 0.0
    if op.name == "CLAMP":
        lo, hi = float(op.attributes["min_val"]), float(op.attributes["max_val"])
    params = [ELTWISE[op.name], rank, op.type.count, *(dims + [1] * (MAX_RANK - rank)), *a_str, *b_str, _f(lo), _f(hi)]
    n = op.type.count
    return Kernel(op.name, "eltwise", params, n, operands + [operands[0]] * (3 - len(operands)), op.result,
                  ops=n * ELTWISE_OPS.get(op.name, 1),
                  bytes=sum(t.count for t in ins) * ELEMENT_BYTES + n * ELEMENT_BYTES, shape=op.type.shape)


def matmul_shape(op: Operator, a: TensorType, b: TensorType) -> tuple[int, int, int, int]:
    """MATMUL's N, H, C, W: its operands [N,H,C] and [N,C,W] make its result [N,H,W] (fp32 and quantized)."""
    if len(a.shape) != 3 or len(b.shape) != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise LoweringError(f"MATMUL of {a} and {b}: shapes must be [N,H,C] and [N,C,W]")
    n, h, c = a.shape
    w = b.shape[2]
    if op.type.shape != (n, h, w):
        raise LoweringError(f"MATMUL of {a} and {b} gives {n}x{h}x{w}, not {op.type}")
    return n, h, c, w


def _matmul(op: Operator, types: dict[int, TensorType]) -> Kernel:
    _zero(op, "A_zp", "B_zp")
    a, b = types[op.inputs["A"]], types[op.inputs["B"]]
    n, h, c, w = matmul_shape(op, a, b)
    return Kernel("MATMUL", "matmul", [n, h, c, w], n * h * w, [op.inputs["A"], op.inputs["B"], op.inputs["A"]],
                  op.result, ops=2 * n * h * w * c, bytes=(a.count + b.count + n * h * w) * ELEMENT_BYTES,
                  shape=op.type.shape)


def _conv(op: Operator, types: dict[int, TensorType]) -> Kernel:
    _zero(op, "input_zp", "weight_zp")
    depthwise = op.name == "DEPTHWISE_CONV2D"
    x, wt, bias = types[op.inputs["input"]], types[op.inputs["weight"]], types[op.inputs["bias"]]
    if len(x.shape) != 4 or len(wt.shape) != 4 or len(op.type.shape) != 4:
        raise LoweringError(f"{op.name}: input {x} and weight {wt} must be rank 4 (NHWC, "
                            f"{'KH×KW×C×M' if depthwise else 'O×KH×KW×I'})")
    n, ih, iw, ic = x.shape
    _, oh, ow, oc = op.type.shape
    if depthwise:
        kh, kw, wc, m = wt.shape
        if wc != ic or oc != ic * m:
            raise LoweringError(f"DEPTHWISE_CONV2D: weight {wt} does not match input {x} and result {op.type}")
    else:
        o, kh, kw, wi = wt.shape
        m = 1
        if wi != ic or o != oc:
            raise LoweringError(f"CONV2D: weight {wt} does not match input {x} and result {op.type}")
    if bias.count not in (1, oc):
        raise LoweringError(f"{op.name}: bias {bias} must have 1 or {oc} values")
    pt, pb, pl, pr = (int(v) for v in op.attributes["pad"])
    sy, sx = (int(v) for v in op.attributes["stride"])
    dy, dx = (int(v) for v in op.attributes["dilation"])
    if (ih - 1 + pt + pb - (kh - 1) * dy) // sy + 1 != oh or (iw - 1 + pl + pr - (kw - 1) * dx) // sx + 1 != ow:
        raise LoweringError(f"{op.name}: result {op.type} does not follow from input {x}, kernel {kh}x{kw}, "
                            f"pad {[pt, pb, pl, pr]}, stride {[sy, sx]}, dilation {[dy, dx]}")
    macs = n * oh * ow * oc * kh * kw * (1 if depthwise else ic)
    params = [n, ih, iw, ic, oh, ow, oc, kh, kw, pt, pl, sy, sx, dy, dx, bias.count, int(depthwise), m]
    return Kernel(op.name, "conv2d", params, n * oh * ow * oc,
                  [op.inputs["input"], op.inputs["bias"], op.inputs["weight"]], op.result, ops=2 * macs,
                  bytes=(x.count + wt.count + bias.count + op.type.count) * ELEMENT_BYTES, shape=op.type.shape)


def _pool(op: Operator, types: dict[int, TensorType]) -> Kernel:
    if op.name == "AVG_POOL2D":
        _zero(op, "input_zp", "output_zp")
    x = types[op.inputs["input"]]
    if len(x.shape) != 4:
        raise LoweringError(f"{op.name} of {x}: the input must be NHWC")
    n, ih, iw, c = x.shape
    _, oh, ow, oc = op.type.shape
    kh, kw = (int(v) for v in op.attributes["kernel"])
    sy, sx = (int(v) for v in op.attributes["stride"])
    pt, pb, pl, pr = (int(v) for v in op.attributes["pad"])
    if oc != c or (ih + pt + pb - kh) // sy + 1 != oh or (iw + pl + pr - kw) // sx + 1 != ow:
        raise LoweringError(f"{op.name}: result {op.type} does not follow from input {x}, kernel {kh}x{kw}, "
                            f"stride {[sy, sx]}, pad {[pt, pb, pl, pr]}")
    params = [n, ih, iw, c, oh, ow, kh, kw, sy, sx, pt, pl, int(op.name == "MAX_POOL2D")]
    count = n * oh * ow * c
    return Kernel(op.name, "pool2d", params, count, [op.inputs["input"]] * 3, op.result, ops=count * kh * kw,
                  bytes=(x.count + count) * ELEMENT_BYTES, shape=op.type.shape)


def _packed(shape: tuple[int, ...]) -> list[int]:
    """Element strides of a packed tensor of `shape`."""
    out, s = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        out[d] = s
        s *= shape[d]
    return out


def _six(values: list[int], fill: int = 0) -> list[int]:
    return [v & 0xFFFFFFFF for v in values] + [fill] * (MAX_RANK - len(values))


def _rearrange(op: Operator, types: dict[int, TensorType]) -> Kernel:
    """TRANSPOSE, SLICE, PAD, TILE, REVERSE as one strided copy (shaders/rearrange.comp)."""
    x = types[op.inputs["input1"]]
    ins, out = x.shape, op.type.shape
    rank = len(ins)
    if rank > MAX_RANK or len(out) != rank:
        raise LoweringError(f"{op.name} of {x} to {op.type}: ranks must agree and be at most {MAX_RANK}")
    strides = _packed(ins)
    region, src, extents, before, base, wrap, pad = list(out), list(strides), list(ins), [0] * rank, 0, 0, 0.0
    if op.name == "TRANSPOSE":
        perms = [int(v) for v in op.attributes["perms"]]
        if sorted(perms) != list(range(rank)) or [ins[d] for d in perms] != list(out):
            raise LoweringError(f"TRANSPOSE of {x} by {perms} does not give {op.type}")
        src, extents = [strides[d] for d in perms], list(out)
    elif op.name == "SLICE":
        start, size = [int(v) for v in op.attributes["start"]], [int(v) for v in op.attributes["size"]]
        if size != list(out) or any(b < 0 or b + n > d for b, n, d in zip(start, size, ins)):
            raise LoweringError(f"SLICE of {x} at {start} size {size} is outside it or is not {op.type}")
        base, extents = sum(b * st for b, st in zip(start, strides)), list(out)
    elif op.name == "PAD":
        padding = [int(v) for v in op.attributes["padding"]]
        before = padding[0::2]
        if len(padding) != 2 * rank or [d + lo + hi for d, lo, hi in zip(ins, before, padding[1::2])] != list(out):
            raise LoweringError(f"PAD of {x} by {padding} does not give {op.type}")
        values = op.attributes.get("pad_const", [0.0])
        pad = float(values[0] if isinstance(values, list) else values)
    elif op.name == "TILE":
        multiples = [int(v) for v in op.attributes["multiples"]]
        if [d * m for d, m in zip(ins, multiples)] != list(out):
            raise LoweringError(f"TILE of {x} by {multiples} does not give {op.type}")
        wrap = 1
    else:   # REVERSE
        axis = int(op.attributes["axis"])
        if not 0 <= axis < rank or ins != out:
            raise LoweringError(f"REVERSE of {x} along axis {axis}: the axis is not one of its dimensions")
        base, src[axis] = (ins[axis] - 1) * strides[axis], -strides[axis]
    params = [rank, op.type.count, *_six(region, 1), *_six(src), *_six(extents, 1), *_six(before),
              *_six(_packed(out)), base & 0xFFFFFFFF, 0, _f(pad), wrap]
    n = op.type.count
    return Kernel(op.name, "rearrange", params, n, [op.inputs["input1"]] * 3, op.result,
                  bytes=2 * n * ELEMENT_BYTES, shape=op.type.shape)


def _concat(op: Operator, types: dict[int, TensorType]) -> list[Kernel]:
    """CONCAT: each input copied into its place along the axis (one shaders/rearrange.comp kernel each)."""
    parts = [op.inputs[k] for k in sorted((k for k in op.inputs if k.startswith("input1#")),
                                          key=lambda k: int(k.split("#")[1]))]
    out = op.type.shape
    axis = int(op.attributes["axis"])
    shapes = [types[v].shape for v in parts]
    if not parts or not 0 <= axis < len(out) or len(out) > MAX_RANK \
            or any(len(s) != len(out) or any(a != b for d, (a, b) in enumerate(zip(s, out)) if d != axis) for s in shapes) \
            or sum(s[axis] for s in shapes) != out[axis]:
        raise LoweringError(f"CONCAT of {', '.join(str(types[v]) for v in parts)} along axis {axis} does not give "
                            f"{op.type}")
    rank, dst_strides, at, kernels = len(out), _packed(out), 0, []
    for n, (v, shape) in enumerate(zip(parts, shapes)):
        count = types[v].count
        params = [rank, count, *_six(list(shape), 1), *_six(_packed(shape)), *_six(list(shape), 1), *_six([0] * rank),
                  *_six(dst_strides), 0, at * dst_strides[axis], 0, 0]
        kernels.append(Kernel("CONCAT", "rearrange", params, count, [v] * 3, op.result,
                              bytes=2 * count * ELEMENT_BYTES, shape=out, part=n))
        at += shape[axis]
    return kernels


def _reduce(op: Operator, types: dict[int, TensorType]) -> Kernel:
    x = types[op.inputs["input"]]
    axis = int(op.attributes["axis"])
    if not 0 <= axis < len(x.shape) or op.type.shape != x.shape[:axis] + (1,) + x.shape[axis + 1:]:
        raise LoweringError(f"{op.name} of {x} along axis {axis} does not give {op.type}")
    outer = 1
    for d in x.shape[:axis]:
        outer *= d
    inner = op.type.count // outer
    return Kernel(op.name, "reduce", [REDUCE[op.name], outer, x.shape[axis], inner], op.type.count,
                  [op.inputs["input"]] * 3, op.result, ops=x.count,
                  bytes=(x.count + op.type.count) * ELEMENT_BYTES, shape=op.type.shape)


_LOWER = {**{name: _eltwise for name in ELTWISE}, **{name: _reduce for name in REDUCE},
          **{name: _rearrange for name in REARRANGE}, "CONCAT": _concat, "MATMUL": _matmul, "CONV2D": _conv,
          "DEPTHWISE_CONV2D": _conv, "AVG_POOL2D": _pool, "MAX_POOL2D": _pool}


def plan(g: Graph) -> Plan:
    """The kernels and tensor places of graph `g`; raises LoweringError naming what is not supported."""
    from . import quantized

    for value, t in g.types.items():
        if t.element != "float32" and not quantized.is_integer(t):
            what = next((f"operator {op.name}" for op in g.operators if op.result == value or value in
                         op.inputs.values()), "an input or output")
            raise LoweringError(f"{what} uses a {t} tensor: only float32, int8, int16 and int32 tensors are "
                                "supported")

    def integer(op: Operator) -> bool:
        return any(quantized.is_integer(t) for t in [op.type, *(g.types[v] for v in op.inputs.values())])

    for op in g.operators:
        if not integer(op) and op.name not in _LOWER:
            raise LoweringError(f"TOSA operator {op.name} is not supported by the emulated Mali (supported: "
                                f"{', '.join(SUPPORTED)})")
    places: dict[int, Place] = {}
    for v, index in g.input_values.items():
        places[v] = Place("input", index, g.types[v])
    constants: dict[int, bytes] = {}
    offset = 0
    for v, (t, values) in g.constants.items():
        places[v] = Place("const", offset, t)
        constants[v] = quantized.pack_constant(t, values) if quantized.is_integer(t) else \
            struct.pack(f"<{t.count}f", *(float(x) for x in values))
        offset += _aligned(t.count * ELEMENT_BYTES)
    graph_constants = {}
    for v, (t, cid) in g.graph_constants.items():
        places[v] = Place("const", offset, t)
        graph_constants[v] = cid
        offset += _aligned(t.count * ELEMENT_BYTES)
    constant_bytes = offset
    outputs_of = {}
    for index, v in g.output_values.items():
        outputs_of.setdefault(v, index)
    kernels, transient = [], 0
    for op in g.operators:
        made = quantized.lower(op, g.types, g.constants, g.graph_constants) if integer(op) \
            else _LOWER[op.name](op, g.types)
        kernels += made if isinstance(made, list) else [made]
        if op.result in outputs_of:
            places[op.result] = Place("output", outputs_of[op.result], op.type)
        else:
            places[op.result] = Place("transient", transient, op.type)
            transient += _aligned(op.type.count * ELEMENT_BYTES)
    for index, v in sorted(g.output_values.items()):   # outputs not written by an operator of their own
        place = places[v]
        if place.kind == "output" and place.where == index:
            continue
        t = g.types[v]
        words = [t.count, t.count, *[1] * (MAX_RANK - 1), 1, *[0] * (MAX_RANK - 1), *[0] * MAX_RANK, 0, 0]
        integer_copy = quantized.is_integer(t)
        copy = Kernel("COPY", "ieltwise" if integer_copy else "eltwise",
                      [4, 4, 4, 4, 0, 1, *words, 0, 0, 0] if integer_copy else [0, 1, *words], t.count, [v, v, v],
                      -1 - index, bytes=2 * t.count * quantized.element_bytes(t), shape=t.shape)
        places[-1 - index] = Place("output", index, t)
        kernels.append(copy)

    def width_of(v: int) -> int:   # integer values inside the graph are int32 words; its interface keeps its own
        place = places[v]
        return quantized.element_bytes(place.type) if place.kind in ("input", "output") else 4
    quantized.widths(kernels, width_of)
    return Plan(kernels, places, constants, max(constant_bytes, ALIGN), max(transient, ALIGN), graph_constants)
