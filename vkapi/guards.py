"""Generator: the C entry point of every hooked command, which works with or without Python.

GetProcAddr hands out `guard_<command>`, never cffi's `hook_<command>`
directly. While the embedded interpreter is usable a guard is one branch in
front of the Python hook. Once it is not (a static destructor or an atexit
handler calls vkDestroyInstance after the interpreter has finalised, or a
thread calls in while it finalises), calling the hook would crash in
PyGILState_Ensure, so the guard forwards the call in C to the next
element's function, which Python noted when it resolved the dispatch table
(`tessera_note_next`). One pointer per command: when two dispatch chains in
the process disagree on it, the guard cannot tell which applies and returns
the command's failure value instead (a destroy is then skipped: the process
is exiting and nothing is left to observe a leak).

Emitted C (appended to the shim source after cffi's declarations), per command and per table
only; the static C around it is read as it is from vkapi/runtime/, never formatted here:
    #define TESSERA_GUARD_COUNT, ...     the values the runtime files need (recorder_gen, submits)
    runtime/guards.c                     tessera_note_next(index, fn): the next element's function
    runtime/python_runner.c              the runner thread of hooks called off Python's threads
    tessera_record_formats[], runtime/recorder.c, runtime/submits.c, runtime/lifecycle.c,
    runtime/reader.c, event_packets.c and placed_submits.c (SubmitPath.place) or reported_submits.c
    (SubmitPath.report), runtime/answers.c
    static RET hook_X(...);              cffi's extern "Python" callback
    static RET guard_X(...)              the entry point handed to the loader
    tessera_guard_names[], _pointers[]   the table, then runtime/guard_table.c:
                                         tessera_guard_count/_name/_address, which Python binds by name
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from . import answers, lifecycle, recorder_gen, registry, submits
from .dispatch import RETURN_FAILURE

# What a command returns when it can be neither run nor forwarded, as C: dispatch.RETURN_FAILURE's values.
FAILURE_BY_RETURN_TYPE = {
    kind: None if kind == "void" else "NULL" if value is None
    else "VK_ERROR_INITIALIZATION_FAILED" if kind == "VkResult" else str(value)
    for kind, value in RETURN_FAILURE.items()}

RUNTIME = Path(__file__).with_name("runtime")   # the shims' static C, compiled with what is generated here


# Declarations cffi needs to call the table functions from Python.
CDEF = """
int tessera_guard_count(void);
const char* tessera_guard_name(int index);
PFN_vkVoidFunction tessera_guard_address(int index);
void tessera_note_next(int index, PFN_vkVoidFunction fn);
void tessera_thread_counts(uint64_t *counts);
"""


def thread_counts(ffi, lib) -> str:
    """What the shim did for threads Python does not know (runtime/python_runner.c), for TESSERA_LOG=info."""
    counts = ffi.new("uint64_t[3]")
    lib.tessera_thread_counts(counts)
    return (f"Python thread states kept for threads that called Vulkan: {counts[0]} "
            f"({counts[1]} deleted at their thread's exit); hooks run on the runner thread: {counts[2]}")


def _off_thread(name: str, cmd, ret: str, seen: str) -> tuple[str, str]:
    """C for calling `name`'s hook on the runner thread: (the arguments' struct and the function the
    runner calls, before the guard; the statements inside the guard, Python usable)."""
    members = "".join(f"    {p.fullType}{' *' if p.fixedSizeArray else ''} {p.name};\n" for p in cmd.params)
    args = ", ".join(f"a->{p.name}" for p in cmd.params)
    result = "" if ret == "void" else f"    {ret} result;\n"
    store = "" if ret == "void" else "a->result = "
    outside = (f"struct tessera_args_{name} {{\n{members}{result}}};\n"
               f"static void tessera_call_{name}(void *p)\n{{\n"
               f"    struct tessera_args_{name} *a = p;\n"
               + (f"    {seen.replace('commandBuffer', 'a->commandBuffer')}\n" if seen else "") +
               f"    {store}hook_{name}({args});\n}}\n")
    init = ", ".join([p.name for p in cmd.params] + ([] if ret == "void" else ["0"]))   # every member: -Wextra
    done = "return;" if ret == "void" else "return a.result;"
    inside = (f"        if (__builtin_expect(tessera_off_python_thread(), 0)) {{\n"
              f"            struct tessera_args_{name} a = {{{init}}};\n"
              f"            if (tessera_run_on_python(tessera_call_{name}, &a, \"{name}\")) {done}\n"
              f"            goto forward;\n"
              f"        }}\n")
    return outside, inside


def c_source(hooks: Iterable[str], recorded: dict[str, "recorder_gen.Recorded"] | None = None,
             submit_path: "submits.SubmitPath | None" = None,
             answered: dict[str, "answers.Answered"] | None = None) -> str:
    """Guards for `hooks` (canonical command names, in the order of the table); the commands in
    `recorded` first try the C recording path (recorder_gen.py), and with a `submit_path` the
    submits first try the C submit path (submits.py): both need no Python at all. The commands in
    `answered` are answered in C once Python has given a final answer (answers.py)."""
    vk = registry.load()
    names = list(hooks)
    recorded = recorded or {}
    answered = answered or {}
    unknown = (set(recorded) | set(answered)) - set(names)
    if unknown:
        raise ValueError(f"recorded or answered commands that are not hooked: {sorted(unknown)}")
    out = []
    for index, name in enumerate(names):
        cmd = vk.commands[name]
        params = ", ".join(f"{p.fullType} {p.name}" for p in cmd.params) or "void"
        args = ", ".join(p.name for p in cmd.params)
        ret = cmd.returnType
        if ret not in FAILURE_BY_RETURN_TYPE:
            raise ValueError(f"{name}: no failure value for return type {ret!r}")
        failure = FAILURE_BY_RETURN_TYPE[ret]
        if ret == "void":
            call_hook = f"hook_{name}({args}); return;"
            forward = f"if (next) next({args});"
        else:
            call_hook = f"return hook_{name}({args});"
            forward = f"return next ? next({args}) : {failure};"
        if name in answered:
            call_hook = answers.call_hook(name, index, answered[name])
        fast = recorder_gen.fast_path(name, index, recorded[name]) if name in recorded else ""
        if recorded and name in lifecycle.COMMANDS:   # a shim recording in C also begins and ends in C
            fast = lifecycle.fast_path(name, index)
        if submit_path is not None and name in submits.COMMANDS:
            fast = submits.fast_path(name, index, submit_path)
        if submit_path is not None and submit_path.queue_labels and name in submits.LABEL_COMMANDS:
            fast = submits.label_fast_path(name, submit_path)
        if submit_path is not None and submit_path.in_c and name in submits.WAIT_COMMANDS:
            fast = submits.wait_fast_path(name, index)
        if submit_path is not None and submit_path.report and name == submits.PRESENT:
            fast = submits.present_fast_path(name, index)
        # A Python hook of a command buffer ends C's hold on its open render pass (runtime/recorder.c).
        seen = ("tessera_cb_python_seen((void *)commandBuffer); "
                if name.startswith("vkCmd") and cmd.params[0].type == "VkCommandBuffer" else "")
        # From a thread Python does not know, in a Python application, the hook runs on the runner
        # (runtime/python_runner.c); answered queries keep their own path (they run at start-up).
        off_thread = "" if name in answered else _off_thread(name, cmd, ret, seen)
        out.append(
            f"static {ret} hook_{name}({params});\n"
            + (off_thread and off_thread[0]) +
            f"static {ret} guard_{name}({params})\n{{\n"
            + fast +
            f"    if (__builtin_expect(tessera_python_usable(), 1)) {{\n"
            + (off_thread and off_thread[1]) +
            f"        tessera_keep_thread_state();\n"
            f"        {seen}{call_hook}\n    }}\n"
            + ("forward:;\n" if off_thread else "") +
            f"    PFN_{name} next = (PFN_{name})tessera_next_of({index});\n"
            f"    {forward}\n}}\n")
    table_names = ",\n    ".join(f'"{n}"' for n in names)
    table_pointers = ",\n    ".join(f"(PFN_vkVoidFunction)guard_{n}" for n in names)
    return (f"#define TESSERA_GUARD_COUNT {len(names)}\n"
            + recorder_gen.c_defines()
            + submits.c_defines()
            + (RUNTIME / "guards.c").read_text()
            + (RUNTIME / "python_runner.c").read_text()
            + recorder_gen.formats_table(names, recorded)
            + recorder_gen.support_c()
            + submits.support_c()
            + lifecycle.support_c()
            + (submits.in_c_support(submit_path) if submit_path is not None else "")
            + answers.support_c()
            + "".join(out)
            + f"static const char* const tessera_guard_names[] = {{\n    {table_names}\n}};\n"
            + f"static const PFN_vkVoidFunction tessera_guard_pointers[] = {{\n    {table_pointers}\n}};\n"
            + (RUNTIME / "guard_table.c").read_text())
