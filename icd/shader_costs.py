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

from tessera.compiler import api
from tessera.compiler.errors import CompileError


def of_stages(gpu: str, stages, log: logging.Logger) -> dict[str, float]:
    """stage name -> cycles per invocation, for (name, spirv, entry, spec_values) stages."""
    costs: dict[str, float] = {}
    for name, code, entry, spec in stages:
        if code is None:
            continue
        try:
            costs[name] = api.shader_cost(code, entry, gpu, spec).cycles_typical
        except CompileError as e:
            log.info("%s shader %s: no cost from the compiler model (%s)", name, entry, e)
    return costs
