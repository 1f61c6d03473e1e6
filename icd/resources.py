"""What the driver remembers about resources, to size workloads at submit:
buffer sizes (VK_WHOLE_SIZE), images and views (pixels, bytes), framebuffers
and render passes (attachments, load/store ops), shader modules and
pipelines (work-group size, shader costs).

Keyed by non-dispatchable handle value; owned by the Device; written by
create/destroy hooks, read by recording hooks.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tessera.vkapi.vkconst import vk


@dataclass(frozen=True)
class Image:
    format: int
    width: int
    height: int
    depth: int
    layers: int
    mips: int
    samples: int


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


@dataclass
class Resources:
    buffers: dict[int, int] = field(default_factory=dict)        # buffer -> size
    images: dict[int, Image] = field(default_factory=dict)
    views: dict[int, ImageView] = field(default_factory=dict)
    render_passes: dict[int, RenderPass] = field(default_factory=dict)
    framebuffers: dict[int, Framebuffer] = field(default_factory=dict)
    shaders: dict[int, bytes] = field(default_factory=dict)      # shader module -> SPIR-V
    pipelines: dict[int, Pipeline] = field(default_factory=dict)


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
