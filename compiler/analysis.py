"""From an allocated Shader to cycle figures: per block, total, paths, typical.

Role: sum op counts per pipe per IR block, convert them with a GPU's cost
table, fold IR blocks back onto SPIR-V blocks (pieces of a block split by a
call are summed; copies of a block inlined at several call sites are
averaged), and compute the path figures of a malioc report:

- total: every reachable block once;
- shortest / longest path: entry-to-exit paths on the CFG without back
  edges, chosen by their bound-pipe cycles; longest is None (N/A) when the
  shader keeps a loop (loops left after spirv-opt have dynamic trip counts);
- typical: each branch taken with equal probability, each loop body run
  `LOOP_TRIPS` times per nesting level.

A = max(FMA, CVT, SFU): the arithmetic sub-pipes issue in parallel.
"""

from __future__ import annotations

from dataclasses import dataclass

from .costs import PIPES, GpuCosts
from .graph import Flow
from .ir import Shader

LOOP_TRIPS = 8
ARITH = (0, 1, 2)


@dataclass(frozen=True)
class PipeCycles:
    """Cycles per thread on each pipe (FMA, CVT, SFU, LS, V, T)."""

    fma: float = 0.0
    cvt: float = 0.0
    sfu: float = 0.0
    ls: float = 0.0
    v: float = 0.0
    t: float = 0.0

    @property
    def a(self) -> float:
        return max(self.fma, self.cvt, self.sfu)

    @property
    def bound(self) -> str:
        """The busiest pipe among A, LS, V, T ("A" when all are zero)."""
        pairs = (("A", self.a), ("LS", self.ls), ("V", self.v), ("T", self.t))
        return max(pairs, key=lambda p: p[1])[0]

    @property
    def bound_cycles(self) -> float:
        return max(self.a, self.ls, self.v, self.t)

    def as_dict(self) -> dict[str, float]:
        return {"A": self.a, "FMA": self.fma, "CVT": self.cvt, "SFU": self.sfu, "LS": self.ls, "V": self.v,
                "T": self.t, "bound": self.bound}

    @classmethod
    def of(cls, vec, gpu: GpuCosts) -> PipeCycles:
        return cls(*(gpu.cycles(p, vec[k]) for k, p in enumerate(PIPES)))


def _add(a, b):
    return [x + y for x, y in zip(a, b)]


def block_ops(shader: Shader) -> list[list[float]]:
    out = []
    for b in shader.blocks:
        s = [0.0] * 6
        for op in b.ops:
            c = op.cost
            if c is not None:
                for k in range(6):
                    s[k] += c[k]
        out.append(s)
    return out


def origin_ops(shader: Shader, fl: Flow, ops: list[list[float]]) -> dict[int, tuple[list[float], int]]:
    """SPIR-V global block index -> (op counts per pipe for one execution, number of inlined copies)."""
    per_copy: dict[tuple[int, int], list[float]] = {}
    for i in fl.rpo:
        b = shader.blocks[i]
        key = (b.origin, b.instance)
        per_copy[key] = _add(per_copy.get(key, [0.0] * 6), ops[i])
    sums: dict[int, tuple[list[float], int]] = {}
    for (origin, _), vec in per_copy.items():
        acc, n = sums.get(origin, ([0.0] * 6, 0))
        sums[origin] = (_add(acc, vec), n + 1)
    return {o: ([x / n for x in acc], n) for o, (acc, n) in sums.items()}


def _dag_paths(shader: Shader, fl: Flow, weight: list[list[float]]):
    back = set(fl.back_edges)
    best_min: dict[int, list[float]] = {}
    best_max: dict[int, list[float]] = {}
    if not fl.rpo:
        return [0.0] * 6, [0.0] * 6
    entry = fl.rpo[0]
    best_min[entry] = list(weight[entry])
    best_max[entry] = list(weight[entry])
    key = lambda v: max(max(v[0], v[1], v[2]), v[3], v[4], v[5])  # noqa: E731
    exits_min, exits_max = [], []
    for i in fl.rpo:
        if i not in best_min:
            continue
        succs = [s for s in shader.blocks[i].succs if (i, s) not in back]
        if not shader.blocks[i].succs:
            exits_min.append(best_min[i])
            exits_max.append(best_max[i])
        for s in succs:
            cand_min = _add(best_min[i], weight[s])
            cand_max = _add(best_max[i], weight[s])
            if s not in best_min or key(cand_min) < key(best_min[s]):
                best_min[s] = cand_min
            if s not in best_max or key(cand_max) > key(best_max[s]):
                best_max[s] = cand_max
    if not exits_min:                       # no exit (infinite loop): use every block reached
        exits_min = list(best_min.values())
        exits_max = list(best_max.values())
    return min(exits_min, key=key), max(exits_max, key=key)


def _typical(shader: Shader, fl: Flow, weight: list[list[float]]) -> list[float]:
    back = set(fl.back_edges)
    freq = {fl.rpo[0]: 1.0} if fl.rpo else {}
    total = [0.0] * 6
    for i in fl.rpo:
        f = freq.get(i, 0.0)
        if not f:
            continue
        mult = f * (LOOP_TRIPS ** shader.blocks[i].depth)
        total = [t + mult * w for t, w in zip(total, weight[i])]
        succs = [s for s in shader.blocks[i].succs if (i, s) not in back]
        for s in succs:
            freq[s] = freq.get(s, 0.0) + f / len(succs)
    return total


def path_figures(shader: Shader, fl: Flow, ops: list[list[float]]):
    """(total, shortest, longest or None, typical) op-count vectors."""
    total = [0.0] * 6
    for i in fl.rpo:
        total = _add(total, ops[i])
    shortest, longest = _dag_paths(shader, fl, ops)
    return total, shortest, (longest if not fl.back_edges else None), _typical(shader, fl, ops)


def fp16_percent(shader: Shader) -> float:
    half = full = 0.0
    for b in shader.blocks:
        for op in b.ops:
            c = op.cost
            arith = c[0] + c[1] + c[2]
            if arith:
                full += arith
                if op.f16:
                    half += arith
    return 100.0 * half / full if full else 0.0


def instruction_count(shader: Shader, fl: Flow) -> int:
    n = 0
    for i in fl.rpo:
        for op in shader.blocks[i].ops:
            if any(op.cost):
                n += 1
    return n
