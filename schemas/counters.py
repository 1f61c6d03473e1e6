"""Mali counters by Arm's names: the generated table, per emulated GPU, and its derived-counter equations.

Role: one reading of schemas/counters_table.py (generated from Arm's counter database by
schemas/counters_gen.py) shared by the driver, which writes each GPU event's counters
(icd/counters.py), and hostd, which sums them per workload and per frame, writes the Perfetto
counter tracks and the CSV (hostd/counters.py). The equations are evaluated as the database writes
them, by a small evaluator over the counter names (`Equation`: Python's ast with a whitelist of
numbers, names, + - * / and parentheses; nothing else parses). `MALI_CONFIG_*` names are the
device's configuration (CONFIG). A division by zero, or a name with no value, gives no value: the
counter is not shown rather than shown as zero.

Plain data and pure functions; imported by the driver at its first submit (the table is a dict).
"""
from __future__ import annotations

import ast
import functools
from typing import Callable

from .counters_table import COUNTERS, DIRECT

# Emulated GPU (icd/profiles.py key) -> Arm's GPU name in the database (schemas/counters_gen.py ARM_GPUS).
ARM_GPUS = {"mali-g720": "Mali-G720", "mali-g78": "Mali-G78"}
# The external bus beat (MALI_CONFIG_EXT_BUS_BYTE_SIZE, which a real device reports): 16 bytes, a 128-bit
# AXI data bus, this emulation's configuration choice (Arm publishes no value per SoC).
EXT_BUS_BYTE_SIZE = 16
# The 19 counters Arm's layer_gpu_profile samples (libGPULayers layer_gpu_profile/source/device.cpp,
# Device::Device's addCounter calls), in its order, with the name it gives each: the name is the key
# of its messages' counters and so the column of service_gpu_profile.py's CSV (a GPU lacking a
# counter drops its column).
ARM_PROFILE_COUNTERS = (
    ("MaliCompQueueActiveCy", "Compute queue active cycles"),
    ("MaliVertQueueActiveCy", "Vertex queue active cycles"),
    ("MaliBinningQueueActiveCy", "Binning phase queue active cycles"),
    ("MaliNonFragQueueActiveCy", "Non-fragment queue active cycles"),
    ("MaliFragQueueActiveCy", "Fragment queue active cycles"),
    ("MaliMainQueueActiveCy", "Main phase queue active cycles"),
    ("MaliExtBusRdBy", "External read bytes"),
    ("MaliExtBusWrBy", "External write bytes"),
    ("MaliGeomTotalPrim", "Input primitives"),
    ("MaliGeomVisiblePrim", "Visible primitives"),
    ("MaliNonFragThread", "Non-fragment threads"),
    ("MaliFragThread", "Fragment threads"),
    ("MaliEngInstr", "Arithmetic unit instructions"),
    ("MaliEngFMAInstr", "Arithmetic unit FMA instructions"),
    ("MaliEngCVTInstr", "Arithmetic unit CVT instructions"),
    ("MaliEngSFUInstr", "Arithmetic unit SFU instructions"),
    ("MaliVarIssueCy", "Varying unit cycles"),
    ("MaliTexIssueCy", "Texture unit cycles"),
    ("MaliLSIssueCy", "Load/store unit cycles"),
)
# Counters that are only measured, never modelled (MaliGeomVisiblePrim: icd/visible_prims.py), each with the
# counter every phase that could have it has: a sum over phases (a workload, a frame, a counter-track interval)
# is given only when every phase having the second has the first too; no partial sum stands in.
MEASURED_ONLY = {"MaliGeomVisiblePrim": "MaliGeomTotalPrim"}
# Counted while something is queued: a set of phases counts the union of its phases' time (in the GPU's
# cycles), never a sum, since phases overlap (the GPU's, and each Mali queue's: the emulated transfer
# queue's work runs on the Mali compute queue beside compute). docs/counters.md.
GPU_ACTIVE = "MaliGPUActiveCy"
BUSY = frozenset({GPU_ACTIVE, "MaliCompQueuedCy", "MaliBinningQueuedCy", "MaliMainQueuedCy",
                  "MaliNonFragQueueActiveCy", "MaliFragQueueActiveCy"})


