"""Generator: the C that records commands in a per-command-buffer arena, inside their guards.

For each command a shim declares `Recorded` (vkapi/recorder.py, in the intercept table) this module
checks its parameters against the registry, gives each a format code (`formats`, the layout is
vkapi/recorder.py's docstring) and emits the C statements that append its record and forward the
call (`fast_path`), all inside the command's guard (vkapi/guards.py). The static C they call (the
command-buffer map, the arenas, the t<tag> labels) is vkapi/runtime/recorder.c, read as it is
(`support_c`); this module emits only per-command text, the format table and the #defines that
file needs (`c_defines`). Build time only: the shims read the records with vkapi/recorder.py.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from . import registry
from .recorder import Recorded

RUNTIME_C = Path(__file__).with_name("runtime") / "recorder.c"


_SCALAR_TYPES_SIGNED = {"int32_t", "int64_t", "int16_t", "int8_t"}


def _plain(struct_name: str) -> bool:
    """A struct copyable byte for byte: no pointers, no pNext."""
    vk = registry.load()
    s = vk.structs.get(struct_name)
    return s is not None and not s.sType and all(not m.pointer for m in s.members)


def _flat(struct_name: str, chained: bool) -> bool:
    """A struct with no pointers in it (by-value struct members included), except, when `chained`,
    its own pNext (next to an sType)."""
    vk = registry.load()
    s = vk.structs.get(struct_name)
    if s is None or (bool(s.sType) and not chained):
        return False
    for m in s.members:
        if m.pointer:
            if not (chained and m.name == "pNext" and s.sType):
                return False
        elif m.type in vk.structs and not _flat(m.type, False):
            return False
    return True


def info_pointers(struct_name: str) -> list | None:
    """The pointer members the I code copies with an info struct, in member order, or None when
    `struct_name` is not one: a struct with sType and pNext whose other members are scalars,
    handles or pointer-free structs, or `const` pointers to structs (themselves pointer-free but for
    their own pNext), each either an array counted by another member (its registry `length`) or
    one optional struct (no `length`)."""
    vk = registry.load()
    s = vk.structs.get(struct_name)
    if s is None or not s.sType or not s.members or s.members[1].name != "pNext":
        return None
    names = {m.name for m in s.members}
    pointers = [m for m in s.members[2:] if m.pointer]
    for m in pointers:
        if (not m.fullType.startswith("const ") or m.fullType.count("*") != 1 or not _flat(m.type, True)
                or (m.length and m.length not in names)):
            return None
        if m.length:
            count = next(c for c in s.members if c.name == m.length)
            if count.pointer or count.type not in ("uint32_t", "uint64_t", "size_t"):
                return None
    if any(m.type in vk.structs and not _flat(m.type, False) for m in s.members[2:] if not m.pointer):
        return None
    return pointers


def info_code(struct_name: str, pointers) -> str:
    """I<Struct>, then .<member>:<count> per array and .<member> per single struct pointer."""
    return "I" + struct_name + "".join(f".{m.name}:{m.length}" if m.length else f".{m.name}" for m in pointers)


def formats(name: str, spec: Recorded) -> list[str]:
    """The format code of each parameter after the command buffer (see the module docstring)."""
    vk = registry.load()
    cmd = vk.commands[name]
    if cmd.params[0].type != "VkCommandBuffer" or cmd.returnType != "void":
        raise ValueError(f"{name}: only void vkCmd* commands can be recorded")
    if spec.executes:
        if name != "vkCmdExecuteCommands" or spec != Recorded(executes=True):
            raise ValueError(f"{name}: only vkCmdExecuteCommands is recorded as secondaries executed, and as nothing else")
        return ["X"]
    if spec.fold is not None:
        if (spec.tagged or spec.fields or spec.strings or spec.label_depth or spec.dependencies
                or spec.opens_pass or spec.closes_pass):   # python_if: such a call takes Python, not folded
            raise ValueError(f"{name}: a folded record has only its count and sums")
        return ["F"] + ["Q"] * len(spec.fold)
    if spec.dependencies:
        if spec.tagged or spec.fields or spec.strings or spec.python_if or spec.opens_pass or spec.closes_pass \
                or not _dependency_params(cmd):
            raise ValueError(f"{name}: a dependency record reduces VkDependencyInfo parameters, nothing else")
        return ["D", "Q", "Q"]
    if not spec.record:
        if not spec.forward or spec.tagged or spec.fields or spec.strings or spec.label_depth \
                or spec.opens_pass or spec.closes_pass:
            raise ValueError(f"{name}: a command C only forwards has nothing else recorded")
        return []
    codes = []
    for p in cmd.params[1:]:
        if spec.fields is not None and p.name not in spec.fields and p.name not in spec.strings:
            codes.append("-")
        elif p.name in spec.strings:
            codes.append(f"S{p.type}.{spec.strings[p.name]}")
        elif p.pointer:
            pointers = None if p.length else info_pointers(p.type)
            if pointers is not None and p.fullType == f"const {p.type}*":
                codes.append(info_code(p.type, pointers))
                continue
            if not (p.length and _plain(p.type) and p.fullType.startswith("const ")):
                raise ValueError(f"{name}.{p.name}: pointer parameters are recorded only as arrays of plain "
                                 "structs or info structs (info_pointers)")
            codes.append(f"A{p.type}")
        elif p.type in _SCALAR_TYPES_SIGNED:
            codes.append("q")
        elif p.type in ("float", "double"):
            raise ValueError(f"{name}.{p.name}: floating-point parameters are not recorded")
        else:
            codes.append("Q")
    return ["T" if spec.tagged else "R"] + codes


def c_defines() -> str:
    """The #defines vkapi/runtime/recorder.c needs: the t<tag> label's prefix (tessera.schemas.labels)."""
    from tessera.schemas.labels import TAG_PREFIX
    return f'#define TESSERA_TAG_PREFIX "{TAG_PREFIX}"        /* tessera.schemas.labels */\n'


