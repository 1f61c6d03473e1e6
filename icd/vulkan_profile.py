"""A Vulkan Profiles JSON file (a real device's capabilities) as a frozen, typed view.

Role: the one reader of the Khronos Vulkan Profiles format
(https://schema.khronos.org/vulkan/profiles-0.8-latest.json), the format gpuinfo.org exports real
devices in and `vulkaninfo --json=0 -o FILE` writes. A file has "profiles" {name: {api-version,
label, capabilities: [capability names]}} and "capabilities" {name: {extensions, features,
properties, formats, queueFamiliesProperties}}; a profile is the merge of its capabilities in order.

The view (`VulkanProfile`) is what the emulated device reports before it is clamped to its backend
(icd/device_profile.py):
- extensions: {name: specVersion};
- features: {struct: {member: bool}};
- properties: {struct: {member: value}}, nested structs (limits, conformanceVersion) as mappings,
  arrays as tuples, enum names as their values, flag-bit lists as `Flags`;
- formats: {"VK_FORMAT_X": {"VkFormatProperties" | "VkFormatProperties3" | ...: {member: value}}};
- queue_families: one `QueueFamily` per entry, in order.
Struct names are canonical (vk.xml aliases such as VkPhysicalDeviceInlineUniformBlockFeaturesEXT are
folded into their canonical struct; a member the canonical entry already has keeps its value).
Enum and flag names are converted with the registry's constants (vk): a name the registry does not
know is an error, never a guess. The format has no memory types or heaps, so the view has none.

Loading is strict and bounded: anything malformed raises ValueError naming the file and the JSON path
(e.g. `gpu.json: capabilities.device.features.VkPhysicalDeviceFeatures.shaderInt64: expected a
boolean, got "yes"`). `load` keeps one view per (path, profile) for the process.
"""
from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from tessera.vkapi.vkconst import vk

MAX_FILE_BYTES = 32 << 20   # the largest gpuinfo export is under 1 MiB
SECTIONS = ("extensions", "features", "properties", "formats", "queueFamiliesProperties")
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


@dataclass(frozen=True)
class Flags:
    """A list of enum or flag-bit names as the format writes them, with their registry values."""
    names: tuple[str, ...]
    values: tuple[int, ...]

    @property
    def mask(self) -> int:
        out = 0
        for v in self.values:
            out |= v
        return out


@dataclass(frozen=True)
class QueueFamily:
    flags: int                       # VkQueueFlags
    count: int
    timestamp_valid_bits: int
    min_image_transfer_granularity: tuple[int, int, int]
    structs: Mapping[str, Mapping[str, Any]]   # every struct of the entry as converted (global priority, ...)


@dataclass(frozen=True)
class VulkanProfile:
    path: str
    name: str
    label: str
    api_version: int                 # VK_MAKE_API_VERSION(0, major, minor, patch)
    extensions: Mapping[str, int]
    features: Mapping[str, Mapping[str, bool]]
    properties: Mapping[str, Mapping[str, Any]]
    formats: Mapping[str, Mapping[str, Mapping[str, Any]]]
    queue_families: tuple[QueueFamily, ...]
    feature_index: Mapping[str, bool] = field(default_factory=dict, repr=False)   # member -> first value

    def feature(self, struct: str, member: str) -> bool | None:
        """A feature's value: from `struct`, else from any struct with a member of that name (the
        core VkPhysicalDeviceVulkan1xFeatures and the extension struct it promoted hold the same
        feature); None when the profile names it nowhere."""
        own = self.features.get(struct)
        if own is not None and member in own:
            return own[member]
        return self.feature_index.get(member)


