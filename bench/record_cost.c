/*
 * record_cost: CPU cost per call of vkCmdDispatch, vkCmdDraw and vkQueueSubmit (C11, links -lvulkan).
 *
 * Build and run:
 *     make -C examples            # builds build/bench/record_cost (shaders from bench/shaders/)
 *     VK_DRIVER_FILES=$(.venv/bin/python -m tessera.icd.backend) build/bench/record_cost MODE [N] [REPS]
 *
 * MODE is one of:
 *   dispatch  with an empty compute pipeline (local size 64) bound, the wall time of recording
 *             N vkCmdDispatch(1,1,1) into one primary command buffer.
 *   draw      inside one vkCmdBeginRendering (dynamic rendering, Vulkan 1.3) on a 64x64
 *             R8G8B8A8_UNORM color image, with a graphics pipeline bound (a vertex shader making a
 *             triangle from gl_VertexIndex, a constant-color fragment shader), the wall time of
 *             recording N vkCmdDraw(3,1,0,0).
 *   pass      the same image and pipeline: N dynamic-rendering instances of one draw each
 *             (vkCmdBeginRendering, vkCmdDraw, vkCmdEndRendering), the wall time per instance.
 *   groups    N vkEnumeratePhysicalDeviceGroups calls (count, then the groups), the wall time.
 *   buffer    one command buffer recorded N times over (vkBeginCommandBuffer, vkCmdBindPipeline with
 *             the empty compute pipeline, vkCmdDispatch, vkEndCommandBuffer), the wall time per recording.
 *   frame     N frames of a frame loop that re-records its work: vkBeginCommandBuffer, vkCmdBindPipeline
 *             (the empty compute pipeline), D vkCmdDispatch(1,1,1) (4th argument, default FRAME_DISPATCHES:
 *             two values of D tell what one more workload costs; 5th argument "fill": D vkCmdFillBuffer of
 *             16 bytes instead, which lavapipe runs at a memset's cost; "pushed": each dispatch after a
 *             vkCmdPushDescriptorSetKHR of one storage buffer, VK_KHR_push_descriptor; "indirect": D
 *             vkCmdDispatchIndirect of (1,1,1) instead), vkEndCommandBuffer,
 *             vkQueueSubmit with a fence, vkWaitForFences, vkResetFences (6th argument "chained": each submit
 *             also signals a binary semaphore the next one waits for, as frames chained by semaphores are;
 *             "labelled": each submit inside two nested queue labels of the application's, "frame" and
 *             "submit" (vkQueueBeginDebugUtilsLabelEXT), as engines mark their submits;
 *             "timeline": each submit waits for the value the previous one signalled on a timeline semaphore
 *             and signals the next, and the host waits for it with vkWaitSemaphores instead of a fence, as
 *             engines pacing their frames with timeline semaphores do);
 *             the wall time per frame, and
 *             "cpu_ns_per_call" the process CPU time (every thread: the application's, the backend's, a
 *             layer's and a driver's workers) per frame.
 *   passframe N render-pass-heavy frames: a "frame" debug label around 8 labelled dynamic-rendering passes
 *             of 4 vkCmdDraw each (the draw mode's image and pipeline) and 2 vkCmdDispatch, submitted with a
 *             fence and waited for; wall and process CPU per frame, as frame (4th argument "labelled": as
 *             frame's, each submit inside two queue labels of the application's; "subpasses": each pass a render
 *             pass object of two subpasses, two draws in each, instead of dynamic rendering).
 *   buffers   N frames of BUFFERS command buffers each (4th argument, default 16), as engines record a frame
 *             in several: their pool reset (vkResetCommandPool), then each buffer re-recorded
 *             (vkBeginCommandBuffer, vkCmdBindPipeline with the empty compute pipeline, 2 vkCmdDispatch(1,1,1),
 *             vkEndCommandBuffer), all submitted in one vkQueueSubmit with a fence and waited for; wall and
 *             process CPU per frame, as frame (5th argument "batches": each buffer a VkSubmitInfo of its own,
 *             all in the one vkQueueSubmit, every other one a 16-byte vkCmdFillBuffer instead, the last batch
 *             signalling a binary semaphore the next frame's first waits for; "linked": so, but each batch after
 *             the first waiting for a binary semaphore the one before signals; "timeline-linked": for a value of
 *             a timeline semaphore the one before signals; "secondaries": the BUFFERS buffers are secondary ones,
 *             re-recorded every frame and executed by one primary, recorded again too, which is submitted;
 *             "prerecorded": so, but the secondaries are recorded once, before the frames, in a pool of their own).
 *   threads   THREADS threads (4th argument, default 2) at once, each re-recording its own command
 *             buffer N times (vkResetCommandPool of its own pool, vkBeginCommandBuffer, vkCmdBindPipeline,
 *             8 vkCmdDispatch, vkEndCommandBuffer); wall and process CPU per recorded command buffer
 *             (divided by N x THREADS): one thread's number against two threads' says how recording scales
 *             (5th argument "secondary": each thread's buffer is a secondary one, begun with inheritance info).
 *   copy      N vkCmdCopyBuffer of one 16-byte region between two 4096-byte buffers (the region's
 *             offsets cycle through the buffer), recorded into one primary command buffer.
 *   copy2     the same copies through vkCmdCopyBuffer2 (a VkCopyBufferInfo2 with one VkBufferCopy2).
 *   submit    N vkQueueSubmit calls, each of one pre-recorded command buffer holding one 16-byte
 *             vkCmdFillBuffer. A ring of 64 command buffers (each filling its own 16 bytes of one
 *             buffer, each with its own fence) is submitted in order; after every 64 submits the
 *             program waits for and resets the 64 fences. Only the vkQueueSubmit calls are timed:
 *             the fence waits and resets are outside the timed part. The backend executes earlier
 *             submits (on its own thread) while later ones are being submitted.
 * Recording (dispatch, draw, pass, copy, copy2) is timed alone: those numbers are the per-call cost of the loader trampoline,
 * any layers and the driver's recording path. After the last recording the buffer is submitted once and
 * the queue waited for idle: "submit_ns" is that one vkQueueSubmit of N commands and "wait_ns" the
 * vkQueueWaitIdle after it (the backend running the N commands, and anything a driver or layer finishes
 * before the wait returns, such as the GPU events of the trace); one sample each.
 * Timing is CLOCK_MONOTONIC; each of REPS repetitions times N calls and the best is reported.
 * Defaults: N = 200000 (dispatch, draw, pass, copy, copy2), 20000 (submit, groups, buffer, threads), 300 (frame,
 * passframe, buffers), REPS = 5.
 * Output: one line of JSON, {"mode":M,"threads":T,"calls":N,"ns_per_call":X,"end_ns_per_call":E,"repetitions":REPS}:
 * X is the recording loop alone; E is the vkEndCommandBuffer that follows it (and vkCmdEndRendering for
 * draws) divided by N, i.e. what a layer or driver that defers work to the end of the recording costs
 * per recorded command on the application's thread (0 for submit).
 * Exit 0 on success, 1 with a message on stderr otherwise.
 */
#define _POSIX_C_SOURCE 200809L
#include <vulkan/vulkan.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

/* Generated at build time by glslangValidator -V --vn from bench/shaders/ (examples/Makefile). */
#include "record_empty.comp.h"
#include "record_red.frag.h"
#include "record_tri.vert.h"

