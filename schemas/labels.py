"""The label protocol: the debug labels the layer puts around GPU work (protocol).

`t<tagID>` wraps each workload the layer tags; `s<submitID>` wraps a submit whose tags need
telling apart (a command buffer submitted again, or one with an ANNEX): the driver's events
then carry `s<submitID> / … / t<tagID>`, and `submitID.tagID` names one running workload
(docs/formats.md). Python formats and parses them here; the shims' C writes them from the same
prefixes (`tessera_tag_text` after TAG_PREFIX, snprintf with `C_SUBMIT_FORMAT`). Changing a prefix is a
protocol change (PROTOCOL_VERSION in schemas/frames.py).
"""
from __future__ import annotations

import re

TAG_PREFIX = "t"
SUBMIT_PREFIX = "s"
TAG_LABEL = re.compile(rf"^{TAG_PREFIX}(\d+)$")
SUBMIT_LABEL = re.compile(rf"^{SUBMIT_PREFIX}(\d+)$")
C_SUBMIT_FORMAT = SUBMIT_PREFIX + "%llu"   # printf format of a submit label (unsigned long long)


def tag_label(tag: int) -> str:
    return f"{TAG_PREFIX}{tag}"


_TAG_FORMAT = TAG_PREFIX + "{}"


def tag_labels(tags) -> list[str]:
    """tag_label of each tag, in order (without a Python call per tag: a recording's tags are labelled
    every time it is placed)."""
    return list(map(_TAG_FORMAT.format, tags))


def submit_label(submit_id: int) -> str:
    return f"{SUBMIT_PREFIX}{submit_id}"


def is_layer_label(label: str) -> bool:
    """A label the layer added (never an application's)."""
    return bool(TAG_LABEL.match(label) or SUBMIT_LABEL.match(label))


def innermost_tag(stack: list[str]) -> str | None:
    """The innermost `t<tagID>` label of a label stack (outermost first), or None."""
    return next((name for name in reversed(stack) if TAG_LABEL.match(name)), None)
