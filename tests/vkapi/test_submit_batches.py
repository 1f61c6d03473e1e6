"""vkapi.submits.batches / command_buffers: Python reads a submit's batches from the shapes the C
submit path is generated from (one table for both), for vkQueueSubmit and vkQueueSubmit2."""
from __future__ import annotations

from types import SimpleNamespace as S

from tessera.vkapi.submits import COMMANDS, batches, command_buffers


def test_both_submit_commands_are_read():
    assert set(COMMANDS) == {"vkQueueSubmit", "vkQueueSubmit2"}


def test_vk_queue_submit_batches():
    infos = [S(commandBufferCount=2, pCommandBuffers=[11, 12, 99], waitSemaphoreCount=1, pWaitSemaphores=[21],
               signalSemaphoreCount=0, pSignalSemaphores=None),
             S(commandBufferCount=0, pCommandBuffers=None, waitSemaphoreCount=0, pWaitSemaphores=None,
               signalSemaphoreCount=2, pSignalSemaphores=[31, 32])]
    assert batches("vkQueueSubmit", 2, infos) == [([11, 12], [21], []), ([], [], [31, 32])]
    assert command_buffers("vkQueueSubmit", 2, infos) == [11, 12]
    assert batches("vkQueueSubmit", 1, infos) == [([11, 12], [21], [])]     # `count`, not the list, decides


def test_vk_queue_submit2_batches_read_the_members_of_each_info():
    infos = [S(commandBufferInfoCount=2, pCommandBufferInfos=[S(commandBuffer=41), S(commandBuffer=42)],
               waitSemaphoreInfoCount=1, pWaitSemaphoreInfos=[S(semaphore=51)],
               signalSemaphoreInfoCount=1, pSignalSemaphoreInfos=[S(semaphore=61)])]
    assert batches("vkQueueSubmit2", 1, infos) == [([41, 42], [51], [61])]
    assert command_buffers("vkQueueSubmit2", 1, infos) == [41, 42]
