"""Quantized (int8) TOSA networks through Arm's ML SDK on the emulated Mali, exact to TOSA 1.0's integer rules.

Each model is TOSA MLIR written here with int8 tensors, int32 accumulators and zero points, `tosa.rescale`
(per channel or not, SINGLE_ROUND / DOUBLE_ROUND, scale32 or the 16-bit multiplier, unsigned input and
output), int8 CONV2D / MATMUL, int32 ADD and MUL with a rounding shift, int8 CLAMP. Arm's `model-converter`
makes the VGF and `scenario_runner` runs it (int8 / int32 `.npy` inputs and outputs):
- on the emulated Mali's own VK_ARM_data_graph (`tessera run`, no Arm layer): the output must equal, bit for
  bit, numpy's reference written from the TOSA 1.0 specification (tosa_int_reference.py), and the trace must
  hold one data-graph workload whose operators are the model's;
- on lavapipe under Arm's two emulation layers (the reference implementation): the same output.
The rounding models are built so that SINGLE_ROUND and DOUBLE_ROUND give different results for most inputs,
so a driver rounding the wrong way fails.

Needs the 'ml' extra of pyproject.toml (`make setup`; Linux x86-64 wheels only: skipped elsewhere).
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tosa_int_reference as ref
from test_ml_sdk import LAYER, TESSERA, _reference_env, _scenario, _scenario_run
from test_ml_sdk import ml_layers  # noqa: F401  (a fixture)

from tessera.schemas import perfetto as pf

# numpy type -> the scenario's tensor format (model-converter: VK_FORMAT_R8_UINT for an input read unsigned)
FORMATS = {np.dtype(np.int8): "VK_FORMAT_R8_SINT", np.dtype(np.uint8): "VK_FORMAT_R8_UINT",
           np.dtype(np.int16): "VK_FORMAT_R16_SINT", np.dtype(np.int32): "VK_FORMAT_R32_SINT",
           np.dtype(np.float32): "VK_FORMAT_R32_SFLOAT"}
MLIR_TYPES = {np.dtype(np.int8): "i8", np.dtype(np.uint8): "i8", np.dtype(np.int16): "i16", np.dtype(np.int32): "i32",
              np.dtype(np.float32): "f32"}


def _t(shape, dtype) -> str:
    return "tensor<" + "x".join(map(str, shape)) + "x" + MLIR_TYPES[np.dtype(dtype)] + ">"


def _dense(values: np.ndarray) -> str:
    if values.ndim == 0:
        return str(int(values))
    return "[" + ", ".join(_dense(v) for v in values) + "]"


def _const(name: str, values: np.ndarray) -> str:
    t = _t(values.shape, values.dtype)
    return f'    %{name} = "tosa.const"() <{{values = dense<{_dense(values)}> : {t}}}> : () -> {t}'


def _scalar(name: str, value: int, dtype) -> str:
    return _const(name, np.array([value], dtype))


def _rescale(result: str, source: str, shape, in_dtype, out_dtype, *, mult, shift, in_zp: int, out_zp: int,
             double: bool, per_channel: bool = False, scale32: bool = True, in_unsigned: bool = False,
             out_unsigned: bool = False) -> list[str]:
    mult_dtype = np.int32 if scale32 else np.int16
    n = len(mult)
    lines = [_const(f"{result}_m", np.array(mult, mult_dtype)), _const(f"{result}_s", np.array(shift, np.int8)),
             _scalar(f"{result}_izp", in_zp, in_dtype), _scalar(f"{result}_ozp", out_zp, out_dtype)]
    mode = "DOUBLE_ROUND" if double else "SINGLE_ROUND"
    b = lambda v: "true" if v else "false"  # noqa: E731
    lines.append(
        f"    %{result} = tosa.rescale %{source}, %{result}_m, %{result}_s, %{result}_izp, %{result}_ozp "
        f"{{scale32 = {b(scale32)}, rounding_mode = {mode}, per_channel = {b(per_channel)}, "
        f"input_unsigned = {b(in_unsigned)}, output_unsigned = {b(out_unsigned)}}} : "
        f"({_t(shape, in_dtype)}, {_t((n,), mult_dtype)}, {_t((n,), np.int8)}, {_t((1,), in_dtype)}, "
        f"{_t((1,), out_dtype)}) -> {_t(shape, out_dtype)}")
    return lines


def _module(inputs: dict[str, np.ndarray], body: list[str], result: str, out_shape, out_dtype) -> str:
    args = ", ".join(f"%{k}: {_t(v.shape, v.dtype)}" for k, v in inputs.items())
    out = _t(out_shape, out_dtype)
    return "\n".join([f"module {{\n  func.func @main({args}) -> {out} {{", *body,
                      f"    return %{result} : {out}\n  }}\n}}"])


def _conv_model(rng):
    """int8 conv 3×3 'same' (input_zp -3, weight_zp 2) + int32 bias -> per-channel DOUBLE_ROUND rescale
    (shifts 41..43) to int8 (output_zp 5) -> clamp [-20, 100]."""
    x = rng.integers(-128, 128, (1, 6, 6, 3)).astype(np.int8)
    w = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    bias = rng.integers(-5000, 5000, (4,)).astype(np.int32)
    mult = [int(v) for v in rng.integers(1 << 30, (1 << 31) - 1, 4)]
    shift = [41, 42, 43, 42]
    acc_t, out_shape = _t((1, 6, 6, 4), np.int32), (1, 6, 6, 4)
    body = [_const("w", w), _const("b", bias), _scalar("xzp", -3, np.int8), _scalar("wzp", 2, np.int8),
            f"    %acc = tosa.conv2d %x, %w, %b, %xzp, %wzp {{acc_type = i32, dilation = array<i64: 1, 1>, "
            f"pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>}} : ({_t(x.shape, np.int8)}, "
            f"{_t(w.shape, np.int8)}, {_t(bias.shape, np.int32)}, {_t((1,), np.int8)}, {_t((1,), np.int8)}) -> {acc_t}",
            *_rescale("q", "acc", out_shape, np.int32, np.int8, mult=mult, shift=shift, in_zp=0, out_zp=5,
                      double=True, per_channel=True),
            f"    %r = tosa.clamp %q {{min_val = -20 : i8, max_val = 100 : i8}} : ({_t(out_shape, np.int8)}) -> "
            f"{_t(out_shape, np.int8)}"]
    acc = ref.conv2d(x, w, bias, -3, 2, (1, 1, 1, 1), (1, 1))
    q = ref.rescale(acc, mult, shift, 0, 5, out_bits=8, in_bits=32, rounding_mode=ref.DOUBLE_ROUND, per_channel=True)
    expected = ref.clamp(q, -20, 100).astype(np.int8)
    return _module({"x": x}, body, "r", out_shape, np.int8), [x], expected, ["CONV2D", "RESCALE", "CLAMP"]


def _matmul_model(rng):
    """int8 matmul (A_zp 7, B_zp -1) -> int32 + an int32 input (tosa.add) -> SINGLE_ROUND rescale (shift 20) to
    int8 -> clamp [-128, 127] (relu6-like bounds)."""
    a = rng.integers(-128, 128, (1, 3, 8)).astype(np.int8)
    bias = rng.integers(-3000, 3000, (1, 3, 4)).astype(np.int32)
    b = rng.integers(-127, 128, (1, 8, 4)).astype(np.int8)
    out_shape, acc_t = (1, 3, 4), _t((1, 3, 4), np.int32)
    mult, shift = [1_234_567_890 >> 8], [20]
    body = [_const("b", b), _scalar("azp", 7, np.int8), _scalar("bzp", -1, np.int8),
            f"    %acc = tosa.matmul %a, %b, %azp, %bzp : ({_t(a.shape, np.int8)}, {_t(b.shape, np.int8)}, "
            f"{_t((1,), np.int8)}, {_t((1,), np.int8)}) -> {acc_t}",
            f"    %sum = tosa.add %acc, %c : ({acc_t}, {acc_t}) -> {acc_t}",
            *_rescale("q", "sum", out_shape, np.int32, np.int8, mult=mult, shift=shift, in_zp=0, out_zp=-4,
                      double=False),
            f"    %r = tosa.clamp %q {{min_val = -128 : i8, max_val = 6 : i8}} : ({_t(out_shape, np.int8)}) -> "
            f"{_t(out_shape, np.int8)}"]
    acc = ref.add(ref.matmul(a, b, 7, -1), bias)
    q = ref.rescale(acc, mult, shift, 0, -4, out_bits=8, in_bits=32)
    expected = ref.clamp(q, -128, 6).astype(np.int8)
    return _module({"a": a, "c": bias}, body, "r", out_shape, np.int8), [a, bias], expected, \
        ["MATMUL", "ADD", "RESCALE", "CLAMP"]


def _rounding_model(double: bool, inexact: bool = False):
    """An int32 input rescaled by 2^30 / 2^33 (= 1/8) to int8: DOUBLE_ROUND adds 2^30 to the rounding term
    (floor((v + 5) / 8)), SINGLE_ROUND does not (floor((v + 4) / 8)); then × an int32 input with MUL's shift 3.
    INEXACT_ROUND leaves the choice to the implementation: the emulated Mali rounds once, as Arm's layer does."""
    def build(rng):
        v = np.arange(-60, 60, dtype=np.int32).reshape(1, 120)
        m = rng.integers(-1000, 1000, (1, 120)).astype(np.int32)
        body = [*_rescale("q", "v", (1, 120), np.int32, np.int8, mult=[1 << 30], shift=[33], in_zp=0, out_zp=0,
                          double=double),
                *_rescale("w", "q", (1, 120), np.int8, np.int32, mult=[1 << 30], shift=[30], in_zp=0, out_zp=0,
                          double=double),
                _scalar("sh", 3, np.int8),
                f"    %r = tosa.mul %w, %m, %sh : ({_t((1, 120), np.int32)}, {_t((1, 120), np.int32)}, "
                f"{_t((1,), np.int8)}) -> {_t((1, 120), np.int32)}"]
        mode = ref.DOUBLE_ROUND if double else ref.SINGLE_ROUND
        q = ref.rescale(v, [1 << 30], [33], 0, 0, out_bits=8, in_bits=32, rounding_mode=mode)
        w = ref.rescale(q, [1 << 30], [30], 0, 0, out_bits=32, in_bits=8, rounding_mode=mode)
        expected = ref.mul(w, m, 3).astype(np.int32)
        mlir = _module({"v": v, "m": m}, body, "r", (1, 120), np.int32)
        return (mlir.replace("SINGLE_ROUND", "INEXACT_ROUND") if inexact else mlir), [v, m], expected, \
            ["RESCALE", "RESCALE", "MUL"]
    return build


