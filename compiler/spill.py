"""Spill code: stores after definitions, fills before uses (LS ops).

Role: rewrite a `Shader` in place so the chosen vregs live in stack memory.
Each definition of a spilled vreg is followed by a store; each op using it
reads a fresh short-lived fill vreg loaded just before (one fill per op, even
if the op uses the value twice). Phi sources are filled at the end of the
predecessor; phi definitions are stored at the top of the block. Spilled
vregs and fill vregs are marked unspillable (kind TEMP / FILL), so repeated
rounds always make progress. Shared by the sparse and dense allocators.
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
