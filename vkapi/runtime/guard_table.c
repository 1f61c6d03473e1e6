/* The guard table Python binds by name (vkapi/guards.py), after the generated guards: the generator
   emits tessera_guard_names[] and tessera_guard_pointers[] (TESSERA_GUARD_COUNT entries) before it. */
int tessera_guard_count(void) { return TESSERA_GUARD_COUNT; }
const char* tessera_guard_name(int index)
{
    return index >= 0 && index < TESSERA_GUARD_COUNT ? tessera_guard_names[index] : NULL;
}
PFN_vkVoidFunction tessera_guard_address(int index)
{
    return index >= 0 && index < TESSERA_GUARD_COUNT ? tessera_guard_pointers[index] : NULL;
}
