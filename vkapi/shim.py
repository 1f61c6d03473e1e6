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
- A process that already runs Python from the same libpython: cffi runs the
  init code in that interpreter.
- A process running a *different* Python (another libpython, or a static
  interpreter such as Debian's /usr/bin/python3): two interpreters in one
  process would crash, so the shim refuses: its negotiate entry point returns
  VK_ERROR_INITIALIZATION_FAILED and the loader skips it, with one line on
  stderr saying why.
Outputs go to the build folder and are rebuilt only when their inputs change.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import site
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from . import cdecl, paths

GENERATOR_FILES = ("shim.py", "cdecl.py", "cdecl_manual.py", "registry.py", "constants_gen.py")


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
    manifest: dict = field(default_factory=dict)  # JSON manifest; "library_path" is filled in
    manifest_dir: Path = paths.BUILD_DIR


def _libpython() -> str:
    libdir = sysconfig.get_config_var("LIBDIR")
    soname = sysconfig.get_config_var("INSTSONAME")
    if not sysconfig.get_config_var("Py_ENABLE_SHARED") or not soname:
        raise RuntimeError(
            f"{sys.executable} is not built with --enable-shared: the shims need libpython "
            "as a shared library. Use a Python built with it (pyenv's is; see `tessera doctor`)."
        )
    return str(Path(libdir) / soname)


PRELUDE = r"""
#include <dlfcn.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define TESSERA_EXPORT __attribute__((visibility("default")))
#define TESSERA_VK_ERROR_INITIALIZATION_FAILED (-3)

static int tessera_refuse;

/* Make our libpython global, or refuse if another Python runs this process. */
__attribute__((constructor)) static void tessera_prepare_python(void)
{
    const char *ours = TESSERA_LIBPYTHON;
    void *sym = dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    if (sym) {
        Dl_info info;
        char a[4096], b[4096];
        if (dladdr(sym, &info) && info.dli_fname &&
            realpath(info.dli_fname, a) && realpath(ours, b) && strcmp(a, b) != 0) {
            tessera_refuse = 1;
            fprintf(stderr, "tessera: %s not loaded: this process runs Python from %s, "
                    "but the shim was built for %s. Run Python apps with the project's "
                    "interpreter (.venv/bin/python).\n", TESSERA_SHIM_NAME, a, b);
            return;
        }
    }
    if (!dlopen(ours, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) && !dlopen(ours, RTLD_NOW | RTLD_GLOBAL)) {
        tessera_refuse = 1;
        fprintf(stderr, "tessera: %s not loaded: cannot load %s: %s\n", TESSERA_SHIM_NAME, ours, dlerror());
    }
}
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


def generator_fingerprint() -> str:
    """Hash of the generator sources and the registry version."""
    h = hashlib.sha256()
    here = Path(__file__).parent
    for name in GENERATOR_FILES:
        h.update((here / name).read_bytes())
    from importlib.metadata import version
    h.update(version("vulkan-object").encode())
    return h.hexdigest()


def _fingerprint(spec: ShimSpec, decls_inputs: str) -> str:
    h = hashlib.sha256(generator_fingerprint().encode())
    h.update(repr((spec.module_name, spec.library_name, spec.hooks, spec.calls, spec.extra_types,
                   spec.embedding_api, spec.c_glue, spec.init_module, spec.extra_cdef, spec.manifest)).encode())
    h.update(decls_inputs.encode())
    h.update(sys.version.encode())
    import cffi
    h.update(cffi.__version__.encode())
    return h.hexdigest()


def build(spec: ShimSpec, force: bool = False) -> Path:
    """Build (if needed) the shim and its manifest; return the library path."""
    out = paths.BUILD_DIR
    lib_path = out / spec.library_name
    stamp = out / f"{spec.library_name}.fingerprint"
    libpython = _libpython()
    fingerprint = _fingerprint(spec, libpython + repr(_site_dirs()))
    if not force and lib_path.exists() and stamp.exists() and stamp.read_text() == fingerprint:
        _write_manifest(spec, lib_path)
        return lib_path

    import cffi

    decls = cdecl.generate((*spec.hooks, *spec.calls), spec.extra_types, spec.hooks)
    ffi = cffi.FFI()
    ffi.cdef(decls.cdef)
    ffi.cdef(decls.python_hooks)
    if spec.extra_cdef:
        ffi.cdef(spec.extra_cdef)
    ffi.embedding_api(spec.embedding_api)
    header = f"/* Generated by tessera.vkapi.shim for {spec.library_name}. Do not edit. */\n"
    defines = (f"#define TESSERA_LIBPYTHON {json.dumps(libpython)}\n"
               f"#define TESSERA_SHIM_NAME {json.dumps(spec.library_name)}\n")
    ffi.set_source(spec.module_name, header + defines + PRELUDE + decls.cdef + spec.c_glue,
                   libraries=["dl"], extra_compile_args=["-O2", "-Wno-unused-function"])
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