def _unsigned_model(rng):
    """uint8 bytes (read with input_unsigned, input_zp 128) rescaled with the 16-bit multiplier (scale32 false)
    to int8 (output_zp -3), then to uint8 (output_unsigned, output_zp 200, scale32, SINGLE_ROUND) — the
    conversions at the edges of a uint8 network (Arm's layer has no uint8 -> uint8 rescale)."""
    x = rng.integers(0, 256, (1, 64)).astype(np.uint8)
    body = [*_rescale("s", "x", (1, 64), np.int8, np.int8, mult=[23456], shift=[15], in_zp=-128, out_zp=-3,
                      double=False, scale32=False, in_unsigned=True),
            *_rescale("r", "s", (1, 64), np.int8, np.int8, mult=[1 << 30], shift=[31], in_zp=-3, out_zp=-56,
                      double=False, out_unsigned=True)]
    signed = ref.rescale(x, [23456], [15], -128, -3, out_bits=8, scale32=False, input_unsigned=True)
    expected = ref.rescale(signed, [1 << 30], [31], -3, -56, out_bits=8, output_unsigned=True).astype(np.uint8)
    return _module({"x": x}, body, "r", (1, 64), np.uint8), [x], expected, ["RESCALE", "RESCALE"]


def _shape(name: str, values) -> str:
    return (f"    %{name} = tosa.const_shape {{values = dense<{list(values)}> : tensor<{len(values)}xindex>}} : "
            f"() -> !tosa.shape<{len(values)}>")