def support_c() -> str:
    """The recording support C (vkapi/runtime/recorder.c), as it is."""
    return RUNTIME_C.read_text()


def _device_struct() -> str:
    """runtime/recorder.c's `tessera_device`, for cffi: one declaration of the struct Python fills, its
    table sized by `%d` (cffi's declarations are not preprocessed: TESSERA_GUARD_COUNT is C's)."""
    text = RUNTIME_C.read_text()
    start = text.index("typedef struct tessera_device {")
    end = text.index("} tessera_device;", start) + len("} tessera_device;")
    return text[start:end].replace("%", "%%").replace("TESSERA_GUARD_COUNT", "%d") + "\n"


CDEF = _device_struct() + """int tessera_cb_register(void *handle, tessera_device *dev, int primary, uint64_t pool);
void tessera_cb_unregister(void *handle);
int tessera_cb_records(void *handle, uint8_t **data, size_t *used, uint64_t *dropped);
void tessera_cb_applied(void *handle, int kept);
void tessera_cb_clear(void *handle);
void tessera_cb_reset(void *handle);
int tessera_cb_whole(void *handle);
long tessera_records_tags(const uint8_t *a, size_t n, uint64_t *tags, size_t max);
long tessera_records_same(const uint8_t *a, const uint8_t *b, size_t n, uint64_t *tags, size_t max);
uint64_t tessera_records_hash(const uint8_t *a, size_t n);
void tessera_cb_set_python(void *handle, int on);
void tessera_cb_set_python_brackets(void *handle, int on);
uint64_t tessera_next_tag(void);
const char *tessera_record_format(int index);
"""

# Commands that take Python in a buffer whose brackets Python records (tessera_cb_set_python_brackets: the
# driver's measured counters), with the render pass begins (Recorded.opens_pass); a pass's end follows its begin.
BRACKETED = ("vkCmdDispatch", "vkCmdDispatchBase")

