"""The emulated timeline: at each queue submit, what runs where and when.

For every batch of a submit, the shadow recordings of its command buffers
(secondaries expanded) are walked in order. Label ops update the queue's
debug-label stack (labels may open in one command buffer and close in a
later one, so the stack belongs to the queue); render-pass parts suspended
and resumed across command buffers become one pass; each workload gets its
phases from the timing model, a place on the emulated hardware queues from
the scheduler, and one render-stage event per phase in the trace, carrying
the label stack in effect when it began.

Threads: the application's thread only queues each submit (the command
buffers' op lists as they are at submit), each queue-label change and each
semaphore's end, in call order, so a vkQueueSubmit costs microseconds
whatever it holds. The jobs run one at a time, in order, under `_running`:
on the thread that next settles (it is about to wait anyway, and running
them costs no thread switch) or on the worker, which is not woken per job
but looks every PULL_MIN_S while it finds work. Whoever runs them owns every
queue's label stack, the emulated GPUs and the trace, and flushes the trace
after each submit.
Submits the shim made in C (vkapi/submits.py) reach the timeline through
`pull`, which every hand-over calls first, under one lock, so C and Python
submits stay in call order; the worker pulls too when it has been idle for a
while. A batch holding workloads whose facts exist only after execution
(indirect sizes, measured shader executions: `at_completion` on Work and
Draw) waits for the driver's completion fence (vkapi/fences.py) first.
`settle()` returns once everything handed over so far is in the trace: the
driver calls it where the application observes completion (fence and idle
waits) and before vkDestroyDevice; it never waits for GPU work the
application has yet to unblock.
Once every job handed over has run, the timeline lets the shim's C place the
submits it can itself, at the submit, until the next job (`_license`,
placed_submits.py): `_put` takes back what C placed before any job runs.
"""
from __future__ import annotations

import atexit
import collections
import itertools
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import timing
from .objects import CommandBuffer, Queue
from tessera.vkapi.ops import Barrier, OpWalker, PassBegin, Recording
from tessera.vkapi.render_passes import PassInfo
from tessera.vkapi.submits import ReadingLedger
from tessera.schemas import slice_args as A

from .counters import CounterModel, StageCost
from .measured_counters import pass_stats
from .placed_submits import SIGNALS_KEPT, PlacedSubmits, entry_shape
from .placement_plans import NativePlacer, Plans
from .replay import ProductOps
from .recording import Draw, Work
from .scheduler import EmulatedGpu, QueueOrder, work_class
from .trace import GpuTrace, boottime_ns


# How long the worker waits for a hand-over before it looks for submits made in C: short while they
# come, doubling up to the longest while none do.
PULL_MIN_S = 0.002
PULL_MAX_S = 0.05
# At the program's exit, the longest wait for GPU work whose facts the driver reads back after execution.
EXIT_WAIT_S = 5.0
# The Workload arg of a render pass (arg names and values: schemas/slice_args.py).
_RENDER_PASS = A.WORKLOAD_CLASSES["render_pass"]


@dataclass
class Batch:
    command_buffers: list[Recording]   # (handle address, op list at submit, or a ProductOps), in order
    waits: list[tuple[int, int]]     # (semaphore, value: a timeline semaphore's, else ignored)
    signals: list[tuple[int, int]]
    serials: list[int] | None = None   # each buffer's recording serial, as the C path's ledger gives it


@dataclass
class SubmitMade:
    """A submit the shim's C path made (read from its ledger): what `Timeline.submit` would take."""
    queue: Queue
    batches: list[Batch]
    host: int           # CLOCK_BOOTTIME when the submit was called
    label: str | None = None   # a queue label begun just before it and ended just after (the layer's s<submitID>)


@dataclass
class LabelMade:
    """A queue label the shim's C path recorded: begin (`name`) or end (None)."""
    queue: Queue
    name: str | None


