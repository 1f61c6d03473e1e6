"""Issue #12 item 5: INSTRUMENTATION and SHADER in hostd, the merge's Shader args, `report --top/--json`.

Hand-built sessions (docs/formats.md) with hand-computed totals: every number asserted below is
worked out in the comments from the block rows, not by the code under test.
"""
from __future__ import annotations

import json

from click.testing import CliRunner
from hostd_builders import (BOOT0, RAW0, GpuTrace, action, device, encode, hello, instrumentation, shader,
                            stage, submit, workload)

from tessera.hostd import fastcheck
from tessera.hostd.cli import report
from tessera.hostd.merge import merge_session
from tessera.hostd.metadata import load
from tessera.hostd.storage import LOG_NAME
from tessera.schemas.frames import MessageType
from tessera.schemas.perfetto import read_packets

PID = 4242

# SHADERs. Fragment: block 0 belongs to a helper function, the entry point's first block is 1.
VERTEX = [{"index": 0, "function": "main", "lines": ["%5 = OpLabel", "OpReturn"]}]
FRAGMENT = [{"index": 0, "function": "helper(", "lines": ["%9 = OpLabel", "OpReturnValue %10"]},
            {"index": 1, "function": "main", "lines": ["%5 = OpLabel", "%20 = OpImageSampleImplicitLod %v4 %s %uv",
                                                        "OpBranchConditional %c %30 %31"],
             "source": ["shade.frag:12", "shade.frag:13"]},
            {"index": 2, "function": "main", "lines": ["%30 = OpLabel", "OpKill"]},
            {"index": 3, "function": "main", "lines": ["%31 = OpLabel", "OpReturn"]}]
COMPUTE = [{"index": 0, "function": "main", "lines": ["%5 = OpLabel", "OpBranch %6"]},
           {"index": 1, "function": "main", "lines": ["%6 = OpLabel", "%7 = OpFMul %f %a %b", "OpReturn"]},
           {"index": 2, "function": "main", "lines": ["%8 = OpLabel", "OpReturn"]}]

# Submit 1 (not wrapped: its slices carry no s<M> label), render pass t1 with three draws:
#   draw 0: vertex  [0, 6 ex, fma 12, ls 6]                                   ops 18
#           fragment [1, 100 ex, fma 200, sfu 10, tex 100, var 50], [2, 40 ex, cvt 40]   ops 360 + 40
#           -> 418
#   draw 1: vertex  [0, 3 ex, fma 6, ls 3]                                    ops 9
#           fragment [0, 300 ex, all 0] (helper), [1, 1000 ex, fma 2000, sfu 100, tex 1000, var 500],
#                    [3, 7 ex, all 0]                                         ops 3600
#           -> 3609
#   draw 2: vertex  [0, 3 ex, fma 6, ls 3] -> 9
#   t1 totals: FMA 12+200+6+2000+6 = 2224, CVT 40, SFU 110, LS 12, TEX 1100, VAR 550: 4036 = 418+3609+9
#   invocations: vertex 6+3+3 = 12; fragment (entry block 1) 100+1000 = 1100 (not the helper's 300)
# Dispatch t2: compute [0, 128 ex, cvt 256, ls 128], [1, 128 ex, fma 512, sfu 64]: 384+576 = 960,
#   FMA 512, CVT 256, SFU 64, LS 128; invocations 128
# Submit 2 (the same command buffer again: wrapped, s2 labels):
#   t1: draw 0 as before (418); draw 1: vertex as before (9), fragment [1, 2000 ex, fma 4000, sfu 200,
#       tex 2000, var 1000] (7200) -> 7209. Totals FMA 12+200+6+4000 = 4218, CVT 40, SFU 210, LS 9,
#       TEX 2100, VAR 1050: 7627 = 418+7209; invocations vertex 9, fragment 2100
#   t2: as in s1 plus [2, 64 ex, tex 640]: 1600, TEX 640 the most after FMA 512? no: TEX 640 > FMA 512
# t3: a dispatch with an uninstrumented pipeline: no INSTRUMENTATION.
V0 = stage("vertex", [[0, 6, 12, 0, 0, 6, 0, 0]])
F0 = stage("fragment", [[1, 100, 200, 0, 10, 0, 100, 50], [2, 40, 0, 40, 0, 0, 0, 0]])
V1 = stage("vertex", [[0, 3, 6, 0, 0, 3, 0, 0]])
F1 = stage("fragment", [[0, 300, 0, 0, 0, 0, 0, 0], [1, 1000, 2000, 0, 100, 0, 1000, 500], [3, 7, 0, 0, 0, 0, 0, 0]])
F1_S2 = stage("fragment", [[1, 2000, 4000, 0, 200, 0, 2000, 1000]])
C = [[0, 128, 0, 256, 0, 128, 0, 0], [1, 128, 512, 0, 64, 0, 0, 0]]


