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
- on failure the spill victim is chosen among the node and its coloured
  neighbours by benefit (adjacency length x width, kept as list lengths) over
  cost (uses/defs weighted by loop depth) - no row rescans; the victim's
  registers are freed and colouring carries on, so one round collects every
  spill it needs, and spill code for the whole batch is inserted before the
  (rarely needed) next round.
"""

from __future__ import annotations

import math
import time
from functools import reduce
from operator import or_

from .alloc import REGISTER_FILE, Allocation, definition_order, spill_weights, work_registers
from .errors import CompileError
from .graph import flow
from .ir import Shader
from .liveness import Liveness, bits, liveness
from .spill import insert_spills

MAX_ROUNDS = 16


def affinity(width: int, regs: int) -> int:
    """Bit mask of the base registers a value of `width` may start at."""
    step = 1 if width == 1 else 2
    mask = 0
    for r in range(0, regs - width + 1, step):
        mask |= 1 << r
    return mask


def interference(shader: Shader, order_blocks: list[int], live: Liveness) -> list[list[int]]:
    """Adjacency lists (with repeats) built against the values live at each definition."""
    n = shader.vreg_count
    defcount = bytearray(n)
    for i in order_blocks:
        b = shader.blocks[i]
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
    if order_blocks:
        entry_live = bits(live.live_in[order_blocks[0]])
        for v in entry_live:                 # undefined on entry: all "defined" together
            adj[v].extend(entry_live)
    for i in order_blocks:
        b = shader.blocks[i]
        ssa: set[int] = set()
        mult: set[int] = set()
        for v in bits(live.live_out[i]):
            (mult if multi[v] else ssa).add(v)
        for op in reversed(b.ops):
            defs = op.defs
            if defs:
                for d in defs:
                    ssa.discard(d)
                    mult.discard(d)
                for d in defs:
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
                (mult if multi[u] else ssa).add(u)
        if b.phis:
            pdefs = [d for defs, _ in b.phis for d in defs]
            for d in pdefs:
                ssa.discard(d)
                mult.discard(d)
            for d in pdefs:
                a = adj[d]
                a.extend(ssa)
                a.extend(mult)
                a.extend(pdefs)
                for j in mult:
                    adj[j].append(d)
                if multi[d]:
                    for j in ssa:
                        adj[j].append(d)
    return adj                               # self-edges are harmless: a node's own mask is 0 while it is coloured


def color(shader: Shader, adj: list[list[int]], order: list[int], weights: list[float],
          regs: int) -> tuple[list[int], set[int]]:
    """Greedy colouring in `order`; returns (base register per vreg, spill victims)."""
    n = shader.vreg_count
    widths = shader.widths
    occ = [0] * n
    sol = [-1] * n
    aff = {w: affinity(w, regs) for w in (1, 2, 3, 4)}
    full = {w: (1 << w) - 1 for w in (1, 2, 3, 4)}
    victims: set[int] = set()
    get = occ.__getitem__
    for node in order:
        w = widths[node]
        while True:
            used = reduce(or_, map(get, adj[node]), 0)
            blocked = used
            for k in range(1, w):
                blocked |= used >> k
            free = aff[w] & ~blocked
            if free:
                r = (free & -free).bit_length() - 1
                sol[node] = r
                occ[node] = full[w] << r
                break
            # choose a victim among the node and its coloured neighbours: benefit / cost
            best, best_score = -1, -1.0
            for c in set(adj[node]) | {node}:
                if c != node and sol[c] < 0:
                    continue
                cost = weights[c]
                if cost == math.inf:
                    continue
                score = len(adj[c]) * widths[c] / (cost or 1.0)
                if score > best_score:
                    best, best_score = c, score
            if best < 0:
                raise CompileError(f"register pressure exceeds the {regs}-register file and nothing "
                                   f"left can be spilled (a value of width {w})")
            victims.add(best)
            if best == node:
                break
            sol[best] = -1
            occ[best] = 0
    return sol, victims


def allocate_sparse(shader: Shader, regs: int = REGISTER_FILE) -> Allocation:
    """Allocate in place (inserting spill code as needed); see the module docstring."""
    t0 = time.perf_counter()
    fl = flow(shader)
    stores = fills = 0
    spilled: list[int] = []
    for round_ in range(1, MAX_ROUNDS + 1):
        live = liveness(shader, fl.rpo)
        adj = interference(shader, fl.rpo, live)
        order = definition_order(shader, fl, live)
        weights = spill_weights(shader, fl)
        sol, victims = color(shader, adj, order, weights, regs)
        if not victims:
            return Allocation("sparse", sol, work_registers(shader, sol), stores, fills, spilled, round_,
                              time.perf_counter() - t0)
        s, f = insert_spills(shader, victims)
        stores += s
        fills += f
        spilled += sorted(victims)
    raise CompileError(f"register allocation did not converge after {MAX_ROUNDS} spill rounds")
