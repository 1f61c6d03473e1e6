"""Liveness of virtual registers (loops included), as bit sets per block.

Role: the backward data-flow every allocator and the checker build on.
Sets are Python ints (bit v = vreg v), which keeps the fixed point cheap on
shaders of tens of thousands of values. SSA phis follow the usual rule: a
phi's sources are live out of the matching predecessor, its definitions are
not live into its block. Values used before any definition (partially
written variables, OpUndef) are live into the entry block.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ir import Shader


@dataclass
class Liveness:
    live_in: list[int]
    live_out: list[int]


def block_sets(shader: Shader, b) -> tuple[int, int]:
    """(gen, kill): values used before defined in the block, values defined in it (phis included)."""
    gen = 0
    kill = 0
    for op in reversed(b.ops):
        for d in op.defs:
            bit = 1 << d
            kill |= bit
            gen &= ~bit
        for u in op.uses:
            gen |= 1 << u
    for defs, _ in b.phis:
        for d in defs:
            kill |= 1 << d
            gen &= ~(1 << d)
    return gen, kill


def liveness(shader: Shader, order: list[int]) -> Liveness:
    """Fixed point over the blocks in `order` (reverse post-order); iterates post-order."""
    blocks = shader.blocks
    n = len(blocks)
    gen = [0] * n
    keep = [0] * n
    phi_out = [0] * n                 # phi sources flowing out of each predecessor
    for i in order:
        b = blocks[i]
        g, k = block_sets(shader, b)
        gen[i] = g
        keep[i] = ~k
        for _, sources in b.phis:
            for pred, regs in sources:
                for r in regs:
                    phi_out[pred] |= 1 << r
    live_in = [0] * n
    live_out = [0] * n
    post = order[::-1]
    changed = True
    while changed:
        changed = False
        for i in post:
            out = phi_out[i]
            for s in blocks[i].succs:
                out |= live_in[s]
            if out != live_out[i] or not live_in[i] and gen[i]:
                live_out[i] = out
                new_in = gen[i] | (out & keep[i])
                if new_in != live_in[i]:
                    live_in[i] = new_in
                    changed = True
    return Liveness(live_in, live_out)


def bits(x: int) -> list[int]:
    """Indices of the set bits of x, ascending."""
    out = []
    while x:
        low = x & -x
        out.append(low.bit_length() - 1)
        x ^= low
    return out
