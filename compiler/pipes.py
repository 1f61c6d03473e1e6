"""Which Mali pipes each SPIR-V instruction uses, and how many ops.

Role: the instruction-to-pipe map of the compiler model (Valhall-style pipes:
FMA, CVT, SFU arithmetic; LS load/store; V varying; T texture). Costs are per
"lane" of the value: one 32-bit component, a packed pair of 16-bit components,
or one 64-bit component (64-bit integer ops count twice, 64-bit float ops four
times: Mali emulates them). Memory, varying and texture instructions are
classified by the IR builder (ir.py), which knows storage classes.

Scale codes: "r" = per lane of the result, "a" = per lane of the first
operand (dot products, reductions), "1" = once.
Instructions that cost nothing (register renames such as OpCompositeExtract,
OpCopyObject, OpBitcast; source modifiers such as OpFNegate) are in `FREE`.
Anything neither here nor handled in ir.py is reported as unsupported.
"""

from __future__ import annotations

Cost = tuple[float, float, float, float, float, float]  # FMA, CVT, SFU, LS, V, T
ZERO: Cost = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def _c(fma: float = 0, cvt: float = 0, sfu: float = 0, ls: float = 0, v: float = 0, t: float = 0) -> Cost:
    return (float(fma), float(cvt), float(sfu), float(ls), float(v), float(t))


FREE = frozenset({
    "OpCompositeExtract", "OpCopyObject", "OpCopyLogical", "OpBitcast", "OpFNegate", "OpUndef", "OpNop",
    "OpLine", "OpNoLine", "OpSelectionMerge", "OpLoopMerge", "OpBranch", "OpReturn", "OpReturnValue",
    "OpUnreachable", "OpMemoryBarrier", "OpSourceContinued", "OpModuleProcessed", "OpName",
})

