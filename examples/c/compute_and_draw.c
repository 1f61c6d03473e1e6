/*
 * compute_and_draw: a plain C11 Vulkan app (links -lvulkan) for Tessera.
 *
 * Build and run (plain lavapipe; add VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation to validate):
 *     make -C examples
 *     VK_DRIVER_FILES=$(.venv/bin/python -m tessera.icd.backend) build/examples/compute_and_draw [SHADER_DIR]
 *
 * SHADER_DIR holds collatz.comp.spv, quad.vert.spv and solid.frag.spv (compiled
 * by examples/Makefile from examples/shaders/); by default it is "shaders" next
 * to the executable.
 *
 * What it does, on the first physical device:
 *   1. compute: collatz.comp (work-group size 64 via specialization constant 0)
 *      over 777 inputs (fixed LCG seed) with one vkCmdDispatch of 13 groups;
 *      checks every output against a C reference.
 *   2. graphics: a VkRenderPass into a 32x32 R8G8B8A8_UNORM image, cleared to
 *      opaque black, one vkCmdDraw of a pixel-aligned rectangle (4,4)-(20,28)
 *      in orange via push constant; copies the image to a buffer and checks
 *      every pixel.
 * Validation messages (warning/error) received through VK_EXT_debug_utils
 * make the run fail. Exit 0 and one "compute_and_draw: OK ..." line on
 * success; nonzero with a "compute_and_draw: FAIL ..." line otherwise.
 */
#define _DEFAULT_SOURCE
#include <vulkan/vulkan.h>

#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COUNT 777u
#define LOCAL_SIZE 64u
#define W 32u
#define H 32u

static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "compute_and_draw: FAIL ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

#define VK_CHECK(call)                                                        \
    do {                                                                      \
        VkResult r_ = (call);                                                 \
        if (r_ != VK_SUCCESS)                                                 \
            fail("%s returned %d (line %d)", #call, (int)r_, __LINE__);       \
    } while (0)

static unsigned validation_messages;

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT types,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    (void)user;
    if (types & VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT) {
        validation_messages++;
        fprintf(stderr, "[validation %s] %s\n",
                severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "ERROR" : "WARNING", data->pMessage);
    }
    return VK_FALSE;
}

struct app {
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDevice physical;
    VkPhysicalDeviceMemoryProperties mem;
    uint32_t family;
    VkDevice device;
    VkQueue queue;
    VkCommandPool pool;
    char shader_dir[PATH_MAX];
};

struct buffer {
    VkBuffer buffer;
    VkDeviceMemory memory;
    void *map;
};

static uint32_t memory_type(const struct app *a, uint32_t bits, VkMemoryPropertyFlags flags)
{
    for (uint32_t i = 0; i < a->mem.memoryTypeCount; i++)
        if ((bits & (1u << i)) && (a->mem.memoryTypes[i].propertyFlags & flags) == flags)
            return i;
    fail("no memory type with flags 0x%x", (unsigned)flags);
    return 0;
}

static struct buffer make_buffer(const struct app *a, VkDeviceSize size, VkBufferUsageFlags usage)
{
    struct buffer b = {0};
    VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size, .usage = usage,
                               .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VK_CHECK(vkCreateBuffer(a->device, &info, NULL, &b.buffer));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(a->device, b.buffer, &req);
    VkMemoryAllocateInfo alloc = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
        .memoryTypeIndex = memory_type(a, req.memoryTypeBits,
                                       VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)};
    VK_CHECK(vkAllocateMemory(a->device, &alloc, NULL, &b.memory));
    VK_CHECK(vkBindBufferMemory(a->device, b.buffer, b.memory, 0));
    VK_CHECK(vkMapMemory(a->device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.map));
    return b;
}

static void free_buffer(const struct app *a, struct buffer *b)
{
    vkDestroyBuffer(a->device, b->buffer, NULL);
    vkFreeMemory(a->device, b->memory, NULL); /* implicitly unmaps */
}

