"""Report formats of `tessera compile`: malioc-style text, JSON, shader-db lines.

Role: pure formatting of `ShaderCost` values; nothing here computes costs.
The shader-db line follows the `<label> - <stage> shader: <value> <name>, …`
shape Mesa drivers print and shader-db's report.py parses (values first,
one name per field, `spills:fills` as `S:F`).
"""

from __future__ import annotations

from .analysis import PipeCycles
from .api import ShaderCost
from .costs import GPUS

SHADER_DB_STAGES = {"fragment": "MESA_SHADER_FRAGMENT", "vertex": "MESA_SHADER_VERTEX",
                    "compute": "MESA_SHADER_COMPUTE", "geometry": "MESA_SHADER_GEOMETRY",
                    "tess_ctrl": "MESA_SHADER_TESS_CTRL", "tess_eval": "MESA_SHADER_TESS_EVAL",
                    "task": "MESA_SHADER_TASK", "mesh": "MESA_SHADER_MESH"}
COLUMNS = ("A", "FMA", "CVT", "SFU", "LS", "V", "T")


def _row(label: str, c: PipeCycles | None) -> str:
    if c is None:
        return f"{label:<26}" + "".join(f"{'N/A':>8}" for _ in COLUMNS) + f"{'N/A':>8}"
    d = c.as_dict()
    return f"{label:<26}" + "".join(f"{d[k]:>8.2f}" for k in COLUMNS) + f"{c.bound:>8}"


def text(cost: ShaderCost, source: str = "") -> str:
    gpu = GPUS[cost.gpu]
    lines = [
        "Tessera compiler model (Mali Offline Compiler style report)",
        "",
        "Configuration",
        "=============",
        "",
        f"Hardware: {gpu.name}",
        f"Architecture: {gpu.architecture}",
        f"Shader type: Vulkan {cost.stage.capitalize()}" + (f" ({source})" if source else ""),
        f"Entry point: {cost.entry}",
        f"Register allocator: {cost.allocator}",
        "",
        "Main shader",
        "===========",
        "",
        f"Work registers: {cost.work_registers} ({'100' if cost.occupancy == 'full' else '50'}% occupancy)",
        f"Uniform registers: {cost.uniform_registers}",
        f"Stack spilling: {cost.stack_bytes} bytes" if cost.stack_spilling else "Stack spilling: false",
        f"16-bit arithmetic: {cost.fp16_percent:.0f}%",
        "",
        f"{'':<26}" + "".join(f"{k:>8}" for k in COLUMNS) + f"{'Bound':>8}",
        _row("Total instruction cycles:", cost.total),
        _row("Shortest path cycles:", cost.shortest),
        _row("Longest path cycles:", cost.longest),
        "",
        "A = Arithmetic, FMA = Arith FMA, CVT = Arith CVT, SFU = Arith SFU,",
        "LS = Load/Store, V = Varying, T = Texture",
        "",
        "Shader properties",
        "=================",
        "",
        f"Instructions: {cost.instructions}",
        f"Loops: {cost.loops}",
        f"Spills:fills: {cost.spills}:{cost.fills}",
        f"Typical path cycles (bound): {cost.cycles_typical:.2f}",
    ]
    if cost.diagnostics:
        lines += ["", "Diagnostics", "===========", ""] + [f"warning: {d}" for d in cost.diagnostics]
    return "\n".join(lines) + "\n"


def _cycles(c: PipeCycles | None) -> dict | None:
    return None if c is None else {k.lower() if k != "bound" else "bound": v for k, v in c.as_dict().items()}


def as_json(cost: ShaderCost) -> dict:
    return {
        "gpu": cost.gpu, "entry": cost.entry, "stage": cost.stage, "allocator": cost.allocator,
        "work_registers": cost.work_registers, "occupancy": cost.occupancy,
        "uniform_registers": cost.uniform_registers, "stack_spilling": cost.stack_spilling,
        "stack_bytes": cost.stack_bytes, "spills": cost.spills, "fills": cost.fills,
        "fp16_percent": round(cost.fp16_percent, 3), "instructions": cost.instructions, "loops": cost.loops,
        "cycles": {"total": _cycles(cost.total), "shortest": _cycles(cost.shortest),
                   "longest": _cycles(cost.longest), "typical": _cycles(cost.typical)},
        "blocks": [{"index": b.index, "function": b.function, "local_index": b.local_index,
                    "reachable": b.reachable, "used": b.used, "copies": b.copies,
                    "ops": dict(zip(("fma", "cvt", "sfu", "ls", "v", "t"), b.ops)),
                    "cycles": _cycles(b.cycles)} for b in cost.blocks],
        "diagnostics": list(cost.diagnostics),
    }


def shader_db(cost: ShaderCost, label: str) -> str:
    t = cost.total
    threads = 2 if cost.occupancy == "full" else 1
    stage = SHADER_DB_STAGES.get(cost.stage, "MESA_SHADER_" + cost.stage.upper())
    label = label.replace(" ", "_") or "shader"
    return (f"{label} - {stage} shader: {cost.instructions} inst, {t.bound_cycles:.6f} cycles, "
            f"{t.a:.6f} arith, {t.t:.6f} texture, {t.v:.6f} vary, {t.ls:.6f} ldst, "
            f"{cost.work_registers} regs, {threads} threads, {cost.loops} loops, "
            f"{cost.spills}:{cost.fills} spills:fills")