# Types the recording C needs declared even when a shim hooks no label command.
LABEL_COMMANDS = ("vkCmdBeginDebugUtilsLabelEXT", "vkCmdEndDebugUtilsLabelEXT",
                  "vkCmdDebugMarkerBeginEXT", "vkCmdDebugMarkerEndEXT")


def fast_path(name: str, index: int, spec: Recorded) -> str:
    """C statements recording `name` when its command buffer is registered; they return."""
    vk = registry.load()
    cmd = vk.commands[name]
    codes = formats(name, spec)
    if spec.executes:   # runtime/lifecycle.c: the secondaries' recordings are C's, or the hooks run
        return f"    if (tessera_execute_in_c(commandBuffer, commandBufferCount, pCommandBuffers, {index})) return;\n"
    if spec.fold is not None:
        return _fold_path(name, index, spec)
    if spec.dependencies:
        return _dependency_path(name, index, spec)
    if not spec.record:
        args = ", ".join(p.name for p in cmd.params)
        # python_if: such a call takes the Python hook (e.g. a bind point only the driver knows)
        unless = f" && !({c_constants(spec.python_if)})" if spec.python_if else ""
        unless += " && rec->pass_in_c" if spec.in_c_pass else ""
        return ("    tessera_cb *rec = tessera_cb_find((void *)commandBuffer);\n"
                f"    if (rec && !rec->python_path{unless}) {{\n"
                f"        PFN_{name} next = (PFN_{name})rec->dev->next[{index}];\n"
                f"        if (next) next({args});\n"
                "        return;\n"
                "    }\n")
    tagged = spec.tagged
    params = cmd.params[1:]
    slot_codes = codes[1:]
    recorded = [(p, c) for p, c in zip(params, slot_codes) if c != "-"]
    when = "rec && !rec->python_path"
    if spec.opens_pass or name in BRACKETED:
        when += " && !rec->python_brackets"
    if spec.closes_pass:
        when += " && rec->pass_in_c"
    if spec.python_if:
        when += f" && !({c_constants(spec.python_if)})"
    lines = ["    tessera_cb *rec = tessera_cb_find((void *)commandBuffer);",
             f"    if ({when}) {{"]
    if spec.label_depth > 0:
        lines.append("        rec->label_depth++;")
    elif spec.label_depth < 0:   # closing a label opened before the buffer: its submits plan in Python
        lines.append("        if (--rec->label_depth < 0) rec->python_submits = 1;")
    sizes = _measure(recorded, lines, spec.tag_labels)
    nslots = len(recorded) + (1 if tagged else 0)
    extra = " + ".join(sizes) or "0"
    if tagged:
        lines.append("        uint64_t tag = tessera_next_tag();")
        lines.append("        int pushed = tessera_push_tag(commandBuffer, rec->dev, tag);")
    lines.append(f"        uint64_t *slot = tessera_record(rec, {index}, {nslots}, {extra});")
    lines.append("        if (slot) {")
    i = 0
    if tagged:
        lines.append("            slot[0] = tag;")
        i = 1
    for p, c in recorded:
        if c == "Q":
            lines.append(f"            slot[{i}] = (uint64_t)(uintptr_t){p.name};" if p.type in vk.handles
                         and vk.handles[p.type].dispatchable else f"            slot[{i}] = (uint64_t){p.name};")
        elif c == "q":
            lines.append(f"            slot[{i}] = (uint64_t)(int64_t){p.name};")
        elif c.startswith("S") and spec.tag_labels:
            lines.append(f"            slot[{i}] = t_{p.name} ? t_{p.name} : n_{p.name};")
        else:
            lines.append(f"            slot[{i}] = n_{p.name};")
        i += 1
    if sizes:
        lines.append(f"            uint8_t *extra = (uint8_t *)(slot + {nslots});")
        lines += _copy_extra(recorded)
    lines.append("        }")
    args = ", ".join(p.name for p in cmd.params)
    if spec.forward:
        lines.append(f"        PFN_{name} next = (PFN_{name})rec->dev->next[{index}];")
        lines.append(f"        if (next) next({args});")
    if spec.opens_pass:   # the pass's t<tag> label, if any, stays open until its end
        lines.append("        rec->pass_in_c = 1;")
        lines.append(f"        rec->pass_label = {'pushed' if tagged else '0'};")
    elif tagged:
        lines.append("        if (pushed) tessera_pop_tag(commandBuffer, rec->dev);")
    if spec.closes_pass:
        lines.append("        if (rec->pass_label) tessera_pop_tag(commandBuffer, rec->dev);")
        lines.append("        rec->pass_in_c = 0;")
        lines.append("        rec->pass_label = 0;")
    lines.append("        return;")
    lines.append("    }")
    return "\n".join(lines) + "\n"


