"""The shims' C compiles without a warning, and its static runtime runs clean under the sanitizers.

- Each shim's one C source (vkapi/shim.py `c_source`: the build's #defines, vkapi/runtime/*.c and the
  generated declarations, guards and tables) is compiled as the build compiles it (-O2, -fPIC), but
  with `-Wall -Wextra -Werror` and without the build's -Wno-unused-function. cffi's own embedding code
  is left out (it is not ours): Python.h, a stand-in for cffi's `_cffi_start_python` and a stub per
  extern "Python" hook take its place.
- tests/vkapi/runtime_harness.c exercises what of vkapi/runtime/ runs without Vulkan and Python
  (the command-buffer map and arenas, the ledger, kept answers, the guards' next functions), compiled
  after the generated declarations and #defines with -fsanitize=address,undefined; skipped when the
  compiler has no sanitizer runtime. LeakSanitizer stays on, told only of the tables the map keeps on
  purpose.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

from tessera.vkapi import recorder_gen, registry, shim, submits

HARNESS = Path(__file__).with_name("runtime_harness.c")
WARNINGS = ["-Wall", "-Wextra", "-Werror"]


def _specs():
    from tessera.icd.shim_spec import spec as icd_spec
    from tessera.layer.shim_spec import spec as layer_spec
    return {"layer": layer_spec(), "driver": icd_spec()}


@pytest.fixture(scope="module")
def shims():
    if shutil.which("gcc") is None:
        pytest.fail("gcc missing: the shims are built with it (`make setup`)")
    return {name: (spec, shim.declarations(spec)) for name, spec in _specs().items()}


def _hook_stubs(hooks) -> str:
    """A definition per extern "Python" hook, in place of cffi's."""
    vk = registry.load()
    out = ['#pragma GCC diagnostic ignored "-Wunused-parameter"   /* the stubs below only */']
    for name in hooks:
        cmd = vk.commands[name]
        params = ", ".join(f"{p.fullType} {p.name}" for p in cmd.params) or "void"
        out.append(f"static {cmd.returnType} hook_{name}({params}) {{{'' if cmd.returnType == 'void' else ' return 0;'} }}")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("which", ["layer", "driver"])
def test_shim_source_compiles_with_warnings_as_errors(shims, which, tmp_path):
    spec, decls = shims[which]
    source = ("#include <Python.h>\n"
              "static void *_cffi_start_python(void) { return NULL; }   /* cffi's, in the real build */\n"
              + shim.c_source(spec, decls, shim._libpython()) + _hook_stubs(decls.hooks))
    path = tmp_path / f"{spec.module_name}.c"
    path.write_text(source)
    r = subprocess.run(["gcc", "-O2", "-fPIC", *WARNINGS, f"-I{sysconfig.get_paths()['include']}",
                        "-c", str(path), "-o", str(tmp_path / "shim.o")], capture_output=True, text=True)
    assert r.returncode == 0, f"{which} shim's C (kept in {path}):\n{r.stderr[-6000:]}"


def _sanitizers_available(tmp_path: Path) -> bool:
    probe = tmp_path / "probe.c"
    probe.write_text("int main(void) { return 0; }\n")
    r = subprocess.run(["gcc", "-fsanitize=address,undefined", str(probe), "-o", str(tmp_path / "probe")],
                       capture_output=True)
    return r.returncode == 0 and subprocess.run([str(tmp_path / "probe")], capture_output=True).returncode == 0


def test_runtime_runs_clean_under_address_and_undefined_sanitizers(shims, tmp_path):
    if not _sanitizers_available(tmp_path):
        pytest.skip("gcc here has no AddressSanitizer/UBSan runtime (libasan, libubsan)")
    _, decls = shims["layer"]
    runtime = shim.RUNTIME_DIR
    source = ("#include <stdint.h>\n#include <stddef.h>\n" + decls.cdef
              + "#define TESSERA_GUARD_COUNT 5\n" + recorder_gen.c_defines() + submits.c_defines()
              + (runtime / "guards.c").read_text()
              + 'static const char *const tessera_record_formats[] = '
                '{ "R,Q", "T,Q", "R,SVkDebugUtilsLabelEXT.pLabelName", "", "X" };\n'
              + "static const signed char tessera_tag_slots[] = { -1, 0, 0, -1, -1 };\n"
              + (runtime / "recorder.c").read_text() + (runtime / "submits.c").read_text()
              + (runtime / "lifecycle.c").read_text() + (runtime / "answers.c").read_text() + HARNESS.read_text())
    path = tmp_path / "runtime_harness.c"
    path.write_text(source)
    binary = tmp_path / "runtime_harness"
    r = subprocess.run(["gcc", "-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
                        "-fno-sanitize-recover=all", *WARNINGS, str(path), "-o", str(binary), "-lpthread"],
                       capture_output=True, text=True)
    assert r.returncode == 0, f"harness (kept in {path}):\n{r.stderr[-6000:]}"
    # The map's outgrown tables stay allocated on purpose (a lock-free reader may still be probing
    # one: recorder.c): LeakSanitizer is told so; any other leak (an arena, a buffer, an answer) fails.
    suppressions = tmp_path / "lsan.supp"
    suppressions.write_text("leak:tessera_table_new\n")
    env = {**os.environ, "LSAN_OPTIONS": f"suppressions={suppressions}:print_suppressions=0",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0 and run.stdout.strip() == "ok", f"{run.stdout}\n{run.stderr[-6000:]}"


def test_editing_a_runtime_file_changes_the_shims_fingerprint(tmp_path, monkeypatch):
    """Every file of vkapi/runtime/ is an input of the build: editing one rebuilds the shims."""
    runtime = tmp_path / "runtime"
    shutil.copytree(shim.RUNTIME_DIR, runtime)
    monkeypatch.setattr(shim, "RUNTIME_DIR", runtime)
    before = shim.generator_fingerprint()
    for path in sorted(runtime.glob("*.c")):
        text = path.read_text()
        path.write_text(text + "/* edited */\n")
        assert shim.generator_fingerprint() != before, f"{path.name} is not part of the fingerprint"
        path.write_text(text)
    assert shim.generator_fingerprint() == before


def test_a_value_the_c_takes_from_another_module_changes_the_shims_fingerprint(monkeypatch):
    """The C's defines come from other modules (the stage's layout, wire tags): changing one rebuilds the shims, so
    the C and the Python that reads what it writes never disagree (a stage's capacity changed in
    schemas/staged.py did not rebuild them before)."""
    from tessera.schemas import staged
    before = shim.generator_fingerprint()
    monkeypatch.setattr(staged, "CAPACITY", staged.CAPACITY * 2)
    assert shim.generator_fingerprint() != before
