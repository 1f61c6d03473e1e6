"""VK_ARM_tensors in the emulated Mali, through the real loader, layer, driver and backend (issue #14).

One run of apps/tensors_api.py (checks done in the app against numpy, reported per case), then:
its results, the validation-style messages of every refused call, and the driver's trace (each
tensor copy a `tensor copy` transfer (Arm stage `copy buffer`) with its real byte count)."""
from __future__ import annotations

import json
import math
import sys

import pytest
from integration_support import PYTHON, REPO, run

sys.path.insert(0, str(REPO / "tests" / "integration" / "apps"))
import tensors_api as app  # noqa: E402

VALIDATION_FAILED = -1000011001


@pytest.fixture(scope="module")
def result(shims, tmp_path_factory) -> dict:
    from tessera.tools.launch import LaunchConfig, environment

    session = tmp_path_factory.mktemp("tensors") / "session"
    out = run([PYTHON, REPO / "tests" / "integration" / "apps" / "tensors_api.py"], environment(LaunchConfig(session)))
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads(out.stdout.strip().splitlines()[-2])
    data["stderr"] = out.stderr
    data["session"] = session
    return data


def test_properties_and_format_features_are_honest(result):
    q = result["queries"]
    assert q["maxTensorDimensionCount"] >= 8
    assert q["shaderTensorSupportedStages"] == 0x20 | 0x10     # compute, fragment (test_tensor_extras.py)
    shader, src, dst = 1 << 39, 1 << 14, 1 << 15                 # TENSOR_SHADER, TRANSFER_SRC, TRANSFER_DST
    aliasing = 1 << 43                                           # TENSOR_IMAGE_ALIASING: OPTIMAL tensors only
    graph = 1 << 48                                              # TENSOR_DATA_GRAPH: fp32, what graphs run on
    assert tuple(q["features_f32"]) == (shader | src | dst | aliasing | graph, shader | src | dst | graph)
    assert tuple(q["features_bool"]) == (shader | src | dst | aliasing, shader | src | dst)
    assert q["features_rgba8"] == [0, 0]                          # not a one-component format
    assert q["device_requirements_size"] >= 4 * 5 * 6 * 4


@pytest.mark.parametrize("rank", range(1, 9))
def test_whole_copy_into_non_packed_tensor_matches_numpy(result, rank):
    assert result["copies"][str(rank)] == {"ok": True, "shape": list(app.SHAPES[rank])}


def test_multi_region_copy_with_offsets_matches_numpy(result):
    assert result["copies"]["regions"]["ok"] and result["copies"]["regions"]["nonzero"] == 2 * 3 * 4 + 3 * 4 * 6 + 1 + 5 * 8


@pytest.mark.parametrize("rank", range(1, 9))
@pytest.mark.parametrize("case", ["f32_oob", "f32_array4", "bool_not", "bool_not_oob_true", "u8_oob"])
def test_shader_reads_and_writes_match_numpy(result, case, rank):
    """Out-of-bounds reads (every dimension of the destination is one larger than the source) give
    the OutOfBoundsValue operand or zero; out-of-bounds array elements and writes are dropped."""
    assert result["shaders"][f"{case}_{rank}"] == {"ok": True, "mismatches": 0}


def test_tensor_barrier_orders_a_copy_before_a_dispatch(result):
    assert result["shaders"]["copy_barrier_dispatch"]["ok"]


@pytest.mark.parametrize("case, vuid", [
    ("optimal_with_strides", "VUID-VkTensorCreateInfoARM-pDescription-09720"),
    ("inner_stride", "pStrides[1] (8) must equal the size of one element"),
    ("rank_9", "VUID-VkTensorDescriptionARM-dimensionCount-09733"),
    ("strides_order", "VUID-VkTensorDescriptionARM-pStrides-09739"),
    ("zero_dimension", "VUID-VkTensorDescriptionARM-pDimensions-09734"),
    ("non_packed_without_feature", "tensorNonPacked feature is not enabled"),
])
def test_invalid_tensors_are_refused_with_a_clear_message(result, case, vuid):
    assert result["invalid"][case] == VALIDATION_FAILED
    assert any(line.startswith("tessera: VK_ARM_tensors: vkCreateTensorARM: ") and vuid in line
               for line in result["stderr"].splitlines())


def test_valid_edge_cases_are_accepted(result):
    assert result["invalid"]["optimal_packed"] == 0
    assert result["invalid"]["packed_strides_without_feature"] == 0


def test_invalid_copy_and_descriptor_are_skipped_with_a_message(result):
    assert result["invalid"]["bad_copy_left_dst_zero"] and result["invalid"]["wrong_descriptor_survived"]
    assert ("vkCmdCopyTensorARM: pRegions[0]: pSrcOffset[0] (1) + pExtent[0] (2) is beyond srcTensor's dimension 0 "
            "(2); the copy is not recorded") in result["stderr"]
    assert "vkUpdateDescriptorSets: pDescriptorWrites[0]: dstBinding 0 of dstSet is not a tensor binding" \
        in result["stderr"]
    assert "Traceback" not in result["stderr"]


