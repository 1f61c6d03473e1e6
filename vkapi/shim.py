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

from . import answers, cdecl, guards, paths, recorder, submits

GENERATOR_FILES = ("shim.py", "guards.py", "python_runner.c", "recorder.py", "submits.py", "answers.py", "cdecl.py", "cdecl_manual.py",
                   "registry.py", "constants_gen.py", "../schemas/labels.py")


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


PRELUDE = r"""
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#define TESSERA_EXPORT __attribute__((visibility("default")))
#define TESSERA_VK_ERROR_INITIALIZATION_FAILED (-3)
#if PY_VERSION_HEX >= 0x030D0000
#define TESSERA_PY_FINALIZING() Py_IsFinalizing()
#else
#define TESSERA_PY_FINALIZING() _Py_IsFinalizing()
#endif

static int tessera_refuse;
static int tessera_in_app_python;   /* the shims run in the application's own interpreter */

/* Where this library is (for messages). */
static const char *tessera_self_path(void)
{
    Dl_info info;
    return dladdr((void *)&tessera_refuse, &info) && info.dli_fname ? info.dli_fname : TESSERA_SHIM_NAME;
}

/* Decide which Python serves this shim, before anything calls into it.
   - The process already runs an initialised CPython (a Python app, shared or statically linked: its
     C API is reachable through the global symbol scope, which comes first when our references bind):
     that interpreter serves us if it is our major.minor version (one ABI); another version is refused.
   - Otherwise (vulkaninfo, a C app): the libpython we were built against is promoted to RTLD_GLOBAL,
     which cffi's _cffi_backend needs, and cffi starts it on the first call. */
__attribute__((constructor)) static void tessera_prepare_python(void)
{
    int (*initialised)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    const char *(*version)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
    if (initialised && version && initialised()) {
        int major = 0, minor = 0;
        if (sscanf(version(), "%d.%d", &major, &minor) == 2 && major == PY_MAJOR_VERSION && minor == PY_MINOR_VERSION)
            return;
        tessera_refuse = 1;
        fprintf(stderr, "tessera: %s not loaded: this process runs Python %d.%d, but the shim was built for "
                "Python %d.%d. Run the application with a Python %d.%d interpreter (for example %s), "
                "or rebuild Tessera with PYTHON=python%d.%d.\n", tessera_self_path(), major, minor,
                PY_MAJOR_VERSION, PY_MINOR_VERSION, PY_MAJOR_VERSION, PY_MINOR_VERSION, TESSERA_PYTHON,
                major, minor);
        return;
    }
    const char *ours = TESSERA_LIBPYTHON;
    if (!dlopen(ours, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) && !dlopen(ours, RTLD_NOW | RTLD_GLOBAL)) {
        tessera_refuse = 1;
        fprintf(stderr, "tessera: %s not loaded: cannot load %s: %s\n", tessera_self_path(), ours, dlerror());
    }
}

/* True while Python may be called: the interpreter runs and is not finalising. After
   finalisation (a static destructor calling vkDestroyInstance at exit) a call into Python would
   crash in PyGILState_Ensure; the generated guards then forward in C instead. */
static int tessera_python_usable(void)
{
    return Py_IsInitialized() && !TESSERA_PY_FINALIZING();
}

/* Runs `code` in a fresh namespace (the GIL held); an error is printed, never raised. */
static void tessera_run_python(const char *code)
{
    PyObject *globals = PyDict_New();
    if (!globals || PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) < 0) {
        Py_XDECREF(globals);
        PyErr_Print();
        return;
    }
    PyObject *result = PyRun_String(code, Py_file_input, globals, globals);
    if (result) Py_DECREF(result);
    else PyErr_Print();
    Py_DECREF(globals);
}

/* A process without Python (a C program): start the interpreter from what the build recorded
   (TESSERA_PY_*: the project's interpreter, its prefixes and standard library), isolated from the
   environment. Left to itself, Python would find its prefix by looking for "python3" on PATH and
   honour PYTHONHOME/PYTHONPATH, so an activated virtual environment or conda, or a PYTHONHOME, would
   hand it another environment's site-packages or standard library. Signal handlers stay the
   application's. On success the GIL is released again, as cffi's own start-up leaves it. */
/* cffi's start-up: imports _cffi_backend and runs the init code (Tessera's modules). 0 on failure,
   after cffi's own lines on stderr and one of ours naming the fix. */
static int tessera_cffi_start(void)
{
    if (_cffi_start_python()) return 1;
    fprintf(stderr, "tessera: %s stays out of this process: Tessera's Python modules did not load (the lines "
            "above say why); run `make setup` in the project, then `tessera doctor`.\n", tessera_self_path());
    return 0;
}

/* A C program never finalises the interpreter the shims started, so Python's atexit functions (the
   timeline's last placements, the layer's last frames) would never run: the shims run them when the
   program exits (returns from main or calls exit), as Python itself does at its own exit. Registered
   with atexit(), this runs before the libraries' destructors (the backend driver is still whole). */
static pid_t tessera_python_pid;   /* the process that started the interpreter */

static void tessera_run_python_exit_functions(void)
{
    /* A child forked without exec that calls exit() inherits the handler, but not the threads: one of
       them may have held the GIL at the fork, and the child would wait for it forever. */
    if (getpid() != tessera_python_pid || !tessera_python_usable()) return;
    PyGILState_STATE gil = PyGILState_Ensure();
    tessera_run_python("import atexit\natexit._run_exitfuncs()\n");
    PyGILState_Release(gil);
}

static int tessera_start_own_python(void)
{
    static const char *const search_paths[] = { TESSERA_PY_SEARCH_PATHS };
    PyConfig config;
    PyConfig_InitIsolatedConfig(&config);
    config.install_signal_handlers = 0;
    config.site_import = 1;      /* site finds the project's venv from `executable` (pyvenv.cfg) */
    PyStatus status = PyConfig_SetBytesString(&config, &config.executable, TESSERA_PY_EXECUTABLE);
    if (!PyStatus_Exception(status))
        status = PyConfig_SetBytesString(&config, &config.base_executable, TESSERA_PY_EXECUTABLE);
    if (!PyStatus_Exception(status))
        status = PyConfig_SetBytesString(&config, &config.prefix, TESSERA_PY_PREFIX);
    if (!PyStatus_Exception(status))
        status = PyConfig_SetBytesString(&config, &config.base_prefix, TESSERA_PY_PREFIX);
    if (!PyStatus_Exception(status))
        status = PyConfig_SetBytesString(&config, &config.exec_prefix, TESSERA_PY_EXEC_PREFIX);
    if (!PyStatus_Exception(status))
        status = PyConfig_SetBytesString(&config, &config.base_exec_prefix, TESSERA_PY_EXEC_PREFIX);
    config.module_search_paths_set = 1;
    for (size_t i = 0; i < sizeof search_paths / sizeof *search_paths && !PyStatus_Exception(status); i++) {
        wchar_t *wide = Py_DecodeLocale(search_paths[i], NULL);   /* after pre-initialisation above */
        status = wide ? PyWideStringList_Append(&config.module_search_paths, wide) : PyStatus_NoMemory();
        PyMem_RawFree(wide);
    }
    if (!PyStatus_Exception(status))
        status = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(status)) {
        fprintf(stderr, "tessera: %s stays out of this process: cannot start the project's Python (%s) from %s: "
                "%s%s%s. Was the interpreter moved or removed? Run `make setup` in the project, then "
                "`tessera doctor`.\n", tessera_self_path(), TESSERA_PY_EXECUTABLE, TESSERA_PY_PREFIX,
                status.func ? status.func : "", status.func ? ": " : "",
                status.err_msg ? status.err_msg : "initialisation failed");
        return 0;
    }
#if PY_VERSION_HEX < 0x030C0000
    PyType_Modified(&PyCapsule_Type);   /* see tessera_python_enter */
#endif
    int ok = tessera_cffi_start();   /* with the GIL held: cffi sees Python initialised */
    PyEval_SaveThread();
    if (ok) {
        tessera_python_pid = getpid();
        atexit(tessera_run_python_exit_functions);
    }
    return ok;
}

static int tessera_python_started;
static pthread_mutex_t tessera_start_lock = PTHREAD_MUTEX_INITIALIZER;

/* Before every entry point that calls Python: start the embedded module once, carefully.
   cffi's start-up takes a process-wide spin lock that, on Python < 3.12, is
   PyCapsule_Type.tp_version_tag; it spins forever if that tag is not 0, which it is not once any
   capsule attribute was looked up (several frameworks do at import). In a process that already runs
   Python we hold the GIL, reset the tag with PyType_Modified (the public way to invalidate a type's
   method cache) and run cffi's start-up before releasing it, so no lookup can set the tag again in
   between. Returns 0 when Python cannot be called (refused, failed to start, or finalised). */
static int tessera_python_enter(void)
{
    if (tessera_refuse) return 0;
    if (__atomic_load_n(&tessera_python_started, __ATOMIC_ACQUIRE))
        return tessera_python_usable();
    int ok = 1;
    pthread_mutex_lock(&tessera_start_lock);
    if (!tessera_python_started) {
        if (Py_IsInitialized()) {
            if (TESSERA_PY_FINALIZING()) {
                ok = 0;
            } else {
                tessera_in_app_python = 1;
                PyGILState_STATE gil = PyGILState_Ensure();
#if PY_VERSION_HEX < 0x030C0000
                PyType_Modified(&PyCapsule_Type);
#endif
                /* Our packages first: cffi imports _cffi_backend before the init code runs. */
                tessera_run_python(TESSERA_PATH_PREFIX_CODE);
                ok = tessera_cffi_start();
                PyGILState_Release(gil);
            }
        } else {
            ok = tessera_start_own_python();
        }
        if (ok) __atomic_store_n(&tessera_python_started, 1, __ATOMIC_RELEASE);
        else tessera_refuse = 1;
    }
    pthread_mutex_unlock(&tessera_start_lock);
    return ok && tessera_python_usable();
}
"""

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
                   spec.embedding_api, spec.c_glue, spec.init_module, spec.extra_cdef, spec.manifest,
                   sorted(spec.recorded.items()), spec.submit_path, sorted(spec.answered.items()))).encode())
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
    # What interpreter_config() derives from (asked only when rebuilding: it starts a process).
    interpreter_inputs = repr((sys.executable, sys.base_prefix, sys.base_exec_prefix))
    fingerprint = _fingerprint(spec, libpython + repr(_site_dirs()) + interpreter_inputs)
    if not force and lib_path.exists() and stamp.exists() and stamp.read_text() == fingerprint:
        _write_manifest(spec, lib_path)
        return lib_path

    import cffi

    decls = cdecl.generate((*spec.hooks, *spec.calls, *recorder.LABEL_COMMANDS), spec.extra_types, spec.hooks)
    ffi = cffi.FFI()
    ffi.cdef(decls.cdef)
    ffi.cdef(decls.python_hooks)
    ffi.cdef(guards.CDEF)
    ffi.cdef(recorder.CDEF % len(decls.hooks))
    ffi.cdef(submits.CDEF)
    ffi.cdef(answers.CDEF)
    if spec.extra_cdef:
        ffi.cdef(spec.extra_cdef)
    ffi.embedding_api(spec.embedding_api)
    header = f"/* Generated by tessera.vkapi.shim for {spec.library_name}. Do not edit. */\n"
    defines = (f"#define TESSERA_LIBPYTHON {json.dumps(libpython)}\n"
               f"#define TESSERA_PYTHON {json.dumps(sys.executable)}\n"
               f"#define TESSERA_SHIM_NAME {json.dumps(spec.library_name)}\n"
               + _interpreter_defines(interpreter_config()) +
               f"#define TESSERA_PATH_PREFIX_CODE {json.dumps(PATH_PREFIX_CODE.format(site_dirs=_site_dirs()))}\n")
    source = (header + defines + PRELUDE + decls.cdef
              + guards.c_source(decls.hooks, spec.recorded, spec.submit_path, spec.answered) + spec.c_glue)
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
