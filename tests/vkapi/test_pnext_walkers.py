"""Every sType of the registry through every pNext walker of both shims (issue #23, deliverable 2).

Public programs chained structs the hooks look for (VkBufferUsageFlags2CreateInfo in vkCreateBuffer,
VkRenderPassMultiviewCreateInfo in vkCreateRenderPass, VkFrameBoundaryTensorsARM in vkQueueSubmit)
that the shims never declared: `ffi.error: undefined type name`. Here, with the shims' own compiled
ffi (each built library loaded as the Python module it also is; no Vulkan driver is called):

- every type a hook module names in a call (ffi.new("VkX *"), structs.find(..., "VkX *"), ...) is declared in
  the shim that loads the module (icd/ -> driver, layer/ -> layer, vkapi/ -> both);
- one chain holding one struct of every sType of vk.xml goes through the shared walkers (chain, find,
  copy, rebuild_chain) and the module-level walkers of each shim, without an exception;
- a struct unknown to the registry is left out of a rebuilt chain instead of failing the call.
"""
from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from tessera.vkapi import paths, structs
from tessera.vkapi.vkconst import vk

REPO = Path(__file__).resolve().parents[2]
SHIMS = {"icd": ("_tessera_mali_icd_shim", "libtessera_mali_icd.so"),
         "layer": ("_tessera_layer_shim", "libVkLayer_tessera_timeline.so")}
# Folders whose modules each shim loads (vkapi's hook modules serve both).
FOLDERS = {"icd": ("icd", "vkapi"), "layer": ("layer", "vkapi")}
# Calls whose string arguments are C types: cffi's (ffi.new, ffi.cast, ...) and the walkers' (structs.find, ...).
_TYPE_TAKERS = frozenset({"new", "cast", "sizeof", "typeof", "offsetof", "alignof", "find", "copy", "with_extensions"})
_TYPE_LITERAL = re.compile(r"^\s*(?:const\s+)?((?:Vk|PFN_vk|Std)\w+)\s*(?:\*+|\[\d*\])?\s*$")


def _load_shim(module: str, library: str):
    """The built shim as a Python module: its compiled ffi, without starting its embedded init code."""
    path = str(paths.BUILD_DIR / library)
    loader = importlib.machinery.ExtensionFileLoader(module, path)
    spec = importlib.util.spec_from_file_location(module, path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod.ffi


@pytest.fixture(scope="module", params=sorted(SHIMS))
def shim(request, shims):
    return request.param, _load_shim(*SHIMS[request.param])


def _type_literals(folder: str) -> dict[str, list[str]]:
    """Type name -> where a string literal of the folder's modules names it."""
    out: dict[str, list[str]] = {}
    for path in sorted((REPO / folder).glob("*.py")):
        for call in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and call.func.attr in _TYPE_TAKERS):
                continue
            for arg in call.args:
                text = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else ""
                m = _TYPE_LITERAL.match(text)
                if m:
                    out.setdefault(m.group(1), []).append(f"{folder}/{path.name}:{arg.lineno}")
    return out


def test_every_type_a_hook_module_names_is_declared(shim):
    name, ffi = shim
    undeclared = {}
    for folder in FOLDERS[name]:
        for type_name, where in _type_literals(folder).items():
            try:
                ffi.typeof(type_name)
            except Exception:   # ffi.error: undefined type name
                undeclared[type_name] = where
    assert not undeclared, f"{name} shim lacks types its modules name: {undeclared}"


def _every_stype_chain(ffi, keep: list):
    """One struct of every sType of vk.xml (each allocated as its own type, sType set), linked."""
    head = ffi.NULL
    for stype, (struct, _, _) in sorted(vk.STRUCTS.items(), reverse=True):
        node = ffi.new(f"{struct} *")
        base = ffi.cast("VkBaseOutStructure *", node)
        base.sType, base.pNext = stype, ffi.cast("VkBaseOutStructure *", head)
        keep.append(node)
        head = node
    return head


