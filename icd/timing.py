"""The emulated Mali's timing model: how long each workload phase takes.

Pure functions of the workload and the GPU profile, so two runs of the same
application give identical durations. Every constant is here, named, with
its reason; docs/timing.md explains the model. Start times are not decided
here (see scheduler.py).

Units: cycles of the shader-core clock (`GpuProfile.clock_mhz`), converted
to nanoseconds at the end. Work spreads evenly over `shader_cores`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .profiles import GpuProfile

TILE_SIZE = 16                       # Mali tiles are 16x16 pixels
# Fixed cost to start any job on a hardware queue (job descriptor fetch, setup).
JOB_SETUP_CYCLES = 2_000
# Position shading + varying shading of one vertex, when no shader cost is known
# (about 20 FMA-pipe cycles per thread on a 16-wide warp for a transform-only shader).
DEFAULT_VERTEX_CYCLES = 20.0
# Tiler: binning one primitive into the tile lists (cycles, whole GPU; the tiler is one unit).
TILER_CYCLES_PER_PRIMITIVE = 1.0
# Fragment shading of one fragment when no shader cost is known.
DEFAULT_FRAGMENT_CYCLES = 10.0
# Until real fragment counts exist (per-region counters), a draw is assumed to
# cover this fraction of the render area.
DRAW_COVERAGE = 0.25
# Per-tile work of the main phase (tile list read, tile buffer init and write-back start).
TILE_CYCLES = 64.0
# Compute: one invocation when no shader cost is known.
DEFAULT_INVOCATION_CYCLES = 50.0
# Indirect draws/dispatches whose parameters the driver cannot read at submit time:
# sizes assumed (marked "estimated" in the trace).
INDIRECT_DRAW_VERTICES = 3 * 1024
INDIRECT_DISPATCH_GROUPS = 64
# External memory bandwidth in bytes per ns (LPDDR5 class phone memory, ~32 GB/s usable).
MEMORY_BYTES_PER_NS = 32.0
# Copy engine efficiency: transfers read and write, so each byte moves twice.
TRANSFER_TRAFFIC_PER_BYTE = 2.0
# A vertex's shaded output written to and read back from memory (position + 3 vec4 varyings).
VARYING_BYTES_PER_VERTEX = 64

# ---- ray tracing (assumptions, stated: no Immortalis ray-tracing throughput figure is public) ----
# One ray's traversal in the ray tracing unit (RTU): a small BVH (a few levels of box tests, then a few
# triangle tests), in shader-core cycles the ray's thread waits. The same for every scene: the driver
# does not know which acceleration structure a trace uses (it is bound through a descriptor).
TRAVERSAL_CYCLES_PER_RAY = 100.0
# Fraction of rays that hit (closest-hit + any-hit + intersection shaders run) rather than miss.
RAY_HIT_FRACTION = 0.5
# A ray of a pipeline whose shaders were not costed: a default invocation plus the traversal.
DEFAULT_RAY_CYCLES = DEFAULT_INVOCATION_CYCLES + TRAVERSAL_CYCLES_PER_RAY
# Indirect trace rays whose size the driver cannot read at submit time: rays assumed (estimated).
INDIRECT_TRACE_RAYS = 64 * 64

# ---- acceleration structures (built by compute jobs on the shader cores, as Arm's driver does) ----
# Cycles per primitive (triangle or AABB) of a bottom-level build, whole GPU work spread over the cores.
# 'fast build': a linear BVH (Morton codes, a radix sort, emitting nodes), ~30 cycles per primitive;
# 'fast trace': a binned-SAH build, taken as 4x the fast build (the usual quality/speed trade of GPU
# BVH builders; assumption).
AS_FAST_BUILD_CYCLES_PER_PRIMITIVE = 30.0
AS_FAST_TRACE_CYCLES_PER_PRIMITIVE = 4 * AS_FAST_BUILD_CYCLES_PER_PRIMITIVE
# An update (refit) recomputes the bounds bottom-up with no sort: a third of a fast build.
AS_UPDATE_CYCLES_PER_PRIMITIVE = 10.0
# An instance of a top-level build also transforms its structure's bounding box: 1.5 primitives' work.
AS_INSTANCE_WEIGHT = 1.5
# Memory traffic of a build: a triangle's 3 vertices (36 B) read plus its share of nodes and leaves
# written (~28 B); an instance's 64-byte VkAccelerationStructureInstanceKHR read plus a 64-byte node.
AS_BYTES_PER_PRIMITIVE = 64
AS_BYTES_PER_INSTANCE = 128


@dataclass(frozen=True)
class Phase:
    stage: str        # stage name in the trace (binning, main, compute, copy buffer, ...)
    queue: str        # non-fragment, fragment or transfer
    duration_ns: int


def _ns(profile: GpuProfile, cycles: float) -> int:
    return max(1, math.ceil(cycles * 1000.0 / profile.clock_mhz))


def _mem_ns(nbytes: float) -> int:
    return math.ceil(nbytes / MEMORY_BYTES_PER_NS)


def render_pass(profile: GpuProfile, *, width: int, height: int, layers: int, draws: int, vertices: int,
                primitives: int, load_bytes: int, store_bytes: int,
                vertex_cycles: float | None = None, fragment_cycles: float | None = None) -> tuple[Phase, Phase]:
    """Binning (non-fragment queue) and main (fragment queue) phases of one render pass."""
    cores = profile.shader_cores
    v_cycles = vertex_cycles if vertex_cycles is not None else DEFAULT_VERTEX_CYCLES
    shading = vertices * v_cycles / cores
    tiling = primitives * TILER_CYCLES_PER_PRIMITIVE
    binning = _ns(profile, JOB_SETUP_CYCLES + max(shading, tiling)) + _mem_ns(vertices * VARYING_BYTES_PER_VERTEX)

    area = width * height * max(1, layers)
    tiles = math.ceil(width / TILE_SIZE) * math.ceil(height / TILE_SIZE) * max(1, layers)
    fragments = area * draws * DRAW_COVERAGE
    f_cycles = fragment_cycles if fragment_cycles is not None else DEFAULT_FRAGMENT_CYCLES
    shader_bound = fragments * f_cycles / cores
    pixel_bound = fragments / (profile.pixel_rate * cores)
    tile_cycles = tiles * TILE_CYCLES / cores
    main = (_ns(profile, JOB_SETUP_CYCLES + max(shader_bound, pixel_bound) + tile_cycles)
            + _mem_ns(load_bytes + store_bytes))
    return Phase("binning", "non-fragment", binning), Phase("main", "fragment", main)


def dispatch(profile: GpuProfile, invocations: int, invocation_cycles: float | None = None) -> Phase:
    cycles = invocation_cycles if invocation_cycles is not None else DEFAULT_INVOCATION_CYCLES
    return Phase("compute", "non-fragment", _ns(profile, JOB_SETUP_CYCLES + invocations * cycles / profile.shader_cores))


def ray_cycles(stage_cycles: dict[str, float]) -> float | None:
    """Cycles of one ray of a ray-tracing pipeline, from its stages' costs (compiler model, per
    invocation; a stage type with several shaders counts their mean): raygen + traversal + the
    hit group (closest hit + any hit + intersection) for RAY_HIT_FRACTION of the rays and the
    miss shader for the rest, + one callable invocation if the pipeline has callables.
    None when no stage was costed."""
    if not stage_cycles:
        return None
    c = stage_cycles.get
    hit = c("closest_hit", 0.0) + c("any_hit", 0.0) + c("intersection", 0.0)
    return (c("raygen", DEFAULT_INVOCATION_CYCLES) + TRAVERSAL_CYCLES_PER_RAY + RAY_HIT_FRACTION * hit
            + (1.0 - RAY_HIT_FRACTION) * c("miss", 0.0) + c("callable", 0.0))


def trace_rays(profile: GpuProfile, rays: int, ray_cycles: float | None = None) -> Phase:
    """`rays` = launch width x height x depth (one raygen invocation each); `ray_cycles` from
    ray_cycles(), DEFAULT_RAY_CYCLES when unknown."""
    cycles = ray_cycles if ray_cycles is not None else DEFAULT_RAY_CYCLES
    return Phase("trace_rays", "non-fragment", _ns(profile, JOB_SETUP_CYCLES + rays * cycles / profile.shader_cores))


def transfer(profile: GpuProfile, stage: str, nbytes: int) -> Phase:
    return Phase(stage, "transfer", _ns(profile, JOB_SETUP_CYCLES) + _mem_ns(nbytes * TRANSFER_TRAFFIC_PER_BYTE))


def data_graph(profile: GpuProfile, stage: str, operator_ns: float) -> Phase:
    """A data-graph dispatch (icd/data_graph/): one compute job whose operators take `operator_ns` in all
    (each the larger of its arithmetic at the cores' FMA rate and its bytes at memory speed)."""
    return Phase(stage, "non-fragment", _ns(profile, JOB_SETUP_CYCLES) + math.ceil(operator_ns))


def accel_build(profile: GpuProfile, stage: str, primitives: int, instances: int) -> Phase:
    """An acceleration-structure build or update (`stage`: vkapi/accel.py names) of `primitives`
    triangles/AABBs and `instances` instances, on the non-fragment queue like compute."""
    if stage.endswith("update"):
        per = AS_UPDATE_CYCLES_PER_PRIMITIVE
    elif "'fast build'" in stage:
        per = AS_FAST_BUILD_CYCLES_PER_PRIMITIVE
    else:
        per = AS_FAST_TRACE_CYCLES_PER_PRIMITIVE
    primitives, instances = max(0, primitives), max(0, instances)
    cycles = (primitives + instances * AS_INSTANCE_WEIGHT) * per / profile.shader_cores
    nbytes = primitives * AS_BYTES_PER_PRIMITIVE + instances * AS_BYTES_PER_INSTANCE
    return Phase(stage, "non-fragment", _ns(profile, JOB_SETUP_CYCLES + cycles) + _mem_ns(nbytes))


def accel_copy(profile: GpuProfile, stage: str, nbytes: int) -> Phase:
    """An acceleration-structure copy (clone, compact, serialize, deserialize): a transfer of
    `nbytes` (unknown: -1, counted as 0) on the transfer queue."""
    return transfer(profile, stage, max(0, nbytes))


def cycles_ns(profile: GpuProfile, cycles: float) -> int:
    """Nanoseconds of `cycles` shader-core cycles, as every phase above converts them (for readers of
    the model such as hostd/advice/, which cost their findings with it)."""
    return _ns(profile, cycles)


def memory_ns(nbytes: float) -> int:
    """Nanoseconds to move `nbytes` over external memory, as the phases above charge it."""
    return _mem_ns(nbytes)