#define VK_CHECK(call)                                                                              \
    do {                                                                                            \
        VkResult r_ = (call);                                                                       \
        if (r_ != VK_SUCCESS) {                                                                     \
            fprintf(stderr, "record_cost: %s returned %d (line %d)\n", #call, (int)r_, __LINE__);  \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

enum mode { MODE_DISPATCH, MODE_DRAW, MODE_SUBMIT, MODE_GROUPS, MODE_COPY, MODE_COPY2, MODE_PASS, MODE_BUFFER,
            MODE_FRAME, MODE_THREADS, MODE_PASSFRAME, MODE_BUFFERS };
/* How the frame mode submits (its 6th argument; frames_of): with a fence each; also signalling a binary
   semaphore the next one waits for; paced by a timeline semaphore instead of the fence; or with a fence, inside
   two nested queue labels of the application's. */
enum workload_kind { KIND_DISPATCH, KIND_FILL, KIND_PUSHED, KIND_INDIRECT };   /* frame mode's 5th argument */
enum frame_submit { SUBMIT_FENCED, SUBMIT_CHAINED, SUBMIT_TIMELINE, SUBMIT_LABELLED, SUBMIT_BATCHES, SUBMIT_LINKED,
                    SUBMIT_TIMELINE_LINKED, SUBMIT_SECONDARIES, SUBMIT_PRERECORDED };
static const char *const MODE_NAMES[] = {"dispatch", "draw", "submit", "groups", "copy", "copy2", "pass",
                                          "buffer", "frame", "threads", "passframe", "buffers"};
#define MODE_COUNT ((int)(sizeof MODE_NAMES / sizeof MODE_NAMES[0]))

#define RING 64            /* submit mode: command buffers (and fences) in flight at most */
#define FRAME_DISPATCHES 8 /* frame and threads modes: dispatches recorded per frame / command buffer */
#define MAX_FRAME_DISPATCHES 4096   /* frame mode's 4th argument */
#define MAX_THREADS 16     /* threads mode */
#define FRAME_PASSES 8     /* passframe mode: labelled dynamic-rendering passes per frame */
#define PASS_DRAWS 4       /* passframe mode: draws per pass */
#define FRAME_BUFFERS 16   /* buffers mode: command buffers recorded and submitted per frame, by default */
#define MAX_FRAME_BUFFERS 256
#define FILL_BYTES 16      /* submit mode: bytes each command buffer fills */
#define COPY_BYTES 4096   /* copy modes: size of the source and destination buffers */
#define EXTENT 64          /* draw mode: color image width and height */
#define COLOR_FORMAT VK_FORMAT_R8G8B8A8_UNORM

struct ctx {
    VkInstance instance;
    VkPhysicalDevice physical;
    VkDevice device;
    VkQueue queue;
    uint32_t family;
    VkCommandPool pool;
    PFN_vkQueueBeginDebugUtilsLabelEXT queue_label_begin;   /* frame mode, labelled */
    PFN_vkQueueEndDebugUtilsLabelEXT queue_label_end;
};

static double clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double now_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

static long parse_arg(int argc, char **argv, int i, long fallback)
{
    if (argc <= i)
        return fallback;
    char *end;
    long v = strtol(argv[i], &end, 10);
    if (*end || v <= 0) {
        fprintf(stderr, "record_cost: argument %d must be a positive integer, got '%s'\n", i, argv[i]);
        exit(1);
    }
    return v;
}

static void fail(const char *message)
{
    fprintf(stderr, "record_cost: %s\n", message);
    exit(1);
}

static void init(struct ctx *c, enum mode mode, enum frame_submit how, enum workload_kind kind)
{
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "record_cost",
                             .apiVersion = VK_API_VERSION_1_3};
    const char *debug_utils = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;   /* passframe mode, labelled frames: labels */
    VkInstanceCreateInfo inst_info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app,
                                      .enabledExtensionCount = mode == MODE_PASSFRAME || how == SUBMIT_LABELLED,
                                      .ppEnabledExtensionNames = &debug_utils};
    VK_CHECK(vkCreateInstance(&inst_info, NULL, &c->instance));
    uint32_t count = 1;
    VkResult r = vkEnumeratePhysicalDevices(c->instance, &count, &c->physical);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || count == 0)
        fail("no Vulkan physical device");
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(c->physical, &props);
    if ((mode == MODE_DRAW || mode == MODE_PASS || mode == MODE_PASSFRAME) && props.apiVersion < VK_API_VERSION_1_3)
        fail("draw mode needs a Vulkan 1.3 device (dynamic rendering)");
    if (mode == MODE_COPY2 && props.apiVersion < VK_API_VERSION_1_3)
        fail("copy2 mode needs a Vulkan 1.3 device (vkCmdCopyBuffer2)");

    uint32_t nfam = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(c->physical, &nfam, NULL);
    VkQueueFamilyProperties *fams = calloc(nfam, sizeof *fams);
    vkGetPhysicalDeviceQueueFamilyProperties(c->physical, &nfam, fams);
    const VkQueueFlags want = VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT;
    c->family = UINT32_MAX;
    for (uint32_t i = 0; i < nfam && c->family == UINT32_MAX; i++)
        if ((fams[i].queueFlags & want) == want)
            c->family = i;
    free(fams);
    if (c->family == UINT32_MAX)
        fail("no graphics+compute queue family");

    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                          .queueFamilyIndex = c->family, .queueCount = 1,
                                          .pQueuePriorities = &priority};
    VkPhysicalDeviceVulkan13Features features13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
                                                   .dynamicRendering = VK_TRUE};
    VkPhysicalDeviceVulkan12Features features12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                                   .timelineSemaphore = VK_TRUE};
    const int timelines = how == SUBMIT_TIMELINE || how == SUBMIT_TIMELINE_LINKED;
    const char *push_descriptor = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;   /* frame mode, pushed */
    VkDeviceCreateInfo dev_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                                   .pNext = mode == MODE_DRAW || mode == MODE_PASS || mode == MODE_PASSFRAME ? &features13
                                            : timelines ? (void *)&features12 : NULL,
                                   .queueCreateInfoCount = 1, .pQueueCreateInfos = &queue_info,
                                   .enabledExtensionCount = kind == KIND_PUSHED,
                                   .ppEnabledExtensionNames = &push_descriptor};
    VK_CHECK(vkCreateDevice(c->physical, &dev_info, NULL, &c->device));
    vkGetDeviceQueue(c->device, c->family, 0, &c->queue);
    if (how == SUBMIT_LABELLED) {
        c->queue_label_begin = (PFN_vkQueueBeginDebugUtilsLabelEXT)vkGetDeviceProcAddr(c->device,
                                                                                     "vkQueueBeginDebugUtilsLabelEXT");
        c->queue_label_end = (PFN_vkQueueEndDebugUtilsLabelEXT)vkGetDeviceProcAddr(c->device,
                                                                                 "vkQueueEndDebugUtilsLabelEXT");
        if (!c->queue_label_begin || !c->queue_label_end)
            fail("no vkQueueBeginDebugUtilsLabelEXT (VK_EXT_debug_utils)");
    }
    VkCommandPoolCreateInfo pool_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                         .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                         .queueFamilyIndex = c->family};
    VK_CHECK(vkCreateCommandPool(c->device, &pool_info, NULL, &c->pool));
}

static void finish(struct ctx *c)
{
    vkDestroyCommandPool(c->device, c->pool, NULL);
    vkDestroyDevice(c->device, NULL);
    vkDestroyInstance(c->instance, NULL);
}

static VkShaderModule shader(struct ctx *c, const uint32_t *code, size_t size)
{
    VkShaderModuleCreateInfo info = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = size,
                                     .pCode = code};
    VkShaderModule module;
    VK_CHECK(vkCreateShaderModule(c->device, &info, NULL, &module));
    return module;
}

/* Memory for `reqs`, of the first type with the properties `flags`. */
static VkDeviceMemory allocate(struct ctx *c, VkMemoryRequirements reqs, VkMemoryPropertyFlags flags)
{
    VkPhysicalDeviceMemoryProperties mem;
    vkGetPhysicalDeviceMemoryProperties(c->physical, &mem);
    uint32_t type = UINT32_MAX;
    for (uint32_t i = 0; i < mem.memoryTypeCount && type == UINT32_MAX; i++)
        if (reqs.memoryTypeBits & (1u << i) && (mem.memoryTypes[i].propertyFlags & flags) == flags)
            type = i;
    if (type == UINT32_MAX)
        fail("no memory type fits");
    VkMemoryAllocateInfo info = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = reqs.size,
                                 .memoryTypeIndex = type};
    VkDeviceMemory memory;
    VK_CHECK(vkAllocateMemory(c->device, &info, NULL, &memory));
    return memory;
}

static VkCommandBuffer command_buffer(struct ctx *c)
{
    VkCommandBufferAllocateInfo alloc = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                         .commandPool = c->pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                         .commandBufferCount = 1};
    VkCommandBuffer cmd;
    VK_CHECK(vkAllocateCommandBuffers(c->device, &alloc, &cmd));
    return cmd;
}

static void begin(VkCommandBuffer cmd, VkCommandBufferUsageFlags flags)
{
    VkCommandBufferBeginInfo info = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, .flags = flags};
    VK_CHECK(vkBeginCommandBuffer(cmd, &info));
}

/* The times of submitting a recorded buffer once and waiting for the queue to be idle. */
struct submit_times {
    double submit, wait;
};

static void submit_once(struct ctx *c, VkCommandBuffer cmd, struct submit_times *best)
{
    VkSubmitInfo info = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
    double t0 = now_ns();
    VK_CHECK(vkQueueSubmit(c->queue, 1, &info, VK_NULL_HANDLE));
    double t1 = now_ns();
    VK_CHECK(vkQueueWaitIdle(c->queue));
    double t2 = now_ns();
    if (best->submit < 0.0 || t1 - t0 < best->submit)
        best->submit = t1 - t0;
    if (best->wait < 0.0 || t2 - t1 < best->wait)
        best->wait = t2 - t1;
}

/* The best (lowest) of the repetitions so far; negative: none yet. */
static void keep_best(double *best, double value)
{
    if (*best < 0.0 || value < *best)
        *best = value;
}