def _pool_and_move_model(rng):
    """int8 max_pool2d 2×2/2 and avg_pool2d 3×3/1 padded (input_zp -5, output_zp 3: windows of 4, 6 and 9
    elements, each its reciprocal_scale), slice, concat, transpose, pad (pad_const -7), reverse, tile, and an
    int8 TABLE (a tanh-like 256-entry table)."""
    x = rng.integers(-128, 128, (1, 6, 6, 4)).astype(np.int8)
    lut = np.clip(np.round(127 * np.tanh(np.arange(-128, 128) / 32)), -128, 127).astype(np.int8)
    i8 = lambda *shape: _t(shape, np.int8)  # noqa: E731
    body = [f"    %m = tosa.max_pool2d %x {{kernel = array<i64: 2, 2>, pad = array<i64: 0, 0, 0, 0>, "
            f"stride = array<i64: 2, 2>}} : ({i8(1, 6, 6, 4)}) -> {i8(1, 3, 3, 4)}",
            _scalar("izp", -5, np.int8), _scalar("ozp", 3, np.int8),
            f"    %a = tosa.avg_pool2d %x, %izp, %ozp {{acc_type = i32, kernel = array<i64: 3, 3>, "
            f"pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>}} : ({i8(1, 6, 6, 4)}, {i8(1)}, {i8(1)}) -> "
            f"{i8(1, 6, 6, 4)}",
            _shape("start", [0, 1, 2, 0]), _shape("size", [1, 3, 3, 4]),
            f"    %s = tosa.slice %a, %start, %size : ({i8(1, 6, 6, 4)}, !tosa.shape<4>, !tosa.shape<4>) -> "
            f"{i8(1, 3, 3, 4)}",
            f"    %c = tosa.concat %m, %s {{axis = 3 : i32}} : ({i8(1, 3, 3, 4)}, {i8(1, 3, 3, 4)}) -> "
            f"{i8(1, 3, 3, 8)}",
            f"    %t = tosa.transpose %c {{perms = array<i32: 0, 3, 1, 2>}} : ({i8(1, 3, 3, 8)}) -> {i8(1, 8, 3, 3)}",
            _shape("padding", [0, 0, 0, 0, 1, 0, 0, 1]), _scalar("pc", -7, np.int8),
            f"    %p = tosa.pad %t, %padding, %pc : ({i8(1, 8, 3, 3)}, !tosa.shape<8>, {i8(1)}) -> {i8(1, 8, 4, 4)}",
            f"    %r = tosa.reverse %p {{axis = 2 : i32}} : ({i8(1, 8, 4, 4)}) -> {i8(1, 8, 4, 4)}",
            _shape("mult", [1, 1, 1, 2]),
            f"    %tl = tosa.tile %r, %mult : ({i8(1, 8, 4, 4)}, !tosa.shape<4>) -> {i8(1, 8, 4, 8)}",
            _const("lut", lut),
            f"    %o = tosa.table %tl, %lut : ({i8(1, 8, 4, 8)}, {i8(256)}) -> {i8(1, 8, 4, 8)}"]
    m = ref.max_pool2d(x, (2, 2), (2, 2), (0, 0, 0, 0))
    a = ref.avg_pool2d(x, (3, 3), (1, 1), (1, 1, 1, 1), -5, 3)
    c = np.concatenate([m, a[:, 1:4, 2:5, :]], axis=3).transpose(0, 3, 1, 2)
    p = np.pad(c, ((0, 0), (0, 0), (1, 0), (0, 1)), constant_values=-7)
    expected = ref.table(np.tile(np.flip(p, 2), (1, 1, 1, 2)), lut).astype(np.int8)
    return _module({"x": x}, body, "o", (1, 8, 4, 8), np.int8), [x], expected, \
        ["MAX_POOL2D", "AVG_POOL2D", "SLICE", "CONCAT", "TRANSPOSE", "PAD", "REVERSE", "TILE", "TABLE"]


