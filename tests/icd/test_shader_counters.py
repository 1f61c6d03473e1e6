"""Shader instruction and issue-cycle counters (icd/counters.py): the compiler model's per-thread figures
of real shaders (SPIR-V assembled here, costed by tessera.compiler through the driver's shader_costs)
x the workload's warps, against hand computations.

Per-thread ops are worked out by hand from the compiler model's pipe rules (docs/compiler.md,
compiler/pipes.py, compiler/ir.py), as tests/compiler/test_costs.py does; the rates are
compiler/costs.py's: Mali-G720 FMA 128, CVT 64, SFU 32, LS 32, V 64, T 8 thread-ops per core per clock;
Mali-G78 FMA 32, CVT 32, SFU 8, LS 16, V 32, T 4; both 16-wide warps.
"""
from __future__ import annotations

import logging
import math
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tessera.icd import shader_costs, timing
from tessera.icd.counters import StageCost
from tessera.icd.profiles import PROFILES
from tessera.icd.recording import Draw, Work
from tessera.icd.timeline import PassRun
from tessera.schemas import counters as C
from tessera.vkapi.render_passes import PassInfo

from placing import placed_events
from shader_sources import FRAG

_LOCAL = Path(sys.executable).parent / "spirv-as"
SPIRV_AS = str(_LOCAL) if _LOCAL.exists() else shutil.which("spirv-as")

# A compute shader, one block: per thread
#   load vec4 from a storage buffer, constant index   LS 1 (4 x 32 bits: one access)
#   vec4 * vec4                                        FMA 4
#   extract (free); float / 2.0                        FMA 1 + SFU 1 (reciprocal, multiply)
#   float -> uint                                      CVT 1
#   store uint to the buffer, constant index           LS 1
# = FMA 5, CVT 1, SFU 1, LS 2, V 0, T 0.
COMP = """
               OpCapability Shader
               OpMemoryModel Logical GLSL450
               OpEntryPoint GLCompute %main "main"
               OpExecutionMode %main LocalSize 8 8 1
               OpDecorate %Buf Block
               OpMemberDecorate %Buf 0 Offset 0
               OpMemberDecorate %Buf 1 Offset 16
               OpDecorate %buf DescriptorSet 0
               OpDecorate %buf Binding 0
       %void = OpTypeVoid
         %fn = OpTypeFunction %void
      %float = OpTypeFloat 32
       %uint = OpTypeInt 32 0
        %int = OpTypeInt 32 1
         %v4 = OpTypeVector %float 4
        %Buf = OpTypeStruct %v4 %uint
      %p_buf = OpTypePointer StorageBuffer %Buf
       %p_v4 = OpTypePointer StorageBuffer %v4
        %p_u = OpTypePointer StorageBuffer %uint
        %buf = OpVariable %p_buf StorageBuffer
         %c0 = OpConstant %int 0
         %c1 = OpConstant %int 1
        %two = OpConstant %float 2
       %main = OpFunction %void None %fn
         %b0 = OpLabel
          %p = OpAccessChain %p_v4 %buf %c0
          %a = OpLoad %v4 %p
          %m = OpFMul %v4 %a %a
          %x = OpCompositeExtract %float %m 0
          %d = OpFDiv %float %x %two
          %u = OpConvertFToU %uint %d
          %q = OpAccessChain %p_u %buf %c1
               OpStore %q %u
               OpReturn
               OpFunctionEnd
"""
COMP_OPS = (5, 1, 1, 2, 0, 0)

# tests/shader_sources.py FRAG, the fragment shader tests/compiler/test_costs.py hand-checks per block:
#   b0: FMA 8, CVT 2, V 2, T 1; b1 (taken on the typical path with probability 1/2): FMA 12, SFU 2
# typical path per thread: FMA 8 + 6 = 14, CVT 2, SFU 1, LS 0, V 2, T 1.
FRAG_OPS = (14, 2, 1, 0, 2, 1)

RATES = {"mali-g720": (128, 64, 32, 32, 64, 8), "mali-g78": (32, 32, 8, 16, 32, 4)}
SHADER_COUNTERS = ("MaliEngFMAInstr", "MaliEngCVTInstr", "MaliEngSFUInstr", "MaliEngArithInstr",
                   "MaliLSIssueCy", "MaliVarIssueCy", "MaliTexIssueCy")


def _assemble(text: str, tmp_path: Path, name: str) -> bytes:
    if SPIRV_AS is None:
        pytest.skip("spirv-as missing")
    src, out = tmp_path / f"{name}.spvasm", tmp_path / f"{name}.spv"
    src.write_text(text)
    subprocess.run([SPIRV_AS, "--target-env", "vulkan1.1", str(src), "-o", str(out)], check=True,
                   capture_output=True)
    return out.read_bytes()


