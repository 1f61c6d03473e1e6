"""Editing API: add capabilities, types, constants, variables and code.

Role: the only way passes change a module. `ModuleEditor` keeps the id
bound, `Module.defs` and its own look-up index consistent, so edits never
create duplicate non-aggregate types, constants, capabilities, extensions,
imports or decorations (SPIR-V forbids the first; the rest are tidiness).

Placement follows the logical layout (SPIR-V spec 2.4): each global
instruction goes after the last instruction of its own or an earlier section
(`SECTION_OF`), types/constants/variables at the end of the globals.
Code goes at the start of a block after its OpPhi/OpVariable/OpLine
prologue. For SPIR-V >= 1.4 every global variable an entry point uses must be
in its interface (`add_to_interface`). Edit a module from one thread.
"""

from __future__ import annotations

from collections.abc import Iterable

from .errors import SpirvError
from .grammar import grammar
from .module import Block, Instruction, Module
from .operands import decode_string, encode_string

# Logical-layout section of global opcodes (SPIR-V spec 2.4); anything else is 10.
SECTION_OF: dict[str, int] = {
    "OpCapability": 0, "OpExtension": 1, "OpExtInstImport": 2, "OpMemoryModel": 3, "OpEntryPoint": 4,
    "OpExecutionMode": 5, "OpExecutionModeId": 5, "OpString": 6, "OpSourceExtension": 6, "OpSource": 6,
    "OpSourceContinued": 6, "OpName": 7, "OpMemberName": 7, "OpModuleProcessed": 8, "OpDecorate": 9,
    "OpMemberDecorate": 9, "OpDecorationGroup": 9, "OpGroupDecorate": 9, "OpGroupMemberDecorate": 9,
    "OpDecorateId": 9, "OpDecorateString": 9, "OpMemberDecorateString": 9,
}
TYPES_SECTION = 10
# Types SPIR-V lets a module declare more than once; the editor always makes new ones.
AGGREGATE_TYPES = frozenset({"OpTypeStruct", "OpTypeArray", "OpTypeRuntimeArray"})
PROLOGUE = frozenset({"OpPhi", "OpVariable", "OpLine", "OpNoLine"})


