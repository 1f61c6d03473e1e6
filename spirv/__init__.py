"""tessera.spirv: parse, edit, reflect, disassemble and emit SPIR-V.

Public API (see docs/spirv.md):

    parse(data) -> Module                 bytes (either byte order) or 32-bit words
    Module.to_bytes() / to_words()        byte-identical emission of unedited modules
    workgroup_size(data_or_module, entry_point_name, spec_values) -> (x, y, z)
    reflect(data_or_module, spec_values) -> Reflection; reflection_json(...)
    disassemble(module) -> str            spirv-dis text form
    ModuleEditor(module)                  edits; passes.block_counters.add_block_counters
    SpirvError                            the only exception raised

Submodules load the grammar lazily, so importing this package is cheap.
"""

from .decoder import parse
from .disasm import disassemble
from .editor import ModuleEditor
from .errors import SpirvError
from .module import Block, Function, Instruction, Module
from .reflect import reflect, reflection_json, workgroup_size
from .spec import spec_values_from_map

__all__ = ["parse", "disassemble", "ModuleEditor", "SpirvError", "Block", "Function", "Instruction", "Module",
           "reflect", "reflection_json", "workgroup_size", "spec_values_from_map"]
