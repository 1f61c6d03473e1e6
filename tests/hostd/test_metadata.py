"""metadata.loads: json.loads's value and error for any text."""
from __future__ import annotations

import json

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tessera.hostd.metadata import loads

values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                      max_leaves=6)
texts = st.one_of(values.map(json.dumps), values.map(lambda v: json.dumps(v, separators=(",", ":"))),
                  st.tuples(st.sampled_from(["", " ", "\n", "\ufeff", "x", "]"]), values.map(json.dumps),
                            st.sampled_from(["", " ", "\n", "x", "}", ",1"])).map("".join),
                  st.text(max_size=12))


def outcome(f, text):
    try:
        return "ok", f(text)
    except ValueError as e:
        return "error", type(e), str(e)


@settings(max_examples=500, deadline=None)
@given(text=texts)
@example(text="")
@example(text='{"a":1} ')
@example(text='{"a":1}x')
def test_loads_is_json_loads(text):
    assert outcome(loads, text) == outcome(json.loads, text)
