"""Lowering of SPV_ARM_tensors to storage-buffer accesses, for a backend without tensors.

Role: the shader side of VK_ARM_tensors in the emulated Mali (icd/tensors/descriptors.py binds
what this pass expects). Each tensor variable (`OpVariable` of `OpTypeTensorARM`, or of an
array of them, UniformConstant, DescriptorSet/Binding decorated) keeps its id, set and binding
and becomes a storage buffer `{ S data[]; }` (an array of such blocks for an array of tensors),
where S is the element type (bool elements are stored as 8-bit integers, VK_FORMAT_R8_BOOL_ARM).
Shape and strides come from a per-set metadata storage buffer `{ uint words[]; }` at the binding
the caller names: record `slot` (RECORD_WORDS words) holds the dimensions (DIMS_AT), the strides
in elements (STRIDES_AT), the element index of the tensor's scratch element (SCRATCH_AT) and the
rank (RANK_AT). Then, branch-free (no block is added, so per-block costs and counters keep the
application's block structure):

- OpTensorReadARM: for each element read (a scalar, or an array of N consecutive elements along
  the innermost dimension), in-bounds = every coordinate below its dimension (unsigned compare,
  so negative coordinates are out of bounds); the load uses index 0 when out of bounds and the
  result is the element, or the OutOfBoundsValue operand, or zero (SPV_ARM_tensors);
- OpTensorWriteARM: each element is stored at its index, or at the scratch element when out of
  bounds (out-of-bounds writes are discarded: nothing reads the scratch element);
- OpTensorQuerySizeARM: the dimension from the metadata.

Tensor loads and access chains disappear; tensor types, capability TensorsARM and extension
SPV_ARM_tensors go; StorageTensorArray{Dynamic,NonUniform}IndexingARM become the
StorageBufferArray ones. Capabilities for 8- and 16-bit storage are added where elements need them.
Limits: tensor values passed to functions, stored in variables or selected (OpPhi/OpSelect) are
refused (SpirvError), as are runtime arrays of tensors and the Nontemporal/availability
operands' memory semantics (accepted and ignored: lavapipe's storage accesses are coherent).
"""
from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

from ..editor import ModuleEditor
from ..errors import SpirvError
from ..grammar import grammar
from ..module import Instruction, Module
from ..operands import decode_string, referenced_ids

RECORD_WORDS = 32
DIMS_AT, STRIDES_AT, SCRATCH_AT, RANK_AT = 0, 8, 16, 17
MAX_RANK = 8
OOB_OPERAND = 0x2            # TensorOperands OutOfBoundsValueARM
_OPERAND_PARAMS = {0x2: 1, 0x4: 1, 0x8: 1}   # operands with one <id> parameter (OOB value, scopes)
_TENSORS_CAPABILITY = 4174
# Tensor-array indexing capabilities -> the storage-buffer-array ones the lowered arrays need.
_ARRAY_INDEXING = {4175: "StorageBufferArrayDynamicIndexing",        # StorageTensorArrayDynamicIndexingARM
                   4176: "StorageBufferArrayNonUniformIndexing"}     # StorageTensorArrayNonUniformIndexingARM


@dataclass(frozen=True)
class TensorBinding:
    """Where the driver puts a tensor binding's metadata: the binding of its set's metadata buffer,
    and the record of the binding's first array element."""
    meta_binding: int
    slot: int


@dataclass(frozen=True)
class LoweredTensor:
    """One tensor variable the pass lowered (for costs and reports)."""
    variable: int
    descriptor_set: int
    binding: int
    element: str            # e.g. float32, int8, bool
    rank: int
    count: int              # array length (1 for a single tensor)


def uses_tensors(code: bytes) -> bool:
    """Whether a SPIR-V binary declares capability TensorsARM (cheap: no parse)."""
    return struct.pack("<II", (2 << 16) | 17, _TENSORS_CAPABILITY) in code


@dataclass
class _Var:
    id: int
    tensor_type: int
    count: int | None       # None: a single tensor; else array length
    set: int
    binding: int
    element_type: int       # the SPIR-V element type of the tensor
    storage_type: int = 0   # element type in the buffer
    element_ptr: int = 0
    meta_var: int = 0
    slot: int = 0


