"""vkapi.submits.batches / command_buffers: Python reads a submit's batches from the shapes the C
submit path is generated from (one table for both), for vkQueueSubmit and vkQueueSubmit2, with each
semaphore's value as the C path records it (VkTimelineSemaphoreSubmitInfo's, VkSemaphoreSubmitInfo's;
0 where there is none). Real structs, made with the `vulkan` package's cffi declarations."""
from __future__ import annotations

import vulkan as vkpy

from tessera.vkapi.submits import COMMANDS, batches, command_buffers

ffi = vkpy.ffi


def handles(ctype: str, *values: int):
    return ffi.new(f"{ctype}[]", [ffi.cast(ctype, v) for v in values]) if values else ffi.NULL


def ints(batch) -> tuple:
    buffers, waits, signals = batch
    return ([int(ffi.cast("uintptr_t", b)) for b in buffers], [(int(ffi.cast("uint64_t", h)), v) for h, v in waits],
            [(int(ffi.cast("uint64_t", h)), v) for h, v in signals])


def test_both_submit_commands_are_read():
    assert set(COMMANDS) == {"vkQueueSubmit", "vkQueueSubmit2"}


def test_vk_queue_submit_batches_with_timeline_values_where_given():
    keep = [handles("VkCommandBuffer", 11, 12, 99), handles("VkSemaphore", 21), handles("VkSemaphore", 31, 32),
            ffi.new("uint64_t[]", [5]), ffi.new("uint64_t[]", [7])]
    values = ffi.new("VkTimelineSemaphoreSubmitInfo *", {
        "sType": vkpy.VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO, "waitSemaphoreValueCount": 1,
        "pWaitSemaphoreValues": keep[3], "signalSemaphoreValueCount": 1, "pSignalSemaphoreValues": keep[4]})
    infos = ffi.new("VkSubmitInfo[]", [
        {"sType": vkpy.VK_STRUCTURE_TYPE_SUBMIT_INFO, "commandBufferCount": 2, "pCommandBuffers": keep[0],
         "waitSemaphoreCount": 1, "pWaitSemaphores": keep[1]},
        {"sType": vkpy.VK_STRUCTURE_TYPE_SUBMIT_INFO, "pNext": values, "signalSemaphoreCount": 2,
         "pSignalSemaphores": keep[2]}])
    got = [ints(b) for b in batches("vkQueueSubmit", 2, infos, ffi)]
    assert got == [([11, 12], [(21, 0)], []),              # no VkTimelineSemaphoreSubmitInfo: 0
                   ([], [], [(31, 7), (32, 0)])]           # one value given for two semaphores
    assert [int(ffi.cast("uintptr_t", b)) for b in command_buffers("vkQueueSubmit", 2, infos)] == [11, 12]
    assert len(batches("vkQueueSubmit", 1, infos, ffi)) == 1   # `count`, not the array, decides


def test_vk_queue_submit2_batches_read_the_members_of_each_info():
    cbs = ffi.new("VkCommandBufferSubmitInfo[]", [{"commandBuffer": ffi.cast("VkCommandBuffer", 41)},
                                                  {"commandBuffer": ffi.cast("VkCommandBuffer", 42)}])
    waits = ffi.new("VkSemaphoreSubmitInfo[]", [{"semaphore": ffi.cast("VkSemaphore", 51), "value": 3}])
    signals = ffi.new("VkSemaphoreSubmitInfo[]", [{"semaphore": ffi.cast("VkSemaphore", 61), "value": 4}])
    infos = ffi.new("VkSubmitInfo2[]", [{"commandBufferInfoCount": 2, "pCommandBufferInfos": cbs,
                                         "waitSemaphoreInfoCount": 1, "pWaitSemaphoreInfos": waits,
                                         "signalSemaphoreInfoCount": 1, "pSignalSemaphoreInfos": signals}])
    assert [ints(b) for b in batches("vkQueueSubmit2", 1, infos, ffi)] == [([41, 42], [(51, 3)], [(61, 4)])]
    assert [int(ffi.cast("uintptr_t", b)) for b in command_buffers("vkQueueSubmit2", 1, infos)] == [41, 42]
