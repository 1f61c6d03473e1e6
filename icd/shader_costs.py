"""Per-invocation shader costs from the Mali compiler model, for the timing model.

Costs are cycles per invocation (longest path) per stage. A shader the
model cannot cost (bad or unsupported SPIR-V) gets no entry, and the timing
model falls back to its documented defaults; the reason is logged.
"""
from __future__ import annotations

import logging


def of_stages(gpu: str, stages, log: logging.Logger) -> dict[str, float]:
    """stage name -> cycles per invocation, for (name, spirv, entry, spec_values) stages."""
    try:
        from tessera.compiler import api
    except ImportError:  # the compiler model is optional for the driver
        return {}
    costs: dict[str, float] = {}
    for name, code, entry, spec in stages:
        if code is None:
            continue
        try:
            costs[name] = api.invocation_cycles(code, entry, gpu, spec)
        except api.CompilerError as e:
            log.info("%s shader %s: no cost from the compiler model (%s)", name, entry, e)
    return costs