/* Best of `reps` times of `calls` vkEnumeratePhysicalDeviceGroups (count, then fill). */
static double bench_groups(struct ctx *c, long calls, long reps)
{
    VkPhysicalDeviceGroupProperties groups[8];
    double best = -1.0;
    for (long rep = 0; rep < reps; rep++) {
        double t0 = now_ns();
        for (long i = 0; i < calls; i++) {
            uint32_t count = 0;
            VK_CHECK(vkEnumeratePhysicalDeviceGroups(c->instance, &count, NULL));
            if (count > 8)
                count = 8;
            for (uint32_t g = 0; g < count; g++)
                groups[g] = (VkPhysicalDeviceGroupProperties){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GROUP_PROPERTIES};
            VkResult r = vkEnumeratePhysicalDeviceGroups(c->instance, &count, groups);
            if (r != VK_SUCCESS && r != VK_INCOMPLETE)
                fail("vkEnumeratePhysicalDeviceGroups failed");
        }
        double elapsed = now_ns() - t0;
        keep_best(&best, elapsed);
    }
    return best;
}

/* The compute pipeline of the dispatch and buffer modes: an empty shader (local size 64), no descriptors. */
struct compute_pipeline { VkShaderModule module; VkPipelineLayout layout; VkPipeline pipeline; };

static struct compute_pipeline empty_compute_pipeline(struct ctx *c)
{
    struct compute_pipeline cp;
    cp.module = shader(c, record_empty_comp, sizeof record_empty_comp);
    VkPipelineLayoutCreateInfo layout_info = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    VK_CHECK(vkCreatePipelineLayout(c->device, &layout_info, NULL, &cp.layout));
    VkComputePipelineCreateInfo pipe_info = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = cp.module, .pName = "main"},
        .layout = cp.layout, .basePipelineIndex = -1};
    VK_CHECK(vkCreateComputePipelines(c->device, VK_NULL_HANDLE, 1, &pipe_info, NULL, &cp.pipeline));
    return cp;
}

static void destroy_compute_pipeline(struct ctx *c, struct compute_pipeline *cp)
{
    vkDestroyPipeline(c->device, cp->pipeline, NULL);
    vkDestroyPipelineLayout(c->device, cp->layout, NULL);
    vkDestroyShaderModule(c->device, cp->module, NULL);
}

/* Best of `reps` times of recording `calls` vkCmdDispatch. */
static double bench_dispatch(struct ctx *c, long calls, long reps, double *best_end, struct submit_times *st)
{
    struct compute_pipeline cp = empty_compute_pipeline(c);
    VkCommandBuffer cmd = command_buffer(c);

    double best = -1.0;
    for (long rep = 0; rep < reps; rep++) {
        VK_CHECK(vkResetCommandBuffer(cmd, 0));
        begin(cmd, VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT);
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, cp.pipeline);
        double t0 = now_ns();
        for (long i = 0; i < calls; i++)
            vkCmdDispatch(cmd, 1, 1, 1);
        double elapsed = now_ns() - t0;
        VK_CHECK(vkEndCommandBuffer(cmd));
        double ended = now_ns() - t0 - elapsed;
        keep_best(&best, elapsed);
        keep_best(best_end, ended);
    }
    submit_once(c, cmd, st);   /* after the timed recordings: a layer's work on it cannot slow them */

    vkFreeCommandBuffers(c->device, c->pool, 1, &cmd);
    destroy_compute_pipeline(c, &cp);
    return best;
}

/* Best of `reps` times of recording one command buffer `calls` times over: vkBeginCommandBuffer (which
   resets it), vkCmdBindPipeline, vkCmdDispatch, vkEndCommandBuffer. */
static double bench_buffer(struct ctx *c, long calls, long reps)
{
    struct compute_pipeline cp = empty_compute_pipeline(c);
    VkCommandBuffer cmd = command_buffer(c);

    double best = -1.0;
    for (long rep = 0; rep < reps; rep++) {
        double t0 = now_ns();
        for (long i = 0; i < calls; i++) {
            begin(cmd, VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT);
            vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, cp.pipeline);
            vkCmdDispatch(cmd, 1, 1, 1);
            VK_CHECK(vkEndCommandBuffer(cmd));
        }
        double elapsed = now_ns() - t0;
        keep_best(&best, elapsed);
    }

    vkFreeCommandBuffers(c->device, c->pool, 1, &cmd);
    destroy_compute_pipeline(c, &cp);
    return best;
}

/* What a frame records into `cmd` (between its begin and end); `arg`: the mode's objects. */
typedef void (*record_frame_fn)(VkCommandBuffer cmd, const void *arg);

/* Best of `reps` wall times of `calls` frames of a loop that re-records its work: `pool` reset (unless
   VK_NULL_HANDLE), then each of the `count` buffers `cmds` begun, `record`ed and ended, all of them submitted
   in one vkQueueSubmit with a fence, vkWaitForFences, vkResetFences; `best_cpu`: the process CPU time of that
   repetition. `how` SUBMIT_CHAINED: each submit signals a binary semaphore, which the next one waits for;
   SUBMIT_TIMELINE: each submit waits for the value the previous one signalled on a timeline semaphore and signals
   the next value, which the host waits for (vkWaitSemaphores) instead of a fence; SUBMIT_LABELLED: each submit
   inside the application's queue labels "frame" and "submit". */
static double frames_of(struct ctx *c, VkCommandPool pool, VkCommandBuffer *cmds, uint32_t count,
                        record_frame_fn record, const void *arg, long calls, long reps, double *best_cpu,
                        enum frame_submit how)
{
    const int chained = how == SUBMIT_CHAINED;
    VkFenceCreateInfo fence_info = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    VK_CHECK(vkCreateFence(c->device, &fence_info, NULL, &fence));
    VkSemaphore chain = VK_NULL_HANDLE;
    VkSemaphoreCreateInfo chain_info = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
    if (chained)
        VK_CHECK(vkCreateSemaphore(c->device, &chain_info, NULL, &chain));
    VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
    VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = count,
                           .pCommandBuffers = cmds, .pWaitSemaphores = &chain, .pWaitDstStageMask = &stage,
                           .signalSemaphoreCount = chained ? 1 : 0, .pSignalSemaphores = &chain};
    uint64_t waited = 0, signalled = 0;   /* SUBMIT_TIMELINE: the values of the submit's wait and signal */
    VkDebugUtilsLabelEXT frame_label = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT, .pLabelName = "frame"},
                         submit_label = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT, .pLabelName = "submit"};
    VkTimelineSemaphoreSubmitInfo values = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                            .waitSemaphoreValueCount = 1, .pWaitSemaphoreValues = &waited,
                                            .signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &signalled};
    VkSemaphoreWaitInfo host_wait = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, .semaphoreCount = 1,
                                     .pSemaphores = &chain, .pValues = &signalled};
    if (how == SUBMIT_TIMELINE || how == SUBMIT_TIMELINE_LINKED) {   /* `chain` a timeline semaphore */
        VkSemaphoreTypeCreateInfo type = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                          .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
        chain_info.pNext = &type;
        VK_CHECK(vkCreateSemaphore(c->device, &chain_info, NULL, &chain));
        chain_info.pNext = NULL;
    }
    if (how == SUBMIT_TIMELINE) {
        submit.pNext = &values;
        submit.signalSemaphoreCount = 1;
    }

    /* SUBMIT_BATCHES: each buffer a batch of its own; the last signals a binary semaphore the first waits for in
       the next frame. SUBMIT_LINKED: each batch but the first waits for a binary semaphore the one before signals;
       SUBMIT_TIMELINE_LINKED: for the value of a timeline semaphore the one before signals. */
    const int batched = how == SUBMIT_BATCHES || how == SUBMIT_LINKED || how == SUBMIT_TIMELINE_LINKED;
    VkSubmitInfo batches[MAX_FRAME_BUFFERS];
    VkSemaphore links[MAX_FRAME_BUFFERS];
    VkTimelineSemaphoreSubmitInfo link_values[MAX_FRAME_BUFFERS];
    uint64_t wait_value[MAX_FRAME_BUFFERS], signal_value[MAX_FRAME_BUFFERS];
    if (how == SUBMIT_BATCHES)
        VK_CHECK(vkCreateSemaphore(c->device, &chain_info, NULL, &chain));
    if (how == SUBMIT_TIMELINE_LINKED) {
        for (uint32_t b = 0; b < count; b++) {
            links[b] = chain;
            link_values[b] = (VkTimelineSemaphoreSubmitInfo){
                .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO, .waitSemaphoreValueCount = b > 0,
                .pWaitSemaphoreValues = &wait_value[b], .signalSemaphoreValueCount = b + 1 < count,
                .pSignalSemaphoreValues = &signal_value[b]};
        }
    }
    for (uint32_t b = 0; how == SUBMIT_LINKED && b + 1 < count; b++)
        VK_CHECK(vkCreateSemaphore(c->device, &chain_info, NULL, &links[b]));
    const int linked = how != SUBMIT_BATCHES;   /* each batch waits for the one before (else: the chain) */
    for (uint32_t b = 0; batched && b < count; b++)
        batches[b] = (VkSubmitInfo){.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                                    .pNext = how == SUBMIT_TIMELINE_LINKED ? &link_values[b] : NULL,
                                    .commandBufferCount = 1, .pCommandBuffers = &cmds[b],
                                    .waitSemaphoreCount = linked && b > 0,
                                    .pWaitSemaphores = !linked ? &chain : b > 0 ? &links[b - 1] : NULL,
                                    .pWaitDstStageMask = &stage,
                                    .signalSemaphoreCount = linked ? b + 1 < count : b == count - 1,
                                    .pSignalSemaphores = linked ? &links[b] : &chain};

    double best = -1.0;
    for (long rep = 0; rep < reps; rep++) {
        double t0 = now_ns(), cpu0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
        for (long i = 0; i < calls; i++) {
            if (pool != VK_NULL_HANDLE)
                VK_CHECK(vkResetCommandPool(c->device, pool, 0));
            for (uint32_t b = 0; b < count; b++) {
                begin(cmds[b], VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT);
                record(cmds[b], arg);
                VK_CHECK(vkEndCommandBuffer(cmds[b]));
            }
            if (how == SUBMIT_TIMELINE) {
                waited = signalled++;
                submit.waitSemaphoreCount = waited ? 1 : 0;
                VK_CHECK(vkQueueSubmit(c->queue, 1, &submit, VK_NULL_HANDLE));
                VK_CHECK(vkWaitSemaphores(c->device, &host_wait, UINT64_MAX));
                continue;
            }
            if (how == SUBMIT_LABELLED) {
                c->queue_label_begin(c->queue, &frame_label);
                c->queue_label_begin(c->queue, &submit_label);
            }
            if (batched) {
                for (uint32_t b = 0; how == SUBMIT_TIMELINE_LINKED && b < count; b++) {   /* values grow */
                    wait_value[b] = (uint64_t)(rep * calls + i) * count + b;
                    signal_value[b] = wait_value[b] + 1;
                }
                VK_CHECK(vkQueueSubmit(c->queue, count, batches, fence));
                /* SUBMIT_BATCHES: signalled by this submit's last batch from now on */
                batches[0].waitSemaphoreCount = how == SUBMIT_BATCHES;
            }
            else
                VK_CHECK(vkQueueSubmit(c->queue, 1, &submit, fence));
            if (how == SUBMIT_LABELLED) {
                c->queue_label_end(c->queue);
                c->queue_label_end(c->queue);
            }
            submit.waitSemaphoreCount = chained ? 1 : 0;   /* signalled by this submit from now on */
            VK_CHECK(vkWaitForFences(c->device, 1, &fence, VK_TRUE, UINT64_MAX));
            VK_CHECK(vkResetFences(c->device, 1, &fence));
        }
        double elapsed = now_ns() - t0, cpu = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
        if (best < 0.0 || elapsed < best)
            *best_cpu = cpu;
        keep_best(&best, elapsed);
    }

    vkDestroyFence(c->device, fence, NULL);
    if (chain != VK_NULL_HANDLE) {   /* its last signal completed before the last wait returned */
        VK_CHECK(vkQueueWaitIdle(c->queue));
        vkDestroySemaphore(c->device, chain, NULL);
    }
    for (uint32_t b = 0; how == SUBMIT_LINKED && b + 1 < count; b++)   /* each waited for */
        vkDestroySemaphore(c->device, links[b], NULL);
    return best;
}

