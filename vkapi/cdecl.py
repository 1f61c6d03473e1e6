"""Generator: cffi declarations for a set of Vulkan commands and their types.

Given the commands a shim intercepts or calls (and a few extra types, such as
the pNext structs a hook walks), emits C declarations of exactly the types
they reach: structs in dependency order, enums and flags as integer typedefs
(their values live in the generated constants module, which keeps the cffi
build fast), handles, function-pointer types, the `PFN_vk*` type of every
command, and the loader-interface structs of `cdecl_manual`.
The extra type `structs:all` (ALL_STRUCTS) declares every struct and union of
vk.xml and their aliases, so that a pNext walker can name (find, copy, rebuild)
any struct whose sType it meets. The video codec types of video.xml that Vulkan
structs reach are declared from video.xml's categories: its enums as int32_t (C
enums), its structs as incomplete types (Vulkan structs only point to them).
The shims are compiled (cffi's out-of-line API mode): these declarations cost
build time and library size, not parse time when a shim loads.
The same text serves as cffi `cdef` and as the C source cffi compiles, so it
is plain C that gcc accepts.
"""
from __future__ import annotations

import functools
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from . import cdecl_manual, registry

C_SCALARS = frozenset({
    "void", "char", "float", "double", "int", "size_t",
    "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t",
})
MANUAL_BASE = frozenset({
    "VkBool32", "VkFlags", "VkFlags64", "VkDeviceSize", "VkDeviceAddress", "VkSampleMask", "VkRemoteAddressNV",
})
ALWAYS_COMMANDS = ("vkGetInstanceProcAddr", "vkGetDeviceProcAddr", "vkDestroyDevice")
EXTENDERS = "extenders:"
ALL_STRUCTS = "structs:all"

_ARRAY_DIM = re.compile(r"\[([A-Za-z_][A-Za-z0-9_]*)\]")


class GeneratorError(Exception):
    """The registry holds something this generator cannot declare."""


@dataclass(frozen=True)
class Declarations:
    cdef: str                 # C text: typedefs, structs, PFN types
    python_hooks: str         # extern "Python" declarations (cdef only)
    hooks: tuple[str, ...]     # canonical names of the hooked commands, sorted (the guard table's order)
    commands: tuple[str, ...]  # canonical names with PFN types
    types: tuple[str, ...]     # every Vulkan type declared


def _dims(dims: Iterable[str]) -> str:
    vk = registry.load()
    out = []
    for d in dims:
        out.append(str(vk.constants[d].value) if d in vk.constants else d)
    return "".join(f"[{d}]" for d in out)


def _subst_constants(text: str) -> str:
    vk = registry.load()
    return _ARRAY_DIM.sub(lambda m: f"[{vk.constants[m.group(1)].value}]" if m.group(1) in vk.constants else m.group(0), text)


def _pfn_typedef(command_name: str) -> str:
    cmd = registry.load().commands[command_name]
    return _subst_constants(cmd.cFunctionPointer.replace("VKAPI_PTR ", ""))


@functools.cache
def video_std_types() -> dict[str, str]:
    """Name -> category ("enum", "struct", ...) of the video codec types in the registry's video.xml
    (the model of vk.xml does not carry them)."""
    import vulkan_object

    root = ET.parse(Path(vulkan_object.__file__).with_name("video.xml")).getroot()
    return {t.get("name"): t.get("category") for t in root.iter("type") if t.get("name") and t.get("category")}


def _param_list(params) -> str:
    return ", ".join(f"{p.fullType} {p.name}{_dims(p.fixedSizeArray)}" for p in params) or "void"


class _Closure:
    """Walks the registry from a set of roots, collecting every type reached."""

    def __init__(self) -> None:
        self.vk = registry.load()
        self.alias = registry.aliases()
        self.seen: set[str] = set()
        self.order: list[str] = []

    def add(self, name: str) -> None:
        if name in self.seen or name in C_SCALARS or name in MANUAL_BASE:
            return
        self.seen.add(name)
        vk = self.vk
        canonical = self.alias.type(name)
        if canonical != name:
            self.add(canonical)
        elif name in vk.structs:
            for m in vk.structs[name].members:
                self.add(m.type)
        elif name in vk.funcPointers:
            fp = vk.funcPointers[name]
            for p in fp.params:
                self.add(p.type)
            self.add(fp.returnType.replace("*", "").strip())
        elif name in vk.flags:
            pass
        elif not (name in vk.enums or name in vk.bitmasks or name in vk.handles
                  or name in cdecl_manual.PLATFORM_TYPES or video_std_types().get(name) in ("enum", "struct")):
            raise GeneratorError(f"type {name!r} is not in the registry model nor in cdecl_manual")
        self.order.append(name)


