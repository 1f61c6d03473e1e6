"""Layer settings, read once from the environment when the layer loads."""
from __future__ import annotations

import os
from dataclasses import dataclass

from tessera.vkapi.log import LogSettings


@dataclass(frozen=True)
class LayerSettings:
    log: LogSettings
    # Testing knob: commands whose hooks raise on purpose (TESSERA_LAYER_FAULT=vkCmdDispatch,...),
    # to prove that a failing hook never breaks the application's call.
    fault_commands: frozenset[str]

    @classmethod
    def from_environ(cls, environ=os.environ) -> "LayerSettings":
        faults = frozenset(n for n in environ.get("TESSERA_LAYER_FAULT", "").split(",") if n)
        return cls(LogSettings.from_environ(environ), faults)
