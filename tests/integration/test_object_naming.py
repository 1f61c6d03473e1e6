"""Emulated objects never reach the backend (issue #23, deliverable 1), through the real loader,
layer, driver and lavapipe.

Generated cross: every command vk.xml marks as naming an object by (type, handle) (vkconst
OBJECT_NAMING, from the objectType attributes) x every object type the driver emulates (the
VkObjectTypes of icd.objects.EmulatedObject's subclasses) x a backend VkBuffer, in one run of
apps/object_naming.py. Each call must succeed without crashing the process (a forwarded emulated
handle made lavapipe SIGSEGV), private data set on each object must read back (and 0 from a slot
never set), the driver must intercept exactly the registry's commands minus the named exceptions,
and a named tensor is named in the trace.
"""
from __future__ import annotations

import json

import pytest
from integration_support import PYTHON, REPO, run

APP = REPO / "tests" / "integration" / "apps" / "object_naming.py"
VK_SUCCESS = 0


def emulated_types() -> list[int]:
    """VkObjectType of every kind of object the driver emulates."""
    import importlib
    import pkgutil

    import tessera.icd
    from tessera.icd.objects import EmulatedObject

    for module in pkgutil.iter_modules(tessera.icd.__path__):   # every module: every subclass exists
        importlib.import_module(f"tessera.icd.{module.name}")

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    types = sorted({sub.OBJECT_TYPE for sub in subclasses(EmulatedObject)})
    assert types and 0 not in types, "an emulated object class without its OBJECT_TYPE"
    return types


def naming_commands() -> list[str]:
    from tessera.vkapi.vkconst import vk

    return sorted(vk.OBJECT_NAMING)


def test_the_driver_intercepts_the_registrys_naming_commands():
    from tessera.vkapi import intercepts

    hooked = {name for name, row in intercepts.INTERCEPTS.items()
              if intercepts.ICD in row and "icd.object_names" in row[intercepts.ICD].modules}
    assert hooked == (set(naming_commands()) - set(intercepts.OBJECT_NAMING_FORWARDED)) | {"vkDestroyPrivateDataSlot"}
    assert set(intercepts.OBJECT_NAMING_FORWARDED) <= set(naming_commands())
    assert {"vkSetDebugUtilsObjectNameEXT", "vkSetPrivateData", "vkDebugMarkerSetObjectTagEXT"} <= hooked


@pytest.fixture(scope="module")
def result(shims, tmp_path_factory) -> dict:
    from tessera.tools.launch import LaunchConfig, environment

    session = tmp_path_factory.mktemp("object-naming") / "session"
    env = environment(LaunchConfig(session))
    out = run([PYTHON, APP, ",".join(naming_commands()), ",".join(map(str, emulated_types()))], env)
    assert out.returncode == 0, f"exit {out.returncode}\n{out.stdout}\n{out.stderr}"
    assert "Traceback" not in out.stderr, out.stderr
    data = json.loads(out.stdout.strip().splitlines()[-2])
    data["session"] = session
    return data


@pytest.mark.parametrize("object_type", emulated_types() + [9])
@pytest.mark.parametrize("command", naming_commands())
def test_every_naming_command_on_every_emulated_object(result, command, object_type):
    assert result["calls"][f"{command} {object_type}"] == VK_SUCCESS


@pytest.mark.parametrize("object_type", emulated_types() + [9])
def test_private_data_of_every_object_reads_back(result, object_type):
    written, read, never_set = result["private_data"][str(object_type)]
    assert (read, never_set) == (written, 0)


def test_a_named_tensor_is_named_in_the_trace(result):
    """The app names two tensors (vkSetDebugUtilsObjectNameEXT) and copies one into the other: the
    driver keeps the names on its objects and the tensor copy's slice carries them."""
    from tessera.hostd.embedded import merge_session
    from tessera.schemas import perfetto as pf

    merged = merge_session(result["session"])
    copies = [{d.name: d.value for d in p.gpu_render_stage_event.extra_data}
              for p in pf.read_packets(merged.output) if p.HasField("gpu_render_stage_event")
              and p.gpu_render_stage_event.name.startswith("Tensor copy")]
    assert [(c["Src tensor"], c["Dst tensor"]) for c in copies] == [("source weights", "destination weights")]
