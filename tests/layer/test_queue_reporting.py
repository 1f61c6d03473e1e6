"""The layer's queue state across submits (layer/queues.py QueueReporter): no Vulkan, no shim.

Queues and command buffers are trackers, handles are plain ints, and every collaborator is a
stand-in that records what it is asked: the transport's send (its frames decoded with
tessera.schemas.frames), the labeller, the capturer, the C path's ledger and recorder. Each
case states by hand what the layer must report (SUBMIT, ANNEX and FRAME messages, labels,
which submits take the Python path).
"""
from __future__ import annotations

from tessera.layer.queues import QueueReporter
from tessera.layer.state import DeviceState, Session
from tessera.layer.trackers import Capture, CommandBufferTracker, PassPart, QueueTracker, Workload
from tessera.schemas.frames import FrameDecoder, MessageType
from tessera.vkapi.ops import LABEL_END, PASS_END, PASS_SUSPEND, Execute, LabelBegin, PassBegin
from tessera.vkapi.submits import Submission
from tessera.vkapi.vkconst import vk

DEVICE, QUEUE = 0xD0, 0x40
PRIMARY, SECONDARY = vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, vk.VK_COMMAND_BUFFER_LEVEL_SECONDARY


class Transport:
    """Keeps what the layer sends; `messages()` encodes and decodes it as the sender would."""

    def __init__(self) -> None:
        self.sent: list = []
        self.before_flush: list = []

    def send(self, frame, *args) -> None:
        self.sent.append(frame if isinstance(frame, bytes) else (frame, args))

    def messages(self) -> list[tuple[str, int | None, int, dict]]:
        data = b"".join(f if isinstance(f, bytes) else f[0](*f[1]) for f in self.sent)
        return [(MessageType(f.type).name, f.sequence, f.tag, f.payload()) for f in FrameDecoder().feed(data)]


class Calls:
    """Any method call is recorded as (name, *args); `answers` gives return values by name."""

    def __init__(self, **answers) -> None:
        self.calls: list[tuple] = []
        self.answers = answers

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)

        def call(*args, **keywords):
            self.calls.append((name, *args, *keywords.values()))
            answer = self.answers.get(name)
            return answer(*args) if callable(answer) else answer
        return call

    def named(self, name: str) -> list[tuple]:
        return [c[1:] for c in self.calls if c[0] == name]


class Ledger:
    def __init__(self) -> None:
        self.pending: list = []
        self.reasons: list[bool] = []
        self.made_in_python = 0
        self.reads = 0

    def take(self) -> list:
        taken, self.pending = self.pending, []
        return taken

    def read(self) -> None:   # every submit taken is read (vkapi/lifecycle.py)
        self.reads += 1

    def python_reason(self, on: bool) -> None:
        self.reasons.append(on)


class Clock:
    def __init__(self, *times: int) -> None:
        self.times = list(times)

    def __call__(self) -> int:
        return self.times.pop(0)


def buffer(address: int, *ops, level: int = PRIMARY) -> CommandBufferTracker:
    return CommandBufferTracker(handle=address + 1, address=address, level=level, pool=1, ops=list(ops))


def work(tag: int, labels: tuple[str, ...] = (), capture: Capture | None = None):
    return Workload(tag, labels, 0, capture)


def part(p: PassPart) -> list:
    """A render pass part as the layer records it when the part ends (render_passes.py)."""
    return [PassBegin(p, p.resumes), PASS_SUSPEND if p.suspends else PASS_END]


class Rig:
    """One device with one queue, and a QueueReporter on stand-ins."""

    def __init__(self, *buffers: CommandBufferTracker, ledger: Ledger | None = None, instrumenter=None,
                 c_submits: bool = True, returned: tuple[int, ...] = ()) -> None:
        self.transport = Transport()
        self.session = Session(self.transport)
        self.dev = DeviceState(handle=DEVICE, address=DEVICE, next=None, next_gdpa=None, instance=None,
                               physical=None, enabled_extensions=frozenset())
        self.q = self.dev.queues[QUEUE] = QueueTracker(handle=QUEUE, name="queue 0.0")
        self.dev.command_buffers.update({t.address: t for t in buffers})
        self.labeller = Calls(queue_push=True)
        self.capturer = Calls()
        self.errors = Calls()
        # no recording reads without its hooks here (vkapi/lifecycle.py): each is waited for
        self.recorder = Calls(reading_all=lambda owner, addresses: [None] * len(addresses))
        self.ledger = ledger
        self.forwarded: list[int] = []
        self.reporter = QueueReporter(self.session, self.transport.send, self.queue_at, self.labeller,
                                      self.capturer, self.errors, instrumenter, ledger, self.recorder, c_submits,
                                      clock=Clock(*returned))

    def queue_at(self, address: int):
        if address not in self.dev.queues:
            raise KeyError(address)
        return self.dev, address

    def submit(self, *batches: list[int], frame_ends=(), called_ns: int = 1000, result=vk.VK_SUCCESS):
        def forward():
            self.forwarded.append(len(self.forwarded))
            return result
        return self.reporter.submit(self.dev, self.q, QUEUE, called_ns, lambda: [list(b) for b in batches],
                                    lambda: list(frame_ends), forward)

    def messages(self):
        return self.transport.messages()


