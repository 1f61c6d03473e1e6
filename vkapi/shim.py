"""Builder of cffi-embedding shims: real shared libraries whose Vulkan entry
points run Python.

One builder serves the layer and the driver. A `ShimSpec` names the library,
the commands it hooks (each gets an `extern "Python" hook_<name>` callback
whose address GetProcAddr hands out) and calls (PFN types), the C glue that
exports the loader entry points, and the Python module whose
`install(ffi, lib)` runs when the library is first used.

Loading rules (see docs/shims.md):
- A process without Python (vulkaninfo): a constructor promotes the libpython
  the shim was linked against to RTLD_GLOBAL before cffi imports
  `_cffi_backend` (which needs libpython's symbols globally).
- A process that already runs CPython of the same major.minor (shared or
  statically linked): that interpreter serves the shim.
- A process running another Python version: two interpreters in one process
  would crash, so the shim refuses: its negotiate entry point returns
  VK_ERROR_INITIALIZATION_FAILED and the loader skips it, with one line on
  stderr saying why and which interpreter works.
- Every hook is reached through a generated C guard (vkapi/guards.py), which
  forwards in C once Python is finalised; the first call into Python starts
  cffi's embedding carefully (tessera_python_enter).
Outputs go to the build folder and are rebuilt only when their inputs change.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from . import answers, cdecl, guards, lifecycle, paths, recorder_gen, submits

GENERATOR_FILES = ("shim.py", "guards.py", "recorder_gen.py", "recorder.py", "submits.py", "lifecycle.py", "answers.py",
                   "cdecl.py", "cdecl_manual.py", "registry.py", "constants_gen.py", "../schemas/labels.py")


@dataclass(frozen=True)
class ShimSpec:
    module_name: str           # cffi module name, e.g. "_tessera_layer_shim"
    library_name: str          # e.g. "libVkLayer_tessera_timeline.so"
    hooks: tuple[str, ...]     # commands with Python callbacks
    calls: tuple[str, ...]     # commands called through function pointers (PFN types)
    extra_types: tuple[str, ...]
    embedding_api: str         # C declarations of functions implemented in Python
    c_glue: str                # C source: exported loader entry points
    init_module: str           # Python module with install(ffi, lib)
    extra_cdef: str = ""       # declarations for cffi only (their C side comes from system headers)
    recorded: dict = field(default_factory=dict)  # command -> recorder.Recorded: recorded in C
    submit_path: "submits.SubmitPath | None" = None   # vkQueueSubmit(2) take the C path when they can
    answered: dict = field(default_factory=dict)  # command -> answers.Answered: answered in C after Python once
    manifest: dict = field(default_factory=dict)  # JSON manifest; "library_path" is filled in
    manifest_dir: Path = paths.BUILD_DIR

    def __post_init__(self) -> None:
        seen: set[str] = set()
        twice = sorted({name for name in self.hooks if name in seen or seen.add(name)})
        if twice:   # each intercept is declared once, by the module that owns it
            raise ValueError(f"{self.library_name}: commands declared twice in the shim's hooks: {twice}")
        unhooked = sorted(set(self.recorded) - set(self.hooks))
        if unhooked:
            raise ValueError(f"{self.library_name}: commands recorded in C but not hooked: {unhooked}")
        unhooked = sorted(set(self.answered) - set(self.hooks))
        if unhooked:
            raise ValueError(f"{self.library_name}: commands answered in C but not hooked: {unhooked}")


def _libpython() -> str:
    libdir = sysconfig.get_config_var("LIBDIR")
    soname = sysconfig.get_config_var("INSTSONAME")
    if not sysconfig.get_config_var("Py_ENABLE_SHARED") or not soname:
        raise RuntimeError(
            f"{sys.executable} is not built with --enable-shared: the shims need libpython "
            "as a shared library. Use a Python built with it (pyenv's is; see `tessera doctor`)."
        )
    return str(Path(libdir) / soname)


# The shims' static C (start-up, guards' next functions, arenas, ledger, kept answers, runner thread):
# real C files, read as they are; the generators around them emit per-command text only.
RUNTIME_DIR = Path(__file__).with_name("runtime")

# Run in an interpreter that was already running (the application's): the project's
# site-packages, when that interpreter does not have them already, go first, so `_cffi_backend` and Tessera's dependencies are the
# project's versions even in an interpreter that has older ones of its own.
PATH_PREFIX_CODE = """import site, sys
_before = list(sys.path)
for _p in {site_dirs!r}:
    if _p not in sys.path:
        site.addsitedir(_p)   # also runs their .pth files (the editable install of tessera)