# opname -> (per-unit cost, scale)
CORE: dict[str, tuple[Cost, str]] = {
    # FMA pipe: float add/multiply/fma and integer multiply
    "OpFAdd": (_c(fma=1), "r"), "OpFSub": (_c(fma=1), "r"), "OpFMul": (_c(fma=1), "r"),
    "OpVectorTimesScalar": (_c(fma=1), "r"), "OpMatrixTimesScalar": (_c(fma=1), "r"),
    "OpIMul": (_c(fma=1), "r"), "OpDot": (_c(fma=1), "a"),
    "OpOuterProduct": (_c(fma=1), "r"),
    "OpUMulExtended": (_c(fma=2), "a"), "OpSMulExtended": (_c(fma=2), "a"),
    # SFU: reciprocal-based division and remainders
    "OpFDiv": (_c(fma=1, sfu=1), "r"), "OpFRem": (_c(fma=2, cvt=1, sfu=1), "r"),
    "OpFMod": (_c(fma=2, cvt=1, sfu=1), "r"),
    "OpUDiv": (_c(fma=4, cvt=4, sfu=2), "r"), "OpSDiv": (_c(fma=4, cvt=5, sfu=2), "r"),
    "OpUMod": (_c(fma=5, cvt=4, sfu=2), "r"), "OpSRem": (_c(fma=5, cvt=5, sfu=2), "r"),
    "OpSMod": (_c(fma=5, cvt=6, sfu=2), "r"),
    # CVT: conversions, integer add, logic, compares, selects, moves
    "OpConvertFToU": (_c(cvt=1), "r"), "OpConvertFToS": (_c(cvt=1), "r"), "OpConvertSToF": (_c(cvt=1), "r"),
    "OpConvertUToF": (_c(cvt=1), "r"), "OpUConvert": (_c(cvt=1), "r"), "OpSConvert": (_c(cvt=1), "r"),
    "OpFConvert": (_c(cvt=1), "r"), "OpQuantizeToF16": (_c(cvt=1), "r"), "OpConvertPtrToU": (_c(cvt=1), "r"), "OpConvertUToPtr": (_c(cvt=1), "r"),
    "OpSNegate": (_c(cvt=1), "r"), "OpIAdd": (_c(cvt=1), "r"), "OpISub": (_c(cvt=1), "r"),
    "OpIAddCarry": (_c(cvt=2), "a"), "OpISubBorrow": (_c(cvt=2), "a"),
    "OpShiftRightLogical": (_c(cvt=1), "r"), "OpShiftRightArithmetic": (_c(cvt=1), "r"),
    "OpShiftLeftLogical": (_c(cvt=1), "r"), "OpBitwiseOr": (_c(cvt=1), "r"), "OpBitwiseXor": (_c(cvt=1), "r"),
    "OpBitwiseAnd": (_c(cvt=1), "r"), "OpNot": (_c(cvt=1), "r"),
    "OpBitFieldInsert": (_c(cvt=2), "r"), "OpBitFieldSExtract": (_c(cvt=2), "r"),
    "OpBitFieldUExtract": (_c(cvt=2), "r"), "OpBitReverse": (_c(cvt=1), "r"), "OpBitCount": (_c(cvt=1), "r"),
    "OpAny": (_c(cvt=1), "a"), "OpAll": (_c(cvt=1), "a"),
    "OpIsNan": (_c(cvt=1), "r"), "OpIsInf": (_c(cvt=1), "r"), "OpIsFinite": (_c(cvt=1), "r"),
    "OpIsNormal": (_c(cvt=1), "r"), "OpSignBitSet": (_c(cvt=1), "r"),
    "OpLogicalEqual": (_c(cvt=1), "r"), "OpLogicalNotEqual": (_c(cvt=1), "r"), "OpLogicalOr": (_c(cvt=1), "r"),
    "OpLogicalAnd": (_c(cvt=1), "r"), "OpLogicalNot": (_c(cvt=1), "r"), "OpSelect": (_c(cvt=1), "r"),
    "OpIEqual": (_c(cvt=1), "r"), "OpINotEqual": (_c(cvt=1), "r"), "OpUGreaterThan": (_c(cvt=1), "r"),
    "OpSGreaterThan": (_c(cvt=1), "r"), "OpUGreaterThanEqual": (_c(cvt=1), "r"),
    "OpSGreaterThanEqual": (_c(cvt=1), "r"), "OpULessThan": (_c(cvt=1), "r"), "OpSLessThan": (_c(cvt=1), "r"),
    "OpULessThanEqual": (_c(cvt=1), "r"), "OpSLessThanEqual": (_c(cvt=1), "r"),
    "OpFOrdEqual": (_c(cvt=1), "r"), "OpFUnordEqual": (_c(cvt=1), "r"), "OpFOrdNotEqual": (_c(cvt=1), "r"),
    "OpFUnordNotEqual": (_c(cvt=1), "r"), "OpFOrdLessThan": (_c(cvt=1), "r"),
    "OpFUnordLessThan": (_c(cvt=1), "r"), "OpFOrdGreaterThan": (_c(cvt=1), "r"),
    "OpFUnordGreaterThan": (_c(cvt=1), "r"), "OpFOrdLessThanEqual": (_c(cvt=1), "r"),
    "OpFUnordLessThanEqual": (_c(cvt=1), "r"), "OpFOrdGreaterThanEqual": (_c(cvt=1), "r"),
    "OpFUnordGreaterThanEqual": (_c(cvt=1), "r"), "OpOrdered": (_c(cvt=1), "r"), "OpUnordered": (_c(cvt=1), "r"),
    "OpCompositeConstruct": (_c(cvt=1), "r"), "OpCompositeInsert": (_c(cvt=1), "1"),
    "OpVectorShuffle": (_c(cvt=1), "r"), "OpVectorExtractDynamic": (_c(cvt=2), "a"),
    "OpVectorInsertDynamic": (_c(cvt=2), "r"), "OpTranspose": (_c(cvt=1), "r"),
    "OpBranchConditional": (_c(cvt=1), "1"), "OpSwitch": (_c(cvt=2), "1"),
    "OpKill": (_c(cvt=1), "1"), "OpTerminateInvocation": (_c(cvt=1), "1"),
    "OpDemoteToHelperInvocation": (_c(cvt=1), "1"), "OpIsHelperInvocationEXT": (_c(cvt=1), "1"),
    # derivatives: cross-lane permutes (CVT) and a subtraction (FMA)
    "OpDPdx": (_c(fma=1, cvt=2), "r"), "OpDPdy": (_c(fma=1, cvt=2), "r"), "OpFwidth": (_c(fma=3, cvt=4), "r"),
    "OpDPdxFine": (_c(fma=1, cvt=2), "r"), "OpDPdyFine": (_c(fma=1, cvt=2), "r"),
    "OpFwidthFine": (_c(fma=3, cvt=4), "r"), "OpDPdxCoarse": (_c(fma=1, cvt=2), "r"),
    "OpDPdyCoarse": (_c(fma=1, cvt=2), "r"), "OpFwidthCoarse": (_c(fma=3, cvt=4), "r"),
    # synchronisation goes through the load/store unit
    "OpControlBarrier": (_c(ls=1), "1"),
    # texture unit (one bilinear sample each, as malioc assumes)
    "OpImageSampleImplicitLod": (_c(t=1), "1"), "OpImageSampleExplicitLod": (_c(t=1), "1"),
    "OpImageSampleDrefImplicitLod": (_c(t=1), "1"), "OpImageSampleDrefExplicitLod": (_c(t=1), "1"),
    "OpImageSampleProjImplicitLod": (_c(t=1, fma=1, sfu=1), "1"),
    "OpImageSampleProjExplicitLod": (_c(t=1, fma=1, sfu=1), "1"),
    "OpImageSampleProjDrefImplicitLod": (_c(t=1, fma=1, sfu=1), "1"),
    "OpImageSampleProjDrefExplicitLod": (_c(t=1, fma=1, sfu=1), "1"),
    "OpImageFetch": (_c(t=1), "1"), "OpImageGather": (_c(t=1), "1"), "OpImageDrefGather": (_c(t=1), "1"),
    "OpImageSparseSampleImplicitLod": (_c(t=1), "1"), "OpImageSparseSampleExplicitLod": (_c(t=1), "1"),
    "OpImageSparseFetch": (_c(t=1), "1"), "OpImageSparseGather": (_c(t=1), "1"),
    "OpImageQuerySizeLod": (_c(t=1), "1"), "OpImageQuerySize": (_c(t=1), "1"),
    "OpImageQueryLod": (_c(t=1), "1"), "OpImageQueryLevels": (_c(t=1), "1"),
    "OpImageQuerySamples": (_c(t=1), "1"), "OpSampledImage": (ZERO, "1"), "OpImage": (ZERO, "1"),
    # storage images and atomics use the load/store unit
    "OpImageRead": (_c(ls=1), "1"), "OpImageWrite": (_c(ls=1), "1"), "OpImageSparseRead": (_c(ls=1), "1"),
    "OpArrayLength": (_c(cvt=1), "1"),
}