def frames_of_session(protocol: int = 2) -> list[bytes]:
    return [
        hello(pid=PID, protocol=protocol), device(),
        workload(1, "render_pass", width=64, height=32, draw_call_count=3, labels=["Frame", "Scene"]),
        workload(2, "dispatch", groups=[4, 1, 1], items=128, labels=["Physics"]),
        workload(3, "dispatch", groups=[1, 1, 1], items=32),
        submit(1, RAW0 + 100_000, [1, 2, 3], annexed=False),
        shader("0xp1", "vertex", VERTEX), shader("0xp1", "fragment", FRAGMENT), shader("0xc1", "compute", COMPUTE),
        instrumentation(1, 1, [action(0, [V0, F0], "vkCmdDrawIndexed", 0), action(1, [V1, F1], "vkCmdDrawIndexed", 1),
                               action(2, [V1], "vkCmdDraw", 2)]),
        instrumentation(1, 2, [action(3, [stage("compute", C)], "vkCmdDispatch", pipeline="0xc1")]),
        submit(2, RAW0 + 200_000, [1, 2, 3], annexed=True),
        instrumentation(2, 1, [action(0, [V0, F0], "vkCmdDrawIndexed", 0),
                               action(1, [V1, F1_S2], "vkCmdDrawIndexed", 1)]),
        instrumentation(2, 2, [action(3, [stage("compute", C + [[2, 64, 0, 0, 0, 0, 640, 0]])], "vkCmdDispatch",
                                      pipeline="0xc1")]),
    ]


def build(root, frames=None, extra_frames=()):
    log = root / f"app-{PID}-1" / LOG_NAME
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(b"".join([*(frames or frames_of_session()), *extra_frames]))
    g = GpuTrace(root / "gpu.perfetto-trace", pid=PID)
    g.event(BOOT0 + 150_000, 1000, "non-fragment", "binning", "t1", ["Frame", "Scene", "t1"], rp=1)
    g.event(BOOT0 + 151_000, 3000, "fragment", "main", "t1", ["Frame", "Scene", "t1"], rp=1)
    g.event(BOOT0 + 155_000, 500, "non-fragment", "compute", "t2", ["Physics", "t2"])
    g.event(BOOT0 + 156_000, 200, "non-fragment", "compute", "t3", ["t3"])
    g.event(BOOT0 + 250_000, 1000, "non-fragment", "binning", "t1", ["s2", "Frame", "Scene", "t1"], rp=2)
    g.event(BOOT0 + 251_000, 3000, "fragment", "main", "t1", ["s2", "Frame", "Scene", "t1"], rp=2)
    g.event(BOOT0 + 255_000, 500, "non-fragment", "compute", "t2", ["s2", "Physics", "t2"])
    g.event(BOOT0 + 256_000, 200, "non-fragment", "compute", "t3", ["s2", "t3"])
    g.close()
    return root


def shader_args(path) -> list[dict[str, str]]:
    out = []
    for p in read_packets(path):
        if p.HasField("gpu_render_stage_event"):
            out.append({d.name: d.value for d in p.gpu_render_stage_event.extra_data if d.name.startswith("Shader")})
    return out


