"""schemas/slice_args.py, the one table of GPU slice args: every arg the driver can write and every
arg hostd reads or writes is a row of it; keys (per owner) and labels are unique; the driver and
hostd spell no arg name of their own."""
from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tessera.schemas import slice_args as table
from tessera.schemas.slice_args import DRIVER, HOSTD, LAYER, TABLE, row_of

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = ROOT / "schemas" / "json"


# ---- the table itself ------------------------------------------------------------------------
def test_labels_are_unique_and_keys_unique_per_owner():
    labels = [a.label for a in TABLE]
    assert len(labels) == len(set(labels)), sorted(x for x in labels if labels.count(x) > 1)
    for owner in (DRIVER, LAYER, HOSTD):
        keys = [a.key for a in TABLE if a.owner == owner]
        assert len(keys) == len(set(keys)), (owner, sorted(x for x in keys if keys.count(x) > 1))
    assert {a.owner for a in TABLE} == {DRIVER, LAYER, HOSTD}
    assert all(a.unit for a in TABLE)


def test_no_label_fills_another_rows_template():
    """row_of is unambiguous: a concrete label is never read as a template's."""
    for a in TABLE:
        assert row_of(a.label) is a


def test_layer_rows_are_exactly_the_workload_and_annex_fields():
    fields = set()
    for name in ("workload.schema.json", "annex.schema.json"):
        fields |= set(json.loads((SCHEMA_DIR / name).read_text())["properties"])
    layer = {a.key for a in TABLE if a.owner == LAYER}
    assert layer == fields
    assert all(a.label == a.key for a in TABLE if a.owner == LAYER)    # the merge copies them by name
    assert table.KIND_FIELD in layer and set(table.HANDLE_FIELDS) <= layer


def test_a_driver_fact_the_layer_states_too_names_a_layer_field():
    layer = {a.key for a in TABLE if a.owner == LAYER}
    for a in table.DRIVER_ARGS:
        assert a.same_as is None or a.same_as in layer, a
    assert table.SAME_FACT == {a.label: a.same_as for a in table.DRIVER_ARGS if a.same_as}


def test_estimates_name_driver_keys_and_workload_classes_every_work_kind():
    for note, keys in table.ESTIMATES.items():
        assert keys and all(k in table.DRIVER_LABELS for k in keys), note
    # icd/timeline.py times these kinds (Work.kind) and render passes
    assert set(table.WORKLOAD_CLASSES) == {"render_pass", "dispatch", "trace_rays", "transfer",
                                           "acceleration_structure_build", "acceleration_structure_copy", "data_graph"}


# ---- every arg the driver can write ---------------------------------------------------------
def _is_info(node) -> bool:
    return (isinstance(node, ast.Name) and node.id == "info") or (isinstance(node, ast.Attribute)
                                                                   and node.attr == "info")


