"""The args of a GPU slice: one table, read by the driver that writes them and the merge that joins them.

A GPU render-stage event's `extra_data` args come from three owners, in three processes:

  - DRIVER: the emulated driver (icd/timeline.py, icd/trace.py) writes them into
    gpu.perfetto-trace, under the `label` of their row (Arm's driver vocabulary: `Labels`,
    capitalized words); `key` is the driver's own name for the fact (a Work.info key, or the
    timeline's). `same_as`: the layer's field stating the same fact, which the merge reconciles
    the driver's entry against (hostd/slice_args.py: shown once, superseded, or marked
    `<label> (driver)`).
  - LAYER: the layer's WORKLOAD / ANNEX fields (schemas/json/workload.schema.json,
    annex.schema.json); the merge copies each under its own name (label == key).
  - HOSTD: what the merge derives itself (the join's tag and submit, a missing join's marker,
    raw handles grouped last, per-region counters, shader cost); a `label` holding `{…}` is a
    template, one arg per value of the field it names.

Names are protocol: a driver writes them, and traces already written keep them. Renaming one
changes what the merged trace shows (docs/hostd.md "Merge rules"): do it here, nowhere else.
tests/schemas/test_slice_arg_schema.py checks that every arg the driver can write and every arg hostd
reads is in TABLE, and that keys (per owner) and labels are unique.

Imported by the driver at start-up: plain tuples and dicts, nothing else imported.
"""
from __future__ import annotations

DRIVER, LAYER, HOSTD = "driver", "layer", "hostd"


class Arg:
    """One row. (A plain class: a NamedTuple's first creation costs the driver's start-up ~1 ms.)"""
    __slots__ = ("key", "label", "unit", "owner", "same_as")

    def __init__(self, key: str, label: str, unit: str, owner: str, same_as: str | None = None) -> None:
        self.key = key              # the fact's name on its owner's side
        self.label = label          # the extra_data name on the GPU slice
        self.unit = unit
        self.owner = owner          # DRIVER, LAYER or HOSTD
        self.same_as = same_as      # DRIVER rows: the LAYER key stating the same fact (reconciled)

    def __repr__(self) -> str:
        return f"Arg({self.key!r}, {self.label!r}, {self.owner})"


# ---- the driver's (icd/timeline.py `_emit_pass`, `_emit_work`; icd/trace.py `event`) -------------
LABEL = Arg("label", "Labels", "text: the innermost debug label (the layer's t<N> tag)", DRIVER)
LABEL_STACK = Arg("label_stack", "Label stack", "text: the label stack, outermost first, joined by ' / '", DRIVER)
TRANSFER = Arg("transfer", "Transfer", "text: the finer transfer kind behind Arm's stage name", DRIVER, "subtype")
WORKLOAD = Arg("workload", "Workload", "text: the workload class (WORKLOAD_CLASSES)", DRIVER)
COMMAND = Arg("command", "Command", "text: the Vulkan command that started it", DRIVER, "command")
AREA = Arg("area", "Area", "pixels, <width>x<height>", DRIVER)
DRAWS = Arg("draws", "Draws", "draw calls", DRIVER, "draw_call_count")
VERTICES = Arg("vertices", "Vertices", "vertices", DRIVER)
SUBPASSES = Arg("subpasses", "Subpasses", "subpasses", DRIVER, "subpass_count")
PARTS = Arg("parts", "Parts", "render pass parts (suspended and resumed)", DRIVER)
ESTIMATED = Arg("estimated", "Estimated", "text: which values are guesses (ESTIMATES)", DRIVER)
ITEMS = Arg("items", "Items", "invocations; -1 when indirect", DRIVER, "items")
# Work.info keys (icd/recording.py, indirect_sizes.py, measured_timing.py, tensors/resources.py; vkapi/transfers.py)
GROUPS = Arg("groups", "Groups", "work groups [x, y, z]; -1 each when indirect", DRIVER, "groups")
GROUP_SIZE = Arg("group_size", "Group size", "invocations per group [x, y, z]; -1 each when unknown", DRIVER,
                 "group_size")
