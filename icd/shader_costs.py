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
    so the first pipeline creation does not pay for them (about 40 ms on the benchmark machine).
    Called at the first vkCreateDevice, not at driver load: a program that only queries the driver
    (vulkaninfo) never needs them, and on two cores the loading competes with its start."""
    if _warm_up_started.is_set():
        return
    _warm_up_started.set()
    threading.Thread(target=_load_compiler, name="tessera-warm-up", daemon=True).start()


def _load_compiler() -> None:
    try:
        from tessera.compiler import api  # noqa: F401
        from tessera.spirv import grammar

        grammar.grammar()
    except Exception:  # the first pipeline creation will load them (and report any problem)
        pass


def of_stages(gpu: str, stages, log: logging.Logger) -> dict[str, float]:
    """stage name -> cycles per invocation, for (name, spirv, entry, spec_values) stages."""
    from tessera.compiler import api
    from tessera.compiler.errors import CompileError

    costs: dict[str, float] = {}
    for name, code, entry, spec in stages:
        if code is None:
            continue
        try:
            costs[name] = api.shader_cost(code, entry, gpu, spec).cycles_typical
        except CompileError as e:
            log.info("%s shader %s: no cost from the compiler model (%s)", name, entry, e)
    return costs
