"""The rules that clamp a real device's Vulkan profile to what the backend can honour.

Role: pure functions (no Vulkan, no cffi) deciding, for every capability a profile names, what the
emulated device reports and why it differs from the profile. The driver applies them to each
answer the backend gives (icd/device_profile.py); `differences` applies them to a whole backend
(its own profile, e.g. `vulkaninfo --json=0 -o`) to list every difference with its reason, which
`tessera doctor --gpu NAME`, docs/backends.md and the tests show. One set of rules serves both.

The rules (a member's vk.xml `limittype`, vk.LIMIT_TYPES, says which way a limit is better):
- identity members (IDENTITY) stay Tessera's or the backend's: the emulated driver is not Arm's;
- EXECUTED members report the backend's value: the shaders really run with it;
- max, bits: the lower of the two; min (alignments, granularities): the higher; bitmask: the common
  bits (booleans: both true); range: the narrower; struct: member by member; arrays: per element;
- exact, noauto and members without a limittype: the profile's when the backend agrees, else the
  backend's (it is what executes);
- features: true only where both are; extensions: the profile's the backend has (also under the name
  it was promoted to, or as the core version it became), plus those Tessera itself provides
  (identity.EMULATED_DEVICE_EXTENSIONS); format features: the common bits; queue
  families: common flags, the lower queue count (no second queue is emulated) and timestamp bits.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from tessera.vkapi.vkconst import vk

from .vulkan_profile import Flags, QueueFamily, VulkanProfile

# Members the emulated driver owns or takes from the backend whatever a profile says (identity.py
# writes vendor, device, name, type, driver version, driver id/name/info; UUIDs and LUIDs identify
# the backend device that executes, so external memory and pipeline caches keep working).
IDENTITY = frozenset({
    "vendorID", "deviceID", "deviceName", "deviceType", "driverVersion", "driverID", "driverName",
    "driverInfo", "pipelineCacheUUID", "deviceUUID", "driverUUID", "deviceLUID", "deviceNodeMask",
    "deviceLUIDValid", "conformanceVersion", "shaderBinaryUUID", "shaderBinaryVersion",
    "optimalTilingLayoutUUID", "identicalMemoryTypeRequirements",
})
IDENTITY_REASON = "identity: the backend device that executes"
# Of IDENTITY, those identity.py writes (the Mali identity): listed whatever the profile says.
TESSERA_IDENTITY = frozenset({"vendorID", "deviceID", "deviceName", "deviceType", "driverVersion", "driverID",
                              "driverName", "driverInfo"})
TESSERA_IDENTITY_REASON = "identity: Tessera's emulated Mali (icd/identity.py, icd/profiles.py)"
# vk.xml's limittype overridden: (member -> limittype used, why).
KINDS = {"apiVersion": "max"}   # noauto in vk.xml; a device of the lower version is what both can be
# Members another part of the driver changes after the clamp: (what it reports, why).
ADJUSTED = {
    "maxPushDescriptors": (lambda v: v - 1 if v > 1 else v,
                           "one push descriptor is left for the tensor metadata binding (icd/tensors/push.py)"),
}
# limittype max, but the backend's value is the one shaders run with: a smaller "limit" would lie.
EXECUTED = frozenset({"subgroupSize", "minSubgroupSize", "maxSubgroupSize"})
EXECUTED_REASON = "the backend executes with this value"
LOWER = "the backend's limit is lower"
HIGHER = "the backend's minimum is higher"
BACKEND_LACKS = "the backend lacks it"
EXACT = "the backend's value: it is what executes"


@dataclass(frozen=True)
class Difference:
    path: str        # e.g. properties.VkPhysicalDeviceProperties.limits.maxBoundDescriptorSets
    profile: Any
    reported: Any
    reason: str


def plain(v: Any) -> Any:
    """A profile or backend value as a plain comparable value: Flags as their mask, booleans as
    booleans, mappings as dicts, sequences as tuples."""
    if isinstance(v, Flags):
        return v.mask
    if isinstance(v, Mapping):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return tuple(plain(x) for x in v)
    return v


def _limit(kind: str, p: Any, b: Any) -> tuple[Any, str | None]:
    if isinstance(p, bool) or isinstance(b, bool):
        p, b = bool(p), bool(b)
        if kind in ("max", "bits", "bitmask"):
            return (p and b), (BACKEND_LACKS if p and not b else None)
        if kind == "min":
            return (p or b), (HIGHER if b and not p else None)
    elif kind == "bitmask" and isinstance(p, int) and isinstance(b, int):
        r = p & b
        return r, (BACKEND_LACKS if r != p else None)
    elif kind in ("max", "bits") and isinstance(p, (int, float)) and isinstance(b, (int, float)):
        return (p, None) if p <= b else (b, LOWER)
    elif kind == "min" and isinstance(p, (int, float)) and isinstance(b, (int, float)):
        return (p, None) if p >= b else (b, HIGHER)
    elif kind == "range" and isinstance(p, tuple) and isinstance(b, tuple) and len(p) == len(b) == 2:
        r = (max(p[0], b[0]), min(p[1], b[1]))
        return r, (LOWER if r != p else None)
    if p == b:
        return p, None
    return b, EXACT


def clamp(struct: str, member: str, profile_value: Any, backend_value: Any) -> tuple[Any, str | None]:
    """(reported value, reason it differs from the profile's or None) of one property member."""
    p, b = plain(profile_value), plain(backend_value)
    if member in IDENTITY:
        return b, (IDENTITY_REASON if p != b else None)
    if member in EXECUTED:
        return b, (EXECUTED_REASON if p != b else None)
    kind = KINDS.get(member) or vk.LIMIT_TYPES.get(struct, {}).get(member) or "exact"
    if kind.startswith("struct:") and isinstance(p, dict) and isinstance(b, dict):
        inner = kind.removeprefix("struct:")
        out, why = dict(b), None
        for k, v in p.items():
            if k in b:
                out[k], w = clamp(inner, k, v, b[k])
                why = why or w
        return out, why
    kind = kind.split(",")[0]
    if isinstance(p, tuple) and isinstance(b, tuple) and kind != "range":
        if len(p) != len(b):
            return b, EXACT
        pairs = [_limit(kind, x, y) for x, y in zip(p, b)]
        return tuple(r for r, _ in pairs), next((w for _, w in pairs if w), None)
    return _limit(kind, p, b)


def feature(profile_value: bool | None, backend_value: Any) -> bool:
    """A feature is on only where the profile and the backend both have it."""
    return bool(profile_value) and bool(backend_value)


def provider(name: str, backend: Mapping[str, int], api: int) -> str | None:
    """The backend's name for extension `name`: itself; else the extension it was promoted to or
    the one promoted to it (the same commands, structs and enums under other names, vk.xml
    `promotedto`: VK_EXT_global_priority and VK_KHR_global_priority); "" when `name` was promoted
    to a core version the backend has (`api`); None when the backend has none of these."""
    if name in backend:
        return name
    promoted = vk.EXTENSION_PROMOTED.get(name)
    if promoted in backend:
        return promoted
    if promoted and promoted.startswith("VK_VERSION_"):
        major, minor = (int(x) for x in promoted.removeprefix("VK_VERSION_").split("_"))
        if (major << 22) | (minor << 12) <= api:
            return ""
    return next((e for e in backend if vk.EXTENSION_PROMOTED.get(e) == name), None)


def extensions(profile: Mapping[str, int], backend: Mapping[str, int],
               emulated: Mapping[str, int], api: int = 0) -> dict[str, int]:
    """The device extensions reported: the profile's the backend has (the lower spec version) or
    provides under a promoted name (`provider`; the profile's spec version), plus Tessera's own."""
    out = {}
    for n, v in profile.items():
        p = provider(n, backend, api)
        if p is not None:
            out[n] = min(v, backend[n]) if p == n else v
    out.update(emulated)
    return out


def queue_family(p: QueueFamily, backend_flags: int, backend_count: int, backend_bits: int,
                 backend_granularity: tuple[int, int, int]) -> tuple[int, int, int, tuple[int, int, int]]:
    """(flags, queue count, timestamp bits, granularity) reported for a profile's family."""
    return (p.flags & backend_flags, min(p.count, backend_count), min(p.timestamp_valid_bits, backend_bits),
            tuple(max(x, y) for x, y in zip(p.min_image_transfer_granularity, backend_granularity)))


def _walk(prefix: str, struct: str, p: Mapping, b: Mapping, out: list[Difference]) -> None:
    for member, pv in p.items():
        if member in TESSERA_IDENTITY:
            out.append(Difference(f"{prefix}.{member}", plain(pv), None, TESSERA_IDENTITY_REASON))
            continue
        if member not in b:
            out.append(Difference(f"{prefix}.{member}", plain(pv), None, "not reported: the backend lacks it"))
            continue
        reported, why = clamp(struct, member, pv, b[member])
        if member in ADJUSTED:
            adjust, reason = ADJUSTED[member]
            if adjust(reported) != reported:
                reported, why = adjust(reported), reason
        if why is None:
            continue
        kind = vk.LIMIT_TYPES.get(struct, {}).get(member, "")
        if kind.startswith("struct:") and isinstance(reported, dict) and member not in IDENTITY:
            _walk(f"{prefix}.{member}", kind.removeprefix("struct:"), pv, b[member], out)
        else:
            out.append(Difference(f"{prefix}.{member}", plain(pv), reported, why))


def differences(profile: VulkanProfile, backend: VulkanProfile, emulated: Mapping[str, int],
                withheld: Mapping[str, str] = {}, layer: Mapping[str, int] = {}) -> list[Difference]:
    """Every capability where the emulated device reports other than `profile`, with its reason,
    given the backend's own capabilities (`backend`, e.g. read from `vulkaninfo --json=0 -o`), the
    extensions Tessera provides itself (`emulated`), the backend's extensions the driver does not pass
    on (`withheld`: name -> why, vkapi/commands.py UNTRACKED_WORKLOAD_EXTENSIONS) and those the Tessera
    layer adds above the driver (`layer`)."""
    out: list[Difference] = []
    api = min(profile.api_version, backend.api_version)
    if api != profile.api_version:
        out.append(Difference("api-version", profile.api_version, api, LOWER))
    available = {n: v for n, v in backend.extensions.items() if n not in withheld}
    reported = {**extensions(profile.extensions, available, emulated, api), **layer}
    for name in sorted(profile.extensions.keys() | reported.keys()):
        p, r = profile.extensions.get(name), reported.get(name)
        if p == r:
            continue
        why = ("provided by Tessera's layer" if name in layer and p is None
               else "provided by Tessera (emulated)" if p is None
               else f"not passed on: {withheld[name]}" if r is None and name in withheld
               else BACKEND_LACKS if r is None else "the backend's spec version is lower")
        out.append(Difference(f"extensions.{name}", p, r, why))
    for kind, table in (("features", profile.features), ("properties", profile.properties)):
        for struct in sorted(table):
            exts = struct_extensions(struct)
            if exts and not any(e in reported for e in exts) and not _core(struct, api):
                out.append(Difference(f"{kind}.{struct}", "(present)", None,
                                      f"not reported: {' / '.join(exts)} is not listed"))
    provided = {**emulated, **layer}
    for struct, members in sorted(profile.features.items()):
        if any(e in provided for e in struct_extensions(struct)) or _unlisted(struct, reported, api):
            continue
        b = backend.features.get(struct, {})
        for member, pv in members.items():
            bv = b[member] if member in b else backend.feature(struct, member)
            if bv is None and _exported_elsewhere(struct, available):
                continue   # the backend's export does not show it: unknown, not lacking
            if pv and not feature(pv, bv):
                out.append(Difference(f"features.{struct}.{member}", True, False, BACKEND_LACKS))
    for struct, members in sorted(profile.properties.items()):
        if any(e in provided for e in struct_extensions(struct)) or _unlisted(struct, reported, api):
            continue
        b = backend.properties.get(struct)
        if b is None:
            if not _exported_elsewhere(struct, available):
                out.append(Difference(f"properties.{struct}", "(present)", None, "not reported: the backend lacks it"))
            continue
        _walk(f"properties.{struct}", struct, members, b, out)
    for fmt, structs in sorted(profile.formats.items()):
        for struct, members in structs.items():
            bs = backend.formats.get(fmt, {}).get(struct, {})
            for member, pv in members.items():
                p, b = plain(pv), plain(bs.get(member, 0))
                if isinstance(p, int) and p & ~b:
                    out.append(Difference(f"formats.{fmt}.{struct}.{member}", p, p & b,
                                          f"{BACKEND_LACKS}: {', '.join(flag_names(p & ~b, pv))}"))
    for i, fam in enumerate(profile.queue_families):
        where = f"queueFamiliesProperties[{i}]"
        if i >= len(backend.queue_families):
            out.append(Difference(where, "(present)", None, "the backend has fewer queue families"))
            continue
        bf = backend.queue_families[i]
        flags, count, bits, gran = queue_family(fam, bf.flags, bf.count, bf.timestamp_valid_bits,
                                                bf.min_image_transfer_granularity)
        if flags != fam.flags:
            out.append(Difference(f"{where}.queueFlags", fam.flags, flags, BACKEND_LACKS))
        if count != fam.count:
            out.append(Difference(f"{where}.queueCount", fam.count, count,
                                  "the backend has fewer queues; no second queue is emulated"))
        if bits != fam.timestamp_valid_bits:
            out.append(Difference(f"{where}.timestampValidBits", fam.timestamp_valid_bits, bits, LOWER))
        if gran != fam.min_image_transfer_granularity:
            out.append(Difference(f"{where}.minImageTransferGranularity", fam.min_image_transfer_granularity,
                                  gran, HIGHER))
    return out


def flag_names(mask: int, source: Any) -> list[str]:
    """Names of the bits of `mask`, from the profile's own list where it has them."""
    if isinstance(source, Flags):
        return [n for n, v in zip(source.names, source.values) if v & mask] or [hex(mask)]
    return [hex(mask)]


_STRUCTS: dict[str, tuple[Any, tuple[str, ...]]] = {}


def _struct(struct: str) -> tuple[Any, tuple[str, ...]]:
    """(core version or None, extensions) of a registry struct."""
    if not _STRUCTS:
        _STRUCTS.update({name: (version, tuple(exts)) for name, version, exts in vk.STRUCTS.values()})
    return _STRUCTS.get(struct, (None, ()))


def struct_extensions(struct: str) -> tuple[str, ...]:
    """The extensions that define a registry struct."""
    return _struct(struct)[1]


def struct_version(struct: str):
    """The core version that has a registry struct, or None."""
    return _struct(struct)[0]


def _exported_elsewhere(struct: str, available: Mapping[str, int]) -> bool:
    """Whether the backend has the struct's extension or core version though its export lacks the
    struct (vulkaninfo prints the promoted core struct, or none for structs it does not know)."""
    exts = struct_extensions(struct)
    return not exts or struct_version(struct) is not None or any(e in available for e in exts)


def _core(struct: str, api: int) -> bool:
    """Whether a device of API version `api` (packed) has the struct in core: a Vulkan 1.1 device
    (the Mali-G77's export) has no Vulkan 1.3 struct, whatever its backend has."""
    version = struct_version(struct)
    return version is not None and tuple(version) <= (api >> 22 & 0x7F, api >> 12 & 0x3FF)


def _unlisted(struct: str, reported: Mapping[str, int], api: int) -> bool:
    """An extension's struct whose extension the device does not list, and not in the core of its
    API version (an application cannot ask)."""
    exts = struct_extensions(struct)
    return bool(exts) and not _core(struct, api) and not any(e in reported for e in exts)
