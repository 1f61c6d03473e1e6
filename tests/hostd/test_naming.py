"""naming.arg_value: its fast paths give exactly json.dumps(value, separators=(",", ":"),
ensure_ascii=False) for every JSON value, strings apart (kept as they are)."""
from __future__ import annotations

import json

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tessera.hostd.naming import arg_value

ALL_CHARS = st.text(st.characters(codec="utf-8"), max_size=8)      # includes quotes, backslashes, controls
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | ALL_CHARS
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(ALL_CHARS, inner, max_size=3), max_leaves=8)


@settings(max_examples=500, deadline=None)
@given(value=json_values | st.lists(ALL_CHARS, max_size=4) | st.lists(st.integers(), max_size=4))
@example(value=["Frame 1", "Pass 0"])
@example(value=['a"b', "c"])
@example(value=["a\\b"])
@example(value=["\x00", "\x1f", "\x7f", "\u2028", "é✓"])
@example(value=[])
@example(value=[True, 1])
@example(value=False)
def test_arg_value_is_compact_json(value):
    expected = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert arg_value(value) == expected