def batch(command_buffers: list[CommandBuffer], waits: list[int], signals: list[int]) -> Batch:
    """A batch as submitted: each buffer's op list is taken now (a reset gives the buffer a new list)."""
    return Batch([Recording(cb.address, cb.ops) for cb in command_buffers], waits, signals)


@dataclass
class PassRun:
    """One render pass as executed: all its parts and draws."""
    info: PassInfo
    labels: list[str]
    command_buffer: int
    draws: list[Draw] = field(default_factory=list)
    parts: int = 1


class Timeline:
    def __init__(self, profile, session_dir: Path, report: Callable[[str, str], None] | None = None,
                 counters: bool = True) -> None:
        self.profile = profile
        self.session_dir = session_dir
        self._trace: GpuTrace | None = None
        # Mali counters of each GPU event (icd/counters.py), None for a GPU Arm's table lacks
        self._counters = CounterModel.for_profile(profile) if counters else None
        self._report = report or (lambda command, what: None)
        self._gpus: dict[int, tuple[int, EmulatedGpu]] = {}   # id(physical device) -> (gpu_id, gpu)
        self._orders: dict[int, QueueOrder] = {}               # id(queue) -> ordering
        self._semaphores: dict[int, int] = {}                  # binary semaphore -> time of its last signal
        self._timelines: dict[int, list[tuple[int, int]]] = {}  # timeline semaphore -> its last signals'
                                                                # (value, time), at most SIGNALS_KEPT
        self._submissions = 0
        self._render_pass_instances = 0
        self.templates = Templates()   # the phases and args of passes and works placed again
        self.plans = Plans()           # how recordings made again or submitted again are placed
        self.native: NativePlacer | None = None   # placement plans in C (set by the driver; None: in Python)
        self.placed: PlacedSubmits | None = None  # submits placed in C while nothing is queued (set by the driver)
        self._queues: dict[int, Queue] = {}       # id(queue) -> the queue of each of `_orders` (held: ids stay)
        # Hand-over to the worker: jobs numbered in call order; `_done` is the last one finished.
        self._jobs: collections.deque = collections.deque()   # (ticket, fn, args, completion)
        self._running = threading.Lock()   # held by whoever runs jobs: the worker, or a settling thread
        self._wake = threading.Event()
        self._settled_at = float("-inf")   # monotonic time of the last settle: the worker stays back after one
        self._tickets = itertools.count(1)
        self._queued = 0
        self._done = 0
        self._stalled = False       # the worker is waiting for GPU work that has not completed
        self._awaited: tuple[Any, Any] | None = None   # (Fences, fence) the worker waits for
        self._progress = threading.Condition()
        self._waiters = 0           # threads waiting on `_progress` in settle (changed with it held)
        self._worker: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._order = threading.Lock()   # pulling C submits and handing over, as one step
        self._pulling = ReadingLedger()
        self._source: Callable[[], list[SubmitMade | LabelMade]] | None = None

    @property
    def trace(self) -> GpuTrace:
        if self._trace is None:
            self._trace = GpuTrace(self.session_dir, counters=self._counters, gpu=self.profile.description)
        return self._trace

    # ---- the application's threads: hand over, in call order ---------------------------------
    def take_submits_from(self, source: Callable[[], list[SubmitMade | LabelMade]]) -> None:
        """`source()`: what the shim's C path recorded since the last call, in call order."""
        self._source = source

    def pull(self) -> None:
        """Hand over the submits made in C so far (before a command buffer they hold is reset; a thread
        handing them over already does not)."""
        if self._pulling.on:
            return
        with self._order:
            self._pull()

    def _pull(self) -> None:
        """(`_order` held) Take the source's submits: while it reads them it runs deferred begin hooks,
        whose own pull is skipped."""
        if self._source is not None:
            pulling = self._pulling
            pulling.on = True
            try:
                made_in_c = self._source()
            finally:
                pulling.on = False
            for made in made_in_c:
                if isinstance(made, LabelMade):
                    self._put(_queue_label, (made.queue, made.name))
                elif made.label is not None:
                    self._put(self._place_labelled, (made.queue, made.label, made.batches, made.host))
                else:
                    self._put(self._place_submit, (made.queue, made.batches, made.host, None))

    def submit(self, queue: Queue, batches: list[Batch], completion: tuple[Any, Any] | None = None) -> None:
        """`completion`: (vkapi.fences.Fences, fence) signalled once the batches' GPU work completed."""
        self._hand_over(self._place_submit, (queue, batches, boottime_ns(), completion), completion)

    def queue_label(self, queue: Queue, name: str | None) -> None:
        """vkQueueBeginDebugUtilsLabelEXT (`name`) or vkQueueEndDebugUtilsLabelEXT (None)."""
        self._hand_over(_queue_label, (queue, name))

    def timeline_semaphore(self, semaphore: int, initial_value: int = 0) -> None:
        """vkCreateSemaphore made a timeline semaphore: a wait for a value waits for the signal that reached it
        (its initial value counts as signalled before anything ran)."""
        self._hand_over(self._timelines.__setitem__, (semaphore, [(initial_value, 0)]))

    def forget_semaphore(self, semaphore: int) -> None:
        self._hand_over(_forget, (self, semaphore))

    def forget_queues(self, device) -> None:
        """vkDestroyDevice: its queues' handles may name other queues from now on."""
        self._hand_over(_forget_queues, (self, device))

    def place_ready(self) -> None:
        """Run the jobs handed over so far on this thread, up to the first that waits for its GPU work to
        complete, unless another thread is running jobs; never waits. Before the backend's fence, semaphore
        and idle waits: the submits are placed while the backend runs them, and the settle after the wait
        finds little left to do."""
        self.pull()
        if self._done < self._queued and self._running.acquire(blocking=False):
            try:
                self._drain(self._queued, helping=True)
            finally:
                self._running.release()
        self._license()

    def settle(self, block: bool = False, timeout_s: float | None = None) -> bool:
        """Return once every job handed over so far has run; or (unless `block`) once the worker
        waits for GPU work that has not completed (the application may be about to unblock it); or
        once `timeout_s` has passed. True when everything handed over has run. The calling thread
        runs the jobs itself when the worker is not running one and their GPU work has completed:
        a thread that waits anyway does the work at no thread switch."""
        self._settled_at = time.monotonic()
        self.pull()
        target = self._queued
        if self._done >= target:
            self._license()
            return True
        if self._running.acquire(blocking=False):
            try:
                self._drain(target, helping=True)
            finally:
                self._running.release()
            if self._done >= target:
                self._license()
                return True
            self._wake.set()   # what is left waits for GPU work: the worker takes it
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._progress:
            self._waiters += 1   # before `_done` is read: a job finished after that read notifies
            try:
                while self._done < target:
                    if not block and self._stalled and not self._awaited_completed():
                        return False
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return False
                    self._progress.wait(left)
            finally:
                self._waiters -= 1
        return True

    def _awaited_completed(self) -> bool:
        """(`_progress` held) The completion fence the stalled worker waits for has signalled: it is
        about to go on, so a settle waits for it. Where the application observes completion (a
        fence or idle wait) this is what makes that submit's events reach the trace before the call
        returns, whatever the application does next (os._exit, SIGKILL)."""
        return self._awaited is not None and self._awaited[0].signaled(self._awaited[1])

    def at_exit(self) -> None:
        """The process exits (Python's atexit, which the shims also run at a C program's exit): place
        every submit, waiting up to EXIT_WAIT_S for GPU work the driver must read back first."""
        if not self.settle(block=True, timeout_s=EXIT_WAIT_S):   # not an exception: one line, always shown
            sys.stderr.write(f"tessera: GPU work not completed {EXIT_WAIT_S:g} s after the program's exit: its "
                             "submit and the later ones are not in the GPU trace\n")

    def _hand_over(self, fn: Callable, args: tuple, completion: tuple[Any, Any] | None = None) -> None:
        with self._order:
            if self.placed is not None and self.placed.granted:   # C writes the queue labels it kept to the
                self.placed.revoke(self)                           # ledger: pulled before this job
            self._pull()
            self._put(fn, args, completion)

    def _put(self, fn: Callable, args: tuple, completion: tuple[Any, Any] | None = None) -> None:
        """(`_order` held) Queue job `fn(*args)`; `completion`: the (Fences, fence) a settling thread does not
        wait for. What C placed under a licence is taken back first."""
        if self.placed is not None and self.placed.granted:
            self.placed.revoke(self)
        if self._worker is None:
            self.start()
        ticket = next(self._tickets)
        self._jobs.append((ticket, fn, args, completion))
        self._queued = ticket

    def start(self) -> None:
        """Start the worker (once): before the first submit that may be made in C."""
        with self._start_lock:
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name="tessera-timeline", daemon=True)
                self._worker.start()
                atexit.register(self.at_exit)   # a program's last submits reach the trace

    # ---- the worker ---------------------------------------------------------------------------
    def _run(self) -> None:
        """Not woken per hand-over (a thread switch per submit costs more than placing it): every
        PULL_MIN_S while it finds work, backing off to PULL_MAX_S while none comes or while the
        application's waits settle (they place their submits themselves: the worker taking one they
        are about to settle would only make them wait for it)."""
        idle_s = PULL_MIN_S
        while True:
            woken = self._wake.wait(idle_s)
            self._wake.clear()
            if not woken and time.monotonic() - self._settled_at < PULL_MAX_S:
                idle_s = min(idle_s * 2, PULL_MAX_S)
                continue
            self.pull()
            ran = False
            if self._jobs:
                with self._running:
                    ran = self._drain(None, helping=False)
                self._license()
            idle_s = PULL_MIN_S if ran else min(idle_s * 2, PULL_MAX_S)

    def _license(self) -> None:
        """Once every job handed over has run: let the driver's C place submits until the next job
        (icd/placed_submits.py)."""
        placed = self.placed
        if placed is None or placed.granted or not placed.enabled or self._done < self._queued:
            return
        with self._order:
            if self._done == self._queued and not placed.granted:
                placed.grant(self)

    def _drain(self, target: int | None, helping: bool) -> bool:
        """(`_running` held) Run the queued jobs in order, up to `target`; a settling thread stops
        before a submit whose GPU work has not completed. True when a job ran."""
        jobs, ran = self._jobs, False
        while jobs:
            ticket, fn, args, completion = jobs[0]
            if target is not None and ticket > target:
                break
            if helping and completion is not None and not completion[0].signaled(completion[1]):
                break
            jobs.popleft()
            ran = True
            try:
                fn(*args)
            except Exception:   # one bad job costs that job's events only
                self._report("vkQueueSubmit", "placing a submit on the emulated timeline")
            self._done, self._stalled = ticket, False
            if self._waiters:   # a thread runs its own settle's jobs mostly: nobody to wake
                with self._progress:
                    self._progress.notify_all()
        return ran

    def _waiting_for_gpu(self) -> None:
        with self._progress:
            self._stalled = True
            self._progress.notify_all()

    def _place_submit(self, queue: Queue, batches: list[Batch], host: int, completion) -> None:
        if completion is not None:
            fences, fence = completion
            with self._progress:
                self._awaited = completion
            signaled = fences.wait(fence, self._waiting_for_gpu)
            with self._progress:   # before the fence is reset: a settle may be asking for its status
                # No longer waiting for the GPU: a settle must wait for this submit's events now, not
                # take "stalled without an awaited fence" for work the application has yet to unblock.
                self._awaited, self._stalled = None, False
            fences.give_back(fence, signaled)
        self._submissions += 1
        gpu_id, gpu = self._gpus.get(id(queue.device.physical)) or \
            self._gpus.setdefault(id(queue.device.physical), (len(self._gpus), EmulatedGpu()))
        order = self._orders.get(id(queue))
        if order is None:
            order = self._orders[id(queue)] = QueueOrder()
            self._queues[id(queue)] = queue
        checking = self.placed is not None and self.placed.check
        mark = self.trace.mark() if checking else 0
        for b in batches:
            earliest = host
            for s, value in b.waits:
                earliest = max(earliest, self._signalled_at(s, value))
            end = _Placer(self, queue, gpu_id, gpu, order, earliest).run(b.command_buffers, b.serials)
            for s, value in b.signals:
                self._signal(s, value, max(end, earliest))
        if checking:   # TESSERA_C_PLACEMENT=check: what C made of this submit, if it placed it
            self.placed.compare(self, queue, gpu, order, self.trace.since(mark))
        self.trace.flush()


    def _signalled_at(self, semaphore: int, value: int) -> int:
        """When a wait for `semaphore` (`value`, for a timeline semaphore) is satisfied on the emulated GPU: the
        end of the last signal of a binary semaphore; for a timeline semaphore, the earliest end among the signals
        placed so far that reach `value` (spec: it waits until the value is at least `value`), or 0 when none
        does (a host signal, or a signal submitted later: nothing placed delays it)."""
        signals = self._timelines.get(semaphore)
        if signals is None:
            return self._semaphores.get(semaphore, 0)
        return min([t for v, t in signals if v >= value], default=0)

    def _signal(self, semaphore: int, value: int, time_ns: int) -> None:
        signals = self._timelines.get(semaphore)
        if signals is None:
            self._semaphores[semaphore] = time_ns
            return
        signals.append((value, time_ns))
        if len(signals) > SIGNALS_KEPT:
            del signals[0]

    def _place_labelled(self, queue: Queue, label: str, batches: list[Batch], host: int) -> None:
        """A submit made in C inside a queue label of its own: the label's begin, the submit and the label's end
        as one job (a buffer submitted again gets the layer's s<submitID> around it every frame)."""
        queue.labels.append(label)
        try:
            self._place_submit(queue, batches, host, None)
        finally:
            _queue_label(queue, None)


