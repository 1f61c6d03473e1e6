"""One declaration per intercept (vkapi/intercepts.py): a shim spec listing a command twice,
recording in C a command it does not hook, a hook of an undeclared command and a hook from a
module the command's row does not name are refused before anything runs."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tessera.vkapi.dispatch import HookSet
from tessera.vkapi.log import HookErrors
from tessera.vkapi.recorder import Recorded
from tessera.vkapi.shim import ShimSpec


def _spec(hooks, recorded=None, answered=None) -> ShimSpec:
    return ShimSpec(module_name="_m", library_name="libx.so", hooks=tuple(hooks), calls=(), extra_types=(),
                    embedding_api="", c_glue="", init_module="m", recorded=recorded or {}, answered=answered or {})


def test_a_command_declared_twice_is_refused():
    with pytest.raises(ValueError, match=r"declared twice.*vkCmdDraw"):
        _spec(["vkCmdDraw", "vkQueueSubmit", "vkCmdDraw"])


def test_a_command_recorded_in_c_but_not_hooked_is_refused():
    with pytest.raises(ValueError, match=r"recorded in C but not hooked.*vkCmdDispatch"):
        _spec(["vkCmdDraw"], {"vkCmdDispatch": Recorded()})


def test_a_command_answered_in_c_but_not_hooked_is_refused():
    from tessera.vkapi.answers import Answered

    with pytest.raises(ValueError, match=r"answered in C but not hooked.*vkEnumeratePhysicalDevices"):
        _spec(["vkCmdDraw"], answered={"vkEnumeratePhysicalDevices": Answered()})


def test_only_fixed_query_shapes_can_be_answered_in_c():
    """The generator keys a kept answer by the first parameter: a command of another shape, or with
    a parameter its `when` does not pin down, is refused when the C is generated."""
    from tessera.vkapi.answers import Answered, call_hook, shape

    with pytest.raises(ValueError, match="last parameter must be its output"):
        shape("vkCmdDraw", Answered())
    with pytest.raises(ValueError, match=r"\['pLayerName'\] would not be part of the answer's key"):
        shape("vkEnumerateDeviceExtensionProperties", Answered())
    groups = shape("vkEnumeratePhysicalDeviceGroups", Answered())
    assert (groups.count, groups.offset) == (
        "pPhysicalDeviceGroupCount", "offsetof(VkPhysicalDeviceGroupProperties, physicalDeviceCount)")
    assert shape("vkGetPhysicalDeviceProperties", Answered()).count is None
    assert "if (pLayerName == NULL)" in call_hook("vkEnumerateDeviceExtensionProperties", 3,
                                                  Answered(when="pLayerName == NULL"))


def test_the_shipped_shims_declare_each_command_once():
    from tessera.icd.shim_spec import spec as icd_spec
    from tessera.layer.shim_spec import spec as layer_spec

    for spec in (icd_spec(), layer_spec()):
        assert len(set(spec.hooks)) == len(spec.hooks)


def test_a_hook_without_declaration_is_refused_at_install():
    hooks = HookSet(HookErrors(logging.getLogger("test")))
    hooks.after("vkCmdDraw")(lambda *a: None)
    hooks.after("vkQueueSubmit")(lambda *a: None)
    with pytest.raises(RuntimeError, match=r"does not declare.*vkQueueSubmit"):
        hooks.install(None, None, lambda h: None, ["vkCmdDraw"])


def test_a_declaration_without_hook_is_refused_at_install():
    hooks = HookSet(HookErrors(logging.getLogger("test")))
    hooks.after("vkCmdDraw")(lambda *a: None)
    with pytest.raises(RuntimeError, match=r"without a hook.*vkCmdDispatch"):
        hooks.install(None, None, lambda h: None, ["vkCmdDraw", "vkCmdDispatch"])


def test_a_hook_from_a_module_its_row_does_not_name_is_refused_at_install():
    hooks = HookSet(HookErrors(logging.getLogger("test")))
    hooks.after("vkCmdDraw")(lambda *a: None)   # registered by this test module
    owners = {"vkCmdDraw": frozenset({"tessera.icd.recording"})}
    with pytest.raises(RuntimeError, match=r"intercept table does not name.*vkCmdDraw \(hooked in test_declarations\)"):
        hooks.install(None, None, lambda h: None, ["vkCmdDraw"], owners)


def test_the_intercept_table_names_real_modules_and_is_what_the_shims_declare():
    import importlib

    from tessera.icd.shim_spec import HOOKS as ICD_HOOKS, RECORDED as ICD_RECORDED
    from tessera.layer.shim_spec import HOOKS as LAYER_HOOKS, RECORDED as LAYER_RECORDED
    from tessera.vkapi import intercepts
    from tessera.vkapi.transfers import RECORDED_IN_C

    for row in intercepts.INTERCEPTS.values():
        for shim_row in row.values():
            assert shim_row.modules
            for module in shim_row.modules:
                importlib.import_module(f"tessera.{module}")
    assert ICD_HOOKS == intercepts.hooks(intercepts.ICD) and LAYER_HOOKS == intercepts.hooks(intercepts.LAYER)
    # the driver answers its fixed queries in C once Python has (vkapi/answers.py); the layer none
    from tessera.icd.shim_spec import ANSWERED as ICD_ANSWERED
    assert set(ICD_ANSWERED) == {"vkEnumeratePhysicalDevices", "vkEnumeratePhysicalDeviceGroups",
                                 "vkGetPhysicalDeviceProperties", "vkEnumerateDeviceExtensionProperties"}
    assert intercepts.answered(intercepts.LAYER) == {}
    # transfers recorded in C keep the fields their sizes need, tagged in the layer only
    for name, fields in RECORDED_IN_C.items():
        assert ICD_RECORDED[name] == Recorded(fields=fields)
        assert LAYER_RECORDED[name] == Recorded(fields=fields, tagged=True)


def test_intercept_rows_are_written_in_command_name_order():
    """vkapi/intercepts.py says its rows are sorted by command name (so a command's row is found by its
    name); the module sorts the table when it loads, so only the source shows a row out of place."""
    import ast

    from tessera.vkapi import intercepts

    tree = ast.parse(Path(intercepts.__file__).read_text())
    (table,) = [node.value for node in ast.walk(tree)
                if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "INTERCEPTS"]
    names = [key.value for key in table.keys if key is not None]   # None: a `**` of rows written elsewhere
    assert len(names) > 150
    assert names == sorted(names), [n for n, m in zip(names, sorted(names)) if n != m][:3]
