"""Enables VK_KHR_maintenance5 with its feature struct and creates a compute pipeline whose flags
travel in VkPipelineCreateFlags2CreateInfoKHR (the struct a Mali driver reads the
VK_PIPELINE_CREATE_2_INSTRUMENT_SHADERS_BIT_ARM flag from); prints JSON: whether the extension was
offered, the device and pipeline were created, and a maintenance5 command is reachable.

Run: .venv/bin/tessera run -- .venv/bin/python tests/integration/apps/maintenance5_app.py
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402


def main() -> None:
    features = vk.VkPhysicalDeviceMaintenance5FeaturesKHR(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_5_FEATURES_KHR, maintenance5=vk.VK_TRUE)
    ctx = vkapp.Context(vkapp.Settings.from_env(), "maintenance5_app",
                        optional_device_extensions=["VK_KHR_maintenance5"], device_features=features)
    enabled = "VK_KHR_maintenance5" in ctx.device_extensions
    stage = vk.VK_SHADER_STAGE_COMPUTE_BIT
    set_layout = ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage),
                                 (1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, stage)])
    layout = ctx.pipeline_layout([set_layout], push_size=4, push_stages=stage)
    module = ctx.shader("collatz.comp")
    flags2 = vk.VkPipelineCreateFlags2CreateInfoKHR(
        sType=vk.VK_STRUCTURE_TYPE_PIPELINE_CREATE_FLAGS_2_CREATE_INFO_KHR,
        flags=vk.VK_PIPELINE_CREATE_2_DISABLE_OPTIMIZATION_BIT_KHR)
    stage_info = vk.VkPipelineShaderStageCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, stage=stage, module=module, pName="main")
    info = vk.VkComputePipelineCreateInfo(sType=vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                                          pNext=flags2 if enabled else None, stage=stage_info, layout=layout,
                                          basePipelineIndex=-1)
    pipeline = vk.vkCreateComputePipelines(ctx.device, None, 1, [info], None)[0]
    ctx.own(vk.vkDestroyPipeline, pipeline)
    gdpa = vk.vkGetDeviceProcAddr
    try:
        reachable = gdpa(ctx.device, "vkGetRenderingAreaGranularityKHR") is not None
    except Exception:  # the package raises when the pointer is NULL
        reachable = False
    print(json.dumps({"device": ctx.device_name, "apiVersion": ctx.api_version, "maintenance5": enabled,
                      "pipeline": bool(pipeline), "vkGetRenderingAreaGranularityKHR": reachable}))
    ctx.close()


if __name__ == "__main__":
    main()