class _Reader:
    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, where: str, message: str) -> ValueError:
        return ValueError(f"{self.path}: {where}: {message}")

    def expect(self, value, kind, where: str, what: str):
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.fail(where, f"expected {what}, got {json.dumps(value)[:80]}")
        return value

    def constant(self, name: str, where: str) -> int:
        value = getattr(vk, name, None)
        if not isinstance(value, int):
            raise self.fail(where, f"{name!r} is not a Vulkan enum or flag name of this registry")
        return value

    def value(self, v, where: str):
        """A property or format value: numbers and booleans as they are, enum names as values, lists
        of names as Flags, lists of numbers as tuples, objects (nested structs) as mappings."""
        if isinstance(v, (bool, int, float)):
            return v
        if isinstance(v, str):
            return self.constant(v, where) if v.startswith("VK_") else v
        if isinstance(v, list):
            if all(isinstance(x, str) for x in v):
                return Flags(tuple(v), tuple(self.constant(x, f"{where}[{i}]") for i, x in enumerate(v)))
            if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
                return tuple(v)
            if all(isinstance(x, dict) for x in v):
                return tuple(self.struct(x, f"{where}[{i}]") for i, x in enumerate(v))
            raise self.fail(where, "expected a list of names, of numbers or of objects")
        if isinstance(v, dict):
            return self.struct(v, where)
        raise self.fail(where, f"unexpected value {json.dumps(v)[:80]}")

    def struct(self, d: dict, where: str) -> Mapping[str, Any]:
        return MappingProxyType({k: self.value(v, f"{where}.{k}") for k, v in d.items()})

    def structs(self, d, where: str, convert) -> dict[str, dict[str, Any]]:
        """{struct: {member: value}} with alias names folded into canonical ones."""
        self.expect(d, dict, where, "an object of structs")
        out: dict[str, dict[str, Any]] = {}
        aliased: list[tuple[str, dict]] = []
        for name, members in d.items():
            self.expect(members, dict, f"{where}.{name}", "an object of members")
            converted = {m: convert(v, f"{where}.{name}.{m}") for m, v in members.items()}
            canonical = vk.STRUCT_ALIASES.get(name)
            if canonical is None:
                out.setdefault(name, {}).update(converted)
            else:
                aliased.append((canonical, converted))
        for canonical, converted in aliased:
            target = out.setdefault(canonical, {})
            for m, v in converted.items():
                target.setdefault(m, v)
        return out

    def feature(self, v, where: str) -> bool:
        return self.expect(v, bool, where, "a boolean")

    def queue_family(self, entry, where: str) -> QueueFamily:
        self.expect(entry, dict, where, "an object of structs")
        structs = self.struct(entry, where)
        props = structs.get("VkQueueFamilyProperties")
        if props is None:
            raise self.fail(where, "no VkQueueFamilyProperties")
        p = f"{where}.VkQueueFamilyProperties"
        flags = props.get("queueFlags", Flags((), ()))
        if not isinstance(flags, Flags):
            raise self.fail(f"{p}.queueFlags", "expected a list of VkQueueFlagBits names")
        count = self.expect(props.get("queueCount"), int, f"{p}.queueCount", "an integer")
        bits = self.expect(props.get("timestampValidBits", 0), int, f"{p}.timestampValidBits", "an integer")
        g = props.get("minImageTransferGranularity", {"width": 1, "height": 1, "depth": 1})
        if not isinstance(g, Mapping) or any(not isinstance(g.get(k), int) for k in ("width", "height", "depth")):
            raise self.fail(f"{p}.minImageTransferGranularity", "expected {width, height, depth} integers")
        return QueueFamily(flags.mask, count, bits, (g["width"], g["height"], g["depth"]), structs)


def api_version(text: str) -> int:
    m = _VERSION.match(text)
    if m is None:
        raise ValueError(f"api-version {text!r} is not MAJOR.MINOR.PATCH")
    major, minor, patch = (int(x) for x in m.groups())
    return (major << 22) | (minor << 12) | patch


