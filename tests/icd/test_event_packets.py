"""The driver's render-stage event packets equal protobuf's serialisation of the same event.

GpuTrace.event writes bytes made by icd/event_packets.py; the reference here is a
TracePacket built field by field with the generated protos and serialised by protobuf, framed as
a Trace.packet field. Every shape the timeline writes is covered: with and without a render pass,
labels or a tag, a transfer stage's finer kind, tuple values, non-ASCII text, large handles and
times, and extra items repeated (the cached encoding) or changed."""
from __future__ import annotations

import itertools

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from tessera.icd import event_packets, trace
from tessera.schemas.labels import innermost_tag
from tessera.schemas.perfetto import frame_packet, read_packets


def _reference(sequence, event_id, *, start_ns, duration_ns, queue, stage, gpu_id, submission_id, command_buffer,
               labels, extra, render_pass=None) -> bytes:
    p = pb.TracePacket()
    p.timestamp = start_ns
    p.trusted_packet_sequence_id = sequence
    p.sequence_flags = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
    e = p.gpu_render_stage_event
    e.event_id = event_id
    e.duration = duration_ns
    e.hw_queue_iid = trace.QUEUES[queue]
    e.stage_iid = trace.STAGES[trace.ARM_STAGE.get(stage, stage)][0]
    e.gpu_id = gpu_id
    e.context = trace.GRAPHICS_CONTEXT_IID
    e.submission_id = submission_id
    e.command_buffer_handle = command_buffer
    if render_pass is not None:
        e.render_pass_handle, e.render_pass_instance_id = render_pass
    tag = innermost_tag(labels)
    if tag is not None:
        e.extra_data.add(name=trace.LABEL.label, value=tag)
    if labels:
        e.extra_data.add(name=trace.LABEL_STACK.label, value=" / ".join(labels))
    if stage in trace.ARM_STAGE:
        e.extra_data.add(name=trace.TRANSFER_KEY, value=stage)
    for name, value in extra.items():
        e.extra_data.add(name=name, value=str(list(value)) if type(value) is tuple else str(value))
    return frame_packet(p)


LABELS = [[], ["t7"], ["frame", "t123"], ["Ünïcode pass", "shadows", "t4294967295"], ["no tag here"]]
EXTRAS = [{}, {"Workload": "Dispatch", "Command": "vkCmdDispatch", "Items": 64},
          {"Workload": "Render pass", "Area": "1920x1080", "Draws": 3, "Vertices": 9, "Shader cycles": 12.5},
          {"Groups": (8, 8, 1), "Estimated": "indirect sizes", "Bytes": 2 ** 40}]
STAGES = [("non-fragment", "compute"), ("fragment", "main"), ("transfer", "copy buffer to image"),
          ("transfer", "fill buffer"), ("non-fragment", "binning")]
RENDER_PASSES = [None, (0x5555_0000_1000, 1), (2 ** 64 - 1, 300)]


def _event(gpu, args: dict) -> int:
    """GpuTrace.event of `args`, its `extra` encoded by GpuTrace.args."""
    fields = {k: v for k, v in args.items() if k != "extra"}
    return gpu.event(**fields, args=gpu.args(args["stage"], args["extra"]))


def test_every_shape_equals_protobufs_bytes(tmp_path):
    gpu = trace.GpuTrace(tmp_path)
    gpu._start()
    cases = list(itertools.product(LABELS, EXTRAS, STAGES, RENDER_PASSES))
    for i, (labels, extra, (queue, stage), rp) in enumerate(cases + cases):   # twice: the cache's hits too
        args = dict(start_ns=10 ** 18 + i * 997, duration_ns=(i * 131) % 5000, queue=queue, stage=stage,
                    gpu_id=i % 3, submission_id=i // 4, command_buffer=0x7F00_0000_0000 + i, labels=labels,
                    extra=extra, render_pass=rp)
        written_before = len(gpu._writer._pending)
        event_id = _event(gpu, args)
        assert gpu._writer._pending[written_before] == _reference(gpu.sequence, event_id, **args), (i, args)
    gpu.flush()
    packets = list(read_packets(gpu.path))
    assert len(packets) == 1 + 2 * len(cases)   # the first packet (interned data), then the events


def test_an_unhashable_value_is_encoded_each_time(tmp_path):
    gpu = trace.GpuTrace(tmp_path)
    gpu._start()
    args = dict(start_ns=5, duration_ns=6, queue="non-fragment", stage="compute", gpu_id=0, submission_id=1,
                command_buffer=2, labels=["t1"], extra={"List": [1, 2]})
    event_id = _event(gpu, args)
    assert gpu._writer._pending[-1] == _reference(gpu.sequence, event_id, **args)


def test_the_cache_is_bounded():
    encoder = event_packets.EventEncoder(1, 2, 1)
    for i in range(event_packets.EXTRA_CACHE + 5):
        encoder.extras({"Items": i})
    assert 0 < len(encoder._extras) <= event_packets.EXTRA_CACHE


def test_timestamps_equal_their_varint_whatever_came_before():
    """EventEncoder keeps the high part of the last timestamp's varint: times on both sides of each
    2**21 boundary, in and out of order, each encode as schemas.perfetto.varint does."""
    from tessera.schemas.perfetto import varint

    encoder = event_packets.EventEncoder(1, 2, 1)
    edges = [0, 1, 127, 128, 2 ** 14, 2 ** 21 - 1, 2 ** 21, 2 ** 21 + 1, 2 ** 42 - 1, 2 ** 42, 2 ** 64 - 1]
    times = [t + d for t in edges + [1_733_000_000_000_000_000 + k * 997_331 for k in range(50)]
             for d in (0, 1) if t + d < 2 ** 64]
    for n in times + times[::-1]:
        assert encoder._timestamp(n) == varint(n), n