def _forget(tl: Timeline, semaphore: int) -> None:
    """vkDestroySemaphore: its handle may name another semaphore from now on."""
    tl._semaphores.pop(semaphore, None)
    tl._timelines.pop(semaphore, None)


def _forget_queues(tl: Timeline, device) -> None:
    for key in [key for key, queue in tl._queues.items() if queue.device is device]:
        del tl._queues[key], tl._orders[key]


def _queue_label(queue: Queue, name: str | None) -> None:
    if name is not None:
        queue.labels.append(name)
    elif queue.labels:   # a pop without a push is tolerated
        queue.labels.pop()


class _Placer(OpWalker):
    """Walks one batch (vkapi/ops.py's walker keeps the queue's labels and the passes suspended and
    resumed): places and writes each phase of its passes and work."""

    def __init__(self, tl: Timeline, queue: Queue, gpu_id: int, gpu: EmulatedGpu, order: QueueOrder,
                 earliest: int) -> None:
        super().__init__(queue.labels)
        self.tl, self.queue, self.gpu_id, self.gpu, self.order = tl, queue, gpu_id, gpu, order
        self.earliest = earliest
        self.end = earliest

    def run(self, command_buffers: list[Recording], serials: list[int] | None = None) -> int:
        """`serials`: each recording's serial (a submit the C path made), so that C may place it again
        (placed_submits.py)."""
        plans = self.tl.plans
        planned = []   # a stretch of recordings placed from their plans, together
        entry = None   # the queue's labels as the stretch's next recording finds them
        kept = []      # (plan, address, kept entry, entry shape) of products kept in C (attach)
        own = []       # (plan, address, serial, entry shape) of recordings whose plans hold their tags
        for i, recording in enumerate(command_buffers):
            if self.current is None and self.suspended is None:
                if entry is None:
                    entry = tuple(self.labels)
                plan, tags = plans.of(self, recording.ops, entry)
                if plan is not None:
                    planned.append((plan, recording.address, entry, tags))
                    shape = entry_shape(entry)   # None: C does not place after these labels
                    if shape is not None and type(recording.ops) is ProductOps and recording.ops.kept is not None:
                        kept.append((plan, recording.address, recording.ops.kept, shape))
                    if shape is not None and not tags and serials:
                        own.append((plan, recording.address, serials[i], shape))
                    if not plan.keeps_entry:
                        self.labels[:] = entry = plan.labels_after(entry, tags)
                    continue
            entry = None
            if planned:
                self._place(planned)
                planned = []
            if type(recording.ops) is ProductOps:   # read without its hooks (icd/submit.py): its list made now
                recording = Recording(recording.address, recording.ops.made())
            self.walk(recording)
        if planned:
            self._place(planned)
        placed = self.tl.placed
        if placed is not None:
            for plan, address, entry, shape in kept:
                placed.attach(plan, self.gpu_id, address, entry, shape)
            for plan, address, serial, shape in own:
                placed.attach_recording(plan, self.gpu_id, address, serial, shape)
        if self.suspended is not None:   # suspended and never resumed in this batch: it ends here
            self._emit_pass(self.suspended)
            self.suspended = None
        return self.end

    def _place(self, planned: list) -> None:
        """Place recordings from their plans ((plan, address, the queue's labels on entry, the recording's
        tags), in order): in C where the driver shim is loaded (NativePlacer), else in Python."""
        native = self.tl.native
        if native is not None:
            native.place_all(self, planned)
        else:
            for plan, address, entry, tags in planned:
                plan.place(self, address, entry, tags)
        self.tl.plans.placed += len(planned)

    def opened(self, op: PassBegin, recording: Recording) -> PassRun:
        return PassRun(op.info, list(self.labels), recording.address)

    def resumed(self, run: PassRun, op: PassBegin) -> None:
        run.parts += 1

    def closed(self, run: PassRun) -> None:
        self._emit_pass(run)

    def other(self, op, kind: type, recording: Recording) -> None:
        if kind is Draw:
            if op.at_completion is not None:
                op.at_completion()
            if self.current is not None:
                self.current.draws.append(op)
        elif kind is Work:
            if op.at_completion is not None:
                op.at_completion()
            self._emit_work(op, list(self.labels), recording.address)
        elif kind is Barrier:
            self.order.barrier(*op.scope) if op.scope else self.order.barrier()

    def _start_floor(self, cls: str) -> int:
        return max(self.earliest, self.order.floor(cls))

    def _placed(self, cls: str, start: int, duration: int) -> None:
        self.order.placed(cls, start + duration)
        self.end = max(self.end, start + duration)

    def _emit_pass(self, run: PassRun) -> None:
        t = self.tl.templates.of_pass(run, self._pass_template)
        self.tl._render_pass_instances += 1
        rp = (run.info.handle, self.tl._render_pass_instances)
        b_start = self.gpu.place(t.binning, self._start_floor("vertex"))
        self._write(b_start, t.binning, run, rp, t.binning_args)
        self._placed("vertex", b_start, t.binning.duration_ns)
        m_start = self.gpu.place(t.main, max(self._start_floor("fragment"), b_start + t.binning.duration_ns))
        self._write(m_start, t.main, run, rp, t.main_args)
        self._placed("fragment", m_start, t.main.duration_ns)

    def _pass_template(self, run: PassRun) -> "_Template":
        """What a render pass's two events are made of apart from where they land (Templates)."""
        info = run.info
        vertices = sum(d.vertices for d in run.draws)
        primitives = sum(d.primitives for d in run.draws)
        draws = sum(d.count for d in run.draws)
        v_cycles = _mean([(d.vertex_cycles, d.count) for d in run.draws])
        f_cycles = _mean([(d.fragment_cycles, d.count) for d in run.draws])
        binning, main = timing.render_pass(
            self.tl.profile, width=info.width, height=info.height, layers=info.layers, draws=draws,
            vertices=vertices, primitives=primitives, load_bytes=info.load_bytes, store_bytes=info.store_bytes,
            vertex_cycles=v_cycles, fragment_cycles=f_cycles)
        extra = {A.WORKLOAD.label: _RENDER_PASS, A.AREA.label: f"{info.width}x{info.height}", A.DRAWS.label: draws,
                 A.VERTICES.label: vertices, A.SUBPASSES.label: info.subpasses, A.COMMAND.label: info.command}
        if run.parts > 1:
            extra[A.PARTS.label] = run.parts
        if any(d.estimated for d in run.draws):
            extra[A.ESTIMATED.label] = A.INDIRECT_DRAW_SIZES
        if v_cycles is not None:     # what the advisor costs extra vertex or fragment invocations with (#28)
            extra[A.VERTEX_CYCLES.label] = round(v_cycles, 6)
        if f_cycles is not None:
            extra[A.FRAGMENT_CYCLES.label] = round(f_cycles, 6)
        cm = self.tl._counters
        measured = pass_stats(run.draws)   # the backend's pipeline statistics (TESSERA_COUNTERS=measured)
        # a draw whose size stays unknown (mesh tasks: input assembly counts nothing) leaves the geometry modelled
        geometry = not any(d.estimated for d in run.draws)
        if measured is not None and cm is not None:
            extra[A.MEASURED.label] = cm.measured_names(measured, geometry)
        b_counters, m_counters = (cm.render_pass(info, draws, vertices, primitives, binning, main, measured, geometry,
                                                 cm.shaders(run.draws))
                                  if cm is not None else (None, None))
        trace = self.tl.trace
        return _Template(binning, trace.args(binning.stage, extra, b_counters), main,
                         trace.args(main.stage, extra, m_counters))

    def _emit_work(self, work: Work, labels: list[str], handle: int) -> None:
        t = self.tl.templates.of_work(work, self._work_template)
        phase = t.binning
        cls = work_class(work.kind)
        start = self.gpu.place(phase, self._start_floor(cls))
        self.tl.trace.event(start_ns=start, duration_ns=phase.duration_ns, queue=phase.queue, stage=phase.stage,
                            gpu_id=self.gpu_id, submission_id=self.tl._submissions, command_buffer=handle,
                            labels=labels, args=t.binning_args)
        self._placed(cls, start, phase.duration_ns)

    def _work_template(self, work: Work) -> "_Template":
        """What a dispatch's, trace rays', build's or transfer's event is made of apart from where it lands."""
        p = self.tl.profile
        if work.kind == "dispatch":
            phase = timing.dispatch(p, work.invocations, work.cycles)
        elif work.kind == "trace_rays":
            phase = timing.trace_rays(p, work.invocations, work.cycles)
        elif work.kind == "data_graph":   # icd/data_graph/: `cycles` holds the operators' modelled ns
            phase = timing.data_graph(p, work.stage, work.cycles or 0.0)
        elif work.kind == "acceleration_structure_build":
            phase = timing.accel_build(p, work.stage, work.primitives, work.instances)
        elif work.kind == "acceleration_structure_copy":
            phase = timing.accel_copy(p, work.stage, work.nbytes)
        else:
            phase = timing.transfer(p, work.stage, work.nbytes)
        # names from the table (schemas/slice_args.py); a kind or Work.info key it lacks is written as it is
        label = A.DRIVER_LABELS.get
        extra = {A.WORKLOAD.label: A.WORKLOAD_CLASSES.get(work.kind, work.kind), A.COMMAND.label: work.command,
                 **{label(k, k): v for k, v in work.info.items()}}
        if work.kind in ("dispatch", "trace_rays"):
            extra[A.ITEMS.label] = work.invocations if not work.estimated else -1
        if work.estimated:
            extra[A.ESTIMATED.label] = (A.MAXIMUM_PRIMITIVE_COUNTS if work.kind == "acceleration_structure_build"
                                        else A.INDIRECT_SIZES)
        cm = self.tl._counters
        if work.measured is not None and cm is not None:
            extra[A.MEASURED.label] = cm.measured_work
        return _Template(phase, self.tl.trace.args(phase.stage, extra,
                                                   cm.work(work, phase.duration_ns) if cm is not None else None))

    def _write(self, start: int, phase: timing.Phase, run: PassRun, rp: tuple[int, int], args: bytes) -> None:
        self.tl.trace.event(start_ns=start, duration_ns=phase.duration_ns, queue=phase.queue, stage=phase.stage,
                            gpu_id=self.gpu_id, submission_id=self.tl._submissions, command_buffer=run.command_buffer,
                            labels=run.labels, args=args, render_pass=rp)


