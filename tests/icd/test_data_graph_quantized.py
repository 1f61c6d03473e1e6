"""The quantized (integer) lowering of the emulated Mali's data graphs (icd/data_graph/quantized.py), without a driver.

Graphs are built as graph.Graph values (what graph.read makes of a module), with raw unsigned constants as
SPIR-V's signless integers give them; each test checks the kernels' parameter words (sign-extended zero points
and bounds, multipliers and shifts, element widths of the interface) or a refusal naming what is not supported.
The integer results themselves are checked against numpy's TOSA reference through model-converter and
scenario_runner (tests/integration/test_ml_sdk_quantized.py)."""
from __future__ import annotations

import pytest

from tessera.icd.data_graph import lowering, quantized
from tessera.icd.data_graph.graph import Graph, Interface, Operator, TensorType


def _graph(ops: list[Operator], inputs: dict[int, TensorType], output: int, constants=None) -> Graph:
    g = Graph("main", [Interface(i, 0, i, t) for i, t in enumerate(inputs.values())],
              [Interface(0, 0, len(inputs), ops[-1].type)])
    g.input_values = {v: i for i, v in enumerate(inputs)}
    g.output_values = {0: output}
    g.constants = dict(constants or {})
    g.types = {**inputs, **{v: t for v, (t, _) in g.constants.items()}, **{op.result: op.type for op in ops}}
    g.operators = ops
    return g


def _rescale_op(x: int, shape, out="int8", mult=(1 << 30,), shift=(33,), mode=3, per_channel=False, in_zp=0,
                out_zp=0xFB, out_unsigned=False):
    return Operator("RESCALE", 10, TensorType(out, shape),
                    {"scale32": True, "rounding_mode": mode, "per_channel": per_channel, "input_unsigned": False,
                     "output_unsigned": out_unsigned, "shift": list(shift), "input_zp": [in_zp],
                     "output_zp": [out_zp]},
                    {"input": x, "multiplier": 5})


def test_rescale_words_sign_extended_and_interface_widths():
    x = TensorType("int32", (1, 2, 3))
    mult = (TensorType("int32", (3,)), [1 << 30, 1 << 29, 0x7FFFFFFF])
    op = _rescale_op(1, (1, 2, 3), shift=(33, 34, 40), per_channel=True)
    plan = lowering.plan(_graph([op], {1: x}, 10, {5: mult}))
    (k,) = plan.kernels
    p = k.params
    assert k.shader == "rescale" and p[:4] == [4, 4, 4, 1]              # int32 input words, an int8 output's bytes
    assert p[4:18] == [6, 3, 1, 1, 0, 32, -128, 127, 0, -5, 8, 0, 3, 0]  # output_zp 0xFB is -5; DOUBLE_ROUND
    assert p[quantized.MULTIPLIERS_AT:] == [33, 34, 40]                 # literal shifts; multipliers: operand 2
    assert k.operands == [1, 5, 1] and plan.places[5].kind == "const"
    assert plan.constants[5] == b"".join(v.to_bytes(4, "little") for v in (1 << 30, 1 << 29, 0x7FFFFFFF))


def test_single_round_and_unsigned_output():
    x = TensorType("int32", (4,))
    op = _rescale_op(1, (4,), mode=1, out_zp=0xC8, out_unsigned=True)
    (k,) = lowering.plan(_graph([op], {1: x}, 10, {5: (TensorType("int32", (1,)), [1 << 30])})).kernels
    assert k.params[7] == 0 and k.params[10:16] == [0, 255, 0, 200, 8, 1]   # zero-extended zp, 0..255


@pytest.mark.parametrize("change, message", [
    ({"shift": [1]}, r"RESCALE: shift 1 must be within 2\.\.62"),
    ({"rounding_mode": 7}, r"rounding_mode 7 is not one of TOSA 1\.0's"),
    ({"per_channel": True}, r"RESCALE of 1x2x3 int32 \(per_channel True, scale32 True\): the multiplier is 1 int32, "
                            r"not 3 int32"),
])
def test_rescale_misuse_is_refused(change, message):
    op = _rescale_op(1, (1, 2, 3))
    op.attributes.update(change)
    with pytest.raises(lowering.LoweringError, match=message):
        lowering.plan(_graph([op], {1: TensorType("int32", (1, 2, 3))}, 10, {5: (TensorType("int32", (1,)), [3])}))


