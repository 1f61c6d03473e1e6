"""Driver settings, read once from the environment when the driver loads.

TESSERA_BACKEND_ICD  manifest (JSON) of the backend driver; default: lavapipe's
                     from the standard driver-manifest directories.
TESSERA_GPU          GPU profile key (see profiles.PROFILES); default mali-g720.
TESSERA_GPU_PROFILE  a Vulkan Profiles JSON file (one device) the emulated device reports instead of
                     the GPU's own (icd/device_profile.py), its Arm core counts and rates included
                     where it has them (profiles.with_profile_file).
TESSERA_SESSION_DIR  where gpu.perfetto-trace goes; default: a new temporary folder.
TESSERA_C_SUBMITS    0: every submit takes the Python path (vkapi/submits.py); for
                     comparing the two paths, default on.
TESSERA_C_RECORDING  0: every command takes its Python hook (vkapi/recorder.py); for
                     comparing the two paths, default on.
TESSERA_C_ANSWERS    0: the fixed queries (`answered` in vkapi/intercepts.py) are answered by
                     Python on every call, none kept in C (vkapi/answers.py); default on.
TESSERA_COUNTERS     0: GPU events carry no Mali counters (icd/counters.py; docs/counters.md); default on,
                     modelled; `measured`: threads and primitives counted by the backend's
                     pipeline-statistics queries where it can (icd/measured_counters.py).
TESSERA_LOG, TESSERA_LOG_FILE  see tessera.vkapi.log.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tessera.vkapi.log import LogSettings

from .profiles import DEFAULT_PROFILE, PROFILES, GpuProfile, with_profile_file


@dataclass(frozen=True)
class IcdSettings:
    backend_manifest: Path | None
    profile: GpuProfile
    log: LogSettings
    session_dir: Path | None
    c_submits: bool = True
    c_answers: bool = True
    counters: bool = True
    measured_counters: bool = False

    @classmethod
    def from_environ(cls, environ=os.environ) -> "IcdSettings":
        key = environ.get("TESSERA_GPU", DEFAULT_PROFILE).lower()
        if key not in PROFILES:
            raise ValueError(f"TESSERA_GPU={key!r} is not a known profile: {', '.join(sorted(PROFILES))}")
        profile = PROFILES[key]
        if environ.get("TESSERA_GPU_PROFILE"):
            profile = with_profile_file(profile, environ["TESSERA_GPU_PROFILE"])   # ValueError: one line
        backend = environ.get("TESSERA_BACKEND_ICD")
        session = environ.get("TESSERA_SESSION_DIR")
        return cls(Path(backend) if backend else None, profile, LogSettings.from_environ(environ),
                   Path(session) if session else None, environ.get("TESSERA_C_SUBMITS") != "0",
                   environ.get("TESSERA_C_ANSWERS") != "0", environ.get("TESSERA_COUNTERS") != "0",
                   environ.get("TESSERA_COUNTERS") == "measured")