def lower_tensors(module: Module, bindings: Mapping[tuple[int, int], TensorBinding]) -> list[LoweredTensor]:
    """Lower every tensor of `module` in place; the tensors lowered (empty when none)."""
    g = grammar()
    op = g.opcode
    if not any(i.opcode == op("OpCapability") and i.words[0] == _TENSORS_CAPABILITY for i in module.globals):
        return []
    ed = ModuleEditor(module)
    defs = module.defs
    tensor_types = {i.result_id: i for i in module.globals if i.opcode == op("OpTypeTensorARM")}
    arrays = {i.result_id: i for i in module.globals
              if i.opcode == op("OpTypeArray") and i.words[1] in tensor_types}
    if any(i.opcode == op("OpTypeRuntimeArray") and i.words[1] in tensor_types for i in module.globals):
        raise SpirvError("runtime arrays of tensors are not supported")
    uniform_constant = g.enum_value("StorageClass", "UniformConstant")
    pointers = {i.result_id: i.words[2] for i in module.globals if i.opcode == op("OpTypePointer")
                and (i.words[2] in tensor_types or i.words[2] in arrays)}
    decorations: dict[int, dict[str, int]] = {}
    for i in module.globals:
        if i.opcode == op("OpDecorate"):
            name = g.enum_name("Decoration", i.words[1])
            if name in ("DescriptorSet", "Binding"):
                decorations.setdefault(i.words[0], {})[name] = i.words[2]
    variables: dict[int, _Var] = {}
    for i in module.globals:
        if i.opcode == op("OpVariable") and i.words[0] in pointers:
            if i.words[2] != uniform_constant:
                raise SpirvError(f"tensor variable %{i.result_id} is not UniformConstant")
            pointee = pointers[i.words[0]]
            d = decorations.get(i.result_id, {})
            if "DescriptorSet" not in d or "Binding" not in d:
                raise SpirvError(f"tensor variable %{i.result_id} has no DescriptorSet/Binding")
            if pointee in arrays:
                tensor_type, count = arrays[pointee].words[1], _constant(module, arrays[pointee].words[2])
            else:
                tensor_type, count = pointee, None
            tt = tensor_types[tensor_type]
            variables[i.result_id] = _Var(i.result_id, tensor_type, count, d["DescriptorSet"], d["Binding"], tt.words[1])
    if not variables:
        raise SpirvError("capability TensorsARM without tensor variables")

    uint = ed.type_int(32, False)
    boolean = ed.type("OpTypeBool")
    zero = ed.constant_uint(0)
    storage_buffer = "StorageBuffer"
    if module.version_tuple < (1, 3):
        ed.add_extension("SPV_KHR_storage_buffer_storage_class")
    uint_ptr = ed.type_pointer(storage_buffer, uint)
    meta_vars: dict[int, int] = {}
    lowered: list[LoweredTensor] = []
    for v in variables.values():
        where = bindings.get((v.set, v.binding))
        if where is None:
            raise SpirvError(f"no metadata binding for the tensor at set {v.set} binding {v.binding}")
        v.slot = where.slot
        key = v.set
        if key not in meta_vars:
            array = ed.type("OpTypeRuntimeArray", uint)
            ed.decorate(array, "ArrayStride", 4)
            block = ed.type("OpTypeStruct", array)
            ed.decorate(block, "Block")
            ed.decorate_member(block, 0, "Offset", 0)
            meta_vars[key] = ed.add_variable(ed.type_pointer(storage_buffer, block), storage_buffer, v.set,
                                             where.meta_binding, name=f"tessera_tensor_metadata_{v.set}")
            ed.add_to_interface(meta_vars[key])
        elif module.defs[meta_vars[key]] and _binding_of(module, meta_vars[key]) != where.meta_binding:
            raise SpirvError(f"set {v.set}: two metadata bindings")
        v.meta_var = meta_vars[key]
        element = defs[v.element_type]
        kind, width = _element_kind(g, element)
        if kind == "bool":
            ed.add_capability("Int8")
            v.storage_type = ed.type_int(8, False)
        else:
            v.storage_type = v.element_type
        if width == 8 or kind == "bool":
            ed.add_capability("StorageBuffer8BitAccess")
            if module.version_tuple < (1, 5):
                ed.add_extension("SPV_KHR_8bit_storage")
        elif width == 16:
            ed.add_capability("StorageBuffer16BitAccess")
            if module.version_tuple < (1, 3):
                ed.add_extension("SPV_KHR_16bit_storage")
        size = 1 if kind == "bool" else width // 8
        array = ed.type("OpTypeRuntimeArray", v.storage_type)
        ed.decorate(array, "ArrayStride", size)
        block = ed.type("OpTypeStruct", array)
        ed.decorate(block, "Block")
        ed.decorate_member(block, 0, "Offset", 0)
        pointee = block if v.count is None else ed.type("OpTypeArray", block, ed.constant_uint(v.count))
        var = defs[v.id]
        ed.remove(var)
        var.words[:] = [ed.type_pointer(storage_buffer, pointee), v.id, g.enum_value("StorageClass", storage_buffer)]
        var.type_id = var.words[0]
        ed.add_global(var)
        defs[v.id] = var
        v.element_ptr = ed.type_pointer(storage_buffer, v.storage_type)
        rank = _constant(module, defs[v.tensor_type].words[2]) if len(defs[v.tensor_type].words) > 2 else 0
        lowered.append(LoweredTensor(v.id, v.set, v.binding, f"{kind}{'' if kind == 'bool' else width}", rank,
                                     v.count or 1))

    _Rewriter(ed, variables, uint, boolean, zero, uint_ptr).run()
    _remove_tensor_declarations(ed, tensor_types, arrays, pointers)
    return lowered


