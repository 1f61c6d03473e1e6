"""The generated declarations have exactly the C layout of the real Vulkan headers.

Reference: gcc compiling the system's vulkan_core.h (libvulkan-dev), printing
sizeof/offsetof of every struct both sides declare. Our side: cffi's layout
of the generated text (the shims compile that same text).
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import cffi
import pytest

from tessera.icd import shim_spec as icd_spec
from tessera.layer import shim_spec as layer_spec
from tessera.vkapi import cdecl, registry

HEADER = Path("/usr/include/vulkan/vulkan_core.h")


@pytest.fixture(scope="module")
def declarations():
    return cdecl.generate((*icd_spec.HOOKS, *layer_spec.HOOKS, *layer_spec.CALLS), icd_spec.PNEXT_TYPES,
                          icd_spec.HOOKS)


def test_matches_gcc_on_system_headers(declarations, tmp_path):
    if not HEADER.exists():
        pytest.fail(f"{HEADER} missing: libvulkan-dev is installed by `make setup`")
    vk = registry.load()
    in_header = _header_members(HEADER.read_text())
    # Structs whose members are the same in the registry and the (older) system header.
    names = [t for t in declarations.types
             if t in vk.structs and in_header.get(t) == [m.name for m in vk.structs[t].members]]
    assert len(names) > 150, "too few shared structs to be a meaningful comparison"
    # One static table, printed by one loop: gcc compiles thousands of initialisers in a moment,
    # thousands of printf calls in a minute (every struct of vk.xml is declared, issue #23).
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include <vulkan/vulkan_core.h>',
             'static const struct { const char *name; size_t value; } rows[] = {']
    for n in names:
        lines.append(f'{{"{n}", sizeof({n})}},')
        for m in vk.structs[n].members:
            if not m.bitFieldWidth:
                lines.append(f'{{"{n}.{m.name}", offsetof({n}, {m.name})}},')
    lines.append('};')
    lines.append('int main(void) { for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) '
                 'printf("%s %zu\\n", rows[i].name, rows[i].value); return 0; }')
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines))
    subprocess.run(["gcc", "-o", tmp_path / "layout", src], check=True)
    reference = dict(line.split() for line in subprocess.check_output([tmp_path / "layout"], text=True).splitlines())

    ffi = cffi.FFI()
    ffi.cdef(declarations.cdef)
    # Each ffi.sizeof("Name") parses a C snippet declaring every typedef again (seconds per hundred
    # names now that every struct is declared): one struct holding them all is parsed once, and its
    # fields give each struct's type.
    ffi.cdef("typedef struct { " + " ".join(f"{n} m_{n};" for n in names) + " } tessera_layout_all;")
    ctypes = {name.removeprefix("m_"): field.type for name, field in ffi.typeof("tessera_layout_all").fields}
    ours = {}
    for n in names:
        ours[n] = str(ffi.sizeof(ctypes[n]))
        for m in vk.structs[n].members:
            if not m.bitFieldWidth:
                ours[f"{n}.{m.name}"] = str(ffi.offsetof(ctypes[n], m.name))
    mismatches = {k: (ours[k], v) for k, v in reference.items() if ours[k] != v}
    assert not mismatches
    assert len(reference) > 1000


def _header_members(text: str) -> dict[str, list[str]]:
    out = {}
    for name, body in re.findall(r"^typedef (?:struct|union) (\w+) \{(.*?)\} \1;", text, re.M | re.S):
        out[name] = re.findall(r"(\w+)\s*(?:\[[^\]]*\])*\s*(?::\s*\d+)?;", body)
    return out


def test_hooks_declared_for_every_command(declarations):
    for name in icd_spec.HOOKS:
        assert f" hook_{registry.aliases().command(name)}(" in declarations.python_hooks


def test_unknown_command_is_a_clear_error():
    with pytest.raises(cdecl.GeneratorError, match="vkNoSuchCommand"):
        cdecl.generate(["vkNoSuchCommand"])
