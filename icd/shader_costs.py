"""Per-invocation shader costs from the Mali compiler model, for the timing model.

Cost = the model's bound-pipe cycles per thread on a typical path
(`ShaderCost.cycles_typical`: loops at the model's assumed trip counts), the
figure a Mali Offline Compiler report gives per thread. The compiler model
caches by SPIR-V hash, so re-creating a pipeline costs nothing. A shader the
model cannot cost gets no entry, and the timing model falls back to its
documented defaults; the reason is logged.
"""
from __future__ import annotations

import logging
import threading

_warm_up_started = threading.Event()


def warm_up() -> None:
    """Load the SPIR-V grammar and the compiler model on a thread of their own, once per process,
    so the first pipeline creation does not pay for them (about 40 ms on the benchmark machine)."""
    if _warm_up_started.is_set():
        return
    _warm_up_started.set()
    threading.Thread(target=_load_compiler, name="tessera-warm-up", daemon=True).start()


class CompilerWarmUp:
    """Starts `warm_up` at the first shader module or shader object: the program is about to make
    pipelines, and has their other objects to create meanwhile. Not earlier (driver load, device
    creation): a program that makes no shaders (vulkaninfo) never needs the model, and on two cores
    the loading, holding the interpreter, competes with the program's start."""

    def before_vkCreateShaderModule(self, dev, device, pCreateInfo, pAllocator, pShaderModule):
        warm_up()

    def before_vkCreateShadersEXT(self, dev, device, createInfoCount, pCreateInfos, pAllocator, pShaders):
        warm_up()


def register(drv) -> None:
    drv.hooks.bind(CompilerWarmUp())


def _load_compiler() -> None:
    try:
        from tessera.compiler import api  # noqa: F401
        from tessera.spirv import grammar

        grammar.grammar()
    except Exception:  # the first pipeline creation will load them (and report any problem)
        pass


def of_stages(gpu: str, stages, log: logging.Logger) -> dict[str, float]:
    """stage name -> cycles per invocation, for (name, spirv, entry, spec_values) stages; each a
    counters.StageCost carrying the typical path's per-pipe figures the Mali counters use."""
    from tessera.compiler import api
    from tessera.compiler.costs import PIPES, gpu_costs
    from tessera.compiler.errors import CompileError

    from .counters import StageCost

    costs: dict[str, float] = {}
    for name, code, entry, spec in stages:
        if code is None:
            continue
        try:
            cost = api.shader_cost(code, entry, gpu, spec)
            rates = [gpu_costs(gpu).rates[p].per_clock for p in PIPES]
            t = cost.typical
            cycles = (t.fma, t.cvt, t.sfu, t.ls, t.v, t.t)
            costs[name] = StageCost(cost.cycles_typical, [c * r for c, r in zip(cycles, rates)], cycles)
        except CompileError as e:
            log.info("%s shader %s: no cost from the compiler model (%s)", name, entry, e)
    return costs
