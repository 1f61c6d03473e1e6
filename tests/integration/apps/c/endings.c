/*
 * endings: GPU work followed by each way a C program can end (tests/integration/test_endings.py).
 *
 *     endings ENDING SUBMITS WORK
 *
 * Makes SUBMITS submits on one queue, each of one command buffer holding a vkCmdFillBuffer and a
 * vkCmdCopyBuffer (2 GPU workloads), and with WORK = indirect also a vkCmdDispatchIndirect of an
 * empty compute pipeline (3 workloads; its size is read by the driver only after execution). Then:
 *   return        returns from main at once: nothing waited for, nothing destroyed
 *   exit          exit(0) at once
 *   wait-return   vkQueueWaitIdle + vkDeviceWaitIdle, then returns without destroying anything
 *   fence-_exit   waits for the last submit's fence, then _exit(0) (no atexit handlers)
 *   poll-_exit    polls the last submit's fence (vkGetFenceStatus) until it signals, then _exit(0)
 *   counter-_exit the last submit also signals a timeline semaphore to 1; polls its value
 *                 (vkGetSemaphoreCounterValue) until it is 1, then _exit(0)
 *   wait-_exit    vkQueueWaitIdle, then _exit(0)
 *   wait-abort    vkQueueWaitIdle, then abort()
 *   wait-kill     vkQueueWaitIdle, then SIGKILL to itself
 *   fork-exit     forks a child that calls exit(0) at once (it inherits Tessera's exit handler but not its
 *                 threads), waits for it, then returns without waiting for the GPU
 *   destroy       vkQueueWaitIdle, destroys everything, returns
 * Prints "endings: submitted N" on stdout before it ends. Links -lvulkan; the compute shader comes from
 * build/bench/gen/record_empty.comp.h (examples/Makefile).
 */
#define _POSIX_C_SOURCE 200809L
#include <vulkan/vulkan.h>

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "record_empty.comp.h"

