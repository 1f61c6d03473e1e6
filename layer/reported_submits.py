"""Submits reported in C: a re-recording frame loop's submit and wait cost the layer no Python.

The layer reports each submit the C path made when it reads the ledger (queues.py): for a buffer whose
recording C ended equal to a kept one (vkapi/lifecycle.py), the WORKLOADS of the recording made again
(its product's descriptions with the recording's own tags) and the SUBMIT listing its plain tags. Both
are known ahead but for those tags, the submitID, the frame and two times, so once Python has reported
such a submit, the product gets the text between those numbers attached in C (`attach`: per command
buffer; layer/encoder.report_template). While nothing waits to be sent (the transport's queue is
empty, no capture waits to be read back, the ledger is empty), the layer grants the shim's C a licence
(`grant`) with each queue's SUBMIT text up to its time and where the transport writes (the daemon's
socket, or the spool file, through its stage: tessera.schemas.staged): the submit's guard
(vkapi/runtime/reported_submits.c) then writes the frames of such a submit there before the submit
returns (a recording whose product's WORKLOADS C already wrote in full under this licence, into the same
buffer, as a RECORDED_AGAIN pairing its tags with those: tessera.schemas.workloads), marks its buffers read, and the wait guards forward without Python (the frames are already with
the kernel, a stage's in the page cache: what the application learns has run keeps its metadata, as
`Transport.hand_to_kernel` promises). A grant that reported nothing before it ended
is not repeated for a while (submits.Licence: a loop whose submits C cannot report pays no grant per frame).

The licence ends with any record the C path appends to its ledger, and before anything Python sends or
the transport's sender writes (`revoke`, which the transport calls): what C sent on the socket joins the
frames the daemon has yet to acknowledge (kept for the spool should it go away), and what it could not
send (a full socket, a failed write) is sent first, by Python. The sender's look for work every PULL_S
ends it too, so that acknowledgements are read, and grants it again (`renew`) if C was reporting under it.

A primary whose vkCmdExecuteCommands C recorded (vkapi/lifecycle.py) is reported so too: the secondaries it executes
whose recordings nothing described yet have their WORKLOADS written first, from templates attached to their own kept
recordings (`attach`, when a submit read in Python read them), and are marked reported as the primary is.

Also reported in C: a submit of a recording submitted before (its product's template, without its
WORKLOADS again), of a buffer submitted again as it is, pre-recorded (`attach_recordings`: its tags, as
the SUBMIT lists them, attached to that recording by the serial the C path's ledger gives it), wrapped
in s<submitID> by the C path (`annexed`); a submit inside the application's queue labels that C kept under
the licence (up to 4 a queue, names whose JSON string needs no escape), wrapped so too, with an ANNEX per
workload: its label stack then, the queue's labels and its own (the template's labels section,
`encoder.report_template`); C writes such labels to the ledger before any other record and at the revoke, so
Python's queue follows them in order; and a present's FRAME (`swapchain_images` keeps C's copy of the
images each swapchain shows; C counts the frame, which the revoke reads back into the session, and the
revoke waits for a present under way to write its FRAME).
Taken by Python as before: a submit of more than 64 command buffers (its batches' one after another) or naming one
twice, of a buffer with nothing attached, on a queue not granted, inside queue labels C does not keep (begun before
the licence, or more of them), of a buffer submitted again as it is inside queue labels; a present with a
VkFrameBoundaryEXT or an unknown swapchain; anything the C path never took (a label left open by a command buffer,
frame boundaries, instrumentation). A recording whose submit C reported runs its
hooks only if something looks at the buffer before C begins it again, as one whose submit Python read
without them (Recorder.apply_reported gives them the Read C kept no object of; if the product went meanwhile, its
records are applied and left as reported, its submits counted).

TESSERA_C_REPORTS=0: no licence is granted.
"""
from __future__ import annotations

import os
import struct
import threading

from tessera.vkapi import replay, submits

from . import encoder

SWITCH = "TESSERA_C_REPORTS"
MAX_QUEUES = 64          # runtime/reported_submits.c TESSERA_REPORT_QUEUES
MAX_PREFIX = 512         # ... TESSERA_REPORT_PREFIX
TEMPLATE_KEY = 1         # ... TESSERA_REPORT_KEY: the attachment's second key word


