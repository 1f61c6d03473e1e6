"""tracks.TrackWriter: the slices and instants it encodes itself (raw_sink) are byte for
byte what the protobuf objects give, for every kind of arg value."""
from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tessera.hostd.tracks import TrackWriter
from tessera.schemas.perfetto import frame_packet

U64 = (1 << 64) - 1
ints = st.integers(min_value=-(1 << 70), max_value=1 << 70) | st.sampled_from(
    [0, 1, 127, 128, 16383, 16384, -1, (1 << 63) - 1, -(1 << 63), 1 << 63, U64, 1 << 64])
values = st.one_of(st.booleans(), ints, st.text(max_size=20), st.floats(allow_nan=False), st.none(),
                   st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
args = st.none() | st.dictionaries(st.text(max_size=12), values, max_size=6)
EVERY_KIND = {"t": True, "f": False, "zero": 0, "neg": -5, "min": -(1 << 63), "max": (1 << 63) - 1, "big": 1 << 63,
              "huge": -(1 << 80), "s": "vkQueueSubmit", "u": "Render pass 1920×1080, ✓", "empty": "", "none": None,
              "float": 1.5, "list": [1, 2], "dict": {"a": [1]}, "": "no name", "long": "x" * 300}
names = st.none() | st.text(max_size=40)


def both(seq: int):
    """The same calls on a writer with protobuf packets only and one with a raw sink."""
    proto, raw = [], []
    a = TrackWriter(lambda p: proto.append(frame_packet(p)), seq)
    b = TrackWriter(lambda p: raw.append(frame_packet(p)), seq,
                    lambda field, type_, track, name: raw.append(field))
    return a, b, proto, raw


event = st.tuples(st.integers(0, U64), names, args, st.none() | st.text(max_size=12),
                  st.sampled_from(["begin", "end", "instant"]))


@settings(max_examples=300, deadline=None)
@example(seq=1, events=[(0, "", EVERY_KIND, "rp:#1", "begin")])
@example(seq=(1 << 32) - 1, events=[(U64, "Frame 1", EVERY_KIND, None, "instant")])
@given(seq=st.integers(1, (1 << 32) - 1), events=st.lists(event, min_size=1, max_size=4))
def test_raw_events_are_the_protobuf_bytes(seq, events):
    a, b, proto, raw = both(seq)
    for w in (a, b):
        ptrack = w.process(4242, "app")
        tracks = [w.track(ptrack, "vkQueueSubmit (0xq1)"), w.track(ptrack, "Frames")]
        for i, (ts, name, argv, correlation, kind) in enumerate(events * 2):     # twice: what is kept is reused
            track = tracks[i % 2]
            if kind == "begin":
                w.begin(track, ts, name if name is not None else "x", argv, correlation=correlation)
            elif kind == "end":
                w.end(track, ts)
            else:
                w.instant(track, ts, name if name is not None else "x", argv)
    assert raw == proto


def test_raw_sink_gets_type_track_and_name_and_falls_back_where_protobuf_decides():
    seen = []
    w = TrackWriter(lambda p: seen.append(("proto", p.track_event.type if p.HasField("track_event") else None)), 7,
                    lambda field, type_, track, name: seen.append(("raw", type_, track, name)))
    ptrack = w.process(1, "p")
    track = w.track(ptrack, "Frames")
    w.instant(track, 10, "Frame 1", {"frame": 1})
    w.begin(track, 11, "vkQueueSubmit")
    w.end(track, 12)
    assert seen == [("proto", None), ("proto", None), ("raw", 3, track, "Frame 1"), ("raw", 1, track, "vkQueueSubmit"),
                    ("raw", 2, track, None)]
    try:                           # a timestamp protobuf refuses: its error, as before
        w.end(track, -1)
    except ValueError:
        pass
    else:
        raise AssertionError("negative timestamp accepted")


def test_first_packet_on_the_sequence_is_a_protobuf_packet():
    a, b, proto, raw = both(9)
    for w in (a, b):
        w.instant(123, 5, "first", {"k": True})
        w.instant(123, 6, "second", {"k": False})
    assert raw == proto
