"""The label protocol (schemas/labels.py): what Python writes, Python parses, and the shims' C
formats write the same text."""
from __future__ import annotations

from tessera.schemas.labels import (C_SUBMIT_FORMAT, SUBMIT_LABEL, TAG_LABEL, innermost_tag,
                                    is_layer_label, submit_label, tag_label, tag_labels)


def test_labels_round_trip():
    assert tag_label(42) == "t42" and TAG_LABEL.match(tag_label(42)).group(1) == "42"
    assert submit_label(7) == "s7" and SUBMIT_LABEL.match(submit_label(7)).group(1) == "7"
    tags = [0, 42, 18446744073709551615]
    assert tag_labels(tags) == [tag_label(t) for t in tags] and tag_labels([]) == []


def test_the_c_format_writes_what_python_writes():
    # printf's %llu and Python's %d agree on non-negative integers (C's tag labels: tests/vkapi/runtime_harness.c)
    assert C_SUBMIT_FORMAT.replace("%llu", "%d") % 3 == submit_label(3)


def test_only_the_layers_labels_are_layer_labels():
    assert is_layer_label("t1") and is_layer_label("s12")
    assert not any(is_layer_label(x) for x in ("t", "tx1", "frame 1", "t1 ", "S1", "st1"))


def test_innermost_tag_of_a_stack():
    assert innermost_tag(["s3", "frame", "t5", "inner", "t9"]) == "t9"
    assert innermost_tag(["s3", "frame"]) is None
