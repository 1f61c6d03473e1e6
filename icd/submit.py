"""Queue submit hooks: hand each submitted batch to the emulated timeline.

The timeline gets a submit after the backend accepted it (a rejected submit
executes nothing), with the host time taken when the hook runs; its worker
places it (timeline.py). Most submits never reach Python at submit time:
the shim's C path (vkapi/submits.py) forwards and records them, and the
timeline pulls the records; a buffer may take that path once its recording
is applied and it holds nothing timed only after execution. A submit that
does is followed by the driver's completion fence (vkapi/fences.py). Where the
application observes completion (fence, semaphore and idle waits, and the polls
vkGetFenceStatus and vkGetSemaphoreCounterValue), the timeline settles first, so
what the application knows has run is in the trace.
"""
from __future__ import annotations

from tessera.vkapi import structs, submits
from tessera.vkapi.guards import thread_counts
from tessera.vkapi.ops import Recording
from tessera.vkapi.fences import Fences
from tessera.vkapi.submits import QueueLabel
from tessera.vkapi.vkconst import vk

from .driver import Driver
from .feature import Feature
from .objects import CommandBuffer, Device, Queue
from .replay import ProductOps
from .timeline import Batch, LabelMade, SubmitMade, batch


class Submits(Feature):
    """The driver's submit hooks: one method per command (HookSet.bind), the C path's ledger its state."""

    def __init__(self, drv: Driver) -> None:
        self.drv, self.ffi, self.objects = drv, drv.ffi, drv.objects
        self.report = drv.hooks.errors.report
        self.recorder = drv.hooks.recorder   # entry.py made it, the ledger and the timeline before any module
        self.ledger = drv.submit_ledger
        drv.timeline.take_submits_from(self.made_in_c)

    def made_in_c(self) -> list[SubmitMade | LabelMade]:
        """The submits and queue labels the C path recorded, as the timeline takes them."""
        out = []
        by_address = self.objects.by_address
        taken = self.ledger.take()
        if not taken:
            return out
        i = 0
        while i < len(taken):
            s = taken[i]
            i += 1
            queue = by_address.get(s.queue)
            if not isinstance(queue, Queue):   # cannot happen: the queue's device is alive
                continue
            if isinstance(s, QueueLabel):
                if s.name is not None and _wrapped_submit(taken, i, s.queue):   # begin, submit, end: one job
                    out.append(self._made(queue, taken[i], s.name))
                    i += 2
                else:
                    out.append(LabelMade(queue, s.name))
                continue
            out.append(self._made(queue, s, None))
        self.ledger.read()
        return out

    def _made(self, queue: Queue, s, label: str | None) -> SubmitMade:
        recordings = self._recordings([self.objects.by_address[a] for cbs, _, _ in s.batches for a in cbs])
        batches, at = [], 0
        for cbs, waits, signals in s.batches:
            batches.append(Batch(recordings[at:at + len(cbs)], waits, signals,
                                 s.serials[at:at + len(cbs)] if s.serials else None))
            at += len(cbs)
        return SubmitMade(queue, batches, s.boottime_ns, label)

    def _recordings(self, cbs: list[CommandBuffer]) -> list[Recording]:
        """A submit's buffers' recordings, as the timeline takes them (timeline.batch). One begun and ended in C
        that equals a kept one is read from that one's product, its hooks not run (vkapi/lifecycle.py); any
        other has its recording applied by the recorder's worker, or the hooks of its begin and end made in C
        run, first."""
        recorder = self.recorder
        if not cbs:
            return []
        addresses = [cb.address for cb in cbs]
        reads = recorder.reading_all(cbs[0], addresses)
        if reads.count(None) < len(reads):
            recorder.read_all(addresses, reads)
        out = []
        for cb, read in zip(cbs, reads):
            if read is not None:
                out.append(Recording(cb.address, ProductOps(read.product, read.tags, read.kept)))
            else:
                recorder.wait(cb.address, reading=True)
                out.append(Recording(cb.address, cb.ops))
        return out

    def hand_over(self, queue: Queue, batches) -> None:
        """A submit made in Python: to the timeline, behind the driver's completion fence when a buffer
        holds work timed only after execution."""
        self.ledger.made_in_python += 1
        completion = None
        if any(cb.needs_completion for b in batches for cb in b[0]):
            dev = queue.device
            if dev.fences is None:
                dev.fences = Fences(self.ffi, dev)
            fence = dev.fences.signal_after(queue.handle)
            if fence is None:
                self.report("vkQueueSubmit", "submitting the driver's completion fence; indirect sizes "
                            "and measured executions of this submit may be read before they exist")
            else:
                completion = (dev.fences, fence)
        self.drv.timeline.submit(queue, [batch(*b) for b in batches], completion)

    def _after_submit(self, name: str, queue, result, count, pSubmits) -> None:
        if result != vk.VK_SUCCESS:
            return
        get = self.objects.get
        self.hand_over(queue, [([get(h, CommandBuffer) for h in buffers], [(int(h), v) for h, v in waits],
                                [(int(h), v) for h, v in signals])
                               for buffers, waits, signals in submits.batches(name, count, pSubmits, self.ffi)])

    def after_vkQueueSubmit(self, queue, result, vkqueue, count, pSubmits, fence):
        self._after_submit("vkQueueSubmit", queue, result, count, pSubmits)

    def after_vkQueueSubmit2(self, queue, result, vkqueue, count, pSubmits, fence):
        self._after_submit("vkQueueSubmit2", queue, result, count, pSubmits)

    def after_vkCreateSemaphore(self, dev, result, device, pCreateInfo, pAllocator, pSemaphore):
        if result != vk.VK_SUCCESS:
            return
        kind = structs.find(self.ffi, pCreateInfo.pNext, vk.VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                            "VkSemaphoreTypeCreateInfo *")
        if kind is not None and kind.semaphoreType == vk.VK_SEMAPHORE_TYPE_TIMELINE:
            self.drv.timeline.timeline_semaphore(int(self.ffi.cast("uint64_t", pSemaphore[0])), kind.initialValue)

    def before_vkDestroySemaphore(self, dev, device, semaphore, pAllocator):
        self.drv.timeline.forget_semaphore(int(semaphore))

    # The application observes completion: what it knows has run is in the trace when the call returns.
    # Before the backend's wait, what needs no GPU result is placed while the backend runs it, never
    # waiting (a poll with timeout 0 is not held up by GPU work still running); the settle after the
    # wait then mostly finds nothing left, and a frame loop's wait finds its work done, not sleeping.
    def before_vkWaitForFences(self, dev, device, count, pFences, waitAll, timeout):
        self.drv.timeline.place_ready()

    def before_vkWaitSemaphores(self, dev, device, pWaitInfo, timeout):
        self.drv.timeline.place_ready()

    def before_vkQueueWaitIdle(self, queue, vkqueue):
        self.drv.timeline.place_ready()

    def before_vkDeviceWaitIdle(self, dev, device):
        self.drv.timeline.place_ready()

    def after_vkWaitForFences(self, dev, result, device, count, pFences, waitAll, timeout):
        if result == vk.VK_SUCCESS:
            self.drv.timeline.settle()

    def after_vkWaitSemaphores(self, dev, result, device, pWaitInfo, timeout):
        if result == vk.VK_SUCCESS:
            self.drv.timeline.settle()

    def after_vkQueueWaitIdle(self, queue, result, vkqueue):
        if result == vk.VK_SUCCESS:
            self.drv.timeline.settle()

    def after_vkDeviceWaitIdle(self, dev, result, device):
        if result == vk.VK_SUCCESS:
            self.drv.timeline.settle()

    # A poll observes completion too (a program may poll its fence, then _exit): the settle finds what ran.
    def after_vkGetFenceStatus(self, dev, result, device, fence):
        if result == vk.VK_SUCCESS:
            self.drv.timeline.settle()

    def after_vkGetSemaphoreCounterValue(self, dev, result, device, semaphore, pValue):
        if result == vk.VK_SUCCESS:
            self.drv.timeline.settle()


    # ---- device lifecycle (icd/feature.py): the last feature, so the first one destroyed ----------
    def destroyed(self, dev: Device) -> None:
        """Every submit placed (all work has completed: spec 5.2.1, vkDestroyDevice), then the fences go;
        before any other feature destroys what the work used."""
        drv = self.drv
        drv.timeline.forget_queues(dev)   # after the device's submits: C places on none of its queues again
        drv.timeline.settle(block=True)
        placed = drv.timeline.placed
        drv.hooks.errors.log.info("%s", drv.submit_ledger.counts(placed.licence.handled() if placed else 0))
        if drv.timeline.placed is not None:
            drv.hooks.errors.log.info("%s", drv.timeline.placed.licence.counts())
            if drv.timeline.placed.check:
                drv.hooks.errors.log.info("%s", drv.timeline.placed.check_counts())
        drv.hooks.errors.log.info("%s", drv.hooks.recorder.counts())
        drv.hooks.errors.log.info("%s", drv.timeline.plans.counts())
        drv.hooks.errors.log.info("%s", thread_counts(drv.ffi, drv.lib))
        if dev.fences is not None:
            dev.fences.destroy()
            dev.fences = None


def register(drv: Driver) -> Submits:
    feature = drv.hooks.bind(Submits(drv))
    drv.features.append(feature)
    return feature


CALLS = ("vkCreateFence", "vkDestroyFence", "vkResetFences")   # vkapi/fences.py (vkGetFenceStatus: hooked)


def _wrapped_submit(taken: list, at: int, queue: int) -> bool:
    """Whether taken[at] is a submit on `queue` and taken[at + 1] the end of the queue label begun just before it."""
    return (at + 1 < len(taken) and not isinstance(taken[at], QueueLabel) and taken[at].queue == queue
            and isinstance(taken[at + 1], QueueLabel) and taken[at + 1].name is None and taken[at + 1].queue == queue)