def test_rescale_with_a_multiplier_from_the_graph_is_refused():
    op = _rescale_op(1, (4,))
    g = _graph([op], {1: TensorType("int32", (4,)), 5: TensorType("int32", (1,))}, 10)
    with pytest.raises(lowering.LoweringError, match="RESCALE whose multiplier is computed by the graph"):
        lowering.plan(g)


def _conv(acc_type=1, x="int8", out="int32"):
    attrs = {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1], "acc_type": acc_type, "local_bound": False,
             "input_zp": [0xFD], "weight_zp": [2]}
    return Operator("CONV2D", 10, TensorType(out, (1, 4, 4, 2)), attrs, {"input": 1, "weight": 2, "bias": 3})


def _conv_graph(op):
    consts = {2: (TensorType("int8", (2, 3, 3, 3)), [0xFF] * 54), 3: (TensorType("int32", (2,)), [0xFFFFFF38, 7])}
    return _graph([op], {1: TensorType("int8", (1, 4, 4, 3))}, 10, consts)


def test_int8_conv_zero_points_and_constants():
    plan = lowering.plan(_conv_graph(_conv()))
    (k,) = plan.kernels
    assert k.shader == "iconv2d" and k.params[:4] == [1, 4, 4, 4]     # an int8 input, constants as int32 words
    assert k.params[-2:] == [-3, 2]
    assert plan.constants[2] == (-1).to_bytes(4, "little", signed=True) * 54      # int8 0xFF is -1
    assert plan.constants[3][:4] == (-200).to_bytes(4, "little", signed=True)


def test_int48_accumulator_and_unsupported_integer_operators_are_refused():
    with pytest.raises(lowering.LoweringError, match=r"CONV2D .*acc_type 4.*only the int32 accumulator"):
        lowering.plan(_conv_graph(_conv(acc_type=4)))
    t = TensorType("int32", (2, 3))
    op = Operator("REDUCE_SUM", 10, TensorType("int32", (1, 3)), {"axis": 0}, {"input": 1})
    with pytest.raises(lowering.LoweringError, match=r"TOSA operator REDUCE_SUM on int32 tensors is not supported .*"
                                                     r"integer operators supported: .*RESCALE"):
        lowering.plan(_graph([op], {1: t}, 10))
    i16 = TensorType("int16", (4,))
    table = Operator("TABLE", 10, TensorType("int32", (4,)), {}, {"input1": 1, "table": 2})
    with pytest.raises(lowering.LoweringError, match=r"only the int8 TABLE .*int16 interpolates"):
        lowering.plan(_graph([table], {1: i16, 2: TensorType("int16", (513,))}, 10))


def test_average_pool_reciprocal_scales_and_int8_transpose():
    """reciprocal_scale by the spec's formula: multiplier ((2^30 + 1) << k) / n, shift 30 + k, k the bits of n - 1."""
    assert [quantized.reciprocal_scale(n) for n in (1, 2, 3, 9)] == [
        ((1 << 30) + 1, 30), ((1 << 30) + 1, 31), (1431655766, 32), (1908874355, 34)]
    x = TensorType("int8", (1, 4, 4, 2))
    pool = Operator("AVG_POOL2D", 10, x, {"kernel": [3, 3], "stride": [1, 1], "pad": [1, 1, 1, 1], "acc_type": 1,
                                          "input_zp": [0xFB], "output_zp": [3]}, {"input": 1})
    (k,) = lowering.plan(_graph([pool], {1: x}, 10)).kernels
    assert k.shader == "ipool2d" and k.params[:4] == [1, 1, 1, 1] and k.params[17:21] == [-5, 3, -128, 127]
    assert k.params[quantized.MULTIPLIERS_AT:] == [w for n in range(1, 10) for w in quantized.reciprocal_scale(n)]
    t = Operator("TRANSPOSE", 10, TensorType("int8", (1, 4, 2, 4)), {"perms": [0, 1, 3, 2]}, {"input1": 1})
    (k,) = lowering.plan(_graph([t], {1: x}, 10)).kernels
    assert k.shader == "irearrange" and k.params[:4] == [1, 1, 1, 1]


