"""The layer's feature objects (issue #24): RenderPasses, Commands, Workloads, Queues, Instrumenter and
Regions hold one method per command they hook, bound by HookSet.bind; driven here with stand-ins for
the layer state, the labeller and the devices: no Vulkan, no shim.

Handles are plain ints; a "device" is a namespace with the resources the hooks read; the trackers
are the real ones (layer/trackers.py)."""
from __future__ import annotations

import logging
from types import SimpleNamespace as NS

import pytest

from tessera.layer import queues
from tessera.layer.commands import Commands
from tessera.layer.forwarding import Forwarding
from tessera.layer.instrument import Action, Instrumenter, Recording, folded
from tessera.layer.regions import Limits, Regions, area_of, rendering_arrays
from tessera.layer.render_passes import RenderPasses
from tessera.layer.trackers import CommandBufferTracker, PassPart, QueueTracker, Workload
from tessera.layer.workloads import Workloads
from tessera.vkapi import intercepts
from tessera.vkapi.commands import ACCELERATION_STRUCTURES, DISPATCHES, DRAWS, TRACE_RAYS
from tessera.vkapi.dispatch import HookSet
from tessera.vkapi.log import HookErrors
from tessera.vkapi.ops import LABEL_END, PASS_END, PASS_SUSPEND, Execute, LabelBegin, LabelInsert, PassBegin
from tessera.vkapi.render_passes import PassInfo
from tessera.vkapi.resources import Pipeline
from tessera.vkapi.transfers import TRANSFERS
from tessera.vkapi.vkconst import vk

PRIMARY, SECONDARY = vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, vk.VK_COMMAND_BUFFER_LEVEL_SECONDARY
GRAPHICS, COMPUTE = vk.VK_PIPELINE_BIND_POINT_GRAPHICS, vk.VK_PIPELINE_BIND_POINT_COMPUTE
DEV = NS(address=0xD0, res=NS(pipelines={}, render_passes={}, framebuffers={}))


class State:
    """The layer state the hooks use: command buffers by handle (created on first sight)."""

    def __init__(self) -> None:
        self.buffers: dict[int, CommandBufferTracker] = {}
        self.ffi = NS(NULL=None)
        self.session = NS(pulls=0, noted=[])
        # queues.QueueReporter's part the commands' hooks use
        self.reporter = NS(pull=lambda: setattr(self.session, "pulls", self.session.pulls + 1),
                           note_queue=self.session.noted.append)

    def command_buffer(self, dev, handle) -> CommandBufferTracker:
        if handle not in self.buffers:
            self.buffers[handle] = CommandBufferTracker(handle, handle, PRIMARY, 1)
        return self.buffers[handle]

    def owner_of(self, handle):
        return DEV

    @staticmethod
    def address(handle) -> int:
        return int(handle)


class Labeller:
    def __init__(self) -> None:
        self.tag = 0
        self.calls: list[tuple] = []

    def next_tag(self) -> int:
        self.tag += 1
        return self.tag

    def push(self, dev, cb, name: str) -> bool:
        self.calls.append(("push", cb, name))
        return True

    def pop(self, dev, cb) -> None:
        self.calls.append(("pop", cb))


def _hooks() -> HookSet:
    return HookSet(HookErrors(logging.getLogger("test_layer_features")))


def _info(**kw) -> PassInfo:
    fields = dict(command="vkCmdBeginRendering", handle=0, width=64, height=32, layers=1, subpasses=1,
                  attachments=[], load_bytes=0, store_bytes=0, dynamic=True)
    return PassInfo(**{**fields, **kw})


# ---- binding: every hooked command is a method named after it, owned by its intercept-table row ----------

EXTENDED = ("vkCmdBindPipeline", "vkCmdDraw", "vkCmdDrawIndexed", "vkCmdDrawMeshTasksEXT", *DISPATCHES, *TRACE_RAYS)


