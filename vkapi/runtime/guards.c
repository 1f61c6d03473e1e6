/* The guards' next functions (vkapi/guards.py): what a guard forwards to in C once Python is gone.
   Static C, after the shim's Vulkan declarations; the generator #defines TESSERA_GUARD_COUNT before it. */
#include <stdint.h>
#include <stddef.h>

#define VK_ERROR_INITIALIZATION_FAILED (-3)
#define TESSERA_NEXT_AMBIGUOUS ((PFN_vkVoidFunction)(uintptr_t)1)
static PFN_vkVoidFunction tessera_next[TESSERA_GUARD_COUNT];

/* Called from Python (holding the GIL) whenever it resolves a dispatch table. */
void tessera_note_next(int index, PFN_vkVoidFunction fn)
{
    if (index < 0 || index >= TESSERA_GUARD_COUNT || !fn) return;
    PFN_vkVoidFunction seen = __atomic_load_n(&tessera_next[index], __ATOMIC_ACQUIRE);
    if (seen == NULL)
        __atomic_store_n(&tessera_next[index], fn, __ATOMIC_RELEASE);
    else if (seen != fn)
        __atomic_store_n(&tessera_next[index], TESSERA_NEXT_AMBIGUOUS, __ATOMIC_RELEASE);
}

static PFN_vkVoidFunction tessera_next_of(int index)
{
    PFN_vkVoidFunction fn = __atomic_load_n(&tessera_next[index], __ATOMIC_ACQUIRE);
    return fn == TESSERA_NEXT_AMBIGUOUS ? NULL : fn;
}