class Counter:
    """One row of the table for one GPU."""
    __slots__ = ("name", "stable_id", "human", "units", "group", "perfetto_groups", "source", "equation")

    def __init__(self, name: str, row: tuple) -> None:
        self.name = name
        (self.stable_id, self.human, self.units, self.group, self.perfetto_groups, self.source,
         self.equation) = row

    @property
    def derived(self) -> bool:
        """Evaluated from its equation (not a hardware counter, a constant, nor one Tessera supplies)."""
        return self.equation is not None and self.name not in DIRECT and not self.constant

    @property
    def constant(self) -> bool:
        return self.name.startswith("MaliConfig") or self.units in ("instances",) or self.group in (
            "Static Configuration", "Implementation Configuration")


class Equation:
    """An equation of the database, compiled once: `evaluate(values)` or None."""
    _NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.USub, ast.UAdd,
              ast.Constant, ast.Name, ast.Load)

    def __init__(self, text: str) -> None:
        tree = ast.parse(text, mode="eval")
        for node in ast.walk(tree):
            if not isinstance(node, self._NODES) or (isinstance(node, ast.Constant)
                                                     and type(node.value) not in (int, float)):
                raise ValueError(f"counter equation {text!r}: {type(node).__name__} is not allowed")
        self.text = text
        self.names = tuple(sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}))
        self._code = compile(tree, f"<counter equation {text}>", "eval")

    def evaluate(self, values: dict[str, float]) -> float | None:
        if any(values.get(n) is None for n in self.names):
            return None
        try:
            return eval(self._code, {"__builtins__": {}}, {n: values[n] for n in self.names})  # noqa: S307 - whitelisted ast
        except ZeroDivisionError:
            return None


class GpuCounters:
    """The counters one GPU has, and how its derived ones are computed."""

    def __init__(self, arm_gpu: str) -> None:
        self.gpu = arm_gpu
        self.counters = {name: Counter(name, row) for name, row in COUNTERS[arm_gpu].items()}
        # the equations evaluated: not those of the counters Tessera supplies (DIRECT; Arm writes some with
        # max(), which the evaluator does not take)
        self.equations = {c.name: Equation(c.equation) for c in self.counters.values()
                          if c.equation is not None and c.name not in DIRECT}

    def has(self, name: str) -> bool:
        return name in self.counters

    def config(self, shader_cores: int) -> dict[str, float]:
        """The MALI_CONFIG_* names and the configuration constants' values."""
        cfg = {"MALI_CONFIG_EXT_BUS_BYTE_SIZE": EXT_BUS_BYTE_SIZE, "MALI_CONFIG_SHADER_CORE_COUNT": shader_cores,
               "MALI_CONFIG_L2_CACHE_COUNT": None}
        for c in self.counters.values():
            if c.constant and c.equation is not None:
                value = self.equations[c.name].evaluate(cfg)
                if value is not None:
                    cfg[c.name] = value
        return cfg

    def derive(self, values: dict[str, float], config: dict[str, float]) -> dict[str, float]:
        """`values` with every derived counter whose equation's names have values, evaluated in table
        order (the generator keeps a derived counter after the counters it reads)."""
        scope = {**config, **values}
        out = dict(values)
        for c in self.counters.values():
            if c.derived and c.name not in out:
                v = self.equations[c.name].evaluate(scope)
                if v is not None:
                    out[c.name] = scope[c.name] = v
        return out

    def shown(self) -> list[Counter]:
        """The counters a trace or table shows (all but the configuration constants), in table order."""
        return [c for c in self.counters.values() if not c.constant]


@functools.cache
def for_gpu(arm_gpu: str) -> GpuCounters:
    """The counters of Arm's GPU `arm_gpu` (ARM_GPUS values); KeyError for another."""
    return GpuCounters(arm_gpu)


def for_profile(key: str) -> GpuCounters | None:
    """The counters of the emulated GPU `key` (icd/profiles.py), None when Arm's table has none for it."""
    name = ARM_GPUS.get(key)
    return for_gpu(name) if name is not None else None


Deriver = Callable[[dict[str, float]], dict[str, float]]
