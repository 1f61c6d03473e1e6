"""The Khronos Vulkan registry model (vk.xml via the `vulkan-object` package).

Loaded once per process (about 0.8 s), only by generators at build time:
nothing on the layer's or driver's load path imports this module.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any


@functools.cache
def load() -> Any:
    """The registry model; cached so every generator shares one parse."""
    from vulkan_object import get_vulkan_object

    return get_vulkan_object()


@dataclass(frozen=True)
class Aliases:
    """Alias name -> canonical name, for types and commands."""

    types: dict[str, str]
    commands: dict[str, str]

    def type(self, name: str) -> str:
        return self.types.get(name, name)

    def command(self, name: str) -> str:
        return self.commands.get(name, name)


@functools.cache
def aliases() -> Aliases:
    vk = load()
    types: dict[str, str] = {}
    for table in (vk.structs, vk.enums, vk.handles, vk.flags, vk.bitmasks):
        for name, entry in table.items():
            for alias in entry.aliases:
                types[alias] = name
    commands = {name: cmd.alias for name, cmd in vk.commands.items() if cmd.alias}
    return Aliases(types, commands)


def command_aliases(canonical: str) -> list[str]:
    """Every registry name of a command: the canonical one first, then its aliases."""
    names = [canonical]
    names += [a for a, c in aliases().commands.items() if c == canonical]
    return names