def _cost(tmp_path: Path, gpu: str, stage: str, text: str) -> StageCost:
    """The stage's cost as the driver makes it at pipeline creation (shader_costs.of_stages)."""
    costs = shader_costs.of_stages(gpu, [(stage, _assemble(text, tmp_path, stage), "main", None)],
                                   logging.getLogger("test"))
    cost = costs[stage]
    assert type(cost) is StageCost
    return cost


def _events(tmp_path, key: str, works=(), passes=()):
    return [{d.name: float(d.value) for d in e.extra_data if d.name.startswith("Mali")}
            for e in placed_events(tmp_path, PROFILES[key], works, passes)]


def test_stage_cost_carries_the_hand_computed_ops(tmp_path):
    for gpu, rates in RATES.items():
        for stage, text, ops in (("compute", COMP, COMP_OPS), ("fragment", FRAG, FRAG_OPS)):
            cost = _cost(tmp_path, gpu, stage, text)
            assert cost.ops == pytest.approx(ops), (gpu, stage)
            assert cost.pipe_cycles == pytest.approx(tuple(o / r for o, r in zip(ops, rates))), (gpu, stage)
            # still the float the timing model reads: the bound pipe's cycles per thread
            assert float(cost) == pytest.approx(max(max(c for c in cost.pipe_cycles[:3]), *cost.pipe_cycles[3:]))


@pytest.mark.parametrize("gpu", ["mali-g720", "mali-g78"])
def test_dispatch_instructions_and_issue_cycles(tmp_path, gpu):
    groups = (20, 15, 1)                       # 300 groups of 8 x 8 = 64 threads: 4 warps each
    work = Work("dispatch", "compute", "vkCmdDispatch", {"groups": groups, "group_size": (8, 8, 1)},
                invocations=300 * 64, cycles=_cost(tmp_path, gpu, "compute", COMP))
    [c] = _events(tmp_path, gpu, works=[work])
    warps = 1200
    assert c["MaliNonFragWarp"] == warps
    assert c["MaliEngFMAInstr"] == warps * 5 == 6000
    assert c["MaliEngCVTInstr"] == warps * 1 == 1200
    assert c["MaliEngSFUInstr"] == warps * 1 == 1200
    assert c["MaliEngArithInstr"] == 8400                                  # Arm's equation: FMA + CVT + SFU
    ls = {"mali-g720": 1200 * 16 * 2 / 32, "mali-g78": 1200 * 16 * 2 / 16}[gpu]
    assert c["MaliLSIssueCy"] == ls                                        # 1200 / 2400 cycles
    assert c["MaliVarIssueCy"] == 0 and c["MaliTexIssueCy"] == 0           # the shader has none: a known zero
    assert "MaliEngInstr" not in c                                          # Arm's database: Bifrost only


def test_partial_warps_issue_whole(tmp_path):
    """A dispatch of 10 groups of 20 threads: 2 warps per group, 20 warps, 200 threads."""
    work = Work("dispatch", "compute", "vkCmdDispatch", {"groups": (10, 1, 1), "group_size": (20, 1, 1)},
                invocations=200, cycles=_cost(tmp_path, "mali-g720", "compute", COMP))
    [c] = _events(tmp_path, "mali-g720", works=[work])
    assert c["MaliNonFragWarp"] == 20
    assert c["MaliEngFMAInstr"] == 100
    assert c["MaliLSIssueCy"] == 20 * 16 * 2 / 32 == 20


def test_render_pass_fragment_and_vertex_shaders(tmp_path):
    """Fragments: the model's area x draws x DRAW_COVERAGE; vertex shader none (no figures: no vertex counts)."""
    gpu = "mali-g720"
    w, h, draws = 64, 48, 4
    info = PassInfo("vkCmdBeginRendering", 0, w, h, 1, 1, [], 0, w * h * 4, True)
    frag = _cost(tmp_path, gpu, "fragment", FRAG)
    run = PassRun(info, ["t2"], 0xCB, [Draw(36, 12, False, None, frag, count=draws)])
    b, m = _events(tmp_path, gpu, passes=[run])
    fragments = w * h * draws * timing.DRAW_COVERAGE                       # 3072
    warps = math.ceil(fragments / 16)                                       # 192
    assert m["MaliFragWarp"] == warps == 192
    assert m["MaliEngFMAInstr"] == 192 * 14
    assert m["MaliEngCVTInstr"] == 192 * 2
    assert m["MaliEngSFUInstr"] == 192 * 1
    assert m["MaliEngArithInstr"] == 192 * 17
    assert m["MaliVarIssueCy"] == 192 * 16 * 2 / 64 == 96
    assert m["MaliTexIssueCy"] == 192 * 16 * 1 / 8 == 384
    assert m["MaliLSIssueCy"] == 0
    assert not any(k in b for k in SHADER_COUNTERS)                        # the vertex shader has no figures


