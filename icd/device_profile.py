"""The emulated device reports a real device's Vulkan profile, clamped to its backend.

Role: writes what the emulated Mali reports into the structs an application passed, after the
backend has filled them: features, properties and limits, format and image-format support, queue
families; and checks vkCreateDevice against what was reported. The rules themselves (which value
wins, and why) are icd/device_clamp.py's; the profile is icd/vulkan_profile.py's view of the
device's JSON file. The instance hooks (icd/instance.py) and vkCreateDevice (icd/device.py) call
this module; identity.py then writes the Mali identity over it.

One `DeviceProfile` per profile file and process (`of`), made when the first instance is created
(icd/instance.py: a malformed file refuses it), never when the driver loads; each PhysicalDevice
keeps it (`device_profile`) for the driver's own limits (counter_memory.py). Without a profile file
(a GPU entry that has none) the driver reports the backend's capabilities, as before.
"""
from __future__ import annotations

import functools
from typing import Any

from tessera.vkapi import structs
from tessera.vkapi.vkconst import vk

from . import device_clamp
from .vulkan_profile import VulkanProfile, load

FEATURES = "VkPhysicalDeviceFeatures"
PROPERTIES = "VkPhysicalDeviceProperties"
FORMAT_PROPERTIES = "VkFormatProperties"
FORMAT_PROPERTIES_3 = "VkFormatProperties3"
# The VkFormatFeatureFlags2 bits VkFormatFeatureFlags can express (bit 31 and above exist only in
# VkFormatProperties3, e.g. STORAGE_READ_WITHOUT_FORMAT): a profile without VkFormatProperties3 says
# nothing of the others, so they stay the backend's.
_FLAGS_1_BITS = 0x7FFFFFFF
# The format features an image usage needs (Vulkan spec, "Image Creation Limits" under
# vkGetPhysicalDeviceImageFormatProperties: a usage the format's features for the tiling do not
# support is VK_ERROR_FORMAT_NOT_SUPPORTED).
USAGE_FEATURES = (
    (vk.VK_IMAGE_USAGE_SAMPLED_BIT, vk.VK_FORMAT_FEATURE_SAMPLED_IMAGE_BIT),
    (vk.VK_IMAGE_USAGE_STORAGE_BIT, vk.VK_FORMAT_FEATURE_STORAGE_IMAGE_BIT),
    (vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT, vk.VK_FORMAT_FEATURE_COLOR_ATTACHMENT_BIT),
    (vk.VK_IMAGE_USAGE_DEPTH_STENCIL_ATTACHMENT_BIT, vk.VK_FORMAT_FEATURE_DEPTH_STENCIL_ATTACHMENT_BIT),
    (vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT, vk.VK_FORMAT_FEATURE_TRANSFER_SRC_BIT),
    (vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT, vk.VK_FORMAT_FEATURE_TRANSFER_DST_BIT),
)


@functools.cache
def _fields(ffi, ctype: str) -> tuple[tuple[str, str], ...]:
    """(member, kind) of a struct type, without sType and pNext; kind is cffi's
    (primitive, array, struct)."""
    return tuple((name, f.type.kind) for name, f in ffi.typeof(ctype).fields if name not in ("sType", "pNext"))


def read(ffi, v) -> Any:
    """A struct member as a plain Python value (arrays as tuples, char arrays as text, structs as dicts)."""
    if not isinstance(v, ffi.CData):
        return v
    t = ffi.typeof(v)
    if t.kind == "array":
        if t.item.cname == "char":
            return ffi.string(v).decode(errors="replace")
        return tuple(read(ffi, x) for x in v)
    if t.kind == "struct":
        return {name: read(ffi, getattr(v, name)) for name, _ in t.fields}
    return v


def write(ffi, s, member: str, value: Any) -> None:
    """Set a member of struct `s` from a plain value (the inverse of `read`, strings excepted)."""
    current = getattr(s, member)
    if isinstance(current, ffi.CData):
        t = ffi.typeof(current)
        if t.kind == "array" and isinstance(value, tuple):
            for i, x in enumerate(value[: t.length]):
                if isinstance(x, dict):
                    for k, y in x.items():
                        write(ffi, current[i], k, y)
                else:
                    current[i] = x
        elif t.kind == "struct" and isinstance(value, dict):
            for k, y in value.items():
                write(ffi, current, k, y)
        return
    setattr(s, member, int(value) if isinstance(value, bool) else value)


def _emulated_struct(name: str, emulated) -> bool:
    return any(e in emulated for e in device_clamp.struct_extensions(name))


def _is_feature_struct(name: str | None) -> bool:
    return bool(name) and name.startswith("VkPhysicalDevice") and "Features" in name


