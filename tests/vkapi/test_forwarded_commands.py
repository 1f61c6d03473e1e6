"""Recorded(record=False): the C guard of a command only forwards it (no record, nothing to apply), and
only Python takes its hooks (a buffer on the Python path). The layer's index-buffer binds are the case:
they matter to `--content` only, which turns C recording off."""
from __future__ import annotations

import pytest

from tessera.vkapi.intercepts import FORWARDED, INTERCEPTS, LAYER
from tessera.vkapi.recorder import Recorded
from tessera.vkapi.recorder_gen import fast_path, formats


def test_a_forwarded_command_has_no_record_format_and_its_guard_only_forwards():
    assert formats("vkCmdBindIndexBuffer", FORWARDED) == []
    c = fast_path("vkCmdBindIndexBuffer", 7, FORWARDED)
    assert "tessera_record(" not in c and "rec->dev->next[7]" in c and "!rec->python_path" in c
    assert "next(commandBuffer, buffer, offset, indexType)" in c and c.rstrip().endswith("}")


@pytest.mark.parametrize("spec", [Recorded(record=False, forward=False), Recorded(record=False, tagged=True),
                                  Recorded(record=False, python_submits=True)])
def test_forwarding_combined_with_recording_options_is_refused(spec):
    with pytest.raises(ValueError, match="only forwards"):
        formats("vkCmdBindIndexBuffer", spec)


def test_the_layers_index_buffer_binds_are_forwarded():
    for name in ("vkCmdBindIndexBuffer", "vkCmdBindIndexBuffer2"):
        assert INTERCEPTS[name][LAYER].c is FORWARDED
