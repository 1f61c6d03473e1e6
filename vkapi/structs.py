"""pNext chains and C strings: walking, finding and rebuilding Vulkan structs.

Rebuilt structs are new cffi allocations owned by a `Keepalive` list that
the caller holds until the call they are passed to returns; the
application's own (const) structs are never modified.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

Keepalive = list


def string(ffi, p) -> str:
    return ffi.string(p).decode("utf-8", "replace") if p != ffi.NULL else ""


def strings(ffi, array, count: int) -> list[str]:
    return [string(ffi, array[i]) for i in range(count)]


def string_array(ffi, names: list[str], keep: Keepalive):
    """A `const char* const*` for `names`; the buffers live as long as `keep`."""
    bufs = [ffi.new("char[]", n.encode()) for n in names]
    arr = ffi.new("const char*[]", bufs) if bufs else ffi.NULL
    keep.extend(bufs)
    keep.append(arr)
    return arr


def extension_names(ffi, create_info) -> list[str]:
    """ppEnabledExtensionNames of a VkInstanceCreateInfo or VkDeviceCreateInfo."""
    return strings(ffi, create_info.ppEnabledExtensionNames, create_info.enabledExtensionCount)


def with_extensions(ffi, ctype: str, create_info, names: list[str], keep: Keepalive):
    """A copy of a VkInstanceCreateInfo / VkDeviceCreateInfo enabling exactly `names`."""
    info = copy(ffi, ctype, create_info, keep)
    info.ppEnabledExtensionNames = string_array(ffi, names, keep)
    info.enabledExtensionCount = len(names)
    return info


def chain(ffi, pnext) -> Iterator[Any]:
    """Every struct of a pNext chain, as VkBaseOutStructure*."""
    p = ffi.cast("VkBaseOutStructure *", pnext)
    while p != ffi.NULL:
        yield p
        p = p.pNext


def find(ffi, pnext, stype: int, ctype: str):
    """The first struct with sType `stype` in a chain, cast to `ctype`, or None."""
    for p in chain(ffi, pnext):
        if p.sType == stype:
            return ffi.cast(ctype, p)
    return None


def copy(ffi, ctype: str, src, keep: Keepalive):
    """A shallow copy of *src (a `ctype` pointer) that the caller may edit."""
    dst = ffi.new(ctype)
    ffi.memmove(dst, src, ffi.sizeof(ctype.rstrip("* ")))
    keep.append(dst)
    return dst


# The loader's own structs (vk_layer.h), which it passes down to layers and drivers.
LOADER_STRUCTS = {47: "VkLayerInstanceCreateInfo", 48: "VkLayerDeviceCreateInfo"}


def struct_name(stype: int) -> str | None:
    """Registry (or loader) name of a struct type; None when unknown."""
    from .vkconst import vk

    entry = vk.STRUCTS.get(stype)
    return entry[0] if entry else LOADER_STRUCTS.get(stype)


def rebuild_chain(ffi, nodes: list, keep: Keepalive):
    """A new pNext chain of shallow copies of `nodes`, linked in order.

    Every struct of vk.xml is declared in both shims (vkapi/cdecl.py ALL_STRUCTS), so any registry
    sType can be copied. A struct newer than our registry (or a private one of another layer) cannot
    be sized, so it cannot be copied: it is left out of the new chain (the backend, built from an
    older or equal registry, would skip it anyway) rather than failing the call."""
    head = ffi.NULL
    for node in reversed(nodes):
        name = struct_name(node.sType)
        if name is None:
            continue
        dup = copy(ffi, f"{name} *", node, keep)
        ffi.cast("VkBaseOutStructure *", dup).pNext = ffi.cast("VkBaseOutStructure *", head)
        head = dup
    return head
