"""layer/descriptors.py (#28, --content): which images a pass's draws and a dispatch read through descriptor
sets, from the real Vulkan structures (the layer shim's compiled ffi makes them) handed to the hooks as the
application would: sets written by vkUpdateDescriptorSets (writes and copies) and update templates, bound or
pushed into command buffers; the WORKLOAD `resources` the render-pass and dispatch descriptions carry.
No Vulkan driver: handles are plain integers, views are the device's tracked views."""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from tessera.layer.descriptions import describe
from tessera.layer.descriptors import CONTENT_ONLY, BoundSets, Descriptors, PassReads, resources
from tessera.layer.render_passes import RenderPasses
from tessera.layer.trackers import CommandBufferTracker, Workload
from tessera.vkapi import intercepts
from tessera.vkapi.ops import Execute
from tessera.vkapi.render_passes import PassInfo
from tessera.vkapi.resources import ImageView, Resources
from tessera.vkapi.vkconst import vk

SAMPLED, COMBINED, STORAGE, UNIFORM = (vk.VK_DESCRIPTOR_TYPE_SAMPLED_IMAGE, vk.VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER,
                                       vk.VK_DESCRIPTOR_TYPE_STORAGE_IMAGE, vk.VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER)
GRAPHICS, COMPUTE = vk.VK_PIPELINE_BIND_POINT_GRAPHICS, vk.VK_PIPELINE_BIND_POINT_COMPUTE
PRIMARY, SECONDARY = vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, vk.VK_COMMAND_BUFFER_LEVEL_SECONDARY
# views -> images: 0x51 -> 0xA1 (a shadow map), 0x52 -> 0xA2, 0x53 -> 0xA3 (a storage image)
VIEWS = {0x51: 0xA1, 0x52: 0xA2, 0x53: 0xA3}


@pytest.fixture(scope="module")
def ffi():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "vkapi"))
    from test_pnext_walkers import SHIMS, _load_shim

    from tessera.vkapi import paths
    if not (paths.BUILD_DIR / SHIMS["layer"][1]).exists():
        pytest.fail("the layer shim is not built: make shims")
    return _load_shim(*SHIMS["layer"])


class State:
    def __init__(self, ffi) -> None:
        self.ffi = ffi
        self.buffers: dict[int, CommandBufferTracker] = {}
        self.track_descriptors = True

    def command_buffer(self, dev, handle) -> CommandBufferTracker:
        key = int(self.ffi.cast("uintptr_t", handle)) if not isinstance(handle, int) else handle
        if key not in self.buffers:
            self.buffers[key] = CommandBufferTracker(handle, key, SECONDARY if key >= 0x900 else PRIMARY, 1)
        return self.buffers[key]


@pytest.fixture
def rig(ffi):
    state = State(ffi)
    res = Resources()
    res.views.update({v: ImageView(i, vk.VK_FORMAT_R8G8B8A8_UNORM, 1) for v, i in VIEWS.items()})
    dev = NS(address=0xD0, res=res, descriptors=None)
    return NS(ffi=ffi, state=state, dev=dev, hooks=Descriptors(state))


def _writes(ffi, keep, *writes):
    """VkWriteDescriptorSet[] of (set, binding, element, type, [views])."""
    arr = ffi.new("VkWriteDescriptorSet[]", len(writes))
    for w, (dst, binding, element, dtype, views) in zip(arr, writes):
        infos = ffi.new("VkDescriptorImageInfo[]", [{"imageView": ffi.cast("VkImageView", v)} for v in views])
        keep.append(infos)
        w.sType = vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET
        w.dstSet = ffi.cast("VkDescriptorSet", dst)
        w.dstBinding, w.dstArrayElement, w.descriptorType, w.descriptorCount = binding, element, dtype, len(views)
        w.pImageInfo = infos
    return arr


def _sets(ffi, *handles):
    return ffi.new("VkDescriptorSet[]", [ffi.cast("VkDescriptorSet", h) for h in handles])


