"""Per-region performance counters (VK_ARM_performance_counters_by_region) in the emulated Mali.

Owns: the extension's enumeration (vkEnumeratePhysicalDeviceQueueFamilyPerformanceCountersByRegionARM),
its feature and properties (filled by icd/identity.py from props.py), and, on a device that enabled
`performanceCountersByRegion`, the driver's side of render passes (vkCreateRenderPass/2, vkCmdBeginRenderPass/2,
vkCmdBeginRendering, vkCmdNextSubpass/2, vkCmdEnd*), graphics pipelines (vkCreateGraphicsPipelines,
vkDestroyPipeline, vkCmdBindPipeline), draws and command buffer lifetimes (vkBeginCommandBuffer, resets,
frees). State: the `Regions` feature object (hooks.py) keeps one `DeviceRegions` per device (device
address -> state), which keeps a `CommandBufferRegions` per command buffer that recorded a captured pass
(`DeviceRegions.buffers`). Threads: a command buffer's state belongs to its recording thread; the device's
pipelines, layouts and free memory are under `DeviceRegions.lock`.

Architecture (the intercept table, vkapi/intercepts.py, names `icd.regions.hooks` in every row):

    hooks.py      the `Regions` feature: one method per command, each a few lines calling into
    props.py      counters, properties, feature request, layout arithmetic (constants, no state)
    state.py      per-device / per-command-buffer records and their chunks of icd/counter_memory.py
    pipelines.py  the counting variant of a graphics pipeline (SPIR-V region-counter pass)
    capture.py    one captured render pass instance: plan, template copy at begin, copies out at end

Data flow: a begin info's VkRenderPassPerformanceCountersByRegionBeginInfoARM is split off (capture.py)
and planned into a template and working slice per subpass (state.py's chunks); inside the pass the
counting pipelines (pipelines.py) count into the slice; at end the counters are copied on the GPU into
the application's buffers. Nothing is imported here: `from tessera.icd.regions import hooks`.
"""