static VkShaderModule load_shader(const struct app *a, const char *name)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", a->shader_dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail("cannot open SPIR-V %s (build with `make -C examples` or pass the shader dir)", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (size <= 0 || size % 4)
        fail("bad SPIR-V size %ld in %s", size, path);
    uint32_t *code = malloc((size_t)size);
    if (!code || fread(code, 1, (size_t)size, f) != (size_t)size)
        fail("cannot read %s", path);
    fclose(f);
    VkShaderModuleCreateInfo info = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                     .codeSize = (size_t)size, .pCode = code};
    VkShaderModule module;
    VK_CHECK(vkCreateShaderModule(a->device, &info, NULL, &module));
    free(code);
    return module;
}

static VkCommandBuffer begin_commands(const struct app *a)
{
    VkCommandBufferAllocateInfo info = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                        .commandPool = a->pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                        .commandBufferCount = 1};
    VkCommandBuffer cmd;
    VK_CHECK(vkAllocateCommandBuffers(a->device, &info, &cmd));
    VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                      .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VK_CHECK(vkBeginCommandBuffer(cmd, &begin));
    return cmd;
}

static void submit_and_wait(const struct app *a, VkCommandBuffer cmd)
{
    VK_CHECK(vkEndCommandBuffer(cmd));
    VkFenceCreateInfo fence_info = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    VK_CHECK(vkCreateFence(a->device, &fence_info, NULL, &fence));
    VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                           .pCommandBuffers = &cmd};
    VK_CHECK(vkQueueSubmit(a->queue, 1, &submit, fence));
    VK_CHECK(vkWaitForFences(a->device, 1, &fence, VK_TRUE, 10ull * 1000 * 1000 * 1000));
    vkDestroyFence(a->device, fence, NULL);
    vkFreeCommandBuffers(a->device, a->pool, 1, &cmd);
}

static void host_read_barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage, VkAccessFlags src_access)
{
    VkMemoryBarrier barrier = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = src_access,
                               .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(cmd, src_stage, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier, 0, NULL, 0, NULL);
}

static void create_app(struct app *a)
{
    uint32_t n = 0;
    VK_CHECK(vkEnumerateInstanceExtensionProperties(NULL, &n, NULL));
    VkExtensionProperties *exts = calloc(n ? n : 1, sizeof *exts);
    VK_CHECK(vkEnumerateInstanceExtensionProperties(NULL, &n, exts));
    int has_debug_utils = 0;
    for (uint32_t i = 0; i < n; i++)
        has_debug_utils |= strcmp(exts[i].extensionName, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) == 0;
    free(exts);

    const char *ext_names[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    VkApplicationInfo app_info = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                                  .pApplicationName = "compute_and_draw", .applicationVersion = 1,
                                  .pEngineName = "tessera-examples", .engineVersion = 1,
                                  .apiVersion = VK_API_VERSION_1_2};
    VkInstanceCreateInfo inst_info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                      .pApplicationInfo = &app_info,
                                      .enabledExtensionCount = has_debug_utils ? 1u : 0u,
                                      .ppEnabledExtensionNames = ext_names};
    VK_CHECK(vkCreateInstance(&inst_info, NULL, &a->instance));

    if (has_debug_utils) {
        PFN_vkCreateDebugUtilsMessengerEXT create = (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
            a->instance, "vkCreateDebugUtilsMessengerEXT");
        VkDebugUtilsMessengerCreateInfoEXT info = {
            .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
            .messageSeverity =
                VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
            .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
            .pfnUserCallback = on_message};
        if (create)
            VK_CHECK(create(a->instance, &info, NULL, &a->messenger));
    }

    uint32_t count = 1;
    VkResult r = vkEnumeratePhysicalDevices(a->instance, &count, &a->physical);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || count == 0)
        fail("no Vulkan physical device (vkEnumeratePhysicalDevices returned %d)", (int)r);
    vkGetPhysicalDeviceMemoryProperties(a->physical, &a->mem);

    uint32_t nfam = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(a->physical, &nfam, NULL);
    VkQueueFamilyProperties *fams = calloc(nfam, sizeof *fams);
    vkGetPhysicalDeviceQueueFamilyProperties(a->physical, &nfam, fams);
    a->family = UINT32_MAX;
    for (uint32_t i = 0; i < nfam && a->family == UINT32_MAX; i++)
        if ((fams[i].queueFlags & (VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT)) ==
            (VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT))
            a->family = i;
    free(fams);
    if (a->family == UINT32_MAX)
        fail("no graphics+compute queue family");

    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                          .queueFamilyIndex = a->family, .queueCount = 1,
                                          .pQueuePriorities = &priority};
    VkDeviceCreateInfo dev_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1,
                                   .pQueueCreateInfos = &queue_info};
    VK_CHECK(vkCreateDevice(a->physical, &dev_info, NULL, &a->device));
    vkGetDeviceQueue(a->device, a->family, 0, &a->queue);
    VkCommandPoolCreateInfo pool_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                         .queueFamilyIndex = a->family};
    VK_CHECK(vkCreateCommandPool(a->device, &pool_info, NULL, &a->pool));
}

