"""VK_ARM_data_graph on the emulated Mali, through the real loader, layer, driver and lavapipe (issue #30).

Run as a program (under the emulated Mali's environment) this file is the application: it builds one
graph per case with examples/vkgraphs.py, runs it through vkCreateDataGraphPipelinesARM, a session and
vkCmdDispatchDataGraphARM on tensors in host-visible memory, and prints one JSON line with every output
and every refused call's VkResult. The tests compare the outputs with numpy computed here from the same
seeded inputs, and the refusals with their messages on stderr.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
F32_MAX = 3.4028234663852886e38


def _inputs(name: str, shapes) -> list[np.ndarray]:
    rng = np.random.default_rng(sum(map(ord, name)))
    return [(rng.integers(-16, 16, s) / 4).astype(np.float32) for s in shapes]


def _conv_ref(x, w, b, pad, stride, dilation=(1, 1), depthwise=False):
    """NHWC convolution in float64: weights OHWI (or KH×KW×C×M depthwise), pad [top, bottom, left, right]."""
    x = np.pad(x.astype(np.float64), ((0, 0), (pad[0], pad[1]), (pad[2], pad[3]), (0, 0)))
    n, h, wd, c = x.shape
    kh, kw = (w.shape[0], w.shape[1]) if depthwise else (w.shape[1], w.shape[2])
    oh = (h - (kh - 1) * dilation[0] - 1) // stride[0] + 1
    ow = (wd - (kw - 1) * dilation[1] - 1) // stride[1] + 1
    out_c = w.shape[2] * w.shape[3] if depthwise else w.shape[0]
    out = np.zeros((n, oh, ow, out_c))
    for ky in range(kh):
        for kx in range(kw):
            patch = x[:, ky * dilation[0]:ky * dilation[0] + (oh - 1) * stride[0] + 1:stride[0],
                      kx * dilation[1]:kx * dilation[1] + (ow - 1) * stride[1] + 1:stride[1], :]
            if depthwise:
                out += (patch[..., :, None] * w[ky, kx][None, None, None]).reshape(n, oh, ow, out_c)
            else:
                out += np.einsum("nyxi,oi->nyxo", patch, w[:, ky, kx, :].astype(np.float64))
    return (out + b).astype(np.float32)


def _pool_ref(x, k, stride, pad, maximum):
    n, h, w, c = x.shape
    oh, ow = (h + pad[0] + pad[1] - k[0]) // stride[0] + 1, (w + pad[2] + pad[3] - k[1]) // stride[1] + 1
    out = np.zeros((n, oh, ow, c), np.float64)
    for y in range(oh):
        for xx in range(ow):
            y0, x0 = y * stride[0] - pad[0], xx * stride[1] - pad[2]
            win = x[:, max(y0, 0):min(y0 + k[0], h), max(x0, 0):min(x0 + k[1], w), :].astype(np.float64)
            out[:, y, xx, :] = win.max(axis=(1, 2)) if maximum else win.mean(axis=(1, 2))
    return out.astype(np.float32)


def _sigmoid(x):
    return (1 / (1 + np.exp(-x.astype(np.float64)))).astype(np.float32)


# name -> (input shapes, builder(g, inputs) -> (output value, output shape), numpy(inputs) -> expected, tolerance)
def _unary(op, fn, tol=0.0, shape=(2, 3, 4)):
    return ([shape], lambda g, i: (g.op(op, shape, *i), shape), lambda i: fn(i[0]), tol)


def _binary(op, fn, a=(2, 3, 4), b=(1, 3, 1)):
    def build(g, i):
        if op in ("MAXIMUM", "MINIMUM"):
            return g.op(op, a, g.u32(1), *i), a                  # nan_mode first
        return g.op(op, a, *i, *([g.shift()] if op == "MUL" else [])), a   # MUL: shift last
    return ([a, b], build, lambda i: fn(i[0], i[1]).astype(np.float32), 0.0)


W3 = (np.arange(4 * 3 * 3 * 2) % 7 - 3).astype(np.float32).reshape(4, 3, 3, 2) / 4
B4 = np.array([0.5, -1, 0.25, 2], np.float32)


def _conv(pad, stride, k=3, acc=3):
    w = W3 if k == 3 else W3[:, :1, :1, :]
    out_hw = (6 + pad - k) // stride + 1

    def build(g, i):
        y = g.op("CONV2D", (1, out_hw, out_hw, 4), g.u32s([pad // 2, pad - pad // 2, pad // 2, pad - pad // 2]),
                 g.u32s([stride, stride]), g.u32s([1, 1]), g.u32(acc), g.bool(False), i[0],
                 g.graph_constant(w.shape, 0), g.constant((4,), B4), g.zero_point(), g.zero_point())
        return y, (1, out_hw, out_hw, 4)
    ref = lambda i: _conv_ref(i[0], w, B4, (pad // 2, pad - pad // 2, pad // 2, pad - pad // 2), (stride, stride))  # noqa: E731
    return ([(1, 6, 6, 2)], build, ref, 1e-5, {0: w})


def _depthwise():
    w = (np.arange(3 * 3 * 2 * 2) % 5 - 2).astype(np.float32).reshape(3, 3, 2, 2) / 2

    def build(g, i):
        y = g.op("DEPTHWISE_CONV2D", (1, 5, 5, 4), g.u32s([1, 1, 1, 1]), g.u32s([1, 1]), g.u32s([1, 1]), g.u32(3),
                 g.bool(False), i[0], g.constant(w.shape, w), g.constant((4,), B4), g.zero_point(), g.zero_point())
        return y, (1, 5, 5, 4)
    return ([(1, 5, 5, 2)], build, lambda i: _conv_ref(i[0], w, B4, (1, 1, 1, 1), (1, 1), depthwise=True), 1e-5)


def _pool(op, k, stride, pad):
    out = (1, (5 + pad[0] + pad[1] - k) // stride + 1, (5 + pad[2] + pad[3] - k) // stride + 1, 3)

    def build(g, i):
        if op == "AVG_POOL2D":
            return g.op(op, out, g.u32s([k, k]), g.u32s([stride, stride]), g.u32s(pad), g.u32(3), i[0],
                        g.zero_point(), g.zero_point()), out
        return g.op(op, out, g.u32s([k, k]), g.u32s([stride, stride]), g.u32s(pad), g.u32(1), i[0]), out
    return ([(1, 5, 5, 3)], build, lambda i: _pool_ref(i[0], (k, k), (stride, stride), pad, op == "MAX_POOL2D"), 1e-6)


def _matmul():
    def build(g, i):
        return g.op("MATMUL", (2, 3, 5), i[0], i[1], g.zero_point(), g.zero_point()), (2, 3, 5)
    return ([(2, 3, 4), (2, 4, 5)], build, lambda i: (i[0].astype(np.float64) @ i[1]).astype(np.float32), 0.0)


def _network():
    """conv 3×3 (FP16 accumulator asked, fp32 computed) → relu → max pool 2×2 → reshape → matmul → sigmoid."""
    wfc = (np.arange(36 * 3) % 11 - 5).astype(np.float32).reshape(1, 36, 3) / 8

    def build(g, i):
        c = g.op("CONV2D", (1, 6, 6, 4), g.u32s([1, 1, 1, 1]), g.u32s([1, 1]), g.u32s([1, 1]), g.u32(2),
                 g.bool(False), i[0], g.graph_constant(W3.shape, 0), g.constant((4,), B4), g.zero_point(),
                 g.zero_point())
        r = g.op("CLAMP", (1, 6, 6, 4), g.f32(0.0), g.f32(F32_MAX), g.u32(1), c)
        p = g.op("MAX_POOL2D", (1, 3, 3, 4), g.u32s([2, 2]), g.u32s([2, 2]), g.u32s([0, 0, 0, 0]), g.u32(1), r)
        f = g.op("RESHAPE", (1, 1, 36), p, g.u32s([1, 1, 36]))
        m = g.op("MATMUL", (1, 1, 3), f, g.graph_constant(wfc.shape, 1), g.zero_point(), g.zero_point())
        return g.op("SIGMOID", (1, 1, 3), m), (1, 1, 3)

    def ref(i):
        c = np.maximum(_conv_ref(i[0], W3, B4, (1, 1, 1, 1), (1, 1)), 0)
        p = _pool_ref(c, (2, 2), (2, 2), (0, 0, 0, 0), True)
        return _sigmoid((p.reshape(1, 1, 36).astype(np.float64) @ wfc).astype(np.float32))
    return ([(1, 6, 6, 2)], build, ref, 1e-5, {0: W3, 1: wfc})


def _sample_conv():
    """The graph of Arm's public `graph_constants` sample (Vulkan-Samples tensor_and_data_graph), written here:
    CONV2D 3×3, stride 1, padding 1 on 1×20×20×3, its OHWI 3×3×3×3 weights (a per-channel sharpening kernel)
    and its 3 bias values both graph constants (VkDataGraphPipelineConstantARM ids 0 and 1, no strides)."""
    w = np.zeros((3, 3, 3, 3), np.float32)
    for c in range(3):
        w[c, 1, 1, c] = 2.0
        for ky, kx in ((0, 1), (1, 0), (1, 2), (2, 1)):
            w[c, ky, kx, c] = -0.5
    bias = np.array([0.0, 0.25, -0.5], np.float32)

    def build(g, i):
        y = g.op("CONV2D", (1, 20, 20, 3), g.u32s([1, 1, 1, 1]), g.u32s([1, 1]), g.u32s([1, 1]), g.u32(3),
                 g.bool(False), i[0], g.graph_constant(w.shape, 0), g.graph_constant(bias.shape, 1), g.zero_point(),
                 g.zero_point())
        return y, (1, 20, 20, 3)
    return ([(1, 20, 20, 3)], build, lambda i: _conv_ref(i[0], w, bias, (1, 1, 1, 1), (1, 1)), 1e-5, {0: w, 1: bias})


CASES = {
    "add_broadcast": _binary("ADD", np.add),
    "sub": _binary("SUB", np.subtract, b=(2, 3, 4)),
    "mul_broadcast": _binary("MUL", np.multiply, b=(2, 1, 4)),
    "maximum": _binary("MAXIMUM", np.maximum),
    "minimum": _binary("MINIMUM", np.minimum),
    "clamp": ([(2, 3, 4)], lambda g, i: (g.op("CLAMP", (2, 3, 4), g.f32(-1.0), g.f32(2.0), g.u32(1), i[0]),
                                         (2, 3, 4)), lambda i: np.clip(i[0], -1, 2), 0.0),
    "relu": ([(2, 3, 4)], lambda g, i: (g.op("CLAMP", (2, 3, 4), g.f32(0.0), g.f32(F32_MAX), g.u32(1), i[0]),
                                        (2, 3, 4)), lambda i: np.maximum(i[0], 0), 0.0),
    "sigmoid": _unary("SIGMOID", _sigmoid, 1e-6),
    "tanh": _unary("TANH", lambda x: np.tanh(x.astype(np.float64)).astype(np.float32), 1e-6),
    "abs": _unary("ABS", np.abs),
    "exp": _unary("EXP", lambda x: np.exp(x.astype(np.float64)).astype(np.float32), 1e-5),
    "reciprocal": _unary("RECIPROCAL", lambda x: (1 / x.astype(np.float64)).astype(np.float32), 1e-6, shape=(7,)),
    "floor": _unary("FLOOR", np.floor),
    "ceil": _unary("CEIL", np.ceil),
    "log": _unary("LOG", lambda x: np.log(x.astype(np.float64)).astype(np.float32), 1e-6, shape=(7,)),
    "rsqrt": _unary("RSQRT", lambda x: (1 / np.sqrt(x.astype(np.float64))).astype(np.float32), 1e-6, shape=(7,)),
    "sin": _unary("SIN", lambda x: np.sin(x.astype(np.float64)).astype(np.float32), 1e-5),
    "cos": _unary("COS", lambda x: np.cos(x.astype(np.float64)).astype(np.float32), 1e-5),
    "pow": ([(7,), (7,)], lambda g, i: (g.op("POW", (7,), *i), (7,)),
            lambda i: np.power(i[0].astype(np.float64), i[1]).astype(np.float32), 1e-5),
    "negate": ([(2, 3, 4)], lambda g, i: (g.op("NEGATE", (2, 3, 4), i[0], g.zero_point(), g.zero_point()),
                                          (2, 3, 4)), lambda i: -i[0], 0.0),
    "reshape": ([(2, 3, 4)], lambda g, i: (g.op("RESHAPE", (4, 6), i[0], g.u32s([4, 6])), (4, 6)),
                lambda i: i[0].reshape(4, 6), 0.0),
    "transpose": ([(2, 3, 4)], lambda g, i: (g.op("TRANSPOSE", (4, 2, 3), g.u32s([2, 0, 1]), i[0]), (4, 2, 3)),
                  lambda i: np.transpose(i[0], (2, 0, 1)), 0.0),
    "slice": ([(4, 5, 6)], lambda g, i: (g.op("SLICE", (2, 5, 3), i[0], g.u32s([1, 0, 2]), g.u32s([2, 5, 3])),
                                         (2, 5, 3)), lambda i: i[0][1:3, 0:5, 2:5], 0.0),
    "pad": ([(2, 3, 4)], lambda g, i: (g.op("PAD", (2, 6, 7), i[0], g.u32s([0, 0, 1, 2, 2, 1]),
                                            g.constant((1,), [-0.5])), (2, 6, 7)),
            lambda i: np.pad(i[0], ((0, 0), (1, 2), (2, 1)), constant_values=-0.5), 0.0),
    "tile": ([(2, 3)], lambda g, i: (g.op("TILE", (4, 9), i[0], g.u32s([2, 3])), (4, 9)),
             lambda i: np.tile(i[0], (2, 3)), 0.0),
    "reverse": ([(3, 4, 2)], lambda g, i: (g.op("REVERSE", (3, 4, 2), g.u32(1), i[0]), (3, 4, 2)),
                lambda i: np.flip(i[0], 1), 0.0),
    "concat": ([(1, 2, 3), (1, 4, 3), (1, 1, 3)],
               lambda g, i: (g.op("CONCAT", (1, 7, 3), g.u32(1), *i), (1, 7, 3)),
               lambda i: np.concatenate(i, axis=1), 0.0),
    "reduce_sum": ([(2, 5, 3)], lambda g, i: (g.op("REDUCE_SUM", (2, 1, 3), g.u32(1), i[0]), (2, 1, 3)),
                   lambda i: i[0].astype(np.float64).sum(axis=1, keepdims=True).astype(np.float32), 0.0),
    "reduce_max": ([(2, 5, 3)], lambda g, i: (g.op("REDUCE_MAX", (2, 5, 1), g.u32(2), g.u32(1), i[0]), (2, 5, 1)),
                   lambda i: i[0].max(axis=2, keepdims=True), 0.0),
    "reduce_min": ([(2, 5, 3)], lambda g, i: (g.op("REDUCE_MIN", (1, 5, 3), g.u32(0), g.u32(1), i[0]), (1, 5, 3)),
                   lambda i: i[0].min(axis=0, keepdims=True), 0.0),
    "reduce_product": ([(2, 5, 3)], lambda g, i: (g.op("REDUCE_PRODUCT", (2, 5, 1), g.u32(2), i[0]), (2, 5, 1)),
                       lambda i: i[0].astype(np.float64).prod(axis=2, keepdims=True).astype(np.float32), 0.0),
    "matmul": _matmul(),
    "conv2d_1x1": _conv(0, 1, k=1),
    "conv2d_3x3_same": _conv(2, 1),
    "conv2d_3x3_stride2": _conv(0, 2),
    "conv2d_fp16_accumulator": _conv(2, 1, acc=2),
    "depthwise_conv2d": _depthwise(),
    "avg_pool2d_padded": _pool("AVG_POOL2D", 3, 2, [1, 1, 1, 1]),
    "max_pool2d_padded": _pool("MAX_POOL2D", 2, 2, [0, 1, 0, 1]),
    "sample_graph_constants_conv": _sample_conv(),
    "network": _network(),   # last: its pipeline's creation log is read
}
# Positive inputs where the operator needs them (reciprocal of 0 is infinite in both, but not a useful test).
POSITIVE = {"reciprocal", "log", "rsqrt", "pow"}


def case_inputs(name: str) -> list[np.ndarray]:
    shapes = CASES[name][0]
    arrays = _inputs(name, shapes)
    return [np.abs(a) + 0.25 for a in arrays] if name in POSITIVE else arrays


def expected(name: str) -> np.ndarray:
    return CASES[name][2](case_inputs(name))


# An int8 graph whose RESCALE multipliers and shifts are graph constants (VkDataGraphPipelineConstantARM with int32
# and int8 descriptions), the structure of Arm's emulation-layer test graph: each int8 input rescaled to int32,
# added, rescaled (DOUBLE_ROUND, shift 33) to int8. Written here as SPIR-V assembly.
QUANTIZED_GRAPH = """OpCapability Shader
OpCapability Int8
OpCapability TensorsARM
OpCapability GraphARM
OpCapability VulkanMemoryModel
OpExtension "SPV_ARM_tensors"
OpExtension "SPV_ARM_graph"
OpExtension "SPV_KHR_vulkan_memory_model"
%tosa = OpExtInstImport "TOSA.001000.1"
OpMemoryModel Logical Vulkan
OpDecorate %in0 DescriptorSet 0
OpDecorate %in0 Binding 0
OpDecorate %in1 DescriptorSet 0
OpDecorate %in1 Binding 1
OpDecorate %out DescriptorSet 0
OpDecorate %out Binding 2
%char = OpTypeInt 8 0
%uint = OpTypeInt 32 0
%bool = OpTypeBool
%true = OpConstantTrue %bool
%false = OpConstantFalse %bool
%u0 = OpConstant %uint 0
%u1 = OpConstant %uint 1
%u3 = OpConstant %uint 3
%u7 = OpConstant %uint 7
%arr1 = OpTypeArray %uint %u1
%shape7 = OpConstantComposite %arr1 %u7
%shape1 = OpConstantComposite %arr1 %u1
%T8 = OpTypeTensorARM %char %u1 %shape7
%T32 = OpTypeTensorARM %uint %u1 %shape7
%S32 = OpTypeTensorARM %uint %u1 %shape1
%S8 = OpTypeTensorARM %char %u1 %shape1
%pT8 = OpTypePointer UniformConstant %T8
%in0 = OpVariable %pT8 UniformConstant
%in1 = OpVariable %pT8 UniformConstant
%out = OpVariable %pT8 UniformConstant
%m0 = OpGraphConstantARM %S32 0
%s0 = OpGraphConstantARM %S8 1
%m1 = OpGraphConstantARM %S32 2
%s1 = OpGraphConstantARM %S8 3
%m2 = OpGraphConstantARM %S32 4
%s2 = OpGraphConstantARM %S8 5
%zp8 = OpConstantNull %S8
%zp32 = OpConstantNull %S32
%G = OpTypeGraphARM 2 %T8 %T8 %T8
OpGraphEntryPointARM %g "main" %in0 %in1 %out
%g = OpGraphARM %G
%a = OpGraphInputARM %T8 %u0
%b = OpGraphInputARM %T8 %u1
%ra = OpExtInst %T32 %tosa RESCALE %true %u1 %false %false %false %a %m0 %s0 %zp8 %zp32
%rb = OpExtInst %T32 %tosa RESCALE %true %u1 %false %false %false %b %m1 %s1 %zp8 %zp32
%sum = OpExtInst %T32 %tosa ADD %ra %rb
%r = OpExtInst %T8 %tosa RESCALE %true %u3 %false %false %false %sum %m2 %s2 %zp32 %zp8
OpGraphSetOutputARM %r %u0
OpGraphEndARM
"""
QUANTIZED_CONSTANTS = {0: np.array([1 << 30], np.int32), 1: np.array([30], np.int8),
                       2: np.array([1610612736], np.int32), 3: np.array([30], np.int8),
                       4: np.array([1 << 30], np.int32), 5: np.array([33], np.int8)}
QUANTIZED_INPUTS = [np.array([-128, -7, -3, 0, 5, 100, 127], np.int8), np.array([127, 9, -2, 1, -5, 90, 127], np.int8)]


def _apply_scale(value: int, multiplier: int, shift: int, double_round: bool) -> int:
    """TOSA 1.0 apply_scale_32 in Python integers (>> is arithmetic)."""
    rounding = 1 << (shift - 1)
    if double_round and shift > 31:
        rounding += (1 << 30) if value >= 0 else -(1 << 30)
    return (value * multiplier + rounding) >> shift


def quantized_expected() -> list[int]:
    c = {k: int(v[0]) for k, v in QUANTIZED_CONSTANTS.items()}
    return [max(-128, min(127, _apply_scale(_apply_scale(int(a), c[0], c[1], False)
                                            + _apply_scale(int(b), c[2], c[3], False), c[4], c[5], True)))
            for a, b in zip(*QUANTIZED_INPUTS)]


# ---- the application ------------------------------------------------------------------------------
def _app() -> None:
    sys.path[:0] = [str(REPO / "examples")]
    import vulkan as vk

    import vkapp
    import vkgraphs as vg
    import vktensors as vt

    F32 = vk.VK_FORMAT_R32_SFLOAT
    usage = vt.USAGE_ALL | vg.USAGE_DATA_GRAPH
    out: dict = {"cases": {}, "refused": {}}

    def body(ctx):
        t = vt.Tensors(ctx)
        dg = vg.DataGraphs(ctx, t)
        pool = ctx.descriptor_pool({vt.DESCRIPTOR_TYPE_TENSOR: 256}, max_sets=64)
        layouts = {}

        def graph_layout(n):
            if n not in layouts:
                sl = t.set_layout([(b, vt.DESCRIPTOR_TYPE_TENSOR, 1) for b in range(n)], stages=0x7FFFFFFF)
                layouts[n] = (sl, ctx.pipeline_layout([sl]))
            return layouts[n]

        def build(name):
            spec = CASES[name]
            shapes, builder = spec[0], spec[1]
            constants = spec[4] if len(spec) > 4 else None
            g = vg.GraphAsm()
            ins = [g.input(s) for s in shapes]
            value, shape = builder(g, ins)
            g.output(value, shape)
            return g.assemble(), shapes, shape, constants

        def run(name, cmd_before=None, cmd_after=None):
            code, shapes, shape, constants = build(name)
            sl, pl = graph_layout(len(shapes) + 1)
            resources = [(0, b, s) for b, s in enumerate([*shapes, shape])]
            p = dg.pipeline(code, pl, resources, constants)
            s = dg.session(p)
            tin = [t.tensor(F32, a.shape, usage=usage, data=a) for a in case_inputs(name)]
            tout = t.tensor(F32, shape, usage=usage)
            dset = ctx.allocate_set(pool, sl)
            t.write_tensors(dset, [(b, [x]) for b, x in enumerate([*tin, tout])])
            cmd = ctx.command_buffer()
            keep = cmd_before(cmd) if cmd_before else None
            keep2 = dg.cmd_run(cmd, p, pl, dset, s)
            keep3 = cmd_after(cmd) if cmd_after else None
            vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT)
            ctx.submit([cmd])
            del keep, keep2, keep3
            return tout.array().copy(), p

        for name in CASES:
            result, p = run(name)
            out["cases"][name] = result.ravel().tolist()
        out["log"] = dg.log(p)

        # the application's compute bindings (pipeline, set, push constant) survive a data-graph dispatch
        values = np.arange(1, 65, dtype=np.uint32)
        src = ctx.buffer(values.nbytes, vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, values)
        dst = ctx.buffer(values.nbytes, vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT)
        csl = ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, vk.VK_SHADER_STAGE_COMPUTE_BIT),
                              (1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, vk.VK_SHADER_STAGE_COMPUTE_BIT)])
        cpl = ctx.pipeline_layout([csl], push_size=4, push_stages=vk.VK_SHADER_STAGE_COMPUTE_BIT)
        cpool = ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER: 2}, max_sets=1)
        cset = ctx.allocate_set(cpool, csl)
        ctx.write_storage_buffers(cset, [(0, src, 0, values.nbytes), (1, dst, 0, values.nbytes)])
        collatz = ctx.compute_pipeline("collatz.comp", cpl, spec={0: 64})

        def bind_compute(cmd):
            vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, collatz)
            vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, cpl, 0, 1, [cset], 0, None)
            count = vk.ffi.new("uint32_t[1]", [40])
            vk.vkCmdPushConstants(cmd, cpl, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, count)
            return count

        def dispatch_compute(cmd):
            vkapp.memory_barrier(cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT,
                                 vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_READ_BIT)
            vk.vkCmdDispatch(cmd, 1, 1, 1)   # no rebinding: the state bound before the graph
        result, _ = run("conv2d_3x3_same", bind_compute, dispatch_compute)
        out["with_compute"] = {"graph": result.ravel().tolist(), "steps": dst.array(np.uint32).tolist()}

        # ordering in one command buffer: tensor copy -> barrier -> graph -> barrier -> tensor copy, the barriers
        # naming the data-graph stage and accesses (synchronization2 with VkTensorMemoryBarrierARM)
        code, shapes, shape, _ = build("sigmoid")
        sl, pl = graph_layout(2)
        p = dg.pipeline(code, pl, [(0, 0, shapes[0]), (0, 1, shape)])
        s = dg.session(p)
        a = case_inputs("sigmoid")[0]
        staging = t.tensor(F32, a.shape, usage=usage, data=a)
        tin, tout, result = (t.tensor(F32, a.shape, usage=usage) for _ in range(3))
        dset = ctx.allocate_set(pool, sl)
        t.write_tensors(dset, [(0, [tin]), (1, [tout])])
        graph_stage, graph_read, graph_write = 1 << 42, 1 << 47, 1 << 48
        transfer = vk.VK_PIPELINE_STAGE_TRANSFER_BIT
        cmd = ctx.command_buffer()
        keep = [t.cmd_copy(cmd, staging, tin)]
        t.cmd_tensor_barrier(cmd, tin, transfer, vk.VK_ACCESS_TRANSFER_WRITE_BIT, graph_stage, graph_read)
        keep.append(dg.cmd_run(cmd, p, pl, dset, s))
        t.cmd_tensor_barrier(cmd, tout, graph_stage, graph_write, transfer, vk.VK_ACCESS_TRANSFER_READ_BIT)
        keep.append(t.cmd_copy(cmd, tout, result))
        vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT)
        ctx.submit([cmd])
        del keep
        out["ordered"] = result.array().ravel().tolist()

        # compute shader -> graph -> compute shader on the same tensors (the pattern of Arm's public
        # compute_shaders_with_tensors sample): a tensor-reading/writing layer (examples/mlp_tensors.py's shader,
        # no relu) writes h, a barrier (compute write -> data-graph read), the graph clamps h into g, a barrier
        # (data-graph write -> compute read), the second layer reads g
        import mlp_tensors

        rng = np.random.default_rng(30)
        small = lambda *shape: (rng.integers(-8, 9, size=shape) / 8).astype(np.float32)  # noqa: E731
        x, w1, b1, w2, b2 = small(8, 16), small(16, 32), small(32), small(32, 4), small(4)
        tx, tw1, tb1, tw2, tb2 = (t.tensor(F32, a.shape, usage=usage, data=a) for a in (x, w1, b1, w2, b2))
        th, tg, ty = t.tensor(F32, (8, 32), usage=usage), t.tensor(F32, (8, 32), usage=usage), \
            t.tensor(F32, (8, 4), usage=usage)
        lsl = t.set_layout([(b, vt.DESCRIPTOR_TYPE_TENSOR, 1) for b in range(4)])
        lpl = ctx.pipeline_layout([lsl])
        layer = t.compute_pipeline(vt.assemble(mlp_tensors.layer_shader(relu=False)), lpl)
        set1, set2 = ctx.allocate_set(pool, lsl), ctx.allocate_set(pool, lsl)
        t.write_tensors(set1, [(0, [tx]), (1, [tw1]), (2, [tb1]), (3, [th])])
        t.write_tensors(set2, [(0, [tg]), (1, [tw2]), (2, [tb2]), (3, [ty])])
        g = vg.GraphAsm()
        h = g.input((8, 32))
        g.output(g.op("CLAMP", (8, 32), g.f32(-0.5), g.f32(0.75), g.u32(1), h), (8, 32))
        sl, pl = graph_layout(2)
        p = dg.pipeline(g.assemble(), pl, [(0, 0, (8, 32)), (0, 1, (8, 32))])
        s = dg.session(p)
        gset = ctx.allocate_set(pool, sl)
        t.write_tensors(gset, [(0, [th]), (1, [tg])])
        compute_stage, shader_write, shader_read = vk.VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT, \
            vk.VK_ACCESS_2_SHADER_WRITE_BIT, vk.VK_ACCESS_2_SHADER_READ_BIT
        cmd = ctx.command_buffer()
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layer)
        vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, lpl, 0, 1, [set1], 0, None)
        vk.vkCmdDispatch(cmd, 8 * 32 // mlp_tensors.LOCAL, 1, 1)
        t.cmd_tensor_barrier(cmd, th, compute_stage, shader_write, graph_stage, graph_read)
        keep = [dg.cmd_run(cmd, p, pl, gset, s)]
        t.cmd_tensor_barrier(cmd, tg, graph_stage, graph_write, compute_stage, shader_read)
        vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, lpl, 0, 1, [set2], 0, None)
        vk.vkCmdDispatch(cmd, 1, 1, 1)
        vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT)
        ctx.submit([cmd])
        del keep
        out["compute_graph_compute"] = {"inputs": [a.tolist() for a in (x, w1, b1, w2, b2)],
                                        "y": ty.array().tolist()}

        # an int8 graph with RESCALE scales from int32 / int8 graph constants
        i8 = vk.VK_FORMAT_R8_SINT
        sl, pl = graph_layout(3)
        p = dg.pipeline(vt.assemble(QUANTIZED_GRAPH, env="vulkan1.3"), pl,
                        [(0, b, (7,), i8) for b in range(3)], QUANTIZED_CONSTANTS)
        s = dg.session(p)
        qa, qb = (t.tensor(i8, (7,), usage=usage, data=a) for a in QUANTIZED_INPUTS)
        qout = t.tensor(i8, (7,), usage=usage)
        dset = ctx.allocate_set(pool, sl)
        t.write_tensors(dset, [(0, [qa]), (1, [qb]), (2, [qout])])
        cmd = ctx.command_buffer()
        keep = dg.cmd_run(cmd, p, pl, dset, s)
        vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT)
        ctx.submit([cmd])
        del keep
        out["quantized_graph_constants"] = qout.array().tolist()
        bad = {**QUANTIZED_CONSTANTS, 5: np.array([70], np.int8)}
        out["refused"]["shift_out_of_range"] = dg.try_pipeline(vt.assemble(QUANTIZED_GRAPH, env="vulkan1.3"), pl,
                                                              [(0, b, (7,), i8) for b in range(3)], bad)[0]
        out["refused"]["int8_graph_fp32_resources"] = dg.try_pipeline(
            vt.assemble(QUANTIZED_GRAPH, env="vulkan1.3"), pl, [(0, b, (7,)) for b in range(3)], QUANTIZED_CONSTANTS)[0]

        # refusals
        def refused_pipeline(key, name, mutate=None, constants=None, resources=None):
            code, shapes, shape, consts = build(name)
            sl, pl = graph_layout(len(shapes) + 1)
            res = resources or [(0, b, s) for b, s in enumerate([*shapes, shape])]
            out["refused"][key] = dg.try_pipeline(code, pl, res, consts if constants is None else constants)[0]

        g = vg.GraphAsm()
        x = g.input((2, 3))
        g.output(g.op("ERF", (2, 3), x), (2, 3))
        sl, pl = graph_layout(2)
        out["refused"]["unsupported_operator"] = dg.try_pipeline(g.assemble(), pl, [(0, 0, (2, 3)), (0, 1, (2, 3))])[0]
        refused_pipeline("wrong_resource_shape", "abs", resources=[(0, 0, (2, 3, 4)), (0, 1, (3, 2, 4))])
        refused_pipeline("missing_resource", "abs", resources=[(0, 0, (2, 3, 4))])
        refused_pipeline("missing_constant", "conv2d_1x1", constants={7: W3})
        out["refused"]["wrong_entry"] = dg.try_pipeline(build("abs")[0], pl, [], None, entry="nope")[0]
        out["refused"]["session_of_unknown_pipeline"] = dg.try_session(0x1234)[0]

        # a dispatch whose session memory is not bound records nothing
        code, shapes, shape, _ = build("abs")
        sl, pl = graph_layout(2)
        p = dg.pipeline(code, pl, [(0, 0, shapes[0]), (0, 1, shape)])
        s = dg.session(p, bind=False)
        a = case_inputs("abs")[0]
        tin, tout = t.tensor(F32, a.shape, usage=usage, data=a), t.tensor(F32, shape, usage=usage)
        tout.array()[...] = 7
        dset = ctx.allocate_set(pool, sl)
        t.write_tensors(dset, [(0, [tin]), (1, [tout])])
        cmd = ctx.command_buffer()
        keep = dg.cmd_run(cmd, p, pl, dset, s)
        ctx.submit([cmd])
        del keep
        out["unbound_session_output"] = sorted(set(tout.array().ravel().tolist()))

        # misuse at record time: each dispatch below is refused and records nothing (the output keeps its 7s)
        p2 = dg.pipeline(code, pl, [(0, 0, shapes[0]), (0, 1, shape)])
        s_bound = dg.session(p)
        plain = t.tensor(F32, a.shape, usage=vt.USAGE_ALL, data=a)          # no DATA_GRAPH usage
        dset_plain = ctx.allocate_set(pool, sl)
        t.write_tensors(dset_plain, [(0, [plain]), (1, [tout])])
        sets = vg.ctypes.c_uint64 * 1

        def record(fn):
            cmd = ctx.command_buffer()
            keep = fn(vt.handle(cmd))
            ctx.submit([cmd])
            del keep
            return sorted(set(tout.array().ravel().tolist()))

        def no_pipeline(c):
            arr = sets(vt.handle(dset))
            dg.bind_sets(c, vg.BIND_POINT_DATA_GRAPH, vt.handle(pl), 0, 1, vg.ctypes.addressof(arr), 0, None)
            dg.dispatch(c, s_bound, None)
            return arr

        def other_pipeline(c):
            arr = sets(vt.handle(dset))
            dg.bind_pipeline(c, vg.BIND_POINT_DATA_GRAPH, p2)
            dg.bind_sets(c, vg.BIND_POINT_DATA_GRAPH, vt.handle(pl), 0, 1, vg.ctypes.addressof(arr), 0, None)
            dg.dispatch(c, s_bound, None)
            return arr

        def not_a_graph(c):
            dg.bind_pipeline(c, vg.BIND_POINT_DATA_GRAPH, vt.handle(collatz))
            dg.dispatch(c, s_bound, None)

        def no_data_graph_usage(c):
            arr = sets(vt.handle(dset_plain))
            dg.bind_pipeline(c, vg.BIND_POINT_DATA_GRAPH, p)
            dg.bind_sets(c, vg.BIND_POINT_DATA_GRAPH, vt.handle(pl), 0, 1, vg.ctypes.addressof(arr), 0, None)
            dg.dispatch(c, s_bound, None)
            return arr
        out["refused_dispatches"] = {f.__name__: record(f) for f in (no_pipeline, other_pipeline, not_a_graph,
                                                                   no_data_graph_usage)}
        bind = vg.BindSessionMemoryInfo(sType=vg.ST_BIND_SESSION_MEMORY_INFO, session=s, bindPoint=5)
        out["refused"]["wrong_bind_point"] = dg.bind_memory(t.device, 1, bind.ptr())
        protected = vg.SessionCreateInfo(sType=vg.ST_SESSION_CREATE_INFO, flags=1, dataGraphPipeline=p)
        handle = vg.u64(0)
        out["refused"]["protected_session"] = dg.create_session(t.device, protected.ptr(), None, vg.ctypes.byref(handle))

        # physical-device answers
        families = vk.vkGetPhysicalDeviceQueueFamilyProperties(ctx.physical_device)
        out["family_flags"] = [f.queueFlags for f in families]
        count = vg.u32(0)
        dg.family_properties(vt.handle(ctx.physical_device), ctx.queue_family, vg.ctypes.byref(count), None)
        props = (vg.QueueFamilyDataGraphProperties * count.value)(
            *[vg.QueueFamilyDataGraphProperties(sType=vg.ST_QUEUE_FAMILY_DATA_GRAPH_PROPERTIES)] * count.value)
        dg.family_properties(vt.handle(ctx.physical_device), ctx.queue_family, vg.ctypes.byref(count),
                             vg.ctypes.addressof(props))
        out["engines"] = [[p.engineType, p.isForeign, p.operationType, p.name.decode(), p.version] for p in props]
        tosa = vg.TosaProperties(sType=vg.ST_TOSA_PROPERTIES)
        r = dg.tosa_properties(vt.handle(ctx.physical_device), ctx.queue_family, vg.ctypes.addressof(props[0]),
                               tosa.ptr())
        names = (vg.TosaNameQuality * tosa.profileCount).from_address(tosa.pProfiles)
        out["tosa"] = [r, [n.name.decode() for n in names], tosa.level]
        out["format_features"] = list(t.format_features(F32))
        out["integer_format_features"] = [list(t.format_features(f)) for f in (
            vk.VK_FORMAT_R8_SINT, vk.VK_FORMAT_R8_UINT, vk.VK_FORMAT_R16_SINT, vk.VK_FORMAT_R32_SINT)]
        out["other_format_features"] = list(t.format_features(vk.VK_FORMAT_R64_SINT))
        dg.close()
        t.close()

        # a device with dataGraph but without dataGraphShaderModule: no pipeline from a SPIR-V module
        dgf = vg.DataGraphFeatures(sType=vg.ST_FEATURES, dataGraph=1, dataGraphShaderModule=0)
        tf = vt.TensorFeatures(sType=vt.ST_TENSOR_FEATURES, tensors=1, pNext=dgf.ptr())
        ctx2 = vkapp.Context(ctx.settings, "data_graph_no_module", optional_device_extensions=vg.EXTENSIONS,
                             device_features=vk.ffi.cast("void *", tf.ptr()))
        t2 = vt.Tensors(ctx2)
        dg2 = vg.DataGraphs(ctx2, t2)
        sl2 = t2.set_layout([(0, vt.DESCRIPTOR_TYPE_TENSOR, 1), (1, vt.DESCRIPTOR_TYPE_TENSOR, 1)], stages=0x7FFFFFFF)
        pl2 = ctx2.pipeline_layout([sl2])
        out["refused"]["without_shader_module_feature"] = dg2.try_pipeline(code, pl2, [(0, 0, shapes[0]),
                                                                                      (0, 1, shape)])[0]
        dg2.close()
        t2.close()
        ctx2.close()
        return "data graph cases ran"

    feats, keep = vg.device_features()
    vkapp.run_main("data_graph_ops", lambda ctx: (body(ctx), print(json.dumps(out)))[0],
                   optional_device_extensions=vg.EXTENSIONS, device_features=feats)


if __name__ == "__main__":
    _app()
    sys.exit(0)


# ---- the tests ------------------------------------------------------------------------------------
import pytest  # noqa: E402

VALIDATION_FAILED = -1000011001


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    import subprocess

    from tessera.tools.launch import LaunchConfig, environment
    from tessera.vkapi import paths

    if not (paths.BUILD_DIR / "libtessera_mali_icd.so").exists():
        pytest.fail("the shims are not built: `make shims`")
    session = tmp_path_factory.mktemp("data-graph") / "session"
    env = environment(LaunchConfig(session))
    env["TESSERA_LOG"] = "info"
    out = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True, timeout=600,
                         cwd=REPO)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-6000:]
    line = next(line for line in out.stdout.splitlines() if line.startswith("{"))
    data = json.loads(line)
    data["stderr"] = out.stderr
    data["session"] = session
    return data


@pytest.mark.parametrize("name", sorted(CASES))
def test_operator_equals_numpy(ran, name):
    want = expected(name)
    got = np.array(ran["cases"][name], np.float32).reshape(want.shape)
    tolerance = CASES[name][3]
    if tolerance == 0:
        assert np.array_equal(got, want), f"{name}: {got} != {want}"
    else:
        assert np.allclose(got, want, rtol=tolerance, atol=tolerance), \
            f"{name}: max difference {np.max(np.abs(got.astype(np.float64) - want))}"
    assert np.any(want != 0)


def test_the_applications_compute_bindings_survive_a_dispatch(ran):
    def collatz(v):
        steps = 0
        while v > 1 and steps < 1000:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            steps += 1
        return steps
    got = ran["with_compute"]
    want = expected("conv2d_3x3_same")
    assert np.allclose(np.array(got["graph"]).reshape(want.shape), want, atol=1e-5)
    steps = got["steps"]
    # the pushed count (40) and both descriptor-set bindings were still the application's
    want_steps = [collatz(v) + (1000 if collatz(v) > 20 else 0) for v in range(1, 41)]
    assert steps[:40] == want_steps
    assert steps[40:] == [0] * 24


def test_copies_barriers_and_a_graph_in_one_command_buffer_keep_their_order(ran):
    want = expected("sigmoid")
    assert np.allclose(np.array(ran["ordered"]).reshape(want.shape), want, rtol=1e-6, atol=1e-6)


def test_compute_shader_graph_compute_shader_on_shared_tensors(ran):
    """A tensor-writing compute shader, the graph and a tensor-reading compute shader, ordered by tensor barriers
    naming the data-graph stage, give numpy's clip(x·W1 + b1, -0.5, 0.75)·W2 + b2 exactly."""
    x, w1, b1, w2, b2 = (np.array(a, np.float32) for a in ran["compute_graph_compute"]["inputs"])
    want = (np.clip(x @ w1 + b1, -0.5, 0.75) @ w2 + b2).astype(np.float32)
    assert np.array_equal(np.array(ran["compute_graph_compute"]["y"], np.float32), want)
    assert np.any(np.clip(x @ w1 + b1, -0.5, 0.75) != x @ w1 + b1)      # the graph changed something