def parse(data: Any, path: str, name: str | None = None) -> VulkanProfile:
    """The view of an already decoded Vulkan Profiles document (`path` names it in errors)."""
    r = _Reader(path)
    if not isinstance(data, dict) or not isinstance(data.get("capabilities"), dict):
        raise ValueError(f'{path}: not a Vulkan Profiles file: no "capabilities" object (export one from '
                         "vulkan.gpuinfo.org or with `vulkaninfo --json=0 -o FILE`)")
    if not isinstance(data.get("profiles"), dict) or not data["profiles"]:
        raise ValueError(f'{path}: not a Vulkan Profiles file: no "profiles" object')
    profiles, capabilities = data["profiles"], data["capabilities"]
    if name is None:
        if len(profiles) != 1:
            raise r.fail("profiles", f"{len(profiles)} profiles ({', '.join(profiles)}): name one")
        name = next(iter(profiles))
    elif name not in profiles:
        raise r.fail("profiles", f"no profile {name!r} (has {', '.join(profiles)})")
    profile = r.expect(profiles[name], dict, f"profiles.{name}", "an object")
    where = f"profiles.{name}.api-version"
    try:
        api = api_version(r.expect(profile.get("api-version"), str, where, "a version string"))
    except ValueError as e:
        raise r.fail(where, str(e).split(": ")[-1]) from None
    label = profile.get("label", name)
    caps = r.expect(profile.get("capabilities"), list, f"profiles.{name}.capabilities", "a list of capability names")

    extensions: dict[str, int] = {}
    features: dict[str, dict[str, bool]] = {}
    properties: dict[str, dict[str, Any]] = {}
    formats: dict[str, dict[str, Any]] = {}
    families: list[QueueFamily] = []
    for i, cap in enumerate(caps):
        if isinstance(cap, list) and cap:    # a list of alternatives: the first one
            cap = cap[0]
        if not isinstance(cap, str) or cap not in capabilities:
            raise r.fail(f"profiles.{name}.capabilities[{i}]", f"{json.dumps(cap)[:80]} is not a capability of the file")
        block = r.expect(capabilities[cap], dict, f"capabilities.{cap}", "an object")
        at = f"capabilities.{cap}"
        for key in block:
            if key not in SECTIONS:
                raise r.fail(f"{at}.{key}", f"not a section of the format ({', '.join(SECTIONS)})")
        for ext, version in r.expect(block.get("extensions", {}), dict, f"{at}.extensions", "an object").items():
            extensions[ext] = r.expect(version, int, f"{at}.extensions.{ext}", "a spec version (integer)")
        for struct, members in r.structs(block.get("features", {}), f"{at}.features", r.feature).items():
            features.setdefault(struct, {}).update(members)
        for struct, members in r.structs(block.get("properties", {}), f"{at}.properties", r.value).items():
            properties.setdefault(struct, {}).update(members)
        for fmt, structs in r.expect(block.get("formats", {}), dict, f"{at}.formats", "an object of formats").items():
            r.constant(fmt, f"{at}.formats.{fmt}")
            formats[fmt] = r.structs(structs, f"{at}.formats.{fmt}", r.value)
        qf = r.expect(block.get("queueFamiliesProperties", []), list, f"{at}.queueFamiliesProperties", "a list")
        if qf:
            families = [r.queue_family(e, f"{at}.queueFamiliesProperties[{j}]") for j, e in enumerate(qf)]

    freeze = MappingProxyType
    index: dict[str, bool] = {}
    for members in features.values():
        for k, v in members.items():
            index.setdefault(k, v)
    return VulkanProfile(
        path, name, label if isinstance(label, str) else name, api, freeze(extensions),
        freeze({s: freeze(m) for s, m in features.items()}),
        freeze({s: freeze(m) for s, m in properties.items()}),
        freeze({f: freeze({s: freeze(m) for s, m in structs.items()}) for f, structs in formats.items()}),
        tuple(families), freeze(index))


@functools.cache
def load(path: str | Path, name: str | None = None) -> VulkanProfile:
    """The view of a Vulkan Profiles JSON file, read once per process."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{p}: {'not a file' if p.exists() else 'no such file'}")
    try:
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ValueError(f"{p}: {size} bytes: larger than a device profile can be ({MAX_FILE_BYTES})")
        data = json.loads(p.read_bytes())
    except OSError as e:
        raise ValueError(f"{p}: cannot read: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}: not JSON: line {e.lineno} column {e.colno}: {e.msg}") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{p}: not JSON: {e}") from None
    return parse(data, str(p), name)
