"""Images read through descriptors (#28, `tessera run --content`): what each draw and dispatch samples.

Role: under content mode (LayerSettings.content) the layer follows which image views each descriptor
set holds and which sets each command buffer has bound, so each workload's WORKLOAD `resources`
names the images it may read through descriptors: `reads` (sampled images, combined image samplers,
input attachments) and `storage` (storage images: read, and perhaps written). hostd's render graph
(hostd/advice/graph.py) then links a shadow map sampled by a later pass to the pass that wrote it, and
no longer takes such a workload as opaque (able to read anything): a store nothing reads is called
unread even for a sampleable image. A workload whose command buffer bound descriptor buffers
(VK_EXT_descriptor_buffer), which the layer cannot read, gets no `reads`: it stays opaque.

What is followed (every way core Vulkan and VK_KHR_push_descriptor write image descriptors):
  - vkAllocateDescriptorSets (a set starts empty; freed with vkFreeDescriptorSets, or with its pool by
    vkResetDescriptorPool / vkDestroyDescriptorPool), vkUpdateDescriptorSets (writes, copies),
    vkCreate/DestroyDescriptorUpdateTemplate and vkUpdateDescriptorSetWithTemplate;
  - vkCmdBindDescriptorSets(2), vkCmdPushDescriptorSet(2), vkCmdPushDescriptorSetWithTemplate(2);
  - vkCmdBindDescriptorBuffersEXT: the command buffer's workloads are untracked from there on.
A set's images are keyed by (binding, array element) as written; a write whose descriptorCount runs past
its binding's size continues into the next binding (spec 14.2.4), which the layer, knowing no set
layouts, keeps under consecutive elements of the first: the images a set holds are the same. The sets
counted are those bound to the workload's bind point below the set count of the bound pipeline's layout
(vkCreatePipelineLayout, vkCreateGraphicsPipelines / vkCreateComputePipelines, vkCmdBindPipeline:
PipelineSets, hooked under --content only; a pipeline the layer did not see made, or shader objects,
count every bound set); every image of such a set counts, whether the shaders use that binding or not
(reflection would narrow it): a read too many hides a flag, it never makes one. Sets are read when the
draw or dispatch is recorded: an UPDATE_AFTER_BIND write made later is not seen.

Cost: only content mode hands these hooks out (CONTENT_ONLY: entry.py leaves them out of GetProcAddr's
answers otherwise), so the default recording path does not change. In content mode the vkCmd ones and
the draws take the Python path (vkapi/intercepts.py CONTENT_FORWARDED, CONTENT_DRAWS; the rest stays
recorded in C, applied in order after them); a draw then adds a union of its bound sets' images.

State: a DescriptorState on each device (`DeviceState.descriptors`: sets, pools, templates, pipeline
layouts' and pipelines' set counts) and a BoundSets on
each command buffer (`CommandBufferTracker.descriptors`), written on the threads recording (Vulkan's
external synchronisation of sets and command buffers keeps them apart).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tessera.vkapi.vkconst import vk

# vkCmd* commands and device commands only content mode hands out (see the module docstring).
CONTENT_ONLY = (
    "vkCreatePipelineLayout", "vkAllocateDescriptorSets", "vkFreeDescriptorSets", "vkResetDescriptorPool",
    "vkDestroyDescriptorPool", "vkUpdateDescriptorSets", "vkCreateDescriptorUpdateTemplate",
    "vkDestroyDescriptorUpdateTemplate", "vkUpdateDescriptorSetWithTemplate", "vkCmdBindDescriptorSets",
    "vkCmdBindDescriptorSets2", "vkCmdPushDescriptorSet", "vkCmdPushDescriptorSet2",
    "vkCmdPushDescriptorSetWithTemplate", "vkCmdPushDescriptorSetWithTemplate2", "vkCmdBindDescriptorBuffersEXT",
)
READ_TYPES = frozenset({vk.VK_DESCRIPTOR_TYPE_SAMPLED_IMAGE, vk.VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER,
                        vk.VK_DESCRIPTOR_TYPE_INPUT_ATTACHMENT})
STORAGE_TYPES = frozenset({vk.VK_DESCRIPTOR_TYPE_STORAGE_IMAGE})
IMAGE_TYPES = READ_TYPES | STORAGE_TYPES
GRAPHICS, COMPUTE = vk.VK_PIPELINE_BIND_POINT_GRAPHICS, vk.VK_PIPELINE_BIND_POINT_COMPUTE
RAY_TRACING = vk.VK_PIPELINE_BIND_POINT_RAY_TRACING_KHR
# VkShaderStageFlags of each bind point (vkCmdBindDescriptorSets2 and vkCmdPushDescriptorSet2 name stages)
STAGES_OF = ((GRAPHICS, vk.VK_SHADER_STAGE_ALL_GRAPHICS),
             (COMPUTE, vk.VK_SHADER_STAGE_COMPUTE_BIT),
             (RAY_TRACING, vk.VK_SHADER_STAGE_RAYGEN_BIT_KHR | vk.VK_SHADER_STAGE_ANY_HIT_BIT_KHR
              | vk.VK_SHADER_STAGE_CLOSEST_HIT_BIT_KHR | vk.VK_SHADER_STAGE_MISS_BIT_KHR
              | vk.VK_SHADER_STAGE_INTERSECTION_BIT_KHR | vk.VK_SHADER_STAGE_CALLABLE_BIT_KHR))

BIND_POINT_OF_KIND = {"dispatch": COMPUTE, "trace_rays": RAY_TRACING}   # workloads described with their reads
Slots = dict[tuple[int, int], tuple[int, int]]      # (binding, element) -> (VkImage, VkDescriptorType)


@dataclass
class Template:
    entries: tuple[tuple[int, int, int, int, int, int], ...]    # binding, element, count, type, offset, stride
    bind_point: int = GRAPHICS                                   # push-descriptor templates


@dataclass
class DescriptorState:
    """A device's descriptor sets (their image slots) and update templates."""
    sets: dict[int, Slots] = field(default_factory=dict)
    templates: dict[int, Template] = field(default_factory=dict)
    pools: dict[int, set[int]] = field(default_factory=dict)     # pool -> the sets allocated from it
    updates: int = 0              # bumped by every change to a set's slots (BoundSets.images' cache)
    layouts: dict[int, int] = field(default_factory=dict)       # pipeline layout -> its setLayoutCount
    pipelines: dict[int, int] = field(default_factory=dict)     # pipeline -> its layout's set count


