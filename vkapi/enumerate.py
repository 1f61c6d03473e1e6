"""The two-call enumeration idiom (Vulkan spec 3.6.1 "Opaque ... Queries")."""
from __future__ import annotations

from .vkconst import vk


class ExtensionList:
    """A fixed list of extensions, packed once as VkExtensionProperties: answering the two-call
    idiom is then one copy (the loader asks a driver for its device extensions on every
    vkEnumeratePhysicalDevices and vkEnumeratePhysicalDeviceGroups)."""

    def __init__(self, ffi, extensions: dict[str, int]) -> None:
        items = sorted(extensions.items())
        self.ffi = ffi
        self.names = frozenset(extensions)
        self.count = len(items)
        self.packed = ffi.new("VkExtensionProperties[]",
                              [{"extensionName": name.encode(), "specVersion": version} for name, version in items])
        self.item_size = ffi.sizeof("VkExtensionProperties")

    def fill(self, pCount, pProperties) -> int:
        """Write the list per the two-call idiom."""
        if pProperties == self.ffi.NULL:
            pCount[0] = self.count
            return vk.VK_SUCCESS
        n = min(pCount[0], self.count)
        self.ffi.memmove(pProperties, self.packed, n * self.item_size)
        pCount[0] = n
        return vk.VK_INCOMPLETE if n < self.count else vk.VK_SUCCESS


def fill_extensions(ffi, extensions: dict[str, int], pCount, pProperties) -> int:
    """Write `extensions` (name -> spec version) per the two-call idiom (a list asked for once)."""
    return ExtensionList(ffi, extensions).fill(pCount, pProperties)


def query_extensions(ffi, call, *args) -> dict[str, int]:
    """name -> spec version from an Enumerate*ExtensionProperties function."""
    count = ffi.new("uint32_t *")
    result = call(*args, count, ffi.NULL)
    if result != vk.VK_SUCCESS:
        return {}
    props = ffi.new("VkExtensionProperties[]", count[0])
    call(*args, count, props)
    return {ffi.string(props[i].extensionName).decode(): props[i].specVersion for i in range(count[0])}