BASE_GROUP = Arg("base_group", "Base group", "work group [x, y, z]", DRIVER, "base_group")
WIDTH = Arg("width", "Width", "rays; -1 when indirect", DRIVER, "width")
HEIGHT = Arg("height", "Height", "rays", DRIVER, "height")
DEPTH = Arg("depth", "Depth", "rays", DRIVER, "depth")
BYTES = Arg("bytes", "Bytes", "bytes", DRIVER, "bytes")
PIXELS = Arg("pixels", "Pixels", "pixels", DRIVER, "pixels")
REGIONS = Arg("regions", "Regions", "copy regions", DRIVER, "regions")
COPY_MODE = Arg("copy_mode", "Copy mode", "text: clone, compact, serialize, deserialize", DRIVER, "copy_mode")
PRIMITIVES = Arg("primitives", "Primitives", "triangles + AABBs", DRIVER, "primitives")
INSTANCES = Arg("instances", "Instances", "instances", DRIVER, "instances")
STRUCTURES = Arg("structures", "Structures", "acceleration structures built", DRIVER)
BUFFER_COPIES = Arg("buffer_copies", "Buffer copies", "VkBufferCopy runs", DRIVER)
SRC_SHAPE = Arg("src_shape", "Src shape", "tensor elements per dimension", DRIVER)
DST_SHAPE = Arg("dst_shape", "Dst shape", "tensor elements per dimension", DRIVER)
RANK = Arg("rank", "Rank", "tensor dimensions", DRIVER)
SRC_TENSOR = Arg("src_tensor", "Src tensor", "text: debug name", DRIVER)
DST_TENSOR = Arg("dst_tensor", "Dst tensor", "text: debug name", DRIVER)
# a data-graph dispatch (icd/data_graph/feature.py): its graph and its operators' modelled costs
GRAPH = Arg("graph", "Graph", "text: the graph's entry point name", DRIVER)
OPS = Arg("ops", "Ops", "arithmetic operations of the graph's operators (a multiply-add counts 2)", DRIVER)
MODELLED_NS = Arg("modelled_ns", "Modelled ns", "ns: the operators' modelled time on the profile's GPU", DRIVER)
OPERATORS = Arg("operators", "Operators", "JSON list: each operator's {operator, shape, ops, bytes, ns}", DRIVER)
VERTEX_CYCLES = Arg("vertex_cycles", "Vertex cycles", "shader-core cycles per vertex the timing used (compiler model)",
                    DRIVER)
FRAGMENT_CYCLES = Arg("fragment_cycles", "Fragment cycles",
                      "shader-core cycles per fragment the timing used (compiler model or measured)", DRIVER)
SHADER_COST = Arg("shader_cost", "Shader cost", "text: what the timing used (measured block executions)", DRIVER)
# icd/measured_counters.py (TESSERA_COUNTERS=measured): which counters the backend's pipeline-statistics
# queries counted
MEASURED = Arg("measured", "Measured", "text: the counters measured, not modelled (comma-separated)", DRIVER)
# icd/counters.py: the phase's Mali counters, one arg each, named as Arm's database names them (every
# machine name starts with "Mali"; schemas/counters_table.py), the values docs/counters.md defines
COUNTER = Arg("counter", "Mali{counter}", "the counter's units (schemas/counters_table.py): this phase's count",
              DRIVER)

# ---- the layer's (WORKLOAD, ANNEX fields: the merge writes each under its own name) -------------
_LAYER = [
    ("kind", "text: render_pass, dispatch, trace_rays, buffer_transfer, image_transfer, tensor_copy, "
             "acceleration_structure_build, acceleration_structure_copy, data_graph"),
    ("device", "Vulkan handle"), ("command_buffer", "Vulkan handle"),
    ("command", "text: Vulkan command"), ("labels", "JSON list of the application's labels, outermost first"),
    ("annex", "bool: parts come per submit (ANNEX)"), ("internal", "text: the layer's own work, by name"),
    ("width", "pixels or rays"), ("height", "pixels or rays"), ("depth", "rays"),
    ("render_area", "pixels [x, y, width, height]"), ("subpass_count", "subpasses"),
    ("draw_call_count", "draw calls"), ("dynamic", "bool: dynamic rendering"),
    ("attachments", "JSON list of attachments"), ("groups", "work groups [x, y, z]"),
    ("base_group", "work group [x, y, z]"), ("group_size", "invocations per group [x, y, z]"),
    ("items", "invocations"), ("indirect", "bool"), ("subtype", "text: the finer kind (Arm's stage name)"),
    ("bytes", "bytes"), ("pixels", "pixels"), ("regions", "copy regions"), ("primitives", "triangles + AABBs"),
    ("instances", "instances"), ("structures", "JSON list, one per build info"),
    ("copy_mode", "text: clone, compact, serialize, deserialize"),
    ("draws", "JSON list of indirect draws' arguments"), ("parts", "render pass parts"),
    ("content", "JSON list: each draw's content metrics (tessera run --content, layer/content.py)"),
    ("layers", "render pass layers"),
    ("attachment_usage", "JSON list: VkImageUsageFlags of each attachment's image (-1: unknown)"),
    ("resources", "JSON: raw handles of the attachments' images, a transfer's src and dst, the images read "
                  "through descriptors (--content) (under handles.)"),
]
LAYER_ARGS = tuple(Arg(key, key, unit, LAYER) for key, unit in _LAYER)
KIND_FIELD = "kind"                       # the layer's workload class: supersedes the driver's WORKLOAD
HANDLE_FIELDS = ("device", "command_buffer", "resources")     # raw Vulkan handles: written last, under HANDLES

