"""Generate schemas/counters_table.py from Arm's counter database (schemas/arm_counters/).

Role: the one generator of the counter table. Its inputs are files of ARM-software/libGPUCounters
`specification/database/` saved under schemas/arm_counters/ (SOURCES.md says which, at which commit,
and which are whole files and which verbatim excerpts of whole `<CounterInfo>` elements). It keeps,
for each emulated GPU (ARM_GPUS), the counters Tessera models, measures or derives (WANTED) that
Arm's database says that GPU has:

  - a hardware counter (one with a `<SourceName>`) only when its source name (or `<SourceAlias>`) is
    in the GPU's hardware layout (`hardwarelayout/<GPU>.xml`);
  - a derived counter (an `<Equation>`) only when every name its equation reads is a counter kept
    for that GPU or a `MALI_CONFIG_*` constant (supplied at run time, schemas/counters.py).

For each: machine name, stable ID, human name, units, group, the Perfetto groups (Arm's rule in
perfetto_groups.md: the first `<Groups>` list whose every name is a GpuCounterGroup; UNCLASSIFIED
otherwise), the source name and the equation text as the database writes it (whitespace folded).

Run: `python -m tessera.schemas.counters_gen` (writes the table); `--check` exits 1 when the
checked-in table differs from what the inputs give (tests/schemas/test_counter_table.py runs it).
"""
from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).parent
SOURCES = HERE / "arm_counters"
OUTPUT = HERE / "counters_table.py"
# Emulated GPUs (icd/profiles.py keys) -> Arm's GPU name in the database.
ARM_GPUS = {"mali-g720": "Mali-G720", "mali-g78": "Mali-G78"}
# The counters Tessera models, measures or derives (docs/counters.md), by Arm's machine name.
WANTED = (
    "MaliConfigExtBusBeatSize", "MaliConfigCoreCount", "MaliGPUWarpSize",
    "MaliGPUActiveCy",
    "MaliCompQueuedCy", "MaliCompQueueAssignStallCy", "MaliCompQueueActiveCy", "MaliCompQueueUtil",
    "MaliBinningQueuedCy", "MaliBinningQueueAssignStallCy", "MaliBinningQueueActiveCy", "MaliBinningQueueUtil",
    "MaliMainQueuedCy", "MaliMainQueueAssignStallCy", "MaliMainQueueActiveCy", "MaliMainQueueUtil",
    "MaliNonFragQueueActiveCy", "MaliNonFragQueueUtil", "MaliFragQueueActiveCy", "MaliFragQueueUtil",
    "MaliExtBusRdBt", "MaliExtBusWrBt", "MaliExtBusRdBy", "MaliExtBusWrBy",
    "MaliGeomTotalPrim", "MaliGeomTrianglePrim",
    "MaliGeomVisiblePrim",   # measured only: transform feedback positions culled on the CPU (icd/visible_prims.py)
    "MaliNonFragWarp", "MaliNonFragThread", "MaliFragWarp", "MaliFragThread",
    # the compiler model's per-shader costs x threads (docs/counters.md "Shader instructions and issue cycles");
    # Arm's MaliEngInstr exists only for Bifrost GPUs (G31-G76): its Valhall / 5th-generation counterpart
    # is MaliEngArithInstr
    "MaliEngFMAInstr", "MaliEngCVTInstr", "MaliEngSFUInstr", "MaliEngArithInstr",
    "MaliLSIssueCy", "MaliVarIssueCy", "MaliTexIssueCy",
)
# Derived counters whose value Tessera supplies itself instead of evaluating Arm's equation, each with
# its reason: kept for a GPU even when the names their equation reads are not (hand-made exceptions).
DIRECT = {
    "MaliNonFragThread": "the exact invocation count: Arm's equation (warps x warp size) assumes full warps",
    "MaliFragThread": "the fragment count of the timing model: Arm's equation (warps x warp size) assumes full warps",
    "MaliGeomTotalPrim": "the draws' input primitives: Arm's equation adds culled and visible primitives, which "
                         "Tessera does not model (every input primitive is one or the other)",
    "MaliLSIssueCy": "the compiler model's load/store cycles: it does not split them into the full and partial "
                     "reads and writes and the atomics Arm's equation adds",
    "MaliVarIssueCy": "the compiler model's varying cycles: it does not split them into the 32-bit and 16-bit "
                      "interpolation slots Arm's equation reads",
    "MaliTexIssueCy": "the compiler model's texture filtering cycles: Arm's equation takes the busiest of the "
                      "texture unit's stages, which the model does not separate",
}
# Perfetto's GpuCounterDescriptor.GpuCounterGroup names (perfetto_groups.md).
PERFETTO_GROUPS = ("UNCLASSIFIED", "SYSTEM", "VERTICES", "FRAGMENTS", "PRIMITIVES", "MEMORY", "COMPUTE",
                   "RAY_TRACING")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _text(e: ET.Element, tag: str) -> str | None:
    x = e.find(tag)
    return " ".join(x.text.split()) if x is not None and x.text else None


