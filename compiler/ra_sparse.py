"""The fast register allocator: LCRA with sparse constraints and bit-mask tests.

Role: allocate a `Shader`'s vregs to the 64-register file (widths 1..4,
multi-register values aligned to even registers) without the costs that made
Mesa's 2021 allocator take minutes on big shaders (see
shared/seeds/panfrost_shader_compile_speedup.blog.txt):

- constraints are sparse per node (adjacency lists), never an N x N matrix;
- interference is built only against the values live at each definition,
  walking each block backwards with a live set (never a loop over all nodes);
  in strict SSA every value live at a definition was defined (and coloured)
  earlier, so only multiply-defined values (promoted variables, inlined
  multi-return results, values undefined at entry) need the reverse edge;
- the candidate test is one bit mask: OR the occupied-register masks of the
  neighbours, smear it by the node's width, and take the lowest free
  aligned base (no per-register retry loop);
- liveness and interference are built ONCE. When a node finds no free base,
  the victims are the coloured neighbours that occupy the cheapest aligned
  window of its width, where a neighbour costs its loop-weighted
  definitions and uses (the spill code it needs) divided by its width x the
  length of live range it still has ahead (use density: long, rarely used
  ranges go first) - no row rescans, no popcounts. A victim is spilled at
  once and incrementally: its definitions are renamed to fresh short TEMP
  vregs stored right after them, each op reading it reads a fresh FILL vreg
  loaded right before it, and only those new short ranges get interference
  edges (both ways), from the live set at their one program point
  (recomputed from a per-block checkpoint of the backward pass, at most
  `CHECKPOINT` ops away, minus everything spilled so far). The victim's
  registers are freed, the failing node is retried, then the new ranges are
  coloured; nothing else is recoloured and nothing is rebuilt. The spill
  code itself is written once at the end (`spill.emit_planned_spills`).

Occupancy: the lowest free base is always taken, so a shader that fits in
32 registers without spilling gets <= 32 (full occupancy) - the same result
as trying a 32-register allocation first and falling back to 64 - and the
upper half of the file is only touched where 32 would have spilled.
"""

from __future__ import annotations

import math
import time
from functools import reduce
from operator import or_

from .alloc import REGISTER_FILE, Allocation, definition_order, spill_weights, work_registers
from .errors import CompileError
from .graph import flow
from .ir import FILL, TEMP, Shader
from .liveness import Liveness, bits, liveness
from .spill import _BRANCHES, emit_planned_spills

CHECKPOINT = 32          # ops between live-set checkpoints of the backward pass
DEF, USE, PHIDEF, PHISRC = 0, 1, 2, 3


def affinity(width: int, regs: int) -> int:
    """Bit mask of the base registers a value of `width` may start at."""
    step = 1 if width == 1 else 2
    mask = 0
    for r in range(0, regs - width + 1, step):
        mask |= 1 << r
    return mask


class Graph:
    """Interference (adjacency lists with repeats) plus what incremental spilling needs."""

    __slots__ = ("adj", "snaps", "sites", "base", "defpos")

    def __init__(self, adj, snaps, sites, base, defpos) -> None:
        self.adj: list[list[int]] = adj
        self.snaps: dict[int, dict[int, frozenset]] = snaps   # block -> op index j -> values live before op j
        self.sites: list[list[tuple]] = sites                   # vreg -> (kind, block, index, extra)
        self.base: dict[int, int] = base                         # block -> position of its first op (RPO walk)
        self.defpos: list[int] = defpos                          # vreg -> position of its first definition