#define CHECK(call)                                                                          \
    do {                                                                                     \
        VkResult r_ = (call);                                                                \
        if (r_ != VK_SUCCESS) {                                                              \
            fprintf(stderr, "endings: %s returned %d (line %d)\n", #call, (int)r_, __LINE__); \
            exit(2);                                                                         \
        }                                                                                    \
    } while (0)

#define SIZE 4096

static uint32_t memory_type(VkPhysicalDevice physical, uint32_t bits, VkMemoryPropertyFlags want)
{
    VkPhysicalDeviceMemoryProperties props;
    vkGetPhysicalDeviceMemoryProperties(physical, &props);
    for (uint32_t i = 0; i < props.memoryTypeCount; i++)
        if ((bits & (1u << i)) && (props.memoryTypes[i].propertyFlags & want) == want)
            return i;
    fprintf(stderr, "endings: no memory type\n");
    exit(2);
}

static VkBuffer buffer(VkDevice device, VkPhysicalDevice physical, VkBufferUsageFlags usage, VkDeviceMemory *memory)
{
    VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = SIZE, .usage = usage};
    VkBuffer b;
    CHECK(vkCreateBuffer(device, &info, NULL, &b));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device, b, &req);
    VkMemoryAllocateInfo alloc = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                                  .memoryTypeIndex = memory_type(physical, req.memoryTypeBits,
                                                                 VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                                                     VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)};
    CHECK(vkAllocateMemory(device, &alloc, NULL, memory));
    CHECK(vkBindBufferMemory(device, b, *memory, 0));
    return b;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: endings ENDING SUBMITS plain|indirect\n");
        return 2;
    }
    const char *ending = argv[1];
    int submits = atoi(argv[2]);
    int indirect = !strcmp(argv[3], "indirect");

    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "endings",
                             .apiVersion = VK_API_VERSION_1_3};
    VkInstanceCreateInfo inst_info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkInstance instance;
    CHECK(vkCreateInstance(&inst_info, NULL, &instance));
    uint32_t count = 1;
    VkPhysicalDevice physical;
    VkResult r = vkEnumeratePhysicalDevices(instance, &count, &physical);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || count == 0) {
        fprintf(stderr, "endings: no device\n");
        return 2;
    }
    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = 0,
                                          .queueCount = 1, .pQueuePriorities = &priority};
    VkPhysicalDeviceVulkan12Features v12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .timelineSemaphore = VK_TRUE};
    VkDeviceCreateInfo dev_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &v12,
                                   .queueCreateInfoCount = 1, .pQueueCreateInfos = &queue_info};
    VkDevice device;
    CHECK(vkCreateDevice(physical, &dev_info, NULL, &device));
    VkQueue queue;
    vkGetDeviceQueue(device, 0, 0, &queue);

    VkDeviceMemory src_mem, dst_mem, args_mem;
    VkBuffer src = buffer(device, physical, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                          &src_mem);
    VkBuffer dst = buffer(device, physical, VK_BUFFER_USAGE_TRANSFER_DST_BIT, &dst_mem);
    VkBuffer args = buffer(device, physical, VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT, &args_mem);
    uint32_t *groups;
    CHECK(vkMapMemory(device, args_mem, 0, SIZE, 0, (void **)&groups));
    groups[0] = 2, groups[1] = 1, groups[2] = 1;

    VkShaderModuleCreateInfo sm_info = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                        .codeSize = sizeof record_empty_comp, .pCode = record_empty_comp};
    VkShaderModule module;
    CHECK(vkCreateShaderModule(device, &sm_info, NULL, &module));
    VkPipelineLayoutCreateInfo layout_info = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    VkPipelineLayout layout;
    CHECK(vkCreatePipelineLayout(device, &layout_info, NULL, &layout));
    VkComputePipelineCreateInfo pipe_info = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = module, .pName = "main"},
        .layout = layout};
    VkPipeline pipeline;
    CHECK(vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &pipe_info, NULL, &pipeline));

    VkCommandPoolCreateInfo pool_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = 0};
    VkCommandPool pool;
    CHECK(vkCreateCommandPool(device, &pool_info, NULL, &pool));
    VkCommandBufferAllocateInfo cb_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                           .commandPool = pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                           .commandBufferCount = 1};
    VkCommandBuffer cb;
    CHECK(vkAllocateCommandBuffers(device, &cb_info, &cb));
    VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    CHECK(vkBeginCommandBuffer(cb, &begin));
    vkCmdFillBuffer(cb, src, 0, SIZE, 0x01020304u);
    VkMemoryBarrier barrier = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                               .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT};
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &barrier, 0, NULL,
                         0, NULL);
    VkBufferCopy region = {.size = SIZE};
    vkCmdCopyBuffer(cb, src, dst, 1, &region);
    if (indirect) {
        vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
        vkCmdDispatchIndirect(cb, args, 0);
    }
    CHECK(vkEndCommandBuffer(cb));

    VkFenceCreateInfo fence_info = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    CHECK(vkCreateFence(device, &fence_info, NULL, &fence));
    VkSemaphoreTypeCreateInfo timeline_info = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                               .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
    VkSemaphoreCreateInfo sem_info = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &timeline_info};
    VkSemaphore timeline;
    CHECK(vkCreateSemaphore(device, &sem_info, NULL, &timeline));
    uint64_t one = 1;
    VkTimelineSemaphoreSubmitInfo signal_one = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                                .signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &one};
    int counter = !strcmp(ending, "counter-_exit");
    VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
    for (int i = 0; i < submits; i++) {
        int last = i == submits - 1;
        if (last && counter) {   /* the last submit signals the timeline semaphore too */
            submit.pNext = &signal_one;
            submit.signalSemaphoreCount = 1;
            submit.pSignalSemaphores = &timeline;
        }
        CHECK(vkQueueSubmit(queue, 1, &submit, last ? fence : VK_NULL_HANDLE));
    }
    printf("endings: submitted %d\n", submits);
    fflush(stdout);

    if (!strcmp(ending, "return"))
        return 0;
    if (!strcmp(ending, "exit"))
        exit(0);
    if (!strcmp(ending, "fork-exit")) {
        pid_t child = fork();
        if (child == 0)
            exit(0);
        int status = 0;
        if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status)) {
            fprintf(stderr, "endings: the forked child did not exit\n");
            return 2;
        }
        return 0;
    }
    if (!strcmp(ending, "fence-_exit")) {
        CHECK(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX));
        _exit(0);
    }
    if (counter) {
        uint64_t value = 0;
        while (value < 1)
            CHECK(vkGetSemaphoreCounterValue(device, timeline, &value));
        _exit(0);
    }
    if (!strcmp(ending, "poll-_exit")) {
        VkResult status;
        while ((status = vkGetFenceStatus(device, fence)) == VK_NOT_READY)
            continue;
        CHECK(status);
        _exit(0);
    }
    CHECK(vkQueueWaitIdle(queue));
    if (!strcmp(ending, "wait-return")) {
        CHECK(vkDeviceWaitIdle(device));
        return 0;
    }
    if (!strcmp(ending, "wait-_exit"))
        _exit(0);
    if (!strcmp(ending, "wait-abort"))
        abort();
    if (!strcmp(ending, "wait-kill"))
        raise(SIGKILL);
    if (strcmp(ending, "destroy")) {
        fprintf(stderr, "endings: unknown ending %s\n", ending);
        return 2;
    }
    vkDestroyFence(device, fence, NULL);
    vkDestroySemaphore(device, timeline, NULL);
    vkDestroyCommandPool(device, pool, NULL);
    vkDestroyPipeline(device, pipeline, NULL);
    vkDestroyPipelineLayout(device, layout, NULL);
    vkDestroyShaderModule(device, module, NULL);
    vkDestroyBuffer(device, src, NULL);
    vkDestroyBuffer(device, dst, NULL);
    vkDestroyBuffer(device, args, NULL);
    vkFreeMemory(device, src_mem, NULL);
    vkFreeMemory(device, dst_mem, NULL);
    vkFreeMemory(device, args_mem, NULL);
    vkDestroyDevice(device, NULL);
    vkDestroyInstance(instance, NULL);
    return 0;
}