/* frames_of one command buffer of the shared pool, which is not reset. */
static double frame_loop(struct ctx *c, record_frame_fn record, const void *arg, long calls, long reps,
                         double *best_cpu, enum frame_submit how)
{
    VkCommandBuffer cmd = command_buffer(c);
    double best = frames_of(c, VK_NULL_HANDLE, &cmd, 1, record, arg, calls, reps, best_cpu, how);
    vkFreeCommandBuffers(c->device, c->pool, 1, &cmd);
    return best;
}

/* frame mode: the empty compute pipeline bound, `count` vkCmdDispatch(1,1,1); or (KIND_FILL) `count`
   vkCmdFillBuffer of FILL_BYTES each into a buffer of COPY_BYTES, workloads lavapipe runs at a memset's cost; or
   (KIND_PUSHED) each dispatch after a vkCmdPushDescriptorSetKHR of that buffer as a storage buffer; or
   (KIND_INDIRECT) each a vkCmdDispatchIndirect of the (1,1,1) at the start of that buffer. */
struct workload_frame {
    struct compute_pipeline cp;
    long count;
    enum workload_kind kind;
    VkBuffer buffer;
    VkDescriptorSetLayout push_set;
    VkPipelineLayout push_layout;   /* its one set pushed */
    PFN_vkCmdPushDescriptorSetKHR push;
};

static void record_workload_frame(VkCommandBuffer cmd, const void *arg)
{
    const struct workload_frame *f = arg;
    if (f->kind == KIND_FILL) {
        for (long d = 0; d < f->count; d++)
            vkCmdFillBuffer(cmd, f->buffer, (VkDeviceSize)(d % (COPY_BYTES / FILL_BYTES)) * FILL_BYTES, FILL_BYTES,
                            (uint32_t)d);
        return;
    }
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, f->cp.pipeline);
    VkDescriptorBufferInfo info = {f->buffer, 0, VK_WHOLE_SIZE};
    VkWriteDescriptorSet write = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstBinding = 0,
                                  .descriptorCount = 1, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                  .pBufferInfo = &info};
    for (long d = 0; d < f->count; d++) {
        if (f->kind == KIND_PUSHED)
            f->push(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, f->push_layout, 0, 1, &write);
        if (f->kind == KIND_INDIRECT)
            vkCmdDispatchIndirect(cmd, f->buffer, 0);
        else
            vkCmdDispatch(cmd, 1, 1, 1);
    }
}

static double bench_frame(struct ctx *c, long calls, long reps, long count, enum workload_kind kind,
                          enum frame_submit how, double *best_cpu)
{
    struct workload_frame f = {empty_compute_pipeline(c), count, kind, VK_NULL_HANDLE, VK_NULL_HANDLE,
                               VK_NULL_HANDLE, NULL};
    VkDeviceMemory memory = VK_NULL_HANDLE;
    if (kind != KIND_DISPATCH) {
        VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = COPY_BYTES,
                                   .usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
                                            | VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT,
                                   .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
        VK_CHECK(vkCreateBuffer(c->device, &info, NULL, &f.buffer));
        VkMemoryRequirements reqs;
        vkGetBufferMemoryRequirements(c->device, f.buffer, &reqs);
        memory = allocate(c, reqs, kind == KIND_INDIRECT ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
                                                           | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT : 0);
        VK_CHECK(vkBindBufferMemory(c->device, f.buffer, memory, 0));
    }
    if (kind == KIND_INDIRECT) {   /* the arguments (1,1,1), written once */
        uint32_t *args;
        VK_CHECK(vkMapMemory(c->device, memory, 0, VK_WHOLE_SIZE, 0, (void **)&args));
        args[0] = args[1] = args[2] = 1;
        vkUnmapMemory(c->device, memory);
    }
    if (kind == KIND_PUSHED) {
        f.push = (PFN_vkCmdPushDescriptorSetKHR)vkGetDeviceProcAddr(c->device, "vkCmdPushDescriptorSetKHR");
        if (!f.push)
            fail("no vkCmdPushDescriptorSetKHR (VK_KHR_push_descriptor)");
        VkDescriptorSetLayoutBinding binding = {0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT,
                                                NULL};
        VkDescriptorSetLayoutCreateInfo set_info = {
            .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
            .flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR, .bindingCount = 1, .pBindings = &binding};
        VK_CHECK(vkCreateDescriptorSetLayout(c->device, &set_info, NULL, &f.push_set));
        VkPipelineLayoutCreateInfo layout_info = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                                  .setLayoutCount = 1, .pSetLayouts = &f.push_set};
        VK_CHECK(vkCreatePipelineLayout(c->device, &layout_info, NULL, &f.push_layout));
    }
    double best = frame_loop(c, record_workload_frame, &f, calls, reps, best_cpu, how);
    if (kind == KIND_PUSHED) {
        vkDestroyPipelineLayout(c->device, f.push_layout, NULL);
        vkDestroyDescriptorSetLayout(c->device, f.push_set, NULL);
    }
    if (kind != KIND_DISPATCH) {
        vkDestroyBuffer(c->device, f.buffer, NULL);
        vkFreeMemory(c->device, memory, NULL);
    }
    destroy_compute_pipeline(c, &f.cp);
    return best;
}

/* What the draw, pass and passframe modes draw with: a 64x64 RGBA8 color image and its view, a graphics
   pipeline (a triangle from gl_VertexIndex, a constant-color fragment shader) for dynamic rendering. */
struct draw_target {
    VkImage image;
    VkDeviceMemory memory;
    VkImageView view;
    VkShaderModule vert, frag;
    VkPipelineLayout layout;
    VkPipeline pipeline;
    VkImageMemoryBarrier to_attachment;   /* UNDEFINED -> COLOR_ATTACHMENT_OPTIMAL, recorded before drawing */
    VkRenderingAttachmentInfo color;
    VkRenderingInfo rendering;            /* points at `color`: the struct must not be copied */
};