def test_int8_graph_with_rescale_scales_from_graph_constants(ran):
    """int8 tensors, RESCALE multipliers and shifts from int32 / int8 graph constants, equal to TOSA 1.0's
    apply_scale computed in Python integers (DOUBLE_ROUND on a shift of 33)."""
    want = quantized_expected()
    assert ran["quantized_graph_constants"] == want
    assert len(set(want)) >= 5


def test_pipeline_creation_log_lists_the_operators(ran):
    assert ran["log"].startswith("Tessera emulated Mali: graph 'main', 6 operators as 6 compute kernels")
    for op in ("CONV2D 1x6x6x4", "CLAMP", "MAX_POOL2D 1x3x3x4", "RESHAPE", "MATMUL 1x1x3", "SIGMOID"):
        assert op in ran["log"]


@pytest.mark.parametrize("key, message", [
    ("unsupported_operator", "TOSA operator ERF is not supported by the emulated Mali"),
    ("wrong_resource_shape", "dimensions [3, 2, 4] differ from the graph's output 0 ([2, 3, 4])"),
    ("missing_resource", "the graph's output 0 (set 0, binding 1) has no VkDataGraphPipelineResourceInfoARM"),
    ("missing_constant", "the graph uses constant id 0"),
    ("wrong_entry", "no graph entry point (OpGraphEntryPointARM) named 'nope'"),
    ("session_of_unknown_pipeline", "is not a data-graph pipeline of this device"),
    ("without_shader_module_feature", "needs the dataGraphShaderModule feature"),
    ("shift_out_of_range", "RESCALE: shift 70 must be within 2..62"),
    ("int8_graph_fp32_resources",
     "format 100 is not VK_FORMAT_R8_SINT or VK_FORMAT_R8_UINT (the graph's input 0 is 7 int8)"),
])
def test_misuse_is_refused_with_a_clear_message(ran, key, message):
    assert ran["refused"][key] == VALIDATION_FAILED
    assert message in ran["stderr"], ran["stderr"][-3000:]


