"""hostd/counters.py's GPU counter samples: hand-computed increments, and the bytes protobuf writes."""
from __future__ import annotations

import math

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from tessera.hostd.counters import Phase, Tracks, aggregate, samples
from tessera.schemas import counters as C

G720 = C.for_gpu("Mali-G720")
CFG = G720.config(10)


def _phase(start, dur, **values):
    return Phase(start, dur, "", {k: float(v) for k, v in values.items()})


def test_samples_spread_each_phase_over_its_duration():
    # A: compute [0, 100), 100 threads; B: main phase [50, 150), 50 fragment threads; C: compute [200, 210)
    phases = [_phase(0, 100, MaliNonFragThread=100, MaliCompQueuedCy=100, MaliCompQueueAssignStallCy=0,
                     MaliGPUActiveCy=100),
              _phase(50, 100, MaliFragThread=50, MaliMainQueuedCy=100, MaliMainQueueAssignStallCy=0,
                     MaliGPUActiveCy=100),
              _phase(200, 10, MaliNonFragThread=8, MaliCompQueuedCy=10, MaliCompQueueAssignStallCy=0,
                     MaliGPUActiveCy=10)]
    times, cols = samples(G720, phases, CFG)
    assert times.tolist() == [0, 50, 100, 150, 200, 210]
    assert cols["MaliNonFragThread"].tolist() == [0, 50, 50, 0, 0, 8]
    assert cols["MaliFragThread"].tolist() == [0, 0, 25, 25, 0, 0]
    assert cols["MaliCompQueueActiveCy"].tolist() == [0, 50, 50, 0, 0, 10]       # Arm's equation: queued - stall
    assert cols["MaliGPUActiveCy"].tolist() == [0, 50, 50, 50, 0, 10]            # busy time, not a sum
    util = cols["MaliCompQueueUtil"].tolist()
    assert util[1:4] == [100, 100, 0] and math.isnan(util[4]) and util[5] == 100  # idle: no value
    assert cols["MaliMainQueueUtil"].tolist()[1:4] == [0, 100, 100]
    total = aggregate(G720, phases, CFG)
    assert sum(cols["MaliNonFragThread"]) == total["MaliNonFragThread"] == 108
    assert total["MaliGPUActiveCy"] == 160                                        # union: [0,150) + [200,210)
    assert total["MaliCompQueueUtil"] == 110 / 160 * 100


def test_one_descriptor_per_gpu_and_packets_are_protobufs_bytes():
    """Two processes (packet sequences 7 and 8) on one GPU: one descriptor, one set of samples over
    both's work, as a device's counters are; every packet is what protobuf writes."""
    tracks = Tracks()
    desc = pb.GpuCounterEvent()
    ids = {}
    for i, c in enumerate(G720.shown(), start=1):
        desc.counter_descriptor.specs.add(counter_id=i, name=c.name)
        ids[c.name] = i
    desc.counter_descriptor.blocks.add(name="Mali-G720")
    tracks.descriptor(7, desc)
    tracks.descriptor(8, desc)
    assert tracks.wants(7) and tracks.wants(8) and not tracks.wants(9)
    for seq, start, dur, threads in ((7, 1000, 300, 64), (8, 1100, 300, 33), (7, 5000, 7, 3)):
        e = pb.GpuRenderStageEvent(duration=dur)
        for name, v in (("MaliNonFragThread", threads), ("MaliCompQueuedCy", dur), ("MaliCompQueueAssignStallCy", 0),
                        ("MaliGPUActiveCy", dur), ("Labels", "t1")):
            e.extra_data.add(name=name, value=str(v))
        tracks.event(seq, start, e)
    raws = list(tracks.encoded())
    packets = []
    for raw in raws:
        trace = pb.Trace()
        trace.ParseFromString(raw)
        [p] = trace.packet
        assert p.trusted_packet_sequence_id == 7 and p.HasField("gpu_counter_event")
        assert pb.Trace(packet=[p]).SerializeToString() == raw        # the same bytes protobuf writes
        packets.append(p)
    assert packets[0].gpu_counter_event.counter_descriptor == desc.counter_descriptor
    assert not any(p.gpu_counter_event.HasField("counter_descriptor") for p in packets[1:])
    assert [p.timestamp for p in packets[1:]] == [1000, 1100, 1300, 1400, 5000, 5007]
    values = {}
    for p in packets[1:]:
        for c in p.gpu_counter_event.counters:
            assert c.counter_id in ids.values()
            v = c.int_value if c.HasField("int_value") else c.double_value
            values[c.counter_id] = values.get(c.counter_id, 0) + v
    assert values[ids["MaliNonFragThread"]] == 64 + 33 + 3
    assert values[ids["MaliGPUActiveCy"]] == 400 + 7                  # [1000, 1400) busy, then 7