def _network_model(rng):
    """A small quantized network as a TFLite-style int8 model is lowered: conv 3×3 stride 2 on 9×9 (per-channel
    requantization, relu as a clamp at the output zero point) -> depthwise 3×3 (multiplier 2, per channel) ->
    average pool 2×2 -> reshape -> fully connected (MATMUL, int32 bias by ADD) -> requantized int8 logits."""
    x = rng.integers(-128, 128, (1, 9, 9, 3)).astype(np.int8)
    w1 = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    b1 = rng.integers(-2000, 2000, (4,)).astype(np.int32)
    m1, s1 = [int(v) for v in rng.integers(1 << 30, 1 << 31, 4)], [40, 40, 41, 40]
    w2 = rng.integers(-127, 128, (3, 3, 4, 2)).astype(np.int8)
    b2 = rng.integers(-500, 500, (8,)).astype(np.int32)
    m2, s2 = [int(v) for v in rng.integers(1 << 30, 1 << 31, 8)], [37, 38, 37, 38, 37, 37, 38, 37]
    wfc = rng.integers(-127, 128, (1, 32, 5)).astype(np.int8)
    bfc = rng.integers(-3000, 3000, (1, 1, 5)).astype(np.int32)
    i8, i32 = (lambda *shape: _t(shape, np.int8)), (lambda *shape: _t(shape, np.int32))  # noqa: E731
    zp = (1,)
    body = [_const("w1", w1), _const("b1", b1), _scalar("x_zp", 1, np.int8), _scalar("w_zp", 0, np.int8),
            f"    %c1 = tosa.conv2d %x, %w1, %b1, %x_zp, %w_zp {{acc_type = i32, dilation = array<i64: 1, 1>, "
            f"pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>}} : ({i8(1, 9, 9, 3)}, {i8(4, 3, 3, 3)}, "
            f"{i32(4)}, {i8(*zp)}, {i8(*zp)}) -> {i32(1, 4, 4, 4)}",
            *_rescale("q1", "c1", (1, 4, 4, 4), np.int32, np.int8, mult=m1, shift=s1, in_zp=0, out_zp=-10,
                      double=True, per_channel=True),
            f"    %r1 = tosa.clamp %q1 {{min_val = -10 : i8, max_val = 127 : i8}} : ({i8(1, 4, 4, 4)}) -> "
            f"{i8(1, 4, 4, 4)}",
            _const("w2", w2), _const("b2", b2), _scalar("r1_zp", -10, np.int8), _scalar("w2_zp", 0, np.int8),
            f"    %c2 = tosa.depthwise_conv2d %r1, %w2, %b2, %r1_zp, %w2_zp {{acc_type = i32, "
            f"dilation = array<i64: 1, 1>, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>}} : "
            f"({i8(1, 4, 4, 4)}, {i8(3, 3, 4, 2)}, {i32(8)}, {i8(*zp)}, {i8(*zp)}) -> {i32(1, 4, 4, 8)}",
            *_rescale("q2", "c2", (1, 4, 4, 8), np.int32, np.int8, mult=m2, shift=s2, in_zp=0, out_zp=2,
                      double=True, per_channel=True),
            _scalar("p_izp", 2, np.int8), _scalar("p_ozp", 2, np.int8),
            f"    %p = tosa.avg_pool2d %q2, %p_izp, %p_ozp {{acc_type = i32, kernel = array<i64: 2, 2>, "
            f"pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>}} : ({i8(1, 4, 4, 8)}, {i8(*zp)}, {i8(*zp)}) "
            f"-> {i8(1, 2, 2, 8)}",
            _shape("flat", [1, 1, 32]),
            f"    %f = tosa.reshape %p, %flat : ({i8(1, 2, 2, 8)}, !tosa.shape<3>) -> {i8(1, 1, 32)}",
            _const("wfc", wfc), _scalar("f_zp", 2, np.int8), _scalar("wfc_zp", 0, np.int8),
            f"    %mm = tosa.matmul %f, %wfc, %f_zp, %wfc_zp : ({i8(1, 1, 32)}, {i8(1, 32, 5)}, {i8(*zp)}, "
            f"{i8(*zp)}) -> {i32(1, 1, 5)}",
            _const("bfc", bfc),
            f"    %fc = tosa.add %mm, %bfc : ({i32(1, 1, 5)}, {i32(1, 1, 5)}) -> {i32(1, 1, 5)}",
            *_rescale("o", "fc", (1, 1, 5), np.int32, np.int8, mult=[1518500250], shift=[38], in_zp=0, out_zp=0,
                      double=True)]
    r1 = ref.clamp(ref.rescale(ref.conv2d(x, w1, b1, 1, 0, (0, 0, 0, 0), (2, 2)), m1, s1, 0, -10, out_bits=8,
                               in_bits=32, rounding_mode=ref.DOUBLE_ROUND, per_channel=True), -10, 127)
    q2 = ref.rescale(ref.depthwise_conv2d(r1, w2, b2, -10, 0, (1, 1, 1, 1), (1, 1)), m2, s2, 0, 2, out_bits=8,
                     in_bits=32, rounding_mode=ref.DOUBLE_ROUND, per_channel=True)
    f = ref.avg_pool2d(q2, (2, 2), (2, 2), (0, 0, 0, 0), 2, 2).reshape(1, 1, 32)
    fc = ref.add(ref.matmul(f, wfc, 2, 0), bfc)
    expected = ref.rescale(fc, [1518500250], [38], 0, 0, out_bits=8, in_bits=32,
                           rounding_mode=ref.DOUBLE_ROUND).astype(np.int8)
    assert len(set(expected.ravel().tolist())) == 5, expected     # not saturated: the scales are meaningful
    return _module({"x": x}, body, "o", (1, 1, 5), np.int8), [x], expected, \
        ["CONV2D", "RESCALE", "CLAMP", "DEPTHWISE_CONV2D", "RESCALE", "AVG_POOL2D", "RESHAPE", "MATMUL", "ADD",
         "RESCALE"]


