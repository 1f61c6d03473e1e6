"""Layer settings, read once from the environment when the layer loads.

TESSERA_HOSTD        where hostd listens (unix:PATH or tcp:127.0.0.1:PORT); unset: spool to a file
TESSERA_SESSION_DIR  where the spool file goes; unset: a new temporary folder
TESSERA_LAYER_FAULT  testing: comma-separated commands whose hooks raise on purpose
TESSERA_INSTRUMENT   1: drive VK_ARM_shader_instrumentation for the application (tessera run --instrument)
TESSERA_REGIONS      counters (comma-separated names, or "all"): per-region counters of every render pass (--regions)
TESSERA_CONTENT      1: describe every draw's content metrics, reading index data back (tessera run --content;
                     draws and binds then take their Python hooks, the rest stays in C: layer/content.py)
TESSERA_C_SUBMITS    0: every submit takes the Python path (vkapi/submits.py); for comparing the two, default on
TESSERA_C_RECORDING  0: every command takes its Python hook (vkapi/recorder.py); for comparing the two
TESSERA_LOG, TESSERA_LOG_FILE  see tessera.vkapi.log
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tessera.vkapi.log import LogSettings


@dataclass(frozen=True)
class LayerSettings:
    log: LogSettings
    hostd: str | None
    session_dir: Path | None
    # Testing knob: commands whose hooks raise on purpose, to prove that a
    # failing hook never breaks the application's call.
    fault_commands: frozenset[str]
    instrument: bool = False        # layer/instrument.py
    regions: tuple[str, ...] = ()   # layer/regions.py: counter names ("all"); empty: off
    c_submits: bool = True          # vkapi/submits.py: submits that need no Python skip it
    content: bool = False           # layer/content.py: per-draw content metrics

    @classmethod
    def from_environ(cls, environ=os.environ) -> "LayerSettings":
        faults = frozenset(n for n in environ.get("TESSERA_LAYER_FAULT", "").split(",") if n)
        session = environ.get("TESSERA_SESSION_DIR")
        return cls(LogSettings.from_environ(environ), environ.get("TESSERA_HOSTD") or None,
                   Path(session) if session else None, faults, environ.get("TESSERA_INSTRUMENT") == "1",
                   tuple(n.strip() for n in environ.get("TESSERA_REGIONS", "").split(",") if n.strip()),
                   environ.get("TESSERA_C_SUBMITS") != "0", environ.get("TESSERA_CONTENT") == "1")
