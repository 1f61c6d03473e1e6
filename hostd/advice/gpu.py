"""The emulated Mali the advisor costs its findings on: cores, warp width, clock and the timing model.

Role: one frozen `Gpu` handed to the rules, so they never read a profile or a constant themselves.
Its figures: cores, warp width, clock, pixel rate (pixels per cycle per core).
`emulated(name)` takes it from the emulated driver's own tables, the one source of truth for these
facts: icd/profiles.py (cores, warp width, clock of each GPU) and icd/timing.py (cycles to ns,
bytes to ns, the fixed cost of a job). Those two modules are pure Python (no cffi, no driver
loaded), the one place hostd imports from icd, lazily, here: ARCHITECTURE.md's rule keeps hostd
from loading the driver, which this does not.

Which GPU: the session's DEVICE messages name it ("Mali-G720 (emulated)"); a session that names
none (a merged trace read alone) is costed on the default GPU, and `Gpu.assumed` says so.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Gpu:
    name: str
    shader_cores: int
    warp_width: int
    clock_mhz: int
    job_setup_ns: int                       # the fixed cost of every job (binning, main, compute, transfer)
    cycles_ns: Callable[[float], int]       # shader-core cycles -> ns, as the timing model converts
    memory_ns: Callable[[float], int]       # bytes over external memory -> ns, as the timing model charges
    assumed: bool = False                   # the session did not name its GPU: the default one was taken
    pixel_rate: float = 1.0                 # pixels per cycle per core (the main phase's pixel-bound term)

    def ns_cycles(self, ns: int) -> int:
        """Shader-core cycles in `ns` (for a cost given in time)."""
        return round(ns * self.clock_mhz / 1000)

    def to_json(self) -> dict:
        return {"name": self.name, "shader_cores": self.shader_cores, "warp_width": self.warp_width,
                "clock_mhz": self.clock_mhz, "job_setup_ns": self.job_setup_ns, "pixel_rate": self.pixel_rate,
                "assumed": self.assumed}


def emulated(device_name: str | None = None) -> Gpu:
    """The emulated GPU whose device name is `device_name` (None or unknown: the default GPU)."""
    from tessera.icd import profiles, timing

    profile = next((p for p in profiles.PROFILES.values() if p.device_name == device_name), None)
    assumed = profile is None
    if profile is None:
        profile = profiles.PROFILES[profiles.DEFAULT_PROFILE]
    return Gpu(profile.device_name, profile.shader_cores, profile.warp_width, profile.clock_mhz,
               timing.cycles_ns(profile, timing.JOB_SETUP_CYCLES),
               lambda cycles: timing.cycles_ns(profile, cycles), timing.memory_ns, assumed, profile.pixel_rate)


def session_metadata(target: Path):
    """The metadata index (hostd/metadata.py) of a session folder's logs and spools; None for a merged
    trace read alone."""
    target = Path(target)
    if not target.is_dir():
        return None
    from ..merge import find_inputs
    from ..metadata import load

    inputs = find_inputs(target)
    return load(inputs.logs + inputs.spools)


def session_devices(target: Path, index=None) -> list[dict]:
    """The DEVICE payloads a session's layer sent (each device's last: a destroyed device's carries
    its `allocations`, layer/allocations.py); none for a merged trace read alone. `index`: the
    session's session_metadata, when read already."""
    index = index if index is not None else session_metadata(target)
    if index is None:
        return []
    return [device for proc in index.processes.values() for device in proc.devices.values()]


def session_presents(index) -> list[tuple[int, list[str]]]:
    """(frame, the images its present showed) of each FRAME that names them (layer protocol 4)."""
    if index is None:
        return []
    return [(int(n), [str(i) for i in f["images"]]) for proc in index.processes.values()
            for n, f in proc.frames.items() if isinstance(f.get("images"), list)]


def session_device(target: Path) -> str | None:
    """The name of the first device a session's layer reported (its DEVICE messages), or None."""
    return device_name(session_devices(target))


def device_name(devices: list[dict]) -> str | None:
    return next((d["name"] for d in devices if isinstance(d.get("name"), str)), None)