RP_S1 = {"Shader actions": "3", "Shader thread-ops": "4036", "Shader FMA": "2224", "Shader CVT": "40",
         "Shader SFU": "110", "Shader LS": "12", "Shader TEX": "1100", "Shader VAR": "550",
         "Shader invocations (vertex)": "12", "Shader invocations (fragment)": "1100", "Shader largest pipe": "FMA",
         "Shader top draw 1": "draw #1: 3609 thread-ops", "Shader top draw 2": "draw #0: 418 thread-ops",
         "Shader top draw 3": "draw #2: 9 thread-ops"}
DISPATCH_S1 = {"Shader actions": "1", "Shader thread-ops": "960", "Shader FMA": "512", "Shader CVT": "256",
               "Shader SFU": "64", "Shader LS": "128", "Shader TEX": "0", "Shader VAR": "0",
               "Shader invocations (compute)": "128", "Shader largest pipe": "FMA"}
RP_S2 = {"Shader actions": "2", "Shader thread-ops": "7627", "Shader FMA": "4218", "Shader CVT": "40",
         "Shader SFU": "210", "Shader LS": "9", "Shader TEX": "2100", "Shader VAR": "1050",
         "Shader invocations (vertex)": "9", "Shader invocations (fragment)": "2100", "Shader largest pipe": "FMA",
         "Shader top draw 1": "draw #1: 7209 thread-ops", "Shader top draw 2": "draw #0: 418 thread-ops"}
DISPATCH_S2 = {**DISPATCH_S1, "Shader thread-ops": "1600", "Shader TEX": "640", "Shader largest pipe": "TEX"}


def test_the_new_types_validate_and_are_indexed(tmp_path):
    frames = frames_of_session()
    from tessera.schemas.frames import FrameDecoder
    decoded = FrameDecoder().feed(b"".join(frames))
    for f in decoded:
        assert fastcheck.valid(f.type, f.payload()), MessageType(f.type).name
    build(tmp_path)
    # a copy of a frame (resent after a lost acknowledgement) counts once
    (tmp_path / f"layer-{PID}.spool").write_bytes(hello(pid=PID, protocol=2) + frames[9] + frames[6])
    index = load(sorted(tmp_path.rglob("*.tessera-log")) + [tmp_path / f"layer-{PID}.spool"])
    proc = index.processes[PID]
    assert sorted(proc.instrumentation) == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert all(len(v) == 1 for v in proc.instrumentation.values())
    assert proc.instrumented == {1: [1, 2], 2: [1, 2]}
    assert sorted(proc.shaders) == [("0xd1", "0xc1", "compute"), ("0xd1", "0xp1", "fragment"),
                                    ("0xd1", "0xp1", "vertex")]
    assert index.problems == []


def test_merged_args_per_submit_exact(tmp_path):
    r = merge_session(build(tmp_path))
    assert r.problems == [] and r.events_with_metadata == 8
    assert shader_args(r.output) == [RP_S1, RP_S1, DISPATCH_S1, {}, RP_S2, RP_S2, DISPATCH_S2, {}]


def test_report_ranks_the_most_expensive_draw_first(tmp_path):
    build(tmp_path)
    out = CliRunner().invoke(report, [str(tmp_path), "--top", "1"])
    assert out.exit_code == 0, out.output
    text = out.output
    assert "1 most expensive draws and dispatches of 7, by total thread-operations" in text
    first = next(line for line in text.splitlines() if line.strip().startswith("1. "))
    assert "7,209 thread-ops" in first and "Scene" in first and "t1" in first and "draw #1" in first
    assert "submit 2" in first and "vkCmdDrawIndexed" in first and "pipeline 0xp1" in first
    assert "fragment main: 2,000 invocations, 7,200 thread-ops  FMA 4,000  CVT 0  SFU 200  LS 0  TEX 2,000  " \
           "VAR 1,000" in text
    assert "block 1 (main): 2,000 executions, 7,200 thread-ops (most on FMA: 4,000)" in text
    assert "source shade.frag:12" in text and "%20 = OpImageSampleImplicitLod %v4 %s %uv" in text