class DeviceProfile:
    """A profile applied to the backend's answers; `emulated` are the extensions Tessera provides
    itself (their structs are identity.py's and the features', never clamped)."""

    def __init__(self, profile: VulkanProfile, emulated) -> None:
        self.profile = profile
        self.emulated = emulated
        self.formats = {getattr(vk, name): entry for name, entry in profile.formats.items()}
        props: dict[str, Any] = {}
        for members in profile.properties.values():
            for k, v in members.items():
                props.setdefault(k, v)
        self._property_index = props

    # ---- features --------------------------------------------------------------------------
    def _features(self, ffi, s, name: str) -> None:
        if _emulated_struct(name, self.emulated):
            return
        for member, kind in _fields(ffi, name):
            if kind == "primitive":
                setattr(s, member, int(device_clamp.feature(self.profile.feature(name, member), getattr(s, member))))

    def apply_features(self, ffi, f) -> None:
        """VkPhysicalDeviceFeatures, as the backend filled it."""
        self._features(ffi, f, FEATURES)

    def apply_features2(self, ffi, features2) -> None:
        self._features(ffi, features2.features, FEATURES)
        for p in structs.chain(ffi, features2.pNext):
            name = structs.struct_name(p.sType)
            if _is_feature_struct(name):
                self._features(ffi, ffi.cast(f"{name} *", p), name)

    # ---- properties ------------------------------------------------------------------------
    def _properties(self, ffi, s, name: str) -> None:
        if _emulated_struct(name, self.emulated):   # identity.py and the features own these
            return
        own = self.profile.properties.get(name)
        for member, _ in _fields(ffi, name):
            pv = own.get(member) if own is not None else None
            if pv is None:
                pv = self._property_index.get(member)
            if pv is None:
                continue
            backend = read(ffi, getattr(s, member))
            reported, _ = device_clamp.clamp(name, member, pv, backend)
            if reported != backend:
                write(ffi, s, member, reported)

    def apply_properties(self, ffi, props) -> None:
        """VkPhysicalDeviceProperties (limits, sparse properties), before identity.py writes the
        Mali identity. apiVersion: the lower of the profile's and the backend's."""
        self._properties(ffi, props, PROPERTIES)
        props.apiVersion = min(props.apiVersion, self.profile.api_version)

    def apply_properties2(self, ffi, props2) -> None:
        self.apply_properties(ffi, props2.properties)
        for p in structs.chain(ffi, props2.pNext):
            name = structs.struct_name(p.sType)
            if name and name.startswith("VkPhysicalDevice") and "Properties" in name:
                self._properties(ffi, ffi.cast(f"{name} *", p), name)

    # ---- extensions ------------------------------------------------------------------------
    def extensions(self, backend: dict[str, int], api: int) -> dict[str, int]:
        """The device extensions reported over the backend's (`api`: its apiVersion)."""
        return device_clamp.extensions(self.profile.extensions, backend, self.emulated,
                                       min(api, self.profile.api_version))

    def backend_names(self, names: list[str], backend: dict[str, int], api: int) -> list[str]:
        """The extensions to enable on the backend for the application's `names`: each under the
        backend's name for it (device_clamp.provider), none for one that is core there; names the
        backend does not provide stay (Tessera's own, or refused by the caller)."""
        out = []
        for n in names:
            p = device_clamp.provider(n, backend, min(api, self.profile.api_version))
            if p is None:
                out.append(n)
            elif p and p not in out:
                out.append(p)
        return out

    # ---- formats ---------------------------------------------------------------------------
    def format_features(self, fmt: int) -> dict[str, int]:
        """The profile's VkFormatProperties members of a format (all 0 when it has none)."""
        entry = self.formats.get(fmt, {}).get(FORMAT_PROPERTIES, {})
        return {m: device_clamp.plain(entry.get(m, 0)) for m in
                ("linearTilingFeatures", "optimalTilingFeatures", "bufferFeatures")}

    def apply_format(self, ffi, fmt: int, props) -> None:
        for member, mask in self.format_features(fmt).items():
            setattr(props, member, getattr(props, member) & mask)

    def apply_format2(self, ffi, fmt: int, props2) -> None:
        self.apply_format(ffi, fmt, props2.formatProperties)
        p3 = structs.find(ffi, props2.pNext, vk.VK_STRUCTURE_TYPE_FORMAT_PROPERTIES_3, "VkFormatProperties3 *")
        if p3 is None:
            return
        own = self.formats.get(fmt, {}).get(FORMAT_PROPERTIES_3)
        low = self.format_features(fmt)
        for member in low:
            if own is not None:
                mask = device_clamp.plain(own.get(member, 0))
            elif fmt in self.formats:   # a profile without VkFormatProperties3: its bits, the backend's others
                mask = low[member] | ~_FLAGS_1_BITS & ((1 << 64) - 1)
            else:
                mask = 0
            setattr(p3, member, getattr(p3, member) & mask)

    def image_format_supported(self, fmt: int, tiling: int, usage: int) -> bool:
        """Whether the profile's format features allow an image of this tiling and usage."""
        features = self.format_features(fmt)
        have = features["linearTilingFeatures" if tiling == vk.VK_IMAGE_TILING_LINEAR else "optimalTilingFeatures"]
        if tiling not in (vk.VK_IMAGE_TILING_LINEAR, vk.VK_IMAGE_TILING_OPTIMAL):
            return fmt in self.formats   # DRM modifiers: the backend decides
        if not have:
            return False
        for bit, needed in USAGE_FEATURES:
            if usage & bit and not have & needed:
                return False
        if usage & vk.VK_IMAGE_USAGE_INPUT_ATTACHMENT_BIT and not have & (
                vk.VK_FORMAT_FEATURE_COLOR_ATTACHMENT_BIT | vk.VK_FORMAT_FEATURE_DEPTH_STENCIL_ATTACHMENT_BIT):
            return False
        return True

    # ---- queue families --------------------------------------------------------------------
    def family_count(self, backend_count: int) -> int:
        families = self.profile.queue_families
        return min(backend_count, len(families)) if families else backend_count

    def apply_queue_family(self, index: int, q) -> None:
        """A VkQueueFamilyProperties the backend filled, for the profile's family `index`."""
        families = self.profile.queue_families
        if index >= len(families):
            return
        g = q.minImageTransferGranularity
        flags, count, bits, gran = device_clamp.queue_family(
            families[index], q.queueFlags, q.queueCount, q.timestampValidBits, (g.width, g.height, g.depth))
        q.queueFlags, q.queueCount, q.timestampValidBits = flags, count, bits
        g.width, g.height, g.depth = gran

    # ---- vkCreateDevice --------------------------------------------------------------------
    def missing_features(self, ffi, phys, create_info, enabled: frozenset[str]) -> list[str]:
        """The features `create_info` enables that the emulated device does not report: each as
        "Struct.member". The report is the backend's answer clamped here, as the queries give it.
        A struct of an extension the application did not enable (and no core version has) is not
        the device's business: drivers skip structs they do not know, and so does this check."""
        requested: list[tuple[str, Any]] = []
        if create_info.pEnabledFeatures != ffi.NULL:
            requested.append((FEATURES, create_info.pEnabledFeatures))
        for p in structs.chain(ffi, create_info.pNext):
            name = structs.struct_name(p.sType)
            if name == "VkPhysicalDeviceFeatures2":
                requested.append((FEATURES, ffi.addressof(ffi.cast("VkPhysicalDeviceFeatures2 *", p).features)))
            elif (_is_feature_struct(name) and not _emulated_struct(name, self.emulated)
                  and (device_clamp.struct_version(name) is not None
                       or any(e in enabled for e in device_clamp.struct_extensions(name)))):
                requested.append((name, ffi.cast(f"{name} *", p)))
        if not requested:
            return []
        keep = []
        query = ffi.new("VkPhysicalDeviceFeatures2 *", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2})
        answers: dict[str, Any] = {FEATURES: ffi.addressof(query.features)}
        for name, _ in requested:
            if name in answers:
                continue
            stype = next((t for t, e in vk.STRUCTS.items() if e[0] == name), None)
            if stype is None or not _backend_knows(stype, phys):
                answers[name] = None   # the backend has none of these: reported all false
                continue
            s = ffi.new(f"{name} *", {"sType": stype, "pNext": query.pNext})
            keep.append(s)
            query.pNext = s
            answers[name] = s
        phys.next.vkGetPhysicalDeviceFeatures2(phys.handle, query)
        self.apply_features2(ffi, query)
        missing = []
        for name, asked in requested:
            have = answers[name]
            for member, kind in _fields(ffi, name):
                if kind == "primitive" and getattr(asked, member) and (have is None or not getattr(have, member)):
                    missing.append(f"{name}.{member}")
        return missing


def _backend_knows(stype: int, phys) -> bool:
    from .device import backend_knows   # device.py imports this module

    return backend_knows(vk.STRUCTS[stype], phys)


def of(drv) -> DeviceProfile | None:
    """The driver's DeviceProfile (its GPU's Vulkan profile), or None: the backend's capabilities."""
    path = drv.profile.vulkan_profile()
    return None if path is None else _for_file(str(path))


@functools.cache
def _for_file(path: str) -> DeviceProfile:
    """One DeviceProfile per profile file for the process."""
    from .identity import EMULATED_DEVICE_EXTENSIONS

    return DeviceProfile(load(path), EMULATED_DEVICE_EXTENSIONS)
