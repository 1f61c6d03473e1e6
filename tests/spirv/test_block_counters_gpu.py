"""Acceptance: the block-counting pass on examples/shaders/collatz.comp, run on lavapipe.

Every block's counter must equal a hand-written CPU reference of the same
control flow on the same input data. Block numbers follow docs/spirv.md:
main's blocks are global 0..4, collatz_steps' are 5..13 (see
test_reflect.test_collatz_cfg_matches_source for the map to source lines).
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from spirv_corpus import corpus_entry

from shader_references import collatz_blocks as cpu_reference

from tessera.spirv import parse, workgroup_size
from tessera.spirv.passes.block_counters import add_block_counters


def _backend() -> Path | None:
    from tessera.icd.backend import BackendError, default_manifest

    try:
        return default_manifest()
    except BackendError:
        return None


LAVAPIPE_ICD = _backend()   # the emulated driver's default backend (private Mesa 25 or the system's)
WHOLE_SIZE = 0xFFFFFFFFFFFFFFFF
COUNTER_SET, COUNTER_BINDING = 1, 0
LOCAL_X = 64

try:
    import vulkan as vk
except (ImportError, OSError):  # the package needs libvulkan.so.1
    vk = None

pytestmark = [
    pytest.mark.skipif(vk is None, reason="python `vulkan` package or libvulkan1 missing"),
    pytest.mark.skipif(LAVAPIPE_ICD is None, reason="no lavapipe ICD manifest installed (make setup)"),
]


class Gpu:
    """Minimal compute setup with the `vulkan` package (structs holding strings kept in variables)."""

    def __init__(self) -> None:
        self.app_info = vk.VkApplicationInfo(pApplicationName="tessera-spirv-test", apiVersion=vk.VK_MAKE_VERSION(1, 1, 0))
        self.instance_info = vk.VkInstanceCreateInfo(pApplicationInfo=self.app_info)
        self.instance = vk.vkCreateInstance(self.instance_info, None)
        self.physical = vk.vkEnumeratePhysicalDevices(self.instance)[0]
        families = vk.vkGetPhysicalDeviceQueueFamilyProperties(self.physical)
        self.family = next(i for i, f in enumerate(families) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT)
        self.queue_info = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=self.family, queueCount=1, pQueuePriorities=[1.0])
        self.device_info = vk.VkDeviceCreateInfo(queueCreateInfoCount=1, pQueueCreateInfos=[self.queue_info])
        self.device = vk.vkCreateDevice(self.physical, self.device_info, None)
        self.queue = vk.vkGetDeviceQueue(self.device, self.family, 0)
        self.memory_props = vk.vkGetPhysicalDeviceMemoryProperties(self.physical)
        self.objects: list[tuple[str, object]] = []

    def buffer(self, size: int, data: bytes | None = None) -> tuple[object, object]:
        info = vk.VkBufferCreateInfo(size=size, usage=vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                                     sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE)
        buf = vk.vkCreateBuffer(self.device, info, None)
        req = vk.vkGetBufferMemoryRequirements(self.device, buf)
        want = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        index = next(i for i in range(self.memory_props.memoryTypeCount)
                     if req.memoryTypeBits & (1 << i) and self.memory_props.memoryTypes[i].propertyFlags & want == want)
        memory = vk.vkAllocateMemory(self.device, vk.VkMemoryAllocateInfo(allocationSize=req.size,
                                                                         memoryTypeIndex=index), None)
        vk.vkBindBufferMemory(self.device, buf, memory, 0)
        mapped = vk.vkMapMemory(self.device, memory, 0, size, 0)
        mapped[:size] = data if data is not None else bytes(size)
        vk.vkUnmapMemory(self.device, memory)
        self.objects.append(("buffer", (buf, memory)))
        return buf, memory

    def read(self, memory: object, size: int) -> bytes:
        mapped = vk.vkMapMemory(self.device, memory, 0, size, 0)
        data = bytes(mapped[:size])
        vk.vkUnmapMemory(self.device, memory)
        return data

    def destroy(self) -> None:
        for _, (buf, memory) in self.objects:
            vk.vkDestroyBuffer(self.device, buf, None)
            vk.vkFreeMemory(self.device, memory, None)
        vk.vkDestroyDevice(self.device, None)
        vk.vkDestroyInstance(self.instance, None)


def run_collatz(gpu: Gpu, code: bytes, values: list[int], count: int, groups: int, counter_count: int
                ) -> tuple[list[int], list[int]]:
    d = gpu.device
    inputs, _ = gpu.buffer(4 * len(values), struct.pack(f"<{len(values)}I", *values))
    outputs, out_mem = gpu.buffer(4 * len(values))
    counters, counter_mem = gpu.buffer(4 * counter_count)

    def storage(binding: int) -> object:
        return vk.VkDescriptorSetLayoutBinding(binding=binding, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                               descriptorCount=1, stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT)

    set0_bindings = [storage(0), storage(1)]
    set1_bindings = [storage(COUNTER_BINDING)]
    layout0 = vk.vkCreateDescriptorSetLayout(d, vk.VkDescriptorSetLayoutCreateInfo(
        bindingCount=2, pBindings=set0_bindings), None)
    layout1 = vk.vkCreateDescriptorSetLayout(d, vk.VkDescriptorSetLayoutCreateInfo(
        bindingCount=1, pBindings=set1_bindings), None)
    push_range = vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0, size=4)
    pipeline_layout = vk.vkCreatePipelineLayout(d, vk.VkPipelineLayoutCreateInfo(
        setLayoutCount=2, pSetLayouts=[layout0, layout1], pushConstantRangeCount=1,
        pPushConstantRanges=[push_range]), None)
    module_info = vk.VkShaderModuleCreateInfo(codeSize=len(code), pCode=code)
    shader = vk.vkCreateShaderModule(d, module_info, None)
    spec_data = vk.ffi.new("uint32_t[1]", [LOCAL_X])
    spec_entry = vk.VkSpecializationMapEntry(constantID=0, offset=0, size=4)
    spec_info = vk.VkSpecializationInfo(mapEntryCount=1, pMapEntries=[spec_entry], dataSize=4, pData=spec_data)
    stage = vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=shader, pName="main",
                                               pSpecializationInfo=spec_info)
    pipeline_info = vk.VkComputePipelineCreateInfo(stage=stage, layout=pipeline_layout)
    pipeline = vk.vkCreateComputePipelines(d, None, 1, [pipeline_info], None)[0]
    pool_size = vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=3)
    pool = vk.vkCreateDescriptorPool(d, vk.VkDescriptorPoolCreateInfo(maxSets=2, poolSizeCount=1,
                                                                      pPoolSizes=[pool_size]), None)
    sets = vk.vkAllocateDescriptorSets(d, vk.VkDescriptorSetAllocateInfo(
        descriptorPool=pool, descriptorSetCount=2, pSetLayouts=[layout0, layout1]))
    infos = [vk.VkDescriptorBufferInfo(buffer=b, offset=0, range=WHOLE_SIZE) for b in (inputs, outputs, counters)]
    writes = [vk.VkWriteDescriptorSet(dstSet=sets[0], dstBinding=0, descriptorCount=1,
                                      descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, pBufferInfo=[infos[0]]),
              vk.VkWriteDescriptorSet(dstSet=sets[0], dstBinding=1, descriptorCount=1,
                                      descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, pBufferInfo=[infos[1]]),
              vk.VkWriteDescriptorSet(dstSet=sets[1], dstBinding=COUNTER_BINDING, descriptorCount=1,
                                      descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, pBufferInfo=[infos[2]])]
    vk.vkUpdateDescriptorSets(d, len(writes), writes, 0, None)
    cmd_pool = vk.vkCreateCommandPool(d, vk.VkCommandPoolCreateInfo(queueFamilyIndex=gpu.family), None)
    cmd = vk.vkAllocateCommandBuffers(d, vk.VkCommandBufferAllocateInfo(
        commandPool=cmd_pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
    vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo())
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_layout, 0, 2, sets, 0, None)
    push = vk.ffi.new("uint32_t[1]", [count])
    vk.vkCmdPushConstants(cmd, pipeline_layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, push)
    vk.vkCmdDispatch(cmd, groups, 1, 1)
    vk.vkEndCommandBuffer(cmd)
    fence = vk.vkCreateFence(d, vk.VkFenceCreateInfo(), None)
    submit = vk.VkSubmitInfo(commandBufferCount=1, pCommandBuffers=[cmd])
    vk.vkQueueSubmit(gpu.queue, 1, [submit], fence)
    vk.vkWaitForFences(d, 1, [fence], vk.VK_TRUE, 10_000_000_000)
    steps = list(struct.unpack(f"<{len(values)}I", gpu.read(out_mem, 4 * len(values))))
    counts = list(struct.unpack(f"<{counter_count}I", gpu.read(counter_mem, 4 * counter_count)))
    vk.vkDestroyFence(d, fence, None)
    vk.vkDestroyCommandPool(d, cmd_pool, None)
    vk.vkDestroyDescriptorPool(d, pool, None)
    vk.vkDestroyPipeline(d, pipeline, None)
    vk.vkDestroyShaderModule(d, shader, None)
    vk.vkDestroyPipelineLayout(d, pipeline_layout, None)
    vk.vkDestroyDescriptorSetLayout(d, layout0, None)
    vk.vkDestroyDescriptorSetLayout(d, layout1, None)
    return steps, counts


def test_block_counters_match_cpu_reference(corpus: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VK_DRIVER_FILES", str(LAVAPIPE_ICD))
    monkeypatch.setenv("VK_ICD_FILENAMES", str(LAVAPIPE_ICD))
    module = parse(corpus_entry(corpus, "examples/shaders/collatz.comp").read_bytes())
    layout = add_block_counters(module, COUNTER_SET, COUNTER_BINDING)
    assert layout.count == 14
    assert [(s.function_name, s.block_index) for s in layout.slots][4:6] == [("main", 4), ("collatz_steps(u1;", 0)]
    code = module.to_bytes()
    assert workgroup_size(code, "main", {0: LOCAL_X}) == (LOCAL_X, 1, 1)

    rng = random.Random(1234)
    values = [rng.choice([0, 1, 2, 3, 7, 27, 97, 871]) if k % 5 == 0 else rng.randrange(1, 100_000)
              for k in range(300)]
    count = 250  # invocations 250..319 take the early return
    groups = (len(values) + LOCAL_X - 1) // LOCAL_X
    gpu = Gpu()
    try:
        steps, counts = run_collatz(gpu, code, values, count, groups, layout.count)
    finally:
        gpu.destroy()
    expected = cpu_reference(values, count, groups * LOCAL_X)
    assert counts == expected
    assert expected[1] == groups * LOCAL_X - count and expected[9] > 0 and expected[10] > 0 and expected[3] > 0
    # The instrumented shader still computes the right answer.
    for i in range(count):
        v, s = values[i], 0
        while v > 1 and s < 1000:
            v = v >> 1 if v % 2 == 0 else 3 * v + 1
            s += 1
        assert steps[i] == (s + 1000 if s > 20 else s)
