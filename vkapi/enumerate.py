"""The two-call enumeration idiom (Vulkan spec 3.6.1 "Opaque ... Queries")."""
from __future__ import annotations

from .vkconst import vk


def fill_extensions(ffi, extensions: dict[str, int], pCount, pProperties) -> int:
    """Write `extensions` (name -> spec version) per the two-call idiom."""
    items = sorted(extensions.items())
    if pProperties == ffi.NULL:
        pCount[0] = len(items)
        return vk.VK_SUCCESS
    n = min(pCount[0], len(items))
    for i in range(n):
        name, version = items[i]
        ffi.memmove(pProperties[i].extensionName, name.encode() + b"\0", len(name) + 1)
        pProperties[i].specVersion = version
    pCount[0] = n
    return vk.VK_INCOMPLETE if n < len(items) else vk.VK_SUCCESS


def query_extensions(ffi, call, *args) -> dict[str, int]:
    """name -> spec version from an Enumerate*ExtensionProperties function."""
    count = ffi.new("uint32_t *")
    result = call(*args, count, ffi.NULL)
    if result != vk.VK_SUCCESS:
        return {}
    props = ffi.new("VkExtensionProperties[]", count[0])
    call(*args, count, props)
    return {ffi.string(props[i].extensionName).decode(): props[i].specVersion for i in range(count[0])}
