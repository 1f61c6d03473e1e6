"""Lowering of SPV_ARM_core_builtins, for a driver whose backend lacks them.

The emulated Mali exposes VK_ARM_shader_core_builtins; the backend that
executes the shaders does not know the built-ins, so they are replaced
before it sees the module:

- CoreCountARM, CoreMaxIDARM, WarpMaxIDARM: constants of the GPU profile;
- CoreIDARM, WarpIDARM: a deterministic placement. In a compute (or task,
  mesh) entry point the work group runs on core (flat work-group index) mod
  `cores` and each invocation in warp (LocalInvocationIndex / warp_width)
  mod `warps`, with flat index = x + X·(y + Y·z) over WorkgroupId and
  NumWorkgroups; in other stages both are 0.

Each built-in variable becomes a Private variable with the same id (its
loads stay as they are; its decorations go): the constants are its initializer, the placement
is stored at the start of each entry point's function. The capability and
extension go away; interfaces are fixed for the module's SPIR-V version.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..editor import ModuleEditor
from ..grammar import grammar
from ..module import Instruction, Module
from ..operands import decode_string

CONSTANT_BUILTINS = ("CoreCountARM", "CoreMaxIDARM", "WarpMaxIDARM")
PLACED_BUILTINS = ("CoreIDARM", "WarpIDARM")
GROUP_MODELS = ("GLCompute", "TaskEXT", "MeshEXT", "TaskNV", "MeshNV")


@dataclass(frozen=True)
class CoreTopology:
    cores: int
    warps_per_core: int
    warp_width: int

    def value(self, builtin: str) -> int:
        return {"CoreCountARM": self.cores, "CoreMaxIDARM": self.cores - 1,
                "WarpMaxIDARM": self.warps_per_core - 1}[builtin]


def uses_core_builtins(module: Module) -> bool:
    g = grammar()
    capability, value = g.opcode("OpCapability"), g.enum_value("Capability", "CoreBuiltinsARM")
    return any(i.opcode == capability and i.words[0] == value for i in module.globals)


def lower_core_builtins(module: Module, topology: CoreTopology) -> bool:
    """Lower the ARM core built-ins of `module` in place; False when it has none."""
    if not uses_core_builtins(module):
        return False
    ed = ModuleEditor(module)
    g = ed.g
    op = g.opcode
    builtin_kind = {g.enum_value("BuiltIn", name): name for name in CONSTANT_BUILTINS + PLACED_BUILTINS}
    decorations = [i for i in module.globals if i.opcode == op("OpDecorate")
                   and i.words[1] == g.enum_value("Decoration", "BuiltIn") and i.words[2] in builtin_kind]
    uint = ed.type_int(32)
    private_uint = ed.type_pointer("Private", uint)
    placed: dict[str, int] = {}
    lowered: list[int] = []
    for deco in decorations:
        name, var = builtin_kind[deco.words[2]], deco.words[0]
        inst = module.defs[var]
        value = topology.value(name) if name in CONSTANT_BUILTINS else 0
        init = ed.constant_uint(value)
        ed.remove(inst)   # re-placed after the pointer type and constant it now uses
        inst.words[:] = [private_uint, var, g.enum_value("StorageClass", "Private"), init]
        inst.type_id = private_uint
        ed.add_global(inst)
        lowered.append(var)
        if name in PLACED_BUILTINS:
            placed[name] = var
    # Every decoration of an input (BuiltIn, and Flat on fragment inputs) is invalid on a Private variable.
    for inst in [i for i in module.globals if i.opcode == op("OpDecorate") and i.words[0] in lowered]:
        ed.remove(inst)
    _fix_interfaces(ed, lowered)
    if placed:
        _store_placement(ed, topology, placed, uint)
    for inst in list(module.globals):
        if inst.opcode == op("OpCapability") and inst.words[0] == g.enum_value("Capability", "CoreBuiltinsARM"):
            ed.remove(inst)
        elif inst.opcode == op("OpExtension") and decode_string(inst.words, 0)[0] == "SPV_ARM_core_builtins":
            ed.remove(inst)
    return True


def _entry_points(ed: ModuleEditor) -> list[Instruction]:
    return [i for i in ed.module.globals if i.opcode == ed.g.opcode("OpEntryPoint")]


def _fix_interfaces(ed: ModuleEditor, variables: list[int]) -> None:
    """Before SPIR-V 1.4 an interface lists only Input/Output variables: drop the now-Private ones."""
    if ed.module.version_tuple >= (1, 4):
        return
    drop = set(variables)
    for entry in _entry_points(ed):
        _, end = decode_string(entry.words, 2)
        entry.words[end:] = [w for w in entry.words[end:] if w not in drop]


def _builtin_input(ed: ModuleEditor, builtin: str, type_id: int) -> int:
    """The Input variable of a built-in, declared if the module lacks it, in every interface."""
    g, op = ed.g, ed.g.opcode
    value = g.enum_value("BuiltIn", builtin)
    for inst in ed.module.globals:
        if inst.opcode == op("OpDecorate") and inst.words[1] == g.enum_value("Decoration", "BuiltIn") \
                and inst.words[2] == value:
            var = inst.words[0]
            break
    else:
        var = ed.add_variable(ed.type_pointer("Input", type_id), "Input")
        ed.decorate(var, "BuiltIn", value)
    ed.add_to_interface(var)
    return var


def _store_placement(ed: ModuleEditor, topo: CoreTopology, placed: dict[str, int], uint: int) -> None:
    g = ed.g
    models = {g.enum_value("ExecutionModel", m) for m in GROUP_MODELS if m in g.enums["ExecutionModel"].values}
    compute_entries = [e.words[1] for e in _entry_points(ed) if e.words[0] in models]
    if not compute_entries:
        return   # other stages keep the initial 0
    v3 = ed.type("OpTypeVector", uint, 3)
    group_id = _builtin_input(ed, "WorkgroupId", v3)
    groups = _builtin_input(ed, "NumWorkgroups", v3)
    local_index = _builtin_input(ed, "LocalInvocationIndex", uint)
    const = ed.constant_uint
    for function_id in dict.fromkeys(compute_entries):
        code: list[Instruction] = []

        def emit(opname: str, *operands: int) -> int:
            inst = ed.make(opname, *operands)
            code.append(inst)
            return inst.result_id

        wg, nwg = emit("OpLoad", v3, group_id), emit("OpLoad", v3, groups)
        x, y, z = (emit("OpCompositeExtract", uint, wg, i) for i in range(3))
        nx, ny = (emit("OpCompositeExtract", uint, nwg, i) for i in range(2))
        flat = emit("OpIAdd", uint, x, emit("OpIMul", uint, nx, emit("OpIAdd", uint, y, emit("OpIMul", uint, ny, z))))
        if "CoreIDARM" in placed:
            core = emit("OpUMod", uint, flat, const(topo.cores))
            code.append(ed.make("OpStore", placed["CoreIDARM"], core))
        if "WarpIDARM" in placed:
            lii = emit("OpLoad", uint, local_index)
            warp = emit("OpUMod", uint, emit("OpUDiv", uint, lii, const(topo.warp_width)), const(topo.warps_per_core))
            code.append(ed.make("OpStore", placed["WarpIDARM"], warp))
        ed.insert_at_block_start(ed.module.function(function_id).blocks[0], code)
