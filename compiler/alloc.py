"""What both register allocators share: the result type, spill weights, definition order.

Role: `Allocation` is the outcome of allocating one `Shader` (registers per
vreg, spill counts, rounds); `spill_weights` gives each vreg's cost of
spilling (uses and definitions weighted 10^loop depth; unspillable vregs get
infinity); `definition_order` is the order both allocators colour nodes in:
values undefined at entry first, then definitions in reverse post-order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .graph import Flow
from .ir import FILL, TEMP, Shader
from .liveness import Liveness, bits

REGISTER_FILE = 64


@dataclass
class Allocation:
    method: str
    registers: list[int]                 # base register per vreg, -1 when the vreg is never referenced
    work_registers: int
    spills: int = 0                      # spill stores inserted
    fills: int = 0                       # fill loads inserted
    spilled: list[int] = field(default_factory=list)
    rounds: int = 1
    seconds: float = 0.0
    note: str = ""


def spill_weights(shader: Shader, flow: Flow) -> list[float]:
    n = shader.vreg_count
    w = [0.0] * n
    for i in flow.rpo:
        b = shader.blocks[i]
        f = 10.0 ** min(b.depth, 6)
        for op in b.ops:
            for d in op.defs:
                w[d] += f
            for u in op.uses:
                w[u] += f
        for defs, sources in b.phis:
            for d in defs:
                w[d] += f
            for _, regs in sources:
                for r in regs:
                    w[r] += f
    kinds = shader.kinds
    for v in range(n):
        if kinds[v] in (FILL, TEMP):
            w[v] = math.inf
    return w


def definition_order(shader: Shader, flow: Flow, live: Liveness) -> list[int]:
    seen = bytearray(shader.vreg_count)
    order: list[int] = []
    entry = flow.rpo[0] if flow.rpo else None
    if entry is not None:
        for v in bits(live.live_in[entry]):
            seen[v] = 1
            order.append(v)
    for i in flow.rpo:
        b = shader.blocks[i]
        for defs, _ in b.phis:
            for d in defs:
                if not seen[d]:
                    seen[d] = 1
                    order.append(d)
        for op in b.ops:
            for d in op.defs:
                if not seen[d]:
                    seen[d] = 1
                    order.append(d)
    return order


def work_registers(shader: Shader, regs: list[int]) -> int:
    top = 0
    widths = shader.widths
    for v, r in enumerate(regs):
        if r >= 0 and r + widths[v] > top:
            top = r + widths[v]
    return top