def _int16_model(rng):
    """int16 tensors (VK_FORMAT_R16_SINT, 51 elements: the last word half used): int16 -> int32 (rescale ×1),
    × an int32 input with MUL's shift 9, -> int16 (DOUBLE_ROUND, shift 33)."""
    x = rng.integers(-32768, 32768, (1, 51)).astype(np.int16)
    m = rng.integers(-40000, 40000, (1, 51)).astype(np.int32)
    body = [*_rescale("w", "x", (1, 51), np.int16, np.int32, mult=[1 << 30], shift=[30], in_zp=0, out_zp=0,
                      double=False),
            _scalar("sh", 9, np.int8),
            f"    %p = tosa.mul %w, %m, %sh : ({_t((1, 51), np.int32)}, {_t((1, 51), np.int32)}, {_t((1,), np.int8)}) "
            f"-> {_t((1, 51), np.int32)}",
            *_rescale("r", "p", (1, 51), np.int32, np.int16, mult=[1518500250], shift=[33], in_zp=0, out_zp=0,
                      double=True)]
    w = ref.rescale(x, [1 << 30], [30], 0, 0, out_bits=32, in_bits=16)
    expected = ref.rescale(ref.mul(w, m, 9), [1518500250], [33], 0, 0, out_bits=16, in_bits=32,
                           rounding_mode=ref.DOUBLE_ROUND).astype(np.int16)
    return _module({"x": x, "m": m}, body, "r", (1, 51), np.int16), [x, m], expected, ["RESCALE", "MUL", "RESCALE"]