@pytest.mark.parametrize("case, message", [
    ("no_pipeline", "no data-graph pipeline is bound"),
    ("other_pipeline", "the session was created for another data-graph pipeline than the one bound"),
    ("not_a_graph", "vkCmdBindPipeline: VK_PIPELINE_BIND_POINT_DATA_GRAPH_ARM: pipeline"),
    ("no_data_graph_usage", "was not created with VK_TENSOR_USAGE_DATA_GRAPH_BIT_ARM"),
])
def test_misused_dispatch_is_refused_and_records_nothing(ran, case, message):
    assert ran["refused_dispatches"][case] == [7.0]
    assert message in ran["stderr"]


@pytest.mark.parametrize("key, message", [
    ("wrong_bind_point", "bindPoint 5 is not one of the session's bind points (TRANSIENT)"),
    ("protected_session", "VK_DATA_GRAPH_PIPELINE_SESSION_CREATE_PROTECTED_BIT_ARM: the device has no protected"),
])
def test_session_misuse_is_refused(ran, key, message):
    assert ran["refused"][key] == VALIDATION_FAILED
    assert message in ran["stderr"]


def test_dispatch_with_unbound_session_memory_records_nothing(ran):
    assert ran["unbound_session_output"] == [7.0]
    assert "the session's TRANSIENT bind point is not bound to memory" in ran["stderr"]


