"""Mali counters per GPU event: what each workload phase counts, modelled from what the driver knows.

Role: the timeline (icd/timeline.py) asks a `CounterModel` for the counters of each phase it
writes, and adds them to the event's extra_data under Arm's machine names (schemas/slice_args.py
COUNTER); the trace's second packet carries the GPU's counter descriptor (`describe`). The values
come from the phase as the timing model placed it (icd/timing.py) and the workload's sizes, with the
formulas of docs/counters.md:

  - GPU active cycles and queue cycles: the phase's duration x the profile's clock, on the Mali
    queue the phase runs on (Mali-G720: binning / main / compute; Mali-G78: non-fragment /
    fragment); endpoint stalls 0 (the model assigns no endpoints); transfers run as compute work
    (Arm's perfetto_groups.md);
  - threads and warps: dispatch invocations (groups x group size) and warps per work group, rays,
    vertex invocations (vertex or index count x instances), fragments as the timing model counts them
    (render area x draws x DRAW_COVERAGE);
  - primitives: the draws' input primitives (icd/recording.py: vertices // 3, triangle lists);
  - external bus beats: the attachments loaded and stored (PassInfo.load_bytes / store_bytes),
    transfer bytes read and written, in MALI_CONFIG_EXT_BUS_BYTE_SIZE beats;
  - arithmetic instructions per pipe (FMA, CVT, SFU) and load/store, varying and texture issue cycles:
    the compiler model's per-thread figures of each stage (`StageCost`, the cycles the timing model
    reads carrying them) x the phase's warps (vertex, fragment or compute), a render pass's draws
    weighted by their threads; none when a draw's or dispatch's shader has no figures.

Derived counters whose inputs one phase has (queue active cycles, bus bytes) are evaluated with the
database's equations (schemas/counters.py) and cached by their inputs: a steady frame loop
computes each distinct phase once, and the trace encodes it once (`Counts.encoded`). Owned by the
timeline's worker; not thread-safe.
"""
from __future__ import annotations

import math

from tessera.schemas import counters as C

from . import timing
from .profiles import GpuProfile

# The compiler model's pipes (compiler/costs.py PIPES), in its order.
PIPES = ("FMA", "CVT", "SFU", "LS", "V", "T")
# Arm's counter of each pipe: warp instructions (arithmetic) or issue cycles (the other units).
INSTRUCTIONS = (("MaliEngFMAInstr", 0), ("MaliEngCVTInstr", 1), ("MaliEngSFUInstr", 2))
ISSUE_CYCLES = (("MaliLSIssueCy", 3), ("MaliVarIssueCy", 4), ("MaliTexIssueCy", 5))


class StageCost(float):
    """A shader stage's cost per invocation as the timing model reads it (a float: bound-pipe cycles,
    compiler ShaderCost.cycles_typical), carrying the compiler model's per-thread figures on its
    typical path that the counters need: `ops`, thread-operations per pipe (FMA, CVT, SFU, LS, V, T:
    on Valhall one instruction per 32-bit lane, so the FMA/CVT/SFU ones are instructions per thread),
    and `pipe_cycles`, cycles per thread per pipe on one core (ops / the pipe's thread-operations per
    clock, compiler/costs.py); `mix` is the pair. Made by shader_costs.of_stages; arithmetic on it
    gives a plain float."""

    ops: tuple[float, ...]
    pipe_cycles: tuple[float, ...]
    mix: tuple[tuple[float, ...], tuple[float, ...]]

    def __new__(cls, cycles: float, ops, pipe_cycles) -> "StageCost":
        self = super().__new__(cls, cycles)
        self.ops, self.pipe_cycles = tuple(ops), tuple(pipe_cycles)
        self.mix = (self.ops, self.pipe_cycles)
        return self

    def __reduce__(self):
        return (StageCost, (float(self), self.ops, self.pipe_cycles))


def shader_mix(costs_and_threads) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """(ops, pipe cycles) per thread averaged over (StageCost, threads) pairs weighted by threads; None
    when one with threads has no figures (a plain float or None: no model, or a measured cost). One
    stage cost for all (a pass drawing with one pipeline): its own figures, no arithmetic."""
    first = None
    mixed = False
    for cost, threads in costs_and_threads:
        if threads <= 0:
            continue
        if type(cost) is not StageCost:
            return None
        if first is None:
            first = cost
        elif cost is not first:
            mixed = True
    if first is None:
        return None
    if not mixed:
        return first.mix
    total = 0
    ops = [0.0] * 6
    cyc = [0.0] * 6
    for cost, threads in costs_and_threads:
        if threads > 0:
            total += threads
            o, c = cost.ops, cost.pipe_cycles
            for i in range(6):
                ops[i] += o[i] * threads
                cyc[i] += c[i] * threads
    return tuple(o / total for o in ops), tuple(c / total for c in cyc)