def _binding_of(module: Module, var: int) -> int | None:
    g = grammar()
    for i in module.globals:
        if i.opcode == g.opcode("OpDecorate") and i.words[0] == var and g.enum_name("Decoration", i.words[1]) == "Binding":
            return i.words[2]
    return None


def _constant(module: Module, id_: int) -> int:
    inst = module.defs.get(id_)
    if inst is None or inst.opname != "OpConstant":
        raise SpirvError(f"%{id_} is not a constant (tensor ranks and array lengths must be)")
    return inst.words[2]


def _element_kind(g, inst: Instruction) -> tuple[str, int]:
    name = inst.opname
    if name == "OpTypeBool":
        return "bool", 8
    if name == "OpTypeInt":
        return ("int" if inst.words[2] else "uint"), inst.words[1]
    if name == "OpTypeFloat":
        return "float", inst.words[1]
    raise SpirvError(f"tensor element type {name} is not a scalar")


class _Rewriter:
    """Replaces tensor loads, reads, writes and size queries in every function."""

    def __init__(self, ed: ModuleEditor, variables: dict[int, _Var], uint: int, boolean: int, zero: int,
                 uint_ptr: int) -> None:
        self.ed, self.vars, self.uint, self.bool, self.zero, self.uint_ptr = ed, variables, uint, boolean, zero, uint_ptr
        self.g = ed.g
        self.defs = ed.module.defs
        self.values: dict[int, tuple[_Var, int | None]] = {}    # tensor value or pointer id -> (variable, index id)
        self.code: list[Instruction] = []

    def emit(self, opname: str, *operands: int) -> int:
        inst = self.ed.make(opname, *operands)
        self.code.append(inst)
        return inst.result_id

    def run(self) -> None:
        g = self.g
        handlers = {g.opcode("OpTensorReadARM"): self.read, g.opcode("OpTensorWriteARM"): self.write,
                    g.opcode("OpTensorQuerySizeARM"): self.query}
        load, chain = g.opcode("OpLoad"), g.opcode("OpAccessChain")
        chains = (chain, g.opcode("OpInBoundsAccessChain"))
        for function in self.ed.module.functions:
            for block in function.blocks:
                out: list[Instruction] = []
                for inst in block.instructions:
                    if inst.opcode == load and self._tensor_source(inst.words[2]) is not None:
                        self.values[inst.result_id] = self._tensor_source(inst.words[2])
                        self.defs.pop(inst.result_id, None)
                        continue
                    if inst.opcode in chains and inst.words[2] in self.vars:
                        if len(inst.words) != 4:
                            raise SpirvError("an access chain into a tensor array must have exactly one index")
                        self.values[inst.result_id] = (self.vars[inst.words[2]], inst.words[3])
                        self.defs.pop(inst.result_id, None)
                        continue
                    handler = handlers.get(inst.opcode)
                    if handler is not None:
                        self.code = []
                        handler(inst)
                        out.extend(self.code)
                        continue
                    self._check_no_tensor_use(inst)
                    out.append(inst)
                block.instructions[:] = out

    def _tensor_source(self, pointer: int) -> tuple[_Var, int | None] | None:
        if pointer in self.vars:
            return self.vars[pointer], None
        return self.values.get(pointer) if pointer in self.values else None

    # Instructions that could carry a tensor value somewhere this pass cannot follow it.
    _CARRIERS = frozenset({"OpFunctionCall", "OpStore", "OpPhi", "OpSelect", "OpCopyObject", "OpReturnValue",
                           "OpCompositeConstruct", "OpCopyMemory"})

    def _check_no_tensor_use(self, inst: Instruction) -> None:
        if inst.opname not in self._CARRIERS:
            return
        info = self.g.instructions[inst.opcode]
        for index, word in enumerate(inst.words):
            if index not in (info.result_index, info.type_index) and (word in self.values or word in self.vars):
                raise SpirvError(f"{inst.opname} uses a tensor (%{word}); only OpTensorReadARM, OpTensorWriteARM "
                                 "and OpTensorQuerySizeARM are lowered")

    # ---- addressing ---------------------------------------------------------------------
    def _constant_value(self, id_: int | None) -> int | None:
        inst = self.defs.get(id_) if id_ is not None else None
        return inst.words[2] if inst is not None and inst.opname == "OpConstant" else None

    def _slot(self, var: _Var, index: int | None) -> tuple[int | None, int | None]:
        """The record of (variable, array index): (its number when constant, else None; else the
        uint id of its first word)."""
        const = self.ed.constant_uint
        value = 0 if index is None else self._constant_value(index)
        if value is not None:
            return var.slot + value, None
        slot = self.emit("OpIAdd", self.uint, const(var.slot), self._as_uint(index))
        return None, self.emit("OpIMul", self.uint, slot, const(RECORD_WORDS))

    def _meta(self, var: _Var, slot: tuple[int | None, int | None], offset: int, dynamic: int | None = None) -> int:
        """Load the metadata word at `offset` (+ the uint id `dynamic`) of a record."""
        const = self.ed.constant_uint
        number, start = slot
        if number is not None:
            index = const(number * RECORD_WORDS + offset)
        else:
            index = self.emit("OpIAdd", self.uint, start, const(offset)) if offset else start
        if dynamic is not None:
            index = self.emit("OpIAdd", self.uint, index, dynamic)
        ptr = self.emit("OpAccessChain", self.uint_ptr, var.meta_var, self.zero, index)
        return self.emit("OpLoad", self.uint, ptr)

    def _as_uint(self, id_: int) -> int:
        inst = self.defs.get(id_)
        type_id = inst.type_id if inst is not None else 0
        t = self.defs.get(type_id)
        if t is None or t.opname != "OpTypeInt":
            raise SpirvError(f"%{id_} is not an integer")
        if t.words[1] == 32:
            return id_ if t.words[2] == 0 else self.emit("OpBitcast", self.uint, id_)
        return self.emit("OpUConvert", self.uint, id_) if t.words[2] == 0 else \
            self.emit("OpBitcast", self.uint, self.emit("OpSConvert", self.ed.type_int(32, True), id_))

    def _coordinates(self, coords: int) -> list[int]:
        inst = self.defs.get(coords)
        array_type = self.defs.get(inst.type_id) if inst is not None else None
        if array_type is None or array_type.opname != "OpTypeArray":
            raise SpirvError("tensor coordinates must be an array of integers")
        n = _constant(self.ed.module, array_type.words[2])
        component = array_type.words[1]
        return [self._as_uint(self.emit("OpCompositeExtract", component, coords, i)) for i in range(n)]

    def _address(self, var: _Var, index: int | None, coords: int):
        """(slot, per-coordinate in-bounds ids, element offset id, innermost coordinate, innermost dim)."""
        slot = self._slot(var, index)
        cs = self._coordinates(coords)
        if len(cs) > MAX_RANK:
            raise SpirvError(f"rank {len(cs)} is above {MAX_RANK}")
        inbounds, offset = [], None
        dims = []
        for i, c in enumerate(cs):
            dim = self._meta(var, slot, DIMS_AT + i)
            dims.append(dim)
            stride = self._meta(var, slot, STRIDES_AT + i)
            inbounds.append(self.emit("OpULessThan", self.bool, c, dim))
            term = self.emit("OpIMul", self.uint, c, stride)
            offset = term if offset is None else self.emit("OpIAdd", self.uint, offset, term)
        return slot, inbounds, offset, cs[-1], dims[-1]

    def _all(self, conditions: list[int]) -> int:
        result = conditions[0]
        for c in conditions[1:]:
            result = self.emit("OpLogicalAnd", self.bool, result, c)
        return result

    def _elements(self, var: _Var, index: int | None, coords: int, count: int):
        """Per element k of a `count`-long access: (in-bounds id, element index id); plus the slot."""
        const = self.ed.constant_uint
        slot, inbounds, offset, last, last_dim = self._address(var, index, coords)
        outer = self._all(inbounds[:-1]) if len(inbounds) > 1 else None
        out = []
        for k in range(count):
            if k == 0:
                inner, element = inbounds[-1], offset
            else:
                inner = self.emit("OpULessThan", self.bool, self.emit("OpIAdd", self.uint, last, const(k)), last_dim)
                element = self.emit("OpIAdd", self.uint, offset, const(k))   # innermost stride: one element
            ok = inner if outer is None else self.emit("OpLogicalAnd", self.bool, outer, inner)
            out.append((ok, element))
        return slot, out

    def _pointer(self, var: _Var, index: int | None, element: int) -> int:
        if var.count is None:
            return self.emit("OpAccessChain", var.element_ptr, var.id, self.zero, element)
        return self.emit("OpAccessChain", var.element_ptr, var.id, self._as_uint(index), self.zero, element)

    def _tensor(self, id_: int) -> tuple[_Var, int | None]:
        source = self.values.get(id_)
        if source is None:
            raise SpirvError(f"%{id_} is not a tensor loaded from a tensor variable")
        return source

    def _operands(self, words: list[int]) -> dict[int, int]:
        """TensorOperands mask and parameters -> {bit: parameter id (or 0)}."""
        if not words:
            return {}
        mask, params, out = words[0], words[1:], {}
        for bit in (0x1, 0x2, 0x4, 0x8, 0x10):
            if mask & bit:
                n = _OPERAND_PARAMS.get(bit, 0)
                out[bit] = params[0] if n else 0
                params = params[n:]
        return out

    def _count_of(self, type_id: int, var: _Var) -> tuple[int, bool]:
        """(elements accessed, whether the value is an array) for a read result / written object type."""
        t = self.defs[type_id]
        if t.opname == "OpTypeArray":
            return _constant(self.ed.module, t.words[2]), True
        return 1, False

    # ---- instructions ---------------------------------------------------------------------
    def read(self, inst: Instruction) -> None:
        result_type, result, tensor, coords = inst.words[:4]
        var, index = self._tensor(tensor)
        operands = self._operands(inst.words[4:])
        count, is_array = self._count_of(result_type, var)
        _, elements = self._elements(var, index, coords, count)
        oob = operands.get(OOB_OPERAND)
        oob_is_array = oob is not None and self.defs[self.defs[oob].type_id].opname == "OpTypeArray"
        oob_value = self._null(var.element_type) if oob is None else oob
        values = []
        for k, (ok, element) in enumerate(elements):
            safe = self.emit("OpSelect", self.uint, ok, element, self.zero)
            value = self.emit("OpLoad", var.storage_type, self._pointer(var, index, safe))
            if var.storage_type != var.element_type:   # bool stored as uint8
                value = self.emit("OpINotEqual", self.bool, value, self.ed.constant(var.storage_type, 0))
            if oob is not None:
                oob_value = self.emit("OpCompositeExtract", var.element_type, oob, k) if oob_is_array else oob
            if not is_array:
                final = Instruction.make(self.g.opcode("OpSelect"), [var.element_type, result, ok, value, oob_value])
                self.code.append(final)
                self.defs[result] = final
                return
            values.append(self.emit("OpSelect", var.element_type, ok, value, oob_value))
        construct = Instruction.make(self.g.opcode("OpCompositeConstruct"), [result_type, result, *values])
        self.code.append(construct)
        self.defs[result] = construct

    def write(self, inst: Instruction) -> None:
        tensor, coords, obj = inst.words[:3]
        var, index = self._tensor(tensor)
        count, is_array = self._count_of(self.defs[obj].type_id, var)
        slot, elements = self._elements(var, index, coords, count)
        scratch = self._meta(var, slot, SCRATCH_AT)
        for k, (ok, element) in enumerate(elements):
            value = self.emit("OpCompositeExtract", var.element_type, obj, k) if is_array else obj
            if var.storage_type != var.element_type:
                value = self.emit("OpSelect", var.storage_type, value, self.ed.constant(var.storage_type, 1),
                                  self.ed.constant(var.storage_type, 0))
            target = self.emit("OpSelect", self.uint, ok, element, scratch)
            self.code.append(self.ed.make("OpStore", self._pointer(var, index, target), value))

    def query(self, inst: Instruction) -> None:
        result_type, result, tensor, dimension = inst.words[:4]
        var, index = self._tensor(tensor)
        slot = self._slot(var, index)
        value = self._meta(var, slot, DIMS_AT, self._as_uint(dimension))
        t = self.defs[result_type]
        if t.opname != "OpTypeInt":
            raise SpirvError("OpTensorQuerySizeARM must return an integer")
        if t.words[1] == 32:
            opcode, words = ("OpBitcast", [result_type, result, value]) if t.words[2] else \
                ("OpCopyObject", [result_type, result, value])
        else:
            opcode, words = "OpUConvert", [result_type, result, value]
        final = Instruction.make(self.g.opcode(opcode), words)
        self.code.append(final)
        self.defs[result] = final

    def _null(self, type_id: int) -> int:
        return self.ed._global_once("OpConstantNull", type_id)


