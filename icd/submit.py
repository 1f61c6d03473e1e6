"""Queue submit hooks: hand each submitted batch to the emulated timeline.

The timeline gets a submit after the backend accepted it (a rejected submit
executes nothing), with the host time taken when the hook runs; its worker
places it (timeline.py). Most submits never reach Python at submit time:
the shim's C path (vkapi/submits.py) forwards and records them, and the
timeline pulls the records; a buffer may take that path once its recording
is applied and it holds nothing timed only after execution. A submit that
does is followed by the driver's completion fence (vkapi/fences.py). Where the
application observes completion (fence and idle waits), the timeline
settles first, so what the application knows has run is in the trace.
"""
from __future__ import annotations

from tessera.vkapi import submits
from tessera.vkapi.fences import Fences
from tessera.vkapi.submits import QueueLabel, SubmitLedger
from tessera.vkapi.vkconst import vk

from .driver import Driver
from .objects import CommandBuffer, Device, Queue
from .timeline import LabelMade, SubmitMade, batch


def register(drv: Driver) -> None:
    ffi, hooks, objects = drv.ffi, drv.hooks, drv.objects
    ledger = SubmitLedger(ffi, drv.lib, lambda message: hooks.errors.log.warning("%s", message))

    def made_in_c() -> list[SubmitMade | LabelMade]:
        """The submits and queue labels the C path recorded, as the timeline takes them."""
        out = []
        for s in ledger.take():
            queue = objects.by_address.get(s.queue)
            if not isinstance(queue, Queue):   # cannot happen: the queue's device is alive
                continue
            if isinstance(s, QueueLabel):
                out.append(LabelMade(queue, s.name))
                continue
            for cbs, _, _ in s.batches:   # their recordings, applied by the recorder's worker
                for address in cbs:
                    hooks.recorder.wait(address)
            batches = [batch([objects.by_address[a] for a in cbs], waits, signals)
                       for cbs, waits, signals in s.batches]
            out.append(SubmitMade(queue, batches, s.boottime_ns))
        return out

    drv.timeline.take_submits_from(made_in_c)
    drv.submit_ledger = ledger

    def hand_over(queue: Queue, batches) -> None:
        ledger.made_in_python += 1
        completion = None
        if any(cb.needs_completion for b in batches for cb in b[0]):
            dev = queue.device
            if dev.fences is None:
                dev.fences = Fences(ffi, dev)
            fence = dev.fences.signal_after(queue.handle)
            if fence is None:
                hooks.errors.report("vkQueueSubmit", "submitting the driver's completion fence; indirect sizes "
                                    "and measured executions of this submit may be read before they exist")
            else:
                completion = (dev.fences, fence)
        drv.timeline.submit(queue, [batch(*b) for b in batches], completion)

    def after(name: str):
        def after_submit(queue, result, vkqueue, count, pSubmits, fence):
            if result != vk.VK_SUCCESS:
                return
            get = objects.get
            hand_over(queue, [([get(h, CommandBuffer) for h in buffers], [int(w) for w in waits],
                               [int(s) for s in signals])
                              for buffers, waits, signals in submits.batches(name, count, pSubmits)])
        return after_submit

    for name in submits.COMMANDS:
        hooks.after(name)(after(name))

    @hooks.before("vkDestroySemaphore")
    def before_destroy_semaphore(dev, device, semaphore, pAllocator):
        drv.timeline.forget_semaphore(int(semaphore))

    # The application observes completion: what it knows has run is in the trace when the call returns.
    @hooks.after("vkWaitForFences")
    def after_wait_fences(dev, result, device, count, pFences, waitAll, timeout):
        if result == vk.VK_SUCCESS:
            drv.timeline.settle()

    @hooks.after("vkQueueWaitIdle")
    def after_queue_wait_idle(queue, result, vkqueue):
        if result == vk.VK_SUCCESS:
            drv.timeline.settle()

    @hooks.after("vkDeviceWaitIdle")
    def after_device_wait_idle(dev, result, device):
        if result == vk.VK_SUCCESS:
            drv.timeline.settle()


def before_device_destroyed(drv: Driver, dev: Device) -> None:
    """Every submit placed (all work has completed: spec 5.2.1, vkDestroyDevice), then the fences go."""
    drv.timeline.settle(block=True)
    drv.hooks.errors.log.info("%s", drv.submit_ledger.counts())
    drv.hooks.errors.log.info("%s", drv.hooks.recorder.counts())
    if dev.fences is not None:
        dev.fences.destroy()
        dev.fences = None


CALLS = ("vkCreateFence", "vkDestroyFence", "vkResetFences", "vkGetFenceStatus")   # vkapi/fences.py
