/*
 * dispatch_cost: CPU cost of recording vkCmdDispatch (C11, links -lvulkan).
 *
 * Build and run:
 *     make -C examples            # builds build/bench/dispatch_cost
 *     VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json build/bench/dispatch_cost [N] [REPS]
 *
 * What it measures: on the first physical device, with one compute pipeline
 * (an empty shader, local size 64, SPIR-V embedded below) bound, the wall
 * time (CLOCK_MONOTONIC) of recording N vkCmdDispatch(1,1,1) calls into one
 * primary command buffer. N defaults to 200000, REPS to 5; the command buffer
 * is reset between repetitions and the best repetition is reported. Nothing
 * is submitted: only recording is timed, so the number is the per-call cost of
 * the loader trampoline, any layers and the driver's recording path. Run it
 * with and without a layer in one session to get the layer's overhead ratio.
 * Output: one line of JSON, {"calls":N,"ns_per_call":X,"repetitions":REPS}.
 * Exit 0 on success, 1 with a message on stderr otherwise.
 */
#define _POSIX_C_SOURCE 200809L
#include <vulkan/vulkan.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define VK_CHECK(call)                                                                     \
    do {                                                                                   \
        VkResult r_ = (call);                                                              \
        if (r_ != VK_SUCCESS) {                                                            \
            fprintf(stderr, "dispatch_cost: %s returned %d (line %d)\n", #call, (int)r_, __LINE__); \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

/* glslangValidator -V --vn empty_comp of:
 *   #version 450
 *   layout(local_size_x = 64) in;
 *   void main() {}
 */
static const uint32_t empty_comp[] = {
    0x07230203, 0x00010000, 0x0008000b, 0x0000000b, 0x00000000, 0x00020011, 0x00000001, 0x0006000b,
    0x00000001, 0x4c534c47, 0x6474732e, 0x3035342e, 0x00000000, 0x0003000e, 0x00000000, 0x00000001,
    0x0005000f, 0x00000005, 0x00000004, 0x6e69616d, 0x00000000, 0x00060010, 0x00000004, 0x00000011,
    0x00000040, 0x00000001, 0x00000001, 0x00030003, 0x00000002, 0x000001c2, 0x00040005, 0x00000004,
    0x6e69616d, 0x00000000, 0x00040047, 0x0000000a, 0x0000000b, 0x00000019, 0x00020013, 0x00000002,
    0x00030021, 0x00000003, 0x00000002, 0x00040015, 0x00000006, 0x00000020, 0x00000000, 0x00040017,
    0x00000007, 0x00000006, 0x00000003, 0x0004002b, 0x00000006, 0x00000008, 0x00000040, 0x0004002b,
    0x00000006, 0x00000009, 0x00000001, 0x0006002c, 0x00000007, 0x0000000a, 0x00000008, 0x00000009,
    0x00000009, 0x00050036, 0x00000002, 0x00000004, 0x00000000, 0x00000003, 0x000200f8, 0x00000005,
    0x000100fd, 0x00010038};

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static long parse_arg(int argc, char **argv, int i, long fallback)
{
    if (argc <= i)
        return fallback;
    char *end;
    long v = strtol(argv[i], &end, 10);
    if (*end || v <= 0) {
        fprintf(stderr, "dispatch_cost: argument %d must be a positive integer, got '%s'\n", i, argv[i]);
        exit(1);
    }
    return v;
}

int main(int argc, char **argv)
{
    const long calls = parse_arg(argc, argv, 1, 200000);
    const long reps = parse_arg(argc, argv, 2, 5);

    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "dispatch_cost",
                             .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo inst_info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkInstance instance;
    VK_CHECK(vkCreateInstance(&inst_info, NULL, &instance));
    uint32_t count = 1;
    VkPhysicalDevice physical;
    VkResult r = vkEnumeratePhysicalDevices(instance, &count, &physical);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || count == 0) {
        fprintf(stderr, "dispatch_cost: no Vulkan physical device\n");
        return 1;
    }
    uint32_t nfam = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &nfam, NULL);
    VkQueueFamilyProperties *fams = calloc(nfam, sizeof *fams);
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &nfam, fams);
    uint32_t family = UINT32_MAX;
    for (uint32_t i = 0; i < nfam && family == UINT32_MAX; i++)
        if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            family = i;
    free(fams);
    if (family == UINT32_MAX) {
        fprintf(stderr, "dispatch_cost: no compute queue family\n");
        return 1;
    }

    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                          .queueFamilyIndex = family, .queueCount = 1,
                                          .pQueuePriorities = &priority};
    VkDeviceCreateInfo dev_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1,
                                   .pQueueCreateInfos = &queue_info};
    VkDevice device;
    VK_CHECK(vkCreateDevice(physical, &dev_info, NULL, &device));

    VkShaderModuleCreateInfo module_info = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                            .codeSize = sizeof empty_comp, .pCode = empty_comp};
    VkShaderModule module;
    VK_CHECK(vkCreateShaderModule(device, &module_info, NULL, &module));
    VkPipelineLayoutCreateInfo layout_info = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    VkPipelineLayout layout;
    VK_CHECK(vkCreatePipelineLayout(device, &layout_info, NULL, &layout));
    VkComputePipelineCreateInfo pipe_info = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = module, .pName = "main"},
        .layout = layout, .basePipelineIndex = -1};
    VkPipeline pipeline;
    VK_CHECK(vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &pipe_info, NULL, &pipeline));

    VkCommandPoolCreateInfo pool_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                         .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                         .queueFamilyIndex = family};
    VkCommandPool pool;
    VK_CHECK(vkCreateCommandPool(device, &pool_info, NULL, &pool));
    VkCommandBufferAllocateInfo alloc = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                         .commandPool = pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                         .commandBufferCount = 1};
    VkCommandBuffer cmd;
    VK_CHECK(vkAllocateCommandBuffers(device, &alloc, &cmd));

    double best = -1.0;
    for (long rep = 0; rep < reps; rep++) {
        VK_CHECK(vkResetCommandBuffer(cmd, 0));
        VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                          .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
        VK_CHECK(vkBeginCommandBuffer(cmd, &begin));
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
        double t0 = now_ns();
        for (long i = 0; i < calls; i++)
            vkCmdDispatch(cmd, 1, 1, 1);
        double elapsed = now_ns() - t0;
        VK_CHECK(vkEndCommandBuffer(cmd));
        if (best < 0.0 || elapsed < best)
            best = elapsed;
    }

    vkFreeCommandBuffers(device, pool, 1, &cmd);
    vkDestroyCommandPool(device, pool, NULL);
    vkDestroyPipeline(device, pipeline, NULL);
    vkDestroyPipelineLayout(device, layout, NULL);
    vkDestroyShaderModule(device, module, NULL);
    vkDestroyDevice(device, NULL);
    vkDestroyInstance(instance, NULL);

    printf("{\"calls\":%ld,\"ns_per_call\":%.2f,\"repetitions\":%ld}\n", calls, best / (double)calls, reps);
    return 0;
}