def _remove_tensor_declarations(ed: ModuleEditor, tensor_types, arrays, pointers) -> None:
    g = ed.g
    op = g.opcode
    gone = set(tensor_types) | set(arrays) | set(pointers)
    for inst in list(ed.module.globals):
        if inst.result_id in gone:
            ed.remove(inst)
        elif inst.opcode in (op("OpName"), op("OpDecorate"), op("OpMemberName"), op("OpMemberDecorate")) \
                and inst.words[0] in gone:
            ed.remove(inst)
        elif inst.opcode == op("OpCapability") and inst.words[0] == _TENSORS_CAPABILITY:
            ed.remove(inst)
        elif inst.opcode == op("OpCapability") and inst.words[0] in _ARRAY_INDEXING:
            ed.remove(inst)
            ed.add_capability(_ARRAY_INDEXING[inst.words[0]])
        elif inst.opcode == op("OpExtension") and decode_string(inst.words, 0)[0] == "SPV_ARM_tensors":
            ed.remove(inst)
    for inst in ed.module.globals:
        # <id> operands only: a literal (OpTypeInt's width 32) may equal a removed type's id
        if inst.opname.startswith("OpType") and any(w in gone for w in referenced_ids(inst, ed.module)):
            raise SpirvError(f"{inst.opname} %{inst.result_id} still refers to a tensor type")


