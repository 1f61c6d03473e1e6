"""Reflection: what a driver or layer needs to know about a module.

Role: entry points and execution models, execution modes, the exact
work-group size after specialization (`workgroup_size`, called by the layer
and the emulated driver at pipeline creation), specialization constants,
descriptor bindings with their Vulkan descriptor types, push-constant blocks,
the input/output interface, and per function the CFG (cfg.py numbering) and
the call graph. `reflection_json` gives the JSON the CLI prints.

Work-group size precedence follows the specification: a constant decorated
BuiltIn WorkgroupSize wins over LocalSizeId, which wins over LocalSize.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

from .cfg import FunctionCFG, call_graph, module_cfgs, names, reachable_functions
from .decoder import parse
from .errors import SpirvError
from .grammar import grammar
from .module import Module
from .operands import decode_string, referenced_ids
from .spec import SpecConstant, SpecValue, evaluate_constants, spec_constants

OP_ENTRY_POINT = 15
OP_EXECUTION_MODE = 16
OP_EXECUTION_MODE_ID = 331
OP_DECORATE = 71
OP_MEMBER_DECORATE = 72
OP_VARIABLE = 59
OP_TYPE_BOOL = 20
OP_TYPE_INT = 21
OP_TYPE_FLOAT = 22
OP_TYPE_VECTOR = 23
OP_TYPE_MATRIX = 24
OP_TYPE_IMAGE = 25
OP_TYPE_SAMPLER = 26
OP_TYPE_SAMPLED_IMAGE = 27
OP_TYPE_ARRAY = 28
OP_TYPE_RUNTIME_ARRAY = 29
OP_TYPE_STRUCT = 30
OP_TYPE_POINTER = 32
OP_TYPE_ACCELERATION_STRUCTURE = 5341
OP_TYPE_TENSOR_ARM = 4163
DIM_BUFFER = 5
DIM_SUBPASS_DATA = 6
BUILTIN_WORKGROUP_SIZE = 25


@dataclass(slots=True)
class ExecutionMode:
    name: str
    operands: list[int]  # literals, or ids for *Id modes


@dataclass(slots=True)
class EntryPoint:
    name: str
    execution_model: str
    function_id: int
    interface: list[int]
    execution_modes: list[ExecutionMode] = field(default_factory=list)


@dataclass(slots=True)
class DescriptorBinding:
    set: int
    binding: int
    descriptor_type: str  # VK_DESCRIPTOR_TYPE_* name
    count: int            # array size; 0 for a runtime-sized array
    variable_id: int
    name: str | None
    type_name: str


@dataclass(slots=True)
class PushConstantBlock:
    variable_id: int
    name: str | None
    type_name: str
    size: int


@dataclass(slots=True)
class InterfaceVariable:
    variable_id: int
    name: str | None
    storage_class: str
    type_name: str
    location: int | None = None
    component: int | None = None
    builtin: str | None = None


@dataclass(slots=True)
class Reflection:
    version: tuple[int, int]
    entry_points: list[EntryPoint]
    spec_constants: list[SpecConstant]
    constant_values: dict[int, object]
    bindings: list[DescriptorBinding]
    push_constants: list[PushConstantBlock]
    functions: list[FunctionCFG]
    call_graph: dict[int, list[int]]
    module: Module


def as_module(module: Module | bytes | bytearray | memoryview | Sequence[int]) -> Module:
    """A Module, parsing bytes or words if needed."""
    return module if isinstance(module, Module) else parse(module)


class _Decorations:
    """Decorations by target id and by (struct id, member)."""

    def __init__(self, module: Module) -> None:
        g = grammar()
        self.by_id: dict[int, dict[str, list[int]]] = {}
        self.by_member: dict[tuple[int, int], dict[str, list[int]]] = {}
        for inst in module.globals:
            if inst.opcode == OP_DECORATE and len(inst.words) >= 2:
                name = g.enum_name("Decoration", inst.words[1])
                self.by_id.setdefault(inst.words[0], {})[name] = inst.words[2:]
            elif inst.opcode == OP_MEMBER_DECORATE and len(inst.words) >= 3:
                name = g.enum_name("Decoration", inst.words[2])
                self.by_member.setdefault((inst.words[0], inst.words[1]), {})[name] = inst.words[3:]

    def get(self, target: int, name: str) -> list[int] | None:
        return self.by_id.get(target, {}).get(name)

    def member(self, struct: int, index: int, name: str) -> list[int] | None:
        return self.by_member.get((struct, index), {}).get(name)


def entry_points(module: Module) -> list[EntryPoint]:
    """Entry points with their execution modes, in binary order."""
    g = grammar()
    points: list[EntryPoint] = []
    for inst in module.globals:
        if inst.opcode == OP_ENTRY_POINT:
            name, end = decode_string(inst.words, 2)
            points.append(EntryPoint(name, g.enum_name("ExecutionModel", inst.words[0]), inst.words[1],
                                     list(inst.words[end:])))
    for inst in module.globals:
        if inst.opcode in (OP_EXECUTION_MODE, OP_EXECUTION_MODE_ID):
            mode = ExecutionMode(g.enum_name("ExecutionMode", inst.words[1]), list(inst.words[2:]))
            for point in points:
                if point.function_id == inst.words[0]:
                    point.execution_modes.append(mode)
    return points


def find_entry_point(module: Module, name: str, model: str | None = None) -> EntryPoint:
    """The entry point called `name` (and of execution model `model` if given)."""
    for point in entry_points(module):
        if point.name == name and (model is None or point.execution_model == model):
            return point
    raise SpirvError(f"no entry point named {name!r}" + (f" with model {model}" if model else ""))


def _workgroup_size(module: Module, point: EntryPoint, values: Mapping[int, object]) -> tuple[int, int, int] | None:
    decorations = _Decorations(module)
    for target, decos in decorations.by_id.items():
        builtin = decos.get("BuiltIn")
        if builtin and builtin[0] == BUILTIN_WORKGROUP_SIZE and target in values:
            return _triple(values[target], f"WorkgroupSize constant %{target}")
    for mode in point.execution_modes:
        if mode.name == "LocalSizeId":
            return _triple(tuple(values.get(i) for i in mode.operands), "LocalSizeId operands")
    for mode in point.execution_modes:
        if mode.name == "LocalSize":
            return _triple(tuple(mode.operands), "LocalSize operands")
    return None


def _triple(value: object, what: str) -> tuple[int, int, int]:
    if not (isinstance(value, tuple) and len(value) == 3 and all(isinstance(v, int) for v in value)):
        raise SpirvError(f"{what} do not evaluate to three integers: {value!r}")
    return value[0], value[1], value[2]


def workgroup_size(module: Module | bytes | bytearray | memoryview | Sequence[int], entry_point_name: str,
                   spec_values: Mapping[int, SpecValue] | None = None) -> tuple[int, int, int]:
    """The exact (x, y, z) work-group size of an entry point after specialization.

    `spec_values` maps SpecId to an int value or to the bytes a
    VkSpecializationMapEntry points at (see spec.spec_values_from_map).
    """
    mod = as_module(module)
    point = find_entry_point(mod, entry_point_name)
    size = _workgroup_size(mod, point, evaluate_constants(mod, spec_values))
    if size is None:
        raise SpirvError(f"entry point {entry_point_name!r} ({point.execution_model}) has no work-group size")
    return size


def type_name(module: Module, type_id: int, table: Mapping[int, str] | None = None) -> str:
    """A short readable name for a type: u32, vec3<f32>, f32[4], Params, ptr<Uniform, …>."""
    g = grammar()
    t = module.defs.get(type_id)
    if t is None:
        return f"%{type_id}"
    w = t.words
    op = t.opcode
    if op == OP_TYPE_BOOL:
        return "bool"
    if op == OP_TYPE_INT:
        return f"{'i' if w[2] else 'u'}{w[1]}"
    if op == OP_TYPE_FLOAT:
        return f"f{w[1]}"
    if op == OP_TYPE_VECTOR:
        return f"vec{w[2]}<{type_name(module, w[1], table)}>"
    if op == OP_TYPE_MATRIX:
        return f"mat{w[2]}<{type_name(module, w[1], table)}>"
    if op == OP_TYPE_ARRAY:
        length = module.defs.get(w[2])
        count = length.words[2] if length is not None and length.opcode == 43 else f"%{w[2]}"
        return f"{type_name(module, w[1], table)}[{count}]"
    if op == OP_TYPE_RUNTIME_ARRAY:
        return f"{type_name(module, w[1], table)}[]"
    if op == OP_TYPE_POINTER:
        return f"ptr<{g.enum_name('StorageClass', w[1])}, {type_name(module, w[2], table)}>"
    if op == OP_TYPE_STRUCT:
        return (table or {}).get(type_id) or f"struct%{type_id}"
    return g.instructions[op].opname[len("OpType"):].lower() if g.instructions[op].opname.startswith("OpType") \
        else f"%{type_id}"


def _descriptor(module: Module, decorations: _Decorations, storage: str, pointee: int) -> tuple[str, int, int]:
    """(VK_DESCRIPTOR_TYPE_* name, array count, element type id) of a resource variable."""
    t = module.defs[pointee]
    count = 1
    if t.opcode == OP_TYPE_ARRAY:
        length = module.defs.get(t.words[2])
        count = length.words[2] if length is not None and length.opcode == 43 else 1
        t = module.defs[t.words[1]]
    elif t.opcode == OP_TYPE_RUNTIME_ARRAY:
        count = 0
        t = module.defs[t.words[1]]
    element = t.result_id
    if storage == "StorageBuffer":
        return "VK_DESCRIPTOR_TYPE_STORAGE_BUFFER", count, element
    if storage == "Uniform":
        if decorations.get(element, "BufferBlock") is not None:
            return "VK_DESCRIPTOR_TYPE_STORAGE_BUFFER", count, element
        return "VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER", count, element
    if t.opcode == OP_TYPE_SAMPLER:
        return "VK_DESCRIPTOR_TYPE_SAMPLER", count, element
    if t.opcode == OP_TYPE_SAMPLED_IMAGE:
        image = module.defs[t.words[1]]
        kind = "UNIFORM_TEXEL_BUFFER" if image.words[2] == DIM_BUFFER else "COMBINED_IMAGE_SAMPLER"
        return f"VK_DESCRIPTOR_TYPE_{kind}", count, element
    if t.opcode == OP_TYPE_IMAGE:
        dim, sampled = t.words[2], t.words[6]
        if dim == DIM_SUBPASS_DATA:
            kind = "INPUT_ATTACHMENT"
        elif dim == DIM_BUFFER:
            kind = "STORAGE_TEXEL_BUFFER" if sampled == 2 else "UNIFORM_TEXEL_BUFFER"
        else:
            kind = "STORAGE_IMAGE" if sampled == 2 else "SAMPLED_IMAGE"
        return f"VK_DESCRIPTOR_TYPE_{kind}", count, element
    if t.opcode == OP_TYPE_ACCELERATION_STRUCTURE:
        return "VK_DESCRIPTOR_TYPE_ACCELERATION_STRUCTURE_KHR", count, element
    if t.opcode == OP_TYPE_TENSOR_ARM:
        return "VK_DESCRIPTOR_TYPE_TENSOR_ARM", count, element
    return "UNKNOWN", count, element


def type_size(module: Module, type_id: int, decorations: _Decorations | None = None) -> int:
    """Byte size of a type laid out with its explicit Offset/ArrayStride/MatrixStride decorations."""
    decos = decorations or _Decorations(module)
    t = module.defs[type_id]
    w = t.words
    if t.opcode in (OP_TYPE_INT, OP_TYPE_FLOAT):
        return w[1] // 8
    if t.opcode == OP_TYPE_BOOL:
        return 4
    if t.opcode == OP_TYPE_VECTOR:
        return w[2] * type_size(module, w[1], decos)
    if t.opcode == OP_TYPE_MATRIX:
        return w[2] * type_size(module, w[1], decos)
    if t.opcode == OP_TYPE_ARRAY:
        length = module.defs[w[2]].words[2]
        stride = decos.get(type_id, "ArrayStride")
        return length * (stride[0] if stride else type_size(module, w[1], decos))
    if t.opcode == OP_TYPE_RUNTIME_ARRAY:
        return 0
    if t.opcode == OP_TYPE_STRUCT:
        end = 0
        for index, member in enumerate(w[1:]):
            offset = decos.member(type_id, index, "Offset")
            start = offset[0] if offset else end
            size = type_size(module, member, decos)
            stride = decos.member(type_id, index, "MatrixStride")
            member_type = module.defs[member]
            if stride and member_type.opcode == OP_TYPE_MATRIX:
                size = member_type.words[2] * stride[0]
            end = max(end, start + size)
        return end
    return 0


def _global_variables(module: Module) -> list[tuple[int, str, int]]:
    """(variable id, storage class name, pointee type id) of module-scope variables."""
    g = grammar()
    out = []
    for inst in module.globals:
        if inst.opcode == OP_VARIABLE:
            pointer = module.defs.get(inst.type_id)
            pointee = pointer.words[2] if pointer is not None and pointer.opcode == OP_TYPE_POINTER else 0
            out.append((inst.result_id, g.enum_name("StorageClass", inst.words[2]), pointee))
    return out


def used_globals(module: Module, point: EntryPoint) -> set[int]:
    """Module-scope variables the entry point's static call tree references."""
    variables = {v for v, _, _ in _global_variables(module)}
    used: set[int] = set(v for v in point.interface if v in variables)
    if module.version_tuple >= (1, 4):
        return used
    wanted = set(reachable_functions(module, point.function_id))
    for function in module.functions:
        if function.id in wanted:
            for inst in function.instructions():
                used.update(i for i in referenced_ids(inst, module) if i in variables)
    return used