def test_tensor_copies_are_transfers_with_their_real_bytes(result):
    from tessera.schemas import perfetto as pf

    packets = list(pf.read_packets(result["session"] / "gpu.perfetto-trace"))
    check = pf.check_render_stages(packets)
    assert check.problems == []
    specs = {iid: name for (_, iid), name in check.specs.items()}
    copies = [p.gpu_render_stage_event for p in packets if p.HasField("gpu_render_stage_event")
              and pf.extra(p.gpu_render_stage_event, "Transfer") == "tensor copy"]
    # Arm's driver vocabulary for the stage (its trace reader knows no "tensor copy")
    assert {specs[e.stage_iid] for e in copies} == {"copy buffer"}
    regions = 2 * 3 * 4 + 3 * 4 * 6 + 1 + 1 * 5 * 8
    want = [math.prod(app.SHAPES[r]) * 4 for r in range(1, 9)] + [regions * 4, 4 * 6 * 4]
    assert [int(pf.extra(e, "Bytes")) for e in copies] == want
    assert [pf.extra(e, "Regions") for e in copies] == ["1"] * 8 + ["4", "1"]
    assert all(pf.extra(e, "Workload") == "transfer" and pf.extra(e, "Command") == "vkCmdCopyTensorARM"
               for e in copies)


def test_merged_tensor_copies_carry_the_layers_tag_and_bytes(result):
    """The layer tags every vkCmdCopyTensorARM as a `tensor_copy` transfer, sized from the tensors it
    saw created (elements of each region x element size): in the merged trace each tensor copy slice
    is joined to that WORKLOAD (its tag is its t<tag> label) and carries the layer's byte count, equal
    to the driver's (so the merge shows it once: the driver's `Transfer`/`Bytes`/`Regions`, the same
    facts, are dropped, hostd/slice_args.py); the refused copy (bad region) is tagged too but never runs."""
    from tessera.hostd.merge import merge_session
    from tessera.schemas import frames as fr
    from tessera.schemas import perfetto as pf
    from tessera.schemas import workloads as batch

    session = result["session"]
    merged = merge_session(session, session / "merged-tensors.perfetto-trace")
    assert merged.events_without_metadata == 0
    stream = [f for log in session.rglob("*.spool") for f in fr.iter_file(log)] + \
             [f for log in session.rglob("*.tessera-log") for f in fr.iter_file(log)]
    assert [(f.type, p) for f in stream for p in batch.all_problems(f.type, f.payload())] == []
    described = batch.described(stream)
    tensor_tags = sorted(t for t, w in described.items() if w["kind"] == "tensor_copy")
    packets = list(pf.read_packets(session / "merged-tensors.perfetto-trace"))
    copies = [p.gpu_render_stage_event for p in packets if p.HasField("gpu_render_stage_event")
              and pf.extra(p.gpu_render_stage_event, "kind") == "tensor_copy"]
    regions = 2 * 3 * 4 + 3 * 4 * 6 + 1 + 1 * 5 * 8
    want = [math.prod(app.SHAPES[r]) * 4 for r in range(1, 9)] + [regions * 4, 4 * 6 * 4]
    assert len(tensor_tags) == len(want) + 1            # + the refused copy, tagged but not run
    # the driver wrote the same bytes (test_tensor_copies_are_transfers_with_their_real_bytes): no disagreement
    assert not [x.name for e in copies for x in e.extra_data if x.name.endswith("(driver)")]
    for e, nbytes in zip(copies, want, strict=True):
        tag = int(pf.extra(e, "tag"))
        assert pf.extra(e, "Labels") == f"t{tag}" and tag in tensor_tags
        assert pf.extra(e, "kind") == "tensor_copy" and pf.extra(e, "subtype") == "tensor copy"
        assert pf.extra(e, "command") == "vkCmdCopyTensorARM"
        assert int(pf.extra(e, "bytes")) == nbytes == described[tag]["bytes"]
        assert pf.extra(e, "Bytes") is None and pf.extra(e, "Transfer") is None     # each fact once
        assert e.name == f"Tensor copy, {nbytes} bytes"
    assert [pf.extra(e, "regions") for e in copies] == ["1"] * 8 + ["4", "1"]


def test_mlp_example_on_the_emulated_mali(tessera_env, tmp_path):
    """examples/mlp_tensors.py (in make demo) checks its own outputs against numpy; its trace has the
    two dispatches and the tensor copy of its 8x4 float output (128 bytes)."""
    from tessera.schemas import perfetto as pf

    out = run([PYTHON, REPO / "examples" / "mlp_tensors.py"], tessera_env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("mlp_tensors: OK") and "Mali" in out.stdout
    packets = list(pf.read_packets(tmp_path / "session" / "gpu.perfetto-trace"))
    specs = {iid: name for (_, iid), name in pf.check_render_stages(packets).specs.items()}
    stages = [(specs[p.gpu_render_stage_event.stage_iid], p.gpu_render_stage_event) for p in packets
              if p.HasField("gpu_render_stage_event")]
    assert [s for s, _ in stages] == ["compute", "compute", "copy buffer"]
    assert pf.extra(stages[2][1], "Transfer") == "tensor copy"
    assert pf.extra(stages[2][1], "Bytes") == "128"
    assert [pf.extra(e, "Items") for _, e in stages[:2]] == [str(8 * 32), str(32)]