@dataclass(frozen=True)
class _Template:
    """A pass's phases (binning, main) or a work's one phase (`binning`), with their events' encoded args."""
    binning: timing.Phase
    binning_args: bytes
    main: timing.Phase | None = None
    main_args: bytes = b""


class Templates:
    """The templates of the passes and works of recordings placed again: a recording reused (vkapi/replay.py)
    keeps its ops, so the same PassInfo, Draws and Works come back each frame and their phases, args and
    counters (pure functions of them and the profile) are made once. Keyed by the ops' identities; an
    entry holds its ops, so no identity is reused while it lives. A work whose sizes were read after it ran
    (`at_completion`: an indirect dispatch, a new Work each frame) is keyed by its fields, final once placed
    (`_work_value`); a pass with such draws, and anything with measured statistics, is made each time. Bounded:
    cleared at CACHE entries. Used by the timeline's one placing thread at a time."""
    CACHE = 4096

    def __init__(self) -> None:
        self._made: dict[tuple, tuple] = {}

    def _get(self, key: tuple, keep: tuple, make: Callable[[Any], _Template], op) -> _Template:
        hit = self._made.get(key)
        if hit is None:
            if len(self._made) >= self.CACHE:
                self._made.clear()
            hit = self._made[key] = (make(op), keep)
        return hit[0]

    def of_pass(self, run: PassRun, make: Callable[[PassRun], _Template]) -> _Template:
        draws = run.draws
        if any(d.at_completion is not None or d.measured is not None for d in draws):
            return make(run)
        return self._get((id(run.info), run.parts, *map(id, draws)), (run.info, tuple(draws)), make, run)

    def of_work(self, work: Work, make: Callable[[Work], _Template]) -> _Template:
        if work.measured is not None:
            return make(work)
        if work.at_completion is not None:   # its sizes read at completion (now): kept by what it is
            try:
                return self._get(_work_value(work), (), make, work)
            except TypeError:   # an info value that cannot be a key
                return make(work)
        return self._get((id(work),), (work,), make, work)


def _work_value(work: Work) -> tuple:
    """What a Work's template is made of (Placer._work_template reads nothing else of it), as a key."""
    cycles = work.cycles
    return ("value", work.kind, work.stage, work.command,
            tuple([(k, tuple(v) if type(v) is list else v) for k, v in work.info.items()]), work.invocations,
            (float(cycles), cycles.ops, cycles.pipe_cycles) if type(cycles) is StageCost else cycles, work.nbytes,
            work.estimated, work.primitives, work.instances)


def _mean(weighted: list[tuple[float | None, int]]) -> float | None:
    """Mean of the known values, each counted `weight` times (a Draw stands for `count` draws)."""
    known = [(v, w) for v, w in weighted if v is not None]
    total = sum(w for _, w in known)
    return sum(v * w for v, w in known) / total if total else None