# Transfers that only write (no source read).
_WRITE_ONLY = frozenset({"fill buffer", "update buffer", "clear image"})
_CACHE = 4096


class CounterModel:
    """The counters of one emulated GPU's phases (`for_profile`: None for a GPU Arm's table lacks)."""

    def __init__(self, profile: GpuProfile, gpu: C.GpuCounters) -> None:
        self.gpu = gpu
        self.profile = profile
        self.config = gpu.config(profile.shader_cores)
        self.warp = profile.warp_width
        self.beat = C.EXT_BUS_BYTE_SIZE
        self._cycles_per_ns = profile.clock_mhz / 1000.0
        has = gpu.has
        # (queued, stall) counter names per Mali queue; the G78 reports active cycles with no stall counter
        def queue(queued: str, stall: str | None) -> tuple[str, str | None] | None:
            return (queued, stall if stall and has(stall) else None) if has(queued) else None
        self.binning_q = queue("MaliBinningQueuedCy", "MaliBinningQueueAssignStallCy") or queue(
            "MaliNonFragQueueActiveCy", None)
        self.main_q = queue("MaliMainQueuedCy", "MaliMainQueueAssignStallCy") or queue("MaliFragQueueActiveCy", None)
        self.compute_q = queue("MaliCompQueuedCy", "MaliCompQueueAssignStallCy") or queue(
            "MaliNonFragQueueActiveCy", None)
        self._derived: dict[tuple, Counts] = {}          # base counters -> with the derived ones
        self._passes: dict[tuple, tuple] = {}            # render_pass's inputs -> its phases' Counts
        self._works: dict[tuple, Counts] = {}            # work's inputs -> its Counts
        self._active = has(C.GPU_ACTIVE)
        # The counters a measured pass or dispatch has from the backend's pipeline statistics
        # (measured_counters.py), as the `Measured` arg names them; warps follow from measured threads.
        self.measured_pass = ", ".join(n for n in ("MaliGeomTotalPrim", "MaliGeomTrianglePrim", "MaliNonFragThread",
                                                    "MaliNonFragWarp", "MaliFragThread", "MaliFragWarp") if has(n))
        self.measured_work = ", ".join(n for n in ("MaliNonFragThread", "MaliNonFragWarp") if has(n))
        self.measured_fragments = ", ".join(n for n in ("MaliFragThread", "MaliFragWarp") if has(n))
        self.measured_visible = ", MaliGeomVisiblePrim" if has("MaliGeomVisiblePrim") else ""

    def measured_names(self, measured, geometry: bool) -> str:
        """The `Measured` arg of a pass with the backend's statistics `measured` (measured_counters.Stats)."""
        if not geometry:
            return self.measured_fragments
        return self.measured_pass + (self.measured_visible if measured.visible is not None else "")

    @classmethod
    def for_profile(cls, profile: GpuProfile) -> "CounterModel | None":
        gpu = C.for_profile(profile.key)
        return cls(profile, gpu) if gpu is not None else None

    # ---- per phase -----------------------------------------------------------------------------
    def _queue(self, out: dict, q: tuple[str, str | None] | None, duration_ns: int) -> None:
        cycles = round(duration_ns * self._cycles_per_ns)
        if self._active:
            out[C.GPU_ACTIVE] = cycles   # the phase alone: hostd takes unions of phases (hostd/counters.py)
        if q is not None:
            out[q[0]] = cycles
            if q[1] is not None:
                out[q[1]] = 0

    def _beats(self, nbytes: int) -> int:
        return -(-nbytes // self.beat)

    @staticmethod
    def shaders(draws: list) -> tuple:
        """The per-thread shader figures of a render pass's draws (recording.Draw): (vertex mix,
        fragment mix), each shader_mix's, vertices weighted by each draw's vertices and fragments by
        its draw count (the timing model gives every draw of a pass the same fragments)."""
        if len(draws) == 1:      # one record (draws recorded in C fold into one per pipeline)
            d = draws[0]
            v, f = d.vertex_cycles, d.fragment_cycles
            return (v.mix if type(v) is StageCost and d.vertices > 0 else None,
                    f.mix if type(f) is StageCost and d.count > 0 else None)
        return (shader_mix([(d.vertex_cycles, d.vertices) for d in draws]),
                shader_mix([(d.fragment_cycles, d.count) for d in draws]))

    def render_pass(self, info, draws: int, vertices: int, primitives: int, binning: timing.Phase,
                    main: timing.Phase, measured=None, geometry: bool = True, shaders: tuple = (None, None)
                    ) -> tuple[dict, dict]:
        """The counters of a render pass's binning and main phases (`info`: its PassInfo; `measured`:
        the backend's pipeline statistics of the pass, measured_counters.Stats, or None; `geometry`
        False: only its fragments count, its primitives and vertices stay modelled; `shaders`: its
        draws' `shaders`); cached by everything they are computed from (a steady frame repeats its
        passes)."""
        key = (info.width, info.height, info.layers, info.load_bytes, info.store_bytes, draws, vertices, primitives,
               binning.duration_ns, main.duration_ns, measured, geometry, shaders)
        hit = self._passes.get(key)
        if hit is None:
            if len(self._passes) >= _CACHE:
                self._passes.clear()
            hit = self._passes[key] = self._render_pass(info, draws, vertices, primitives, binning, main, measured,
                                                        geometry, shaders)
        return hit

    def _shader_counts(self, out: dict, warps: int, mix) -> None:
        """Arithmetic warp instructions per pipe = warps x instructions per thread; load/store, varying
        and texture issue cycles = warps x warp width x cycles per thread (a warp issues whole, its
        threads at the pipe's rate); each rounded to a whole count."""
        if mix is None or warps <= 0:
            return
        ops, cycles = mix
        has = self.gpu.has
        for name, i in INSTRUCTIONS:
            if has(name):
                out[name] = round(warps * ops[i])
        lanes = warps * self.warp
        for name, i in ISSUE_CYCLES:
            if has(name):
                out[name] = round(lanes * cycles[i])

    def _render_pass(self, info, draws: int, vertices: int, primitives: int, binning: timing.Phase,
                     main: timing.Phase, measured, geometry: bool, shaders: tuple = (None, None)
                     ) -> tuple[dict, dict]:
        has = self.gpu.has
        if measured is not None and geometry:   # counted by the backend: input primitives, vertex invocations
            primitives, vertices = measured.input_primitives, measured.vertex_invocations
        b: dict = {}
        self._queue(b, self.binning_q, binning.duration_ns)
        if has("MaliGeomTrianglePrim"):
            b["MaliGeomTrianglePrim"] = primitives
        if has("MaliGeomTotalPrim"):
            b["MaliGeomTotalPrim"] = primitives
        if has("MaliNonFragThread"):
            b["MaliNonFragThread"] = vertices
        if has("MaliNonFragWarp"):
            b["MaliNonFragWarp"] = -(-vertices // self.warp)
        if measured is not None and geometry and measured.visible is not None and has("MaliGeomVisiblePrim"):
            b["MaliGeomVisiblePrim"] = measured.visible    # counted from captured positions: never modelled
        self._shader_counts(b, -(-vertices // self.warp), shaders[0])
        m: dict = {}
        self._queue(m, self.main_q, main.duration_ns)
        fragments = (measured.fragment_invocations if measured is not None
                     else self.fragments(info.width, info.height, info.layers, draws))
        if has("MaliFragThread"):
            m["MaliFragThread"] = fragments
        if has("MaliFragWarp"):
            m["MaliFragWarp"] = -(-fragments // self.warp)
        self._shader_counts(m, -(-fragments // self.warp), shaders[1])
        if info.load_bytes and has("MaliExtBusRdBt"):
            m["MaliExtBusRdBt"] = self._beats(info.load_bytes)
        if info.store_bytes and has("MaliExtBusWrBt"):
            m["MaliExtBusWrBt"] = self._beats(info.store_bytes)
        return self._with_derived(b), self._with_derived(m)

    def work(self, work, duration_ns: int) -> dict:
        """A dispatch, trace rays, acceleration-structure job or transfer (`work`: its Work). Sizes the
        driver had to guess (Work.estimated) give no thread counts. Cached like render_pass."""
        size = work.info.get("group_size")
        cost = work.cycles
        key = (work.kind, work.stage, duration_ns, work.invocations, work.estimated, work.nbytes,
               tuple(size) if type(size) is list else size,   # measured: invocations are the backend's count
               (cost.ops, cost.pipe_cycles) if type(cost) is StageCost else None)
        hit = self._works.get(key)
        if hit is None:
            if len(self._works) >= _CACHE:
                self._works.clear()
            hit = self._works[key] = self._work(work, duration_ns, size)
        return hit

    def _work(self, work, duration_ns: int, group_size: object) -> dict:
        out: dict = {}
        self._queue(out, self.compute_q, duration_ns)
        has = self.gpu.has
        kind = work.kind
        if kind in ("dispatch", "trace_rays"):
            if work.invocations > 0 and not work.estimated:
                if has("MaliNonFragThread"):
                    out["MaliNonFragThread"] = work.invocations
                if has("MaliNonFragWarp"):
                    out["MaliNonFragWarp"] = self.warps_of(work.invocations, group_size)
                if kind == "dispatch" and type(work.cycles) is StageCost:
                    self._shader_counts(out, self.warps_of(work.invocations, group_size),
                                        (work.cycles.ops, work.cycles.pipe_cycles))
        elif kind in ("transfer", "acceleration_structure_copy") and work.nbytes > 0:
            if work.stage not in _WRITE_ONLY and has("MaliExtBusRdBt"):
                out["MaliExtBusRdBt"] = self._beats(work.nbytes)
            if has("MaliExtBusWrBt"):
                out["MaliExtBusWrBt"] = self._beats(work.nbytes)
        return self._with_derived(out)

    def warps_of(self, invocations: int, group_size: object) -> int:
        """Warps of a dispatch: each work group fills whole warps (Arm: make groups a warp multiple)."""
        if isinstance(group_size, (list, tuple)) and len(group_size) == 3 and min(group_size) > 0:
            per_group = group_size[0] * group_size[1] * group_size[2]
            return invocations // per_group * -(-per_group // self.warp)
        return -(-invocations // self.warp)

    @staticmethod
    def fragments(width: int, height: int, layers: int, draws: int) -> int:
        """Fragments as the timing model counts them (icd/timing.py render_pass)."""
        return math.floor(width * height * max(1, layers) * draws * timing.DRAW_COVERAGE)

    def _with_derived(self, base: dict) -> "Counts":
        key = tuple(base.items())
        done = self._derived.get(key)
        if done is None:
            if len(self._derived) >= _CACHE:
                self._derived.clear()
            done = self._derived[key] = Counts(self.gpu.derive(base, self.config))
        return done

    # ---- the trace's descriptor packet -------------------------------------------------------------
    def describe(self, event) -> None:
        """Fill a GpuCounterEvent's counter_descriptor: one spec per counter this GPU shows (Arm's
        machine name, human name, units, Perfetto groups), one block named after Arm's GPU."""
        from tessera.schemas.perfetto import pb

        if not _UNITS:
            _load_units()
        d = event.counter_descriptor
        spec_t = pb.GpuCounterDescriptor
        ids = []
        for i, c in enumerate(self.gpu.shown(), start=1):
            s = d.specs.add(counter_id=i, name=c.name, description=c.human)
            unit = _UNITS.get(c.units)
            if unit is not None:
                s.numerator_units.append(unit)
            s.groups.extend(spec_t.GpuCounterGroup.Value(g) for g in c.perfetto_groups)
            ids.append(i)
        d.blocks.add(block_id=0, name=self.gpu.gpu, description="emulated by Tessera (docs/counters.md)",
                     counter_ids=ids)


class Counts(dict):
    """A phase's counters (name -> value), shared by the phases that count the same; the trace keeps
    their extra_data encoding on it (`encoded`, icd/trace.py): a repeated phase costs no encoding."""
    __slots__ = ("encoded",)

    def __init__(self, values: dict) -> None:
        super().__init__(values)
        self.encoded: bytes | None = None


# Arm's units -> Perfetto's GpuCounterDescriptor.MeasureUnit names (None: no unit Perfetto has).
_UNIT_NAMES = {"cycles": None, "bytes": "BYTE", "percent": "PERCENT", "threads": None, "warps": None,
               "primitives": None, "beats": None,
               "instructions": "INSTRUCTION"}
_UNITS: dict[str, int] = {}


def _load_units() -> None:
    from tessera.schemas.perfetto import pb

    for arm, name in _UNIT_NAMES.items():
        if name is not None:
            _UNITS[arm] = pb.GpuCounterDescriptor.MeasureUnit.Value(name)