def test_draws_mix_by_their_threads_and_an_unknown_shader_shows_none(tmp_path):
    gpu = "mali-g78"
    frag = _cost(tmp_path, gpu, "fragment", FRAG)
    comp = _cost(tmp_path, gpu, "compute", COMP)      # its figures stand in for a vertex shader's here
    info = PassInfo("vkCmdBeginRendering", 0, 32, 32, 1, 1, [], 0, 0, True)
    # two draws: 48 and 16 vertices with the same vertex figures; fragments 2 x 32 x 32 / 4 = 512, 32 warps
    run = PassRun(info, ["t2"], 0xCB, [Draw(48, 16, False, comp, frag), Draw(16, 5, False, comp, frag)])
    b, m = _events(tmp_path, gpu, passes=[run])
    assert b["MaliNonFragWarp"] == 4                                         # 64 vertices
    assert b["MaliEngFMAInstr"] == 4 * 5 and b["MaliLSIssueCy"] == 4 * 16 * 2 / 16
    assert m["MaliFragWarp"] == 32 and m["MaliEngFMAInstr"] == 32 * 14
    assert m["MaliTexIssueCy"] == 32 * 16 * 1 / 4 == 128
    # one draw whose fragment shader the model could not cost: the pass shows none, not a partial sum
    run = PassRun(info, ["t2"], 0xCB, [Draw(48, 16, False, comp, frag), Draw(16, 5, False, comp, None)])
    (tmp_path / "2").mkdir()
    b, m = _events(tmp_path / "2", gpu, passes=[run])
    assert b["MaliEngFMAInstr"] == 4 * 5
    assert not any(k in m for k in SHADER_COUNTERS)


def test_table_gives_the_shader_counters_to_both_gpus():
    for gpu in ("Mali-G720", "Mali-G78"):
        g = C.for_gpu(gpu)
        for name in SHADER_COUNTERS:
            assert g.has(name), (gpu, name)
        assert not g.has("MaliEngInstr")
        # issue cycles are supplied (DIRECT), arithmetic total derived by Arm's equation
        assert not g.counters["MaliTexIssueCy"].derived and g.counters["MaliEngArithInstr"].derived
    assert "max(" in C.for_gpu("Mali-G720").counters["MaliTexIssueCy"].equation


def test_instrumented_dispatch_counts_its_measured_block_executions(tmp_path):
    """--instrument: the per-thread figures are the executed blocks' (Σ executions x block ops / threads),
    measured_timing._Measure giving them to the dispatch, x its warps."""
    import numpy as np

    from tessera.compiler.costs import gpu_costs
    from tessera.icd.instrumentation.objects import InstrumentedStage
    from tessera.icd.measured_timing import _Measure

    # two blocks: the entry (FMA 2, CVT 1, LS 1) run by all 19,200 threads, a branch (FMA 4, SFU 1) by 4,800
    stage = InstrumentedStage("compute", 0x20, 0, 2, [(2, 1, 0, 1, 0, 0), (4, 0, 1, 0, 0, 0)])
    reader = SimpleNamespace(take=lambda: np.array([19200, 4800], dtype=np.int64))
    work = Work("dispatch", "compute", "vkCmdDispatch", {"groups": (20, 15, 1), "group_size": (8, 8, 1)},
                invocations=19200, cycles=1.0)
    _Measure(reader, stage, [work], gpu_costs("mali-g720"), None).compute()
    # totals FMA 2 x 19200 + 4 x 4800 = 57,600, CVT 19,200, SFU 4,800, LS 19,200: per thread 3, 1, 0.25, 1
    assert work.cycles.ops == pytest.approx((3, 1, 0.25, 1, 0, 0))
    assert float(work.cycles) == pytest.approx(1 / 32)          # bound: LS, 1 / 32 per thread
    [c] = _events(tmp_path, "mali-g720", works=[work])
    assert c["MaliEngFMAInstr"] == 1200 * 3
    assert c["MaliEngCVTInstr"] == 1200
    assert c["MaliEngSFUInstr"] == 300
    assert c["MaliLSIssueCy"] == 1200 * 16 * 1 / 32 == 600