@dataclass
class BoundSets:
    """What a command buffer has bound: per bind point, set index -> its slots (a set's own dict, so a
    later update before the draw is seen; a push descriptor set's own)."""
    bound: dict[int, dict[int, Slots]] = field(default_factory=dict)
    untracked: bool = False           # descriptor buffers bound: its workloads read what the layer cannot see
    continued: "PassReads | None" = None   # a secondary's draws continuing a render pass: what they read
    device: DescriptorState | None = None  # whose `updates` invalidate the cache
    changed: int = 0                  # bumped by every bind and push
    set_counts: dict[int, int] = field(default_factory=dict)   # bind point -> the bound pipeline's set count
    _cache: tuple = (None, None)      # (key, images): a run of draws with nothing bound or written between

    def images(self, bind_point: int) -> tuple[set[int], set[int]]:
        """(images read, storage images) of every set bound at `bind_point` (the same object while
        nothing is bound or written: a draw after a draw costs a comparison)."""
        key = (bind_point, self.changed, self.device.updates if self.device is not None else 0)
        if self._cache[0] == key:
            return self._cache[1]
        reads: set[int] = set()
        storage: set[int] = set()
        limit = self.set_counts.get(bind_point)
        for index, slots in self.bound.get(bind_point, {}).items():
            if limit is not None and index >= limit:      # the bound pipeline's layout has no such set
                continue
            for image, dtype in slots.values():
                (storage if dtype in STORAGE_TYPES else reads).add(image)
        self._cache = (key, (reads, storage))
        return reads, storage


@dataclass
class PassReads:
    """What the draws of a render pass part read through descriptors (RenderPasses under --content)."""
    reads: set[int] = field(default_factory=set)
    storage: set[int] = field(default_factory=set)
    untracked: bool = False
    ops_start: int = 0                # its command buffer's ops when it began (secondaries executed since)
    _last: tuple | None = None        # the images added last (BoundSets.images' object)

    def add(self, bound: BoundSets | None) -> None:
        if bound is None:
            return
        if bound.untracked:
            self.untracked = True
            return
        got = bound.images(GRAPHICS)
        if got is self._last:
            return
        self._last = got
        self.reads |= got[0]
        self.storage |= got[1]

    def join(self, other: "PassReads") -> None:
        self.reads |= other.reads
        self.storage |= other.storage
        self.untracked |= other.untracked

    def to_json(self) -> dict | None:
        """The WORKLOAD `resources` entries (None: untracked)."""
        if self.untracked:
            return None
        return {"reads": [f"0x{i:x}" for i in sorted(self.reads)],
                "storage": [f"0x{i:x}" for i in sorted(self.storage)]}