static void destroy_app(struct app *a)
{
    vkDestroyCommandPool(a->device, a->pool, NULL);
    vkDestroyDevice(a->device, NULL);
    if (a->messenger) {
        PFN_vkDestroyDebugUtilsMessengerEXT destroy = (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
            a->instance, "vkDestroyDebugUtilsMessengerEXT");
        destroy(a->instance, a->messenger, NULL);
    }
    vkDestroyInstance(a->instance, NULL);
}

/* Mirrors examples/shaders/collatz.comp (uint32 arithmetic). */
static uint32_t collatz_reference(uint32_t v)
{
    uint32_t steps = 0;
    while (v > 1u && steps < 1000u) {
        v = (v & 1u) == 0u ? v >> 1 : 3u * v + 1u;
        steps++;
    }
    return steps > 20u ? steps + 1000u : steps;
}

static unsigned run_compute(const struct app *a)
{
    struct buffer in = make_buffer(a, COUNT * 4, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT);
    struct buffer out = make_buffer(a, COUNT * 4, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT);
    uint32_t *inputs = in.map, *outputs = out.map;
    uint32_t seed = 12345u;
    for (uint32_t i = 0; i < COUNT; i++) {
        seed = seed * 1664525u + 1013904223u;
        inputs[i] = 1u + (seed >> 8) % 60000u;
        outputs[i] = 0xFFFFFFFFu;
    }

    VkDescriptorSetLayoutBinding bindings[2] = {
        {.binding = 0, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 1,
         .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT},
        {.binding = 1, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 1,
         .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT}};
    VkDescriptorSetLayoutCreateInfo set_info = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                                .bindingCount = 2, .pBindings = bindings};
    VkDescriptorSetLayout set_layout;
    VK_CHECK(vkCreateDescriptorSetLayout(a->device, &set_info, NULL, &set_layout));
    VkPushConstantRange push = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = 4};
    VkPipelineLayoutCreateInfo layout_info = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                              .setLayoutCount = 1, .pSetLayouts = &set_layout,
                                              .pushConstantRangeCount = 1, .pPushConstantRanges = &push};
    VkPipelineLayout layout;
    VK_CHECK(vkCreatePipelineLayout(a->device, &layout_info, NULL, &layout));

    VkShaderModule module = load_shader(a, "collatz.comp.spv");
    uint32_t local_size = LOCAL_SIZE;
    VkSpecializationMapEntry entry = {.constantID = 0, .offset = 0, .size = 4};
    VkSpecializationInfo spec = {.mapEntryCount = 1, .pMapEntries = &entry, .dataSize = 4, .pData = &local_size};
    VkComputePipelineCreateInfo pipe_info = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = module, .pName = "main", .pSpecializationInfo = &spec},
        .layout = layout, .basePipelineIndex = -1};
    VkPipeline pipeline;
    VK_CHECK(vkCreateComputePipelines(a->device, VK_NULL_HANDLE, 1, &pipe_info, NULL, &pipeline));

    VkDescriptorPoolSize pool_size = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 2};
    VkDescriptorPoolCreateInfo pool_info = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = 1,
                                            .poolSizeCount = 1, .pPoolSizes = &pool_size};
    VkDescriptorPool pool;
    VK_CHECK(vkCreateDescriptorPool(a->device, &pool_info, NULL, &pool));
    VkDescriptorSetAllocateInfo alloc = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                         .descriptorPool = pool, .descriptorSetCount = 1,
                                         .pSetLayouts = &set_layout};
    VkDescriptorSet set;
    VK_CHECK(vkAllocateDescriptorSets(a->device, &alloc, &set));
    VkDescriptorBufferInfo infos[2] = {{in.buffer, 0, VK_WHOLE_SIZE}, {out.buffer, 0, VK_WHOLE_SIZE}};
    VkWriteDescriptorSet writes[2];
    for (int i = 0; i < 2; i++)
        writes[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = set,
                                           .dstBinding = (uint32_t)i, .descriptorCount = 1,
                                           .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                           .pBufferInfo = &infos[i]};
    vkUpdateDescriptorSets(a->device, 2, writes, 0, NULL);

    VkCommandBuffer cmd = begin_commands(a);
    uint32_t count = COUNT;
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &set, 0, NULL);
    vkCmdPushConstants(cmd, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &count);
    vkCmdDispatch(cmd, (COUNT + LOCAL_SIZE - 1) / LOCAL_SIZE, 1, 1);
    host_read_barrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT);
    submit_and_wait(a, cmd);

    for (uint32_t i = 0; i < COUNT; i++) {
        uint32_t want = collatz_reference(inputs[i]);
        if (outputs[i] != want)
            fail("collatz output %u: got %u, want %u (input %u)", i, outputs[i], want, inputs[i]);
    }

    vkDestroyDescriptorPool(a->device, pool, NULL);
    vkDestroyPipeline(a->device, pipeline, NULL);
    vkDestroyShaderModule(a->device, module, NULL);
    vkDestroyPipelineLayout(a->device, layout, NULL);
    vkDestroyDescriptorSetLayout(a->device, set_layout, NULL);
    free_buffer(a, &in);
    free_buffer(a, &out);
    return COUNT;
}