def _measure(recorded, lines: list[str], tag_labels: bool = False) -> list[str]:
    """C measuring the bytes each array, string and info parameter adds to the record, appended to
    `lines`; returns their padded sizes as C expressions."""
    sizes = []
    for p, c in recorded:
        if c.startswith("A"):
            lines.append(f"        size_t n_{p.name} = {p.name} ? (size_t)({p.length}) * sizeof({p.type}) : 0;")
            sizes.append(f"((n_{p.name} + 7) & ~(size_t)7)")
        elif c.startswith("S"):
            member = c.split(".", 1)[1]
            lines.append(f"        const char *s_{p.name} = {p.name} && {p.name}->{member} ? {p.name}->{member} : \"\";")
            if tag_labels:   # a t<tag> label: its number in the slot, no text (Recorded.tag_labels)
                lines.append(f"        uint64_t t_{p.name} = tessera_tag_label(s_{p.name});")
                lines.append(f"        size_t n_{p.name} = t_{p.name} ? 0 : strlen(s_{p.name});")
            else:
                lines.append(f"        size_t n_{p.name} = strlen(s_{p.name});")
            sizes.append(f"((n_{p.name} + 7) & ~(size_t)7)")
        elif c.startswith("I"):
            parts = [f"((sizeof({p.type}) + 7) & ~(size_t)7)"]
            for k, m in enumerate(info_pointers(p.type)):
                n = f"(size_t){p.name}->{m.length}" if m.length else "1"
                lines.append(f"        size_t c{k}_{p.name} = {p.name} && {p.name}->{m.name} ? {n} : 0;")
                parts.append(f"((c{k}_{p.name} * sizeof({m.type}) + 7) & ~(size_t)7)")
            lines.append(f"        size_t n_{p.name} = {p.name} ? {' + '.join(parts)} : 0;")
            sizes.append(f"n_{p.name}")
    return sizes


def _copy_extra(recorded) -> list[str]:
    """C copying each array, string and info parameter after the record's slots (`extra`)."""
    lines = []
    for p, c in recorded:
        if c.startswith("A"):
            lines.append(f"            if (n_{p.name}) memcpy(extra, {p.name}, n_{p.name});")
            lines.append(f"            extra += (n_{p.name} + 7) & ~(size_t)7;")
        elif c.startswith("S"):
            lines.append(f"            memcpy(extra, s_{p.name}, n_{p.name});")
            lines.append(f"            extra += (n_{p.name} + 7) & ~(size_t)7;")
        elif c.startswith("I"):
            lines += _info_copy(p)
    return lines


def _struct_copy(struct_name: str, dst: str, src: str, indent: str) -> list[str]:
    """C copying a struct member by member into the record's zeroed bytes (tessera_record): its padding
    stays zero, not whatever the application's stack held, so that equal recordings have equal records
    (vkapi/replay.py); pNext and the pointers stay NULL (the caller sets those it copies)."""
    lines = []
    for m in registry.load().structs[struct_name].members:
        if m.pointer:
            continue
        if m.fixedSizeArray:
            lines.append(f"{indent}memcpy({dst}->{m.name}, {src}->{m.name}, sizeof {dst}->{m.name});")
        else:
            lines.append(f"{indent}{dst}->{m.name} = {src}->{m.name};")
    return lines