def note_draw(t) -> None:
    """A draw recorded into the command buffer tracked by `t`: its open part's reads, or, in a secondary
    continuing a render pass, the reads that pass gets when the secondary is executed."""
    if t.part is not None:
        if t.part.descriptor_reads is not None:
            t.part.descriptor_reads.add(t.descriptors)
    elif t.level == vk.VK_COMMAND_BUFFER_LEVEL_SECONDARY:
        if t.descriptors is None:
            t.descriptors = BoundSets()
        if t.descriptors.continued is None:
            t.descriptors.continued = PassReads()
        t.descriptors.continued.add(t.descriptors)


def resources(bound: BoundSets | None, bind_point: int) -> dict | None:
    """The WORKLOAD `resources` entries of a workload recorded with `bound` (None: untracked)."""
    if bound is None:                                 # nothing bound in this command buffer
        return {"reads": [], "storage": []}
    if bound.untracked:
        return None
    reads, storage = bound.images(bind_point)
    return {"reads": [f"0x{i:x}" for i in sorted(reads)], "storage": [f"0x{i:x}" for i in sorted(storage)]}


def _handle(ffi, h) -> int:
    return int(ffi.cast("uint64_t", h))


def _bind_points(stages: int) -> list[int]:
    return [point for point, mask in STAGES_OF if stages & mask]


