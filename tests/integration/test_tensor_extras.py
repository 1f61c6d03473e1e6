"""VK_ARM_tensors in the emulated Mali beyond test_tensors.py: image aliasing, arrays of tensors
indexed dynamically, descriptor update templates and push descriptors, more invalid usage (issue #14).

One run of apps/tensor_extras.py through the real loader, layer, driver and backend; the app
compares what the GPU left in memory with numpy and reports each case; this test checks the
report and the validation-style messages on stderr."""
from __future__ import annotations

import json

import pytest
from integration_support import PYTHON, REPO, run

VALIDATION_FAILED = -1000011001
CHECKS = ["image_to_tensor_copy", "image_to_tensor_shader", "tensor_copy_to_image", "tensor_shader_to_image"]


@pytest.fixture(scope="module")
def result(shims, tmp_path_factory) -> dict:
    from tessera.tools.launch import LaunchConfig, environment

    session = tmp_path_factory.mktemp("tensor-extras") / "session"
    # push2/push_template2 need VK_KHR_maintenance6, which no shipped Mali profile has: mali-g78 (no
    # profile) reports what the backend has (icd/profiles.py)
    out = run([PYTHON, REPO / "tests" / "integration" / "apps" / "tensor_extras.py"],
              environment(LaunchConfig(session, gpu="mali-g78")))
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads(out.stdout.strip().splitlines()[-2])
    data["stderr"] = out.stderr
    return data


@pytest.mark.parametrize("case", ["linear_rgba8", "linear_rg32f"])
@pytest.mark.parametrize("check", CHECKS)
def test_linear_image_and_linear_tensor_alias(result, case, check):
    """A LINEAR image and a LINEAR tensor with the image's strides, bound to the same memory: image
    writes are read through the tensor and tensor writes through the image, equal to numpy (rows
    padded: the backend's row pitch is above the row's bytes, so the strides matter)."""
    got = result["aliasing"][case]
    assert got["row_pitch"] > {"linear_rgba8": 5 * 4, "linear_rg32f": 3 * 8}[case]
    assert got[check] is True


@pytest.mark.parametrize("check", CHECKS)
def test_optimal_image_and_tensor_alias_through_the_tensor_aliasing_layout(result, check):
    """OPTIMAL image with VK_IMAGE_USAGE_TENSOR_ALIASING_BIT_ARM, OPTIMAL tensor with
    VK_TENSOR_USAGE_IMAGE_ALIASING_BIT_ARM, the image in VK_IMAGE_LAYOUT_TENSOR_ALIASING_ARM while
    the tensor uses the memory (barriers through vkCmdPipelineBarrier2)."""
    assert result["aliasing"]["optimal_rgba8"][check] is True


def test_tensor_aliasing_layout_in_a_legacy_barrier_reaches_the_backend_which_ignores_it(result):
    """vkCmdPipelineBarrier (recorded in C) is not translated: lavapipe gets TENSOR_ALIASING_ARM as is,
    ignores it, and the image's data is read through the tensor all the same (docs/tensors.md, Limits)."""
    assert result["aliasing"]["optimal_rgba8"]["legacy_barrier_image_to_tensor"] is True


def test_image_aliasing_is_a_feature_of_optimal_tensors_only(result):
    optimal, linear = result["format_features_u8"]
    aliasing = 1 << 43                                   # VK_FORMAT_FEATURE_2_TENSOR_IMAGE_ALIASING_BIT_ARM
    assert optimal & aliasing and not linear & aliasing


@pytest.mark.parametrize("case, message", [
    ("linear_with_image_aliasing", "VUID-VkTensorDescriptionARM-tiling-09742"),
    ("optimal_aliasing_inner_5", "VUID-VkTensorDescriptionARM-tiling-09741"),
])
def test_invalid_aliasing_tensors_are_refused(result, case, message):
    assert result["invalid"][case] == VALIDATION_FAILED
    assert any(line.startswith("tessera: VK_ARM_tensors: vkCreateTensorARM: ") and message in line
               for line in result["stderr"].splitlines())
    assert result["invalid"]["optimal_aliasing_inner_4"] == 0
    assert not tensor_tracebacks(result["stderr"])


def tensor_tracebacks(stderr: str) -> list[str]:
    """Traceback frames in the driver's tensor code (its own failures: refused calls must not raise)."""
    return [line for line in stderr.splitlines() if line.strip().startswith('File "') and "tensor" in line]