def test_written_sets_bound_at_a_dispatch_name_their_images(rig) -> None:
    ffi, h, dev, keep = rig.ffi, rig.hooks, rig.dev, []
    alloc = ffi.new("VkDescriptorSetAllocateInfo *", {"descriptorSetCount": 2})
    h.after_vkAllocateDescriptorSets(dev, vk.VK_SUCCESS, None, alloc, _sets(ffi, 0x5E1, 0x5E2))
    w = _writes(ffi, keep, (0x5E1, 0, 0, COMBINED, [0x51, 0x52]), (0x5E2, 1, 0, STORAGE, [0x53]),
                (0x5E2, 2, 0, SAMPLED, [0x99]))                      # a view the layer never saw: no image
    h.after_vkUpdateDescriptorSets(dev, None, None, 3, w, 0, ffi.NULL)
    assert dev.descriptors.sets == {0x5E1: {(0, 0): (0xA1, COMBINED), (0, 1): (0xA2, COMBINED)},
                                    0x5E2: {(1, 0): (0xA3, STORAGE)}}
    h.before_vkCmdBindDescriptorSets(dev, 0x10, COMPUTE, None, 1, 2, _sets(ffi, 0x5E1, 0x5E2), 0, ffi.NULL)
    t = rig.state.command_buffer(dev, 0x10)
    assert resources(t.descriptors, COMPUTE) == {"reads": ["0xa1", "0xa2"], "storage": ["0xa3"]}
    assert resources(t.descriptors, GRAPHICS) == {"reads": [], "storage": []}      # nothing bound there
    # an update after the bind, before the dispatch, is seen (the bound set is the set's own slots)
    h.after_vkUpdateDescriptorSets(dev, None, None, 1, _writes(ffi, keep, (0x5E1, 0, 1, UNIFORM, [0x52])), 0,
                                   ffi.NULL)
    meta: dict = {"command": "vkCmdDispatch"}
    describe(rig.state, dev, t, Workload(7, (), 0), "dispatch", meta, False)
    assert meta["resources"] == {"reads": ["0xa1"], "storage": ["0xa3"]}
    # a transfer names no reads; without --content nothing is added
    meta = {"resources": {"src": "0x1"}}
    describe(rig.state, dev, t, Workload(8, (), 0), "buffer_transfer", meta, False)
    assert meta == {"resources": {"src": "0x1"}}
    rig.state.track_descriptors = False
    meta = {}
    describe(rig.state, dev, t, Workload(9, (), 0), "dispatch", meta, False)
    assert meta == {}


