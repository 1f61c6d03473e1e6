"""Data-graph pipelines (VK_ARM_data_graph, VK_ARM_data_graph_instruction_set_tosa) in the emulated Mali.

Owns: the extensions' physical-device answers (the `dataGraph` features, the DATA_GRAPH bit on the compute
queue families, their data-graph engine and TOSA properties, the tensor formats' DATA_GRAPH feature),
data-graph pipelines (vkCreateDataGraphPipelinesARM from a SPIR-V graph module, their property queries,
vkDestroyPipeline of them), sessions and their memory, binding at VK_PIPELINE_BIND_POINT_DATA_GRAPH_ARM
(pipelines and descriptor sets) and vkCmdDispatchDataGraphARM. State: `DeviceGraphs` in a slot of the
device (pipelines, sessions, the tensors written into descriptor sets, the backend kernels); a command
buffer's data-graph bindings in a slot of the command buffer. Threads: objects are created and destroyed
under the application's synchronisation; a command buffer's slot belongs to its recording thread.

Architecture (each module below is named in the intercept table's rows for the commands it handles):

    graph.py     the SPIR-V graph (SPV_ARM_graph + TOSA.001000.1) read into operators on tensors, checked;
                 no Vulkan here (unit-tested alone)
    lowering.py  each supported TOSA operator as backend compute kernels (which shader, its parameters,
                 its work size) and its modelled cost (ops, bytes moved, time on the profile's GPU);
                 unsupported operators are refused by name at pipeline creation
    quantized.py the integer operators of quantized networks (RESCALE, int8 CONV2D / MATMUL, int32 ADD,
                 CLAMP …) with TOSA 1.0's exact integer rules; called by lowering.py for integer tensors
    kernels.py   the operator shaders (GLSL in shaders/, compiled by glslangValidator at build time into
                 build/data_graph/) as backend compute pipelines whose descriptor set index follows the
                 application's bound compute layout, so its sets and push constants are not disturbed
    objects.py   the state (DeviceGraphs, Bound), the emulated objects (pipelines, sessions), the costs
    physical.py  the physical-device answers (features, queue families, engines, TOSA, formats)
    pipelines.py the `DataGraph` feature: device lifecycle, pipelines, their properties, sessions; register()
    commands.py  binding at the data-graph bind point and vkCmdDispatchDataGraphARM

Execution: a dispatch records, into the application's backend command buffer, one compute dispatch per
kernel with a compute-to-compute barrier between them, then rebinds the application's compute pipeline;
ordering with the queue's other work is therefore Vulkan's own. Intermediate tensors live in the session's
memory (its TRANSIENT bind point), constants in a driver-owned buffer per pipeline. Nothing is imported
here: `from tessera.icd.data_graph import pipelines` (its register() binds all three hook classes).
"""