def _info_copy(p) -> list[str]:
    """C copying an info struct parameter and what its pointers point to into the record (the I code)."""
    v = f"i_{p.name}"
    pointers = info_pointers(p.type)
    lines = [f"            if (n_{p.name}) {{",
             f"                {p.type} *{v} = ({p.type} *)extra;",
             *_struct_copy(p.type, v, p.name, "                ")]
    if pointers:
        lines.append(f"                uint8_t *at = extra + ((sizeof({p.type}) + 7) & ~(size_t)7);")
    for k, m in enumerate(pointers):
        c = f"c{k}_{p.name}"
        # Not the application's address: Python points it at the copy, and equal recordings stay equal (replay.py)
        lines.append(f"                {v}->{m.name} = {c} ? (void *)(uintptr_t)TESSERA_COPIED : NULL;")
        if m.length:
            lines.append(f"                {v}->{m.length} = {c};")
        lines.append(f"                for (size_t k = 0; k < {c}; k++) {{")
        lines += _struct_copy(m.type, f"(({m.type} *)at + k)", f"({p.name}->{m.name} + k)", "                    ")
        lines.append("                }")
        lines.append(f"                at += ({c} * sizeof({m.type}) + 7) & ~(size_t)7;")
    lines += ["            }",
              f"            extra += n_{p.name};"]
    return lines


def _fold_path(name: str, index: int, spec: Recorded) -> str:
    """Fast path of a folded command: add to the last record when it is the same command (a call
    whose `python_if` holds takes the Python hook)."""
    cmd = registry.load().commands[name]
    n = 1 + len(spec.fold)
    unless = f" && !({c_constants(spec.python_if)})" if spec.python_if else ""
    lines = ["    tessera_cb *rec = tessera_cb_find((void *)commandBuffer);",
             f"    if (rec && !rec->python_path{unless}) {{",
             "        uint64_t *slot;",
             f"        if (rec->last_index == {index} && rec->used)",
             "            slot = (uint64_t *)(rec->data + rec->last + 8);",
             f"        else if ((slot = tessera_record(rec, {index}, {n}, 0)) != NULL)",
             f"            memset(slot, 0, {n} * sizeof(uint64_t));",
             "        if (slot) {",
             "            slot[0] += 1;"]
    for i, expr in enumerate(spec.fold, start=1):
        lines.append(f"            slot[{i}] += (uint64_t)({expr});")
    lines.append("        }")
    args = ", ".join(p.name for p in cmd.params)
    if spec.forward:
        lines.append(f"        PFN_{name} next = (PFN_{name})rec->dev->next[{index}];")
        lines.append(f"        if (next) next({args});")
    lines += ["        return;", "    }"]
    return "\n".join(lines) + "\n"


def c_constants(expr: str) -> str:
    """`expr` with each {VK_NAME} replaced by that registry enum value or flag bit."""
    vk = registry.load()

    def value(m: re.Match) -> str:
        for group in (*vk.enums.values(), *vk.bitmasks.values()):
            for f in getattr(group, "fields", None) or getattr(group, "flags", ()):
                if f.name == m.group(1):
                    return f"{f.value:#x}" if f.value >= 0 else str(f.value)
        raise ValueError(f"{m.group(1)} is not a registry enum value or flag")
    return re.sub(r"\{(VK_[A-Z0-9_]+)\}", value, expr)


def _dependency_params(cmd) -> list:
    return [p for p in cmd.params[1:] if p.type == "VkDependencyInfo" and p.pointer]


