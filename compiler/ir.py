"""The compiler model's IR: one entry point, all calls inlined, virtual registers.

Role: turn a parsed SPIR-V module and an entry point into a `Shader`:
- every function the entry point reaches is inlined (each call site gets its
  own copy; a block split by a call keeps its SPIR-V block as `origin`);
- SPIR-V values become virtual registers ("vregs") measured in 32-bit
  registers: a vector or matrix spans several, a 64-bit component two, 16-bit
  components are packed two per register. A value wider than 4 registers is
  split into parts of at most 4 (matrix columns, 64-bit vec3/vec4, aggregate
  members), so every vreg has width 1..4, as Mali register tuples do;
  aggregates are capped at `MAX_PARTS` parts;
- Function/Private variables that are only accessed with constant indices are
  promoted to vregs (what any real compiler does); dynamically indexed ones
  stay in stack memory (LS);
- constants, push constants and constant-offset uniform-buffer loads live in
  uniform registers (FAU), not in work registers;
- each op carries its pipe op counts (see pipes.py).

SPIR-V blocks that cannot be reached from their function's entry are not
emitted; they are listed in `Shader.diagnostics`. A `Shader` is owned by one
caller; register allocation rewrites it in place (spill code).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tessera.spirv import Module, SpirvError
from tessera.spirv.cfg import module_cfgs
from tessera.spirv.disasm import instruction_text
from tessera.spirv.grammar import grammar
from tessera.spirv.operands import decode_string, referenced_ids
from tessera.spirv.reflect import entry_points
from tessera.spirv.spec import evaluate_constants

from . import pipes
from .errors import CompileError

MAX_PARTS = 16          # parts (<= 4 registers each) kept for one aggregate value
STAGES = {"Fragment": "fragment", "Vertex": "vertex", "GLCompute": "compute", "TessellationControl": "tess_ctrl",
          "TessellationEvaluation": "tess_eval", "Geometry": "geometry", "TaskEXT": "task", "MeshEXT": "mesh",
          # ray tracing pipeline stages (SPV_KHR_ray_tracing)
          "RayGenerationKHR": "raygen", "IntersectionKHR": "intersection", "AnyHitKHR": "any_hit",
          "ClosestHitKHR": "closest_hit", "MissKHR": "miss", "CallableKHR": "callable"}

# storage classes
SC_UNIFORM_CONSTANT, SC_INPUT, SC_UNIFORM, SC_OUTPUT, SC_PRIVATE, SC_FUNCTION, SC_PUSH = 0, 1, 2, 3, 6, 7, 9
SC_STORAGE_BUFFER = 12
REGISTER_CLASSES = (SC_PRIVATE, SC_FUNCTION)
UNIFORM_CLASSES = (SC_UNIFORM, SC_PUSH)

# vreg kinds
VALUE, VARIABLE, FILL, TEMP = 0, 1, 2, 3


class Op:
    """One IR instruction: defined and used vregs and its pipe op counts."""

    __slots__ = ("name", "defs", "uses", "cost", "f16", "inst")

    def __init__(self, name: str, defs: list[int], uses: list[int], cost: pipes.Cost = pipes.ZERO,
                 f16: bool = False, inst=None) -> None:
        self.name = name
        self.defs = defs
        self.uses = uses
        self.cost = cost
        self.f16 = f16
        self.inst = inst

    def __repr__(self) -> str:
        return f"Op({self.name}, defs={self.defs}, uses={self.uses})"


class IRBlock:
    """A basic block of the inlined shader. `origin` is its SPIR-V global block index."""

    __slots__ = ("index", "origin", "instance", "ops", "phis", "succs", "preds", "depth")

    def __init__(self, index: int, origin: int, instance: int) -> None:
        self.index = index
        self.origin = origin
        self.instance = instance
        self.ops: list[Op] = []
        # (def vregs, [(pred IR block index, source vregs)])
        self.phis: list[tuple[list[int], list[tuple[int, list[int]]]]] = []
        self.succs: list[int] = []
        self.preds: list[int] = []
        self.depth = 0


@dataclass
class OriginBlock:
    """A SPIR-V block of the module in tessera.spirv's global numbering."""

    index: int
    function: str | None
    local_index: int
    reachable: bool
    used: bool = False      # emitted for this entry point


