"""The intercept table: every command a Tessera shim intercepts, one row each.

Role: the one declaration of what the layer's shim (LAYER) and the emulated driver's shim
(ICD) intercept. A row names, per shim, the modules whose Python hooks handle the command
(short names: "icd.recording" is tessera.icd.recording), whether the shim records it in C
(`c`, vkapi/recorder.py; the modules then apply the records later), whether the shim answers it
in C once Python has answered it (`answered`, vkapi/answers.py: queries whose answer is fixed for
the object asked) and, for the driver, whether it provides the command itself when the backend
lacks it (`emulated`).

From it come each shim's intercept list, C recordings and C answers (`hooks`, `recorded`,
`answered`: the shim
specs hand them to the generator, which emits the C guards, GetProcAddr's table and the
Python bindings) and the driver's `emulated` commands. When a shim loads, HookSet.install
checks the registrations against it: a row without a hook, a hook without a row, and a
hook in a module its row does not name all stop the shim with the command's name
(tests/vkapi/test_declarations.py). Modules that hook only under an option (the layer's
--instrument and --regions) are listed; a module may leave its hook out, never add one.
The order a row names its modules is the order their hooks of the command run (each kind:
at_record, before, after; vkapi/dispatch.py HookSet), whatever order the modules register in.

The rows are sorted by command name. Commands a shim calls but does not intercept are its
CALLS (shim specs), not rows. The driver's rows of the commands that name an object by (type,
handle) are made from the registry (OBJECT_NAMING_FORWARDED: the exceptions).
"""
from __future__ import annotations

from dataclasses import dataclass

from .answers import Answered
from .recorder import Recorded
from .transfers import RECORDED_IN_C as TRANSFER_FIELDS
from .vkconst import vk

ICD, LAYER = "icd", "layer"


@dataclass(frozen=True)
class In:
    """How one shim intercepts a command."""
    modules: tuple[str, ...]
    c: Recorded | None = None    # recorded in C (TRANSFER / TAGGED_TRANSFER: with transfers.RECORDED_IN_C's fields)
    emulated: bool = False       # ICD: provided by the driver even when the backend lacks it
    answered: Answered | None = None   # answered in C once Python has answered (vkapi/answers.py)

    def __init__(self, *modules: str, c: Recorded | None = None, emulated: bool = False,
                 answered: Answered | None = None) -> None:
        object.__setattr__(self, "modules", modules)
        object.__setattr__(self, "c", c)
        object.__setattr__(self, "emulated", emulated)
        object.__setattr__(self, "answered", answered)


# How commands are recorded in C (vkapi/recorder.py Recorded).
RECORDED = Recorded()
FORWARDED = Recorded(record=False)                   # C forwards it; its hooks run on the Python path only
TAGGED = Recorded(tagged=True)                       # the layer's workloads: a tag and a t<tag> label from C
LABEL = Recorded(strings={"pLabelInfo": "pLabelName"}, forward=False, tag_labels=True)   # the driver consumes labels
MARKER = Recorded(strings={"pMarkerInfo": "pMarkerName"}, forward=False, tag_labels=True)
LABEL_END = Recorded(forward=False)
# The layer keeps the application's labels (not passed down); their stacks are planned at submit.
APP_LABEL = Recorded(strings={"pLabelInfo": "pLabelName"}, forward=False, label_depth=1)
APP_LABEL_INSERT = Recorded(strings={"pLabelInfo": "pLabelName"}, forward=False)
APP_MARKER = Recorded(strings={"pMarkerInfo": "pMarkerName"}, forward=False, label_depth=1)
APP_MARKER_INSERT = Recorded(strings={"pMarkerInfo": "pMarkerName"}, forward=False)
APP_LABEL_END = Recorded(forward=False, label_depth=-1)
EXECUTE = Recorded(executes=True)                    # secondaries C began and ended (runtime/lifecycle.c)
COUNTED_DRAWS = Recorded(fold=())                    # consecutive draws only count (the layer; mesh tasks)
# The layer's `tessera run --content` (layer/content.py, descriptors.py): while the shim's switch
# tessera_layer_content is on (shim_spec.py's C glue), the commands whose parameters content metrics read at
# record time take Python; everything else stays recorded in C. (A block-scope extern: the guards are
# compiled before the glue that defines the switch.)
_CONTENT = "({ extern int tessera_layer_content; tessera_layer_content; })"
CONTENT_DRAWS = Recorded(fold=(), python_if=_CONTENT)        # the layer's vkCmdDraw, vkCmdDrawIndexed
CONTENT_FORWARDED = Recorded(record=False, python_if=_CONTENT)   # index and descriptor binds: C forwards them
RAYS = Recorded(fields=("width", "height", "depth"))  # trace rays: the size (the shader tables are not read)
TAGGED_RAYS = Recorded(fields=("width", "height", "depth"), tagged=True)
# Render passes (Recorded.opens_pass, closes_pass): a begin with a pNext chain (per-region counters,
# imageless framebuffers, ...) or a dynamic-rendering instance that suspends or resumes takes Python,
# and so does its end; the layer's begins are tagged, their t<tag> label open until the end.
_PASS_PYTHON = "!pRenderPassBegin || pRenderPassBegin->pNext"
_RENDERING_PYTHON = ("!pRenderingInfo || pRenderingInfo->pNext || "
                     "(pRenderingInfo->flags & ({VK_RENDERING_SUSPENDING_BIT} | {VK_RENDERING_RESUMING_BIT}))")