class ModuleEditor:
    """Edits one module in place."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self.g = grammar()
        self._section_of = {self.g.opcode(name): rank for name, rank in SECTION_OF.items()}
        self._unique: dict[tuple[int, tuple[int, ...]], int] = {}
        for inst in module.globals:
            key = self._key(inst)
            if key is not None:
                self._unique.setdefault(key, inst.result_id)

    def _key(self, inst: Instruction) -> tuple[int, tuple[int, ...]] | None:
        """Identity of a reusable global: opcode and operands other than the result id."""
        info = self.g.instructions[inst.opcode]
        name = info.opname
        if name.startswith("OpType") and name not in AGGREGATE_TYPES or name in (
                "OpConstant", "OpConstantTrue", "OpConstantFalse", "OpConstantComposite", "OpConstantNull"):
            return inst.opcode, tuple(w for i, w in enumerate(inst.words) if i != info.result_index)
        return None

    # ids and instructions -------------------------------------------------

    def new_id(self) -> int:
        """A fresh id; the module's bound grows by one."""
        result = self.module.bound
        self.module.bound += 1
        return result

    def make(self, opname: str, *operands: int | str, result: bool | None = None) -> Instruction:
        """A new instruction; a fresh result id is placed where the grammar puts IdResult.

        Operands are words (ints) or strings (encoded as literal strings), in
        grammar order without the result id.
        """
        info = self.g.by_name.get(opname)
        if info is None:
            raise SpirvError(f"unknown instruction {opname!r}")
        words: list[int] = []
        for op in operands:
            words.extend(encode_string(op) if isinstance(op, str) else [op])
        if info.result_index >= 0 and result is not False:
            words.insert(info.result_index, self.new_id())
        inst = Instruction.make(info.opcode, words)
        if inst.result_id:
            self.module.defs[inst.result_id] = inst
        return inst

    def add_global(self, inst: Instruction) -> Instruction:
        """Place a global instruction in its layout section."""
        rank = self._section_of.get(inst.opcode, TYPES_SECTION)
        globals_ = self.module.globals
        if rank == TYPES_SECTION:
            globals_.append(inst)
        else:
            position = len(globals_)
            for i, other in enumerate(globals_):
                if self._section_of.get(other.opcode, TYPES_SECTION) > rank:
                    position = i
                    break
            globals_.insert(position, inst)
        if inst.result_id:
            self.module.defs[inst.result_id] = inst
        return inst

    def _global_once(self, opname: str, *operands: int | str) -> int:
        probe = self.make(opname, *operands)
        key = self._key(probe)
        if key is not None and key in self._unique:
            self.module.defs.pop(probe.result_id, None)
            if probe.result_id == self.module.bound - 1:
                self.module.bound -= 1  # give the probe's id back
            return self._unique[key]
        self.add_global(probe)
        if key is not None:
            self._unique[key] = probe.result_id
        return probe.result_id

    # module-level declarations ---------------------------------------------

    def add_capability(self, name: str) -> None:
        value = self.g.enum_value("Capability", name)
        op = self.g.opcode("OpCapability")
        if not any(i.opcode == op and i.words[0] == value for i in self.module.globals):
            self.add_global(self.make("OpCapability", value))

    def add_extension(self, name: str) -> None:
        op = self.g.opcode("OpExtension")
        if not any(i.opcode == op and decode_string(i.words, 0)[0] == name for i in self.module.globals):
            self.add_global(self.make("OpExtension", name))

    def import_ext_inst(self, name: str) -> int:
        """The id of the OpExtInstImport of `name`, adding it if missing."""
        op = self.g.opcode("OpExtInstImport")
        for inst in self.module.globals:
            if inst.opcode == op and decode_string(inst.words, 1)[0] == name:
                return inst.result_id
        return self.add_global(self.make("OpExtInstImport", name)).result_id

    def type(self, opname: str, *operands: int) -> int:
        """A type id: an existing identical non-aggregate type, or a new one."""
        if not opname.startswith("OpType"):
            raise SpirvError(f"{opname} is not a type instruction")
        return self._global_once(opname, *operands)

    def type_int(self, width: int = 32, signed: bool = False) -> int:
        return self.type("OpTypeInt", width, int(signed))

    def type_pointer(self, storage_class: str, pointee: int) -> int:
        return self.type("OpTypePointer", self.g.enum_value("StorageClass", storage_class), pointee)

    def constant(self, type_id: int, *value_words: int) -> int:
        """An OpConstant of `type_id` (reused when an identical one exists)."""
        return self._global_once("OpConstant", type_id, *value_words)

    def constant_uint(self, value: int, width: int = 32) -> int:
        words = [(value >> (32 * i)) & 0xFFFFFFFF for i in range(max(1, width // 32))]
        return self.constant(self.type_int(width, False), *words)

    def decorate(self, target: int, decoration: str, *literals: int) -> None:
        value = self.g.enum_value("Decoration", decoration)
        words = [target, value, *literals]
        op = self.g.opcode("OpDecorate")
        if not any(i.opcode == op and i.words == words for i in self.module.globals):
            self.add_global(Instruction(op, words))

    def decorate_member(self, struct: int, member: int, decoration: str, *literals: int) -> None:
        value = self.g.enum_value("Decoration", decoration)
        words = [struct, member, value, *literals]
        op = self.g.opcode("OpMemberDecorate")
        if not any(i.opcode == op and i.words == words for i in self.module.globals):
            self.add_global(Instruction(op, words))

    def name(self, target: int, text: str) -> None:
        self.add_global(Instruction(self.g.opcode("OpName"), [target, *encode_string(text)]))

    def add_variable(self, pointer_type: int, storage_class: str, descriptor_set: int | None = None,
                     binding: int | None = None, name: str | None = None) -> int:
        """A module-scope OpVariable, optionally with DescriptorSet/Binding decorations."""
        var = self.add_global(self.make("OpVariable", pointer_type,
                                        self.g.enum_value("StorageClass", storage_class))).result_id
        if descriptor_set is not None:
            self.decorate(var, "DescriptorSet", descriptor_set)
        if binding is not None:
            self.decorate(var, "Binding", binding)
        if name:
            self.name(var, name)
        return var

    def add_to_interface(self, variable: int, entry_points: Iterable[int] | None = None) -> None:
        """List `variable` in the interface of entry points (function ids; all when None).

        Before SPIR-V 1.4 only Input/Output variables belong there, so other
        storage classes are left out for older modules.
        """
        var = self.module.defs.get(variable)
        if var is None:
            raise SpirvError(f"no variable %{variable}")
        storage = self.g.enum_name("StorageClass", var.words[2])
        if self.module.version_tuple < (1, 4) and storage not in ("Input", "Output"):
            return
        wanted = set(entry_points) if entry_points is not None else None
        op = self.g.opcode("OpEntryPoint")
        for inst in self.module.globals:
            if inst.opcode == op and (wanted is None or inst.words[1] in wanted):
                _, end = decode_string(inst.words, 2)
                if variable not in inst.words[end:]:
                    inst.words.append(variable)

    # code ------------------------------------------------------------------

    def insert_at_block_start(self, block: Block, instructions: list[Instruction]) -> None:
        """Insert after the block's OpLabel and its OpPhi/OpVariable/OpLine/OpNoLine prologue."""
        prologue = {self.g.opcode(n) for n in PROLOGUE}
        position = 1
        body = block.instructions
        while position < len(body) - 1 and body[position].opcode in prologue:
            position += 1
        body[position:position] = instructions
        for inst in instructions:
            if inst.result_id:
                self.module.defs[inst.result_id] = inst

    def remove(self, inst: Instruction) -> None:
        """Remove an instruction wherever it is (by identity)."""
        lists = [self.module.globals]
        for function in self.module.functions:
            lists += [function.header, function.footer] + [b.instructions for b in function.blocks]
        for body in lists:
            for i, other in enumerate(body):
                if other is inst:
                    del body[i]
                    if inst.result_id and self.module.defs.get(inst.result_id) is inst:
                        del self.module.defs[inst.result_id]
                    key = self._key(inst) if body is self.module.globals else None
                    if key is not None and self._unique.get(key) == inst.result_id:
                        del self._unique[key]
                    return
        raise SpirvError(f"instruction {inst!r} is not in the module")
