"""SPIR-V assembly of small shaders whose costs tests work out by hand (tests/compiler/test_costs.py
checks the compiler model's per-block counts of FRAG; tests/icd/test_shader_counters.py the counters
made from them)."""
from __future__ import annotations

FRAG = """
               OpCapability Shader
          %1 = OpExtInstImport "GLSL.std.450"
               OpMemoryModel Logical GLSL450
               OpEntryPoint Fragment %main "main" %uv %out
               OpExecutionMode %main OriginUpperLeft
               OpDecorate %uv Location 0
               OpDecorate %out Location 0
               OpDecorate %tex DescriptorSet 0
               OpDecorate %tex Binding 0
       %void = OpTypeVoid
         %fn = OpTypeFunction %void
      %float = OpTypeFloat 32
         %v2 = OpTypeVector %float 2
         %v4 = OpTypeVector %float 4
       %bool = OpTypeBool
        %img = OpTypeImage %float 2D 0 0 0 1 Unknown
       %simg = OpTypeSampledImage %img
     %p_simg = OpTypePointer UniformConstant %simg
       %p_in = OpTypePointer Input %v2
      %p_out = OpTypePointer Output %v4
        %tex = OpVariable %p_simg UniformConstant
         %uv = OpVariable %p_in Input
        %out = OpVariable %p_out Output
       %half = OpConstant %float 0.5
       %main = OpFunction %void None %fn
         %b0 = OpLabel
          %c = OpLoad %v2 %uv
          %s = OpLoad %simg %tex
          %t = OpImageSampleImplicitLod %v4 %s %c
          %m = OpVectorTimesScalar %v4 %t %half
          %a = OpFAdd %v4 %m %t
          %x = OpCompositeExtract %float %a 0
       %cond = OpFOrdGreaterThan %bool %x %half
               OpSelectionMerge %b2 None
               OpBranchConditional %cond %b1 %b2
         %b1 = OpLabel
          %r = OpExtInst %float %1 InverseSqrt %x
          %d = OpExtInst %v4 %1 Normalize %a
          %e = OpVectorTimesScalar %v4 %d %r
               OpStore %out %e
               OpBranch %b2
         %b2 = OpLabel
               OpReturn
               OpFunctionEnd
"""