# The barrier arrays of a VkDependencyInfo: (count member, array member, whether image layouts apply).
_BARRIER_ARRAYS = (("memoryBarrierCount", "pMemoryBarriers", False),
                   ("bufferMemoryBarrierCount", "pBufferMemoryBarriers", False),
                   ("imageMemoryBarrierCount", "pImageMemoryBarriers", True))


def _dependency_path(name: str, index: int, spec: Recorded) -> str:
    """Fast path of a synchronization2 command: one D record (Recorded.dependencies), or Python."""
    vk = registry.load()
    cmd = vk.commands[name]
    bottom = next(f.value for f in vk.bitmasks["VkPipelineStageFlagBits2"].flags
                  if f.name == "VK_PIPELINE_STAGE_2_BOTTOM_OF_PIPE_BIT")
    values = {f.name: f.value for f in vk.enums["VkImageLayout"].fields}
    layouts = [values[n] for n in spec.python_layouts]
    lines = ["    tessera_cb *rec = tessera_cb_find((void *)commandBuffer);",
             "    if (rec && !rec->python_path) {",
             "        uint64_t barriers = 0, src = 0, dst = 0;",
             "        int python = 0;"]
    for p in _dependency_params(cmd):
        count = f"(size_t)({p.length})" if p.length else "1"
        lines += [f"        for (size_t d = 0; {p.name} && d < {count}; d++) {{",
                  f"            const VkDependencyInfo *info = &{p.name}[d];",
                  "            python |= info->pNext != NULL;"]
        for n, array, images in _BARRIER_ARRAYS:
            lines += [f"            for (uint32_t k = 0; info->{array} && k < info->{n}; k++) {{",
                      f"                python |= info->{array}[k].pNext != NULL;",
                      f"                src |= info->{array}[k].srcStageMask;",
                      f"                if (!(info->{array}[k].dstStageMask & {bottom:#x}ull))"
                      f" dst |= info->{array}[k].dstStageMask;"]
            for value in layouts if images else ():
                lines.append(f"                python |= info->{array}[k].oldLayout == {value} || "
                             f"info->{array}[k].newLayout == {value};")
            lines += ["                barriers++;", "            }"]
        lines.append("        }")
    args = ", ".join(p.name for p in cmd.params)
    lines += ["        if (!python) {",
              f"            uint64_t *slot = tessera_record(rec, {index}, 3, 0);",
              "            if (slot) { slot[0] = barriers; slot[1] = src; slot[2] = dst; }",
              f"            PFN_{name} next = (PFN_{name})rec->dev->next[{index}];",
              f"            if (next) next({args});",
              "            return;",
              "        }",
              "    }"]
    return "\n".join(lines) + "\n"


def tag_slot(name: str, spec: Recorded | None) -> int:
    """The slot of a record of `name` that may hold a tag (-1: none): a tagged record's first, or the
    string of a Recorded.tag_labels command (a tag when C recorded it as one)."""
    if spec is None:
        return -1
    codes = formats(name, spec)
    if codes[:1] == ["T"]:
        return 0
    if spec.tag_labels:
        slots = [c for c in codes[1:] if c != "-"]
        strings = [i for i, c in enumerate(slots) if c.startswith("S")]
        if len(strings) != 1:
            raise ValueError(f"{name}: Recorded.tag_labels needs exactly one recorded string")
        return strings[0]
    return -1


def formats_table(names: Iterable[str], recorded: dict[str, Recorded]) -> str:
    """C arrays of the format strings and the tag slots (tag_slot), by guard index ("" and -1 for
    commands not recorded)."""
    names = list(names)
    entries = ['"' + (",".join(formats(name, recorded[name])) if name in recorded else "") + '"' for name in names]
    slots = [str(tag_slot(name, recorded.get(name))) for name in names]
    return ("static const char *const tessera_record_formats[] = {\n    " + ",\n    ".join(entries) + "\n};\n"
            "static const signed char tessera_tag_slots[] = {" + ", ".join(slots) + "};\n")