class Descriptors:
    """The hooks: one method per command (HookSet.bind). `state`: the layer state (command buffers,
    ffi); a device's views (vkapi resource_hooks' `res.views`) turn views into images."""

    def __init__(self, state) -> None:
        self.state = state
        self.ffi = state.ffi

    # ---- per device ------------------------------------------------------------------
    @staticmethod
    def _device(dev) -> DescriptorState:
        if dev.descriptors is None:
            dev.descriptors = DescriptorState()
        return dev.descriptors

    def _image(self, dev, view) -> int:
        v = dev.res.views.get(_handle(self.ffi, view))
        return v.image if v is not None else 0

    def _write(self, dev, slots: Slots, w) -> None:
        """One VkWriteDescriptorSet into `slots`."""
        dtype = w.descriptorType
        if dtype not in IMAGE_TYPES:
            for k in range(w.descriptorCount):            # an image slot overwritten by another kind
                slots.pop((w.dstBinding, w.dstArrayElement + k), None)
            return
        if w.pImageInfo == self.ffi.NULL:
            return
        for k in range(w.descriptorCount):
            image = self._image(dev, w.pImageInfo[k].imageView)
            key = (w.dstBinding, w.dstArrayElement + k)
            if image:
                slots[key] = (image, dtype)
            else:
                slots.pop(key, None)

    def after_vkAllocateDescriptorSets(self, dev, result, device, pAllocateInfo, pDescriptorSets):
        if result != vk.VK_SUCCESS:
            return
        d = self._device(dev)
        d.updates += 1
        pool = d.pools.setdefault(_handle(self.ffi, pAllocateInfo.descriptorPool), set())
        for i in range(pAllocateInfo.descriptorSetCount):
            h = _handle(self.ffi, pDescriptorSets[i])
            d.sets[h] = {}
            pool.add(h)

    def _forget_pool(self, dev, pool) -> None:
        d = self._device(dev)
        d.updates += 1
        for h in d.pools.pop(_handle(self.ffi, pool), ()):
            d.sets.pop(h, None)

    def before_vkFreeDescriptorSets(self, dev, device, pool, count, pDescriptorSets):
        d = self._device(dev)
        d.updates += 1
        owned = d.pools.get(_handle(self.ffi, pool), set())
        for i in range(count):
            h = _handle(self.ffi, pDescriptorSets[i])
            d.sets.pop(h, None)
            owned.discard(h)

    def before_vkResetDescriptorPool(self, dev, device, pool, flags):
        self._forget_pool(dev, pool)

    def before_vkDestroyDescriptorPool(self, dev, device, pool, pAllocator):
        self._forget_pool(dev, pool)

    def after_vkUpdateDescriptorSets(self, dev, result, device, writeCount, pWrites, copyCount, pCopies):
        d = self._device(dev)
        d.updates += 1
        sets = d.sets
        for i in range(writeCount):
            w = pWrites[i]
            self._write(dev, sets.setdefault(_handle(self.ffi, w.dstSet), {}), w)
        for i in range(copyCount):                        # copies see the writes before them (spec 14.2.4)
            c = pCopies[i]
            src = sets.get(_handle(self.ffi, c.srcSet), {})
            dst = sets.setdefault(_handle(self.ffi, c.dstSet), {})
            for k in range(c.descriptorCount):
                got = src.get((c.srcBinding, c.srcArrayElement + k))
                key = (c.dstBinding, c.dstArrayElement + k)
                if got is None:
                    dst.pop(key, None)
                else:
                    dst[key] = got

    def after_vkCreateDescriptorUpdateTemplate(self, dev, result, device, pCreateInfo, pAllocator, pTemplate):
        if result != vk.VK_SUCCESS:
            return
        info = pCreateInfo
        entries = tuple((e.dstBinding, e.dstArrayElement, e.descriptorCount, e.descriptorType, e.offset, e.stride)
                        for e in (info.pDescriptorUpdateEntries[i] for i in range(info.descriptorUpdateEntryCount)))
        push = info.templateType == vk.VK_DESCRIPTOR_UPDATE_TEMPLATE_TYPE_PUSH_DESCRIPTORS_KHR
        self._device(dev).templates[_handle(self.ffi, pTemplate[0])] = Template(
            entries, info.pipelineBindPoint if push else GRAPHICS)

    def before_vkDestroyDescriptorUpdateTemplate(self, dev, device, template, pAllocator):
        self._device(dev).templates.pop(_handle(self.ffi, template), None)

    def after_vkCreatePipelineLayout(self, dev, result, device, pCreateInfo, pAllocator, pLayout):
        if result == vk.VK_SUCCESS:
            self._device(dev).layouts[_handle(self.ffi, pLayout[0])] = int(pCreateInfo.setLayoutCount)

    def _template_write(self, dev, slots: Slots, t: Template, pData) -> None:
        ffi = self.ffi
        base = ffi.cast("char *", pData)
        for binding, element, count, dtype, offset, stride in t.entries:
            for k in range(count):
                key = (binding, element + k)
                if dtype not in IMAGE_TYPES:
                    slots.pop(key, None)
                    continue
                info = ffi.cast("VkDescriptorImageInfo *", base + offset + k * stride)
                image = self._image(dev, info.imageView)
                if image:
                    slots[key] = (image, dtype)
                else:
                    slots.pop(key, None)

    def after_vkUpdateDescriptorSetWithTemplate(self, dev, result, device, descriptorSet, template, pData):
        d = self._device(dev)
        d.updates += 1
        t = d.templates.get(_handle(self.ffi, template))
        if t is not None and pData != self.ffi.NULL:
            self._template_write(dev, d.sets.setdefault(_handle(self.ffi, descriptorSet), {}), t, pData)

    # ---- per command buffer --------------------------------------------------------------
    def _bound(self, dev, commandBuffer) -> BoundSets:
        t = self.state.command_buffer(dev, commandBuffer)
        if t.descriptors is None:
            t.descriptors = BoundSets()
        if t.descriptors.device is None:
            t.descriptors.device = self._device(dev)
        t.descriptors.changed += 1      # every caller binds or pushes
        return t.descriptors

    def _bind(self, dev, commandBuffer, points: list[int], first: int, count: int, pSets) -> None:
        bound, sets = self._bound(dev, commandBuffer), self._device(dev).sets
        for point in points:
            at = bound.bound.setdefault(point, {})
            for i in range(count):
                h = _handle(self.ffi, pSets[i])
                at[first + i] = sets.setdefault(h, {}) if h else {}

    def before_vkCmdBindDescriptorSets(self, dev, commandBuffer, bindPoint, layout, firstSet, count, pSets,
                                       dynamicCount, pDynamicOffsets):
        self._bind(dev, commandBuffer, [bindPoint], firstSet, count, pSets)

    def before_vkCmdBindDescriptorSets2(self, dev, commandBuffer, pInfo):
        self._bind(dev, commandBuffer, _bind_points(pInfo.stageFlags), pInfo.firstSet, pInfo.descriptorSetCount,
                   pInfo.pDescriptorSets)

    def _push(self, dev, commandBuffer, points: list[int], set_index: int, count: int, pWrites) -> None:
        slots: Slots = {}
        for i in range(count):
            self._write(dev, slots, pWrites[i])
        bound = self._bound(dev, commandBuffer)
        for point in points:
            bound.bound.setdefault(point, {})[set_index] = slots

    def before_vkCmdPushDescriptorSet(self, dev, commandBuffer, bindPoint, layout, set_index, count, pWrites):
        self._push(dev, commandBuffer, [bindPoint], set_index, count, pWrites)

    def before_vkCmdPushDescriptorSet2(self, dev, commandBuffer, pInfo):
        self._push(dev, commandBuffer, _bind_points(pInfo.stageFlags), pInfo.set, pInfo.descriptorWriteCount,
                   pInfo.pDescriptorWrites)

    def _push_template(self, dev, commandBuffer, template, set_index: int, pData) -> None:
        t = self._device(dev).templates.get(_handle(self.ffi, template))
        if t is None or pData == self.ffi.NULL:
            return
        slots: Slots = {}
        self._template_write(dev, slots, t, pData)
        self._bound(dev, commandBuffer).bound.setdefault(t.bind_point, {})[set_index] = slots

    def before_vkCmdPushDescriptorSetWithTemplate(self, dev, commandBuffer, template, layout, set_index, pData):
        self._push_template(dev, commandBuffer, template, set_index, pData)

    def before_vkCmdPushDescriptorSetWithTemplate2(self, dev, commandBuffer, pInfo):
        self._push_template(dev, commandBuffer, pInfo.descriptorUpdateTemplate, pInfo.set, pInfo.pData)

    def before_vkCmdBindDescriptorBuffersEXT(self, dev, commandBuffer, count, pBindingInfos):
        self._bound(dev, commandBuffer).untracked = True