@dataclass
class Shader:
    entry: str
    stage: str
    blocks: list[IRBlock]
    widths: list[int]
    kinds: list[int]
    origins: list[OriginBlock]
    diagnostics: list[str] = field(default_factory=list)
    uniform_words: int = 0
    stack_bytes: int = 0          # dynamically indexed local arrays
    spill_cost: list[float] = field(default_factory=list)

    def new_vreg(self, width: int, kind: int) -> int:
        self.widths.append(width)
        self.kinds.append(kind)
        return len(self.widths) - 1

    @property
    def vreg_count(self) -> int:
        return len(self.widths)


@dataclass(slots=True)
class _Ptr:
    """What a pointer id points at: root variable, part range, storage class, address vregs."""

    root: int
    storage: int
    pointee: int
    start: int
    stop: int
    partial: bool
    dynamic: bool
    uses: tuple[int, ...] = ()
    builtin: bool = False
    path: tuple | None = ()
    regs: list | None = None      # vregs of a variable promoted to registers


class _Types:
    """Register layout of SPIR-V types, cached."""

    def __init__(self, module: Module, consts: dict) -> None:
        self.defs = module.defs
        self.consts = consts
        self._parts: dict[int, tuple[int, ...]] = {}
        self._lanes: dict[int, tuple[float, bool]] = {}

    def parts(self, tid: int) -> tuple[int, ...]:
        got = self._parts.get(tid)
        if got is None:
            got = self._parts[tid] = tuple(self._split(self._regs(tid)))[:MAX_PARTS]
        return got

    def _regs(self, tid: int) -> list[int]:
        """Register widths of the leaf vectors of a type, before splitting."""
        t = self.defs.get(tid)
        if t is None:
            return []
        op, w = t.opcode, t.words
        if op == 20:                        # bool
            return [1]
        if op in (21, 22):                  # int, float
            return [2 if w[1] == 64 else 1]
        if op == 23:                        # vector
            comp = self.defs[w[1]]
            bits = comp.words[1] if comp.opcode in (21, 22) else 32
            n = w[2]
            return [2 * n if bits == 64 else (n + 1) // 2 if bits <= 16 else n]
        if op == 24:                        # matrix
            return self._regs(w[1]) * w[2]
        if op == 28:                        # array
            length = self.consts.get(w[2])
            n = length if isinstance(length, int) and length > 0 else 1
            elem = self._regs(w[1])
            return elem * min(n, MAX_PARTS * 4)
        if op == 30:                        # struct
            out: list[int] = []
            for m in w[1:]:
                out += self._regs(m)
            return out
        if op == 32 and w[1] == 5349:       # PhysicalStorageBuffer pointer: a 64-bit address
            return [2]
        return []

    @staticmethod
    def _split(regs: list[int]):
        for r in regs:
            while r > 4:
                yield 4
                r -= 4
            if r:
                yield r

    def lanes(self, tid: int) -> tuple[float, bool]:
        """(cost units, is 16-bit) of a value type: 32-bit lanes, 16-bit pairs, 64-bit x2 (int) or x4 (float)."""
        got = self._lanes.get(tid)
        if got is not None:
            return got
        t = self.defs.get(tid)
        units, f16 = 1.0, False
        if t is not None:
            op, w = t.opcode, t.words
            if op in (21, 22):
                bits = w[1]
                units = (4.0 if op == 22 else 2.0) if bits == 64 else 1.0
                f16 = bits <= 16
            elif op == 23:
                u, f16 = self.lanes(w[1])
                n = w[2]
                units = float((n + 1) // 2) if f16 else u * n
            elif op == 24:
                u, f16 = self.lanes(w[1])
                units = u * w[2]
            elif op == 30:
                units = sum(self.lanes(m)[0] for m in w[1:]) or 1.0
            elif op == 28:
                length = self.consts.get(w[2])
                units = self.lanes(w[1])[0] * (length if isinstance(length, int) and length > 0 else 1)
        self._lanes[tid] = (units, f16)
        return units, f16

    def part_range(self, tid: int, path: list[int]) -> tuple[int, int, bool]:
        """(start, stop, partial) of the parts a constant access path selects."""
        start = 0
        cur = tid
        for index in path:
            t = self.defs.get(cur)
            if t is None:
                break
            op, w = t.opcode, t.words
            if op == 30:
                index = min(index, len(w) - 2)
                start += sum(len(self._flat(m)) for m in w[1:1 + index])
                cur = w[1 + index]
            elif op in (28, 24):
                elem = w[1]
                start += len(self._flat(elem)) * index
                cur = elem
            elif op == 23:
                whole = self._flat(cur)
                comp = self.defs[w[1]]
                bits = comp.words[1] if comp.opcode in (21, 22) else 32
                regs_before = index * 2 if bits == 64 else index // 2 if bits <= 16 else index
                part = min(regs_before // 4, len(whole) - 1)
                return min(start + part, MAX_PARTS), min(start + part + 1, MAX_PARTS), True
            else:
                break
        n = len(self._flat(cur))
        return min(start, MAX_PARTS), min(start + n, MAX_PARTS), False

    def _flat(self, tid: int) -> list[int]:
        return list(self._split(self._regs(tid)))


_OPNAMES: dict[int, str] = {}


def opname(opcode: int) -> str:
    name = _OPNAMES.get(opcode)
    if name is None:
        info = grammar().instructions.get(opcode)
        name = _OPNAMES[opcode] = info.opname if info else f"Op{opcode}"
    return name


class _Builder:
    """Builds a Shader; one builder per (module, entry point)."""

    def __init__(self, module: Module, entry: str, spec_values) -> None:
        self.m = module
        try:
            self.consts = evaluate_constants(module, spec_values)
        except SpirvError as exc:
            raise CompileError(f"cannot evaluate constants: {exc}") from None
        self.types = _Types(module, self.consts)
        points = [p for p in entry_points(module) if p.name == entry]
        if not points:
            names = ", ".join(p.name for p in entry_points(module)) or "none"
            raise CompileError(f"no entry point named {entry!r} (entry points: {names})")
        self.point = points[0]
        self.stage = STAGES.get(self.point.execution_model, self.point.execution_model.lower())
        self.functions = {f.id: f for f in module.functions}
        self.cfgs = module_cfgs(module)
        self.cfg_of = {c.function_id: c for c in self.cfgs}
        origins: list[OriginBlock] = []
        self.reachable: dict[int, set[int]] = {}
        for c in self.cfgs:
            seen = {0} if c.blocks else set()
            stack = [0] if c.blocks else []
            while stack:
                for s in c.blocks[stack.pop()].successors:
                    if s not in seen:
                        seen.add(s)
                        stack.append(s)
            self.reachable[c.function_id] = seen
            for b in c.blocks:
                origins.append(OriginBlock(c.first_global_index + b.index, c.name, b.index, b.index in seen))
        self.shader = Shader(entry, self.stage, [], [], [], origins)
        self.ext_sets: dict[int, str] = {}
        self.builtins: set[int] = set()
        self.buffer_blocks: set[int] = set()    # Uniform + BufferBlock = a storage buffer (SPIR-V < 1.3)
        self.global_ptrs: dict[int, _Ptr] = {}
        self.uniform_keys: set = set()
        self.constant_words: set[int] = set()
        self.instance = 0
        self.next_instance = 1
        self.stack: list[int] = []
        self._scan_globals()

    # ---- globals ------------------------------------------------------------------------------
    def _scan_globals(self) -> None:
        for inst in self.m.globals:
            op = inst.opcode
            if op == 11:                                        # OpExtInstImport
                self.ext_sets[inst.result_id] = decode_string(inst.words, 1)[0]
            elif op == 71 and len(inst.words) >= 2 and inst.words[1] == 11:   # Decorate BuiltIn
                self.builtins.add(inst.words[0])
            elif op == 72 and len(inst.words) >= 3 and inst.words[2] == 11:   # MemberDecorate BuiltIn
                self.builtins.add(inst.words[0])
            elif op == 71 and len(inst.words) >= 2 and inst.words[1] == 3:    # Decorate BufferBlock
                self.buffer_blocks.add(inst.words[0])
        for inst in self.m.globals:
            if inst.opcode == 59:                               # OpVariable
                ptype = self.m.defs.get(inst.type_id)
                if ptype is None or ptype.opcode != 32:
                    raise CompileError("OpVariable whose type is not a pointer", instruction_text(self.m, inst))
                storage, pointee = inst.words[2], ptype.words[2]
                if storage == SC_UNIFORM and self._innermost(pointee) in self.buffer_blocks:
                    storage = SC_STORAGE_BUFFER
                builtin = inst.result_id in self.builtins or pointee in self.builtins or \
                    self._struct_builtin(pointee)
                self.global_ptrs[inst.result_id] = _Ptr(inst.result_id, storage, pointee, 0,
                                                        len(self.types.parts(pointee)), False, False, (), builtin)

    def _innermost(self, tid: int) -> int:
        t = self.m.defs.get(tid)
        while t is not None and t.opcode in (28, 29):
            t = self.m.defs.get(t.words[1])
        return t.result_id if t is not None else 0

    def _struct_builtin(self, tid: int) -> bool:
        t = self.m.defs.get(tid)
        while t is not None and t.opcode in (28, 29):
            t = self.m.defs.get(t.words[1])
        return t is not None and t.opcode == 30 and t.result_id in self.builtins

    # ---- promotion analysis -------------------------------------------------------------------
    def _memory_vars(self, fids: list[int]) -> set[int]:
        """Function/Private variables indexed dynamically somewhere (they stay in memory)."""
        out: set[int] = set()
        for fid in fids:
            f = self.functions[fid]
            local_roots: dict[int, int] = {}
            for inst in f.instructions():
                if inst.opcode == 59:
                    local_roots[inst.result_id] = inst.result_id
                elif inst.opcode in (65, 66, 67, 70):           # access chains
                    base = inst.words[2]
                    root = local_roots.get(base, base)
                    local_roots[inst.result_id] = root
                    idx = inst.words[3:]
                    if inst.opcode in (67, 70) or any(i not in self.consts for i in idx):
                        out.add(root)
        return out

    # ---- building -----------------------------------------------------------------------------
    def build(self) -> Shader:
        fids = self._reachable_functions(self.point.function_id)
        self.memory_vars = self._memory_vars(fids)
        for inst in self.m.globals:                             # Private variables in registers
            if inst.opcode == 59 and inst.words[2] == SC_PRIVATE and inst.result_id not in self.memory_vars:
                gp = self.global_ptrs[inst.result_id]
                gp.regs = [self.shader.new_vreg(w, VARIABLE) for w in self.types.parts(gp.pointee)]
        entry_block = self._new_block(0)
        # Private initialisers are definitions at entry
        for inst in self.m.globals:
            if inst.opcode == 59 and inst.words[2] == SC_PRIVATE and len(inst.words) > 3:
                regs = self.global_ptrs[inst.result_id].regs
                if regs:
                    entry_block.ops.append(Op("copy", list(regs), []))
        exits = self._inline(self.point.function_id, {}, {}, entry_block)
        del exits
        self.shader.uniform_words = min(128, sum(self.uniform_keys_words()) + len(self.constant_words))
        for b in self.shader.blocks:
            for s in b.succs:
                self.shader.blocks[s].preds.append(b.index)
        return self.shader

    def uniform_keys_words(self):
        for key in self.uniform_keys:
            yield key[-1]

    def _reachable_functions(self, root: int) -> list[int]:
        seen = [root]
        i = 0
        while i < len(seen):
            f = self.functions.get(seen[i])
            if f is None:
                raise CompileError(f"entry point names missing function %{seen[i]}")
            for inst in f.instructions():
                if inst.opcode == 57 and inst.words[2] not in seen:
                    seen.append(inst.words[2])
            i += 1
        return seen

    def _new_block(self, origin: int) -> IRBlock:
        b = IRBlock(len(self.shader.blocks), origin, self.instance)
        self.shader.blocks.append(b)
        return b

    def _inline(self, fid: int, vals: dict, ptrs: dict, first: IRBlock | None) -> list[tuple[IRBlock, int | None]]:
        """Emit one copy of function `fid`; returns its (return block, returned value id) pairs.

        `vals`/`ptrs` arrive holding the parameters; `first` is the IR block
        to emit the entry block into (the caller's block before the call).
        """
        if fid in self.stack:
            raise CompileError(f"recursive call to function %{fid}: shaders may not recurse")
        self.stack.append(fid)
        m = self.m
        f = self.functions[fid]
        cfg = self.cfg_of[fid]
        reach = self.reachable[fid]
        instance = self.instance
        types = self.types
        sh = self.shader
        # pre-allocate vregs of every value this copy defines (phis may refer forward)
        for bi, block in enumerate(f.blocks):
            if bi not in reach:
                continue
            for inst in block.instructions:
                rid = inst.result_id
                if not rid or inst.opcode in (59, 65, 66, 67, 70):
                    continue
                tinst = m.defs.get(inst.type_id)
                if tinst is None or tinst.opcode in (19, 32) and (tinst.opcode == 19 or tinst.words[1] != 5349):
                    continue
                vals[rid] = [sh.new_vreg(w, VALUE) for w in types.parts(inst.type_id)]
        for inst in f.header:
            if inst.opcode == 59:
                raise CompileError("OpVariable outside a block", instruction_text(m, inst))
        head: dict[int, IRBlock] = {}
        tail: dict[int, IRBlock] = {}
        label_index = {block.label: bi for bi, block in enumerate(f.blocks)}
        returns: list[tuple[IRBlock, int | None]] = []
        pending_phis: list[tuple[IRBlock, list[int], list[tuple[int, int]], int]] = []
        edges: list[tuple[int, list[int]]] = []   # (tail block label, target labels)
        for bi, block in enumerate(f.blocks):
            gidx = cfg.first_global_index + bi
            if bi not in reach:
                self._note_unreachable(block, gidx)
                continue
            sh.origins[gidx].used = True
            if bi == 0 and first is not None:
                cur = first
                cur.origin = gidx
            else:
                cur = self._new_block(gidx)
            head[block.label] = cur
            insts = block.instructions
            if len(insts) < 2 or opname(insts[-1].opcode) not in _TERMINATORS:
                raise CompileError("block does not end with a terminator", instruction_text(m, insts[-1]), gidx)
            for inst in insts[1:]:
                op = inst.opcode
                if op == 245:                                       # OpPhi
                    w = inst.words
                    pairs = [(w[k], w[k + 1]) for k in range(2, len(w) - 1, 2)]
                    pending_phis.append((cur, list(vals.get(inst.result_id, ())), pairs, gidx))
                elif op == 57:                                      # OpFunctionCall
                    cur = self._call(inst, vals, ptrs, cur, gidx)
                elif op in (249, 250, 251):                         # branches
                    targets = self._targets(inst)
                    for t in targets:
                        if t not in label_index:
                            raise CompileError(f"branch to %{t}, not a block of this function",
                                               instruction_text(m, inst), gidx)
                    if op != 249:
                        cur.ops.append(self._generic(inst, vals, ptrs, gidx))
                    edges.append((block.label, targets))
                elif op in (253, 254):                              # OpReturn, OpReturnValue
                    returns.append((cur, inst.words[0] if op == 254 else None))
                else:
                    self._emit(inst, vals, ptrs, cur, gidx)
            tail[block.label] = cur
        for lab, targets in edges:
            src = tail[lab]
            for t in targets:
                if t in head and head[t].index not in src.succs:
                    src.succs.append(head[t].index)
        for blk, defs, pairs, gidx in pending_phis:
            sources = []
            for value, parent in pairs:
                if parent not in tail:
                    continue                                        # edge from an unreachable block
                sources.append((tail[parent].index, list(self._value_regs(value, vals, gidx))))
            blk.phis.append((defs, sources))
        self.stack.pop()
        return returns

    def _note_unreachable(self, block, gidx: int) -> None:
        text = instruction_text(self.m, block.instructions[-1]) if block.instructions else "?"
        msg = f"block {gidx} is unreachable (ends with {text}); not costed"
        if msg not in self.shader.diagnostics:
            self.shader.diagnostics.append(msg)

    def _targets(self, inst) -> list[int]:
        w = inst.words
        if inst.opcode == 249:
            return [w[0]]
        if inst.opcode == 250:
            return list(dict.fromkeys(w[1:3]))
        sel = self.m.defs.get(w[0])
        t = self.m.defs.get(sel.type_id) if sel is not None else None
        width = t.words[1] if t is not None and t.opcode == 21 else 32
        step = 1 + max(1, (width + 31) // 32)
        return list(dict.fromkeys([w[1], *w[1 + step::step]]))

    def _call(self, inst, vals: dict, ptrs: dict, cur: IRBlock, gidx: int) -> IRBlock:
        m = self.m
        callee_id = inst.words[2]
        callee = self.functions.get(callee_id)
        if callee is None:
            raise CompileError(f"call to undefined function %{callee_id}", instruction_text(m, inst), gidx)
        params = [i for i in callee.header if i.opcode == 55]
        args = inst.words[3:]
        if len(params) != len(args):
            raise CompileError("argument count does not match the callee", instruction_text(m, inst), gidx)
        cvals: dict = {}
        cptrs: dict = {}
        for p, a in zip(params, args):
            if a in ptrs or a in self.global_ptrs:
                cptrs[p.result_id] = ptrs.get(a) or self.global_ptrs[a]
            else:
                cvals[p.result_id] = list(self._value_regs(a, vals, gidx))
        caller_instance = self.instance
        self.instance = self.next_instance
        self.next_instance += 1
        callee_entry = self._new_block(gidx)
        cur.succs.append(callee_entry.index)
        returns = self._inline(callee_id, cvals, cptrs, callee_entry)
        self.instance = caller_instance
        cont = self._new_block(gidx)
        result = vals.get(inst.result_id, [])
        if len(returns) > 1:
            for r in result:
                self.shader.kinds[r] = VARIABLE
        for rblock, rvalue in returns:
            if rvalue is not None and result:
                rblock.ops.append(Op("copy", list(result), list(self._value_regs(rvalue, cvals, gidx))))
            rblock.succs.append(cont.index)
        return cont

    def _value_regs(self, vid: int, vals: dict, gidx: int) -> list[int]:
        regs = vals.get(vid)
        if regs is not None:
            return regs
        d = self.m.defs.get(vid)
        if d is None:
            raise CompileError(f"use of undefined id %{vid}", None, gidx)
        if 41 <= d.opcode <= 52 or d.opcode == 1:                # constants live in uniform registers
            self._constant(d)
        return []

    def _constant(self, d) -> None:
        if d.opcode in (43, 50):
            for w in d.words[2:]:
                if w > 8:                                           # small immediates are encoded inline
                    self.constant_words.add(w)

    def _uses(self, inst, vals: dict, ptrs: dict, gidx: int) -> list[int]:
        out: list[int] = []
        try:
            # OpExtInst (GLSL.std.450): every operand after the set and number is an <id>
            ids = inst.words[4:] if inst.opcode == 12 else referenced_ids(inst, self.m)
        except SpirvError as exc:
            raise CompileError(str(exc), instruction_text(self.m, inst), gidx) from None
        tid = inst.type_id
        for i in ids:
            if i == tid:
                continue
            regs = vals.get(i)
            if regs is not None:
                out += regs
                continue
            p = ptrs.get(i) or self.global_ptrs.get(i)
            if p is not None:
                out += p.uses
                continue
            d = self.m.defs.get(i)
            if d is None and i not in self.ext_sets:
                raise CompileError(f"use of undefined id %{i}", instruction_text(self.m, inst), gidx)
            if d is not None and 41 <= d.opcode <= 52:
                self._constant(d)
        return out

    def _generic(self, inst, vals: dict, ptrs: dict, gidx: int, cost: pipes.Cost | None = None,
                 name: str | None = None) -> Op:
        """An op whose defs are the result's vregs and whose uses are every value operand."""
        opn = name or opname(inst.opcode)
        if cost is None:
            entry = pipes.core_cost(opn)
            if entry is None:
                if opn in pipes.FREE:
                    entry = (pipes.ZERO, "1")
                else:
                    raise CompileError(f"unsupported instruction {opn}", instruction_text(self.m, inst), gidx)
            unit, scale = entry
            cost = self._scale(unit, scale, inst, vals)
        f16 = self.types.lanes(inst.type_id)[1] if inst.type_id else False
        return Op(opn, list(vals.get(inst.result_id, ())) if inst.result_id else [],
                  self._uses(inst, vals, ptrs, gidx), cost, f16, inst)

    def _scale(self, unit: pipes.Cost, scale: str, inst, vals) -> pipes.Cost:
        if scale == "1":
            return unit
        if scale == "r":
            units = self.types.lanes(inst.type_id)[0] if inst.type_id else 1.0
        else:
            first = next((w for w in inst.words[2:] if w in self.m.defs and self.m.defs[w].type_id), None)
            d = self.m.defs.get(first) if first is not None else None
            units = self.types.lanes(d.type_id)[0] if d is not None else 1.0
        return pipes.scaled(unit, units)

    def _ptr_of(self, pid: int, ptrs: dict) -> _Ptr | None:
        return ptrs.get(pid) or self.global_ptrs.get(pid)

    def _emit(self, inst, vals: dict, ptrs: dict, cur: IRBlock, gidx: int) -> None:
        m = self.m
        op = inst.opcode
        w = inst.words
        if op in (0, 8, 317, 246, 247):                  # OpNop, OpLine, OpNoLine, merges
            return
        if op == 59:                                    # OpVariable (Function)
            ptype = m.defs.get(inst.type_id)
            if ptype is None or ptype.opcode != 32:
                raise CompileError("OpVariable whose type is not a pointer", instruction_text(m, inst), gidx)
            pointee = ptype.words[2]
            nparts = len(self.types.parts(pointee))
            p = _Ptr(inst.result_id, w[2], pointee, 0, nparts, False, False)
            ptrs[inst.result_id] = p
            if inst.result_id in self.memory_vars or w[2] not in REGISTER_CLASSES:
                self.shader.stack_bytes += 4 * sum(self.types.parts(pointee))
                if len(w) > 3:
                    cur.ops.append(Op("OpStore", [], [], (0, 0, 0, 1, 0, 0), False, inst))
            else:
                regs = [self.shader.new_vreg(x, VARIABLE) for x in self.types.parts(pointee)]
                p.regs = regs
                if len(w) > 3:
                    cur.ops.append(Op("copy", list(regs), list(self._value_regs(w[3], vals, gidx))))
            return
        if op in (65, 66, 67, 70):                      # access chains
            base = self._ptr_of(w[2], ptrs)
            if base is None:
                raise CompileError(f"access chain base %{w[2]} is not a pointer", instruction_text(m, inst), gidx)
            idx = w[3:] if op in (65, 66) else w[4:]
            dynamic = base.dynamic or op in (67, 70) or any(i not in self.consts for i in idx)
            uses = list(base.uses)
            for i in ([w[3]] if op in (67, 70) else []) + list(idx):
                uses += vals.get(i, ())
            ptype = m.defs.get(inst.type_id)
            pointee = ptype.words[2] if ptype is not None and ptype.opcode == 32 else 0
            if dynamic:
                start, stop, partial, path = base.start, base.stop, True, None
            else:
                consts = [self.consts[i] if isinstance(self.consts[i], int) else 0 for i in idx]
                s, e, partial = self.types.part_range(base.pointee, consts)
                start, stop = base.start + s, min(base.start + e, base.stop)
                partial = partial or base.partial
                path = (base.path or ()) + tuple(consts)
            ptrs[inst.result_id] = _Ptr(base.root, base.storage, pointee, start, stop, partial, dynamic,
                                        tuple(uses), base.builtin, path, base.regs)
            return
        if op == 61:                                    # OpLoad
            p = self._ptr_of(w[2], ptrs)
            if p is None:                               # loading through a pointer value (e.g. PSB)
                cur.ops.append(self._generic(inst, vals, ptrs, gidx, (0, 0, 0, 1, 0, 0), "OpLoad"))
                return
            self._load(inst, p, vals, cur, gidx)
            return
        if op == 62:                                    # OpStore
            p = self._ptr_of(w[0], ptrs)
            if p is None:
                cur.ops.append(self._generic(inst, vals, ptrs, gidx, (0, 0, 0, 1, 0, 0), "OpStore"))
                return
            self._store(inst, p, vals, cur, gidx)
            return
        if op in (63, 64):                              # OpCopyMemory(Sized)
            cur.ops.append(Op(opname(op), [], self._uses(inst, vals, ptrs, gidx), (0, 0, 0, 2, 0, 0), False, inst))
            return
        if op == 83:                                    # OpCopyObject of a pointer
            p = self._ptr_of(w[2], ptrs)
            if p is not None:
                ptrs[inst.result_id] = p
                return
        if op == 12:                                    # OpExtInst
            cur.ops.append(self._ext_inst(inst, vals, ptrs, gidx))
            return
        if op in (144, 145, 146):                       # matrix products
            cur.ops.append(self._generic(inst, vals, ptrs, gidx, self._matrix_cost(inst)))
            return
        if op == 56 or op == 55:
            raise CompileError("function header instruction inside a block", instruction_text(m, inst), gidx)
        cur.ops.append(self._generic(inst, vals, ptrs, gidx))

    def _matrix_cost(self, inst) -> pipes.Cost:
        d = self.m.defs
        w = inst.words
        op = inst.opcode
        try:
            left = d[d[w[2]].type_id]
            if op == 145:                               # MatrixTimesVector: lanes(result) x columns
                n = self.types.lanes(inst.type_id)[0] * left.words[2]
            elif op == 144:                             # VectorTimesMatrix: lanes(result) x vector length
                n = self.types.lanes(inst.type_id)[0] * left.words[2]
            else:                                       # MatrixTimesMatrix: lanes(result) x left columns
                n = self.types.lanes(inst.type_id)[0] * left.words[2]
        except (KeyError, IndexError):
            raise CompileError("malformed matrix operands", instruction_text(self.m, inst)) from None
        return (float(n), 0.0, 0.0, 0.0, 0.0, 0.0)

    def _ext_inst(self, inst, vals: dict, ptrs: dict, gidx: int) -> Op:
        w = inst.words
        set_name = self.ext_sets.get(w[2], "")
        if set_name.startswith("NonSemantic."):
            return Op("debug", [], [], pipes.ZERO, False, inst)
        ext = grammar().ext_set(set_name)
        einfo = ext.instructions.get(w[3]) if ext is not None else None
        if set_name != "GLSL.std.450" or einfo is None:
            raise CompileError(f"unsupported extended instruction set {set_name!r} instruction {w[3]}",
                               instruction_text(self.m, inst), gidx)
        entry = pipes.GLSL.get(einfo.opname)
        if entry is None:
            raise CompileError(f"unsupported GLSL.std.450 instruction {einfo.opname}",
                               instruction_text(self.m, inst), gidx)
        unit, scale = entry
        if scale == "a":
            first = self.m.defs.get(w[4]) if len(w) > 4 else None
            units = self.types.lanes(first.type_id)[0] if first is not None else 1.0
            cost = pipes.scaled(unit, units)
        else:
            cost = self._scale(unit, scale, inst, vals)
        extra = pipes.GLSL_EXTRA.get(einfo.opname)
        if extra is not None:
            cost = pipes.add(cost, extra)
        if einfo.opname.startswith("Interpolate") and self.stage != "fragment":
            cost = pipes.ZERO
        f16 = self.types.lanes(inst.type_id)[1]
        return Op(einfo.opname, list(vals.get(inst.result_id, ())), self._uses(inst, vals, ptrs, gidx), cost,
                  f16, inst)

    def _ls_ops(self, tid: int) -> float:
        regs = sum(self.types.parts(tid)) or 1
        return float((regs + 3) // 4)

    def _load(self, inst, p: _Ptr, vals: dict, cur: IRBlock, gidx: int) -> None:
        defs = list(vals.get(inst.result_id, ()))
        sc = p.storage
        if sc in REGISTER_CLASSES and p.root not in self.memory_vars:
            var = self._var_regs(p, vals)
            cur.ops.append(Op("copy", defs, var[p.start:p.stop] if p.stop > p.start else list(var), pipes.ZERO,
                              False, inst))
            return
        uses = list(p.uses)
        cost = pipes.ZERO
        if sc == SC_INPUT:
            if p.builtin:
                cost = pipes.ZERO
            elif self.stage == "fragment":
                cost = (0, 0, 0, 0, self.types.lanes(inst.type_id)[0], 0)
            elif self.stage == "vertex":
                cost = (0, 0, 0, self._ls_ops(inst.type_id), 0, 0)
        elif sc in UNIFORM_CLASSES and not p.dynamic:
            # read straight from uniform registers (FAU): no work register, no op
            self.uniform_keys.add((p.root, p.path, sum(self.types.parts(inst.type_id))))
            vals[inst.result_id] = []
            return
        elif sc in (SC_UNIFORM_CONSTANT, SC_OUTPUT):
            cost = pipes.ZERO
        else:
            cost = (0, 0, 0, self._ls_ops(inst.type_id), 0, 0)
            if p.dynamic:
                cost = (0, 1, 0, cost[3], 0, 0)
        cur.ops.append(Op("OpLoad", defs, uses, tuple(float(c) for c in cost), False, inst))

    def _store(self, inst, p: _Ptr, vals: dict, cur: IRBlock, gidx: int) -> None:
        src = list(self._value_regs(inst.words[1], vals, gidx))
        sc = p.storage
        if sc in REGISTER_CLASSES and p.root not in self.memory_vars:
            var = self._var_regs(p, vals)
            defs = var[p.start:p.stop] if p.stop > p.start else list(var)
            uses = src + (list(defs) if p.partial else [])
            cur.ops.append(Op("copy", list(defs), uses, pipes.ZERO, False, inst))
            return
        value = self.m.defs.get(inst.words[1])
        tid = value.type_id if value is not None else 0
        if sc == SC_OUTPUT and self.stage == "fragment":
            cost = pipes.ZERO                           # tile-buffer write by the blend unit
        elif sc == SC_OUTPUT:
            cost = (0.0, 0.0, 0.0, self._ls_ops(tid), 0.0, 0.0)
        else:
            cost = (0.0, 1.0 if p.dynamic else 0.0, 0.0, self._ls_ops(tid), 0.0, 0.0)
        cur.ops.append(Op("OpStore", [], src + list(p.uses), cost, False, inst))

    @staticmethod
    def _var_regs(p: _Ptr, vals: dict) -> list[int]:
        return p.regs or []


_TERMINATORS = frozenset({"OpBranch", "OpBranchConditional", "OpSwitch", "OpReturn", "OpReturnValue", "OpKill",
                          "OpUnreachable", "OpTerminateInvocation", "OpIgnoreIntersectionKHR",
                          "OpTerminateRayKHR", "OpEmitMeshTasksEXT"})


def build_shader(module: Module, entry: str, spec_values=None) -> Shader:
    """The inlined IR of `entry`; raises CompileError for anything it cannot model."""
    return _Builder(module, entry, spec_values).build()
