"""Allocation checker: no two simultaneously live values share a register.

Role: an independent verification of any allocation (sparse or dense). It
recomputes liveness itself, per instruction, with plain Python sets (not
the bit-set code the allocators use) and checks at every definition and at
every block entry that the registers of all values live together are
disjoint, inside the register file, and aligned as the allocators promise.
Returns a list of problems; empty means valid.
"""

from __future__ import annotations

from .ir import Shader


def _live_sets(shader: Shader) -> tuple[list[set[int]], list[set[int]]]:
    blocks = shader.blocks
    n = len(blocks)
    live_in = [set() for _ in range(n)]
    live_out = [set() for _ in range(n)]
    changed = True
    while changed:
        changed = False
        for b in reversed(blocks):
            out: set[int] = set()
            for s in b.succs:
                out |= live_in[s]
                for _, sources in blocks[s].phis:
                    for pred, regs in sources:
                        if pred == b.index:
                            out.update(regs)
            live = set(out)
            for op in reversed(b.ops):
                live.difference_update(op.defs)
                live.update(op.uses)
            for defs, _ in b.phis:
                live.difference_update(defs)
            if out != live_out[b.index] or live != live_in[b.index]:
                live_out[b.index] = out
                live_in[b.index] = live
                changed = True
    return live_in, live_out


def check_allocation(shader: Shader, registers: list[int], register_file: int = 64) -> list[str]:
    widths = shader.widths
    problems: list[str] = []

    def disjoint(values, where: str) -> None:
        owner: dict[int, int] = {}
        for v in values:
            r = registers[v] if v < len(registers) else -1
            w = widths[v]
            if r < 0:
                problems.append(f"{where}: v{v} is live but has no register")
                continue
            if r + w > register_file:
                problems.append(f"{where}: v{v} (r{r}, width {w}) exceeds the register file")
            if w > 1 and r % 2:
                problems.append(f"{where}: v{v} (width {w}) starts at odd register r{r}")
            for k in range(r, r + w):
                other = owner.get(k)
                if other is not None and other != v:
                    problems.append(f"{where}: v{v} and v{other} share r{k}")
                owner[k] = v

    live_in, live_out = _live_sets(shader)
    reachable = _reachable(shader)
    for b in shader.blocks:
        if b.index not in reachable:
            continue
        live = set(live_out[b.index])
        for k in range(len(b.ops) - 1, -1, -1):
            op = b.ops[k]
            if op.defs:
                disjoint(live.union(op.defs), f"block {b.index} op {k} ({op.name})")
            live.difference_update(op.defs)
            live.update(op.uses)
        phi_defs = [d for defs, _ in b.phis for d in defs]
        disjoint(live.union(phi_defs), f"block {b.index} entry")
        if len(problems) > 20:
            break
    return problems


def _reachable(shader: Shader) -> set[int]:
    seen = {0} if shader.blocks else set()
    stack = list(seen)
    while stack:
        for s in shader.blocks[stack.pop()].succs:
            if s not in seen:
                seen.add(s)
                stack.append(s)
    return seen
