"""Generator: queries a shim answers in Python once, then in C (`Answered` rows of vkapi/intercepts.py).

Some of the driver's answers cannot change while the object asked lives: the physical devices of
an instance and their groups (the backend's, fixed), a physical device's extension list and
properties (the backend's plus the emulated identity). The loader asks them again and again: per
application vkEnumeratePhysicalDeviceGroups, loader 1.3.239 asks the driver for the groups four
times and for each physical device's properties and extension list twice, each a Python hook.

For a command whose row says `answered=Answered(...)`, the guard (vkapi/guards.py), while Python
is usable and the row's `when` holds:
  - a kept answer for (command, first parameter): written in C, per the two-call idiom for an
    array (the count query; min(*pCount, total) items and VK_INCOMPLETE when the array is short)
    or copied whole for one output struct;
  - otherwise the Python hook. When the trampoline declared its answer final
    (`tessera_answer_final()`: every hook of the call ran without an exception, dispatch.py) and
    the output was written (VK_SUCCESS and a non-NULL array; always for a void query), the guard
    keeps a copy of the output.
Of an array item with sType/pNext only the members after them are kept and written: the
application's sType and pNext are never touched. Python states when answers die:
`tessera_answers_forget(handle)` drops every answer kept for that handle (icd/instance.py, at
vkDestroyInstance, for the instance and each of its physical devices, before the backend frees
them: their addresses may be reused). Once Python is gone the guard forwards as before and kept
answers are not used. Answers are read and written under one mutex (copies take well under a
microsecond; these are not per-frame commands). That static C is vkapi/runtime/answers.c; this
module emits only each answered command's statements (`call_hook`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import registry


@dataclass(frozen=True)
class Answered:
    """The command's answer for its first parameter (a dispatchable handle) is fixed once Python
    gave it. `when`: a C condition on the parameters under which that holds (other calls always
    go to Python); every parameter but the handle and the output must appear in it."""
    when: str | None = None


RUNTIME_C = Path(__file__).with_name("runtime") / "answers.c"   # the static C of kept answers

CDEF = """
void tessera_answer_final(void);
void tessera_answers_forget(void *handle);
"""


def support_c() -> str:
    """The answers' support C (vkapi/runtime/answers.c), as it is."""
    return RUNTIME_C.read_text()


@dataclass(frozen=True)
class _Shape:
    handle: str            # first parameter
    count: str | None      # uint32_t* count of the two-call idiom, or None for one output struct
    out: str               # output parameter
    item: str              # its type
    offset: str            # C expression: first byte of an item that is written ("0", or past pNext)


def shape(name: str, spec: Answered) -> _Shape:
    """What the kept answer of `name` is, from the registry; ValueError for a command of another shape."""
    vk = registry.load()
    cmd = vk.commands[name]
    params = cmd.params
    if not params or params[0].type not in vk.handles or not vk.handles[params[0].type].dispatchable:
        raise ValueError(f"{name}: an answered command's first parameter must be a dispatchable handle")
    out = params[-1]
    if not out.pointer or out.const:
        raise ValueError(f"{name}: an answered command's last parameter must be its output")
    count = None
    if out.length is not None:
        count = params[-2] if len(params) >= 3 else None
        if count is None or count.name != out.length or count.type != "uint32_t" or not count.pointer:
            raise ValueError(f"{name}: an answered array must follow its uint32_t* count (the two-call idiom)")
        if cmd.returnType != "VkResult":
            raise ValueError(f"{name}: an answered enumeration must return VkResult")
    elif cmd.returnType != "void":
        raise ValueError(f"{name}: an answered single-struct query must return void")
    fixed = {params[0].name, out.name} | ({count.name} if count else set())
    free = [p.name for p in params if p.name not in fixed and (spec.when is None or p.name not in spec.when)]
    if free:
        raise ValueError(f"{name}: parameters {free} would not be part of the answer's key: name them in `when`")
    offset = "0"
    struct = vk.structs.get(out.type)
    if struct is not None and [m.name for m in struct.members[:2]] == ["sType", "pNext"]:
        if count is None:
            raise ValueError(f"{name}: an answered single struct with a pNext chain is not supported")
        if len(struct.members) < 3:
            raise ValueError(f"{name}: {out.type} has nothing but sType and pNext")
        offset = f"offsetof({out.type}, {struct.members[2].name})"
    return _Shape(params[0].name, count.name if count else None, out.name, out.type, offset)


def call_hook(name: str, index: int, spec: Answered) -> str:
    """C statements (inside the guard, Python usable) answering `name` from what was kept, else
    calling its hook and keeping a final answer; they return."""
    s = shape(name, spec)
    args = ", ".join(p.name for p in registry.load().commands[name].params)
    geometry = f"sizeof({s.item}), {s.offset}"
    if s.count is not None:
        answered = (f"int64_t total = tessera_answer_get({index}, (const void *){s.handle}, {s.count}, {s.out}, "
                    f"{geometry});\n"
                    f"        if (total >= 0)\n"
                    f"            return {s.out} && *{s.count} < total ? TESSERA_ANSWER_INCOMPLETE\n"
                    f"                                                    : TESSERA_ANSWER_SUCCESS;\n"
                    f"        tessera_answer_is_final = 0;\n"
                    f"        VkResult r = hook_{name}({args});\n"
                    f"        if (tessera_answer_is_final && r == TESSERA_ANSWER_SUCCESS && {s.out})\n"
                    f"            tessera_answer_keep({index}, (const void *){s.handle}, *{s.count}, {s.out}, "
                    f"{geometry});\n"
                    f"        tessera_answer_is_final = 0;\n"
                    f"        return r;")
        plain = f"return hook_{name}({args});"
    else:
        answered = (f"uint32_t one = 1;\n"
                    f"        if (tessera_answer_get({index}, (const void *){s.handle}, &one, {s.out}, "
                    f"{geometry}) >= 0) return;\n"
                    f"        tessera_answer_is_final = 0;\n"
                    f"        hook_{name}({args});\n"
                    f"        if (tessera_answer_is_final && {s.out})\n"
                    f"            tessera_answer_keep({index}, (const void *){s.handle}, 1, {s.out}, {geometry});\n"
                    f"        tessera_answer_is_final = 0;\n"
                    f"        return;")
        plain = f"hook_{name}({args}); return;"
    if spec.when is None:
        return answered
    return f"if ({spec.when}) {{\n        {answered}\n        }}\n        {plain}"
