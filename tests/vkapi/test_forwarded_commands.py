"""Recorded(record=False): the C guard of a command only forwards it (no record, nothing to apply), and
only Python takes its hooks (a buffer on the Python path, or a call whose `python_if` holds). The layer's
index-buffer binds are the case: they matter to `--content` only, whose switch sends them (and the layer's
draws, folded in C otherwise) to Python."""
from __future__ import annotations

import pytest

from tessera.vkapi.intercepts import CONTENT_DRAWS, CONTENT_FORWARDED, FORWARDED, INTERCEPTS, LAYER
from tessera.vkapi.recorder import Recorded
from tessera.vkapi.recorder_gen import fast_path, formats


def test_a_forwarded_command_has_no_record_format_and_its_guard_only_forwards():
    assert formats("vkCmdBindIndexBuffer", FORWARDED) == []
    c = fast_path("vkCmdBindIndexBuffer", 7, FORWARDED)
    assert "tessera_record(" not in c and "rec->dev->next[7]" in c and "!rec->python_path" in c
    assert "next(commandBuffer, buffer, offset, indexType)" in c and c.rstrip().endswith("}")


@pytest.mark.parametrize("spec", [Recorded(record=False, forward=False), Recorded(record=False, tagged=True),
                                  Recorded(record=False, label_depth=1)])
def test_forwarding_combined_with_recording_options_is_refused(spec):
    with pytest.raises(ValueError, match="only forwards"):
        formats("vkCmdBindIndexBuffer", spec)


def test_the_layers_index_buffer_binds_are_forwarded_unless_content_mode_is_on():
    for name in ("vkCmdBindIndexBuffer", "vkCmdBindIndexBuffer2"):
        assert INTERCEPTS[name][LAYER].c is CONTENT_FORWARDED
    c = fast_path("vkCmdBindIndexBuffer", 7, CONTENT_FORWARDED)
    assert "tessera_record(" not in c and "!rec->python_path && !(({ extern int tessera_layer_content;" in c


def test_the_layers_draws_fold_unless_content_mode_is_on():
    """Folded in C (a count), except while the shim's content switch is on: then each takes Python."""
    for name in ("vkCmdDraw", "vkCmdDrawIndexed"):
        assert INTERCEPTS[name][LAYER].c is CONTENT_DRAWS
    c = fast_path("vkCmdDraw", 3, CONTENT_DRAWS)
    assert "if (rec && !rec->python_path && !(({ extern int tessera_layer_content; tessera_layer_content; }))) {" in c
    assert "slot[0] += 1;" in c and formats("vkCmdDraw", CONTENT_DRAWS) == formats("vkCmdDraw", Recorded(fold=()))


def test_the_drivers_push_descriptors_are_forwarded_while_no_device_has_tensors():
    """Its hooks translate a set with tensor bindings, which only a device with VK_ARM_tensors on can have: while
    none has (the shim's tessera_tensor_devices, counted by icd/tensors/resources.py), C forwards them."""
    from tessera.vkapi.intercepts import ICD, TENSOR_PUSH
    for name in ("vkCmdPushDescriptorSet", "vkCmdPushDescriptorSet2", "vkCmdPushDescriptorSetWithTemplate",
                 "vkCmdPushDescriptorSetWithTemplate2"):
        assert INTERCEPTS[name][ICD].c is TENSOR_PUSH
    c = fast_path("vkCmdPushDescriptorSet", 9, TENSOR_PUSH)
    assert "tessera_record(" not in c and "rec->dev->next[9]" in c
    assert "if (rec && !rec->python_path && !(({ extern int tessera_tensor_devices;" in c


def test_the_drivers_next_subpass_is_forwarded_only_inside_a_pass_c_began():
    """A captured pass (per-region counters) begins in Python, where the hook counts its subpasses."""
    from tessera.vkapi.intercepts import ICD, SUBPASS
    for name in ("vkCmdNextSubpass", "vkCmdNextSubpass2"):
        assert INTERCEPTS[name][ICD].c is SUBPASS
    c = fast_path("vkCmdNextSubpass", 5, SUBPASS)
    assert "tessera_record(" not in c and "if (rec && !rec->python_path && rec->pass_in_c) {" in c