PASS_BEGIN = Recorded(opens_pass=True, python_if=_PASS_PYTHON)
RENDERING_BEGIN = Recorded(opens_pass=True, python_if=_RENDERING_PYTHON)
TAGGED_PASS_BEGIN = Recorded(opens_pass=True, tagged=True, python_if=_PASS_PYTHON)
TAGGED_RENDERING_BEGIN = Recorded(opens_pass=True, tagged=True, python_if=_RENDERING_PYTHON)
PASS_END = Recorded(closes_pass=True)
# The driver's data-graph bind point (icd/data_graph/) is its own: binds there take Python, the others stay in C.
_DATA_GRAPH_BIND = "pipelineBindPoint == {VK_PIPELINE_BIND_POINT_DATA_GRAPH_ARM}"
DATA_GRAPH_AWARE = Recorded(python_if=_DATA_GRAPH_BIND)
DATA_GRAPH_ONLY = Recorded(record=False, python_if=_DATA_GRAPH_BIND)
# The driver's push descriptors: its hooks translate a set with tensor bindings (icd/tensors/push.py), which only a
# device with VK_ARM_tensors on can have; while no device has it on, C forwards them (icd/shim_spec.py's C glue).
_TENSOR_DEVICES = "({ extern int tessera_tensor_devices; __atomic_load_n(&tessera_tensor_devices, __ATOMIC_ACQUIRE); })"
TENSOR_PUSH = Recorded(record=False, python_if=_TENSOR_DEVICES)
# The driver's next subpass: its only hook counts a per-region capture's subpasses, and a captured pass begins in
# Python; inside a pass C began, C forwards it (the render pass object says how many subpasses there are).
SUBPASS = Recorded(record=False, in_c_pass=True)
# Synchronization2 in the driver: the stage masks it orders by; icd.tensors.resources translates tensor barriers
# (a pNext) and the tensor-aliasing layout at record time, so those calls take Python.
DEPENDENCIES = Recorded(dependencies=True, python_layouts=("VK_IMAGE_LAYOUT_TENSOR_ALIASING_ARM",))
TRANSFER = Recorded(fields=("transfer",))            # placeholders: the fields are transfers.RECORDED_IN_C's
TAGGED_TRANSFER = Recorded(fields=("transfer",), tagged=True)
# The driver's answer is fixed for the instance or physical device asked (the backend's physical
# devices, their extensions and properties, the emulated identity); forgotten at vkDestroyInstance.
FIXED = Answered()


# The driver's measured visible primitives (icd/visible_prims.py): in a buffer whose brackets flag has bit 2
# (Recorder.python_brackets(..., draws=True)) the draws and the state that culls take Python; C forwards them
# everywhere else.
_CAPTURING = "(rec->python_brackets & 2)"
CAPTURED_STATE = Recorded(record=False, python_if=_CAPTURING)


def folded_draws(count: str) -> Recorded:
    """The driver's draws: consecutive ones fold into a count, their vertices and primitives
    (recording._primitives: a third of the vertices); in a capturing buffer each takes Python."""
    vertices = f"(uint64_t){count} * instanceCount"
    return Recorded(fold=(vertices, f"{vertices} / 3"), python_if=_CAPTURING)


