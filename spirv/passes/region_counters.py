"""Per-region fragment counters (VK_ARM_performance_counters_by_region in the emulated Mali).

Role: rewrites one fragment shader so that every fragment invocation adds what it did to the
counters of its framebuffer region, in a storage buffer at a reserved descriptor set and binding.
The driver (icd/regions/) fills the buffer's header per render pass instance and reads nothing
back itself: the data part has exactly the application's layout (vk.xml region/row strides), so
the driver copies it to the application's addresses when the pass ends.

Buffer (uint32 words, at the descriptor's dynamic offset):

    header[0..1]   render-area origin (x, y) in framebuffer pixels
    header[2..4]   columns, rows, layers (arrays) of this subpass
    header[5..7]   row stride, region stride, layer stride (words, relative to DATA)
    header[8]      scratch word: what falls outside the grid, or an unselected counter, goes here
    header[9+k]    slot of raw counter k (RAW_COUNTERS order) inside a region, NONE if not captured
    DATA = HEADER_WORDS: the regions, layer-major, then rows, then columns

What the shader adds, per invocation (helper invocations add nothing: their atomics have no
effect, Vulkan "Helper Invocations"):

- at the entry point's first block: `threads` += 1, `samples` += popcount(SampleMaskIn[0]);
- at every block start (all functions): a Private accumulator per pipe += the compiler model's
  thread-operations of one execution of that block (integers, BlockCost.ops rounded);
- before OpReturn/OpReturnValue of the entry function, and before every OpKill,
  OpTerminateInvocation and OpDemoteToHelperInvocation: the accumulators are added to the pipe
  counters (one atomic each), and at the three discard instructions `killed` += 1.

The region is ((x - origin.x) / region_width, (y - origin.y) / region_height) of
ivec2(gl_FragCoord.xy); the layer is gl_ViewIndex (multiview pipelines), gl_Layer (pipelines
whose geometry stage selects it) or 0 (spec: without a Layer write everything goes to layer 0).
Fragments outside the grid (possible only outside the render area) count into the scratch word.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..editor import ModuleEditor
from ..errors import SpirvError
from ..module import Module
from ..reflect import descriptor_bindings, find_entry_point

SCOPE_DEVICE = 1
SEMANTICS_RELAXED = 0
NONE = 0xFFFFFFFF
RAW_COUNTERS = ("threads", "samples", "killed", "fma", "cvt", "sfu", "ls", "tex", "var")
PIPES = ("fma", "cvt", "sfu", "ls", "tex", "var")
HEADER_ORIGIN_X, HEADER_ORIGIN_Y, HEADER_COLUMNS, HEADER_ROWS, HEADER_LAYERS = 0, 1, 2, 3, 4
HEADER_ROW_STRIDE, HEADER_REGION_STRIDE, HEADER_LAYER_STRIDE, HEADER_SCRATCH, HEADER_SLOTS = 5, 6, 7, 8, 9
HEADER_WORDS = 32
LAYER_SOURCES = (None, "view", "layer")


@dataclass(frozen=True, slots=True)
class RegionCounterPass:
    """What a rewrite added (for the driver's checks)."""

    descriptor_set: int
    binding: int
    blocks: int
    flush_points: int


def add_region_counters(module: Module, entry_name: str, descriptor_set: int, binding: int,
                        region_size: tuple[int, int], block_ops: list[dict[str, int]],
                        layer_source: str | None = None) -> RegionCounterPass:
    """Rewrite the fragment entry point `entry_name` of `module` in place.

    `block_ops[b]`: pipe -> thread-operations of one execution of global block b (docs/spirv.md
    numbering; pipes not listed are 0). `layer_source`: None, "view" or "layer" (see module doc).
    """
    if layer_source not in LAYER_SOURCES:
        raise SpirvError(f"layer source {layer_source!r} is not one of {LAYER_SOURCES}")
    if any(b.set == descriptor_set and b.binding == binding for b in descriptor_bindings(module)):
        raise SpirvError(f"descriptor set {descriptor_set} binding {binding} is already used by the module")
    point = find_entry_point(module, entry_name, "Fragment")
    total_blocks = sum(len(f.blocks) for f in module.functions)
    if len(block_ops) != total_blocks:
        raise SpirvError(f"{len(block_ops)} block costs for {total_blocks} blocks")
    ed = ModuleEditor(module)
    op = ed.g.opcode
    modern = module.version_tuple >= (1, 3)
    storage = "StorageBuffer" if modern else "Uniform"
    uint, sint = ed.type_int(32, False), ed.type_int(32, True)
    boolean = ed.type("OpTypeBool")
    f32 = ed.type("OpTypeFloat", 32)
    vec4 = ed.type("OpTypeVector", f32, 4)
    const = ed.constant_uint

    array = ed.type("OpTypeRuntimeArray", uint)
    ed.decorate(array, "ArrayStride", 4)
    block_type = ed.type("OpTypeStruct", array)
    ed.decorate(block_type, "Block" if modern else "BufferBlock")
    ed.decorate_member(block_type, 0, "Offset", 0)
    ed.name(block_type, "TesseraRegionCounters")
    counters = ed.add_variable(ed.type_pointer(storage, block_type), storage, descriptor_set, binding,
                               name="tessera_region_counters")
    ed.add_to_interface(counters)
    element = ed.type_pointer(storage, uint)
    private_uint = ed.type_pointer("Private", uint)
    zero = const(0)

    frag_coord = _builtin_input(ed, "FragCoord", vec4)
    sample_mask = _builtin_input(ed, "SampleMask", ed.type("OpTypeArray", sint, const(1)))
    layer_var = None
    if layer_source == "view":
        ed.add_capability("MultiView")
        if module.version_tuple < (1, 3):
            ed.add_extension("SPV_KHR_multiview")
        layer_var = _builtin_input(ed, "ViewIndex", sint, flat=True)
    elif layer_source == "layer":
        ed.add_capability("Geometry")
        layer_var = _builtin_input(ed, "Layer", sint, flat=True)

    base_var = ed.add_global(ed.make("OpVariable", private_uint, ed.g.enum_value("StorageClass", "Private"),
                                     const(NONE))).result_id
    ed.name(base_var, "tessera_region_base")
    ed.add_to_interface(base_var)
    accumulators = {}
    for pipe in PIPES:
        var = ed.add_global(ed.make("OpVariable", private_uint, ed.g.enum_value("StorageClass", "Private"),
                                    zero)).result_id
        ed.name(var, f"tessera_region_{pipe}")
        ed.add_to_interface(var)
        accumulators[pipe] = var

    def header(code: list, index: int) -> int:
        chain = ed.make("OpAccessChain", element, counters, zero, const(index))
        load = ed.make("OpLoad", uint, chain.result_id)
        code += [chain, load]
        return load.result_id

    def emit(code: list, opname: str, *operands: int) -> int:
        inst = ed.make(opname, *operands)
        code.append(inst)
        return inst.result_id

    def add_to(code: list, counter: str, value: int) -> None:
        """counters[base + slot(counter)] += value, or the scratch word when not captured."""
        slot = header(code, HEADER_SLOTS + RAW_COUNTERS.index(counter))
        base = emit(code, "OpLoad", uint, base_var)
        ok = emit(code, "OpLogicalAnd", boolean, emit(code, "OpINotEqual", boolean, slot, const(NONE)),
                  emit(code, "OpINotEqual", boolean, base, const(NONE)))
        index = emit(code, "OpSelect", uint, ok, emit(code, "OpIAdd", uint, base, slot), const(HEADER_SCRATCH))
        chain = emit(code, "OpAccessChain", element, counters, zero, index)
        emit(code, "OpAtomicIAdd", uint, chain, const(SCOPE_DEVICE), const(SEMANTICS_RELAXED), value)

    def flush(killed: bool) -> list:
        code: list = []
        for pipe in PIPES:
            add_to(code, pipe, emit(code, "OpLoad", uint, accumulators[pipe]))
            code.append(ed.make("OpStore", accumulators[pipe], zero))
        if killed:
            add_to(code, "killed", const(1))
        return code

    # Entry: the region of this fragment, then threads and samples.
    entry_code: list = []
    coord = emit(entry_code, "OpLoad", vec4, frag_coord)
    px = emit(entry_code, "OpConvertFToU", uint, emit(entry_code, "OpCompositeExtract", f32, coord, 0))
    py = emit(entry_code, "OpConvertFToU", uint, emit(entry_code, "OpCompositeExtract", f32, coord, 1))
    rx = emit(entry_code, "OpUDiv", uint, emit(entry_code, "OpISub", uint, px, header(entry_code, HEADER_ORIGIN_X)),
              const(region_size[0]))
    ry = emit(entry_code, "OpUDiv", uint, emit(entry_code, "OpISub", uint, py, header(entry_code, HEADER_ORIGIN_Y)),
              const(region_size[1]))
    if layer_var is not None:
        layer = emit(entry_code, "OpBitcast", uint, emit(entry_code, "OpLoad", sint, layer_var))
    else:
        layer = zero
    inside = emit(entry_code, "OpLogicalAnd", boolean,
                  emit(entry_code, "OpULessThan", boolean, rx, header(entry_code, HEADER_COLUMNS)),
                  emit(entry_code, "OpULessThan", boolean, ry, header(entry_code, HEADER_ROWS)))
    inside = emit(entry_code, "OpLogicalAnd", boolean, inside,
                  emit(entry_code, "OpULessThan", boolean, layer, header(entry_code, HEADER_LAYERS)))
    offset = emit(entry_code, "OpIAdd", uint,
                  emit(entry_code, "OpIMul", uint, layer, header(entry_code, HEADER_LAYER_STRIDE)),
                  emit(entry_code, "OpIAdd", uint,
                       emit(entry_code, "OpIMul", uint, ry, header(entry_code, HEADER_ROW_STRIDE)),
                       emit(entry_code, "OpIMul", uint, rx, header(entry_code, HEADER_REGION_STRIDE))))
    base = emit(entry_code, "OpIAdd", uint, offset, const(HEADER_WORDS))
    entry_code.append(ed.make("OpStore", base_var, emit(entry_code, "OpSelect", uint, inside, base, const(NONE))))
    add_to(entry_code, "threads", const(1))
    mask_chain = emit(entry_code, "OpAccessChain", ed.type_pointer("Input", sint), sample_mask, zero)
    mask = emit(entry_code, "OpBitcast", uint, emit(entry_code, "OpLoad", sint, mask_chain))
    add_to(entry_code, "samples", emit(entry_code, "OpBitCount", uint, mask))

    # Every block: the pipes' thread-operations; flush points before returns and discards.
    kills = {op("OpKill"), op("OpTerminateInvocation")}
    demote = op("OpDemoteToHelperInvocation") if "OpDemoteToHelperInvocation" in ed.g.by_name else -1
    returns = {op("OpReturn"), op("OpReturnValue")}
    entry_function = point.function_id
    global_index, flushes = 0, 0
    for function in module.functions:
        for block in function.blocks:
            ops = block_ops[global_index]
            global_index += 1
            # Flush points first (positions shift once code is inserted at the start).
            body = block.instructions
            for position in range(len(body) - 1, 0, -1):
                inst = body[position]
                is_return = inst.opcode in returns and function.id == entry_function
                if inst.opcode in kills or inst.opcode == demote or is_return:
                    code = flush(killed=not is_return)
                    body[position:position] = code
                    flushes += 1
            start: list = []
            for pipe in PIPES:
                amount = int(round(ops.get(pipe, 0)))
                if amount:
                    value = emit(start, "OpIAdd", uint, emit(start, "OpLoad", uint, accumulators[pipe]),
                                 const(amount))
                    start.append(ed.make("OpStore", accumulators[pipe], value))
            if function.id == entry_function and block is function.blocks[0]:
                start = entry_code + start
            if start:
                ed.insert_at_block_start(block, start)
    return RegionCounterPass(descriptor_set, binding, total_blocks, flushes)


def _builtin_input(ed: ModuleEditor, builtin: str, type_id: int, flat: bool = False) -> int:
    """The Input variable decorated BuiltIn `builtin` (declared when the module lacks one), in
    every entry point's interface."""
    g, op = ed.g, ed.g.opcode
    value = g.enum_value("BuiltIn", builtin)
    input_class = g.enum_value("StorageClass", "Input")
    for inst in ed.module.globals:
        if inst.opcode == op("OpDecorate") and inst.words[1] == g.enum_value("Decoration", "BuiltIn") \
                and inst.words[2] == value:
            var = ed.module.defs.get(inst.words[0])
            if var is not None and var.opcode == op("OpVariable") and var.words[2] == input_class:
                ed.add_to_interface(var.result_id)
                return var.result_id
    var = ed.add_variable(ed.type_pointer("Input", type_id), "Input")
    ed.decorate(var, "BuiltIn", value)
    if flat:
        ed.decorate(var, "Flat")
    ed.add_to_interface(var)
    return var