def _bound(feature) -> HookSet:
    hooks = _hooks()
    if isinstance(feature, Instrumenter):   # it extends the appliers of render_passes.py and workloads.py
        hooks.appliers.update({name: lambda *a, **k: None for name in EXTENDED})
    feature.register(hooks) if isinstance(feature, (Instrumenter, Regions)) else hooks.bind(feature)
    return hooks


@pytest.mark.parametrize("feature", [
    RenderPasses(State(), Labeller(), None), Commands(None, (st := State()), None, None, st.reporter), Workloads(State(), Labeller(), None),
    Instrumenter(None, State(), None, None), Regions(None, State(), None, None, ())], ids=lambda feature: type(feature).__name__)
def test_each_feature_binds_only_commands_its_module_owns_in_the_intercept_table(feature):
    owners = intercepts.owners(intercepts.LAYER)
    module = type(feature).__module__
    for name, modules in _bound(feature).modules().items():
        assert module in modules and module in owners[name], name


def test_every_tagged_workload_command_has_its_own_before_apply_and_after_method():
    tagged = [*DISPATCHES, *TRACE_RAYS, *TRANSFERS, "vkCmdCopyTensorARM", *ACCELERATION_STRUCTURES]
    hooks = _bound(Workloads(State(), Labeller(), None))
    for name in tagged:
        assert len(hooks.befores[name]) == len(hooks.afters[name]) == 1 and name in hooks.appliers, name


def test_the_instrumenter_numbers_every_action_command():
    hooks = _bound(Instrumenter(None, State(), None, None))
    assert all(len(hooks.befores[name]) == 1 for name in (*DRAWS, *DISPATCHES, *TRACE_RAYS))


def test_queues_register_binds_its_hooks_and_wraps_the_submits_that_call_down():
    hooks, state = _hooks(), State()
    state.session.transport = NS(send=None, before_flush=[])
    reporter = queues.QueueReporter(state.session, None, None, None, None, hooks.errors)
    queues.register(hooks, state, None, reporter, hooks.errors)
    assert isinstance(hooks.replacements["vkQueueSubmit"], Forwarding)
    assert isinstance(hooks.replacements["vkQueueSubmit2"], Forwarding)
    assert hooks.replacements["vkQueueSubmit"].__module__ == "tessera.layer.queues"
    assert hooks.replacements["vkQueueSubmit"].hook.__self__.reporter is reporter   # the one entry.py made
    assert {n for n in ("vkQueueWaitIdle", "vkDeviceWaitIdle", "vkWaitForFences", "vkQueuePresentKHR")
            if hooks.afters[n]} == {"vkQueueWaitIdle", "vkDeviceWaitIdle", "vkWaitForFences", "vkQueuePresentKHR"}


def test_the_hooks_and_the_queue_reporter_use_the_recorder_made_before_them():
    recorder = object()
    hooks = HookSet(HookErrors(logging.getLogger("test_layer_features")), recorder)
    reporter = queues.QueueReporter(State().session, None, None, None, None, hooks.errors, recorder=recorder)
    assert hooks.recorder is recorder and reporter.recorder is recorder


# ---- render passes -----------------------------------------------------------------------------------------

def test_a_pass_suspended_and_resumed_in_one_buffer_is_one_part_with_one_tag():
    state, labeller = State(), Labeller()
    rp = RenderPasses(state, labeller, None)
    t = state.command_buffer(DEV, 1)
    rp._begin_rendering(DEV, t, 1, _info(suspending=True))
    rp.count(DEV, 1, 3)
    rp._begin_rendering(DEV, t, 1, _info(resuming=True))
    rp.count(DEV, 1)
    rp.after_vkCmdEndRendering(DEV, None, 1)
    assert labeller.calls == [("push", 1, "t1"), ("pop", 1)]
    begin, end = t.ops
    part = begin.info
    assert type(begin) is PassBegin and end == PASS_END and part.draws == 4 and not part.suspends and t.part is None
    (w, kind, meta, annex), = t.described
    assert (w.tag, kind, meta["draw_call_count"], meta["width"], annex) == (1, "render_pass", 4, 64, False)