def interference(shader: Shader, order_blocks: list[int], live: Liveness) -> Graph:
    """Adjacency lists built against the values live at each definition (one backward pass per block)."""
    n = shader.vreg_count
    blocks = shader.blocks
    defcount = bytearray(n)
    for i in order_blocks:
        b = blocks[i]
        for op in b.ops:
            for d in op.defs:
                if defcount[d] < 2:
                    defcount[d] += 1
        for defs, _ in b.phis:
            for d in defs:
                if defcount[d] < 2:
                    defcount[d] += 1
    multi = [c != 1 for c in defcount]
    adj: list[list[int]] = [[] for _ in range(n)]
    sites: list[list[tuple]] = [[] for _ in range(n)]
    defpos = [-1] * n
    base: dict[int, int] = {}
    snaps: dict[int, dict[int, frozenset]] = {}
    pos = 0
    for i in order_blocks:
        base[i] = pos
        pos += len(blocks[i].ops) + 1
    if order_blocks:
        entry_live = bits(live.live_in[order_blocks[0]])
        for v in entry_live:                 # undefined on entry: all "defined" together
            adj[v].extend(entry_live)
    for i in order_blocks:
        b = blocks[i]
        ops = b.ops
        p0 = base[i]
        ssa: set[int] = set()
        mult: set[int] = set()
        for v in bits(live.live_out[i]):
            (mult if multi[v] else ssa).add(v)
        snap = {len(ops): frozenset(ssa | mult)}
        for k in range(len(ops) - 1, -1, -1):
            op = ops[k]
            defs = op.defs
            if defs:
                for d in defs:
                    ssa.discard(d)
                    mult.discard(d)
                for d in defs:
                    sites[d].append((DEF, i, k, 0))
                    defpos[d] = p0 + k
                    a = adj[d]
                    a.extend(ssa)
                    a.extend(mult)
                    if multi[d]:
                        for j in ssa:
                            adj[j].append(d)
                    for j in mult:
                        adj[j].append(d)
                if len(defs) > 1:
                    for d in defs:
                        adj[d].extend(defs)
            for u in op.uses:
                sites[u].append((USE, i, k, 0))
                (mult if multi[u] else ssa).add(u)
            if k and not k % CHECKPOINT:
                snap[k] = frozenset(ssa | mult)
        snaps[i] = snap
        if b.phis:
            pdefs = [d for defs, _ in b.phis for d in defs]
            for d in pdefs:
                ssa.discard(d)
                mult.discard(d)
            for d in pdefs:
                sites[d].append((PHIDEF, i, 0, 0))
                defpos[d] = p0
                a = adj[d]
                a.extend(ssa)
                a.extend(mult)
                a.extend(pdefs)
                for j in mult:
                    adj[j].append(d)
                if multi[d]:
                    for j in ssa:
                        adj[j].append(d)
            for pi, (_, sources) in enumerate(b.phis):
                for si, (_, regs) in enumerate(sources):
                    for r in regs:
                        sites[r].append((PHISRC, i, pi, si))
    # self-edges are harmless: a node's own mask is 0 while it is coloured
    return Graph(adj, snaps, sites, base, defpos)