def interface_variables(module: Module, point: EntryPoint, table: Mapping[int, str] | None = None
                        ) -> list[InterfaceVariable]:
    """The Input and Output variables of an entry point's interface."""
    g = grammar()
    decos = _Decorations(module)
    by_id = {v: (sc, pointee) for v, sc, pointee in _global_variables(module)}
    table = table if table is not None else names(module)
    out: list[InterfaceVariable] = []
    for var in point.interface:
        storage, pointee = by_id.get(var, ("", 0))
        if storage not in ("Input", "Output"):
            continue
        item = InterfaceVariable(var, table.get(var), storage, type_name(module, pointee, table))
        location = decos.get(var, "Location")
        component = decos.get(var, "Component")
        builtin = decos.get(var, "BuiltIn")
        item.location = location[0] if location else None
        item.component = component[0] if component else None
        if builtin:
            item.builtin = g.enum_name("BuiltIn", builtin[0])
        elif pointee and module.defs[pointee].opcode == OP_TYPE_STRUCT:
            member = decos.member(pointee, 0, "BuiltIn")
            item.builtin = g.enum_name("BuiltIn", member[0]) if member else None
        out.append(item)
    return out


def descriptor_bindings(module: Module, table: Mapping[int, str] | None = None) -> list[DescriptorBinding]:
    """Every variable with DescriptorSet and Binding decorations, sorted by (set, binding)."""
    decos = _Decorations(module)
    table = table if table is not None else names(module)
    out: list[DescriptorBinding] = []
    for var, storage, pointee in _global_variables(module):
        dset, binding = decos.get(var, "DescriptorSet"), decos.get(var, "Binding")
        if dset is None or binding is None or not pointee:
            continue
        kind, count, element = _descriptor(module, decos, storage, pointee)
        out.append(DescriptorBinding(dset[0], binding[0], kind, count, var, table.get(var),
                                     type_name(module, element, table)))
    return sorted(out, key=lambda b: (b.set, b.binding, b.variable_id))