/* The draw target's pipeline (its shaders and layout) for subpass `subpass` of `render_pass`, or for dynamic
   rendering (`render_pass` VK_NULL_HANDLE). */
static VkPipeline draw_pipeline(struct ctx *c, const struct draw_target *t, VkRenderPass render_pass,
                                uint32_t subpass)
{
    VkPipelineShaderStageCreateInfo stages[2] = {
        {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_VERTEX_BIT,
         .module = t->vert, .pName = "main"},
        {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_FRAGMENT_BIT,
         .module = t->frag, .pName = "main"}};
    VkPipelineVertexInputStateCreateInfo vertex_input = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO};
    VkPipelineInputAssemblyStateCreateInfo assembly = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO,
        .topology = VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST};
    VkViewport viewport = {0.0f, 0.0f, (float)EXTENT, (float)EXTENT, 0.0f, 1.0f};
    VkRect2D scissor = {{0, 0}, {EXTENT, EXTENT}};
    VkPipelineViewportStateCreateInfo viewport_state = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO, .viewportCount = 1, .pViewports = &viewport,
        .scissorCount = 1, .pScissors = &scissor};
    VkPipelineRasterizationStateCreateInfo raster = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO, .polygonMode = VK_POLYGON_MODE_FILL,
        .cullMode = VK_CULL_MODE_NONE, .frontFace = VK_FRONT_FACE_COUNTER_CLOCKWISE, .lineWidth = 1.0f};
    VkPipelineMultisampleStateCreateInfo multisample = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO,
        .rasterizationSamples = VK_SAMPLE_COUNT_1_BIT};
    VkPipelineColorBlendAttachmentState blend_attachment = {
        .colorWriteMask = VK_COLOR_COMPONENT_R_BIT | VK_COLOR_COMPONENT_G_BIT | VK_COLOR_COMPONENT_B_BIT
                          | VK_COLOR_COMPONENT_A_BIT};
    VkPipelineColorBlendStateCreateInfo blend = {.sType = VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO,
                                                 .attachmentCount = 1, .pAttachments = &blend_attachment};
    const VkFormat color_format = COLOR_FORMAT;
    VkPipelineRenderingCreateInfo rendering_info = {.sType = VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO,
                                                    .colorAttachmentCount = 1,
                                                    .pColorAttachmentFormats = &color_format};
    VkGraphicsPipelineCreateInfo pipe_info = {
        .sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO,
        .pNext = render_pass == VK_NULL_HANDLE ? &rendering_info : NULL, .stageCount = 2,
        .pStages = stages, .pVertexInputState = &vertex_input, .pInputAssemblyState = &assembly,
        .pViewportState = &viewport_state, .pRasterizationState = &raster, .pMultisampleState = &multisample,
        .pColorBlendState = &blend, .layout = t->layout, .renderPass = render_pass, .subpass = subpass,
        .basePipelineIndex = -1};
    VkPipeline pipeline;
    VK_CHECK(vkCreateGraphicsPipelines(c->device, VK_NULL_HANDLE, 1, &pipe_info, NULL, &pipeline));
    return pipeline;
}

static void draw_target_create(struct ctx *c, struct draw_target *t)
{
    VkImageCreateInfo image_info = {
        .sType = VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO, .imageType = VK_IMAGE_TYPE_2D, .format = COLOR_FORMAT,
        .extent = {EXTENT, EXTENT, 1}, .mipLevels = 1, .arrayLayers = 1, .samples = VK_SAMPLE_COUNT_1_BIT,
        .tiling = VK_IMAGE_TILING_OPTIMAL, .usage = VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE, .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED};
    VK_CHECK(vkCreateImage(c->device, &image_info, NULL, &t->image));
    VkMemoryRequirements reqs;
    vkGetImageMemoryRequirements(c->device, t->image, &reqs);
    t->memory = allocate(c, reqs, 0);
    VK_CHECK(vkBindImageMemory(c->device, t->image, t->memory, 0));
    const VkImageSubresourceRange range = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
    VkImageViewCreateInfo view_info = {.sType = VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO, .image = t->image,
                                       .viewType = VK_IMAGE_VIEW_TYPE_2D, .format = COLOR_FORMAT,
                                       .subresourceRange = range};
    VK_CHECK(vkCreateImageView(c->device, &view_info, NULL, &t->view));

    t->vert = shader(c, record_tri_vert, sizeof record_tri_vert);
    t->frag = shader(c, record_red_frag, sizeof record_red_frag);
    VkPipelineLayoutCreateInfo layout_info = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    VK_CHECK(vkCreatePipelineLayout(c->device, &layout_info, NULL, &t->layout));
    t->pipeline = draw_pipeline(c, t, VK_NULL_HANDLE, 0);
    /* The image enters COLOR_ATTACHMENT_OPTIMAL in the same command buffer, so it would be valid if submitted. */
    t->to_attachment = (VkImageMemoryBarrier){
        .sType = VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER, .dstAccessMask = VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
        .oldLayout = VK_IMAGE_LAYOUT_UNDEFINED, .newLayout = VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
        .srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED, .dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
        .image = t->image, .subresourceRange = range};
    t->color = (VkRenderingAttachmentInfo){.sType = VK_STRUCTURE_TYPE_RENDERING_ATTACHMENT_INFO, .imageView = t->view,
                                       .imageLayout = VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
                                       .loadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE,
                                       .storeOp = VK_ATTACHMENT_STORE_OP_STORE};
    const VkRect2D area = {{0, 0}, {EXTENT, EXTENT}};
    t->rendering = (VkRenderingInfo){.sType = VK_STRUCTURE_TYPE_RENDERING_INFO, .renderArea = area,
                                     .layerCount = 1, .colorAttachmentCount = 1, .pColorAttachments = &t->color};
}

static void draw_target_destroy(struct ctx *c, struct draw_target *t)
{
    vkDestroyPipeline(c->device, t->pipeline, NULL);
    vkDestroyPipelineLayout(c->device, t->layout, NULL);
    vkDestroyShaderModule(c->device, t->frag, NULL);
    vkDestroyShaderModule(c->device, t->vert, NULL);
    vkDestroyImageView(c->device, t->view, NULL);
    vkDestroyImage(c->device, t->image, NULL);
    vkFreeMemory(c->device, t->memory, NULL);
}

/* Best of `reps` times of recording, with `passes` 0: `calls` vkCmdDraw inside one dynamic-rendering
   instance; 1: `calls` instances of one draw each. */
static double bench_draw(struct ctx *c, int passes, long calls, long reps, double *best_end, struct submit_times *st)
{
    struct draw_target t;
    draw_target_create(c, &t);
    VkCommandBuffer cmd = command_buffer(c);

    double best = -1.0;
    for (long rep = 0; rep < reps; rep++) {
        VK_CHECK(vkResetCommandBuffer(cmd, 0));
        begin(cmd, VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT);
        vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                             0, 0, NULL, 0, NULL, 1, &t.to_attachment);
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, t.pipeline);
        if (!passes)
            vkCmdBeginRendering(cmd, &t.rendering);
        double t0 = now_ns();
        if (passes) {
            for (long i = 0; i < calls; i++) {
                vkCmdBeginRendering(cmd, &t.rendering);
                vkCmdDraw(cmd, 3, 1, 0, 0);
                vkCmdEndRendering(cmd);
            }
        } else {
            for (long i = 0; i < calls; i++)
                vkCmdDraw(cmd, 3, 1, 0, 0);
        }
        double elapsed = now_ns() - t0;
        if (!passes)
            vkCmdEndRendering(cmd);
        VK_CHECK(vkEndCommandBuffer(cmd));
        double ended = now_ns() - t0 - elapsed;
        keep_best(&best, elapsed);
        keep_best(best_end, ended);
    }
    submit_once(c, cmd, st);   /* after the timed recordings: a layer's work on it cannot slow them */

    vkFreeCommandBuffers(c->device, c->pool, 1, &cmd);
    draw_target_destroy(c, &t);
    return best;
}

/* threads mode: one thread's share. Each thread has its own command pool and buffer (pools are
   externally synchronised) and re-records it `calls` times: vkResetCommandPool, vkBeginCommandBuffer,
   vkCmdBindPipeline, FRAME_DISPATCHES vkCmdDispatch, vkEndCommandBuffer. */
struct recorder_thread {
    struct ctx *c;
    VkPipeline pipeline;
    long calls;
    VkCommandPool pool;
    VkCommandBuffer cmd;
    int secondary;
};