def test_copies_templates_and_push_descriptors(rig) -> None:
    ffi, h, dev, keep = rig.ffi, rig.hooks, rig.dev, []
    h.after_vkUpdateDescriptorSets(dev, None, None, 1, _writes(ffi, keep, (0x5E1, 3, 0, SAMPLED, [0x51, 0x52])), 0,
                                   ffi.NULL)
    copy = ffi.new("VkCopyDescriptorSet[]", [{"srcSet": ffi.cast("VkDescriptorSet", 0x5E1), "srcBinding": 3,
                                              "srcArrayElement": 1, "dstSet": ffi.cast("VkDescriptorSet", 0x5E3),
                                              "dstBinding": 0, "dstArrayElement": 0, "descriptorCount": 1}])
    h.after_vkUpdateDescriptorSets(dev, None, None, 0, ffi.NULL, 1, copy)
    assert dev.descriptors.sets[0x5E3] == {(0, 0): (0xA2, SAMPLED)}
    # a template of two image entries read from a packed struct: [pad 8 bytes][info A][info B], stride 24
    entries = ffi.new("VkDescriptorUpdateTemplateEntry[]", [
        {"dstBinding": 0, "dstArrayElement": 0, "descriptorCount": 1, "descriptorType": SAMPLED, "offset": 8,
         "stride": 24},
        {"dstBinding": 1, "dstArrayElement": 0, "descriptorCount": 1, "descriptorType": STORAGE, "offset": 32,
         "stride": 24}])
    info = ffi.new("VkDescriptorUpdateTemplateCreateInfo *", {
        "descriptorUpdateEntryCount": 2, "pDescriptorUpdateEntries": entries,
        "templateType": vk.VK_DESCRIPTOR_UPDATE_TEMPLATE_TYPE_DESCRIPTOR_SET})
    h.after_vkCreateDescriptorUpdateTemplate(dev, vk.VK_SUCCESS, None, info, ffi.NULL,
                                             ffi.new("VkDescriptorUpdateTemplate *", 0x7E))
    data = ffi.new("char[]", 56)
    ffi.cast("VkDescriptorImageInfo *", data + 8).imageView = ffi.cast("VkImageView", 0x51)
    ffi.cast("VkDescriptorImageInfo *", data + 32).imageView = ffi.cast("VkImageView", 0x53)
    h.after_vkUpdateDescriptorSetWithTemplate(dev, None, None, ffi.cast("VkDescriptorSet", 0x5E4),
                                              ffi.cast("VkDescriptorUpdateTemplate", 0x7E), data)
    assert dev.descriptors.sets[0x5E4] == {(0, 0): (0xA1, SAMPLED), (1, 0): (0xA3, STORAGE)}
    # push descriptors: a set of the command buffer's own
    h.before_vkCmdPushDescriptorSet(dev, 0x11, GRAPHICS, None, 0, 1, _writes(ffi, keep, (0, 0, 0, SAMPLED, [0x52])))
    t = rig.state.command_buffer(dev, 0x11)
    assert t.descriptors.images(GRAPHICS) == ({0xA2}, set())
    h.before_vkDestroyDescriptorUpdateTemplate(dev, None, ffi.cast("VkDescriptorUpdateTemplate", 0x7E), ffi.NULL)
    assert dev.descriptors.templates == {}
    # descriptor buffers: what the workloads read is unknown (None: they stay opaque)
    h.before_vkCmdBindDescriptorBuffersEXT(dev, 0x11, 0, ffi.NULL)
    assert resources(t.descriptors, GRAPHICS) is None


def _pass(rig, cb: int) -> tuple[RenderPasses, list]:
    sent: list = []
    rig.state.session = NS(transport=NS(send_soon=lambda *a: sent.append(a)))
    labeller = NS(next_tag=iter(range(1, 100)).__next__, push=lambda *a: True, pop=lambda *a: None)
    passes = RenderPasses(rig.state, labeller, capture=None, descriptors=True)
    info = PassInfo("vkCmdBeginRendering", 0, 64, 64, 1, 1, [{"aspect": "color"}], 0, 0, True, images=[0xC0],
                    usage=[-1])
    passes._start(rig.dev, rig.state.command_buffer(rig.dev, cb), cb, info)
    return passes, sent


def test_a_pass_names_what_each_draw_read_and_what_its_secondaries_read(rig) -> None:
    ffi, h, dev, keep = rig.ffi, rig.hooks, rig.dev, []
    h.after_vkUpdateDescriptorSets(dev, None, None, 2, _writes(ffi, keep, (0x5E1, 0, 0, SAMPLED, [0x51]),
                                                               (0x5E2, 0, 0, STORAGE, [0x53])), 0, ffi.NULL)
    passes, _ = _pass(rig, 0x10)
    t = rig.state.command_buffer(dev, 0x10)
    h.before_vkCmdBindDescriptorSets(dev, 0x10, GRAPHICS, None, 0, 1, _sets(ffi, 0x5E1), 0, ffi.NULL)
    passes.before_vkCmdDraw(dev, 0x10, 3, 1, 0, 0)
    h.before_vkCmdBindDescriptorSets(dev, 0x10, GRAPHICS, None, 0, 1, _sets(ffi, 0x5E2), 0, ffi.NULL)
    h.before_vkCmdBindDescriptorSets(dev, 0x10, COMPUTE, None, 0, 1, _sets(ffi, 0x5E1), 0, ffi.NULL)
    # a secondary continuing the pass draws with its own binding of a view of 0xA2
    h.before_vkCmdPushDescriptorSet(dev, 0x901, GRAPHICS, None, 0, 1, _writes(ffi, keep, (0, 0, 0, COMBINED, [0x52])))
    passes.before_vkCmdDraw(dev, 0x901, 3, 1, 0, 0)
    t.ops.append(Execute([rig.state.command_buffer(dev, 0x901)]))
    passes.before_vkCmdDrawIndexed(dev, 0x10, 3, 1, 0, 0, 0)
    part = t.part
    passes.after_vkCmdEndRendering(dev, None, 0x10)
    (_, kind, meta, _), = t.described
    assert kind == "render_pass" and part.meta is None
    assert meta["resources"] == {"attachments": ["0xc0"], "reads": ["0xa1", "0xa2"], "storage": ["0xa3"]}


