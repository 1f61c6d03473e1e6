"""Hand-checked op counts and cycles per block for a small shader written in SPIR-V assembly.

Expectations are worked out by hand from the pipe rules in docs/compiler.md
(not from the code's output): per block, FMA/CVT/SFU/LS/V/T thread-ops, then
cycles = ops / (per-core rate) with Mali-G78's 32 FMA, 32 CVT, 8 SFU, 16 LS,
32 V, 4 T per clock.
"""

from __future__ import annotations

import pytest

from tessera.compiler.api import clear_cache, compile_module, shader_cost
from tessera.compiler.check import check_allocation

from shader_sources import FRAG

# block -> (FMA, CVT, SFU, LS, V, T) thread-ops, by hand:
# b0: varying vec2 = 2 V; sample = 1 T; vec4*scalar = 4 FMA; vec4 add = 4 FMA; compare = 1 CVT;
#     conditional branch = 1 CVT; extract/sampler load free.
# b1: inversesqrt = 1 SFU; normalize vec4 = 2 FMA per lane (dot + scale) + 1 SFU; vec4*scalar = 4 FMA;
#     fragment output store is free (blend unit).
# b2: return, free.
EXPECTED_OPS = {0: (8, 2, 0, 0, 2, 1), 1: (12, 0, 2, 0, 0, 0), 2: (0, 0, 0, 0, 0, 0)}


@pytest.mark.parametrize("ra", ["sparse", "dense"])
def test_block_ops_and_cycles(asm, ra):
    data = asm(FRAG)
    c = compile_module(data, "main", "mali-g78", ra)
    cost = c.cost
    assert cost.stage == "fragment"
    for index, ops in EXPECTED_OPS.items():
        assert cost.blocks[index].ops == tuple(float(x) for x in ops), index
    b0, b1 = cost.blocks[0].cycles, cost.blocks[1].cycles
    assert (b0.fma, b0.cvt, b0.v, b0.t) == (8 / 32, 2 / 32, 2 / 32, 1 / 4)
    assert (b1.fma, b1.sfu) == (12 / 32, 2 / 8)
    # total: FMA 20/32, bound A; shortest b0->b2 (A 0.25 = T 0.25), longest b0->b1->b2
    assert cost.total.fma == 20 / 32 and cost.total.bound == "A"
    assert cost.shortest.bound_cycles == 0.25
    assert cost.longest is not None and cost.longest.fma == 20 / 32 and cost.longest.sfu == 2 / 8
    assert cost.loops == 0
    # registers: t (4) and m (4) are live together at m's definition; nothing needs more
    assert cost.work_registers == 8 and cost.occupancy == "full"
    assert cost.spills == cost.fills == 0
    assert check_allocation(c.shader, c.allocation.registers) == []


def test_g720_converts_with_its_own_rates(asm):
    cost = compile_module(asm(FRAG), "main", "mali-g720").cost
    # G720: 128 FMA, 8 T per clock
    assert cost.blocks[0].cycles.fma == 8 / 128
    assert cost.blocks[0].cycles.t == 1 / 8


def test_shader_cost_is_cached_by_hash(asm):
    data = asm(FRAG)
    clear_cache()
    a = shader_cost(data, "main", "mali-g78")
    b = shader_cost(bytes(data), "main", "mali-g78")
    assert a is b
    c = shader_cost(data, "main", "mali-g720")
    assert c is not a and c.gpu == "mali-g720"