def test_samples_every_period_between_workloads():
    from tessera.hostd import counters as hc

    ms = hc.SAMPLE_PERIOD_NS
    phases = [_phase(ms // 2, ms, MaliNonFragThread=1000, MaliGPUActiveCy=ms),
              _phase(3 * ms + 10, 10, MaliNonFragThread=7, MaliGPUActiveCy=10)]
    times, cols = samples(G720, phases, CFG)
    assert times.tolist() == [ms // 2, ms, ms + ms // 2, 2 * ms, 3 * ms, 3 * ms + 10, 3 * ms + 20]
    assert cols["MaliNonFragThread"].tolist() == [0, 500, 500, 0, 0, 0, 7]      # idle periods: zeros


def test_a_queue_busy_twice_at_once_counts_once():
    """Two phases on one Mali queue at the same time (the emulated transfer queue's copy beside a
    dispatch, both compute work on Mali): the queue is active for their union, never above 100 %."""
    phases = [_phase(0, 100, MaliCompQueuedCy=100, MaliCompQueueAssignStallCy=0, MaliGPUActiveCy=100),
              _phase(50, 100, MaliCompQueuedCy=100, MaliCompQueueAssignStallCy=0, MaliGPUActiveCy=100)]
    total = aggregate(G720, phases, CFG)
    assert total["MaliCompQueueActiveCy"] == total["MaliGPUActiveCy"] == 150
    assert total["MaliCompQueueUtil"] == 100
    times, cols = samples(G720, phases, CFG)
    assert cols["MaliCompQueuedCy"].tolist() == [0, 50, 50, 50]
    assert max(v for v in cols["MaliCompQueueUtil"].tolist() if v == v) == 100


def test_shader_counters_spread_and_derive_on_the_intervals():
    """The shader counters (icd/counters.py) are increments like the others: a dispatch's FMA/CVT/SFU
    instructions and LS issue cycles spread over its duration; MaliEngArithInstr is Arm's equation
    (FMA + CVT + SFU) on each interval's sums; the issue cycles Tessera supplies (DIRECT) are summed,
    never evaluated from Arm's max() equation."""
    phases = [_phase(0, 100, MaliEngFMAInstr=600, MaliEngCVTInstr=200, MaliEngSFUInstr=100, MaliLSIssueCy=40,
                     MaliGPUActiveCy=100),
              _phase(100, 50, MaliEngFMAInstr=50, MaliTexIssueCy=30, MaliGPUActiveCy=50)]
    times, cols = samples(G720, phases, CFG)
    assert times.tolist() == [0, 100, 150]
    assert cols["MaliEngFMAInstr"].tolist() == [0, 600, 50]
    assert cols["MaliEngArithInstr"].tolist() == [0, 900, 50]      # 600 + 200 + 100; 50 + 0 + 0
    assert cols["MaliLSIssueCy"].tolist() == [0, 40, 0]
    assert cols["MaliTexIssueCy"].tolist() == [0, 0, 30]
    total = aggregate(G720, phases, CFG)
    assert total["MaliEngArithInstr"] == 950
    assert total["MaliTexIssueCy"] == 30 and total["MaliLSIssueCy"] == 40
