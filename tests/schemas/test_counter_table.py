"""The counter table: generated from Arm's database as checked in, restricted per GPU, equations evaluated."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tessera.schemas import counters, counters_gen
from tessera.schemas.counters_table import COUNTERS

SOURCES = Path(counters_gen.__file__).parent / "arm_counters"


def test_table_is_what_the_generator_gives():
    assert counters_gen.main(["--check"]) == 0


def test_whole_files_have_the_readers_lengths():
    """SOURCES.md lists each whole file with the character count the reader gave: the copy is exact."""
    rows = re.findall(r"^\| (\S+) \| specification/\S+ \| [0-9a-f]{40} \| (\d+) \|$",
                      (SOURCES / "SOURCES.md").read_text(encoding="utf-8"), re.M)
    whole = [(name, int(n)) for name, n in rows if not name.endswith(".excerpt.xml")]
    assert {name for name, _ in whole} == {"Mali-G720.xml", "Mali-G78.xml", "perfetto_groups.md"}
    for name, n in whole:
        assert len((SOURCES / name).read_text(encoding="utf-8")) == n, name


def test_excerpts_hold_whole_elements_of_the_wanted_counters():
    for path in SOURCES.glob("*.excerpt.xml"):
        for info in ET.parse(path).getroot():
            assert info.tag == "CounterInfo"
            assert info.findtext("MachineName") in counters_gen.WANTED
            assert {"Mali-G720", "Mali-G78"} & {g.text for g in info.iter("GPU")}


def test_each_gpu_keeps_only_what_its_layout_has():
    g720, g78 = COUNTERS["Mali-G720"], COUNTERS["Mali-G78"]
    # the G720 schedules command streams (binning/main/compute queues), the G78 job slots
    assert {"MaliBinningQueueActiveCy", "MaliMainQueueActiveCy", "MaliCompQueueActiveCy"} <= set(g720)
    assert not {"MaliFragQueueActiveCy", "MaliNonFragQueueActiveCy"} & set(g720)
    assert {"MaliFragQueueActiveCy", "MaliNonFragQueueActiveCy"} <= set(g78)
    assert not {"MaliMainQueuedCy", "MaliCompQueuedCy"} & set(g78)
    for gpu, rows in COUNTERS.items():
        layout = counters_gen.layout(gpu)
        for name, row in rows.items():
            source = row[5]
            assert source is None or source in layout, (gpu, name)


def test_perfetto_groups_follow_arms_rule():
    g720 = COUNTERS["Mali-G720"]
    assert g720["MaliCompQueueActiveCy"][4] == ("COMPUTE", "RAY_TRACING")     # "Ray tracing" -> RAY_TRACING
    assert g720["MaliExtBusRdBy"][4] == ("MEMORY",)
    assert g720["MaliGPUWarpSize"][4] == ("UNCLASSIFIED",)
    for rows in COUNTERS.values():
        for row in rows.values():
            assert set(row[4]) <= set(counters_gen.PERFETTO_GROUPS)


def test_equations_evaluate_as_the_database_writes_them():
    g = counters.for_gpu("Mali-G720")
    cfg = g.config(shader_cores=10)
    assert cfg["MaliGPUWarpSize"] == 16 and cfg["MaliConfigCoreCount"] == 10
    out = g.derive({"MaliMainQueuedCy": 900, "MaliMainQueueAssignStallCy": 100, "MaliExtBusWrBt": 7,
                    "MaliGPUActiveCy": 1600}, cfg)
    assert out["MaliMainQueueActiveCy"] == 800
    assert out["MaliMainQueueUtil"] == 50.0
    assert out["MaliExtBusWrBy"] == 7 * counters.EXT_BUS_BYTE_SIZE
    assert "MaliExtBusRdBy" not in out            # no read beats: no value, never a zero
    assert "MaliCompQueueUtil" not in out
    g78 = counters.for_gpu("Mali-G78")
    # Arm derives G78 fragment threads from warps (full warps assumed); Tessera supplies them (DIRECT)
    assert g78.counters["MaliFragThread"].equation == "MaliFragWarp * MaliGPUWarpSize"
    assert not g78.counters["MaliFragThread"].derived and "MaliFragThread" in counters.DIRECT
    assert "MaliFragThread" not in g78.derive({"MaliFragWarp": 3}, g78.config(20))


def test_equation_whitelist():
    assert counters.Equation("(a / b) * 100").evaluate({"a": 1, "b": 4}) == 25.0
    assert counters.Equation("a / b").evaluate({"a": 1, "b": 0}) is None
    for bad in ("__import__('os')", "a.b", "a ** 2", "'x'", "[a]", "a if b else c"):
        with pytest.raises((ValueError, SyntaxError)):
            counters.Equation(bad)


def test_visible_primitives_are_arms_hardware_counter():
    """MaliGeomVisiblePrim (measured: icd/visible_prims.py) as the saved database element gives it, read here
    without the generator: PRIM_VISIBLE, stable ID 148, in both GPUs' hardware layouts."""
    [info] = [i for i in ET.parse(SOURCES / "Mali-CounterInfo-03b-Tiler-Primitives.excerpt.xml").getroot()
              if i.findtext("MachineName") == "MaliGeomVisiblePrim"]
    want = (int(info.findtext("StableID")), info.findtext("HumanName"), info.findtext("Units"),
            info.findtext("GroupName"), ("PRIMITIVES",), info.findtext("SourceName"), None)
    assert want == (148, "Visible primitives", "primitives", "Primitive Culling", ("PRIMITIVES",), "PRIM_VISIBLE", None)
    for gpu in ("Mali-G720", "Mali-G78"):
        assert gpu in {g.text for g in info.iter("GPU")}
        assert 'name="PRIM_VISIBLE"' in (SOURCES / f"{gpu}.xml").read_text(encoding="utf-8")
        assert COUNTERS[gpu]["MaliGeomVisiblePrim"] == want