static float ndc(uint32_t px, uint32_t size) { return 2.0f * (float)px / (float)size - 1.0f; }

static unsigned run_draw(const struct app *a)
{
    const VkFormat format = VK_FORMAT_R8G8B8A8_UNORM;
    const uint32_t x0 = 4, y0 = 4, x1 = 20, y1 = 28;
    const uint8_t clear_rgba[4] = {0, 0, 0, 255}, rect_rgba[4] = {255, 128, 0, 255};

    VkImageCreateInfo image_info = {
        .sType = VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO, .imageType = VK_IMAGE_TYPE_2D, .format = format,
        .extent = {W, H, 1}, .mipLevels = 1, .arrayLayers = 1, .samples = VK_SAMPLE_COUNT_1_BIT,
        .tiling = VK_IMAGE_TILING_OPTIMAL,
        .usage = VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | VK_IMAGE_USAGE_TRANSFER_SRC_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE, .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED};
    VkImage image;
    VK_CHECK(vkCreateImage(a->device, &image_info, NULL, &image));
    VkMemoryRequirements req;
    vkGetImageMemoryRequirements(a->device, image, &req);
    VkMemoryAllocateInfo alloc = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                                  .memoryTypeIndex =
                                      memory_type(a, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)};
    VkDeviceMemory image_memory;
    VK_CHECK(vkAllocateMemory(a->device, &alloc, NULL, &image_memory));
    VK_CHECK(vkBindImageMemory(a->device, image, image_memory, 0));
    VkImageViewCreateInfo view_info = {
        .sType = VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO, .image = image, .viewType = VK_IMAGE_VIEW_TYPE_2D,
        .format = format, .subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1}};
    VkImageView view;
    VK_CHECK(vkCreateImageView(a->device, &view_info, NULL, &view));

    VkAttachmentDescription attachment = {
        .format = format, .samples = VK_SAMPLE_COUNT_1_BIT, .loadOp = VK_ATTACHMENT_LOAD_OP_CLEAR,
        .storeOp = VK_ATTACHMENT_STORE_OP_STORE, .stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE,
        .stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE, .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED,
        .finalLayout = VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL};
    VkAttachmentReference ref = {0, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
    VkSubpassDescription subpass = {.pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS,
                                    .colorAttachmentCount = 1, .pColorAttachments = &ref};
    VkSubpassDependency dependency = {.srcSubpass = 0, .dstSubpass = VK_SUBPASS_EXTERNAL,
                                      .srcStageMask = VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                                      .dstStageMask = VK_PIPELINE_STAGE_TRANSFER_BIT,
                                      .srcAccessMask = VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
                                      .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT};
    VkRenderPassCreateInfo rp_info = {.sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO, .attachmentCount = 1,
                                      .pAttachments = &attachment, .subpassCount = 1, .pSubpasses = &subpass,
                                      .dependencyCount = 1, .pDependencies = &dependency};
    VkRenderPass render_pass;
    VK_CHECK(vkCreateRenderPass(a->device, &rp_info, NULL, &render_pass));
    VkFramebufferCreateInfo fb_info = {.sType = VK_STRUCTURE_TYPE_FRAMEBUFFER_CREATE_INFO,
                                       .renderPass = render_pass, .attachmentCount = 1, .pAttachments = &view,
                                       .width = W, .height = H, .layers = 1};
    VkFramebuffer framebuffer;
    VK_CHECK(vkCreateFramebuffer(a->device, &fb_info, NULL, &framebuffer));

    VkPushConstantRange push = {.stageFlags = VK_SHADER_STAGE_FRAGMENT_BIT, .offset = 0, .size = 16};
    VkPipelineLayoutCreateInfo layout_info = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                              .pushConstantRangeCount = 1, .pPushConstantRanges = &push};
    VkPipelineLayout layout;
    VK_CHECK(vkCreatePipelineLayout(a->device, &layout_info, NULL, &layout));
    VkShaderModule vert = load_shader(a, "quad.vert.spv"), frag = load_shader(a, "solid.frag.spv");
    VkPipelineShaderStageCreateInfo stages[2] = {
        {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_VERTEX_BIT,
         .module = vert, .pName = "main"},
        {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_FRAGMENT_BIT,
         .module = frag, .pName = "main"}};
    VkVertexInputBindingDescription vbind = {0, 8, VK_VERTEX_INPUT_RATE_VERTEX};
    VkVertexInputAttributeDescription vattr = {0, 0, VK_FORMAT_R32G32_SFLOAT, 0};
    VkPipelineVertexInputStateCreateInfo vertex_input = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO, .vertexBindingDescriptionCount = 1,
        .pVertexBindingDescriptions = &vbind, .vertexAttributeDescriptionCount = 1,
        .pVertexAttributeDescriptions = &vattr};
    VkPipelineInputAssemblyStateCreateInfo assembly = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO,
        .topology = VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST};
    VkViewport viewport = {0.0f, 0.0f, (float)W, (float)H, 0.0f, 1.0f};
    VkRect2D scissor = {{0, 0}, {W, H}};
    VkPipelineViewportStateCreateInfo viewport_state = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO, .viewportCount = 1,
        .pViewports = &viewport, .scissorCount = 1, .pScissors = &scissor};
    VkPipelineRasterizationStateCreateInfo raster = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO, .polygonMode = VK_POLYGON_MODE_FILL,
        .cullMode = VK_CULL_MODE_NONE, .frontFace = VK_FRONT_FACE_COUNTER_CLOCKWISE, .lineWidth = 1.0f};
    VkPipelineMultisampleStateCreateInfo multisample = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO,
        .rasterizationSamples = VK_SAMPLE_COUNT_1_BIT};
    VkPipelineColorBlendAttachmentState blend_attachment = {
        .colorWriteMask = VK_COLOR_COMPONENT_R_BIT | VK_COLOR_COMPONENT_G_BIT | VK_COLOR_COMPONENT_B_BIT |
                          VK_COLOR_COMPONENT_A_BIT};
    VkPipelineColorBlendStateCreateInfo blend = {.sType = VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO,
                                                 .attachmentCount = 1, .pAttachments = &blend_attachment};
    VkGraphicsPipelineCreateInfo pipe_info = {
        .sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO, .stageCount = 2, .pStages = stages,
        .pVertexInputState = &vertex_input, .pInputAssemblyState = &assembly, .pViewportState = &viewport_state,
        .pRasterizationState = &raster, .pMultisampleState = &multisample, .pColorBlendState = &blend,
        .layout = layout, .renderPass = render_pass, .subpass = 0, .basePipelineIndex = -1};
    VkPipeline pipeline;
    VK_CHECK(vkCreateGraphicsPipelines(a->device, VK_NULL_HANDLE, 1, &pipe_info, NULL, &pipeline));

    struct buffer vertices = make_buffer(a, 6 * 2 * sizeof(float), VK_BUFFER_USAGE_VERTEX_BUFFER_BIT);
    float l = ndc(x0, W), r = ndc(x1, W), t = ndc(y0, H), b = ndc(y1, H);
    const float quad[12] = {l, t, r, t, l, b, l, b, r, t, r, b};
    memcpy(vertices.map, quad, sizeof quad);
    struct buffer readback = make_buffer(a, W * H * 4, VK_BUFFER_USAGE_TRANSFER_DST_BIT);

    VkCommandBuffer cmd = begin_commands(a);
    VkClearValue clear = {.color = {.float32 = {clear_rgba[0] / 255.0f, clear_rgba[1] / 255.0f,
                                                clear_rgba[2] / 255.0f, clear_rgba[3] / 255.0f}}};
    VkRenderPassBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO, .renderPass = render_pass,
                                   .framebuffer = framebuffer, .renderArea = {{0, 0}, {W, H}},
                                   .clearValueCount = 1, .pClearValues = &clear};
    vkCmdBeginRenderPass(cmd, &begin, VK_SUBPASS_CONTENTS_INLINE);
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, pipeline);
    VkDeviceSize zero = 0;
    vkCmdBindVertexBuffers(cmd, 0, 1, &vertices.buffer, &zero);
    const float color[4] = {rect_rgba[0] / 255.0f, rect_rgba[1] / 255.0f, rect_rgba[2] / 255.0f,
                            rect_rgba[3] / 255.0f};
    vkCmdPushConstants(cmd, layout, VK_SHADER_STAGE_FRAGMENT_BIT, 0, sizeof color, color);
    vkCmdDraw(cmd, 6, 1, 0, 0);
    vkCmdEndRenderPass(cmd);
    VkBufferImageCopy region = {.imageSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1},
                                .imageExtent = {W, H, 1}};
    vkCmdCopyImageToBuffer(cmd, image, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, readback.buffer, 1, &region);
    host_read_barrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT);
    submit_and_wait(a, cmd);

    const uint8_t *pixels = readback.map;
    for (uint32_t y = 0; y < H; y++)
        for (uint32_t x = 0; x < W; x++) {
            int inside = x >= x0 && x < x1 && y >= y0 && y < y1;
            const uint8_t *want = inside ? rect_rgba : clear_rgba, *got = pixels + 4 * (y * W + x);
            if (memcmp(got, want, 4) != 0)
                fail("pixel (%u,%u): got %u,%u,%u,%u want %u,%u,%u,%u", x, y, got[0], got[1], got[2], got[3],
                     want[0], want[1], want[2], want[3]);
        }

    free_buffer(a, &vertices);
    free_buffer(a, &readback);
    vkDestroyPipeline(a->device, pipeline, NULL);
    vkDestroyShaderModule(a->device, vert, NULL);
    vkDestroyShaderModule(a->device, frag, NULL);
    vkDestroyPipelineLayout(a->device, layout, NULL);
    vkDestroyFramebuffer(a->device, framebuffer, NULL);
    vkDestroyRenderPass(a->device, render_pass, NULL);
    vkDestroyImageView(a->device, view, NULL);
    vkDestroyImage(a->device, image, NULL);
    vkFreeMemory(a->device, image_memory, NULL);
    return W * H;
}

int main(int argc, char **argv)
{
    struct app a = {0};
    if (argc > 1) {
        snprintf(a.shader_dir, sizeof a.shader_dir, "%s", argv[1]);
    } else {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0)
            fail("cannot resolve /proc/self/exe; pass the shader directory as argument");
        exe[n] = '\0';
        snprintf(a.shader_dir, sizeof a.shader_dir, "%s/shaders", dirname(exe));
    }
    create_app(&a);
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(a.physical, &props);
    unsigned outputs = run_compute(&a);
    unsigned pixels = run_draw(&a);
    destroy_app(&a);
    if (validation_messages)
        fail("%u validation message(s), see above", validation_messages);
    printf("compute_and_draw: OK %u collatz outputs and %u pixels checked (1 dispatch, 1 render pass, 1 draw) on %s\n",
           outputs, pixels, props.deviceName);
    return 0;
}