INTERCEPTS: dict[str, dict[str, In]] = {
    "vkAllocateCommandBuffers": {ICD: In("vkapi.commands"), LAYER: In("vkapi.commands")},
    "vkAllocateDescriptorSets": {ICD: In("icd.tensors.descriptors"), LAYER: In("layer.descriptors")},
    # Device memory allocations and binds, counted for the advice (layer/allocations.py): cold paths.
    "vkAllocateMemory": {LAYER: In("layer.allocations")},
    "vkBeginCommandBuffer": {
        ICD: In("icd.command_buffer", "icd.tensors.push", "icd.instrumentation.hooks", "icd.regions.hooks",
                "icd.measured_counters", "icd.visible_prims"),
        LAYER: In("layer.commands", "layer.instrument", "layer.regions")},
    "vkBindBufferMemory": {LAYER: In("layer.allocations")},
    "vkBindBufferMemory2": {LAYER: In("layer.allocations")},
    "vkBindDataGraphPipelineSessionMemoryARM": {ICD: In("icd.data_graph.pipelines", emulated=True)},
    "vkBindImageMemory": {LAYER: In("layer.allocations")},
    "vkBindImageMemory2": {LAYER: In("layer.allocations")},
    "vkBindTensorMemoryARM": {ICD: In("icd.tensors.resources", emulated=True)},
    "vkClearShaderInstrumentationMetricsARM": {ICD: In("icd.instrumentation.hooks", emulated=True)},
    "vkCmdBeginDebugUtilsLabelEXT": {
        ICD: In("icd.labels", c=LABEL, emulated=True),
        LAYER: In("layer.commands", c=APP_LABEL)},
    "vkCmdBeginRenderPass": {
        ICD: In("icd.recording", "icd.regions.hooks", "icd.measured_counters", c=PASS_BEGIN),
        LAYER: In("layer.render_passes", "layer.regions", c=TAGGED_PASS_BEGIN)},
    "vkCmdBeginRenderPass2": {
        ICD: In("icd.recording", "icd.regions.hooks", "icd.measured_counters", c=PASS_BEGIN),
        LAYER: In("layer.render_passes", "layer.regions", c=TAGGED_PASS_BEGIN)},
    "vkCmdBeginRendering": {
        ICD: In("icd.recording", "icd.regions.hooks", "icd.measured_counters", c=RENDERING_BEGIN),
        LAYER: In("layer.render_passes", "layer.regions", c=TAGGED_RENDERING_BEGIN)},
    "vkCmdBeginShaderInstrumentationARM": {ICD: In("icd.instrumentation.hooks", emulated=True)},
    # Images read through descriptors (layer/descriptors.py): the layer's rows are handed out under --content
    # only (descriptors.CONTENT_ONLY); the commands recorded into command buffers are only forwarded by C.
    "vkCmdBindDescriptorBuffersEXT": {LAYER: In("layer.descriptors", c=CONTENT_FORWARDED)},
    "vkCmdBindDescriptorSets": {
        ICD: In("icd.data_graph.commands", c=DATA_GRAPH_ONLY), LAYER: In("layer.descriptors", c=CONTENT_FORWARDED)},
    "vkCmdBindDescriptorSets2": {LAYER: In("layer.descriptors", c=CONTENT_FORWARDED)},
    # The layer's content mode (layer/content.py) reads the index data each indexed draw uses.
    "vkCmdBindIndexBuffer": {LAYER: In("layer.content", c=CONTENT_FORWARDED)},
    "vkCmdBindIndexBuffer2": {LAYER: In("layer.content", c=CONTENT_FORWARDED)},
    "vkCmdBindPipeline": {
        ICD: In("icd.recording", "icd.regions.hooks", "icd.data_graph.commands", c=DATA_GRAPH_AWARE),
        LAYER: In("layer.workloads", "layer.instrument", "layer.descriptors", c=RECORDED)},
    "vkCmdBindShadersEXT": {
        ICD: In("icd.recording", "icd.instrumentation.hooks"),
        LAYER: In("layer.workloads", "layer.instrument")},
    "vkCmdBlitImage": {ICD: In("icd.recording", c=TRANSFER), LAYER: In("layer.workloads", c=TAGGED_TRANSFER)},
    "vkCmdBlitImage2": {ICD: In("icd.recording", c=TRANSFER), LAYER: In("layer.workloads", c=TAGGED_TRANSFER)},
    "vkCmdBuildAccelerationStructuresIndirectKHR": {ICD: In("icd.recording"), LAYER: In("layer.workloads")},
    "vkCmdBuildAccelerationStructuresKHR": {ICD: In("icd.recording"), LAYER: In("layer.workloads")},
    "vkCmdClearColorImage": {ICD: In("icd.recording", c=TRANSFER), LAYER: In("layer.workloads", c=TAGGED_TRANSFER)},
    "vkCmdClearDepthStencilImage": {
        ICD: In("icd.recording", c=TRANSFER),
        LAYER: In("layer.workloads", c=TAGGED_TRANSFER)},
    "vkCmdCopyAccelerationStructureKHR": {ICD: In("icd.recording"), LAYER: In("layer.workloads")},
    "vkCmdCopyAccelerationStructureToMemoryKHR": {ICD: In("icd.recording"), LAYER: In("layer.workloads")},
    "vkCmdCopyBuffer": {ICD: In("icd.recording", c=TRANSFER), LAYER: In("layer.workloads", c=TAGGED_TRANSFER)},
    "vkCmdCopyBuffer2": {ICD: In("icd.recording", c=TRANSFER), LAYER: In("layer.workloads", c=TAGGED_TRANSFER)},
    "vkCmdCopyBufferToImage": {ICD: In("icd.recording", c=TRANSFER), LAYER: In("layer.workloads", c=TAGGED_TRANSFER)},
    "vkCmdCopyBufferToImage2": {ICD: In("icd.recording", c=TRANSFER), LAYER: In("layer.workloads", c=TAGGED_TRANSFER)},
    "vkCmdCopyImage": {ICD: In("icd.recording", c=TRANSFER), LAYER: In("layer.workloads", c=TAGGED_TRANSFER)},
    "vkCmdCopyImage2": {ICD: In("icd.recording", c=TRANSFER), LAYER: In("layer.workloads", c=TAGGED_TRANSFER)},
    "vkCmdCopyImageToBuffer": {ICD: In("icd.recording", c=TRANSFER), LAYER: In("layer.workloads", c=TAGGED_TRANSFER)},
    "vkCmdCopyImageToBuffer2": {ICD: In("icd.recording", c=TRANSFER), LAYER: In("layer.workloads", c=TAGGED_TRANSFER)},
    "vkCmdCopyMemoryToAccelerationStructureKHR": {ICD: In("icd.recording"), LAYER: In("layer.workloads")},
    "vkCmdCopyTensorARM": {ICD: In("icd.tensors.resources", emulated=True), LAYER: In("layer.workloads")},
    "vkCmdDebugMarkerBeginEXT": {
        ICD: In("icd.labels", c=MARKER, emulated=True),
        LAYER: In("layer.commands", c=APP_MARKER)},
    "vkCmdDebugMarkerEndEXT": {
        ICD: In("icd.labels", c=LABEL_END, emulated=True),
        LAYER: In("layer.commands", c=APP_LABEL_END)},
    "vkCmdDebugMarkerInsertEXT": {
        ICD: In("icd.labels", c=MARKER, emulated=True),
        LAYER: In("layer.commands", c=APP_MARKER_INSERT)},
    "vkCmdDispatch": {
        ICD: In("icd.recording", "icd.instrumentation.hooks", "icd.measured_timing", "icd.measured_counters",
                c=RECORDED),
        LAYER: In("layer.workloads", "layer.instrument", c=TAGGED)},
    "vkCmdDispatchBase": {
        ICD: In("icd.recording", "icd.instrumentation.hooks", "icd.measured_timing", "icd.measured_counters",
                c=RECORDED),
        LAYER: In("layer.workloads", "layer.instrument", c=TAGGED)},
    "vkCmdDispatchDataGraphARM": {ICD: In("icd.data_graph.commands", emulated=True), LAYER: In("layer.workloads")},
    "vkCmdDispatchIndirect": {
        ICD: In("icd.recording", "icd.instrumentation.hooks", "icd.indirect_sizes", "icd.measured_timing",
                "icd.measured_counters"),
        LAYER: In("layer.workloads", "layer.instrument")},
    "vkCmdDraw": {
        ICD: In("icd.recording", "icd.instrumentation.hooks", "icd.regions.hooks", "icd.measured_timing",
                "icd.visible_prims", c=folded_draws("vertexCount")),
        LAYER: In("layer.render_passes", "layer.content", "layer.instrument", c=CONTENT_DRAWS)},
    "vkCmdDrawIndexed": {
        ICD: In("icd.recording", "icd.instrumentation.hooks", "icd.regions.hooks", "icd.measured_timing",
                "icd.visible_prims", c=folded_draws("indexCount")),
        LAYER: In("layer.render_passes", "layer.content", "layer.instrument", c=CONTENT_DRAWS)},
    "vkCmdDrawIndexedIndirect": {
        ICD: In("icd.recording", "icd.instrumentation.hooks", "icd.regions.hooks", "icd.indirect_sizes",
                "icd.measured_timing"),
        LAYER: In("layer.render_passes", "layer.instrument")},
    "vkCmdDrawIndexedIndirectCount": {
        ICD: In("icd.recording", "icd.instrumentation.hooks", "icd.regions.hooks", "icd.indirect_sizes",
                "icd.measured_timing"),
        LAYER: In("layer.render_passes", "layer.instrument")},
    "vkCmdDrawIndirect": {
        ICD: In("icd.recording", "icd.instrumentation.hooks", "icd.regions.hooks", "icd.indirect_sizes",
                "icd.measured_timing"),
        LAYER: In("layer.render_passes", "layer.instrument")},
    "vkCmdDrawIndirectByteCountEXT": {
        ICD: In("icd.recording", "icd.instrumentation.hooks", "icd.regions.hooks", "icd.measured_timing"),
        LAYER: In("layer.render_passes", "layer.instrument")},
    "vkCmdDrawIndirectCount": {
        ICD: In("icd.recording", "icd.instrumentation.hooks", "icd.regions.hooks", "icd.indirect_sizes",
                "icd.measured_timing"),
        LAYER: In("layer.render_passes", "layer.instrument")},
    "vkCmdDrawMeshTasksEXT": {
        ICD: In("icd.recording", "icd.instrumentation.hooks", "icd.regions.hooks", "icd.measured_timing",
                c=COUNTED_DRAWS),
        LAYER: In("layer.render_passes", "layer.instrument", c=COUNTED_DRAWS)},
    "vkCmdDrawMeshTasksIndirectCountEXT": {
        ICD: In("icd.recording", "icd.instrumentation.hooks", "icd.regions.hooks", "icd.measured_timing"),
        LAYER: In("layer.render_passes", "layer.instrument")},
    "vkCmdDrawMeshTasksIndirectEXT": {
        ICD: In("icd.recording", "icd.instrumentation.hooks", "icd.regions.hooks", "icd.measured_timing"),
        LAYER: In("layer.render_passes", "layer.instrument")},
    "vkCmdDrawMultiEXT": {
        ICD: In("icd.recording", "icd.instrumentation.hooks", "icd.regions.hooks", "icd.measured_timing"),
        LAYER: In("layer.render_passes", "layer.instrument")},
    "vkCmdDrawMultiIndexedEXT": {
        ICD: In("icd.recording", "icd.instrumentation.hooks", "icd.regions.hooks", "icd.measured_timing"),
        LAYER: In("layer.render_passes", "layer.instrument")},
    "vkCmdEndDebugUtilsLabelEXT": {
        ICD: In("icd.labels", c=LABEL_END, emulated=True),
        LAYER: In("layer.commands", c=APP_LABEL_END)},
    "vkCmdEndRenderPass": {
        ICD: In("icd.recording", "icd.regions.hooks", "icd.measured_counters", "icd.indirect_sizes", c=PASS_END),
        LAYER: In("layer.render_passes", c=PASS_END)},
    "vkCmdEndRenderPass2": {
        ICD: In("icd.recording", "icd.regions.hooks", "icd.measured_counters", "icd.indirect_sizes", c=PASS_END),
        LAYER: In("layer.render_passes", c=PASS_END)},
    "vkCmdEndRendering": {
        ICD: In("icd.recording", "icd.regions.hooks", "icd.measured_counters", "icd.indirect_sizes", c=PASS_END),
        LAYER: In("layer.render_passes", c=PASS_END)},
    "vkCmdEndShaderInstrumentationARM": {ICD: In("icd.instrumentation.hooks", emulated=True)},
    "vkCmdExecuteCommands": {
        ICD: In("icd.recording", "icd.instrumentation.hooks", "icd.regions.hooks", "icd.measured_timing", c=EXECUTE),
        LAYER: In("layer.commands", "layer.instrument", c=EXECUTE)},
    "vkCmdFillBuffer": {ICD: In("icd.recording", c=TRANSFER), LAYER: In("layer.workloads", c=TAGGED_TRANSFER)},
    "vkCmdInsertDebugUtilsLabelEXT": {
        ICD: In("icd.labels", c=LABEL, emulated=True),
        LAYER: In("layer.commands", c=APP_LABEL_INSERT)},
    "vkCmdNextSubpass": {ICD: In("icd.regions.hooks", c=SUBPASS)},
    "vkCmdNextSubpass2": {ICD: In("icd.regions.hooks", c=SUBPASS)},
    "vkCmdPipelineBarrier": {
        ICD: In("icd.recording", c=Recorded(fields=("srcStageMask", "dstStageMask", "dependencyFlags")))},
    "vkCmdPipelineBarrier2": {ICD: In("icd.recording", "icd.tensors.resources", c=DEPENDENCIES)},
    "vkCmdPushDescriptorSet": {
        ICD: In("icd.tensors.push", c=TENSOR_PUSH), LAYER: In("layer.descriptors", c=CONTENT_FORWARDED)},
    "vkCmdPushDescriptorSet2": {
        ICD: In("icd.tensors.push", c=TENSOR_PUSH), LAYER: In("layer.descriptors", c=CONTENT_FORWARDED)},
    "vkCmdPushDescriptorSetWithTemplate": {
        ICD: In("icd.tensors.push", c=TENSOR_PUSH), LAYER: In("layer.descriptors", c=CONTENT_FORWARDED)},
    "vkCmdPushDescriptorSetWithTemplate2": {
        ICD: In("icd.tensors.push", c=TENSOR_PUSH), LAYER: In("layer.descriptors", c=CONTENT_FORWARDED)},
    "vkCmdResolveImage": {ICD: In("icd.recording", c=TRANSFER), LAYER: In("layer.workloads", c=TAGGED_TRANSFER)},
    "vkCmdResolveImage2": {ICD: In("icd.recording", c=TRANSFER), LAYER: In("layer.workloads", c=TAGGED_TRANSFER)},
    "vkCmdSetCullMode": {ICD: In("icd.visible_prims", c=CAPTURED_STATE)},
    "vkCmdSetFrontFace": {ICD: In("icd.visible_prims", c=CAPTURED_STATE)},
    "vkCmdSetPrimitiveTopology": {ICD: In("icd.visible_prims", c=CAPTURED_STATE)},
    "vkCmdSetViewport": {ICD: In("icd.visible_prims", c=CAPTURED_STATE)},
    "vkCmdSetViewportWithCount": {ICD: In("icd.visible_prims", c=CAPTURED_STATE)},
    "vkCmdTraceRaysIndirectKHR": {
        ICD: In("icd.recording", "icd.instrumentation.hooks", "icd.indirect_sizes"),
        LAYER: In("layer.workloads", "layer.instrument")},
    "vkCmdTraceRaysKHR": {
        ICD: In("icd.recording", "icd.instrumentation.hooks", c=RAYS),
        LAYER: In("layer.workloads", "layer.instrument", c=TAGGED_RAYS)},
    "vkCmdUpdateBuffer": {ICD: In("icd.recording", c=TRANSFER), LAYER: In("layer.workloads", c=TAGGED_TRANSFER)},
    "vkCmdWaitEvents": {ICD: In("icd.recording", c=Recorded(fields=("srcStageMask", "dstStageMask")))},
    "vkCmdWaitEvents2": {ICD: In("icd.recording", "icd.tensors.resources", c=DEPENDENCIES)},
    "vkCreateAccelerationStructureKHR": {ICD: In("vkapi.accel"), LAYER: In("vkapi.accel")},
    "vkCreateBuffer": {
        ICD: In("vkapi.resource_hooks", "icd.indirect_sizes"),
        LAYER: In("vkapi.resource_hooks", "layer.indirect")},
    "vkCreateComputePipelines": {
        ICD: In("vkapi.pipelines", "icd.tensors.descriptors", "icd.instrumentation.hooks",
                "icd.data_graph.pipelines"),
        LAYER: In("vkapi.pipelines", "layer.instrument", "layer.descriptors")},
    "vkCreateDataGraphPipelineSessionARM": {ICD: In("icd.data_graph.pipelines", emulated=True)},
    "vkCreateDataGraphPipelinesARM": {ICD: In("icd.data_graph.pipelines", emulated=True)},
    "vkCreateDescriptorPool": {ICD: In("icd.tensors.descriptors")},
    "vkCreateDescriptorSetLayout": {ICD: In("icd.tensors.descriptors")},
    "vkCreateDescriptorUpdateTemplate": {ICD: In("icd.tensors.push"), LAYER: In("layer.descriptors")},
    "vkCreateDevice": {ICD: In("icd.device"), LAYER: In("layer.chain")},
    "vkCreateFramebuffer": {ICD: In("vkapi.resource_hooks"), LAYER: In("vkapi.resource_hooks")},
    "vkCreateGraphicsPipelines": {
        ICD: In("vkapi.pipelines", "icd.tensors.descriptors", "icd.visible_prims", "icd.instrumentation.hooks",
                "icd.regions.hooks"),
        LAYER: In("vkapi.pipelines", "layer.instrument", "layer.descriptors")},
    "vkCreateImage": {ICD: In("vkapi.resource_hooks", "icd.tensors.aliasing"), LAYER: In("vkapi.resource_hooks")},
    "vkCreateImageView": {ICD: In("vkapi.resource_hooks"), LAYER: In("vkapi.resource_hooks")},
    "vkCreateInstance": {ICD: In("icd.instance"), LAYER: In("layer.chain")},
    "vkCreatePipelineLayout": {ICD: In("icd.counter_memory"), LAYER: In("layer.descriptors")},
    "vkCreateQueryPool": {ICD: In("icd.measured_counters")},
    "vkCreateRayTracingPipelinesKHR": {ICD: In("vkapi.pipelines")},
    "vkCreateRenderPass": {
        ICD: In("vkapi.resource_hooks", "icd.regions.hooks", "icd.visible_prims"),
        LAYER: In("vkapi.resource_hooks", "layer.regions")},
    "vkCreateRenderPass2": {
        ICD: In("vkapi.resource_hooks", "icd.regions.hooks", "icd.visible_prims"),
        LAYER: In("vkapi.resource_hooks", "layer.regions")},
    "vkCreateSemaphore": {ICD: In("icd.submit")},
    "vkCreateShaderInstrumentationARM": {ICD: In("icd.instrumentation.hooks", emulated=True)},
    "vkCreateShaderModule": {
        ICD: In("icd.core_builtins", "icd.shader_costs", "vkapi.pipelines", "icd.data_graph.pipelines"),
        LAYER: In("vkapi.pipelines")},
    "vkCreateShadersEXT": {
        ICD: In("icd.shader_costs", "vkapi.pipelines", "icd.instrumentation.hooks"),
        LAYER: In("vkapi.pipelines", "layer.instrument")},
    "vkCreateTensorARM": {ICD: In("icd.tensors.resources", emulated=True), LAYER: In("layer.tensors")},
    "vkCreateTensorViewARM": {ICD: In("icd.tensors.resources", emulated=True)},
    "vkDestroyAccelerationStructureKHR": {ICD: In("vkapi.accel"), LAYER: In("vkapi.accel")},
    "vkDestroyBuffer": {ICD: In("vkapi.resource_hooks", "icd.indirect_sizes"), LAYER: In("vkapi.resource_hooks")},
    "vkDestroyCommandPool": {ICD: In("vkapi.commands", "icd.regions.hooks"), LAYER: In("vkapi.commands")},
    "vkDestroyDataGraphPipelineSessionARM": {ICD: In("icd.data_graph.pipelines", emulated=True)},
    "vkDestroyDescriptorPool": {ICD: In("icd.tensors.descriptors"), LAYER: In("layer.descriptors")},
    "vkDestroyDescriptorSetLayout": {ICD: In("icd.tensors.descriptors")},
    "vkDestroyDescriptorUpdateTemplate": {ICD: In("icd.tensors.push"), LAYER: In("layer.descriptors")},
    "vkDestroyDevice": {ICD: In("icd.device"), LAYER: In("layer.chain")},
    "vkDestroyFramebuffer": {ICD: In("vkapi.resource_hooks"), LAYER: In("vkapi.resource_hooks")},
    "vkDestroyImage": {ICD: In("vkapi.resource_hooks"), LAYER: In("vkapi.resource_hooks")},
    "vkDestroyImageView": {ICD: In("vkapi.resource_hooks"), LAYER: In("vkapi.resource_hooks")},
    "vkDestroyInstance": {ICD: In("icd.instance"), LAYER: In("layer.chain")},
    "vkDestroyPipeline": {
        ICD: In("vkapi.pipelines", "icd.regions.hooks", "icd.data_graph.pipelines"), LAYER: In("vkapi.pipelines")},
    "vkDestroyPipelineLayout": {ICD: In("icd.counter_memory")},
    "vkDestroyPrivateDataSlot": {ICD: In("icd.object_names")},
    "vkDestroyQueryPool": {ICD: In("icd.measured_counters")},   # its values on emulated objects go with it
    "vkDestroyRenderPass": {ICD: In("vkapi.resource_hooks"), LAYER: In("vkapi.resource_hooks")},
    "vkDestroySemaphore": {ICD: In("icd.submit")},
    "vkDestroyShaderEXT": {ICD: In("vkapi.pipelines"), LAYER: In("vkapi.pipelines")},
    "vkDestroyShaderInstrumentationARM": {ICD: In("icd.instrumentation.hooks", emulated=True)},
    "vkDestroyShaderModule": {ICD: In("vkapi.pipelines"), LAYER: In("vkapi.pipelines")},
    "vkDestroySwapchainKHR": {LAYER: In("layer.queues")},
    "vkDestroyTensorARM": {ICD: In("icd.tensors.resources", emulated=True), LAYER: In("layer.tensors")},
    "vkDestroyTensorViewARM": {ICD: In("icd.tensors.resources", emulated=True)},
    "vkDeviceWaitIdle": {ICD: In("icd.submit"), LAYER: In("layer.queues")},
    "vkEndCommandBuffer": {
        ICD: In("icd.command_buffer"),
        LAYER: In("layer.queues", "layer.render_passes", "layer.descriptions", "layer.instrument")},
    "vkEnumerateDeviceExtensionProperties": {
        ICD: In("icd.instance", answered=Answered(when="pLayerName == NULL")),
        LAYER: In("layer.chain")},
    "vkEnumerateInstanceExtensionProperties": {ICD: In("icd.instance")},
    "vkEnumeratePhysicalDeviceGroups": {ICD: In("icd.instance", answered=FIXED)},
    "vkEnumeratePhysicalDeviceQueueFamilyPerformanceCountersByRegionARM": {ICD: In("icd.regions.hooks", emulated=True)},
    "vkEnumeratePhysicalDeviceShaderInstrumentationMetricsARM": {ICD: In("icd.instrumentation.hooks", emulated=True)},
    "vkEnumeratePhysicalDevices": {ICD: In("icd.instance", answered=FIXED)},
    "vkFreeCommandBuffers": {ICD: In("vkapi.commands", "icd.regions.hooks"), LAYER: In("vkapi.commands")},
    "vkFreeDescriptorSets": {ICD: In("icd.tensors.descriptors"), LAYER: In("layer.descriptors")},
    "vkGetBufferDeviceAddress": {ICD: In("vkapi.accel"), LAYER: In("vkapi.accel")},
    "vkGetDataGraphPipelineAvailablePropertiesARM": {ICD: In("icd.data_graph.pipelines", emulated=True)},
    "vkGetDataGraphPipelinePropertiesARM": {ICD: In("icd.data_graph.pipelines", emulated=True)},
    "vkGetDataGraphPipelineSessionBindPointRequirementsARM": {ICD: In("icd.data_graph.pipelines", emulated=True)},
    "vkGetDataGraphPipelineSessionMemoryRequirementsARM": {ICD: In("icd.data_graph.pipelines", emulated=True)},
    "vkGetDeviceProcAddr": {ICD: In("icd.device")},
    "vkGetDeviceQueue": {ICD: In("vkapi.commands"), LAYER: In("vkapi.commands")},
    "vkGetDeviceQueue2": {ICD: In("vkapi.commands"), LAYER: In("vkapi.commands")},
    "vkGetDeviceTensorMemoryRequirementsARM": {ICD: In("icd.tensors.resources", emulated=True)},
    # A poll that finds the work done observes completion as a wait does (icd/submit.py, layer/queues.py).
    "vkGetFenceStatus": {ICD: In("icd.submit"), LAYER: In("layer.queues")},
    "vkGetPhysicalDeviceExternalTensorPropertiesARM": {ICD: In("icd.tensors.resources", emulated=True)},
    "vkGetPhysicalDeviceFeatures": {ICD: In("icd.instance")},
    "vkGetPhysicalDeviceFeatures2": {
        ICD: In("icd.instance", "icd.tensors.resources", "icd.data_graph.physical"), LAYER: In("layer.chain")},
    "vkGetPhysicalDeviceFormatProperties": {ICD: In("icd.instance")},
    "vkGetPhysicalDeviceFormatProperties2": {
        ICD: In("icd.instance", "icd.tensors.resources", "icd.data_graph.physical")},
    "vkGetPhysicalDeviceImageFormatProperties": {ICD: In("icd.instance")},
    "vkGetPhysicalDeviceImageFormatProperties2": {ICD: In("icd.instance")},
    "vkGetPhysicalDeviceProperties": {ICD: In("icd.instance", answered=FIXED)},
    "vkGetPhysicalDeviceProperties2": {ICD: In("icd.instance", "icd.tensors.push")},
    "vkGetPhysicalDeviceQueueFamilyDataGraphEngineOperationPropertiesARM": {
        ICD: In("icd.data_graph.physical", emulated=True)},
    "vkGetPhysicalDeviceQueueFamilyDataGraphProcessingEnginePropertiesARM": {
        ICD: In("icd.data_graph.physical", emulated=True)},
    "vkGetPhysicalDeviceQueueFamilyDataGraphPropertiesARM": {ICD: In("icd.data_graph.physical", emulated=True)},
    "vkGetPhysicalDeviceQueueFamilyProperties": {ICD: In("icd.instance", "icd.data_graph.physical")},
    "vkGetPhysicalDeviceQueueFamilyProperties2": {ICD: In("icd.instance", "icd.data_graph.physical")},
    "vkGetSemaphoreCounterValue": {ICD: In("icd.submit"), LAYER: In("layer.queues")},
    "vkGetShaderInstrumentationValuesARM": {ICD: In("icd.instrumentation.hooks", emulated=True)},
    # The images of each swapchain, so a present names the images it shows (layer/queues.py): cold paths.
    "vkGetSwapchainImagesKHR": {LAYER: In("layer.queues")},
    "vkGetTensorMemoryRequirementsARM": {ICD: In("icd.tensors.resources", emulated=True)},
    "vkQueueBeginDebugUtilsLabelEXT": {ICD: In("icd.labels", emulated=True), LAYER: In("layer.commands")},
    "vkQueueEndDebugUtilsLabelEXT": {ICD: In("icd.labels", emulated=True), LAYER: In("layer.commands")},
    "vkQueueInsertDebugUtilsLabelEXT": {ICD: In("icd.labels", emulated=True), LAYER: In("layer.commands")},
    "vkQueuePresentKHR": {LAYER: In("layer.queues")},
    "vkQueueSubmit": {ICD: In("icd.submit", "icd.measured_timing"), LAYER: In("layer.queues")},
    "vkQueueSubmit2": {ICD: In("icd.submit", "icd.measured_timing"), LAYER: In("layer.queues")},
    "vkQueueWaitIdle": {ICD: In("icd.submit"), LAYER: In("layer.queues")},
    "vkResetCommandBuffer": {
        ICD: In("icd.command_buffer", "icd.tensors.push", "icd.regions.hooks"),
        LAYER: In("layer.commands")},
    "vkResetCommandPool": {ICD: In("vkapi.commands", "icd.regions.hooks"), LAYER: In("vkapi.commands")},
    "vkResetDescriptorPool": {ICD: In("icd.tensors.descriptors"), LAYER: In("layer.descriptors")},
    "vkUpdateDescriptorSetWithTemplate": {ICD: In("icd.tensors.push"), LAYER: In("layer.descriptors")},
    "vkUpdateDescriptorSets": {
        ICD: In("icd.data_graph.pipelines", "icd.tensors.descriptors"), LAYER: In("layer.descriptors")},
    "vkWaitForFences": {ICD: In("icd.submit"), LAYER: In("layer.queues")},
    "vkWaitSemaphores": {ICD: In("icd.submit"), LAYER: In("layer.queues")},
}


