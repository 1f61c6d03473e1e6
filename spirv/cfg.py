"""Control-flow graphs per function, and the function call graph.

Basic-block numbering (documented in docs/spirv.md, relied on by the block
counter pass, the compiler model and instrumentation results):

- Within a function, block index i is the i-th OpLabel of that function in
  binary order (0 is the entry block). Indices are stable: they depend only
  on the binary, not on traversal order.
- Across a module, the global block index runs over functions in binary order
  and their blocks in the order above: function k's block i has global index
  (number of blocks in functions 0..k-1) + i.

Successors are listed in the order the terminator names them (OpSwitch:
default first, then cases), without duplicates. A block with OpLoopMerge is a
loop header; OpSelectionMerge marks a selection header; the merge and
continue targets they name are recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .grammar import grammar
from .module import Block, Function, Module
from .operands import decode_string

OP_NAME = 5
OP_FUNCTION_CALL = 57
OP_LOOP_MERGE = 246
OP_SELECTION_MERGE = 247
OP_BRANCH = 249
OP_BRANCH_CONDITIONAL = 250
OP_SWITCH = 251


@dataclass(slots=True)
class BasicBlock:
    """One block in the documented numbering; successors/predecessors are indices."""

    index: int
    label: int
    terminator: str
    successors: list[int] = field(default_factory=list)
    predecessors: list[int] = field(default_factory=list)
    merge: int | None = None            # merge block index if this is a structured header
    continue_target: int | None = None  # loop headers only
    construct: str | None = None        # "loop", "selection" or None
    instruction_count: int = 0


@dataclass(slots=True)
class FunctionCFG:
    """The control-flow graph of one function."""

    function_id: int
    name: str | None
    first_global_index: int
    blocks: list[BasicBlock]
    calls: list[int]  # ids of functions called, in first-call order

    @property
    def loop_headers(self) -> list[int]:
        return [b.index for b in self.blocks if b.construct == "loop"]

    @property
    def merge_blocks(self) -> list[int]:
        return sorted({b.merge for b in self.blocks if b.merge is not None})


def names(module: Module) -> dict[int, str]:
    """OpName strings by target id."""
    out: dict[int, str] = {}
    for inst in module.globals:
        if inst.opcode == OP_NAME and inst.words:
            out[inst.words[0]] = decode_string(inst.words, 1)[0]
    return out


def function_cfg(module: Module, function: Function, first_global_index: int = 0,
                 name_table: dict[int, str] | None = None) -> FunctionCFG:
    """The CFG of one function in the documented block numbering."""
    index_of = {block.label: i for i, block in enumerate(function.blocks)}
    blocks: list[BasicBlock] = []
    calls: dict[int, None] = {}
    for i, block in enumerate(function.blocks):
        term = block.terminator
        bb = BasicBlock(i, block.label, module_opname(term.opcode), instruction_count=len(block.instructions))
        bb.successors = [index_of[t] for t in block_targets(module, block) if t in index_of]
        if len(block.instructions) >= 2:
            merge = block.instructions[-2]
            if merge.opcode == OP_LOOP_MERGE:
                bb.construct = "loop"
                bb.merge = index_of.get(merge.words[0])
                bb.continue_target = index_of.get(merge.words[1])
            elif merge.opcode == OP_SELECTION_MERGE:
                bb.construct = "selection"
                bb.merge = index_of.get(merge.words[0])
        for inst in block.instructions:
            if inst.opcode == OP_FUNCTION_CALL:
                calls[inst.words[2]] = None
        blocks.append(bb)
    for bb in blocks:
        for s in bb.successors:
            blocks[s].predecessors.append(bb.index)
    table = name_table if name_table is not None else names(module)
    return FunctionCFG(function.id, table.get(function.id), first_global_index, blocks, list(calls))


def block_targets(module: Module, block: Block) -> list[int]:
    """Label ids the block's terminator may branch to, in operand order, without duplicates."""
    term = block.terminator
    words = term.words
    if term.opcode == OP_BRANCH:
        return words[:1]
    if term.opcode == OP_BRANCH_CONDITIONAL:
        return list(dict.fromkeys(words[1:3]))
    if term.opcode != OP_SWITCH:
        return []
    # Each case is (literal of the selector's width, label).
    selector = module.defs.get(words[0])
    type_inst = module.defs.get(selector.type_id) if selector is not None else None
    width = type_inst.words[1] if type_inst is not None and len(type_inst.words) > 1 else 32
    step = 1 + max(1, (width + 31) // 32)
    return list(dict.fromkeys([words[1], *words[1 + step::step]]))


def module_opname(opcode: int) -> str:
    info = grammar().instructions.get(opcode)
    return info.opname if info else f"Op{opcode}"


def module_cfgs(module: Module) -> list[FunctionCFG]:
    """CFGs of every function, in binary order, with global block offsets."""
    table = names(module)
    out: list[FunctionCFG] = []
    first = 0
    for function in module.functions:
        cfg = function_cfg(module, function, first, table)
        out.append(cfg)
        first += len(cfg.blocks)
    return out


def call_graph(module: Module) -> dict[int, list[int]]:
    """Function id -> ids of the functions it calls."""
    graph: dict[int, list[int]] = {}
    for function in module.functions:
        callees: dict[int, None] = {}
        for block in function.blocks:
            for inst in block.instructions:
                if inst.opcode == OP_FUNCTION_CALL:
                    callees[inst.words[2]] = None
        graph[function.id] = list(callees)
    return graph


def reachable_functions(module: Module, root: int) -> list[int]:
    """`root` and every function it calls, directly or not, in discovery order."""
    graph = call_graph(module)
    seen: dict[int, None] = {root: None}
    stack = [root]
    while stack:
        for callee in graph.get(stack.pop(), ()):
            if callee not in seen:
                seen[callee] = None
                stack.append(callee)
    return list(seen)