def test_report_json_structure_and_full_ranking(tmp_path):
    build(tmp_path)
    out = CliRunner().invoke(report, [str(tmp_path), "--top", "7", "--json"])
    assert out.exit_code == 0, out.output
    s = json.loads(out.output[out.output.index("{"):])["shaders"]
    assert s["source"] == "session logs" and s["instrumented"] == 7 and "thread-operations" in s["ranked_by"]
    # 7209 (s2 t1 draw 1), 3609 (s1 t1 draw 1), 1600 (s2 t2), 960 (s1 t2), 418 (s1 draw 0), 418 (s2 draw 0), 9
    assert [(e["thread_ops"], e["submit"], e["tag"], e.get("draw")) for e in s["ranked"]] == [
        (7209, 2, 1, 1), (3609, 1, 1, 1), (1600, 2, 2, None), (960, 1, 2, None), (418, 1, 1, 0), (418, 2, 1, 0),
        (9, 1, 1, 2)]
    top = s["ranked"][0]
    assert {k: top[k] for k in ("rank", "pid", "process", "submit", "tag", "labels", "name", "kind", "result_index",
                                "command", "draw", "pipeline", "thread_ops", "totals")} == {
        "rank": 1, "pid": PID, "process": "app", "submit": 2, "tag": 1, "labels": ["Frame", "Scene"],
        "name": "Scene", "kind": "render_pass", "result_index": 1, "command": "vkCmdDrawIndexed", "draw": 1,
        "pipeline": "0xp1", "thread_ops": 7209,
        "totals": {"fma": 4006, "cvt": 0, "sfu": 200, "ls": 3, "tex": 2000, "var": 1000, "threads": 2003}}
    vertex, fragment = top["stages"]
    assert vertex == {"stage": "vertex", "entry": "main", "invocations": 3, "thread_ops": 9, "blocks_executed": 1,
                      "totals": {"fma": 6, "cvt": 0, "sfu": 0, "ls": 3, "tex": 0, "var": 0, "threads": 3},
                      "disassembly": True,
                      "blocks": [{"index": 0, "executions": 3, "fma": 6, "cvt": 0, "sfu": 0, "ls": 3, "tex": 0,
                                  "var": 0, "thread_ops": 9, "function": "main", "lines": VERTEX[0]["lines"]}]}
    assert fragment["blocks"] == [{"index": 1, "executions": 2000, "fma": 4000, "cvt": 0, "sfu": 200, "ls": 0,
                                   "tex": 2000, "var": 1000, "thread_ops": 7200, "function": "main",
                                   "lines": FRAGMENT[1]["lines"], "source": FRAGMENT[1]["source"]}]
    # hottest blocks: by thread-ops, then executions (the helper's 300 executions of 0 ops before block 3's 7)
    s1 = s["ranked"][1]["stages"][1]
    assert [(b["index"], b["thread_ops"], b["executions"]) for b in s1["blocks"]] == [(1, 3600, 1000), (0, 0, 300),
                                                                                        (3, 0, 7)]
    assert s1["invocations"] == 1000
    # --blocks 1
    out = CliRunner().invoke(report, [str(tmp_path), "--top", "2", "--blocks", "1", "--json"])
    s = json.loads(out.output[out.output.index("{"):])["shaders"]
    assert [len(st["blocks"]) for e in s["ranked"] for st in e["stages"]] == [1, 1, 1, 1]