# Ray tracing (SPV_KHR_ray_tracing, SPV_KHR_ray_query). Immortalis GPUs traverse rays in a ray
# tracing unit (RTU) beside the shader core; a shader hands it a ray through the message fabric, as it
# does a load. So a traversal is charged to the LS pipe: RAY_TRAVERSAL_LS_OPS issue slots per thread
# for one OpTraceRayKHR or OpRayQueryProceedKHR (an assumption, not a measurement: a few messages
# for the ray and its result, the RTU's own time being the driver timing model's TRAVERSAL cost).
# Reading a committed or candidate intersection back is a register move (CVT) per result; the
# shaders a trace calls (hit, miss, callable) are costed as stages of their own.
RAY_TRAVERSAL_LS_OPS = 4.0
RAY = {
    "OpTraceRayKHR": (_c(ls=RAY_TRAVERSAL_LS_OPS, cvt=2), "1"),
    "OpRayQueryProceedKHR": (_c(ls=RAY_TRAVERSAL_LS_OPS, cvt=1), "1"),
    "OpRayQueryInitializeKHR": (_c(cvt=4), "1"),      # ray origin, direction, extent into RTU state
    "OpRayQueryTerminateKHR": (_c(cvt=1), "1"),
    "OpRayQueryGenerateIntersectionKHR": (_c(cvt=1), "1"),
    "OpRayQueryConfirmIntersectionKHR": (_c(cvt=1), "1"),
    "OpExecuteCallableKHR": (_c(cvt=2), "1"),          # the callable shader's own cost is a stage
    "OpReportIntersectionKHR": (_c(cvt=2), "1"),       # intersection shader hands a hit to the RTU
    "OpConvertUToAccelerationStructureKHR": (ZERO, "1"),
    # any-hit terminators: tell the RTU to drop the candidate or stop the ray
    "OpIgnoreIntersectionKHR": (_c(cvt=1), "1"), "OpTerminateRayKHR": (_c(cvt=1), "1"),
}
CORE.update(RAY)