def test_a_pass_still_suspended_at_the_end_of_a_buffer_is_finished_there_and_resumed_later():
    state, labeller = State(), Labeller()
    rp = RenderPasses(state, labeller, None)
    t = state.command_buffer(DEV, 1)
    rp._begin_rendering(DEV, t, 1, _info(suspending=True))
    rp.after_vkCmdEndRendering(DEV, None, 1)   # suspended: the part stays open
    assert t.part is not None
    rp.before_vkEndCommandBuffer(DEV, 1)
    begin, end = t.ops
    part = begin.info
    assert end == PASS_SUSPEND and part.suspends and labeller.calls == [("push", 1, "t1")]   # its label stays open
    (_, _, _, annex), = t.described
    assert annex   # its draw count comes at submit
    later = state.command_buffer(DEV, 2)
    rp._begin_rendering(DEV, later, 2, _info(resuming=True))
    assert later.part.workload is None and later.part.resumes


def test_draws_count_in_the_pass_or_as_a_secondarys_continued_draws():
    state = State()
    rp = RenderPasses(state, Labeller(), None)
    state.buffers[2] = CommandBufferTracker(2, 2, SECONDARY, 1)
    rp.before_vkCmdDraw(DEV, 2, 3, 1, 0, 0)
    rp.apply_vkCmdDraw(DEV, 2, 5)              # folded draws recorded in C
    rp.before_vkCmdDrawIndirectCount(DEV, 2, 0, 0, 0, 0, 99, 16)   # counted as one draw call
    assert state.buffers[2].continued_draws == 7
    rp.before_vkCmdDraw(DEV, 1, 3, 1, 0, 0)    # a primary outside a pass: nothing to count
    assert state.command_buffer(DEV, 1).continued_draws == 0


def test_an_indirect_draw_is_captured_once_its_pass_is_over():
    state, captured = State(), []
    capture = NS(draws=lambda dev, cb, *args: captured.append((cb, *args)) or "capture")
    rp = RenderPasses(state, Labeller(), capture)
    t = state.command_buffer(DEV, 1)
    rp._begin_rendering(DEV, t, 1, _info())
    rp.before_vkCmdDrawIndirect(DEV, 1, 0xB, 16, 2, 20)
    assert captured == [] and t.part.draws == 2
    rp.after_vkCmdEndRendering(DEV, None, 1)
    assert captured == [(1, 0xB, 16, 2, 20, "draw")] and t.ops[-2].info.captures == ["capture"]


def test_a_pass_ended_in_c_keeps_the_tag_c_took_and_pops_no_label():
    state, labeller = State(), Labeller()
    rp = RenderPasses(state, labeller, None)
    t = state.command_buffer(DEV, 1)
    rp._start(DEV, t, 1, _info(), tag=41)
    rp.apply_vkCmdEndRendering(DEV, 1)
    assert labeller.calls == [] and t.ops[0].info.workload.tag == 41


# ---- commands and labels -----------------------------------------------------------------------------------

def test_applied_labels_keep_the_buffers_stack_and_count_pops_below_its_start():
    state = State()
    c = Commands(None, state, None, None, state.reporter)
    c.apply_vkCmdEndDebugUtilsLabelEXT(DEV, 1)            # closes a label opened in an earlier buffer
    c.apply_vkCmdBeginDebugUtilsLabelEXT(DEV, 1, "frame")
    c.apply_vkCmdDebugMarkerInsertEXT(DEV, 1, "here")
    t = state.command_buffer(DEV, 1)
    assert t.ops == [LABEL_END, LabelBegin("frame"), LabelInsert("here")]
    assert t.labels == ["frame"] and t.pops_below_start == 1