def _str_keys(node) -> list[str]:
    if isinstance(node, ast.Dict):
        return [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    if isinstance(node, ast.DictComp):      # {key: … for key, x in (("name", …), …)}
        return [t.elts[0].value for g in node.generators for t in ast.walk(g.iter)
                if isinstance(t, ast.Tuple) and t.elts and isinstance(t.elts[0], ast.Constant)
                and isinstance(t.elts[0].value, str)]
    return []


def _info_keys(path: Path) -> dict[str, int]:
    """The Work.info keys a module writes: `info = {…}`, `x.info[k] = …`, `info.update({…})`, and
    Work(…)'s info argument given as a literal; key -> first line."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        keys: list[str] = []
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if _is_info(t):
                    keys += _str_keys(node.value)
                elif isinstance(t, ast.Subscript) and _is_info(t.value) and isinstance(t.slice, ast.Constant):
                    keys.append(t.slice.value)
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr == "update" and _is_info(f.value):
                for arg in node.args:
                    keys += _str_keys(arg)
            if getattr(f, "id", getattr(f, "attr", None)) == "Work":
                for arg in node.args[3:4] + [k.value for k in node.keywords if k.arg == "info"]:
                    keys += _str_keys(arg)
        for k in keys:
            found.setdefault(k, node.lineno)
    return found


def _driver_info_keys() -> dict[str, str]:
    out = {}
    for folder in ("icd", "vkapi"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text()
            if "Work(" in text or ".info" in text:
                for k, line in _info_keys(path).items():
                    out.setdefault(k, f"{path.relative_to(ROOT)}:{line}")
    from tessera.vkapi.transfers import Transfer      # Work.info of a transfer: Transfer.fields()
    for k in Transfer("copy image", "image_transfer", 64, pixels=16, regions=1).fields():
        out.setdefault(k, "vkapi/transfers.py Transfer.fields")
    return out


def test_every_work_info_key_the_driver_writes_has_a_row():
    keys = _driver_info_keys()
    # the scan still sees the writers (a refactor that hides them from it fails here, not silently)
    assert {"groups", "group_size", "width", "bytes", "pixels", "shader_cost", "src_tensor", "copy_mode"} <= set(keys)
    missing = {k: where for k, where in keys.items() if k not in table.DRIVER_LABELS}
    assert not missing, f"Work.info keys without a row in schemas/slice_args.py: {missing}"


def test_the_timeline_and_trace_write_only_driver_rows(tmp_path):
    """Every render-stage event the timeline writes, read back from gpu.perfetto-trace: each
    extra_data name is a driver row's label."""
    from tessera.icd.profiles import PROFILES
    from tessera.icd.recording import Draw, Work
    from tessera.icd.scheduler import EmulatedGpu, QueueOrder
    from tessera.icd.timeline import PassRun, Templates, _Placer
    from tessera.icd.trace import GpuTrace
    from tessera.schemas.perfetto import read_packets
    from tessera.vkapi.render_passes import PassInfo

    trace = GpuTrace(tmp_path)
    from tessera.icd.counters import CounterModel
    from tessera.icd.measured_counters import Stats
    tl = SimpleNamespace(profile=PROFILES["mali-g720"], trace=trace, _submissions=1, _render_pass_instances=0,
                         _counters=CounterModel.for_profile(PROFILES["mali-g720"]), templates=Templates())
    placer = _Placer(tl, SimpleNamespace(labels=[]), 0, EmulatedGpu(), QueueOrder(), 0)
    info = {k: 1 for k in _driver_info_keys()}      # every Work.info key the driver writes, at once
    works = [Work("dispatch", "compute", "vkCmdDispatchIndirect", info, invocations=64, estimated=True),
             Work("trace_rays", "trace_rays", "vkCmdTraceRaysKHR", {"width": 1}, invocations=1),
             Work("acceleration_structure_build", "acceleration structure 'fast trace' build",
                  "vkCmdBuildAccelerationStructuresIndirectKHR", {"primitives": 1}, estimated=True, primitives=1),
             Work("acceleration_structure_copy", "acceleration structure copy to memory",
                  "vkCmdCopyAccelerationStructureKHR", {"copy_mode": "clone", "bytes": 64}, nbytes=64),
             Work("transfer", "copy buffer to image", "vkCmdCopyBufferToImage", {"bytes": 64}, nbytes=64),
             # counted by the backend (TESSERA_COUNTERS=measured): the `Measured` arg
             Work("dispatch", "compute", "vkCmdDispatch", {}, invocations=32, measured=Stats(0, 0, 0, 0, 0, 0, 32))]
    for work in works:
        placer._emit_work(work, ["frame", "t1"], 0xCB)
    info = PassInfo("vkCmdBeginRendering", 0, 64, 64, 1, 1, [], 0, 0, True)
    # a draw with compiler-model costs: the pass writes the cycles per vertex and per fragment it used
    placer._emit_pass(PassRun(info, ["t2"], 0xCB, [Draw(3, 1, True, 0.5, 0.25)], parts=2))
    trace.flush()
    trace.close()
    written = {d.name for p in read_packets(trace.path) if p.HasField("gpu_render_stage_event")
               for d in p.gpu_render_stage_event.extra_data}
    rows = {row_of(n) for n in written}        # a counter (Mali<name>) fills the COUNTER template
    driver = set(table.DRIVER_ARGS)
    assert rows <= driver, {n for n in written if row_of(n) not in driver}
    assert rows == driver, driver - rows      # and no driver row is one it never writes


# ---- every arg hostd reads or derives -------------------------------------------------------
def test_hostd_reads_and_derives_only_table_rows():
    from tessera.hostd import region_args, shaders, slice_args, summary
    from tessera.schemas import perfetto

    labels = {a.label for a in TABLE}
    assert perfetto.LABELS_KEY == table.LABEL.label and perfetto.LABEL_STACK_KEY == table.LABEL_STACK.label
    assert set(slice_args.SAME_FACT) | set(slice_args.SAME_FACT.values()) <= labels
    assert {slice_args.WORKLOAD_KEY, slice_args.ESTIMATED_KEY, slice_args.KIND_FIELD} <= labels
    assert {n for names in slice_args.ESTIMATES.values() for n in names} <= labels
    assert all(row_of(arg) is table.HANDLES for arg in slice_args.HANDLE_ARGS)
    assert summary.SUMMARY_READS <= labels
    assert summary.MISSING_KEY == table.MISSING.label and summary.INTERNAL_KEY in labels
    assert region_args.COUNTER_ARG == table.REGION_COUNTER.label
    assert region_args.HEATMAPS_ARG == table.REGION_HEATMAPS.label
    assert {shaders.ACTIONS_KEY: table.SHADER_ACTIONS, shaders.OPS_KEY: table.SHADER_OPS,
            shaders.LARGEST_KEY: table.SHADER_LARGEST, shaders.BOUND_KEY: table.SHADER_BOUND,
            shaders.INVOCATIONS_KEY: table.SHADER_INVOCATIONS, shaders.TOP_DRAW_KEY: table.SHADER_TOP_DRAW} \
        == {a.label: a for a in (table.SHADER_ACTIONS, table.SHADER_OPS, table.SHADER_LARGEST, table.SHADER_BOUND,
                                 table.SHADER_INVOCATIONS, table.SHADER_TOP_DRAW)}
    assert all(row_of(k) is table.SHADER_PIPE for k in shaders.PIPE_KEYS.values())


@pytest.mark.parametrize("path", ["icd/timeline.py", "icd/trace.py", "hostd/merge.py", "hostd/slice_args.py",
                                  "hostd/region_args.py"])
def test_no_driver_label_spelled_outside_the_table(path):
    """The modules that write or read the driver's args take its names from the table: no string
    constant (docstrings aside) equals a driver label, and none is made by capitalizing a key."""
    tree = ast.parse((ROOT / path).read_text())
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    driver = {a.label for a in table.DRIVER_ARGS}
    spelled = sorted({n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and id(n) not in docstrings
                      and n.value in driver})
    assert not spelled, f"{path} spells {spelled}: use schemas/slice_args.py"
    made = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in ("capitalize", "title")]
    assert not made, f"{path}: arg names made from keys at run time (lines {made}): use schemas/slice_args.py"