def test_a_pass_with_descriptor_buffers_or_suspended_names_no_reads(rig) -> None:
    ffi, h, dev = rig.ffi, rig.hooks, rig.dev
    passes, _ = _pass(rig, 0x10)
    h.before_vkCmdBindDescriptorBuffersEXT(dev, 0x10, 0, ffi.NULL)
    passes.before_vkCmdDraw(dev, 0x10, 3, 1, 0, 0)
    passes.after_vkCmdEndRendering(dev, None, 0x10)
    (_, _, meta, _), = rig.state.command_buffer(dev, 0x10).described
    assert meta["resources"] == {"attachments": ["0xc0"]}
    passes, _ = _pass(rig, 0x12)
    t = rig.state.command_buffer(dev, 0x12)
    t.part.suspends = True
    passes.before_vkCmdDraw(dev, 0x12, 3, 1, 0, 0)
    passes.before_vkEndCommandBuffer(dev, 0x12)
    (_, _, meta, _), = t.described
    assert "reads" not in meta["resources"]
    # a pass with draws but nothing bound reads nothing (and says so: it is not opaque)
    passes, _ = _pass(rig, 0x13)
    passes.before_vkCmdDraw(dev, 0x13, 3, 1, 0, 0)
    passes.after_vkCmdEndRendering(dev, None, 0x13)
    (_, _, meta, _), = rig.state.command_buffer(dev, 0x13).described
    assert meta["resources"] == {"attachments": ["0xc0"], "reads": [], "storage": []}


def test_only_content_mode_hands_the_descriptor_hooks_out() -> None:
    rows = intercepts.owners(intercepts.LAYER)
    assert all("tessera.layer.descriptors" in rows[name] for name in CONTENT_ONLY)
    recorded = intercepts.recorded(intercepts.LAYER)
    assert all(recorded[name].record is False for name in CONTENT_ONLY if name.startswith("vkCmd"))
    assert PassReads().to_json() == {"reads": [], "storage": []} and BoundSets().images(GRAPHICS) == (set(), set())


def test_sets_are_forgotten_when_freed_or_with_their_pool(rig) -> None:
    ffi, h, dev = rig.ffi, rig.hooks, rig.dev
    for pool, sets in ((0xB1, (0x5E1, 0x5E2)), (0xB2, (0x5E3,))):
        alloc = ffi.new("VkDescriptorSetAllocateInfo *", {"descriptorPool": pool, "descriptorSetCount": len(sets)})
        h.after_vkAllocateDescriptorSets(dev, vk.VK_SUCCESS, None, alloc, _sets(ffi, *sets))
    assert set(dev.descriptors.sets) == {0x5E1, 0x5E2, 0x5E3}
    h.before_vkFreeDescriptorSets(dev, None, 0xB1, 1, _sets(ffi, 0x5E1))
    assert set(dev.descriptors.sets) == {0x5E2, 0x5E3} and dev.descriptors.pools[0xB1] == {0x5E2}
    h.before_vkResetDescriptorPool(dev, None, 0xB1, 0)
    h.before_vkDestroyDescriptorPool(dev, None, 0xB2, ffi.NULL)
    assert dev.descriptors.sets == {} and dev.descriptors.pools == {}