# prefixes for instruction families costed alike
PREFIXES: tuple[tuple[str, Cost, str], ...] = (
    ("OpAtomic", _c(ls=1), "1"),
    ("OpGroupNonUniformBroadcast", _c(cvt=2), "r"),
    ("OpGroupNonUniformShuffle", _c(cvt=2), "r"),
    ("OpGroupNonUniformF", _c(fma=4, cvt=8), "r"),   # reductions: log2(16) steps of permute + op
    ("OpGroupNonUniformI", _c(cvt=12), "r"),
    ("OpGroupNonUniform", _c(cvt=2), "r"),
    ("OpSubgroup", _c(cvt=2), "r"),
    ("OpRayQueryGet", _c(cvt=1), "r"),   # intersection/ray state of a ray query, per result lane
)

# GLSL.std.450 instruction name -> (per-unit cost, scale)
GLSL: dict[str, tuple[Cost, str]] = {
    "Round": (_c(cvt=1), "r"), "RoundEven": (_c(cvt=1), "r"), "Trunc": (_c(cvt=1), "r"),
    "FAbs": (ZERO, "r"), "SAbs": (_c(cvt=1), "r"), "FSign": (_c(cvt=2), "r"), "SSign": (_c(cvt=2), "r"),
    "Floor": (_c(cvt=1), "r"), "Ceil": (_c(cvt=1), "r"), "Fract": (_c(fma=1, cvt=1), "r"),
    "Radians": (_c(fma=1), "r"), "Degrees": (_c(fma=1), "r"),
    "Sin": (_c(fma=1, sfu=1), "r"), "Cos": (_c(fma=1, sfu=1), "r"), "Tan": (_c(fma=2, sfu=3), "r"),
    "Asin": (_c(fma=4, sfu=2), "r"), "Acos": (_c(fma=4, sfu=2), "r"), "Atan": (_c(fma=4, sfu=2), "r"),
    "Sinh": (_c(fma=3, sfu=3), "r"), "Cosh": (_c(fma=3, sfu=3), "r"), "Tanh": (_c(fma=3, sfu=3), "r"),
    "Asinh": (_c(fma=3, sfu=3), "r"), "Acosh": (_c(fma=3, sfu=3), "r"), "Atanh": (_c(fma=3, sfu=3), "r"),
    "Atan2": (_c(fma=5, cvt=1, sfu=3), "r"),
    "Pow": (_c(fma=1, sfu=2), "r"), "Exp": (_c(fma=1, sfu=1), "r"), "Log": (_c(fma=1, sfu=1), "r"),
    "Exp2": (_c(sfu=1), "r"), "Log2": (_c(sfu=1), "r"), "Sqrt": (_c(fma=1, sfu=1), "r"),
    "InverseSqrt": (_c(sfu=1), "r"), "Determinant": (_c(fma=14), "1"), "MatrixInverse": (_c(fma=40, sfu=1), "1"),
    "Modf": (_c(fma=1, cvt=1), "r"), "ModfStruct": (_c(fma=1, cvt=1), "r"),
    "FMin": (_c(fma=1), "r"), "UMin": (_c(cvt=1), "r"), "SMin": (_c(cvt=1), "r"),
    "FMax": (_c(fma=1), "r"), "UMax": (_c(cvt=1), "r"), "SMax": (_c(cvt=1), "r"),
    "FClamp": (_c(fma=2), "r"), "UClamp": (_c(cvt=2), "r"), "SClamp": (_c(cvt=2), "r"),
    "FMix": (_c(fma=2), "r"), "IMix": (_c(cvt=1), "r"), "Step": (_c(cvt=1), "r"),
    "SmoothStep": (_c(fma=5, sfu=1), "r"), "Fma": (_c(fma=1), "r"),
    "Frexp": (_c(cvt=2), "r"), "FrexpStruct": (_c(cvt=2), "r"), "Ldexp": (_c(cvt=1), "r"),
    "PackSnorm4x8": (_c(fma=4, cvt=4), "1"), "PackUnorm4x8": (_c(fma=4, cvt=4), "1"),
    "PackSnorm2x16": (_c(fma=2, cvt=2), "1"), "PackUnorm2x16": (_c(fma=2, cvt=2), "1"),
    "PackHalf2x16": (_c(cvt=1), "1"), "PackDouble2x32": (ZERO, "1"),
    "UnpackSnorm2x16": (_c(fma=2, cvt=2), "1"), "UnpackUnorm2x16": (_c(fma=2, cvt=2), "1"),
    "UnpackHalf2x16": (_c(cvt=2), "1"), "UnpackSnorm4x8": (_c(fma=4, cvt=4), "1"),
    "UnpackUnorm4x8": (_c(fma=4, cvt=4), "1"), "UnpackDouble2x32": (ZERO, "1"),
    "Length": (_c(fma=1), "a"), "Distance": (_c(fma=2), "a"),
    "Cross": (_c(fma=2), "r"), "Normalize": (_c(fma=2), "r"), "FaceForward": (_c(fma=2, cvt=1), "r"),
    "Reflect": (_c(fma=3), "r"), "Refract": (_c(fma=4), "r"),
    "FindILsb": (_c(cvt=1), "r"), "FindSMsb": (_c(cvt=1), "r"), "FindUMsb": (_c(cvt=1), "r"),
    "InterpolateAtCentroid": (_c(v=1), "r"), "InterpolateAtSample": (_c(v=1), "r"),
    "InterpolateAtOffset": (_c(v=1), "r"),
    "NMin": (_c(fma=1), "r"), "NMax": (_c(fma=1), "r"), "NClamp": (_c(fma=2), "r"),
}
# one-off extra costs on top of the per-lane ones (square roots of lengths, etc.)
GLSL_EXTRA: dict[str, Cost] = {
    "Length": _c(sfu=1), "Distance": _c(sfu=1), "Normalize": _c(sfu=1), "Refract": _c(sfu=1),
}


def core_cost(opname: str) -> tuple[Cost, str] | None:
    """The (per-unit cost, scale) of a core instruction, None if unknown."""
    entry = CORE.get(opname)
    if entry is not None:
        return entry
    for prefix, cost, scale in PREFIXES:
        if opname.startswith(prefix):
            return cost, scale
    return None


def scaled(cost: Cost, units: float) -> Cost:
    return (cost[0] * units, cost[1] * units, cost[2] * units, cost[3] * units, cost[4] * units, cost[5] * units)


def add(a: Cost, b: Cost) -> Cost:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4], a[5] + b[5])