def push_constant_blocks(module: Module, table: Mapping[int, str] | None = None) -> list[PushConstantBlock]:
    """PushConstant variables with their block size in bytes."""
    decos = _Decorations(module)
    table = table if table is not None else names(module)
    return [PushConstantBlock(var, table.get(var), type_name(module, pointee, table), type_size(module, pointee, decos))
            for var, storage, pointee in _global_variables(module) if storage == "PushConstant"]


def reflect(module: Module | bytes | bytearray | memoryview | Sequence[int],
            spec_values: Mapping[int, SpecValue] | None = None) -> Reflection:
    """Everything above for one module."""
    mod = as_module(module)
    table = names(mod)
    return Reflection(mod.version_tuple, entry_points(mod), spec_constants(mod), evaluate_constants(mod, spec_values),
                      descriptor_bindings(mod, table), push_constant_blocks(mod, table), module_cfgs(mod),
                      call_graph(mod), mod)


def reflection_json(refl: Reflection, entry: str | None = None) -> dict:
    """JSON-ready reflection; with `entry`, only that entry point and what it uses."""
    mod = refl.module
    table = names(mod)
    points = [p for p in refl.entry_points if entry is None or p.name == entry]
    if entry is not None and not points:
        raise SpirvError(f"no entry point named {entry!r}")
    wanted_functions: set[int] | None = None
    if entry is not None:
        wanted_functions = set()
        for p in points:
            wanted_functions.update(reachable_functions(mod, p.function_id))
    out_points = []
    used_vars: set[int] = set()
    for p in points:
        used = used_globals(mod, p)
        used_vars |= used
        size = _workgroup_size(mod, p, refl.constant_values)
        out_points.append({
            "name": p.name,
            "execution_model": p.execution_model,
            "function": p.function_id,
            "execution_modes": [{"mode": m.name, "operands": m.operands} for m in p.execution_modes],
            "workgroup_size": list(size) if size else None,
            "interface": [asdict(v) for v in interface_variables(mod, p, table)],
            "bindings": sorted([b.set, b.binding] for b in refl.bindings if b.variable_id in used),
        })
    return {
        "version": f"{refl.version[0]}.{refl.version[1]}",
        "entry_points": out_points,
        "spec_constants": [{**asdict(s), "value": refl.constant_values.get(s.id)} for s in refl.spec_constants],
        "bindings": [asdict(b) for b in refl.bindings if entry is None or b.variable_id in used_vars],
        "push_constants": [asdict(p) for p in refl.push_constants if entry is None or p.variable_id in used_vars],
        "functions": [_function_json(f) for f in refl.functions
                      if wanted_functions is None or f.function_id in wanted_functions],
        "call_graph": {str(k): v for k, v in refl.call_graph.items()
                       if wanted_functions is None or k in wanted_functions},
    }


def _function_json(f: FunctionCFG) -> dict:
    return {
        "id": f.function_id,
        "name": f.name,
        "first_global_block": f.first_global_index,
        "loop_headers": f.loop_headers,
        "merge_blocks": f.merge_blocks,
        "calls": f.calls,
        "blocks": [{"index": b.index, "label": b.label, "successors": b.successors, "terminator": b.terminator,
                    "construct": b.construct, "merge": b.merge, "continue": b.continue_target}
                   for b in f.blocks],
    }

