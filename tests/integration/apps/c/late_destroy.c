/* A library whose destructor calls vkDestroyInstance when the process exits.
 *
 * Loaded with ctypes by tests/integration/apps/program_shapes.py: by the time
 * this destructor runs the Python interpreter that loaded it has finalised,
 * which is what C++ frameworks living inside Python processes do with their
 * static Vulkan objects. Built by the test with: cc -shared -fPIC -o X.so late_destroy.c
 */
#include <dlfcn.h>
#include <stdio.h>

typedef void (*destroy_fn)(void *instance, const void *allocator);

static void *instance;
static destroy_fn destroy;

void late_destroy_keep(void *vk_instance, void *destroy_instance)
{
    instance = vk_instance;
    destroy = (destroy_fn)destroy_instance;
}

__attribute__((destructor)) static void late_destroy_at_exit(void)
{
    if (instance && destroy) {
        destroy(instance, NULL);
        fprintf(stderr, "late_destroy: vkDestroyInstance returned after interpreter shutdown\n");
    }
}
