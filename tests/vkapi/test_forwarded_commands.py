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
