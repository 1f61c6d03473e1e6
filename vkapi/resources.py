"""What the layer and the driver remember about resources, to size workloads:
buffer sizes (VK_WHOLE_SIZE), images and views (pixels, bytes), framebuffers
and render passes (attachments, load/store ops), shader modules and
pipelines (work-group size, shader costs), and the size arithmetic of
transfer commands.

Keyed by non-dispatchable handle value; owned by a device object; written by
create/destroy hooks (resource_hooks.py), read by recording hooks.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields
from typing import Any

from .vkconst import vk


@dataclass(frozen=True)
class Image:
    format: int
    width: int
    height: int
    depth: int
    layers: int
    mips: int
    samples: int
    usage: int = 0                 # VkImageUsageFlags


@dataclass(frozen=True)
class ImageView:
    image: int
    format: int
    layers: int


@dataclass(frozen=True)
class Attachment:
    format: int
    samples: int
    load_op: int
    store_op: int
    stencil_load_op: int
    stencil_store_op: int


@dataclass(frozen=True)
class RenderPass:
    attachments: tuple[Attachment, ...]
    subpasses: int
    resolves: tuple[int, ...]      # attachment indices used as resolve targets
    waits_before: bool = False     # a subpass dependency from VK_SUBPASS_EXTERNAL: acts as a barrier before
    waits_after: bool = False      # a subpass dependency to VK_SUBPASS_EXTERNAL: acts as a barrier after


@dataclass(frozen=True)
class Framebuffer:
    width: int
    height: int
    layers: int
    views: tuple[int, ...]         # empty for imageless framebuffers


@dataclass(frozen=True)
class Pipeline:
    bind_point: int
    group_size: tuple[int, int, int] | None = None   # compute
    shader_cycles: dict[str, float] = field(default_factory=dict)   # stage -> cycles per invocation, when known
    instrumented: Any = None       # driver: icd.instrumentation.objects.InstrumentedPipeline: its shaders count blocks
    visible: Any = None            # driver: icd.visible_prims.Plan: its draws' positions are captured and culled


class Generation:
    """A counter moved on by every replacement or removal in any table of one Resources (under a lock:
    two threads destroying at once both count)."""

    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()
        self._watchers: list = []

    def move_on(self) -> None:
        with self._lock:
            self.value += 1
            for watch in self._watchers:   # in order, under the lock: a watcher never sees it go back
                watch(self.value)

    def watch(self, watch) -> None:
        """Call `watch(value)` now and whenever the value moves on."""
        with self._lock:
            self._watchers.append(watch)
            watch(self.value)


class Versioned(dict):
    """A table of Resources: replacing or removing an entry moves the shared generation on, so a
    re-recording that named the old object is not reused (vkapi/replay.py). Reads are dict's own."""
    __slots__ = ("_generation",)

    def __init__(self, generation: Generation, items=()) -> None:
        super().__init__(items)
        self._generation = generation

    def __setitem__(self, key, value) -> None:
        if key in self:
            self._generation.move_on()
        dict.__setitem__(self, key, value)

    def __delitem__(self, key) -> None:
        self._generation.move_on()
        dict.__delitem__(self, key)

    def pop(self, key, *default):
        if key in self:
            self._generation.move_on()
        return dict.pop(self, key, *default)

    def popitem(self):
        self._generation.move_on()
        return dict.popitem(self)

    def clear(self) -> None:
        self._generation.move_on()
        dict.clear(self)

    def update(self, *args, **kwargs) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value


@dataclass
class Resources:
    buffers: dict[int, int] = field(default_factory=dict)        # buffer -> size
    shader_objects: dict[int, tuple[int, "Pipeline"]] = field(default_factory=dict)   # VkShaderEXT -> (stage, cost)
    images: dict[int, Image] = field(default_factory=dict)
    views: dict[int, ImageView] = field(default_factory=dict)
    render_passes: dict[int, RenderPass] = field(default_factory=dict)
    framebuffers: dict[int, Framebuffer] = field(default_factory=dict)
    shaders: dict[int, bytes] = field(default_factory=dict)      # shader module -> SPIR-V
    pipelines: dict[int, Pipeline] = field(default_factory=dict)
    accels: dict[int, tuple[int, int]] = field(default_factory=dict)      # acceleration structure -> (size, type)
    buffer_addresses: dict[int, int] = field(default_factory=dict)     # buffer -> device address (accel.py)
    tensors: dict[int, tuple[tuple[int, ...], int]] = field(default_factory=dict)   # VkTensorARM -> (dimensions, element bytes)

    def __post_init__(self) -> None:
        self._generation = Generation()
        for f in fields(self):
            setattr(self, f.name, Versioned(self._generation, getattr(self, f.name)))

    @property
    def generation(self) -> int:
        """How many entries of any table were replaced or removed so far."""
        return self._generation.value

    def on_generation(self, watch) -> None:
        """Call `watch(generation)` now and whenever the generation moves on (the C copy of it:
        vkapi/lifecycle.py)."""
        self._generation.watch(watch)


def texel_bytes(fmt: int) -> float:
    """Bytes per texel of a format (compressed formats: block bytes / texels per block)."""
    entry = vk.FORMATS.get(fmt)
    if entry is None:
        return 4.0
    _, block, texels, _ = entry
    return block / max(1, texels)


def format_name(fmt: int) -> str:
    entry = vk.FORMATS.get(fmt)
    return entry[0] if entry else f"format {fmt}"


# ---- sizes of transfer commands ------------------------------------------------

def fill_bytes(size: int, offset: int, buffer_size: int | None) -> int:
    """vkCmdFillBuffer: VK_WHOLE_SIZE fills to the end, rounded down to 4 bytes (spec 20.3)."""
    if size != vk.VK_WHOLE_SIZE:
        return size
    return max(0, (buffer_size if buffer_size is not None else offset) - offset) & ~3


def subresource_pixels(img: Image, r) -> int:
    """Texels of a VkImageSubresourceRange (all mips and layers it names)."""
    levels = img.mips - r.baseMipLevel if r.levelCount == vk.VK_REMAINING_MIP_LEVELS else r.levelCount
    layers = img.layers - r.baseArrayLayer if r.layerCount == vk.VK_REMAINING_ARRAY_LAYERS else r.layerCount
    return sum(max(1, img.width >> m) * max(1, img.height >> m) * max(1, img.depth >> m) * layers
               for m in range(r.baseMipLevel, r.baseMipLevel + levels))


def image_copy_pixels(r) -> int:
    """VkImageCopy / VkImageResolve (and their 2 variants)."""
    e = r.extent
    return e.width * e.height * e.depth * r.srcSubresource.layerCount


def buffer_image_pixels(r) -> int:
    """VkBufferImageCopy (and 2)."""
    e = r.imageExtent
    return e.width * e.height * e.depth * r.imageSubresource.layerCount


def blit_pixels(r) -> int:
    """VkImageBlit (and 2): texels written to the destination."""
    a, b = r.dstOffsets[0], r.dstOffsets[1]
    return abs(b.x - a.x) * abs(b.y - a.y) * max(1, abs(b.z - a.z)) * r.dstSubresource.layerCount


def image_bytes(img: Image | None, pixels: int) -> int:
    return int(pixels * texel_bytes(img.format) * img.samples) if img else 0