def submit_payload(submit_id, buffers, tags, frame=0, annexed=False, time_ns=1000, duration_ns=0):
    return ("SUBMIT", submit_id, 0, {
        "device": "0xd0", "queue": "queue 0.0", "time_ns": time_ns, "duration_ns": duration_ns,
        "command_buffers": [hex(b) for b in buffers], "tags": tags, "frame": frame, "annexed": annexed})


def test_a_plain_submit_sends_one_submit_message_and_is_not_wrapped():
    rig = Rig(buffer(0x10, work(1), work(2)), returned=(1250,))
    assert rig.submit([0x10]) == vk.VK_SUCCESS
    assert rig.forwarded == [0]
    assert rig.messages() == [submit_payload(1, [0x10], [1, 2], time_ns=1000, duration_ns=250)]
    assert rig.labeller.calls == [] and rig.errors.calls == []
    assert rig.capturer.named("before_submit") == [(rig.dev, [rig.dev.command_buffers[0x10]])]
    assert rig.capturer.named("after_submit") == []


def test_a_buffer_submitted_again_is_wrapped_in_its_submit_label():
    rig = Rig(buffer(0x10, work(1)), returned=(1100, 1300))
    rig.submit([0x10])
    rig.submit([0x10], called_ns=1200)
    assert rig.labeller.calls == [("queue_push", rig.dev, QUEUE, "s2"), ("queue_pop", rig.dev, QUEUE)]
    assert rig.messages() == [submit_payload(1, [0x10], [1], duration_ns=100),
                              submit_payload(2, [0x10], [1], annexed=True, time_ns=1200, duration_ns=100)]


def test_queue_label_stack_carries_across_submits_and_annexes_what_it_changes():
    opens = buffer(0x10, LabelBegin("frame"), work(1, labels=("frame",)))
    inside = buffer(0x20, work(2), LabelBegin("pass"), work(3, labels=("pass",)))
    closes = buffer(0x30, LABEL_END, work(4), LABEL_END, work(5))
    rig = Rig(opens, inside, closes, returned=(1000, 1000, 1000))
    rig.submit([0x10])
    assert rig.q.labels == ["frame"]
    rig.submit([0x20])
    assert rig.q.labels == ["frame", "pass"]
    rig.submit([0x30])
    assert rig.q.labels == []
    assert rig.messages() == [
        submit_payload(1, [0x10], [1]),                  # t1's own labels were the whole stack
        submit_payload(2, [0x20], [2, 3], annexed=True),
        ("ANNEX", 2, 2, {"labels": ["frame"]}),
        ("ANNEX", 2, 3, {"labels": ["frame", "pass"]}),
        submit_payload(3, [0x30], [4, 5], annexed=True),
        ("ANNEX", 3, 4, {"labels": ["frame"]}),          # t5 runs outside any label: as its WORKLOAD said
    ]
    assert [name for _, _, name in rig.labeller.named("queue_push")] == ["s2", "s3"]


def test_labels_and_open_passes_put_submits_on_the_python_path_while_they_last():
    ledger = Ledger()
    begin = buffer(0x10, LabelBegin("outer"), work(1, labels=("outer",)))
    end = buffer(0x20, LABEL_END, work(2))
    suspend = buffer(0x30, *part(PassPart(Workload(3, (), 0), draws=2, suspends=True)))
    resume = buffer(0x40, *part(PassPart(None, draws=1, resumes=True)))
    rig = Rig(begin, end, suspend, resume, ledger=ledger, returned=(0,) * 4)
    rig.submit([0x10])
    assert rig.q.python_submits and ledger.reasons == [True]
    rig.submit([0x20])
    assert not rig.q.python_submits and ledger.reasons == [True, False]
    rig.submit([0x30])
    assert rig.q.python_submits and ledger.reasons == [True, False, True]
    rig.submit([0x40])
    assert not rig.q.python_submits and ledger.reasons == [True, False, True, False]
    assert ledger.made_in_python == 4
    assert rig.recorder.named("count_submit") == [(0x11,), (0x21,), (0x31,), (0x41,)]
    assert ("ANNEX", 4, 3, {"draw_call_count": 3, "parts": 2}) in rig.messages()


