"""Spill code: stores after definitions, fills before uses (LS ops).

Role: rewrite a `Shader` in place so the chosen vregs live in stack memory.
Each definition of a spilled vreg is followed by a store; each op using it
reads a fresh short-lived fill vreg loaded just before (one fill per op, even
if the op uses the value twice). Phi sources are filled at the end of the
predecessor; phi definitions are stored at the top of the block. Spilled
vregs and fill vregs are marked unspillable (kind TEMP / FILL), so repeated
rounds always make progress.

`insert_spills` rewrites for a batch of victims at once (the dense
allocator, before each full rebuild); `emit_planned_spills` writes, in the
same places and with the same counts, the code the sparse allocator planned
while it spilled incrementally (it renames each definition of a victim to a
fresh short TEMP vreg instead of keeping the victim's number).
"""

from __future__ import annotations

from .ir import FILL, TEMP, Op, Shader

STORE_COST = (0.0, 0.0, 0.0, 1.0, 0.0, 0.0)
FILL_COST = STORE_COST
_BRANCHES = ("OpBranchConditional", "OpSwitch")


def insert_spills(shader: Shader, victims: set[int]) -> tuple[int, int]:
    """Spill every vreg in `victims`; returns (stores, fills) added."""
    widths = shader.widths
    stores = fills = 0
    for v in victims:
        shader.kinds[v] = TEMP
        shader.stack_bytes += 4 * widths[v]
    for b in shader.blocks:
        out: list[Op] = []
        for defs, sources in b.phis:
            for d in defs:
                if d in victims:
                    out.append(Op("spill.store", [], [d], STORE_COST))
                    stores += 1
            for k, (pred, regs) in enumerate(sources):
                if any(r in victims for r in regs):
                    new = []
                    pblock = shader.blocks[pred]
                    at = len(pblock.ops) - 1 if pblock.ops and pblock.ops[-1].name in _BRANCHES else len(pblock.ops)
                    for r in regs:
                        if r in victims:
                            t = shader.new_vreg(widths[r], FILL)
                            pblock.ops.insert(at, Op("spill.fill", [t], [], FILL_COST))
                            at += 1
                            fills += 1
                            new.append(t)
                        else:
                            new.append(r)
                    sources[k] = (pred, new)
        for op in b.ops:
            uses = op.uses
            if uses and not victims.isdisjoint(uses):
                renamed: dict[int, int] = {}
                for u in uses:
                    if u in victims and u not in renamed:
                        t = shader.new_vreg(widths[u], FILL)
                        renamed[u] = t
                        out.append(Op("spill.fill", [t], [], FILL_COST))
                        fills += 1
                op.uses = [renamed.get(u, u) for u in uses]
            out.append(op)
            for d in op.defs:
                if d in victims:
                    out.append(Op("spill.store", [], [d], STORE_COST))
                    stores += 1
        b.ops = out
    return stores, fills


def emit_planned_spills(shader: Shader, fills_before: dict[tuple[int, int], list[int]],
                        stores_after: dict[tuple[int, int], list[int]], phi_stores: dict[int, list[int]],
                        phi_fills: dict[int, list[int]]) -> tuple[int, int]:
    """Write the spill code the sparse allocator planned (vregs already renamed); returns (stores, fills).

    The allocator renames as it spills, one victim at a time, and only records
    where the code goes, so op indices stay stable while it works: each
    definition of a victim now defines a fresh TEMP vreg stored right after
    it (`stores_after[(block, op)]`, phi definitions at the top of their block:
    `phi_stores[block]`), each op that read the victim reads a fresh FILL vreg
    loaded right before it (`fills_before[(block, op)]`), and phi sources are
    FILL vregs loaded at the end of the predecessor, before a conditional
    branch (`phi_fills[pred]`) - the same places `insert_spills` uses.
    """
    touched = {b for b, _ in fills_before} | {b for b, _ in stores_after} | set(phi_stores) | set(phi_fills)
    stores = fills = 0
    for i in sorted(touched):
        b = shader.blocks[i]
        ops = b.ops
        at = len(ops) - 1 if ops and ops[-1].name in _BRANCHES else len(ops)
        out: list[Op] = []
        for s in phi_stores.get(i, ()):
            out.append(Op("spill.store", [], [s], STORE_COST))
            stores += 1
        pf = phi_fills.get(i, ())
        for k, op in enumerate(ops):
            if k == at:
                for t in pf:
                    out.append(Op("spill.fill", [t], [], FILL_COST))
                    fills += 1
            for t in fills_before.get((i, k), ()):
                out.append(Op("spill.fill", [t], [], FILL_COST))
                fills += 1
            out.append(op)
            for s in stores_after.get((i, k), ()):
                out.append(Op("spill.store", [], [s], STORE_COST))
                stores += 1
        if at == len(ops):
            for t in pf:
                out.append(Op("spill.fill", [t], [], FILL_COST))
                fills += 1
        b.ops = out
    return stores, fills