def _cast_model(rng):
    """CAST fp32 -> int8 (halves round to even, out-of-range values saturate), int32 -> int8 (the low byte),
    both -> int32, an int32 ADD, and CAST back to fp32."""
    f = np.concatenate([np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 127.49, 127.5, -128.5, 300.0, -1e9, 3.75],
                                 np.float32), rng.uniform(-140, 140, 28).astype(np.float32)]).reshape(1, 40)
    i = rng.integers(-100000, 100000, (1, 40)).astype(np.int32)
    t = lambda dtype: _t((1, 40), dtype)  # noqa: E731
    body = [f"    %a = tosa.cast %f : ({t(np.float32)}) -> {t(np.int8)}",
            f"    %b = tosa.cast %i : ({t(np.int32)}) -> {t(np.int8)}",
            f"    %a32 = tosa.cast %a : ({t(np.int8)}) -> {t(np.int32)}",
            f"    %b32 = tosa.cast %b : ({t(np.int8)}) -> {t(np.int32)}",
            f"    %s = tosa.add %a32, %b32 : ({t(np.int32)}, {t(np.int32)}) -> {t(np.int32)}",
            f"    %o = tosa.cast %s : ({t(np.int32)}) -> {t(np.float32)}"]
    expected = (ref.cast_to_int(f, 8) + ref.cast_to_int(i, 8)).astype(np.float32)
    return _module({"f": f, "i": i}, body, "o", (1, 40), np.float32), [f, i], expected, \
        ["CAST", "CAST", "CAST", "CAST", "ADD", "CAST"]