def test_note_queue_tells_the_ledger_only_of_changes_and_nothing_without_one():
    ledger = Ledger()
    rig = Rig(ledger=ledger)
    rig.q.labels.append("app")
    rig.reporter.note_queue(rig.q)
    rig.reporter.note_queue(rig.q)
    rig.q.labels.clear()
    rig.reporter.note_queue(rig.q)
    assert ledger.reasons == [True, False]
    bare = Rig()
    bare.q.labels.append("app")
    bare.reporter.note_queue(bare.q)
    assert bare.q.python_submits is False


def test_end_recording_lets_only_plain_buffers_with_balanced_labels_take_the_c_path():
    plain = buffer(0x10, work(1), *part(PassPart(Workload(2, (), 0), draws=1)))
    labelled = buffer(0x20, LabelBegin("a"), work(3, labels=("a",)), LABEL_END)
    secondary = buffer(0x30, work(4), level=SECONDARY)
    open_label = buffer(0x40, LabelBegin("still open"), work(5, labels=("still open",)))
    captured = buffer(0x50, work(6, capture=Capture(0, 12, "dispatch", 1, tag=7)))
    executing = buffer(0x60, Execute([secondary]))   # its hook holds the secondary's tracker: planned at submit
    rig = Rig(plain, labelled, secondary, open_label, captured, executing, ledger=Ledger())
    for t in (plain, labelled, secondary, open_label, captured, executing):
        rig.reporter.end_recording(rig.dev, t.address, t.handle)
    # a balanced label keeps the C path: each workload's stack at submit is its own local labels; a plain
    # secondary lets a primary executing it in a record C made take it (runtime/lifecycle.c tessera_execute_in_c)
    assert rig.recorder.named("set_submit_ok") == [(0x11, True), (0x21, True), (0x31, True), (0x41, False),
                                                   (0x51, False), (0x61, False)]
    for ledger, c_submits in ((None, True), (Ledger(), False)):
        off = Rig(plain, ledger=ledger, c_submits=c_submits)
        off.reporter.end_recording(off.dev, 0x10, 0x11)
        assert off.recorder.calls == []
    instrumented = Rig(plain, ledger=Ledger(), instrumenter=Calls(readers=[]))
    instrumented.reporter.end_recording(instrumented.dev, 0x10, 0x11)
    assert instrumented.recorder.named("set_submit_ok") == [(0x11, False)]


def test_submits_made_in_c_are_reported_in_order_before_a_python_submit():
    ledger = Ledger()
    plain = buffer(0x10, work(1))
    labelled = buffer(0x20, LabelBegin("x"), work(2, labels=("x",)), LABEL_END)
    rig = Rig(plain, labelled, ledger=ledger, returned=(2000,))
    rig.session.frame = 3   # the C submits were made in frame 2: each says so
    ledger.pending = [Submission(QUEUE, 100, 130, 0, 5, 2, False, [([0x10], [], [])]),
                      Submission(QUEUE, 200, 260, 0, 6, 2, True, [([0x10], [], [])])]
    rig.session.next_submit = iter([7]).__next__
    rig.submit([0x20], called_ns=1500)
    assert rig.messages() == [submit_payload(5, [0x10], [1], frame=2, time_ns=100, duration_ns=30),
                              submit_payload(6, [0x10], [1], frame=2, annexed=True, time_ns=200, duration_ns=60),
                              submit_payload(7, [0x20], [2], frame=3, time_ns=1500, duration_ns=500)]
    assert rig.recorder.named("wait") == [(0x10, True), (0x10, True)]   # reading the ledger (vkapi/lifecycle.py)
    assert ledger.reads == 1
    assert plain.submits == 2 and labelled.submits == 1
    assert ledger.pending == [] and ledger.made_in_python == 1


def test_a_c_submit_on_an_unknown_queue_is_reported_as_an_error_and_the_rest_still_go():
    ledger = Ledger()
    rig = Rig(buffer(0x10, work(1)), ledger=ledger)
    ledger.pending = [Submission(0x99, 1, 2, 0, 1, 0, False, [([0x10], [], [])]),
                      Submission(QUEUE, 3, 5, 0, 2, 0, False, [([0x10], [], [])])]
    rig.reporter.pull()
    assert rig.errors.calls == [("report", "vkQueueSubmit", "reporting a submit made in C")]
    assert rig.messages() == [submit_payload(2, [0x10], [1], time_ns=3, duration_ns=2)]


