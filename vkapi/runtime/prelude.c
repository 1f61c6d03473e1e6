/* The shims' start-up: which Python serves the shim, starting the project's interpreter in a process
   without Python, cffi's embedding start-up, and Python's exit functions at a C program's exit.
   Static C, first in each shim's one source (vkapi/shim.py `c_source`), compiled with the generated
   parts and never formatted by Python. The build #defines before it TESSERA_LIBPYTHON, TESSERA_PYTHON,
   TESSERA_SHIM_NAME, TESSERA_PY_EXECUTABLE, TESSERA_PY_PREFIX, TESSERA_PY_EXEC_PREFIX,
   TESSERA_PY_SEARCH_PATHS and TESSERA_PATH_PREFIX_CODE; cffi's embedding code before it gives Python.h
   and _cffi_start_python. See docs/shims.md, "Loading". */
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
/* In `sys` when a shim started the interpreter (a C program): then it is not the application's. */
#define TESSERA_SHIMS_INTERPRETER "_tessera_shims_interpreter"

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
    /* The other shim, loaded later into this process, finds Python running: this tells it the
       interpreter is the shims' and not the application's (no application code holds its GIL). */
    if (PySys_SetObject(TESSERA_SHIMS_INTERPRETER, Py_True) < 0) PyErr_Clear();
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
                PyGILState_STATE gil = PyGILState_Ensure();
                tessera_in_app_python = PySys_GetObject(TESSERA_SHIMS_INTERPRETER) == NULL;
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