class ReportedSubmits:
    """The licence's Python side. `transport`: the layer's Transport (its `reported` is this); `state`: the
    LayerState (its devices' queues); `capturer`: indirect.Capturer (captures waiting to be read back)."""

    def __init__(self, ffi, lib, transport, state, capturer, log) -> None:
        self.ffi, self.lib, self.transport, self.state, self.capturer, self.log = \
            ffi, lib, transport, state, capturer, log
        self.enabled = os.environ.get(SWITCH) != "0"
        self.granted = False
        self._lock = threading.Lock()   # granting and revoking, and taking what C wrote, one thread at a time
        self._out = ffi.new("const uint8_t *[2]")
        self._lens = ffi.new("size_t[2]")
        self._error = ffi.new("int *")
        self._attached: set[tuple] = set()   # (id(product), buffer address), ("recording", address, serial): once
        self._queues: tuple[tuple, bytes] = ((), b"")     # the queues granted last, and their text for C
        self.licence = submits.Licence(ffi, lib.tessera_report_counts, "reported")
        self._staged_fd: int | None = None   # the spool's descriptor C's appends are staged for
        self._renew = False                  # the last revoke took back a licence C reported under

    def attach(self, device_address: int, address: int, read) -> None:
        """A submit of the buffer at `address` was reported from `read` (Recorder.reading_all's, its product plain;
        or a secondary it executes, whose WORKLOADS alone C writes): let C report the next submit of a recording
        equal to it (once per product and buffer)."""
        product = read.product
        if read.kept is None or not self._first((id(product), address)):
            return
        plain = product.plain if product.plain is not None else ()
        replay.attach(self.lib, read.kept, (address, TEMPLATE_KEY),
                      encoder.report_template(device_address, address, product.described_rows, plain,
                                              product.plain_labels))

    def swapchain_images(self, swapchain: int, images: tuple[int, ...]) -> None:
        """vkGetSwapchainImagesKHR (`images`), vkDestroySwapchainKHR (none): what a present C reports shows."""
        self.lib.tessera_report_swapchain_images(swapchain, list(images), len(images))

    def presents(self) -> str:
        return f"presents reported in C: {self.lib.tessera_report_presents()}"

    def attach_recordings(self, plan, serials: list[int]) -> None:
        """A submit the C path made was planned from its buffers' trackers (queues.plan_submit) to their tags
        alone (`plain_tags`): let C report the next submits of those recordings (`serials`, the ledger's) as
        they are, from their tags as the SUBMIT lists them."""
        if plan.annexes or plan.captures or len(plan.primaries) != len(serials):
            return
        for t, serial in zip(plan.primaries, serials):
            if type(t.plain_tags) is not list or not self._first(("recording", t.address, serial)):
                continue
            text = ",".join(map(str, t.plain_tags)).encode()
            self.lib.tessera_cb_attach(self.ffi.cast("void *", t.address), serial, TEMPLATE_KEY, text, len(text))

    def _first(self, key: tuple) -> bool:
        """Whether `key` is attached for the first time (bounded: after a clear, one is attached again)."""
        if key in self._attached:
            return False
        if len(self._attached) >= 4096:
            self._attached.clear()
        self._attached.add(key)
        return True

    def grant(self) -> None:
        """After a wait: let C report submits while nothing else waits to be sent. After grants that reported
        nothing (a loop whose submits C cannot report), the next ones are skipped, more of them each time."""
        if not self.enabled or self.granted or any(self.capturer.pending.values()):
            return
        if self.licence.skip():
            return
        with self._lock:
            if self.granted:
                return
            queues = self._queue_texts()
            self.granted = bool(queues) and self.transport.write_elsewhere(
                lambda fd, socket: self._grant(fd, socket, queues))

    def _grant(self, fd: int, socket: bool, queues: bytes) -> bool:
        """(the transport's writing held) Grant C the destination `fd`: the daemon's socket, or the spool file, whose
        appends C stages (tessera.schemas.staged; where that fails C writes each at once)."""
        if not socket and fd != self._staged_fd:
            self._staged_fd = fd
            if (refused := submits.open_stage(self.lib, fd, self.transport.spool_path)) is not None:
                self.log.warning("%s", refused)
        return bool(self.lib.tessera_report_grant(fd, 1 if socket else 0, queues, len(queues)))

    def _queue_texts(self) -> bytes:
        """Each queue's address, its SUBMIT text up to its time and a present's FRAME text between its time and its
        images, as tessera_report_grant takes them (kept while the devices' queues stay the same)."""
        with self.state.lock:
            devices = list(self.state.devices.values())
        key = tuple((dev.address, tuple(dev.queues)) for dev in devices)
        if key != self._queues[0]:
            out = []
            for dev in devices:
                for address, q in list(dev.queues.items()):
                    prefix = encoder.submit_prefix(dev.address, q.name)
                    present = encoder.frame_middle(dev.address, q.name, "present").encode()
                    if len(out) < MAX_QUEUES and len(prefix) <= MAX_PREFIX and len(present) <= MAX_PREFIX:
                        out.append(struct.pack("<QH", address, len(prefix)) + prefix
                                   + struct.pack("<H", len(present)) + present)
            self._queues = (key, b"".join(out))
        return self._queues[1]

    def renew(self) -> None:
        """After the sender's look took the licence back (to read acknowledgements): granted again at once when C
        was reporting under it, rather than at the next wait, whose frame would take Python."""
        if self._renew:
            self._renew = False
            self.grant()

    def revoke(self) -> None:
        """Before Python sends or writes: end the licence, and hand what C wrote and could not write to the
        transport."""
        with self._lock:   # held while the transport takes them: nothing it sends may overtake them
            if not self.granted:
                return
            self.granted = False
            out, lens, error = self._out, self._lens, self._error
            reported = self.lib.tessera_report_revoke(out, lens, out + 1, lens + 1, error)
            self.licence.ended(reported)
            self._renew = reported > 0
            session = self.state.session   # the presents C reported counted the frames
            session.frame = max(session.frame, self.lib.tessera_get_frame())
            written = self.ffi.buffer(out[0], lens[0])[:] if lens[0] else b""
            unsent = self.ffi.buffer(out[1], lens[1])[:] if lens[1] else b""
            if error[0]:
                self.log.warning("submits reported in C: writing their frames failed (%s); the transport sends "
                                 "what was not written", os.strerror(error[0]))
            self.transport.adopt(written, unsent)
