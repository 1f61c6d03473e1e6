"""The compiler model's API for the emulated driver, the CLI and instrumentation.

    shader_cost(spirv: bytes, entry: str, gpu: str, spec_values=None, ra="sparse") -> ShaderCost
    compile_module(module, entry, gpu="mali-g720", ra="sparse", spec_values=None) -> Compiled
    entry_point_names(spirv) -> list[str]

`shader_cost` is what the ICD calls at every pipeline creation: results are
cached in-process by (SHA-256 of the SPIR-V, entry, gpu, allocator,
specialization values) in an LRU of `CACHE_SIZE` entries guarded by a lock,
so any thread may call it. Every failure is a `CompileError`.

Block numbering: `ShaderCost.blocks` are SPIR-V blocks in tessera.spirv's
module-wide *global* numbering (functions in binary order, each block its
i-th OpLabel; `BlockCost.function`/`local_index` give the function-local
one), the numbering the block-counter pass uses. Figures are for ONE
execution of the block; a function inlined at several call sites reports the
mean of its copies (spill code may differ between copies).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from tessera.spirv import Module, SpirvError, parse
from tessera.spirv.reflect import entry_points

from . import analysis
from .alloc import Allocation
from .analysis import PipeCycles
from .costs import gpu_costs
from .errors import CompileError
from .graph import flow
from .ir import Shader, build_shader

CACHE_SIZE = 256
ALLOCATORS = ("sparse", "dense")


@dataclass(frozen=True)
class BlockCost:
    index: int                  # global block index (tessera.spirv numbering)
    function: str | None
    local_index: int
    reachable: bool             # False: not reachable in its function (not costed)
    used: bool                  # emitted for this entry point (the function is called)
    copies: int                 # inlined copies the figures are averaged over
    ops: tuple[float, float, float, float, float, float]   # FMA, CVT, SFU, LS, V, T thread-ops
    cycles: PipeCycles


@dataclass(frozen=True)
class ShaderCost:
    gpu: str
    entry: str
    stage: str
    allocator: str
    work_registers: int
    occupancy: str              # "full" (<= 32 work registers) or "half"
    uniform_registers: int
    spills: int                 # spill stores
    fills: int                  # fill loads
    stack_bytes: int
    fp16_percent: float
    instructions: int
    loops: int
    total: PipeCycles
    shortest: PipeCycles
    longest: PipeCycles | None  # None: dynamic loops (N/A)
    typical: PipeCycles
    blocks: tuple[BlockCost, ...]
    diagnostics: tuple[str, ...]
    ra_seconds: float
    compile_seconds: float

    @property
    def cycles_longest(self) -> float | None:
        """Bound-pipe cycles per invocation on the longest path (None with dynamic loops)."""
        return None if self.longest is None else self.longest.bound_cycles

    @property
    def cycles_typical(self) -> float:
        """Bound-pipe cycles per invocation on a typical path (see analysis.LOOP_TRIPS)."""
        return self.typical.bound_cycles

    @property
    def stack_spilling(self) -> bool:
        return self.spills > 0 or self.stack_bytes > 0

    def block(self, index: int) -> BlockCost:
        return self.blocks[index]


@dataclass
class Compiled:
    """Everything one compile produced (the IR stays inspectable for tests)."""

    shader: Shader
    allocation: Allocation
    cost: ShaderCost


def _module(spirv, spec_values: Mapping | None = None) -> Module:
    if isinstance(spirv, Module):
        return spirv
    try:
        module = parse(spirv)
        _lower_tensors(module, bytes(spirv) if isinstance(spirv, (bytes, bytearray, memoryview)) else module.to_bytes(),
                       spec_values)
        return module
    except SpirvError as exc:
        raise CompileError(f"invalid SPIR-V: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise CompileError(f"invalid SPIR-V input: {exc}") from None


def _lower_tensors(module: Module, code: bytes, spec_values: Mapping | None) -> None:
    """SPV_ARM_tensors: reads and writes are costed as the emulated Mali runs them, lowered to
    storage-buffer loads and stores (LS) with their bounds checks and addressing (CVT), by the
    toolkit's pass with the bindings a driver would give the module's own layout. A module with
    tensors is specialized first (`spec_values`, else the defaults), as the driver does: the lowering
    needs tensor ranks and coordinate-array lengths as constants (Arm's ML emulation layer gives them
    as SpecIds)."""
    from tessera.spirv.passes.tensors import lower_tensors, standalone_bindings, uses_tensors

    if not uses_tensors(code):
        return
    from tessera.spirv.passes.specialize import freeze_spec_constants

    freeze_spec_constants(module, spec_values)
    lower_tensors(module, standalone_bindings(module))


def entry_point_names(spirv) -> list[str]:
    try:
        return [p.name for p in entry_points(_module(spirv))]
    except SpirvError as exc:
        raise CompileError(f"invalid SPIR-V: {exc}") from None


def compile_module(spirv, entry: str, gpu: str = "mali-g720", ra: str = "sparse",
                   spec_values: Mapping | None = None, registers: int = 64,
                   dense_deadline: float | None = None) -> Compiled:
    """Build the IR, allocate registers, and cost one entry point (no cache)."""
    t0 = time.perf_counter()
    costs = gpu_costs(gpu)
    if ra not in ALLOCATORS:
        raise CompileError(f"unknown register allocator {ra!r} (use sparse or dense)")
    module = _module(spirv, spec_values)
    try:
        shader = build_shader(module, entry, spec_values)
        if ra == "sparse":
            from .ra_sparse import allocate_sparse
            alloc = allocate_sparse(shader, registers)
        else:
            from .ra_dense import allocate_dense
            alloc = allocate_dense(shader, registers, dense_deadline)
    except (SpirvError, KeyError, IndexError, ValueError, TypeError, AttributeError) as exc:
        # the builder validates what it relies on; anything else malformed lands here
        raise CompileError(f"malformed SPIR-V ({type(exc).__name__}: {exc})") from None
    fl = flow(shader)
    ops = analysis.block_ops(shader)
    by_origin = analysis.origin_ops(shader, fl, ops)
    blocks = []
    for o in shader.origins:
        vec, copies = by_origin.get(o.index, ([0.0] * 6, 0))
        blocks.append(BlockCost(o.index, o.function, o.local_index, o.reachable, o.used, copies,
                                tuple(vec), PipeCycles.of(vec, costs)))
    total, shortest, longest, typical = analysis.path_figures(shader, fl, ops)
    cost = ShaderCost(
        gpu=gpu, entry=entry, stage=shader.stage, allocator=ra,
        work_registers=alloc.work_registers,
        occupancy="full" if alloc.work_registers <= costs.full_occupancy_registers else "half",
        uniform_registers=shader.uniform_words, spills=alloc.spills, fills=alloc.fills,
        stack_bytes=shader.stack_bytes, fp16_percent=analysis.fp16_percent(shader),
        instructions=analysis.instruction_count(shader, fl), loops=fl.loops,
        total=PipeCycles.of(total, costs), shortest=PipeCycles.of(shortest, costs),
        longest=None if longest is None else PipeCycles.of(longest, costs),
        typical=PipeCycles.of(typical, costs), blocks=tuple(blocks),
        diagnostics=tuple(shader.diagnostics), ra_seconds=alloc.seconds,
        compile_seconds=time.perf_counter() - t0)
    return Compiled(shader, alloc, cost)


_cache: OrderedDict = OrderedDict()
_lock = threading.Lock()
_stats = {"hits": 0, "misses": 0}


def _spec_key(spec_values: Mapping | None) -> tuple:
    if not spec_values:
        return ()
    return tuple(sorted((int(k), bytes(v) if isinstance(v, (bytes, bytearray, memoryview)) else v)
                        for k, v in spec_values.items()))


def shader_cost(spirv: bytes, entry: str, gpu: str = "mali-g720", spec_values: Mapping | None = None,
                ra: str = "sparse") -> ShaderCost:
    """Cost of one entry point, cached by SPIR-V hash; raises CompileError on bad input."""
    if not isinstance(spirv, (bytes, bytearray, memoryview)):
        raise CompileError(f"shader_cost wants SPIR-V bytes, got {type(spirv).__name__}")
    key = (hashlib.sha256(spirv).digest(), entry, gpu, ra, _spec_key(spec_values))
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            _stats["hits"] += 1
            return hit
        _stats["misses"] += 1
    cost = compile_module(bytes(spirv), entry, gpu, ra, spec_values).cost
    with _lock:
        _cache[key] = cost
        _cache.move_to_end(key)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return cost


def cache_info() -> dict[str, int]:
    with _lock:
        return {"hits": _stats["hits"], "misses": _stats["misses"], "size": len(_cache)}


def clear_cache() -> None:
    with _lock:
        _cache.clear()
        _stats["hits"] = _stats["misses"] = 0
