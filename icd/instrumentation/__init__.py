"""Shader instrumentation (VK_ARM_shader_instrumentation) in the emulated Mali: measured block counts.

Owns: the extension's commands (vkEnumeratePhysicalDeviceShaderInstrumentationMetricsARM,
vkCreate/DestroyShaderInstrumentationARM, vkCmdBegin/EndShaderInstrumentationARM,
vkGetShaderInstrumentationValuesARM, vkClearShaderInstrumentationMetricsARM) and, on a device that enabled
`shaderInstrumentation`, the driver's side of pipeline and shader-object creation (vkCreateCompute/
GraphicsPipelines, vkCreateShadersEXT), vkCmdBindShadersEXT, every draw, dispatch and trace-rays, and
vkBeginCommandBuffer / vkCmdExecuteCommands. State: `dev.instrumentation` (objects.DeviceInstrumentation:
counters' layouts, discard region, the instrumentation objects and their memory), `cb.instrumentation`
(the object active while recording) and each pipeline's InstrumentedPipeline on its record. Threads: the
threads recording command buffers (external synchronisation; chunk allocation under the device's lock)
and the host reading values after the GPU work completed.

Architecture (the intercept table, vkapi/intercepts.py, names `icd.instrumentation.hooks` in every row):

    hooks.py      the `Instrumentation` feature: one method per command, each a few lines calling into
    metrics.py    the metrics, their enumeration, the device feature's create chain (no state)
    rewrite.py    create time: pipelines and shader objects rewritten by the block-counter pass
    recording.py  record time: each action's resultIndex, counter region and binding
    objects.py    the device state, the objects, their values and clear (the result layout)

Data flow: rewrite.py makes an InstrumentedPipeline at create time; recording.py gives each recorded
action a region of the active object's memory (icd/counter_memory.py chunks) and binds it; the GPU
accumulates block executions there; objects.py turns them into rows of METRICS (executions x the
compiler model's per-block costs). icd/measured_timing.py reads the same regions. Nothing is imported
here: `from tessera.icd.instrumentation import hooks`.
"""