def test_integer_clamp_bounds_and_mul_shift():
    t = TensorType("int8", (2, 3))
    clamp = Operator("CLAMP", 10, t, {"min_val": 0xEC, "max_val": 100, "nan_mode": 1}, {"input": 1})
    (k,) = lowering.plan(_graph([clamp], {1: t}, 10)).kernels
    assert k.shader == "ieltwise" and k.params[:4] == [1, 1, 1, 1] and k.params[25:27] == [-20, 100]
    i32 = TensorType("int32", (4,))
    mul = Operator("MUL", 10, i32, {"shift": [3]}, {"input1": 1, "input2": 2})
    (k,) = lowering.plan(_graph([mul], {1: i32, 2: i32}, 10)).kernels
    assert k.params[4] == quantized.ELTWISE["MUL"] and k.params[27] == 3
    mixed = Operator("MUL", 10, i32, {"shift": [3]}, {"input1": 1, "input2": 2})
    with pytest.raises(lowering.LoweringError, match=r"MUL of 4 int8 and 4 int8 to 4 int32 with shift 3"):
        lowering.plan(_graph([mixed], {1: TensorType("int8", (4,)), 2: TensorType("int8", (4,))}, 10))


def test_signed_reads_signless_bits():
    assert quantized.signed(0xFF, 8) == -1 and quantized.signed(0x7F, 8) == 127
    assert quantized.signed(4294967096, 32) == -200 and quantized.signed(0x8000, 16) == -32768


def test_integer_graph_constants_become_int32_words():
    """VkDataGraphPipelineConstantARM data of an int8 constant, packed or strided, as the graph keeps it."""
    import cffi
    import numpy as np

    from tessera.icd.data_graph.pipelines import constant_data

    ffi = cffi.FFI()
    values = np.array([[-1, 2, -128], [127, 0, -3]], np.int8)
    packed = ffi.new("int8_t[]", values.ravel().tolist())
    assert np.frombuffer(constant_data(ffi, packed, (2, 3), None, "int8"), np.int32).tolist() == values.ravel().tolist()
    rows = np.zeros((2, 4), np.int8)                    # rows padded to 4 bytes: strides (4, 1)
    rows[:, :3] = values
    strided = ffi.new("int8_t[]", rows.ravel().tolist())
    assert np.frombuffer(constant_data(ffi, strided, (2, 3), (4, 1), "int8"), np.int32).tolist() == \
        values.ravel().tolist()
    floats = ffi.new("float[]", [0.5, -2.0])
    assert np.frombuffer(constant_data(ffi, floats, (2,), None, "float32"), np.float32).tolist() == [0.5, -2.0]


def test_rescale_scales_from_graph_constants_are_checked_when_known():
    """Multiplier and shift as graph constants (as Arm's emulation layer's own test graph has them): read by the
    kernel from the constant buffer, checked by check_constants once the pipeline's constants are known; a zero
    point from a graph constant is refused (its value is needed at creation)."""
    import struct

    x = TensorType("int8", (1, 5))
    op = Operator("RESCALE", 10, TensorType("int32", (1, 5)),
                  {"scale32": True, "rounding_mode": 1, "per_channel": False, "input_unsigned": False,
                   "output_unsigned": False, "input_zp": [0], "output_zp": [0]},
                  {"input": 1, "multiplier": 5, "shift": 6})
    g = _graph([op], {1: x}, 10)
    g.graph_constants = {5: (TensorType("int32", (1,)), 0), 6: (TensorType("int8", (1,)), 1)}
    g.types.update({5: TensorType("int32", (1,)), 6: TensorType("int8", (1,))})
    plan = lowering.plan(g)
    (k,) = plan.kernels
    assert k.operands == [1, 5, 6] and k.params[17] == 1 and k.params[:4] == [1, 4, 4, 4]
    data = bytearray(plan.constant_bytes)
    struct.pack_into("<i", data, plan.places[5].where, 1 << 30)
    struct.pack_into("<i", data, plan.places[6].where, 30)
    quantized.check_constants(plan, bytes(data))
    struct.pack_into("<i", data, plan.places[6].where, 70)
    with pytest.raises(lowering.LoweringError, match=r"RESCALE: shift 70 must be within 2\.\.62"):
        quantized.check_constants(plan, bytes(data))
    op.inputs["input_zp"] = 7
    g.graph_constants[7] = (TensorType("int8", (1,)), 2)
    g.types[7] = TensorType("int8", (1,))
    with pytest.raises(lowering.LoweringError, match="RESCALE: input_zp from a graph constant .* is not supported"):
        lowering.plan(g)