def test_frames_end_at_present_numbered_by_the_session_or_by_a_frame_boundary():
    ledger = Ledger()
    rig = Rig(buffer(0x10, work(1)), ledger=ledger, returned=(1000,))
    rig.reporter.present(rig.dev, QUEUE, lambda: [])
    rig.reporter.present(rig.dev, QUEUE, lambda: [])
    assert rig.session.frame == 2
    rig.reporter.present(rig.dev, QUEUE, lambda: [10, 12])     # the first boundary names the frame
    assert rig.session.frame == 11
    ledger.pending = [Submission(QUEUE, 50, 60, 0, 4, 11, False, [([0x10], [], [])])]
    rig.reporter.present(rig.dev, QUEUE, lambda: [])            # C's submit is reported before the frame ends
    frames = [(kind, seq, body.get("frame"), body.get("source")) for kind, seq, _, body in rig.messages()]
    assert frames == [("FRAME", None, 0, "present"), ("FRAME", None, 1, "present"),
                      ("FRAME", None, 10, "present"), ("SUBMIT", 4, 11, None), ("FRAME", None, 11, "present")]
    assert rig.session.frame == 12
    assert all(body["device"] == "0xd0" and body["queue"] == "queue 0.0" for _, _, _, body in rig.messages())
    assert rig.capturer.named("poll") == [(rig.dev,)] * 4


def test_a_present_on_a_queue_the_layer_does_not_know_ends_no_frame_but_still_pulls():
    ledger = Ledger()
    rig = Rig(buffer(0x10, work(1)), ledger=ledger)
    ledger.pending = [Submission(QUEUE, 1, 2, 0, 1, 0, False, [([0x10], [], [])])]
    asked = []
    rig.reporter.present(rig.dev, 0x77, lambda: asked.append(1) or [])
    assert [m[0] for m in rig.messages()] == ["SUBMIT"]
    assert asked == [] and rig.session.frame == 0 and rig.capturer.calls == []


def test_a_frame_boundary_in_a_submit_ends_its_frame_after_the_submit():
    rig = Rig(buffer(0x10, work(1)), returned=(1000, 1000))
    rig.session.frame = 3
    rig.submit([0x10], frame_ends=[7])
    rig.submit([0x10], frame_ends=[2])    # an id below the session's frame does not move it back
    kinds = [(kind, seq, body["frame"]) for kind, seq, _, body in rig.messages()]
    assert kinds == [("SUBMIT", 1, 3), ("FRAME", None, 7), ("SUBMIT", 2, 8), ("FRAME", None, 2)]
    assert [body["source"] for kind, _, _, body in rig.messages() if kind == "FRAME"] == ["frame_boundary"] * 2
    assert rig.session.frame == 9


def test_captures_and_readers_are_handed_to_the_capturer_after_the_submit():
    capture = Capture(offset=0, size=12, kind="dispatch", count=1, tag=7)
    cb = buffer(0x10, work(8, capture=capture))
    rig = Rig(cb, returned=(1000,))
    rig.submit([0x10])
    assert rig.capturer.named("after_submit") == [(rig.dev, QUEUE, 1, [(8, capture)], [cb], [])]
    assert rig.messages() == [submit_payload(1, [0x10], [7, 8], annexed=True)]
    reader = object()
    instrumenter = Calls(readers=lambda dev, submit_id, trackers: [reader])
    plain = buffer(0x20, work(9))
    rig = Rig(plain, instrumenter=instrumenter, returned=(1000,))
    rig.submit([0x20])
    assert instrumenter.named("readers") == [(rig.dev, 1, [plain])]
    assert rig.capturer.named("after_submit") == [(rig.dev, QUEUE, 1, [], [plain], [reader])]


def test_a_failed_plan_still_forwards_once_and_reports_nothing():
    rig = Rig(buffer(0x10, work(1)), returned=(1000,))
    assert rig.submit([0x10, 0x99], result=vk.VK_SUCCESS) == vk.VK_SUCCESS   # 0x99: no such buffer
    assert rig.forwarded == [0] and rig.messages() == []
    assert rig.errors.calls == [("report", "vkQueueSubmit", "planning the submit; forwarded without metadata")]


def test_a_failed_submit_is_unwrapped_and_not_reported():
    rig = Rig(buffer(0x10, work(1)), returned=(1000, 1000))
    rig.submit([0x10])
    assert rig.submit([0x10], result=vk.VK_ERROR_DEVICE_LOST) == vk.VK_ERROR_DEVICE_LOST
    assert rig.labeller.calls == [("queue_push", rig.dev, QUEUE, "s2"), ("queue_pop", rig.dev, QUEUE)]
    assert [seq for _, seq, _, _ in rig.messages()] == [1]


def test_waits_pull_the_c_submits_and_read_back_captures():
    ledger = Ledger()
    rig = Rig(buffer(0x10, work(1)), ledger=ledger)
    ledger.pending = [Submission(QUEUE, 1, 2, 0, 9, 0, False, [([0x10], [], [])])]
    rig.reporter.waited(rig.dev)
    assert [(kind, seq) for kind, seq, _, _ in rig.messages()] == [("SUBMIT", 9)]
    assert rig.capturer.named("poll") == [(rig.dev,)]
