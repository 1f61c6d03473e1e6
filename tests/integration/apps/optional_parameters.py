"""Valid Vulkan calls that leave their optional parameters out: NULL pApplicationInfo, NULL pAllocator,
NULL pNext, zero counts with NULL arrays, VK_NULL_HANDLE where a handle is optional (issue #23).

Run: .venv/bin/python tests/integration/apps/optional_parameters.py  (bare on lavapipe, or under
`tessera run`, with or without the layer). Prints one JSON line: each call's name -> 0, or the
name of the `vulkan` package's exception for its VkResult, in call order. tests/integration/test_optional_parameters.py
runs it on lavapipe alone and through Tessera's shims, and expects the same line: a call valid on
the backend is valid under Tessera.

Every command the shims intercept that has such a parameter is called here with it left out
(vkapi/intercepts.py); the create infos carry nothing but what Vulkan requires.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import vulkan as vk

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import vkapp  # noqa: E402

results: dict[str, int] = {}


def call(name: str, fn, *args):
    """Run a `vulkan` package command; record its VkResult (the package raises on errors)."""
    try:
        out = fn(*args)
    except vk.VkError as e:   # one class per VkResult
        results[name] = type(e).__name__
        return None
    results.setdefault(name, 0)
    return out


def main() -> None:
    # vkCreateInstance: no application info (Vulkan 1.0), no layers or extensions, no allocator (spec 4.2).
    bare = call("vkCreateInstance(no application info)", vk.vkCreateInstance,
                vk.VkInstanceCreateInfo(pApplicationInfo=None), None)
    if bare is None:
        print(json.dumps(results))
        return
    results["physical devices (no application info)"] = len(vk.vkEnumeratePhysicalDevices(bare))
    call("vkDestroyInstance(no application info)", vk.vkDestroyInstance, bare, None)
    # The rest on a Vulkan 1.3 instance (vkCreateRenderPass2, vkQueueSubmit2 are core there).
    app = vk.VkApplicationInfo(pApplicationName="optional_parameters", apiVersion=vk.VK_MAKE_VERSION(1, 3, 0))
    instance = call("vkCreateInstance", vk.vkCreateInstance, vk.VkInstanceCreateInfo(pApplicationInfo=app), None)
    physical = vk.vkEnumeratePhysicalDevices(instance)[0]
    families = vk.vkGetPhysicalDeviceQueueFamilyProperties(physical)
    family = next(i for i, f in enumerate(families) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT)
    queue_info = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=family, queueCount=1, pQueuePriorities=[1.0])
    # vkCreateDevice: no features, no extensions, no pNext; then the device the rest runs on, with
    # synchronization2 (vkCmdPipelineBarrier2, vkQueueSubmit2).
    bare_device = call("vkCreateDevice(no features)", vk.vkCreateDevice, physical,
                       vk.VkDeviceCreateInfo(pQueueCreateInfos=[queue_info], pEnabledFeatures=None), None)
    call("vkDestroyDevice(no features)", vk.vkDestroyDevice, bare_device, None)
    sync2 = vk.VkPhysicalDeviceSynchronization2Features(synchronization2=vk.VK_TRUE)
    device = call("vkCreateDevice", vk.vkCreateDevice, physical,
                  vk.VkDeviceCreateInfo(pNext=sync2, pQueueCreateInfos=[queue_info], pEnabledFeatures=None), None)
    queue = vk.vkGetDeviceQueue(device, family, 0)

    buffer = call("vkCreateBuffer", vk.vkCreateBuffer, device, vk.VkBufferCreateInfo(
        size=256, usage=vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
    image = call("vkCreateImage", vk.vkCreateImage, device, vk.VkImageCreateInfo(
        imageType=vk.VK_IMAGE_TYPE_2D, format=vk.VK_FORMAT_R8G8B8A8_UNORM, extent=vk.VkExtent3D(4, 4, 1),
        mipLevels=1, arrayLayers=1, samples=vk.VK_SAMPLE_COUNT_1_BIT, tiling=vk.VK_IMAGE_TILING_OPTIMAL,
        usage=vk.VK_IMAGE_USAGE_SAMPLED_BIT, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE,
        initialLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED), None)
    reqs = vk.vkGetImageMemoryRequirements(device, image)
    props = vk.vkGetPhysicalDeviceMemoryProperties(physical)
    kind = next(i for i in range(props.memoryTypeCount) if reqs.memoryTypeBits >> i & 1)
    memory = vk.vkAllocateMemory(device, vk.VkMemoryAllocateInfo(allocationSize=reqs.size, memoryTypeIndex=kind), None)
    vk.vkBindImageMemory(device, image, memory, 0)
    view = call("vkCreateImageView", vk.vkCreateImageView, device, vk.VkImageViewCreateInfo(
        image=image, viewType=vk.VK_IMAGE_VIEW_TYPE_2D, format=vk.VK_FORMAT_R8G8B8A8_UNORM,
        subresourceRange=vk.VkImageSubresourceRange(vk.VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1)), None)

    # A render pass with no attachments and one empty subpass; a framebuffer with no attachments.
    subpass = vk.VkSubpassDescription(pipelineBindPoint=vk.VK_PIPELINE_BIND_POINT_GRAPHICS)
    render_pass = call("vkCreateRenderPass", vk.vkCreateRenderPass, device,
                       vk.VkRenderPassCreateInfo(pSubpasses=[subpass]), None)
    subpass2 = vk.VkSubpassDescription2(pipelineBindPoint=vk.VK_PIPELINE_BIND_POINT_GRAPHICS)
    render_pass2 = call("vkCreateRenderPass2", vk.vkCreateRenderPass2, device,
                        vk.VkRenderPassCreateInfo2(pSubpasses=[subpass2]), None)
    framebuffer = call("vkCreateFramebuffer", vk.vkCreateFramebuffer, device, vk.VkFramebufferCreateInfo(
        renderPass=render_pass, width=4, height=4, layers=1), None)

    set_layout = call("vkCreateDescriptorSetLayout", vk.vkCreateDescriptorSetLayout, device,
                      vk.VkDescriptorSetLayoutCreateInfo(), None)
    pipeline_layout = call("vkCreatePipelineLayout", vk.vkCreatePipelineLayout, device,
                           vk.VkPipelineLayoutCreateInfo(), None)
    pool = call("vkCreateDescriptorPool", vk.vkCreateDescriptorPool, device,
                vk.VkDescriptorPoolCreateInfo(maxSets=1), None)
    sets = call("vkAllocateDescriptorSets", vk.vkAllocateDescriptorSets, device, vk.VkDescriptorSetAllocateInfo(
        descriptorPool=pool, pSetLayouts=[set_layout]))
    call("vkUpdateDescriptorSets", vk.vkUpdateDescriptorSets, device, 0, None, 0, None)

    code = vkapp.compile_glsl(vkapp.Settings.from_env(), vkapp.SHADER_DIR / "collatz.comp")
    module = call("vkCreateShaderModule", vk.vkCreateShaderModule, device,
                  vk.VkShaderModuleCreateInfo(codeSize=len(code), pCode=code), None)
    compute_set_layout = vk.vkCreateDescriptorSetLayout(device, vk.VkDescriptorSetLayoutCreateInfo(pBindings=[
        vk.VkDescriptorSetLayoutBinding(b, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, vk.VK_SHADER_STAGE_COMPUTE_BIT)
        for b in (0, 1)]), None)
    compute_layout = vk.vkCreatePipelineLayout(device, vk.VkPipelineLayoutCreateInfo(
        pSetLayouts=[compute_set_layout],
        pPushConstantRanges=[vk.VkPushConstantRange(vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, 4)]), None)
    stage = vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=module, pName="main",
                                               pSpecializationInfo=None)
    pipelines = call("vkCreateComputePipelines", vk.vkCreateComputePipelines, device, None, 1,
                     [vk.VkComputePipelineCreateInfo(stage=stage, layout=compute_layout)], None)

    # A graphics pipeline with every optional state left out: rasterization discarded, so no viewport,
    # multisample, depth-stencil or colour-blend state; no vertex bindings, no dynamic state, no cache.
    vertex_code = vkapp.compile_glsl(vkapp.Settings.from_env(), vkapp.SHADER_DIR / "fullscreen.vert")
    vertex = vk.vkCreateShaderModule(device, vk.VkShaderModuleCreateInfo(codeSize=len(vertex_code),
                                                                         pCode=vertex_code), None)
    vertex_stage = vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_VERTEX_BIT, module=vertex,
                                                      pName="main")   # a local: the package frees pName else
    graphics = call("vkCreateGraphicsPipelines", vk.vkCreateGraphicsPipelines, device, None, 1, [
        vk.VkGraphicsPipelineCreateInfo(
            pStages=[vertex_stage],
            pVertexInputState=vk.VkPipelineVertexInputStateCreateInfo(),
            pInputAssemblyState=vk.VkPipelineInputAssemblyStateCreateInfo(
                topology=vk.VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST),
            pRasterizationState=vk.VkPipelineRasterizationStateCreateInfo(
                rasterizerDiscardEnable=vk.VK_TRUE, polygonMode=vk.VK_POLYGON_MODE_FILL, lineWidth=1.0),
            layout=pipeline_layout, renderPass=render_pass, subpass=0)], None)
    # An update template of one entry (at least one is required), no allocator.
    template = call("vkCreateDescriptorUpdateTemplate", vk.vkCreateDescriptorUpdateTemplate, device,
                    vk.VkDescriptorUpdateTemplateCreateInfo(
                        pDescriptorUpdateEntries=[vk.VkDescriptorUpdateTemplateEntry(
                            dstBinding=0, descriptorCount=1, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                            offset=0, stride=16)],
                        templateType=vk.VK_DESCRIPTOR_UPDATE_TEMPLATE_TYPE_DESCRIPTOR_SET,
                        descriptorSetLayout=compute_set_layout),
                    None)

    # A query pool (occlusion: no feature needed), no pNext, no allocator; used once below (measured counters watch
    # the application's queries, icd/measured_counters.py).
    query_pool = call("vkCreateQueryPool", vk.vkCreateQueryPool, device, vk.VkQueryPoolCreateInfo(
        queryType=vk.VK_QUERY_TYPE_OCCLUSION, queryCount=1), None)

    # A semaphore with no pNext (binary: the driver looks in its chain for a timeline type), no allocator.
    semaphore = call("vkCreateSemaphore", vk.vkCreateSemaphore, device, vk.VkSemaphoreCreateInfo(), None)

    pool_cb = vk.vkCreateCommandPool(device, vk.VkCommandPoolCreateInfo(queueFamilyIndex=family), None)
    cbs = call("vkAllocateCommandBuffers", vk.vkAllocateCommandBuffers, device, vk.VkCommandBufferAllocateInfo(
        commandPool=pool_cb, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))
    cb = cbs[0]
    call("vkBeginCommandBuffer", vk.vkBeginCommandBuffer, cb, vk.VkCommandBufferBeginInfo(pInheritanceInfo=None))
    call("vkCmdPipelineBarrier", vk.vkCmdPipelineBarrier, cb, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT,
         vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, 0, 0, None, 0, None, 0, None)
    call("vkCmdPipelineBarrier2", vk.vkCmdPipelineBarrier2, cb, vk.VkDependencyInfo())
    vk.vkCmdResetQueryPool(cb, query_pool, 0, 1)
    call("vkCmdBeginQuery", vk.vkCmdBeginQuery, cb, query_pool, 0, 0)
    call("vkCmdEndQuery", vk.vkCmdEndQuery, cb, query_pool, 0)
    call("vkEndCommandBuffer", vk.vkEndCommandBuffer, cb)
    # Submits: none at all; one with nothing in it; one with the (empty) command buffer, no fence.
    call("vkQueueSubmit(0)", vk.vkQueueSubmit, queue, 0, None, None)
    call("vkQueueSubmit(empty)", vk.vkQueueSubmit, queue, 1, [vk.VkSubmitInfo()], None)
    call("vkQueueSubmit", vk.vkQueueSubmit, queue, 1, [vk.VkSubmitInfo(pCommandBuffers=[cb])], None)
    call("vkQueueSubmit2(0)", vk.vkQueueSubmit2, queue, 0, None, None)
    call("vkQueueSubmit2(empty)", vk.vkQueueSubmit2, queue, 1, [vk.VkSubmitInfo2()], None)
    call("vkQueueWaitIdle", vk.vkQueueWaitIdle, queue)
    call("vkDeviceWaitIdle", vk.vkDeviceWaitIdle, device)

    # Destroys and frees of VK_NULL_HANDLE (valid: nothing happens), then of the real objects.
    for name in ("vkDestroyBuffer", "vkDestroyImage", "vkDestroyImageView", "vkDestroyFramebuffer",
                 "vkDestroyRenderPass", "vkDestroyPipeline", "vkDestroyPipelineLayout", "vkDestroyShaderModule",
                 "vkDestroyDescriptorPool", "vkDestroyDescriptorSetLayout", "vkDestroyCommandPool",
                 "vkDestroySemaphore", "vkDestroyDescriptorUpdateTemplate", "vkDestroyPrivateDataSlot",
                 "vkDestroyQueryPool"):
        call(f"{name}(NULL)", getattr(vk, name), device, None, None)
    call("vkFreeCommandBuffers(NULL entry)", vk.vkFreeCommandBuffers, device, pool_cb, 1, [vk.ffi.NULL])
    vk.vkFreeCommandBuffers(device, pool_cb, 1, cbs)
    vk.vkDestroyCommandPool(device, pool_cb, None)
    call("vkDestroyQueryPool", vk.vkDestroyQueryPool, device, query_pool, None)
    call("vkDestroySemaphore", vk.vkDestroySemaphore, device, semaphore, None)
    vk.vkDestroyPipeline(device, pipelines[0], None)
    vk.vkDestroyPipeline(device, graphics[0], None)
    vk.vkDestroyDescriptorUpdateTemplate(device, template, None)
    vk.vkDestroyShaderModule(device, vertex, None)
    vk.vkDestroyPipelineLayout(device, compute_layout, None)
    vk.vkDestroyDescriptorSetLayout(device, compute_set_layout, None)
    vk.vkDestroyShaderModule(device, module, None)
    del sets
    for destroy, handle in ((vk.vkDestroyDescriptorPool, pool), (vk.vkDestroyPipelineLayout, pipeline_layout),
                            (vk.vkDestroyDescriptorSetLayout, set_layout), (vk.vkDestroyFramebuffer, framebuffer),
                            (vk.vkDestroyRenderPass, render_pass), (vk.vkDestroyRenderPass, render_pass2),
                            (vk.vkDestroyImageView, view), (vk.vkDestroyImage, image), (vk.vkDestroyBuffer, buffer)):
        destroy(device, handle, None)
    vk.vkFreeMemory(device, memory, None)
    call("vkDestroyDevice", vk.vkDestroyDevice, device, None)
    call("vkDestroyDevice(NULL)", vk.vkDestroyDevice, None, None)
    call("vkDestroyInstance", vk.vkDestroyInstance, instance, None)
    call("vkDestroyInstance(NULL)", vk.vkDestroyInstance, None, None)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
