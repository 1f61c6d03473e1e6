"""Per-basic-block execution counters.

Role: the rewriting step under shader instrumentation and the emulated
timing model. Every basic block of every function gets, at its start (after
its OpPhi/OpVariable/OpLine prologue), an atomic increment of its own 32-bit
counter in a storage buffer at a reserved descriptor set and binding:

    counters[global_block_index] += 1   (OpAtomicIAdd, Device scope, Relaxed)

`global_block_index` is the module-wide numbering documented in cfg.py and
docs/spirv.md (functions in binary order, blocks in OpLabel order). The buffer
must hold `CounterLayout.count` uint32 values, zeroed before the dispatch or
draw. SPIR-V < 1.3 modules get a Uniform/BufferBlock buffer, newer ones a
StorageBuffer/Block one; for SPIR-V >= 1.4 the variable joins every entry
point's interface.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..cfg import names
from ..editor import ModuleEditor
from ..errors import SpirvError
from ..module import Module
from ..reflect import descriptor_bindings

SCOPE_DEVICE = 1
SEMANTICS_RELAXED = 0


@dataclass(frozen=True, slots=True)
class CounterSlot:
    """Where one block's counter lives."""

    global_index: int
    function_id: int
    function_name: str | None
    block_index: int
    label: int


@dataclass(frozen=True, slots=True)
class CounterLayout:
    """The counters a pass added: one uint32 per block, in global block order."""

    descriptor_set: int
    binding: int
    variable_id: int
    slots: tuple[CounterSlot, ...]

    @property
    def count(self) -> int:
        return len(self.slots)

    @property
    def buffer_size(self) -> int:
        return 4 * len(self.slots)


def add_block_counters(module: Module, descriptor_set: int, binding: int, base: int = 0) -> CounterLayout:
    """Instrument every block of `module` in place; return where each counter is. Block b counts
    into element `base + b` (several shaders can share one buffer: shader instrumentation puts a
    pipeline's stages one after another)."""
    if any(b.set == descriptor_set and b.binding == binding for b in descriptor_bindings(module)):
        raise SpirvError(f"descriptor set {descriptor_set} binding {binding} is already used by the module")
    ed = ModuleEditor(module)
    modern = module.version_tuple >= (1, 3)
    storage = "StorageBuffer" if modern else "Uniform"
    uint = ed.type_int(32, False)
    array = ed.type("OpTypeRuntimeArray", uint)
    ed.decorate(array, "ArrayStride", 4)
    block_type = ed.type("OpTypeStruct", array)
    ed.decorate(block_type, "Block" if modern else "BufferBlock")
    ed.decorate_member(block_type, 0, "Offset", 0)
    ed.name(block_type, "TesseraBlockCounters")
    variable = ed.add_variable(ed.type_pointer(storage, block_type), storage, descriptor_set, binding,
                               name="tessera_block_counters")
    element_pointer = ed.type_pointer(storage, uint)
    zero = ed.constant_uint(0)
    one = ed.constant_uint(1)
    scope = ed.constant_uint(SCOPE_DEVICE)
    semantics = ed.constant_uint(SEMANTICS_RELAXED)
    ed.add_to_interface(variable)
    table = names(module)
    slots: list[CounterSlot] = []
    for function in module.functions:
        for index, block in enumerate(function.blocks):
            global_index = len(slots)
            slots.append(CounterSlot(global_index, function.id, table.get(function.id), index, block.label))
            chain = ed.make("OpAccessChain", element_pointer, variable, zero, ed.constant_uint(base + global_index))
            add = ed.make("OpAtomicIAdd", uint, chain.result_id, scope, semantics, one)
            ed.insert_at_block_start(block, [chain, add])
    return CounterLayout(descriptor_set, binding, variable, tuple(slots))
