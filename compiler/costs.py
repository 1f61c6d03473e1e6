"""Per-GPU pipe throughputs: the one table that turns op counts into cycles.

Role: every number the compiler model uses to convert per-thread op counts
(FMA, CVT, SFU, LS, V, T) into cycles lives here, each with its source. The
GPU keys are those of the emulated driver's profiles (`icd/profiles.py`);
that module sits below this one in the import order, so the few figures the
compiler needs are repeated here rather than imported.

Convention: "cycles per thread" are shader-core clock cycles per thread, i.e.
op count / (thread-ops the core retires per clock on that pipe). A core with
throughput R on a pipe spends n/R cycles on n ops of one thread; a workload of
T threads on C cores then takes about T * cycles / C clocks on the bound pipe.
Immutable after import; any thread may read it.
"""

from __future__ import annotations

from dataclasses import dataclass

PIPES = ("FMA", "CVT", "SFU", "LS", "V", "T")


@dataclass(frozen=True)
class PipeRate:
    """Thread-ops per core per clock on one pipe, and where the figure comes from."""

    per_clock: float
    source: str


@dataclass(frozen=True)
class GpuCosts:
    key: str
    name: str
    architecture: str
    rates: dict[str, PipeRate]
    full_occupancy_registers: int = 32   # FACTS.md: <= 32 work registers keep full occupancy
    max_registers: int = 64              # 33..64 halve it
    warp_width: int = 16

    def cycles(self, pipe: str, ops: float) -> float:
        """Cycles per thread spent on `ops` operations of one thread on `pipe`."""
        return ops / self.rates[pipe].per_clock


_ASSUMED = "emulation's assumption (no public per-pipe figure)"

def _scaled(key: str, name: str, architecture: str, fma: int, texel: int, source: str) -> GpuCosts:
    """A Mali whose FMA and T rates are the icd GPU table's (icd/profiles.py: the device's
    VK_ARM_shader_core_properties or Arm's libGPUInfo, `source` says which;
    tests/icd/test_shipped_devices.py holds them equal); the other pipes scale from FMA."""
    return GpuCosts(
        key=key, name=name, architecture=architecture,
        rates={
            "FMA": PipeRate(fma, f"fmaRate {fma}: {source}"),
            "CVT": PipeRate(fma // 2, "half the FMA rate; " + _ASSUMED),
            "SFU": PipeRate(fma // 4, "a quarter of the FMA rate, as on earlier Valhall (FACTS.md); " + _ASSUMED),
            "LS": PipeRate(32, "two 16-lane load/store accesses per clock; " + _ASSUMED),
            "V": PipeRate(fma // 2, "64 fp32 varying components per clock at fmaRate 128; " + _ASSUMED),
            "T": PipeRate(texel, f"texelRate {texel} (bilinear texels per core per clock): {source}"),
        })


def _fifth_gen(key: str, name: str, device: str, fma: int, texel: int) -> GpuCosts:
    """A 5th-generation Mali: FMA and T as its device reports them (icd/devices/<key>.json)."""
    return _scaled(key, name, "5th generation", fma, texel,
                   f"reported by {device} (VK_ARM_shader_core_properties)")


GPUS: dict[str, GpuCosts] = {
    "mali-g78": GpuCosts(
        key="mali-g78", name="Mali-G78", architecture="Valhall",
        rates={
            "FMA": PipeRate(32, "Arm's published Mali-G78 figure: 32 fp32 FMA per core per clock"),
            "CVT": PipeRate(32, "CVT is as wide as FMA on Valhall (16 lanes per engine, 2 engines); " + _ASSUMED),
            "SFU": PipeRate(8, "SFU at a quarter of the FMA rate (FACTS.md, public Valhall figures)"),
            "LS": PipeRate(16, "one 16-lane load/store access (up to 128 bits per lane) per clock; " + _ASSUMED),
            "V": PipeRate(32, "32 fp32 varying components interpolated per clock; " + _ASSUMED),
            "T": PipeRate(4, "Arm's published Mali-G78 figure: 4 bilinear texels per core per clock"),
        }),
    "mali-g720": _fifth_gen("mali-g720", "Mali-G720", "Immortalis-G720", fma=128, texel=8),
    "mali-g925": _fifth_gen("mali-g925", "Mali-G925", "Immortalis-G925", fma=128, texel=8),
    "mali-g77": GpuCosts(
        key="mali-g77", name="Mali-G77", architecture="Valhall",
        rates={
            "FMA": PipeRate(32, "fmaRate 32: Arm's libGPUInfo (16 FMA x 2 engines; the G77's export reports no "
                                "VK_ARM_shader_core_properties)"),
            "CVT": PipeRate(32, "as the Mali-G78 (the same Valhall core): CVT as wide as FMA; " + _ASSUMED),
            "SFU": PipeRate(8, "SFU at a quarter of the FMA rate (FACTS.md, public Valhall figures)"),
            "LS": PipeRate(16, "one 16-lane load/store access per clock, as the Mali-G78; " + _ASSUMED),
            "V": PipeRate(32, "32 fp32 varying components per clock, as the Mali-G78; " + _ASSUMED),
            "T": PipeRate(4, "texelRate 4 (bilinear texels per core per clock): Arm's libGPUInfo"),
        }),
    "mali-g715": _scaled("mali-g715", "Mali-G715", "Valhall", fma=128, texel=8,
                         source="Arm's libGPUInfo (64 FMA x 2 engines, 8 texels; the G715's export "
                                "reports no VK_ARM_shader_core_properties)"),
}
DEFAULT_GPU = "mali-g720"


def gpu_costs(key: str) -> GpuCosts:
    """The cost table of a GPU key; raises CompileError for an unknown key."""
    try:
        return GPUS[key]
    except KeyError:
        from .errors import CompileError
        raise CompileError(f"unknown GPU {key!r} (known: {', '.join(sorted(GPUS))})") from None
