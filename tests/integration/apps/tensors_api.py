"""VK_ARM_tensors used directly by an application (issue #14), every result checked by the test.

Run: .venv/bin/python tests/integration/apps/tensors_api.py  (on the emulated Mali: under
`tessera run`, or with the tessera_env of the tests). Prints one JSON line (the last but one
line of stdout) with what the test compares against numpy:

- properties, tensor format features, the device memory requirements of a create info;
- copies: for ranks 1..8 a packed source into a non-packed (padded) destination (whole tensor,
  NULL regions), then a multi-region copy with offsets; each destination read back;
- shaders: for ranks 1..8 the elementwise shader of tensor_shaders.py (float, OutOfBoundsValue,
  destination larger than the source in every dimension, non-packed source), arrays of 4
  elements without the operand, bool tensors (negated, with and without the operand), uint8;
  a tensor memory barrier between the copy and the dispatch that reads it;
- invalid usage: the VkResult of each refused create (OPTIMAL with strides, innermost stride
  not the element size, rank 9, a non-packed layout on a device without tensorNonPacked,
  strides out of order), a copy out of range and a tensor descriptor written to a storage
  binding, which must be skipped with a message (stderr).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import vulkan as vk

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[2] / "examples")]
import tensor_shaders as shaders  # noqa: E402
import vkapp  # noqa: E402
import vktensors as vt  # noqa: E402

F32, U8, BOOL = vk.VK_FORMAT_R32_SFLOAT, vk.VK_FORMAT_R8_UINT, vt.FORMAT_R8_BOOL
RNG = np.random.default_rng(14)
# Shapes per rank (product kept small: lavapipe runs every invocation on the CPU).
SHAPES = {1: (37,), 2: (5, 9), 3: (3, 4, 7), 4: (2, 3, 4, 5), 5: (2, 2, 3, 2, 5), 6: (2, 1, 3, 2, 2, 3),
          7: (1, 2, 2, 3, 1, 2, 3), 8: (2, 1, 2, 2, 1, 2, 3, 2)}


def padded_strides(shape, element: int) -> tuple[int, ...]:
    """Non-packed strides: each dimension padded by one element (innermost stays contiguous)."""
    out, stride = [], element
    for d in reversed(shape):
        out.append(stride)
        stride *= d + 1
    return tuple(reversed(out))


def values(shape, fmt: int) -> np.ndarray:
    if fmt == F32:
        return RNG.integers(-1000, 1000, size=shape).astype(np.float32) / 8
    if fmt == BOOL:
        return RNG.integers(0, 2, size=shape).astype(np.uint8)
    return RNG.integers(0, 250, size=shape).astype(np.uint8)


class Runner:
    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.t = vt.Tensors(ctx)
        self.layout = self.t.set_layout([(0, vt.DESCRIPTOR_TYPE_TENSOR, 1), (1, vt.DESCRIPTOR_TYPE_TENSOR, 1)])
        self.pipeline_layout = ctx.pipeline_layout([self.layout])
        self.pool = ctx.descriptor_pool({vt.DESCRIPTOR_TYPE_TENSOR: 128}, max_sets=64)
        self.pipelines: dict[str, object] = {}

    def submit(self, record) -> None:
        cmd = self.ctx.command_buffer()
        keep = record(cmd)
        vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                           vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT)
        self.ctx.submit([cmd])
        del keep

    def dispatch(self, asm: str, src, dst, before=None) -> None:
        pipeline = self.pipelines.get(asm)
        if pipeline is None:
            pipeline = self.pipelines[asm] = self.t.compute_pipeline(vt.assemble(asm), self.pipeline_layout)
        dset = self.ctx.allocate_set(self.pool, self.layout)
        self.t.write_tensors(dset, [(0, [src]), (1, [dst])])
        groups = (shaders.invocations(dst.dims, self.array_of(asm)) + shaders.LOCAL - 1) // shaders.LOCAL

        def record(cmd):
            keep = before(cmd) if before else None
            vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
            vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, self.pipeline_layout, 0, 1, [dset],
                                       0, None)
            vk.vkCmdDispatch(cmd, groups, 1, 1)
            return keep
        self.submit(record)

    @staticmethod
    def array_of(asm: str) -> int:
        for line in asm.splitlines():
            if line.startswith("%RT = OpTypeArray"):
                return int(line.rsplit("%c", 1)[1])
        return 1


def queries(r: Runner) -> dict:
    p = r.t.properties()
    info, keep = r.t.create_info(F32, (4, 5, 6))
    reqs = vt.MemoryRequirements2(sType=vt.ST_MEMORY_REQUIREMENTS_2)
    dinfo = vt.DeviceTensorMemoryRequirements(sType=vt.ST_DEVICE_TENSOR_MEMORY_REQUIREMENTS, pCreateInfo=info.ptr())
    r.t.device_requirements(r.t.device, dinfo.ptr(), reqs.ptr())
    return {"maxTensorDimensionCount": p.maxTensorDimensionCount, "maxTensorElements": p.maxTensorElements,
            "shaderTensorSupportedStages": p.shaderTensorSupportedStages,
            "features_f32": list(r.t.format_features(F32)), "features_bool": list(r.t.format_features(BOOL)),
            "features_rgba8": list(r.t.format_features(vk.VK_FORMAT_R8G8B8A8_UNORM)),
            "device_requirements_size": reqs.size}


def copies(r: Runner) -> dict:
    out = {}
    for rank, shape in SHAPES.items():
        data = values(shape, F32)
        src = r.t.tensor(F32, shape, data=data)
        dst = r.t.tensor(F32, shape, strides=padded_strides(shape, 4))
        r.submit(lambda cmd: r.t.cmd_copy(cmd, src, dst))
        out[rank] = {"ok": bool(np.array_equal(dst.array(), data)), "shape": list(shape)}
    # several regions with offsets, between a packed and a non-packed rank-3 tensor
    shape_s, shape_d = (6, 5, 8), (7, 6, 9)
    data = values(shape_s, F32)
    src = r.t.tensor(F32, shape_s, data=data)
    dst = r.t.tensor(F32, shape_d, strides=padded_strides(shape_d, 4))
    regions = [((0, 0, 0), (0, 0, 0), (2, 3, 4)), ((3, 1, 2), (2, 0, 0), (3, 4, 6)), ((5, 4, 7), (6, 5, 8), (1, 1, 1)),
               ((1, 0, 0), (5, 1, 1), (1, 5, 8))]   # destinations do not overlap
    r.submit(lambda cmd: r.t.cmd_copy(cmd, src, dst, regions))
    want = np.zeros(shape_d, dtype=np.float32)
    for so, do, ex in regions:
        want[tuple(slice(o, o + e) for o, e in zip(do, ex))] = data[tuple(slice(o, o + e) for o, e in zip(so, ex))]
    out["regions"] = {"ok": bool(np.array_equal(dst.array(), want)), "nonzero": int(np.count_nonzero(want))}
    return out


def shader_cases(r: Runner) -> dict:
    out = {}
    for rank, shape in SHAPES.items():
        dst_shape = tuple(d + 1 for d in shape)    # every dimension reaches out of the source
        for name, fmt, kw in (("f32_oob", F32, {"element": "float", "oob": -1.5}),
                              ("f32_array4", F32, {"element": "float", "array": 4}),
                              ("bool_not", BOOL, {"element": "bool", "negate": True}),
                              ("bool_not_oob_true", BOOL, {"element": "bool", "oob": True, "negate": True, "array": 4}),
                              ("u8_oob", U8, {"element": "uint8", "oob": 7})):
            data = values(shape, fmt)
            element = np.dtype(vt.DTYPES[fmt]).itemsize
            src = r.t.tensor(fmt, shape, strides=padded_strides(shape, element), data=data)
            dst = r.t.tensor(fmt, dst_shape)
            r.dispatch(shaders.elementwise(rank, **kw), src, dst)
            oob = kw.get("oob")
            want = shaders.reference(data, dst_shape, None if oob is None else int(oob) if fmt != F32 else oob,
                                     kw.get("negate", False))
            got = dst.array()
            out[f"{name}_{rank}"] = {"ok": bool(np.array_equal(got, want)),
                                     "mismatches": int(np.count_nonzero(got != want))}
    # a copy, a tensor memory barrier (transfer write -> shader read), then a dispatch reading the copy
    shape = (4, 6)
    data = values(shape, F32)
    a = r.t.tensor(F32, shape, data=data)
    b = r.t.tensor(F32, shape)
    c = r.t.tensor(F32, shape)

    def before(cmd):
        keep = r.t.cmd_copy(cmd, a, b)
        r.t.cmd_tensor_barrier(cmd, b, vk.VK_PIPELINE_STAGE_2_TRANSFER_BIT, vk.VK_ACCESS_2_TRANSFER_WRITE_BIT,
                               vk.VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT, vk.VK_ACCESS_2_SHADER_READ_BIT)
        return keep
    r.dispatch(shaders.elementwise(2, "float"), b, c, before=before)
    out["copy_barrier_dispatch"] = {"ok": bool(np.array_equal(c.array(), data))}
    return out


def invalid(r: Runner) -> dict:
    out = {}
    out["optimal_with_strides"] = r.t.try_create(F32, (2, 3), strides=(12, 4), tiling=vt.TILING_OPTIMAL)[0]
    out["inner_stride"] = r.t.try_create(F32, (2, 3), strides=(16, 8))[0]
    out["rank_9"] = r.t.try_create(F32, (1,) * 9)[0]
    out["strides_order"] = r.t.try_create(F32, (2, 3), strides=(8, 4))[0]
    out["zero_dimension"] = r.t.try_create(F32, (2, 0))[0]
    out["optimal_packed"] = r.t.try_create(F32, (2, 3), tiling=vt.TILING_OPTIMAL)[0]
    src = r.t.tensor(F32, (2, 3), data=np.ones((2, 3), np.float32))
    dst = r.t.tensor(F32, (2, 3))
    r.submit(lambda cmd: r.t.cmd_copy(cmd, src, dst, [((1, 0), (0, 0), (2, 3))]))   # beyond the source
    out["bad_copy_left_dst_zero"] = bool(not dst.array().any())
    # a tensor descriptor written to a storage-buffer binding
    layout = r.ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, vk.VK_SHADER_STAGE_COMPUTE_BIT)])
    pool = r.ctx.descriptor_pool({vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER: 1, vt.DESCRIPTOR_TYPE_TENSOR: 1}, max_sets=1)
    r.t.write_tensors(r.ctx.allocate_set(pool, layout), [(0, [src])])
    out["wrong_descriptor_survived"] = True
    return out


def body(ctx) -> str:
    r = Runner(ctx)
    results = {"queries": queries(r), "copies": copies(r), "shaders": shader_cases(r), "invalid": invalid(r)}
    # a device without tensorNonPacked refuses non-packed strides
    features, keep = vt.device_features(non_packed=False)
    other = vkapp.Context(vkapp.Settings.from_env(), "tensors-packed-only",
                          optional_device_extensions=[vt.EXTENSION], device_features=features)
    t2 = vt.Tensors(other)
    results["invalid"]["non_packed_without_feature"] = t2.try_create(F32, (2, 3), strides=(16, 4))[0]
    results["invalid"]["packed_strides_without_feature"] = t2.try_create(F32, (2, 3), strides=(12, 4))[0]
    other.close()
    r.t.close()
    print(json.dumps(results), flush=True)
    return "tensors checked"


if __name__ == "__main__":
    FEATURES, KEEP = vt.device_features()
    vkapp.run_main("tensors_api", body, optional_device_extensions=[vt.EXTENSION], device_features=FEATURES)
