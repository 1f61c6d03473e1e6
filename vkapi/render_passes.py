"""What a render pass begin says: area, layers, subpasses, attachments and
their load/store traffic. Shared by the layer (metadata) and the driver
(timing) for vkCmdBeginRenderPass(2) and vkCmdBeginRendering.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .resources import Resources, format_name, texel_bytes
from .vkconst import vk

_LOAD = {v: k.removeprefix("VK_ATTACHMENT_LOAD_OP_").lower() for k, v in vars(vk).items()
         if k.startswith("VK_ATTACHMENT_LOAD_OP_") and not k.endswith(("_EXT", "_KHR"))}
_STORE = {v: k.removeprefix("VK_ATTACHMENT_STORE_OP_").lower() for k, v in vars(vk).items()
          if k.startswith("VK_ATTACHMENT_STORE_OP_") and not k.endswith(("_EXT", "_KHR", "_QCOM"))}


@dataclass
class PassInfo:
    command: str
    handle: int                  # VkRenderPass, 0 for dynamic rendering
    width: int
    height: int
    layers: int
    subpasses: int
    attachments: list[dict]      # aspect, format, samples, load_op, store_op, resolve
    load_bytes: int
    store_bytes: int
    dynamic: bool
    resuming: bool = False
    suspending: bool = False
    waits_before: bool = False   # a subpass dependency from VK_SUBPASS_EXTERNAL: earlier work first
    waits_after: bool = False    # a subpass dependency to VK_SUBPASS_EXTERNAL: later work waits
    images: list[int] = field(default_factory=list)   # each attachment's VkImage (0: unknown), as `attachments`
    usage: list[int] = field(default_factory=list)    # each attachment's VkImageUsageFlags (-1: unknown)

    @property
    def render_area(self) -> list[int]:
        return [0, 0, self.width, self.height]


def attachment_bytes(area: int, layers: int, texel: float, samples: int) -> int:
    """Bytes one attachment moves between tile memory and external memory when it is loaded
    (LOAD_OP_LOAD: tile read-in) or stored (STORE_OP_STORE: write-back, or a resolve's write):
    every pixel of the render area on every layer, `texel` bytes per sample. The one formula: the
    driver's timing (icd/timing.py, through PassInfo.load_bytes/store_bytes) and the advisor's
    bandwidth (hostd/advice/) both use it."""
    return int(area * layers * texel * max(1, samples))


class _Attachments:
    def __init__(self, area: int, layers: int) -> None:
        self.area, self.layers = area, layers
        self.items: list[dict] = []
        self.images: list[int] = []
        self.usage: list[int] = []
        self.load = self.store = 0

    def add(self, aspect: str, fmt: int, samples: int, load: int, store: int, resolve: bool, image: int = 0,
            usage: int = -1) -> None:
        size = attachment_bytes(self.area, self.layers, texel_bytes(fmt), samples)
        self.images.append(image)
        self.usage.append(usage)
        self.items.append({"aspect": aspect, "format": format_name(fmt), "samples": samples,
                           "load_op": _LOAD.get(load, str(load)), "store_op": _STORE.get(store, str(store)),
                           "resolve": resolve})
        self.load += size if load == vk.VK_ATTACHMENT_LOAD_OP_LOAD else 0
        self.store += size if store == vk.VK_ATTACHMENT_STORE_OP_STORE else 0


def _is_depth_stencil(fmt: int) -> bool:
    name = format_name(fmt)
    return name.startswith(("D16", "D24", "D32", "X8_D24", "S8"))


def describe_begin(res: Resources, begin, command: str) -> PassInfo:
    """vkCmdBeginRenderPass(2): a VkRenderPassBeginInfo."""
    rp = res.render_passes.get(int(begin.renderPass))
    fb = res.framebuffers.get(int(begin.framebuffer))
    ext = begin.renderArea.extent
    layers = fb.layers if fb else 1
    atts = _Attachments(ext.width * ext.height, layers)
    if rp is not None:
        views = fb.views if fb else ()
        for i, a in enumerate(rp.attachments):
            resolve = i in rp.resolves
            aspect = "resolve" if resolve else ("depth_stencil" if _is_depth_stencil(a.format) else "color")
            view = res.views.get(views[i]) if i < len(views) else None    # imageless framebuffers: unknown
            img = res.images.get(view.image) if view else None
            atts.add(aspect, a.format, a.samples, a.load_op, a.store_op, resolve, view.image if view else 0,
                     img.usage if img else -1)
    return PassInfo(command, int(begin.renderPass), ext.width, ext.height, layers, rp.subpasses if rp else 1,
                    atts.items, atts.load, atts.store, dynamic=False,
                    waits_before=bool(rp and rp.waits_before), waits_after=bool(rp and rp.waits_after),
                    images=atts.images, usage=atts.usage)


def describe_rendering(ffi, res: Resources, info, command: str = "vkCmdBeginRendering") -> PassInfo:
    """vkCmdBeginRendering: a VkRenderingInfo (views give formats and samples)."""
    ext = info.renderArea.extent
    layers = max(1, info.layerCount)
    atts = _Attachments(ext.width * ext.height, layers)

    def view_format(view) -> tuple[int, int, int, int]:
        v = res.views.get(int(view))
        img = res.images.get(v.image) if v else None
        return ((v.format if v else vk.VK_FORMAT_UNDEFINED), (img.samples if img else 1), (v.image if v else 0),
                (img.usage if img else -1))

    def one(aspect: str, a) -> None:
        if a == ffi.NULL or not int(a.imageView):
            return
        fmt, samples, image, usage = view_format(a.imageView)
        atts.add(aspect, fmt, samples, a.loadOp, a.storeOp, False, image, usage)
        if a.resolveMode and int(a.resolveImageView):
            rfmt, _, rimage, rusage = view_format(a.resolveImageView)
            atts.add("resolve", rfmt, 1, vk.VK_ATTACHMENT_LOAD_OP_DONT_CARE, vk.VK_ATTACHMENT_STORE_OP_STORE, True,
                     rimage, rusage)

    for i in range(info.colorAttachmentCount):
        one("color", info.pColorAttachments + i)
    one("depth", info.pDepthAttachment)
    one("stencil", info.pStencilAttachment)
    return PassInfo(command, 0, ext.width, ext.height, layers, 1, atts.items, atts.load, atts.store, dynamic=True,
                    resuming=bool(info.flags & vk.VK_RENDERING_RESUMING_BIT),
                    suspending=bool(info.flags & vk.VK_RENDERING_SUSPENDING_BIT), images=atts.images,
                    usage=atts.usage)