def test_secondaries_executed_in_a_pass_add_their_draws_to_it():
    state = State()
    c = Commands(None, state, None, None, state.reporter)
    t = state.command_buffer(DEV, 1)
    t.part = PassPart(Workload(1, (), 0))
    state.buffers[2] = CommandBufferTracker(2, 2, SECONDARY, 1, continued_draws=4)
    c.before_vkCmdExecuteCommands(DEV, 1, 1, [2])
    assert t.part.draws == 4 and t.ops == [Execute([state.buffers[2]])]


def test_a_queue_label_end_pulls_the_c_submits_first_and_tolerates_a_pop_without_a_push():
    state = State()
    DEV.queues = {7: QueueTracker(7, "queue 0.0", labels=["a"])}
    c = Commands(None, state, None, None, state.reporter)
    c.replace_vkQueueEndDebugUtilsLabelEXT(7)
    c.replace_vkQueueEndDebugUtilsLabelEXT(7)
    assert DEV.queues[7].labels == [] and state.session.pulls == 2
    assert state.session.noted == [DEV.queues[7]] * 2


def test_a_command_buffer_reset_releases_captures_and_resets_the_recorders_records():
    state, released, reset = State(), [], []
    hooks = NS(recorder=NS(reset=reset.append))
    c = Commands(hooks, state, None, lambda dev, t: released.append(t.address), state.reporter)
    t = state.command_buffer(DEV, 1)
    t.ops.append(LabelInsert("x"))
    c.after_vkResetCommandBuffer(DEV, vk.VK_SUCCESS, 1, 0)
    assert released == [1] and reset == [1] and t.ops == [] and state.session.pulls == 1


# ---- workloads ---------------------------------------------------------------------------------------------

def test_a_dispatch_is_tagged_sized_from_the_bound_pipeline_and_its_label_popped_after():
    state, labeller = State(), Labeller()
    w = Workloads(state, labeller, None)
    DEV.res.pipelines[0x9] = Pipeline(COMPUTE, (8, 4, 1), {})
    w.before_vkCmdBindPipeline(DEV, 1, COMPUTE, 0x9)
    w.before_vkCmdDispatchBase(DEV, 1, 1, 0, 0, 2, 2, 1)
    w.after_vkCmdDispatchBase(DEV, None, 1, 1, 0, 0, 2, 2, 1)
    w.after_vkCmdDispatchBase(DEV, None, 1, 1, 0, 0, 2, 2, 1)   # no label open: nothing popped
    t = state.command_buffer(DEV, 1)
    (_, kind, meta, annex), = t.described
    assert kind == "dispatch" and not annex
    assert meta == {"command": "vkCmdDispatchBase", "groups": [2, 2, 1], "group_size": [8, 4, 1], "items": 128,
                    "indirect": False, "base_group": [1, 0, 0]}
    assert labeller.calls == [("push", 1, "t1"), ("pop", 1)] and t.ops[0].tag == 1


def test_a_dispatch_recorded_in_c_is_applied_with_the_tag_c_took_and_no_label():
    state, labeller = State(), Labeller()
    Workloads(state, labeller, None).apply_vkCmdDispatch(DEV, 1, 1, 1, 1, tag=7)
    t = state.command_buffer(DEV, 1)
    assert labeller.calls == [] and t.ops[0].tag == 7 and t.described[0][2]["items"] == -1   # no pipeline


# ---- instrumentation ---------------------------------------------------------------------------------------

def test_folded_draws_stand_for_their_count():
    assert folded() == 1 and folded(4) == 4 and folded(2, "more") == 2