class _Colouring:
    """Greedy colouring in definition order with incremental spilling (see the module docstring)."""

    def __init__(self, shader: Shader, graph: Graph, live: Liveness, weights: list[float], regs: int) -> None:
        self.shader = shader
        self.g = graph
        self.live = live
        self.weights = weights
        self.regs = regs
        n = shader.vreg_count
        self.occ = [0] * n
        self.sol = [-1] * n
        self.aff = {w: affinity(w, regs) for w in (1, 2, 3, 4)}
        self.full = {w: (1 << w) - 1 for w in (1, 2, 3, 4)}
        self.where: dict[int, int] = {}          # piece vreg -> its program position
        self.ends: dict[int, int] = {}           # vreg -> last position it is live (cache)
        self.spilled: set[int] = set()
        self.victims: list[int] = []
        self.fills_before: dict[tuple[int, int], list[int]] = {}
        self.stores_after: dict[tuple[int, int], list[int]] = {}
        self.phi_stores: dict[int, list[int]] = {}
        self.phi_fills: dict[int, list[int]] = {}

    # -- colouring -------------------------------------------------------------------------
    def try_colour(self, node: int) -> bool:
        w = self.shader.widths[node]
        used = reduce(or_, map(self.occ.__getitem__, self.g.adj[node]), 0)
        blocked = used
        for k in range(1, w):
            blocked |= used >> k
        free = self.aff[w] & ~blocked
        if not free:
            return False
        r = (free & -free).bit_length() - 1
        self.sol[node] = r
        self.occ[node] = self.full[w] << r
        return True

    def run(self, order: list[int]) -> None:
        sol = self.sol
        for node in order:
            if sol[node] >= 0 or node in self.spilled:
                continue
            if self.try_colour(node):
                continue
            stack = [node]
            while stack:
                x = stack.pop()
                if sol[x] >= 0 or x in self.spilled:
                    continue
                if self.try_colour(x):
                    continue
                pieces: list[int] = []
                for v in self.choose(x):
                    pieces.extend(self.spill(v))
                stack.extend(reversed(pieces))
                if x not in self.spilled:
                    stack.append(x)              # retried first, then the new short ranges

    # -- victim choice ---------------------------------------------------------------------
    def position(self, x: int) -> int:
        p = self.where.get(x)
        return self.g.defpos[x] if p is None else p

    def end(self, v: int) -> int:
        e = self.ends.get(v)
        if e is None:
            g = self.g
            blocks = self.shader.blocks
            e = g.defpos[v]
            for kind, i, k, extra in g.sites[v]:
                if kind == USE:
                    e = max(e, g.base[i] + k)
                elif kind == PHISRC:
                    pred = blocks[i].phis[k][1][extra][0]
                    e = max(e, g.base.get(pred, 0) + len(blocks[pred].ops))
            bit = 1 << v
            for i, out in enumerate(self.live.live_out):
                if out & bit and i in g.base:
                    e = max(e, g.base[i] + len(blocks[i].ops))
            self.ends[v] = e
        return e

    def choose(self, x: int) -> list[int]:
        """Coloured neighbours filling the cheapest aligned window of x's width."""
        widths = self.shader.widths
        w = widths[x]
        sol = self.sol
        weights = self.weights
        p = self.position(x)
        owners: list[list[int]] = [[] for _ in range(self.regs)]
        for c in set(self.g.adj[x]):
            r = sol[c]
            if r >= 0 and c != x:
                for k in range(r, r + widths[c]):
                    owners[k].append(c)
        score: dict[int, float] = {}
        best, best_cost = None, math.inf
        for r in bits(self.aff[w]):
            window = {c for k in range(r, r + w) for c in owners[k]}
            cost = 0.0
            for c in window:
                s = score.get(c)
                if s is None:
                    wt = weights[c]
                    s = math.inf if wt == math.inf else (wt or 1.0) / (widths[c] * max(1, self.end(c) - p))
                    score[c] = s
                cost += s
                if cost >= best_cost:
                    break
            if cost < best_cost:
                best, best_cost = window, cost
        if best is None:
            if weights[x] != math.inf and x not in self.where:
                return [x]                       # last resort (only helps a multiply-defined node)
            raise CompileError(f"register pressure exceeds the {self.regs}-register file and nothing "
                               f"left can be spilled (a value of width {w})")
        return sorted(best)

    # -- incremental spilling --------------------------------------------------------------
    def live_before(self, i: int, k: int) -> set[int]:
        """Values live just before op k of block i now (spilled values and fill temps left out)."""
        ops = self.shader.blocks[i].ops
        j = min((k // CHECKPOINT + 1) * CHECKPOINT, len(ops))
        live = set(self.g.snaps[i][j])
        kinds = self.shader.kinds
        for q in range(j - 1, k - 1, -1):
            op = ops[q]
            live.difference_update(op.defs)
            for u in op.uses:
                if kinds[u] != FILL:
                    live.add(u)
        live -= self.spilled
        return live

    def new_piece(self, v: int, kind: int, pos: int) -> int:
        x = self.shader.new_vreg(self.shader.widths[v], kind)
        self.g.adj.append([])
        self.occ.append(0)
        self.sol.append(-1)
        self.weights.append(math.inf)
        self.where[x] = pos
        return x

    def spill(self, v: int) -> list[int]:
        shader = self.shader
        g = self.g
        blocks = shader.blocks
        self.spilled.add(v)
        self.victims.append(v)
        self.sol[v] = -1
        self.occ[v] = 0
        shader.kinds[v] = TEMP
        shader.stack_bytes += 4 * shader.widths[v]
        placed: list[tuple[int, int, int, int]] = []         # (piece, kind, block, index)
        filled_ops: set[tuple[int, int]] = set()
        for kind, i, k, extra in g.sites[v]:
            if kind == DEF:
                op = blocks[i].ops[k]
                s = self.new_piece(v, TEMP, g.base[i] + k)
                op.defs = [s if d == v else d for d in op.defs]
                self.stores_after.setdefault((i, k), []).append(s)
                placed.append((s, DEF, i, k))
            elif kind == USE:
                if (i, k) in filled_ops:
                    continue
                filled_ops.add((i, k))
                op = blocks[i].ops[k]
                t = self.new_piece(v, FILL, g.base[i] + k)
                op.uses = [t if u == v else u for u in op.uses]
                self.fills_before.setdefault((i, k), []).append(t)
                placed.append((t, USE, i, k))
            elif kind == PHIDEF:
                s = self.new_piece(v, TEMP, g.base[i])
                for defs, _ in blocks[i].phis:
                    defs[:] = [s if d == v else d for d in defs]
                self.phi_stores.setdefault(i, []).append(s)
                placed.append((s, PHIDEF, i, 0))
            else:                                            # PHISRC: block i, phi k, source extra
                sources = blocks[i].phis[k][1]
                pred, regs = sources[extra]
                new = []
                for r in regs:
                    if r == v:
                        t = self.new_piece(v, FILL, g.base.get(pred, 0) + len(blocks[pred].ops))
                        self.phi_fills.setdefault(pred, []).append(t)
                        placed.append((t, PHISRC, pred, 0))
                        new.append(t)
                    else:
                        new.append(r)
                sources[extra] = (pred, new)
        adj = g.adj
        for x, kind, i, k in placed:
            if i not in g.snaps:                             # phi source from an unreachable predecessor
                continue
            if kind == USE:
                live = self.live_before(i, k)
                live.update(self.fills_before[(i, k)])
                if k == self._phi_fill_at(i):
                    live.update(self.phi_fills.get(i, ()))
            elif kind == DEF:
                live = self.live_before(i, k + 1)
                live.update(blocks[i].ops[k].defs)
            elif kind == PHIDEF:
                live = self.live_before(i, 0)
                live.update(d for defs, _ in blocks[i].phis for d in defs)
            else:
                at = self._phi_fill_at(i)
                live = self.live_before(i, at)
                live.update(self.phi_fills[i])
                live.update(self.fills_before.get((i, at), ()))
            adj[x].extend(live)
            for y in live:
                adj[y].append(x)
        return [x for x, _, _, _ in placed]

    def _phi_fill_at(self, i: int) -> int:
        ops = self.shader.blocks[i].ops
        return len(ops) - 1 if ops and ops[-1].name in _BRANCHES else len(ops)


def allocate_sparse(shader: Shader, regs: int = REGISTER_FILE) -> Allocation:
    """Allocate in place (inserting spill code as needed); see the module docstring."""
    t0 = time.perf_counter()
    fl = flow(shader)
    live = liveness(shader, fl.rpo)
    graph = interference(shader, fl.rpo, live)
    order = definition_order(shader, fl, live)
    weights = spill_weights(shader, fl)
    col = _Colouring(shader, graph, live, weights, regs)
    col.run(order)
    stores, fills = emit_planned_spills(shader, col.fills_before, col.stores_after, col.phi_stores,
                                        col.phi_fills)
    sol = col.sol
    return Allocation("sparse", sol, work_registers(shader, sol), stores, fills, sorted(col.victims), 1,
                      time.perf_counter() - t0, note=f"{len(col.victims)} values spilled incrementally")