sys.path[:] = [_p for _p in sys.path if _p not in _before] + _before
"""

INIT_CODE = """
import site, sys
for _p in {site_dirs!r}:
    if _p not in sys.path:
        site.addsitedir(_p)
from {module} import ffi, lib
import {init_module} as _init
_init.install(ffi, lib)
"""


def _site_dirs() -> list[str]:
    return [p for p in site.getsitepackages() if Path(p).is_dir()]


@functools.cache
def interpreter_config(python: str = sys.executable) -> dict:
    """What the shims start their own interpreter with in a process without Python: the
    interpreter's executable, prefixes and standard-library search path, as that interpreter
    computes them with no environment and no site (`-I -S`)."""
    code = ("import json, sys; print(json.dumps({'executable': sys.executable, 'prefix': sys.base_prefix, "
            "'exec_prefix': sys.base_exec_prefix, 'search_paths': sys.path}))")
    out = subprocess.run([python, "-I", "-S", "-c", code], check=True, capture_output=True, text=True,
                         env={"PATH": os.defpath}).stdout
    return json.loads(out)


def _interpreter_defines(config: dict) -> str:
    paths = ", ".join(json.dumps(p) for p in config["search_paths"]) or "NULL"
    return (f"#define TESSERA_PY_EXECUTABLE {json.dumps(config['executable'])}\n"
            f"#define TESSERA_PY_PREFIX {json.dumps(config['prefix'])}\n"
            f"#define TESSERA_PY_EXEC_PREFIX {json.dumps(config['exec_prefix'])}\n"
            f"#define TESSERA_PY_SEARCH_PATHS {paths}\n")


def generator_fingerprint() -> str:
    """Hash of the generator sources, every static C file of vkapi/runtime/, the values the C takes from other
    modules (the defines: wire tags, the stage layout, …) and the registry version."""
    from . import recorder_gen, submits

    h = hashlib.sha256()
    here = Path(__file__).parent
    for name in GENERATOR_FILES:
        h.update((here / name).read_bytes())
    h.update((recorder_gen.c_defines() + submits.c_defines()).encode())
    for path in sorted(RUNTIME_DIR.iterdir()):
        if path.suffix in (".c", ".h"):
            h.update(path.name.encode())
            h.update(path.read_bytes())
    from importlib.metadata import version
    h.update(version("vulkan-object").encode())
    return h.hexdigest()


def _fingerprint(spec: ShimSpec, decls_inputs: str) -> str:
    h = hashlib.sha256(generator_fingerprint().encode())
    h.update(repr((spec.module_name, spec.library_name, spec.hooks, spec.calls, spec.extra_types,
                   spec.embedding_api, spec.c_glue, spec.init_module, spec.extra_cdef, spec.manifest,
                   sorted(spec.recorded.items()), spec.submit_path, sorted(spec.answered.items()))).encode())
    h.update(decls_inputs.encode())
    h.update(sys.version.encode())
    import cffi
    h.update(cffi.__version__.encode())
    return h.hexdigest()


def declarations(spec: ShimSpec) -> cdecl.Declarations:
    """The shim's Vulkan declarations (cdecl.py): what it hooks and calls, and what its C needs."""
    return cdecl.generate((*spec.hooks, *spec.calls, *recorder_gen.LABEL_COMMANDS), spec.extra_types, spec.hooks)