MODELS = {"qconv3x3_rescale_clamp": _conv_model, "qmatmul_add_rescale_clamp": _matmul_model,
          "rescale_double_round_mul_shift": _rounding_model(True),
          "rescale_single_round_mul_shift": _rounding_model(False),
          "rescale_inexact_round_mul_shift": _rounding_model(False, inexact=True), "rescale_uint8_int8_uint8": _unsigned_model,
          "qpool_slice_concat_transpose_pad_reverse_tile_table": _pool_and_move_model,
          "qnet_conv_depthwise_pool_fc": _network_model, "rescale_int16_mul_shift": _int16_model,
          "cast_float_int8_int32_float": _cast_model}


def _equal(result: np.ndarray, expected: np.ndarray, what: str) -> None:
    assert result.dtype == expected.dtype and result.shape == expected.shape, (what, result.dtype, result.shape)
    diff = np.flatnonzero(result.reshape(-1) != expected.reshape(-1))
    assert diff.size == 0, f"{what}: {diff.size} elements differ, first at {diff[:5]}: " \
                           f"{result.reshape(-1)[diff[:5]]} != {expected.reshape(-1)[diff[:5]]}"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_quantized_scenario_natively_equals_the_spec_and_arms_reference(name, ml_layers, shims, tmp_path):  # noqa: F811,E501
    mlir, inputs, expected, operators = MODELS[name](np.random.default_rng(sum(map(ord, name))))
    scenario = _scenario(tmp_path, mlir, inputs, FORMATS, expected.dtype)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("VK_", "TESSERA_"))}
    env["TESSERA_LOG"] = "info"
    session = tmp_path / "session"
    ran, result = _scenario_run(scenario, tmp_path / "out-native", env, [TESSERA, "run", "--out", session, "--"])
    assert "Traceback" not in ran.stderr and "VK_ARM_data_graph:" not in ran.stderr, ran.stderr
    _equal(result, expected, "Tessera's own data graph vs the TOSA 1.0 reference in numpy")

    _, reference = _scenario_run(scenario, tmp_path / "out-reference", _reference_env(ml_layers))
    _equal(reference, expected, "lavapipe + Arm's emulation layers vs the TOSA 1.0 reference in numpy")

    packets = list(pf.read_packets(session / "merged.perfetto-trace"))
    events = [p.gpu_render_stage_event for p in packets if p.HasField("gpu_render_stage_event")]
    graphs = [e for e in events if pf.extra(e, "command") == "vkCmdDispatchDataGraphARM"]
    assert len(graphs) == 1 and pf.extra(graphs[0], "kind") == "data_graph", [e.name for e in events]
    costs = json.loads(pf.extra(graphs[0], "Operators"))
    assert [c["operator"] for c in costs] == operators, costs
    assert all(c["bytes"] > 0 and c["ns"] > 0 for c in costs)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_quantized_scenario_with_arms_graph_layer_above_tessera(name, ml_layers, shims, tmp_path):  # noqa: F811
    """Arm's Graph layer above Tessera's layer and driver: the layer runs each integer operator as its own
    compute shader on int8 / int16 / int32 tensors, which the emulated Mali's VK_ARM_tensors lowers; the output
    equals the TOSA reference, and the trace's workloads are tagged compute dispatches."""
    mlir, inputs, expected, _ = MODELS[name](np.random.default_rng(sum(map(ord, name))))
    scenario = _scenario(tmp_path, mlir, inputs, FORMATS, expected.dtype)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VK_", "TESSERA_"))}
    env.update(VK_ADD_LAYER_PATH=str(ml_layers.graph_dir), VK_INSTANCE_LAYERS=f"VK_LAYER_ML_Graph_Emulation:{LAYER}")
    session = tmp_path / "session"
    ran, result = _scenario_run(scenario, tmp_path / "out", env, [TESSERA, "run", "--out", session, "--"])
    assert "Traceback" not in ran.stderr, ran.stderr
    _equal(result, expected, "Arm's Graph layer above the emulated Mali vs the TOSA 1.0 reference in numpy")
    packets = list(pf.read_packets(session / "merged.perfetto-trace"))
    events = [p.gpu_render_stage_event for p in packets if p.HasField("gpu_render_stage_event")]
    dispatches = [e for e in events if pf.extra(e, "command") == "vkCmdDispatch"]
    assert dispatches and all(pf.extra(e, "metadata") != "missing" for e in events)
    assert not any(pf.extra(e, "command") == "vkCmdDispatchDataGraphARM" for e in events)