static void *rerecord(void *arg)
{
    struct recorder_thread *r = arg;
    VkCommandBufferInheritanceInfo inheritance = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO};
    VkCommandBufferBeginInfo info = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                     .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
                                     .pInheritanceInfo = r->secondary ? &inheritance : NULL};
    for (long i = 0; i < r->calls; i++) {
        VK_CHECK(vkResetCommandPool(r->c->device, r->pool, 0));
        VK_CHECK(vkBeginCommandBuffer(r->cmd, &info));
        vkCmdBindPipeline(r->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, r->pipeline);
        for (int d = 0; d < FRAME_DISPATCHES; d++)
            vkCmdDispatch(r->cmd, 1, 1, 1);
        VK_CHECK(vkEndCommandBuffer(r->cmd));
    }
    return NULL;
}

/* Best of `reps` wall times of `threads` threads each re-recording its own command buffer `calls` times
   at once; `best_cpu`: the process CPU time of that repetition. Per call: divided by calls x threads. */
static double bench_threads(struct ctx *c, long calls, long reps, long threads, int secondary, double *best_cpu)
{
    struct compute_pipeline cp = empty_compute_pipeline(c);
    struct recorder_thread r[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    for (long k = 0; k < threads; k++) {
        VkCommandPoolCreateInfo pool_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                             .queueFamilyIndex = c->family};
        r[k] = (struct recorder_thread){.c = c, .pipeline = cp.pipeline, .calls = calls, .secondary = secondary};
        VK_CHECK(vkCreateCommandPool(c->device, &pool_info, NULL, &r[k].pool));
        VkCommandBufferAllocateInfo alloc = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                             .commandPool = r[k].pool,
                                             .level = secondary ? VK_COMMAND_BUFFER_LEVEL_SECONDARY
                                                                : VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                             .commandBufferCount = 1};
        VK_CHECK(vkAllocateCommandBuffers(c->device, &alloc, &r[k].cmd));
    }
    double best = -1.0;
    for (long rep = 0; rep < reps; rep++) {
        double t0 = now_ns(), cpu0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
        for (long k = 0; k < threads; k++)
            if (pthread_create(&ids[k], NULL, rerecord, &r[k]) != 0)
                fail("cannot start a recording thread");
        for (long k = 0; k < threads; k++)
            pthread_join(ids[k], NULL);
        double elapsed = now_ns() - t0, cpu = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
        if (best < 0.0 || elapsed < best)
            *best_cpu = cpu / (double)threads;
        keep_best(&best, elapsed);
    }
    for (long k = 0; k < threads; k++)
        vkDestroyCommandPool(c->device, r[k].pool, NULL);
    destroy_compute_pipeline(c, &cp);
    return best / (double)threads;
}

/* buffers mode: what each buffer records, the empty compute pipeline bound and 2 vkCmdDispatch(1,1,1); in a batch
   of its own, every other buffer a 16-byte vkCmdFillBuffer instead, so that the batches run on the emulated Mali's
   compute and transfer queues (the semaphores between them order what the queues would not). */
struct buffers_frame {
    struct compute_pipeline cp;
    VkBuffer buffer;      /* VK_NULL_HANDLE: every buffer dispatches */
    uint32_t count;
    uint32_t *recorded;   /* buffers recorded so far */
};

static void record_buffer_of_frame(VkCommandBuffer cmd, const void *arg)
{
    const struct buffers_frame *f = arg;
    if (f->buffer != VK_NULL_HANDLE && (*f->recorded)++ % f->count % 2) {
        vkCmdFillBuffer(cmd, f->buffer, 0, FILL_BYTES, 0);
        return;
    }
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, f->cp.pipeline);
    vkCmdDispatch(cmd, 1, 1, 1);
    vkCmdDispatch(cmd, 1, 1, 1);
}

/* buffers mode, secondaries: each secondary re-recorded (as record_buffer_of_frame), then executed by the primary;
   prerecorded: recorded once, before the frames (`record` 0). */
struct executes {
    VkCommandBuffer *secondaries;
    uint32_t count;
    const struct buffers_frame *f;
    int record;
};

static void record_secondaries(const struct executes *e, VkCommandBufferUsageFlags flags)
{
    VkCommandBufferInheritanceInfo inheritance = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO};
    VkCommandBufferBeginInfo info = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, .flags = flags,
                                     .pInheritanceInfo = &inheritance};
    for (uint32_t b = 0; b < e->count; b++) {
        VK_CHECK(vkBeginCommandBuffer(e->secondaries[b], &info));
        record_buffer_of_frame(e->secondaries[b], e->f);
        VK_CHECK(vkEndCommandBuffer(e->secondaries[b]));
    }
}

static void record_executes(VkCommandBuffer primary, const void *arg)
{
    const struct executes *e = arg;
    if (e->record)
        record_secondaries(e, VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT);
    vkCmdExecuteCommands(primary, e->count, e->secondaries);
}

/* buffers mode: `count` command buffers of their own pool, the pool reset and each buffer re-recorded every frame,
   submitted together with a fence (in one batch, or with `how` SUBMIT_BATCHES or SUBMIT_LINKED each in a batch of
   its own) and waited for. */
static double bench_buffers(struct ctx *c, long calls, long reps, uint32_t count, enum frame_submit how,
                            double *best_cpu)
{
    uint32_t recorded = 0;
    struct buffers_frame f = {empty_compute_pipeline(c), VK_NULL_HANDLE, count, &recorded};
    VkDeviceMemory memory = VK_NULL_HANDLE;
    if (how == SUBMIT_BATCHES || how == SUBMIT_LINKED || how == SUBMIT_TIMELINE_LINKED) {
        VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = COPY_BYTES,
                                   .usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT, .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
        VK_CHECK(vkCreateBuffer(c->device, &info, NULL, &f.buffer));
        VkMemoryRequirements reqs;
        vkGetBufferMemoryRequirements(c->device, f.buffer, &reqs);
        memory = allocate(c, reqs, 0);
        VK_CHECK(vkBindBufferMemory(c->device, f.buffer, memory, 0));
    }
    VkCommandPoolCreateInfo pool_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                         .queueFamilyIndex = c->family};
    VkCommandPool pool, once_pool;   /* once_pool: the prerecorded secondaries' (the frames reset `pool`) */
    VK_CHECK(vkCreateCommandPool(c->device, &pool_info, NULL, &pool));
    VK_CHECK(vkCreateCommandPool(c->device, &pool_info, NULL, &once_pool));
    const int executed = how == SUBMIT_SECONDARIES || how == SUBMIT_PRERECORDED;
    VkCommandBuffer cmds[MAX_FRAME_BUFFERS];
    VkCommandBufferAllocateInfo alloc = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                         .commandPool = how == SUBMIT_PRERECORDED ? once_pool : pool,
                                         .level = executed ? VK_COMMAND_BUFFER_LEVEL_SECONDARY
                                                           : VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                         .commandBufferCount = count};
    VK_CHECK(vkAllocateCommandBuffers(c->device, &alloc, cmds));
    struct executes e = {cmds, count, &f, how == SUBMIT_SECONDARIES};
    if (how == SUBMIT_PRERECORDED)
        record_secondaries(&e, 0);
    VkCommandBuffer primary;
    alloc.commandPool = pool;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    if (executed)
        VK_CHECK(vkAllocateCommandBuffers(c->device, &alloc, &primary));
    double best = executed
        ? frames_of(c, pool, &primary, 1, record_executes, &e, calls, reps, best_cpu, SUBMIT_FENCED)
        : frames_of(c, pool, cmds, count, record_buffer_of_frame, &f, calls, reps, best_cpu, how);
    vkDestroyCommandPool(c->device, pool, NULL);
    vkDestroyCommandPool(c->device, once_pool, NULL);
    if (f.buffer != VK_NULL_HANDLE) {
        vkDestroyBuffer(c->device, f.buffer, NULL);
        vkFreeMemory(c->device, memory, NULL);
    }
    destroy_compute_pipeline(c, &f.cp);
    return best;
}

/* passframe mode: what a frame draws with, and its labels' entry points. */
struct pass_frame {
    struct draw_target t;
    struct compute_pipeline cp;
    PFN_vkCmdBeginDebugUtilsLabelEXT label_begin;
    PFN_vkCmdEndDebugUtilsLabelEXT label_end;
    /* "subpasses": a render pass of two subpasses on the target's image instead of dynamic rendering */
    VkRenderPass render_pass;
    VkFramebuffer framebuffer;
    VkPipeline subpass_pipelines[2];
};

/* passframe subpasses: a render pass of two subpasses drawing into the target's image, the second after the
   first's color writes (as a tile-local deferred pass would read them), its framebuffer and pipelines. */
