"""Every arg of a merged GPU slice is a row of schemas/slice_args.py (the driver's, the layer's, or one
hostd derives), whatever the driver and the layer said: hand-built inputs (hostd_builders)."""
from __future__ import annotations

from hostd_builders import BOOT0, RAW0, GpuTrace, annex, device, hello, submit, workload

from tessera.hostd.merge import merge_session
from tessera.schemas import slice_args as table
from tessera.schemas.perfetto import read_packets


def test_every_merged_arg_is_a_table_row(tmp_path):
    log = tmp_path / "app-4242-1" / "session.tessera-log"
    log.parent.mkdir()
    log.write_bytes(b"".join([
        hello(), device(),
        workload(1, "dispatch", command="vkCmdDispatchIndirect", groups=[-1, -1, -1], group_size=[64, 1, 1],
                 items=-1, indirect=True, annex=True, labels=["Physics"]),
        workload(2, "buffer_transfer", command="vkCmdCopyBuffer", subtype="copy buffer", bytes=64, regions=2),
        submit(1, RAW0 + 100_000, [1, 2], annexed=True),
        annex(1, 1, groups=[2, 1, 1], items=128),
    ]))
    # the driver's view: every driver row, several disagreeing with the layer; one entry named like a
    # layer field (a driver that spells a fact the layer's way)
    every = {a.label: "7" for a in table.DRIVER_ARGS if a not in (table.LABEL, table.LABEL_STACK)}
    g = GpuTrace(tmp_path / "gpu.perfetto-trace")
    g.event(BOOT0 + 150_000, 500, "non-fragment", "compute", "t1", ["s1", "t1"], extra=every)
    g.event(BOOT0 + 151_000, 500, "transfer", "copy buffer", "t2", ["s1", "t2"],
            extra={"Workload": "transfer", "Command": "vkCmdCopyBuffer", "Bytes": "64", "regions": "3"})
    g.event(BOOT0 + 152_000, 500, "transfer", "copy buffer", "t9", ["s1", "t9"], extra={"Bytes": "64"})
    g.close()
    r = merge_session(tmp_path)
    assert r.events_with_metadata == 2 and r.events_without_metadata == 1 and not r.problems, r.problems
    names = {d.name for p in read_packets(r.output) if p.HasField("gpu_render_stage_event")
             for d in p.gpu_render_stage_event.extra_data}
    rows = {n: table.row_of(n) for n in names}
    assert all(rows.values()), sorted(n for n, a in rows.items() if a is None)
    derived = {a for a in rows.values() if a.owner == table.HOSTD}
    assert {table.TAG, table.SUBMIT, table.MISSING, table.HANDLES, table.DRIVER_TWIN, table.LAYER_TWIN} <= derived