def test_every_registry_stype_goes_through_the_shared_walkers(shim):
    name, ffi = shim
    keep: list = []
    head = _every_stype_chain(ffi, keep)
    nodes = list(structs.chain(ffi, head))
    assert [n.sType for n in nodes] == sorted(vk.STRUCTS)
    for stype, (struct, _, _) in vk.STRUCTS.items():
        found = structs.find(ffi, head, stype, f"{struct} *")
        assert found is not None and found.sType == stype
        assert ffi.typeof(found) is ffi.typeof(f"{struct} *")
        assert structs.struct_name(stype) == struct
    rebuilt = list(structs.chain(ffi, structs.rebuild_chain(ffi, nodes, keep)))
    assert [n.sType for n in rebuilt] == [n.sType for n in nodes]
    assert all(ffi.cast("void *", a) != ffi.cast("void *", b) for a, b in zip(rebuilt, nodes))   # copies


def _icd_walkers(ffi, head, keep):
    from tessera.icd import device, identity, indirect_sizes, profiles
    from tessera.icd.instrumentation import metrics as instrumentation_metrics
    from tessera.icd.regions import props as region_props
    from tessera.icd.tensors import resources as tensors

    phys = SimpleNamespace(api_version=vk.VK_API_VERSION_1_0, extensions={})
    device.strip_chain(ffi, head, phys, keep)                        # vkCreateDevice
    features2 = ffi.new("VkPhysicalDeviceFeatures2 *", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                                        "pNext": head})
    identity.apply_features2(ffi, features2)                          # vkGetPhysicalDeviceFeatures2
    props2 = ffi.new("VkPhysicalDeviceProperties2 *", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                                       "pNext": head})
    identity.apply_properties2(ffi, props2, profiles.PROFILES[profiles.DEFAULT_PROFILE])
    instrumentation_metrics.wants_instrumentation(ffi, head)
    region_props.wants_regions(ffi, head)
    tensors.wants_tensors(ffi, head)
    indirect_sizes._usage2(ffi, head)                                 # vkCreateBuffer


def _layer_walkers(ffi, head, keep):
    from tessera.layer import queues

    queues.frame_boundaries(ffi, head)                                # vkQueueSubmit
    submit = ffi.new("VkSubmitInfo[1]", [{"sType": vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, "pNext": head}])
    dev = SimpleNamespace(emulated_extensions=frozenset({"VK_EXT_frame_boundary"}))
    out = queues._without_frame_boundary(ffi, dev, "VkSubmitInfo", 1, submit, keep)
    left = [n.sType for n in structs.chain(ffi, out[0].pNext)]
    assert left == [s for s in sorted(vk.STRUCTS) if s != vk.VK_STRUCTURE_TYPE_FRAME_BOUNDARY_EXT]


def test_every_registry_stype_goes_through_each_shims_walkers(shim):
    name, ffi = shim
    keep: list = []
    head = _every_stype_chain(ffi, keep)
    {"icd": _icd_walkers, "layer": _layer_walkers}[name](ffi, head, keep)


def test_a_struct_unknown_to_the_registry_is_left_out_of_a_rebuilt_chain(shim):
    _, ffi = shim
    keep: list = []
    unknown = ffi.new("VkBaseOutStructure *", {"sType": 0x7FFF_0000})
    known = ffi.new("VkBufferUsageFlags2CreateInfo *",
                    {"sType": vk.VK_STRUCTURE_TYPE_BUFFER_USAGE_FLAGS_2_CREATE_INFO, "usage": 3})
    unknown.pNext = ffi.cast("VkBaseOutStructure *", known)
    head = structs.rebuild_chain(ffi, list(structs.chain(ffi, unknown)), keep)
    assert [n.sType for n in structs.chain(ffi, head)] == [vk.VK_STRUCTURE_TYPE_BUFFER_USAGE_FLAGS_2_CREATE_INFO]
    assert ffi.cast("VkBufferUsageFlags2CreateInfo *", head).usage == 3