static void subpass_target_create(struct ctx *c, struct pass_frame *f)
{
    VkAttachmentDescription color = {.format = COLOR_FORMAT, .samples = VK_SAMPLE_COUNT_1_BIT,
                                     .loadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE, .storeOp = VK_ATTACHMENT_STORE_OP_STORE,
                                     .stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE,
                                     .stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE,
                                     .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED,
                                     .finalLayout = VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
    VkAttachmentReference ref = {0, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
    VkSubpassDescription subpasses[2] = {
        {.pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS, .colorAttachmentCount = 1, .pColorAttachments = &ref},
        {.pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS, .colorAttachmentCount = 1, .pColorAttachments = &ref}};
    VkSubpassDependency dependency = {.srcSubpass = 0, .dstSubpass = 1,
                                      .srcStageMask = VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                                      .dstStageMask = VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                                      .srcAccessMask = VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
                                      .dstAccessMask = VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
                                      .dependencyFlags = VK_DEPENDENCY_BY_REGION_BIT};
    VkRenderPassCreateInfo info = {.sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO, .attachmentCount = 1,
                                   .pAttachments = &color, .subpassCount = 2, .pSubpasses = subpasses,
                                   .dependencyCount = 1, .pDependencies = &dependency};
    VK_CHECK(vkCreateRenderPass(c->device, &info, NULL, &f->render_pass));
    VkFramebufferCreateInfo fb = {.sType = VK_STRUCTURE_TYPE_FRAMEBUFFER_CREATE_INFO, .renderPass = f->render_pass,
                                  .attachmentCount = 1, .pAttachments = &f->t.view, .width = EXTENT,
                                  .height = EXTENT, .layers = 1};
    VK_CHECK(vkCreateFramebuffer(c->device, &fb, NULL, &f->framebuffer));
    for (uint32_t k = 0; k < 2; k++)
        f->subpass_pipelines[k] = draw_pipeline(c, &f->t, f->render_pass, k);
}

/* One labelled pass of `f`: PASS_DRAWS draws by dynamic rendering, or half of them in each subpass. */
static void record_one_pass(VkCommandBuffer cmd, const struct pass_frame *f)
{
    if (f->render_pass == VK_NULL_HANDLE) {
        vkCmdBeginRendering(cmd, &f->t.rendering);
        for (int d = 0; d < PASS_DRAWS; d++)
            vkCmdDraw(cmd, 3, 1, 0, 0);
        vkCmdEndRendering(cmd);
        return;
    }
    VkRenderPassBeginInfo begin_info = {.sType = VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO,
                                        .renderPass = f->render_pass, .framebuffer = f->framebuffer,
                                        .renderArea = {{0, 0}, {EXTENT, EXTENT}}};
    vkCmdBeginRenderPass(cmd, &begin_info, VK_SUBPASS_CONTENTS_INLINE);
    for (uint32_t k = 0; k < 2; k++) {
        if (k)
            vkCmdNextSubpass(cmd, VK_SUBPASS_CONTENTS_INLINE);
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, f->subpass_pipelines[k]);
        for (int d = 0; d < PASS_DRAWS / 2; d++)
            vkCmdDraw(cmd, 3, 1, 0, 0);
    }
    vkCmdEndRenderPass(cmd);
}

/* A "frame" label around FRAME_PASSES labelled passes of PASS_DRAWS draws each (record_one_pass) and two
   dispatches. */
static void record_pass_frame(VkCommandBuffer cmd, const void *arg)
{
    const struct pass_frame *f = arg;
    static const char *const pass_names[FRAME_PASSES] = {"shadow 0", "shadow 1", "gbuffer", "lighting", "sky",
                                                         "transparent", "bloom", "ui"};
    VkDebugUtilsLabelEXT label = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT, .pLabelName = "frame"};
    f->label_begin(cmd, &label);
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                         0, 0, NULL, 0, NULL, 1, &f->t.to_attachment);
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, f->t.pipeline);
    for (int p = 0; p < FRAME_PASSES; p++) {
        label.pLabelName = pass_names[p];
        f->label_begin(cmd, &label);
        record_one_pass(cmd, f);
        f->label_end(cmd);
    }
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, f->cp.pipeline);
    vkCmdDispatch(cmd, 1, 1, 1);
    vkCmdDispatch(cmd, 1, 1, 1);
    f->label_end(cmd);
}

static double bench_passframe(struct ctx *c, long calls, long reps, enum frame_submit how, int subpasses,
                              double *best_cpu)
{
    struct pass_frame f = {.render_pass = VK_NULL_HANDLE};   /* filled in place: its draw_target points into itself */
    f.label_begin = (PFN_vkCmdBeginDebugUtilsLabelEXT)vkGetDeviceProcAddr(c->device, "vkCmdBeginDebugUtilsLabelEXT");
    f.label_end = (PFN_vkCmdEndDebugUtilsLabelEXT)vkGetDeviceProcAddr(c->device, "vkCmdEndDebugUtilsLabelEXT");
    if (!f.label_begin || !f.label_end)
        fail("no vkCmdBeginDebugUtilsLabelEXT (VK_EXT_debug_utils)");
    draw_target_create(c, &f.t);
    if (subpasses)
        subpass_target_create(c, &f);
    f.cp = empty_compute_pipeline(c);
    double best = frame_loop(c, record_pass_frame, &f, calls, reps, best_cpu, how);
    destroy_compute_pipeline(c, &f.cp);
    if (subpasses) {
        for (uint32_t k = 0; k < 2; k++)
            vkDestroyPipeline(c->device, f.subpass_pipelines[k], NULL);
        vkDestroyFramebuffer(c->device, f.framebuffer, NULL);
        vkDestroyRenderPass(c->device, f.render_pass, NULL);
    }
    draw_target_destroy(c, &f.t);
    return best;
}

static VkBuffer transfer_buffer(struct ctx *c, VkDeviceMemory *memory)
{
    VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = COPY_BYTES,
                               .usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                               .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkBuffer buffer;
    VK_CHECK(vkCreateBuffer(c->device, &info, NULL, &buffer));
    VkMemoryRequirements reqs;
    vkGetBufferMemoryRequirements(c->device, buffer, &reqs);
    *memory = allocate(c, reqs, 0);
    VK_CHECK(vkBindBufferMemory(c->device, buffer, *memory, 0));
    return buffer;
}

/* Best of `reps` times of recording `calls` 16-byte buffer copies (vkCmdCopyBuffer, or vkCmdCopyBuffer2). */
static double bench_copy(struct ctx *c, int two, long calls, long reps, double *best_end, struct submit_times *st)
{
    VkDeviceMemory src_memory, dst_memory;
    VkBuffer src = transfer_buffer(c, &src_memory), dst = transfer_buffer(c, &dst_memory);
    VkCommandBuffer cmd = command_buffer(c);
    const long slots = COPY_BYTES / FILL_BYTES;

    double best = -1.0;
    for (long rep = 0; rep < reps; rep++) {
        VK_CHECK(vkResetCommandBuffer(cmd, 0));
        begin(cmd, VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT);
        double t0 = now_ns();
        if (two) {
            for (long i = 0; i < calls; i++) {
                VkDeviceSize at = (VkDeviceSize)(i % slots) * FILL_BYTES;
                VkBufferCopy2 region = {.sType = VK_STRUCTURE_TYPE_BUFFER_COPY_2, .srcOffset = at,
                                        .dstOffset = at, .size = FILL_BYTES};
                VkCopyBufferInfo2 info = {.sType = VK_STRUCTURE_TYPE_COPY_BUFFER_INFO_2, .srcBuffer = src,
                                          .dstBuffer = dst, .regionCount = 1, .pRegions = &region};
                vkCmdCopyBuffer2(cmd, &info);
            }
        } else {
            for (long i = 0; i < calls; i++) {
                VkDeviceSize at = (VkDeviceSize)(i % slots) * FILL_BYTES;
                VkBufferCopy region = {.srcOffset = at, .dstOffset = at, .size = FILL_BYTES};
                vkCmdCopyBuffer(cmd, src, dst, 1, &region);
            }
        }
        double elapsed = now_ns() - t0;
        VK_CHECK(vkEndCommandBuffer(cmd));
        double ended = now_ns() - t0 - elapsed;
        keep_best(&best, elapsed);
        keep_best(best_end, ended);
    }
    submit_once(c, cmd, st);   /* after the timed recordings: a layer's work on it cannot slow them */

    vkFreeCommandBuffers(c->device, c->pool, 1, &cmd);
    vkDestroyBuffer(c->device, src, NULL);
    vkDestroyBuffer(c->device, dst, NULL);
    vkFreeMemory(c->device, src_memory, NULL);
    vkFreeMemory(c->device, dst_memory, NULL);
    return best;
}

