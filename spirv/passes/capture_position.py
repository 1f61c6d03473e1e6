"""Transform feedback of the clip-space position: a vertex shader that also writes gl_Position to buffer 0.

Role: the driver's measured visible primitives (icd/visible_prims.py, #27) capture each draw's
post-vertex-shader positions with the backend's VK_EXT_transform_feedback and cull them on the CPU.
This pass makes the capturing variant of a vertex entry point, in place:

  - `OpCapability TransformFeedback` and `OpExecutionMode <entry> Xfb`;
  - the Position output `XfbBuffer 0`, `XfbStride 16`, `Offset 0`: on the variable when the
    built-in is a variable of its own (`OpDecorate %v BuiltIn Position`, HLSL's SV_Position), on
    the output block's variable and its Position member (`OpMemberDecorate %gl_PerVertex 0 Offset 0`)
    when it is a member of gl_PerVertex, as glslang writes `layout(xfb_buffer = 0, xfb_stride = 16)
    out gl_PerVertex { layout(xfb_offset = 0) vec4 gl_Position; }`.

With the execution mode, a draw writes its primitives' positions only while transform feedback is
active (spec 30.1, "Transform Feedback"): outside it the pipeline draws as the application's.
Strips, fans and index buffers are written as independent primitives, in the order that keeps
their winding, and restarted strips are split where they restart: the capture is one vec4 per
vertex of each assembled primitive.

Refused (`CaptureError`, the caller then captures nothing): an entry point that is not a vertex
shader, a module that already declares Xfb (the application uses transform feedback), no Position
output, ClipDistance or CullDistance outputs (user planes cull what the CPU test would not see).
"""
from __future__ import annotations

from ..editor import ModuleEditor
from ..errors import SpirvError
from ..module import Module
from ..operands import decode_string

STRIDE = 16          # one vec4 per captured vertex


class CaptureError(SpirvError):
    """A shader whose positions this pass does not capture."""


def capture_position(module: Module, entry: str) -> None:
    """Make `entry` (a vertex entry point) write its Position output to transform feedback buffer 0."""
    ed = ModuleEditor(module)
    g = ed.g
    op = g.opcode
    vertex = g.enum_value("ExecutionModel", "Vertex")
    entries = [i for i in module.globals if i.opcode == op("OpEntryPoint") and decode_string(i.words, 2)[0] == entry]
    if len(entries) != 1 or entries[0].words[0] != vertex:
        raise CaptureError(f"no vertex entry point {entry!r}")
    function = entries[0].words[1]
    xfb = g.enum_value("ExecutionMode", "Xfb")
    if any(i.opcode == op("OpExecutionMode") and i.words[1] == xfb for i in module.globals):
        raise CaptureError("the shader uses transform feedback itself")
    builtin = g.enum_value("Decoration", "BuiltIn")
    names = {g.enum_value("BuiltIn", n): n for n in ("Position", "ClipDistance", "CullDistance")}
    direct: dict[str, int] = {}       # built-in -> variable
    members: dict[str, tuple[int, int]] = {}   # built-in -> (struct, member)
    for i in module.globals:
        if i.opcode == op("OpDecorate") and i.words[1] == builtin and i.words[2] in names:
            direct[names[i.words[2]]] = i.words[0]
        elif i.opcode == op("OpMemberDecorate") and i.words[2] == builtin and i.words[3] in names:
            members[names[i.words[3]]] = (i.words[0], i.words[1])
    interface = set(entries[0].words[decode_string(entries[0].words, 2)[1]:])
    output = g.enum_value("StorageClass", "Output")

    def output_variables_of(struct: int) -> list[int]:
        """The entry point's Output variables whose type points to `struct`."""
        out = []
        for v in interface:
            var = module.defs.get(v)
            if var is None or var.opcode != op("OpVariable") or var.words[2] != output:
                continue
            ptr = module.defs.get(var.words[0])
            if ptr is not None and ptr.opcode == op("OpTypePointer") and ptr.words[2] == struct:
                out.append(v)
        return out

    def outputs(name: str) -> list[tuple[int, int | None]]:
        """(variable, member or None) of the entry point's output built-in `name`."""
        found = []
        v = direct.get(name)
        if v is not None and v in interface and module.defs[v].words[2] == output:
            found.append((v, None))
        if name in members:
            struct, member = members[name]
            found += [(var, member) for var in output_variables_of(struct)]
        return found

    chains = (op("OpAccessChain"), op("OpInBoundsAccessChain"))
    constants = {i.result_id: i.words[2] for i in module.globals if i.opcode == op("OpConstant")}
    code = [i for f in module.functions for i in f.instructions()]

    def written(var: int, member: int | None) -> bool:
        """Whether the code reaches the output (a member: through an access chain naming it, or the
        whole block)."""
        for i in code:
            if i.opcode in chains:
                if i.words[2] == var and (member is None or constants.get(i.words[3]) == member):
                    return True
            elif var in i.words[1 if i.result_id else 0:]:
                return True
        return False

    for user in ("ClipDistance", "CullDistance"):
        if any(written(v, m) for v, m in outputs(user)):
            raise CaptureError(f"the shader writes {user} (user clip or cull planes are not tested)")
    position = outputs("Position")
    if len(position) != 1:
        raise CaptureError("no Position output" if not position else "several Position outputs")
    var, member = position[0]
    ed.add_capability("TransformFeedback")
    ed.add_global(ed.make("OpExecutionMode", function, xfb))
    ed.decorate(var, "XfbBuffer", 0)
    ed.decorate(var, "XfbStride", STRIDE)
    if member is None:
        ed.decorate(var, "Offset", 0)
    else:
        ed.decorate_member(members["Position"][0], member, "Offset", 0)