def test_report_of_a_merged_trace_reads_the_args(tmp_path):
    r = merge_session(build(tmp_path))
    out = CliRunner().invoke(report, [str(r.output), "--top", "3", "--json"])
    assert out.exit_code == 0, out.output
    s = json.loads(out.output)["shaders"]
    assert s["source"] == "merged trace args" and s["instrumented"] == 4
    assert [(e["thread_ops"], e["submit"], e["tag"], e["name"]) for e in s["ranked"]] == [
        (7627, 2, 1, "Scene"), (4036, None, 1, "Scene"), (1600, 2, 2, "Physics")]
    assert s["ranked"][0]["top_draws"] == ["draw #1: 7209 thread-ops", "draw #0: 418 thread-ops"]
    assert s["ranked"][0]["invocations"] == {"vertex": 9, "fragment": 2100}
    assert s["ranked"][2]["totals"] == {"fma": 512, "cvt": 256, "sfu": 64, "ls": 128, "tex": 640, "var": 0}
    assert s["ranked"][2]["largest_pipe"] == "TEX"
    text = CliRunner().invoke(report, [str(r.output), "--top", "1"]).output
    assert "from a merged trace's args" in text and "draw #1: 7209 thread-ops" in text
    # the session folder, its merged trace now fresh: the blocks come from the logs
    s = json.loads(CliRunner().invoke(report, [str(tmp_path), "--top", "1", "--json"]).output)["shaders"]
    assert s["source"] == "session logs" and s["ranked"][0]["stages"][1]["blocks"][0]["index"] == 1


def test_pipe_rates_name_the_bound_pipe(tmp_path):
    # with rates (thread-ops per clock) FMA 128 and TEX 8, s1 t2: FMA 512/128 = 4 cycles, CVT 256/64 = 4,
    # SFU 64/32 = 2, LS 128/32 = 4; s2 t2 adds TEX 640/8 = 80 cycles: bound on TEX
    rates = {"fma": 128, "cvt": 64, "sfu": 32, "ls": 32, "tex": 8, "var": 64}
    frames = frames_of_session()
    frames[1] = encode(MessageType.DEVICE, {"device": "0xd1", "name": "Mali-G720 (emulated)", "vendor_id": 0x13B5,
                                            "api_version": "1.3.0", "pipe_rates": rates})
    r = merge_session(build(tmp_path, frames))
    args = shader_args(r.output)
    assert args[2]["Shader bound pipe"] == "FMA" and "Shader largest pipe" not in args[2]    # 4 = 4 = 4: first
    assert args[6]["Shader bound pipe"] == "TEX"
    assert args[0]["Shader bound pipe"] == "TEX"     # t1 s1: TEX 1100/8 = 137.5 > FMA 2224/128 = 17.4


def test_entry_block_is_block_0_without_a_shader(tmp_path):
    frames = [f for f in frames_of_session() if f[0] != MessageType.SHADER]
    r = merge_session(build(tmp_path, frames))
    assert shader_args(r.output)[0]["Shader invocations (fragment)"] == "300"    # the helper's block 0
    s = merge_session(tmp_path, top=1).summary.shaders
    assert s.ranked[0]["stages"][1]["disassembly"] is False and "lines" not in s.ranked[0]["stages"][1]["blocks"][0]


def test_a_reused_pipeline_address_gets_its_own_shader(tmp_path):
    again = [{"index": 0, "function": "main", "lines": ["%99 = OpLabel", "OpReturn"]},
             {"index": 1, "function": "main", "lines": ["%98 = OpLabel"]}, {"index": 2, "lines": ["%97 = OpLabel"]}]
    frames = frames_of_session()
    frames.insert(11, shader("0xc1", "compute", again))      # sent before s2's INSTRUMENTATION
    build(tmp_path, frames)
    s = merge_session(tmp_path, top=4).summary.shaders
    lines = {(e["submit"], e["tag"]): e["stages"][0]["blocks"][0]["lines"] for e in s.ranked if e["tag"] == 2}
    assert lines == {(1, 2): COMPUTE[1]["lines"], (2, 2): again[2]["lines"]}     # hottest: block 1 (576), 2 (640)