def perfetto_groups(info: ET.Element) -> tuple[str, ...]:
    """Arm's rule: the first group list all of whose names Perfetto has; UNCLASSIFIED otherwise."""
    for groups in info.findall("Perfetto/Groups"):
        names = tuple(g.text.strip().upper().replace(" ", "_") for g in groups.findall("GroupName"))
        if names and all(n in PERFETTO_GROUPS for n in names):
            return names
    return ("UNCLASSIFIED",)


def layout(gpu: str) -> set[str]:
    root = ET.parse(SOURCES / f"{gpu}.xml").getroot()
    return {c.get("name") for c in root.iter("Counter")}


def infos() -> list[ET.Element]:
    out = []
    for path in sorted(SOURCES.glob("Mali-CounterInfo-*.xml")):
        out += ET.parse(path).getroot().findall("CounterInfo")
    return out


def table() -> dict[str, dict[str, tuple]]:
    """Arm GPU name -> machine name -> (stable id, human name, units, group, perfetto groups,
    source name or None, equation or None), in WANTED order."""
    all_infos = infos()
    out: dict[str, dict[str, tuple]] = {}
    for gpu in ARM_GPUS.values():
        hw = layout(gpu)
        rows: dict[str, tuple] = {}
        for name in WANTED:
            for info in all_infos:
                if _text(info, "MachineName") != name or gpu not in [g.text for g in info.findall("SupportedGPUs/GPU")]:
                    continue
                source, equation = _text(info, "SourceName"), _text(info, "Equation")
                if source is not None and source not in hw and _text(info, "SourceAlias") not in hw:
                    continue
                if equation is not None and name not in DIRECT and any(n not in rows and not n.startswith("MALI_CONFIG_")
                                                 for n in _NAME.findall(equation)):
                    continue
                rows[name] = (int(_text(info, "StableID")), _text(info, "HumanName"), _text(info, "Units"),
                              _text(info, "GroupName"), perfetto_groups(info), source, equation)
                break
        out[gpu] = rows
    return out


def render(t: dict[str, dict[str, tuple]]) -> str:
    lines = ['"""Generated by tessera.schemas.counters_gen from schemas/arm_counters/ (Arm\'s counter database):',
             "do not edit; regenerate with `python -m tessera.schemas.counters_gen`.",
             "",
             "GPU -> machine name -> (stable id, human name, units, group, Perfetto groups, source name, equation).",
             '"""', "", "COUNTERS = {"]
    for gpu, rows in t.items():
        lines.append(f"    {gpu!r}: {{")
        for name, row in rows.items():
            lines.append(f"        {name!r}: {row!r},")
        lines.append("    },")
    lines.append("}")
    lines.append("# Derived counters Tessera supplies itself (schemas/counters_gen.py DIRECT), with the reason.")
    lines.append("DIRECT = {")
    lines += [f"    {k!r}: {v!r}," for k, v in DIRECT.items()]
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    text = render(table())
    if "--check" in argv:
        same = OUTPUT.is_file() and OUTPUT.read_text(encoding="utf-8") == text
        if not same:
            sys.stderr.write(f"{OUTPUT} differs from what schemas/arm_counters/ gives: regenerate it\n")
        return 0 if same else 1
    OUTPUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