def test_the_instrumenters_appliers_run_the_owners_first_then_number_each_draw():
    state, applied = State(), []
    hooks = _hooks()
    for name in EXTENDED:   # the owners' appliers (render_passes.py, workloads.py), composed before the instrumenter's
        hooks.applies(name)(lambda dev, cb, *a, _n=name, **k: applied.append((_n, a, k)))
    ins = Instrumenter(None, state, None, None)
    ins.register(hooks)
    ins.devices.add(DEV.address)
    rec = ins.recordings[1] = Recording(0x5, active=True)
    t = state.command_buffer(DEV, 1)
    t.part = PassPart(Workload(3, (), 0), draws=2)   # the pass's draws, counted by render_passes.py first
    hooks.appliers["vkCmdBindPipeline"](DEV, 1, GRAPHICS, 0x77)
    hooks.appliers["vkCmdDraw"](DEV, 1, 2)
    assert applied == [("vkCmdBindPipeline", (GRAPHICS, 0x77), {}), ("vkCmdDraw", (2,), {})]
    assert rec.actions == {0: Action(3, "vkCmdDraw", 0, 0x77), 1: Action(3, "vkCmdDraw", 1, 0x77)}
    t.ops.append(Workload(9, (), 0))
    hooks.appliers["vkCmdDispatch"](DEV, 1, 1, 1, 1, tag=9)
    assert applied[-1] == ("vkCmdDispatch", (1, 1, 1), {"tag": 9}) and rec.actions[2] == Action(9, "vkCmdDispatch",
                                                                                                 None, 0)


def test_the_instrumenter_adds_its_appliers_beside_the_owners_whatever_the_order_they_register_in():
    hooks = _hooks()
    ins = Instrumenter(None, State(), None, None)
    ins.register(hooks)                      # before the modules whose records it numbers: nothing replaced
    owner = {name: (lambda *a, **k: None) for name in EXTENDED}
    for name in EXTENDED:
        hooks.applies(name)(owner[name])
    assert all(hooks.applier_lists[name] == [getattr(ins, f"apply_{name}"), owner[name]] for name in EXTENDED)


def test_an_inactive_region_numbers_nothing():
    state = State()
    ins = Instrumenter(None, state, None, None)
    ins.devices.add(DEV.address)
    rec = ins.recordings[1] = Recording(0x5)
    ins.before_vkCmdDispatch(DEV, 1, 1, 1, 1)
    assert rec.actions == {} and rec.next_index == 0


# ---- regions -----------------------------------------------------------------------------------------------

def _rect(x, y, w, h):
    return NS(offset=NS(x=x, y=y), extent=NS(width=w, height=h))


def test_a_render_pass_fills_one_array_per_subpass_and_view_or_layer():
    r = Regions(None, State(), None, None, ())
    res = NS(render_passes={0x1: NS(subpasses=2)}, framebuffers={0x2: NS(layers=3)})
    dev = NS(address=0xD0, res=res)
    r.view_masks[0x1] = (0b101, 0)   # subpass 0: two views; subpass 1: the framebuffer's layers
    assert r.arrays_of_pass(dev, NS(renderPass=0x1, framebuffer=0x2)) == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]
    assert r.arrays_of_pass(dev, NS(renderPass=0x9, framebuffer=0x9)) == [(0, 0)]   # unknown: one array


def test_dynamic_rendering_fills_one_array_per_view_else_per_layer():
    assert rendering_arrays(NS(viewMask=0b11, layerCount=5)) == [(0, 0), (0, 1)]
    assert rendering_arrays(NS(viewMask=0, layerCount=0)) == [(0, 0)]
    assert area_of(_rect(1, 2, 30, 40)) == (1, 2, 30, 40)


def test_view_masks_are_remembered_only_on_devices_capturing_regions():
    r = Regions(None, State(), None, None, ())
    r._remember(NS(address=0xD0), vk.VK_SUCCESS, [0x1], [3])
    assert r.view_masks == {}
    r.limits[0xD0] = Limits([(1, "c")], (16, 16), 64, 16)
    r._remember(NS(address=0xD0), vk.VK_SUCCESS, [0x1], [3])
    r._remember(NS(address=0xD0), vk.VK_ERROR_OUT_OF_HOST_MEMORY, [0x2], [1])
    assert r.view_masks == {0x1: (3,)}


def test_a_resuming_dynamic_render_pass_gets_no_counters():
    r = Regions(None, State(), None, None, ())
    assert r.before_vkCmdBeginRendering(DEV, 1, NS(flags=vk.VK_RENDERING_RESUMING_BIT)) is None