def c_source(spec: ShimSpec, decls: cdecl.Declarations, libpython: str) -> str:
    """The shim's one C source, which cffi compiles after its own embedding code: the build's
    #defines, runtime/prelude.c, the Vulkan declarations, the guards with the rest of the static
    runtime around them (guards.c_source), then the spec's glue."""
    header = f"/* Generated by tessera.vkapi.shim for {spec.library_name}. Do not edit. */\n"
    defines = (f"#define TESSERA_LIBPYTHON {json.dumps(libpython)}\n"
               f"#define TESSERA_PYTHON {json.dumps(sys.executable)}\n"
               f"#define TESSERA_SHIM_NAME {json.dumps(spec.library_name)}\n"
               + _interpreter_defines(interpreter_config()) +
               f"#define TESSERA_PATH_PREFIX_CODE {json.dumps(PATH_PREFIX_CODE.format(site_dirs=_site_dirs()))}\n")
    return (header + defines + (RUNTIME_DIR / "prelude.c").read_text() + decls.cdef
            + guards.c_source(decls.hooks, spec.recorded, spec.submit_path, spec.answered) + spec.c_glue)


def build(spec: ShimSpec, force: bool = False) -> Path:
    """Build (if needed) the shim and its manifest; return the library path."""
    out = paths.BUILD_DIR
    lib_path = out / spec.library_name
    stamp = out / f"{spec.library_name}.fingerprint"
    libpython = _libpython()
    # What interpreter_config() derives from (asked only when rebuilding: it starts a process).
    interpreter_inputs = repr((sys.executable, sys.base_prefix, sys.base_exec_prefix))
    fingerprint = _fingerprint(spec, libpython + repr(_site_dirs()) + interpreter_inputs)
    if not force and lib_path.exists() and stamp.exists() and stamp.read_text() == fingerprint:
        _write_manifest(spec, lib_path)
        return lib_path

    import cffi

    decls = declarations(spec)
    ffi = cffi.FFI()
    ffi.cdef(decls.cdef)
    ffi.cdef(decls.python_hooks)
    ffi.cdef(guards.CDEF)
    ffi.cdef(recorder_gen.CDEF % len(decls.hooks))
    ffi.cdef(submits.CDEF)
    ffi.cdef(lifecycle.CDEF)
    ffi.cdef(answers.CDEF)
    if spec.extra_cdef:
        ffi.cdef(spec.extra_cdef)
    ffi.embedding_api(spec.embedding_api)
    source = c_source(spec, decls, libpython)
    # -z nodelete: the loader dlcloses drivers and layers after the last vkDestroyInstance, but the
    # embedded cffi modules stay in sys.modules and would point into unmapped memory.
    ffi.set_source(spec.module_name, source, libraries=["dl", "pthread"],
                   extra_compile_args=["-O2", "-Wno-unused-function"], extra_link_args=["-Wl,-z,nodelete"])
    ffi.embedding_init_code(INIT_CODE.format(site_dirs=_site_dirs(), module=spec.module_name,
                                             init_module=spec.init_module))
    workdir = out / "cffi" / spec.module_name
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    built = Path(ffi.compile(tmpdir=str(workdir), target=spec.library_name, verbose=False))
    tmp = lib_path.with_suffix(".so.tmp")
    shutil.copyfile(built, tmp)
    tmp.replace(lib_path)  # atomic: a running process keeps its mapped copy
    stamp.write_text(fingerprint)
    _write_manifest(spec, lib_path)
    return lib_path


def _write_manifest(spec: ShimSpec, lib_path: Path) -> None:
    if not spec.manifest:
        return
    manifest = json.loads(json.dumps(spec.manifest))
    body = manifest["layer"] if "layer" in manifest else manifest["ICD"]
    body["library_path"] = str(lib_path)
    spec.manifest_dir.mkdir(parents=True, exist_ok=True)
    stem = lib_path.name.removeprefix("lib").removesuffix(".so")
    text = json.dumps(manifest, indent=2) + "\n"
    target = spec.manifest_dir / f"{stem}.json"
    if not target.exists() or target.read_text() != text:
        target.write_text(text)