# Commands that name an object by (type, handle) come from the registry (vkconst OBJECT_NAMING, made
# by constants_gen.object_naming from vk.xml's objectType attributes): the driver intercepts each, so
# that the objects it emulates never reach the backend (icd/object_names.py), except these, each with
# its reason.
OBJECT_NAMING_FORWARDED = {
    "vkDebugReportMessageEXT": "instance-level: the object is payload of a message to the application's own "
                               "callbacks, which must see the handle it gave; backends pass it on without "
                               "dereferencing it (Mesa vk_debug_report)",
    "vkSubmitDebugUtilsMessageEXT": "instance-level: pObjects are payload of a message to the application's own "
                                    "messengers, which must see the handles it gave; backends pass them on "
                                    "without dereferencing them (Mesa vk_debug_message)",
}
# Extensions the driver provides itself when the backend lacks them (icd/identity.py EMULATED_*_EXTENSIONS):
# their naming commands are `emulated` (the driver answers them for every object).
NAMING_EXTENSIONS_PROVIDED = frozenset({"VK_EXT_debug_utils", "VK_EXT_debug_marker"})


def _object_naming_rows() -> None:
    for name, (extensions, _) in vk.OBJECT_NAMING.items():
        if name in OBJECT_NAMING_FORWARDED:
            continue
        if ICD in INTERCEPTS.get(name, {}):
            raise ValueError(f"{name}: names objects, so icd.object_names handles it in the driver; "
                             "its row is made from the registry")
        INTERCEPTS.setdefault(name, {})[ICD] = In("icd.object_names",
                                                  emulated=bool(NAMING_EXTENSIONS_PROVIDED & set(extensions)))