def test_a_draw_after_an_update_of_a_bound_set_sees_it(rig) -> None:
    """The images of the bound sets are computed once per run of draws with nothing bound or written in
    between: a write to a bound set (or a new bind) between two draws is seen by the second."""
    ffi, h, dev, keep = rig.ffi, rig.hooks, rig.dev, []
    h.after_vkUpdateDescriptorSets(dev, None, None, 1, _writes(ffi, keep, (0x5E1, 0, 0, SAMPLED, [0x51])), 0, ffi.NULL)
    passes, _ = _pass(rig, 0x10)
    t = rig.state.command_buffer(dev, 0x10)
    h.before_vkCmdBindDescriptorSets(dev, 0x10, GRAPHICS, None, 0, 1, _sets(ffi, 0x5E1), 0, ffi.NULL)
    passes.before_vkCmdDraw(dev, 0x10, 3, 1, 0, 0)
    first = t.descriptors.images(GRAPHICS)
    passes.before_vkCmdDraw(dev, 0x10, 3, 1, 0, 0)
    assert t.descriptors.images(GRAPHICS) is first and t.part.descriptor_reads.reads == {0xA1}
    h.after_vkUpdateDescriptorSets(dev, None, None, 1, _writes(ffi, keep, (0x5E1, 0, 0, STORAGE, [0x53])), 0, ffi.NULL)
    passes.before_vkCmdDraw(dev, 0x10, 3, 1, 0, 0)
    h.before_vkCmdPushDescriptorSet(dev, 0x10, GRAPHICS, None, 1, 1, _writes(ffi, keep, (0, 0, 0, SAMPLED, [0x52])))
    passes.before_vkCmdDraw(dev, 0x10, 3, 1, 0, 0)
    passes.after_vkCmdEndRendering(dev, None, 0x10)
    (_, _, meta, _), = t.described
    assert meta["resources"]["reads"] == ["0xa1", "0xa2"] and meta["resources"]["storage"] == ["0xa3"]


def test_only_the_sets_the_bound_pipelines_layout_has_count(rig) -> None:
    """A set stays bound when a pipeline whose layout has no set is bound next: its images no longer count
    for that pipeline's draws (PipelineSets, content mode); a pipeline the layer did not see made counts all."""
    from tessera.layer.descriptors import PipelineSets

    ffi, h, dev, keep = rig.ffi, rig.hooks, rig.dev, []
    p = PipelineSets(h)
    for layout, count in ((0x1A0, 0), (0x1A1, 1)):
        p_info = ffi.new("VkPipelineLayoutCreateInfo *", {"setLayoutCount": count})
        h.after_vkCreatePipelineLayout(dev, vk.VK_SUCCESS, None, p_info, ffi.NULL,
                                       ffi.new("VkPipelineLayout *", layout))
    infos = ffi.new("VkGraphicsPipelineCreateInfo[]", [{"layout": 0x1A0}, {"layout": 0x1A1}])
    p.after_vkCreateGraphicsPipelines(dev, vk.VK_SUCCESS, None, None, 2, infos, ffi.NULL,
                                      ffi.new("VkPipeline[]", [0x9A0, 0x9A1]))
    assert dev.descriptors.pipelines == {0x9A0: 0, 0x9A1: 1}
    h.after_vkUpdateDescriptorSets(dev, None, None, 1, _writes(ffi, keep, (0x5E1, 0, 0, SAMPLED, [0x51])), 0, ffi.NULL)
    h.before_vkCmdBindDescriptorSets(dev, 0x10, GRAPHICS, None, 0, 1, _sets(ffi, 0x5E1), 0, ffi.NULL)
    t = rig.state.command_buffer(dev, 0x10)
    p.apply_vkCmdBindPipeline(dev, 0x10, GRAPHICS, 0x9A1)
    assert t.descriptors.images(GRAPHICS) == ({0xA1}, set())
    p.apply_vkCmdBindPipeline(dev, 0x10, GRAPHICS, 0x9A0)
    assert t.descriptors.images(GRAPHICS) == (set(), set())
    p.before_vkCmdBindPipeline(dev, 0x10, GRAPHICS, 0x9FF)          # made before the layer saw it: every set
    assert t.descriptors.images(GRAPHICS) == ({0xA1}, set())