class PipelineSets:
    """Which sets the bound pipeline's layout has: the hooks of commands every mode hands out (pipeline
    layouts, pipelines, pipeline binds), registered in content mode only (`register`), so the default
    mode's pipeline creation and binds run none of this module's Python."""

    def __init__(self, descriptors: Descriptors) -> None:
        self.d = descriptors
        self.ffi = descriptors.ffi

    def _pipelines(self, dev, result, count, pCreateInfos, pPipelines) -> None:
        if result != vk.VK_SUCCESS or pPipelines == self.ffi.NULL:
            return
        d = self.d._device(dev)
        for i in range(count):
            sets = d.layouts.get(_handle(self.ffi, pCreateInfos[i].layout))
            if sets is not None:
                d.pipelines[_handle(self.ffi, pPipelines[i])] = sets

    def after_vkCreateGraphicsPipelines(self, dev, result, device, cache, count, pCreateInfos, pAllocator,
                                        pPipelines):
        self._pipelines(dev, result, count, pCreateInfos, pPipelines)

    def after_vkCreateComputePipelines(self, dev, result, device, cache, count, pCreateInfos, pAllocator,
                                       pPipelines):
        self._pipelines(dev, result, count, pCreateInfos, pPipelines)

    def before_vkCmdBindPipeline(self, dev, commandBuffer, bindPoint, pipeline):
        bound = self.d._bound(dev, commandBuffer)
        sets = bound.device.pipelines.get(_handle(self.ffi, pipeline))
        if sets is None:
            bound.set_counts.pop(int(bindPoint), None)
        else:
            bound.set_counts[int(bindPoint)] = sets

    def apply_vkCmdBindPipeline(self, dev, commandBuffer, bindPoint, pipeline):
        """Recorded in C (intercepts.RECORDED), applied in order before the next Python hook."""
        self.before_vkCmdBindPipeline(dev, commandBuffer, bindPoint, pipeline)


def register(hooks, state, content: bool = False) -> None:
    """`content`: also PipelineSets' hooks; Descriptors' commands are handed out in content mode alone
    (CONTENT_ONLY, entry.py). vkCreatePipelineLayout is one of them: its hook is Descriptors'."""
    descriptors = hooks.bind(Descriptors(state))
    if content:
        hooks.bind(PipelineSets(descriptors))