def test_array_of_tensors_indexed_dynamically_matches_numpy(result):
    """shaderStorageTensorArrayDynamicIndexing (reported true): three tensors of lengths 5, 8, 3 in one
    array binding, chosen by the work group id; reads with OutOfBoundsValue and size queries of the
    chosen tensor equal numpy."""
    assert result["dynamic_indexing"] == {"ok": True, "mismatches": 0}


def test_other_descriptor_written_to_a_tensor_binding_is_skipped_with_a_message(result):
    """A descriptor of the wrong type: a storage buffer written to a TENSOR_ARM binding (the backend
    has a storage-buffer binding there and would take it) is skipped, validation-style; the
    tensors written afterwards are read and written by the shader as numpy says."""
    assert result["invalid"]["storage_buffer_in_tensor_binding_then_tensor_ok"] is True
    assert ("vkUpdateDescriptorSets: VUID-VkWriteDescriptorSet-descriptorType-00319: pDescriptorWrites[0]"
            ".descriptorType (7) differs from binding 0's type, VK_DESCRIPTOR_TYPE_TENSOR_ARM: the write is skipped"
            in result["stderr"])
    assert not tensor_tracebacks(result["stderr"])


@pytest.mark.parametrize("case", ["set_template", "push", "push_one_binding_keeps_the_other", "push_template",
                                  "push2", "push_template2", "mixed_set_template", "mixed_push_template"])
def test_templates_and_push_descriptors_with_tensors_match_numpy(result, case):
    """Descriptor update templates (a set's, a push-descriptor one) and vkCmdPushDescriptorSetKHR with
    tensor descriptors: each dispatch's destination equals its pushed/templated source; a push of
    binding 1 alone keeps binding 0's tensor (pushed descriptors persist); templates mixing a tensor, a
    storage buffer and a uniform buffer give out = tensor * scale; push2/push_template2 go through
    VK_KHR_maintenance6's vkCmdPushDescriptorSet2KHR / vkCmdPushDescriptorSetWithTemplate2KHR."""
    assert result["templates"][case] is True


@pytest.mark.parametrize("handle", ["opaque_fd", "dma_buf", "host_allocation"])
def test_external_tensor_properties_are_the_backing_buffers(result, handle):
    """vkGetPhysicalDeviceExternalTensorPropertiesARM answers what the backend allows for a storage +
    transfer buffer (a tensor is one), handle type by handle type."""
    got = result["external"]["properties"][handle]
    assert got["tensor"] == got["buffer"]
    assert got["tensor"][2]                              # the backend (lavapipe) has each of these


def test_tensor_memory_exported_as_an_opaque_fd_and_imported_for_another_tensor(result):
    ext = result["external"]
    assert ext["create_with_opaque_fd"] == 0
    assert ext["exported_then_imported"] is True         # written through the first, read through the second


def test_external_handle_type_the_backend_lacks_is_refused(result):
    ext = result["external"]
    assert ext["win32_properties"]["tensor"] == [0, 0, 0]
    assert ext["create_with_opaque_win32"] == VALIDATION_FAILED
    assert "vkCreateTensorARM: VUID-VkTensorCreateInfoARM-pNext-09864: external memory handle type 0x2" \
        in result["stderr"]


@pytest.mark.parametrize("check", ["read_into_color", "written_to_tensor"])
def test_fragment_shader_reads_and_writes_tensors(result, check):
    """shaderTensorSupportedStages includes FRAGMENT: a full-screen triangle's fragment shader reads a
    3x5 tensor at each pixel of a 6x4 target (-1 out of bounds) into the colour attachment and writes
    twice the value into a 4x6 tensor; both equal numpy."""
    assert result["fragment"]["supported_stages"] == 0x20 | 0x10
    assert result["fragment"][check] is True


def test_view_formats_follow_the_mutable_format_flag(result):
    inv = result["invalid"]
    assert inv["view_u32_of_mutable_f32"] == 0
    assert inv["view_u32_of_fixed_f32"] == VALIDATION_FAILED
    assert inv["view_u16_of_mutable_f32"] == VALIDATION_FAILED
    for vuid in ("VUID-VkTensorViewCreateInfoARM-tensor-09743", "VUID-VkTensorViewCreateInfoARM-tensor-09744"):
        assert any(line.startswith("tessera: VK_ARM_tensors: vkCreateTensorViewARM: ") and vuid in line
                   for line in result["stderr"].splitlines())