# ---- hostd's (the merge derives them) -------------------------------------------------------
TAG = Arg("tag", "tag", "the workload's tagID", HOSTD)
SUBMIT = Arg("submit", "submit", "the submit's ID (the ANNEX used)", HOSTD)
MISSING = Arg("metadata", "metadata", "text: `missing` when the join found no metadata", HOSTD)
HANDLES = Arg("handles", "handles.{field}", "HANDLE_FIELDS, grouped after every meaningful arg", HOSTD)
LAYER_TWIN = Arg("layer_twin", "layer {field}", "a layer field whose name a kept driver entry has", HOSTD)
DRIVER_TWIN = Arg("driver_twin", "{label} (driver)", "a driver value the layer's known value disagrees with", HOSTD)
REGION_COUNTER = Arg("region_counter", "Regions {counter}", "JSON: max, mean, hottest, subpass, layer", HOSTD)
REGION_HEATMAPS = Arg("region_heatmaps", "Regions heatmaps", "path pattern of the PNGs in the session", HOSTD)
# shader cost (hostd/shaders.py, --instrument): thread-operations per Mali pipe
SHADER_ACTIONS = Arg("shader_actions", "Shader actions", "draws and dispatches measured", HOSTD)
SHADER_OPS = Arg("shader_ops", "Shader thread-ops", "thread-operations", HOSTD)
SHADER_PIPE = Arg("shader_pipe", "Shader {pipe}", "thread-operations of one pipe", HOSTD)
SHADER_INVOCATIONS = Arg("shader_invocations", "Shader invocations ({stage})", "invocations", HOSTD)
SHADER_LARGEST = Arg("shader_largest", "Shader largest pipe", "text: pipe name", HOSTD)
SHADER_BOUND = Arg("shader_bound", "Shader bound pipe", "text: pipe name", HOSTD)
SHADER_TOP_DRAW = Arg("shader_top_draw", "Shader top draw {n}", "text: draw #<i>: <thread-ops>", HOSTD)

DRIVER_ARGS = (LABEL, LABEL_STACK, TRANSFER, WORKLOAD, COMMAND, AREA, DRAWS, VERTICES, SUBPASSES, PARTS, ESTIMATED,
               ITEMS, GROUPS, GROUP_SIZE, BASE_GROUP, WIDTH, HEIGHT, DEPTH, BYTES, PIXELS, REGIONS, COPY_MODE,
               PRIMITIVES, INSTANCES, STRUCTURES, BUFFER_COPIES, SRC_SHAPE, DST_SHAPE, RANK, SRC_TENSOR, DST_TENSOR,
               VERTEX_CYCLES, FRAGMENT_CYCLES, SHADER_COST, MEASURED, COUNTER, GRAPH, OPS, MODELLED_NS, OPERATORS)
HOSTD_ARGS = (TAG, SUBMIT, MISSING, HANDLES, LAYER_TWIN, DRIVER_TWIN, REGION_COUNTER, REGION_HEATMAPS,
              SHADER_ACTIONS, SHADER_OPS, SHADER_PIPE, SHADER_INVOCATIONS, SHADER_LARGEST, SHADER_BOUND,
              SHADER_TOP_DRAW)
TABLE = DRIVER_ARGS + LAYER_ARGS + HOSTD_ARGS

# The driver's label of each of its keys: Work.info keys become args through it (icd/timeline.py).
DRIVER_LABELS: dict[str, str] = {a.key: a.label for a in DRIVER_ARGS}
# A driver entry's label -> the layer field stating the same fact (hostd/slice_args.py reconciles them).
SAME_FACT: dict[str, str] = {a.label: a.same_as for a in DRIVER_ARGS if a.same_as is not None}

# WORKLOAD values: the driver's work kind (icd/recording.py Work.kind; a render pass) -> the text written.
WORKLOAD_CLASSES: dict[str, str] = {
    "render_pass": "render pass", "dispatch": "dispatch", "trace_rays": "trace rays", "transfer": "transfer",
    "acceleration_structure_build": "acceleration structure build",
    "acceleration_structure_copy": "acceleration structure copy",
    "data_graph": "data graph",        # vkCmdDispatchDataGraphARM (icd/data_graph/)
}
# ESTIMATED values -> the driver keys whose values they call guesses.
INDIRECT_SIZES = "indirect sizes"
INDIRECT_DRAW_SIZES = "indirect draw sizes"
MAXIMUM_PRIMITIVE_COUNTS = "maximum primitive counts"
ESTIMATES: dict[str, tuple[str, ...]] = {
    INDIRECT_SIZES: (GROUPS.key, ITEMS.key, WIDTH.key, HEIGHT.key, DEPTH.key),
    INDIRECT_DRAW_SIZES: (VERTICES.key,),           # the layer has no vertex counts: the note stays
    MAXIMUM_PRIMITIVE_COUNTS: (PRIMITIVES.key, INSTANCES.key),
}


def row_of(name: str) -> Arg | None:
    """The row whose label is `name`, else the one whose template (`{…}`) it fills, the template
    with the most fixed text first; None for an arg the table does not know."""
    for a in TABLE:
        if a.label == name:
            return a
    for fixed, head, tail, a in _TEMPLATES:
        if len(name) > fixed and name.startswith(head) and name.endswith(tail):
            return a
    return None


def _template(a: Arg) -> tuple[int, str, str, Arg]:
    head, _, rest = a.label.partition("{")
    tail = rest.partition("}")[2]
    return len(head) + len(tail), head, tail, a


_TEMPLATES = sorted((_template(a) for a in TABLE if "{" in a.label), key=lambda t: -t[0])