HOSTILE = {
    "a block row of 7 values": {"device": "0xd1", "actions": [action(5, [{**stage("compute", C),
                                                                         "blocks": [[0, 1, 2, 3, 4, 5, 6]]}])]},
    "negative executions": {"device": "0xd1", "actions": [action(5, [stage("compute", [[0, -1, 0, 0, 0, 0, 0, 0]])])]},
    "an unknown stage": {"device": "0xd1", "actions": [action(5, [stage("pixel", C)])]},
    "actions: 5": {"device": "0xd1", "actions": 5},
    "totals without threads": {"device": "0xd1", "actions": [action(5, [{"stage": "compute", "totals": {
        "fma": 1, "cvt": 0, "sfu": 0, "ls": 0, "tex": 0, "var": 0}, "blocks": []}])]},
    "a value above 2**64": {"device": "0xd1", "actions": [action(5, [stage("compute", [[0, 1 << 64, 0, 0, 0, 0, 0,
                                                                                        0]])])]},
    "a float": {"device": "0xd1", "actions": [action(5, [stage("compute", [[0, 1.5, 0, 0, 0, 0, 0, 0]])])]},
    "nine stages": {"device": "0xd1", "actions": [action(5, [stage("compute", C)] * 9)]},
}


def test_hostile_instrumentation_is_listed_not_a_crash(tmp_path):
    bad = [instrumentation(9, 1, payload) for payload in HOSTILE.values()]
    bad += [
        encode(MessageType.INSTRUMENTATION, b'{"device":"0xd1","actions":[', tag=1, sequence=9),       # not JSON
        encode(MessageType.INSTRUMENTATION, b'[1,2]', tag=1, sequence=9),                              # not an object
        encode(MessageType.SHADER, {"device": "0xd1", "pipeline": "0xp1", "stage": "vertex", "entry": "main",
                                    "blocks": [{"index": -1, "lines": []}]}),
        encode(MessageType.SHADER, {"device": "0xd1", "pipeline": "0xp1", "stage": "vertex", "entry": "main",
                                    "blocks": "none"}),
        encode(MessageType.SHADER, b'{"device":"\\ud800","pipeline":"0xp1","stage":"vertex","entry":"main",'
                                   b'"blocks":[]}'),
    ]
    # odd but valid: every u64 at its maximum (sums above 64 bits), a block listed twice, totals that are not
    # the blocks' sums, a stage twice, an action of a SHADER-less pipeline, an unknown field; all in submit 3
    # of tag 2 (never on a GPU slice)
    m = (1 << 64) - 1
    big = {"stage": "compute", "totals": dict.fromkeys(("fma", "cvt", "sfu", "ls", "tex", "var", "threads"), m),
           "blocks": [[0, m, m, m, m, m, m, m], [0, m, m, m, m, m, m, m]]}
    odd = instrumentation(3, 2, [action(7, [big, stage("compute", C)], pipeline="0xnone"),
                                 {**action(8, [stage("compute", C)], pipeline=None), "new field": 1}])
    build(tmp_path, extra_frames=[*bad, odd])
    r = merge_session(tmp_path, top=20)
    text = "\n".join(r.problems)
    assert text.count("INSTRUMENTATION: unusable") == len(HOSTILE), text
    assert "INSTRUMENTATION: invalid JSON" in text and "INSTRUMENTATION: payload is not a JSON object" in text
    assert text.count("SHADER: unusable") == 2 and "SHADER: a string holds a lone surrogate" in text, text
    assert shader_args(r.output)[:3] == [RP_S1, RP_S1, DISPATCH_S1]       # the good frames still count
    ranked = r.summary.shaders.ranked
    assert ranked[0]["thread_ops"] == 6 * m + 960 and ranked[0]["submit"] == 3
    assert ranked[0]["stages"][0]["blocks"][0]["index"] == 0 and ranked[0]["stages"][0]["invocations"] == 2 * m
    out = CliRunner().invoke(report, [str(tmp_path), "--top", "3"])
    assert out.exit_code == 0, out.output


def test_protocol_1_session_still_merges(tmp_path):
    frames = [f for f in frames_of_session(protocol=1)
              if f[0] not in (MessageType.SHADER, MessageType.INSTRUMENTATION)]
    r = merge_session(build(tmp_path, frames))
    assert r.problems == [] and r.events_with_metadata == 8 and r.summary.shaders is None
    assert all(a == {} for a in shader_args(r.output))
    out = CliRunner().invoke(report, [str(tmp_path), "--json"])
    assert json.loads(out.output)["shaders"] is None
    assert "thread-ops" not in CliRunner().invoke(report, [str(tmp_path)]).output