/* Best of `reps` times of `calls` vkQueueSubmit (fence waits excluded, see the header). */
static double bench_submit(struct ctx *c, long calls, long reps)
{
    VkBufferCreateInfo buffer_info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = RING * FILL_BYTES,
                                      .usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                      .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkBuffer buffer;
    VK_CHECK(vkCreateBuffer(c->device, &buffer_info, NULL, &buffer));
    VkMemoryRequirements reqs;
    vkGetBufferMemoryRequirements(c->device, buffer, &reqs);
    VkDeviceMemory memory = allocate(c, reqs, 0);
    VK_CHECK(vkBindBufferMemory(c->device, buffer, memory, 0));

    VkCommandBuffer cmds[RING];
    VkFence fences[RING];
    VkSubmitInfo submits[RING];
    VkFenceCreateInfo fence_info = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    for (uint32_t k = 0; k < RING; k++) {
        cmds[k] = command_buffer(c);
        begin(cmds[k], 0); /* reusable: submitted many times, never pending twice (fence per slot) */
        vkCmdFillBuffer(cmds[k], buffer, (VkDeviceSize)k * FILL_BYTES, FILL_BYTES, k);
        VK_CHECK(vkEndCommandBuffer(cmds[k]));
        VK_CHECK(vkCreateFence(c->device, &fence_info, NULL, &fences[k]));
        submits[k] = (VkSubmitInfo){.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                                    .pCommandBuffers = &cmds[k]};
    }

    double best = -1.0;
    for (long rep = 0; rep < reps; rep++) {
        double elapsed = 0.0;
        for (long done = 0; done < calls;) {
            uint32_t batch = calls - done < RING ? (uint32_t)(calls - done) : RING;
            double t0 = now_ns();
            for (uint32_t k = 0; k < batch; k++)
                VK_CHECK(vkQueueSubmit(c->queue, 1, &submits[k], fences[k]));
            elapsed += now_ns() - t0;
            VK_CHECK(vkWaitForFences(c->device, batch, fences, VK_TRUE, UINT64_MAX));
            VK_CHECK(vkResetFences(c->device, batch, fences));
            done += batch;
        }
        keep_best(&best, elapsed);
    }

    VK_CHECK(vkQueueWaitIdle(c->queue));
    for (uint32_t k = 0; k < RING; k++)
        vkDestroyFence(c->device, fences[k], NULL);
    vkFreeCommandBuffers(c->device, c->pool, RING, cmds);
    vkDestroyBuffer(c->device, buffer, NULL);
    vkFreeMemory(c->device, memory, NULL);
    return best;
}

int main(int argc, char **argv)
{
    enum mode mode = MODE_DISPATCH;
    int known = 0;
    for (int m = 0; argc > 1 && m < MODE_COUNT; m++)
        if (strcmp(argv[1], MODE_NAMES[m]) == 0) {
            mode = (enum mode)m;
            known = 1;
        }
    if (!known) {
        fprintf(stderr, "usage: record_cost dispatch|draw|submit|groups|copy|copy2|pass|buffer|passframe|buffers [N] [REPS]\n"
                        "       record_cost threads [N] [REPS] [THREADS] [secondary]\n"
                        "       record_cost frame [N] [REPS] [WORKLOADS] [dispatch|fill|pushed|indirect]"
                        " [chained|timeline|labelled]\n"
                        "       record_cost passframe [N] [REPS] [labelled|subpasses]\n"
                        "       record_cost buffers [N] [REPS] [BUFFERS]"
                        " [batches|linked|timeline-linked|secondaries|prerecorded]\n");
        return 1;
    }
    const long calls = parse_arg(argc, argv, 2, mode == MODE_FRAME || mode == MODE_PASSFRAME || mode == MODE_BUFFERS ? 300
                                 : mode == MODE_SUBMIT || mode == MODE_GROUPS || mode == MODE_BUFFER
                                   || mode == MODE_THREADS ? 20000 : 200000);
    const long reps = parse_arg(argc, argv, 3, 5);
    const long threads = mode == MODE_THREADS ? parse_arg(argc, argv, 4, 2) : 1;
    if (threads > MAX_THREADS)
        fail("at most 16 threads");
    const long dispatches = mode == MODE_FRAME ? parse_arg(argc, argv, 4, FRAME_DISPATCHES) : FRAME_DISPATCHES;
    if (dispatches > MAX_FRAME_DISPATCHES)
        fail("at most 4096 workloads per frame");
    const long buffers = mode == MODE_BUFFERS ? parse_arg(argc, argv, 4, FRAME_BUFFERS) : FRAME_BUFFERS;
    if (buffers < 1 || buffers > MAX_FRAME_BUFFERS)
        fail("1 to 256 command buffers per frame");
    const enum workload_kind kind = mode != MODE_FRAME || argc <= 5 ? KIND_DISPATCH
                                    : strcmp(argv[5], "fill") == 0 ? KIND_FILL
                                    : strcmp(argv[5], "pushed") == 0 ? KIND_PUSHED
                                    : strcmp(argv[5], "indirect") == 0 ? KIND_INDIRECT : KIND_DISPATCH;
    const enum frame_submit how = mode == MODE_PASSFRAME ? (argc > 4 && strcmp(argv[4], "labelled") == 0
                                                            ? SUBMIT_LABELLED : SUBMIT_FENCED)
                             : mode == MODE_BUFFERS ? (argc <= 5 ? SUBMIT_FENCED
                                                       : strcmp(argv[5], "batches") == 0 ? SUBMIT_BATCHES
                                                       : strcmp(argv[5], "linked") == 0 ? SUBMIT_LINKED
                                                       : strcmp(argv[5], "timeline-linked") == 0
                                                         ? SUBMIT_TIMELINE_LINKED
                                                       : strcmp(argv[5], "secondaries") == 0 ? SUBMIT_SECONDARIES
                                                       : strcmp(argv[5], "prerecorded") == 0 ? SUBMIT_PRERECORDED
                                                       : SUBMIT_FENCED)
                             : mode != MODE_FRAME || argc <= 6 ? SUBMIT_FENCED
                             : strcmp(argv[6], "chained") == 0 ? SUBMIT_CHAINED
                             : strcmp(argv[6], "timeline") == 0 ? SUBMIT_TIMELINE
                             : strcmp(argv[6], "labelled") == 0 ? SUBMIT_LABELLED : SUBMIT_FENCED;
    if (mode == MODE_FRAME && argc > 6 && how == SUBMIT_FENCED)
        fail("the frame mode's 6th argument is chained, timeline or labelled");
    const int subpasses = mode == MODE_PASSFRAME && argc > 4 && strcmp(argv[4], "subpasses") == 0;
    if (mode == MODE_PASSFRAME && argc > 4 && how == SUBMIT_FENCED && !subpasses)
        fail("the passframe mode's 4th argument is labelled or subpasses");
    if (mode == MODE_THREADS && argc > 5 && strcmp(argv[5], "secondary") != 0)
        fail("the threads mode's 5th argument is secondary");
    if (mode == MODE_BUFFERS && argc > 5 && how == SUBMIT_FENCED)
        fail("the buffers mode's 5th argument is batches, linked, timeline-linked, secondaries or prerecorded");
    if (mode == MODE_FRAME && argc > 5 && kind == KIND_DISPATCH && strcmp(argv[5], "dispatch") != 0)
        fail("the frame mode's 5th argument is dispatch, fill, pushed or indirect");

    struct ctx c;
    init(&c, mode, how, kind);
    double best_end = -1.0, best_cpu = -1.0;
    struct submit_times st = {-1.0, -1.0};
    double best = mode == MODE_DISPATCH ? bench_dispatch(&c, calls, reps, &best_end, &st)
                  : mode == MODE_DRAW   ? bench_draw(&c, 0, calls, reps, &best_end, &st)
                  : mode == MODE_PASS   ? bench_draw(&c, 1, calls, reps, &best_end, &st)
                  : mode == MODE_GROUPS ? bench_groups(&c, calls, reps)
                  : mode == MODE_BUFFER ? bench_buffer(&c, calls, reps)
                  : mode == MODE_FRAME  ? bench_frame(&c, calls, reps, dispatches, kind, how, &best_cpu)
                  : mode == MODE_PASSFRAME ? bench_passframe(&c, calls, reps, how, subpasses, &best_cpu)
                  : mode == MODE_BUFFERS ? bench_buffers(&c, calls, reps, (uint32_t)buffers, how, &best_cpu)
                  : mode == MODE_THREADS ? bench_threads(&c, calls, reps, threads,
                                                         argc > 5 && strcmp(argv[5], "secondary") == 0, &best_cpu)
                  : mode == MODE_COPY   ? bench_copy(&c, 0, calls, reps, &best_end, &st)
                  : mode == MODE_COPY2  ? bench_copy(&c, 1, calls, reps, &best_end, &st)
                                        : bench_submit(&c, calls, reps);
    finish(&c);
    printf("{\"mode\":\"%s\",\"threads\":%ld,\"calls\":%ld,\"ns_per_call\":%.2f,\"end_ns_per_call\":%.2f,"
           "\"cpu_ns_per_call\":%.2f,\"submit_ns\":%.0f,\"wait_ns\":%.0f,\"repetitions\":%ld}\n",
           MODE_NAMES[mode], threads, calls, best / (double)calls, best_end > 0.0 ? best_end / (double)calls : 0.0,
           best_cpu > 0.0 ? best_cpu / (double)calls : 0.0,
           st.submit > 0.0 ? st.submit : 0.0, st.wait > 0.0 ? st.wait : 0.0, reps);
    return 0;
}
