"""The 2021 baseline allocator (Mesa LCRA as the seed describes it): `--ra=dense`.

Role: a faithful model of the algorithm that took 203 s on the seed's shader,
kept as a correctness cross-check and a benchmark baseline:

- an N x N matrix of 7-bit linear constraints (bit k set: the pair may not
  sit at base-register distance k - 3, for distances -3..3), `uint8`;
- interference: at each definition, every node of the shader is tested for
  liveness (an O(N) scan of a live vector), and the constraint pair is ORed
  into both rows;
- solving: nodes in order, each candidate register tested with an O(N) scan
  of the node's row against every solved node (lcra_test_linear);
- on failure: the spill node is chosen by a whole-row popcount of every row
  (lcra_count_constraints), ONE node is spilled, and liveness, the matrix and
  the solution are rebuilt from scratch.

The O(N) loops are numpy vector operations, as the seed's NEON rewrite made
them; the algorithm (and its complexity) is the 2021 one. Same colouring
order, alignment and spill code as the sparse allocator, so the two are
comparable. A `deadline` (seconds) stops it between spill rounds and raises
`DenseTimeout` (used by the benchmark).
"""

from __future__ import annotations

import math
import time

import numpy as np

from .alloc import REGISTER_FILE, Allocation, definition_order, spill_weights, work_registers
from .errors import CompileError
from .graph import flow
from .ir import Shader
from .liveness import bits, liveness
from .ra_sparse import affinity
from .spill import insert_spills

MAX_SPILL_ROUNDS = 2000
UNSOLVED = -100

# CONSTRAINT[wi, wj]: bits of distance (s_j - s_i) + 3 at which values of widths wi, wj overlap
CONSTRAINT = np.zeros((5, 5), np.uint8)
for _wi in range(1, 5):
    for _wj in range(1, 5):
        CONSTRAINT[_wi, _wj] = sum(1 << (d + 3) for d in range(-(_wj - 1), _wi))
POPCOUNT = np.array([bin(i).count("1") for i in range(256)], np.uint8)


class DenseTimeout(Exception):
    def __init__(self, rounds: int, seconds: float) -> None:
        super().__init__(f"dense allocator stopped after {rounds} rounds ({seconds:.1f} s)")
        self.rounds = rounds
        self.seconds = seconds


def _matrix(shader: Shader, rpo: list[int], live, index: np.ndarray, n: int, widths: np.ndarray) -> np.ndarray:
    linear = np.zeros((n, n), np.uint8)
    if rpo:
        entry = [index[v] for v in bits(live.live_in[rpo[0]])]
        for a in entry:
            for b in entry:
                if a != b:
                    linear[a, b] |= CONSTRAINT[widths[a], widths[b]]
    for i in rpo:
        blk = shader.blocks[i]
        vec = np.zeros(n, np.bool_)
        out = [index[v] for v in bits(live.live_out[i])]
        vec[out] = True

        def define(ds: list[int]) -> None:
            for d in ds:
                vec[d] = False
            js = np.flatnonzero(vec)                 # every node scanned: O(N)
            wj = widths[js]
            for d in ds:
                wd = widths[d]
                linear[d, js] |= CONSTRAINT[wd, wj]
                linear[js, d] |= CONSTRAINT[wj, wd]
                for e in ds:
                    if e != d:
                        linear[d, e] |= CONSTRAINT[wd, widths[e]]

        for op in reversed(blk.ops):
            if op.defs:
                define([index[d] for d in op.defs])
            if op.uses:
                vec[[index[u] for u in op.uses]] = True
        if blk.phis:
            define([index[d] for defs, _ in blk.phis for d in defs])
    return linear


def allocate_dense(shader: Shader, regs: int = REGISTER_FILE, deadline: float | None = None) -> Allocation:
    t0 = time.perf_counter()
    fl = flow(shader)
    stores = fills = 0
    spilled: list[int] = []
    cand = {w: bits(affinity(w, regs)) for w in (1, 2, 3, 4)}
    for round_ in range(1, MAX_SPILL_ROUNDS + 1):
        if deadline is not None and time.perf_counter() - t0 > deadline:
            raise DenseTimeout(round_ - 1, time.perf_counter() - t0)
        live = liveness(shader, fl.rpo)
        order = definition_order(shader, fl, live)
        weights = spill_weights(shader, fl)
        n = len(order)
        index = np.full(shader.vreg_count, -1, np.int64)
        index[order] = np.arange(n)
        widths = np.array([shader.widths[v] for v in order], np.int64)
        linear = _matrix(shader, fl.rpo, live, index, n, widths)
        sol = np.full(n, UNSOLVED, np.int64)
        failed = -1
        for i in range(n):                           # lcra_solve
            row = linear[i]
            for r in cand[int(widths[i])]:
                lhs = sol - r                        # lcra_test_linear: O(N) per candidate
                near = (lhs >= -3) & (lhs <= 3)
                if not np.any(row[near] & (1 << (lhs[near] + 3)).astype(np.uint8)):
                    sol[i] = r
                    break
            else:
                failed = i
                break
        if failed < 0:
            regs_out = [-1] * shader.vreg_count
            for k, v in enumerate(order):
                regs_out[v] = int(sol[k])
            return Allocation("dense", regs_out, work_registers(shader, regs_out), stores, fills, spilled,
                              round_, time.perf_counter() - t0)
        # lcra_get_best_spill_node: whole-row popcount of every row
        benefit = POPCOUNT[linear].sum(axis=1, dtype=np.int64)
        cost = np.array([weights[v] for v in order])
        score = np.where(np.isfinite(cost), benefit / np.where(cost > 0, cost, 1.0), -1.0)
        best = int(np.argmax(score))
        if score[best] <= 0 or not math.isfinite(cost[best]):
            raise CompileError(f"register pressure exceeds the {regs}-register file and nothing left can be spilled")
        victim = order[best]
        s, f = insert_spills(shader, {victim})
        stores += s
        fills += f
        spilled.append(victim)
    raise CompileError(f"dense allocation did not converge after {MAX_SPILL_ROUNDS} spill rounds")