_object_naming_rows()
INTERCEPTS = dict(sorted(INTERCEPTS.items()))


def hooks(shim: str) -> tuple[str, ...]:
    """The commands `shim` intercepts, in table order."""
    return tuple(name for name, row in INTERCEPTS.items() if shim in row)


def recorded(shim: str) -> dict[str, Recorded]:
    """The commands `shim` records in C, and how."""
    out = {}
    for name, row in INTERCEPTS.items():
        c = row[shim].c if shim in row else None
        if c in (TRANSFER, TAGGED_TRANSFER):
            c = Recorded(fields=TRANSFER_FIELDS[name], tagged=c.tagged)
        if c is not None:
            out[name] = c
    return out


def answered(shim: str) -> dict[str, Answered]:
    """The commands `shim` answers in C once Python has answered them, and when."""
    return {name: row[shim].answered for name, row in INTERCEPTS.items()
            if shim in row and row[shim].answered is not None}


def owners(shim: str) -> dict[str, tuple[str, ...]]:
    """Command -> the modules (full names) that may register its hooks in `shim`, in the order
    their hooks run."""
    return {name: tuple(f"tessera.{m}" for m in row[shim].modules)
            for name, row in INTERCEPTS.items() if shim in row}


def emulated(shim: str = ICD) -> frozenset[str]:
    return frozenset(name for name, row in INTERCEPTS.items() if shim in row and row[shim].emulated)