def test_physical_device_answers(ran):
    assert all(f & 0x400 for f in ran["family_flags"] if f & 0x2)     # DATA_GRAPH on every compute family
    assert ran["engines"] == [[0, 0, 0, "TOSA.001000.1", 0x01000001]]
    assert ran["tosa"] == [0, ["PRO-FP", "PRO-INT"], 1]
    assert all(f & (1 << 48) for f in ran["format_features"])       # TENSOR_DATA_GRAPH for R32_SFLOAT
    # and for the integer formats of quantized graphs (icd/data_graph/quantized.py), not for 64-bit ones
    assert all(f & (1 << 48) for features in ran["integer_format_features"] for f in features)
    assert not any(f & (1 << 48) for f in ran["other_format_features"])



def test_the_conv_net_example_equals_numpy_and_is_one_data_graph_workload(tmp_path):
    """examples/conv_net_graph.py (make demo) checks its scores against numpy itself; under `tessera run` its
    session has one tagged data-graph workload whose report lists the network's operators."""
    import re
    import subprocess

    tessera = REPO / ".venv" / "bin" / "tessera"
    out = subprocess.run([str(tessera), "run", "--out", str(tmp_path / "session"), "--", sys.executable,
                          str(REPO / "examples" / "conv_net_graph.py")], capture_output=True, text=True, timeout=600,
                         cwd=REPO)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "conv_net_graph: OK 2 images 8x8x3 through 10 TOSA operators" in out.stdout
    assert re.search(r"^\s+data graph\s+1$", out.stdout, re.M), out.stdout
    for op, n in (("CONV2D", 2), ("CLAMP", 2), ("MAX_POOL2D", 1), ("AVG_POOL2D", 1), ("RESHAPE", 1), ("MATMUL", 1),
                  ("ADD", 1), ("SIGMOID", 1)):
        assert re.search(rf"^\s+{op}\s+{n}\s", out.stdout, re.M), out.stdout
