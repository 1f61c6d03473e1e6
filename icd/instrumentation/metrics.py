"""VK_ARM_shader_instrumentation: what the extension reports and what its feature asks of the device.

Role: the metrics the emulated Mali counts (names, descriptions, order of the values), the
answer to vkEnumeratePhysicalDeviceShaderInstrumentationMetricsARM, and the device-creation
side of the `shaderInstrumentation` feature (whether a create chain asks for it; the two core
store features the counting stages need on the backend). icd/identity.py reports numMetrics from
METRICS. No state: constants and functions of their arguments, safe on any thread. The hooks
are in hooks.py.
"""
from __future__ import annotations

from tessera.vkapi import structs
from tessera.vkapi.vkconst import vk

from ..feature import enable_core_features

# (name, description), in the order values are returned. The six pipes of the compiler model
# (compiler/pipes.py) and the measured executions.
METRICS = (
    ("fma", "Fused multiply-accumulate pipe: thread-operations of arithmetic (FMA unit) executed"),
    ("cvt", "Convert pipe: thread-operations of conversions, integer and simple arithmetic executed"),
    ("sfu", "Special function unit: thread-operations of transcendental and reciprocal functions executed"),
    ("ls", "Load/store pipe: thread-operations of buffer, image and atomic memory accesses executed"),
    ("tex", "Texture pipe: thread-operations of texture sampling and filtering executed"),
    ("var", "Varying pipe: thread-operations of varying interpolation executed"),
    ("threads", "Thread executions of the basic block"),
)
# Index of each pipe metric in compiler BlockCost.ops (FMA, CVT, SFU, LS, V, T).
OPS_INDEX = {"fma": 0, "cvt": 1, "sfu": 2, "ls": 3, "var": 4, "tex": 5}


def describe_metrics(ffi, pCount, pDescriptions) -> int:
    """vkEnumeratePhysicalDeviceShaderInstrumentationMetricsARM's two-call idiom over METRICS."""
    if pDescriptions == ffi.NULL:
        pCount[0] = len(METRICS)
        return vk.VK_SUCCESS
    n = min(pCount[0], len(METRICS))
    for i in range(n):
        d = pDescriptions[i]
        for field_name, text in (("name", METRICS[i][0]), ("description", METRICS[i][1])):
            data = text.encode()[: ffi.sizeof(getattr(d, field_name)) - 1] + b"\0"
            ffi.memmove(getattr(d, field_name), data, len(data))
    pCount[0] = n
    return vk.VK_INCOMPLETE if n < len(METRICS) else vk.VK_SUCCESS


def wants_instrumentation(ffi, pnext) -> bool:
    """A device create chain asking for the shaderInstrumentation feature."""
    f = structs.find(ffi, pnext, vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INSTRUMENTATION_FEATURES_ARM,
                     "VkPhysicalDeviceShaderInstrumentationFeaturesARM *")
    return f is not None and bool(f.shaderInstrumentation)


def enable_store_features(ffi, info, keep) -> None:
    """Instrumented vertex and fragment stages write to storage buffers: turn on the two core
    features that allow it in the create info going to the backend (`info` is the driver's copy;
    icd/feature.py enable_core_features never writes the application's structures). Per-region
    counters (icd/regions/) need them too."""
    enable_core_features(ffi, info, keep, "vertexPipelineStoresAndAtomics", "fragmentStoresAndAtomics")