def test_rounding_models_differ():
    """The two rounding models' references differ (so each test above can catch the other rounding)."""
    single = _rounding_model(False)(np.random.default_rng(1))[2]
    double = _rounding_model(True)(np.random.default_rng(1))[2]
    assert np.count_nonzero(single != double) >= 10


def test_reference_follows_the_spec_examples():
    """apply_scale by hand: 3 * 2^30 >> 33 with round 2^32 is 0 (single) and with 2^32 + 2^30 is 1 (double);
    -4 is 0 and -1 (2^30 subtracted); a shift below 32 never double-rounds; the shift is arithmetic."""
    assert ref.apply_scale(3, 1 << 30, 33, False) == 0 and ref.apply_scale(3, 1 << 30, 33, True) == 1
    assert ref.apply_scale(-4, 1 << 30, 33, False) == 0 and ref.apply_scale(-4, 1 << 30, 33, True) == -1
    assert ref.apply_scale(-5, 1 << 30, 33, False) == -1 and ref.apply_scale(-5, 1 << 30, 33, True) == -1
    assert ref.apply_scale(3, 1 << 20, 22, True) == ref.apply_scale(3, 1 << 20, 22, False) == 1
    assert ref.apply_scale(-3, 1, 2, False) == -1   # (-3 + 2) >> 2 = -1 (towards minus infinity)
    assert ref.rescale(np.array([200]), [1 << 30], [30], 0, 0, out_bits=8).tolist() == [127]
    assert ref.rescale(np.array([-56]), [1 << 30], [30], 0, 0, out_bits=8, input_unsigned=True).tolist() == [127]