def _scalar_typedef(vk, alias, name: str) -> str | None:
    canonical = alias.type(name)
    if canonical != name:
        return None
    if name in vk.enums:
        return f"typedef int32_t {name};"
    if name in vk.bitmasks:
        return f"typedef {'VkFlags64' if vk.bitmasks[name].bitWidth == 64 else 'VkFlags'} {name};"
    if name in vk.flags:
        return f"typedef {vk.flags[name].baseFlagsType} {name};"
    if name in vk.handles:
        h = vk.handles[name]
        return f"typedef struct {name}_T* {name};" if h.dispatchable else f"typedef uint64_t {name};"
    category = video_std_types().get(name)
    if category == "enum":
        return f"typedef int32_t {name};"
    if category == "struct":   # reached through pointers only (a by-value member would need its layout)
        return f"typedef struct {name} {name};"
    return None


def _struct_body(s) -> str:
    kind = "union" if s.union else "struct"
    lines = [f"{kind} {s.name} {{"]
    for m in s.members:
        width = f":{m.bitFieldWidth}" if m.bitFieldWidth else ""
        lines.append(f"    {m.fullType} {m.name}{_dims(m.fixedSizeArray)}{width};")
    lines.append("};")
    return "\n".join(lines)


def _struct_order(vk, alias, names: list[str]) -> list[str]:
    """Structs ordered so that every by-value member is defined first."""
    done: list[str] = []
    placed: set[str] = set()

    def visit(n: str) -> None:
        if n in placed:
            return
        placed.add(n)
        for m in vk.structs[n].members:
            dep = alias.type(m.type)
            if dep in vk.structs and "*" not in m.fullType:
                visit(dep)
        done.append(n)

    for n in names:
        visit(n)
    return done


def generate(commands: Iterable[str], extra_types: Iterable[str] = (), hooks: Iterable[str] = ()) -> Declarations:
    """Declarations for `commands` (PFN types) and `extra_types`; `hooks`
    (a subset of commands) also get `extern "Python" hook_<name>` callbacks.
    An extra type written `extenders:VkStruct` stands for every struct that
    may appear in VkStruct's pNext chain."""
    vk = registry.load()
    alias = registry.aliases()
    wanted = sorted({alias.command(c) for c in (*commands, *ALWAYS_COMMANDS)})
    for c in wanted:
        if c not in vk.commands:
            raise GeneratorError(f"command {c!r} is not in the registry")
    closure = _Closure()
    closure.add("PFN_vkVoidFunction")
    for c in wanted:
        cmd = vk.commands[c]
        for p in cmd.params:
            closure.add(p.type)
        closure.add(cmd.returnType)
    for t in extra_types:
        if t == ALL_STRUCTS:
            for name, struct in vk.structs.items():
                closure.add(name)
                for a in struct.aliases:
                    closure.add(a)
        elif t.startswith(EXTENDERS):
            for ext in vk.structs[t.removeprefix(EXTENDERS)].extendedBy:
                closure.add(ext)
        else:
            closure.add(t)
    closure.add("VkStructureType")
    closure.add("VkBaseOutStructure")
    closure.add("VkBaseInStructure")
    closure.add("VkResult")

    types = closure.order
    out = [cdecl_manual.BASE_TYPES.strip()]
    out += [cdecl_manual.PLATFORM_TYPES[t] for t in types if t in cdecl_manual.PLATFORM_TYPES]
    out += [td for t in types if (td := _scalar_typedef(vk, alias, t))]
    structs = [t for t in types if t in vk.structs]
    out += [f"typedef {'union' if vk.structs[t].union else 'struct'} {t} {t};" for t in structs]
    out += [f"typedef {alias.type(t)} {t};" for t in types if alias.type(t) != t]
    out += [vk.funcPointers[t].cFunctionPointer.replace("VKAPI_PTR ", "") for t in types if t in vk.funcPointers]
    out += [_struct_body(vk.structs[t]) for t in _struct_order(vk, alias, structs)]
    out += [_pfn_typedef(c) for c in wanted]
    out.append(cdecl_manual.LOADER_INTERFACE.strip())

    hook_lines = []
    hooked = tuple(sorted({alias.command(h) for h in hooks}))
    for h in hooked:
        cmd = vk.commands[h]
        hook_lines.append(f'extern "Python" {cmd.returnType} hook_{h}({_param_list(cmd.params)});')
    return Declarations("\n".join(out) + "\n", "\n".join(hook_lines) + "\n", hooked, tuple(wanted), tuple(types))
