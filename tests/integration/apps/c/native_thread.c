/*
 * native_thread: a thread the Python interpreter does not know creates and destroys Vulkan objects,
 * while the caller waits for it (tests/integration/test_foreign_threads.py). Built as a shared library;
 * apps/native_thread.py calls create_on_native_thread(device) through ctypes, holding Python's lock
 * (ctypes.PyDLL) or not (ctypes.CDLL), as moderngl holds it while it waits for zink's worker thread.
 * Returns the number of objects created (2), or the failing VkResult.
 */
#include <vulkan/vulkan.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

struct job { VkDevice device; VkResult result; int created; };

static void *work(void *arg)
{
    struct job *j = arg;
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = 256, .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT};
    VkBuffer b;
    j->result = vkCreateBuffer(j->device, &bi, NULL, &b);
    if (j->result) return NULL;
    j->created++;
    VkPipelineLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    VkPipelineLayout l;
    j->result = vkCreatePipelineLayout(j->device, &li, NULL, &l);
    if (j->result) return NULL;
    j->created++;
    vkDestroyPipelineLayout(j->device, l, NULL);
    vkDestroyBuffer(j->device, b, NULL);
    return NULL;
}

int create_on_native_thread(uintptr_t device)
{
    struct job j = {(VkDevice)device, VK_SUCCESS, 0};
    pthread_t t;
    pthread_create(&t, NULL, work, &j);
    pthread_join(t, NULL);
    return j.result ? (int)j.result : j.created;
}