def standalone_bindings(module: Module) -> dict[tuple[int, int], TensorBinding]:
    """The bindings the emulated driver would give a module's tensors when its set layouts hold
    exactly the module's bindings: per set, metadata at the highest binding + 1, records in
    binding order (what `tessera compile` lowers with, so tensor accesses are costed as the
    emulated Mali runs them)."""
    g = grammar()
    op = g.opcode
    found: dict[int, dict[str, int]] = {}
    for i in module.globals:
        if i.opcode == op("OpDecorate") and g.enum_name("Decoration", i.words[1]) in ("DescriptorSet", "Binding"):
            found.setdefault(i.words[0], {})[g.enum_name("Decoration", i.words[1])] = i.words[2]
    tensor_types = {i.result_id for i in module.globals if i.opcode == op("OpTypeTensorARM")}
    arrays = {i.result_id: _constant(module, i.words[2]) for i in module.globals
              if i.opcode == op("OpTypeArray") and i.words[1] in tensor_types}
    pointers = {i.result_id: i.words[2] for i in module.globals if i.opcode == op("OpTypePointer")}
    top: dict[int, int] = {}
    tensors: list[tuple[int, int, int]] = []
    for var, d in found.items():
        if "DescriptorSet" not in d or "Binding" not in d:
            continue
        s, b = d["DescriptorSet"], d["Binding"]
        top[s] = max(top.get(s, -1), b)
        inst = module.defs.get(var)
        pointee = pointers.get(inst.words[0]) if inst is not None and inst.opname == "OpVariable" else None
        if pointee in tensor_types or pointee in arrays:
            tensors.append((s, b, arrays.get(pointee, 1)))
    out, next_slot = {}, {}
    for s, b, count in sorted(tensors):
        out[(s, b)] = TensorBinding(top[s] + 1, next_slot.get(s, 0))
        next_slot[s] = next_slot.get(s, 0) + count
    return out
