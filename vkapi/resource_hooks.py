"""Create/destroy hooks that remember resource properties (see resources.py).

Shared by the layer and the driver: the observer's owner (their device
object) must have a `res` attribute holding a `Resources`.
"""
from __future__ import annotations

from .resources import Attachment, Framebuffer, Image, ImageView, RenderPass
from .vkconst import vk


def ok(result) -> bool:
    return result == vk.VK_SUCCESS


class ResourceHooks:
    """The create/destroy hooks: one method per command (HookSet.bind); the state is the owner's `res`."""

    def __init__(self, ffi) -> None:
        self.ffi = ffi

    def after_vkCreateBuffer(self, dev, result, device, pCreateInfo, pAllocator, pBuffer):
        if ok(result):
            dev.res.buffers[int(pBuffer[0])] = pCreateInfo.size

    def before_vkDestroyBuffer(self, dev, device, buffer, pAllocator):
        dev.res.buffers.pop(int(buffer), None)

    def after_vkCreateImage(self, dev, result, device, ci, pAllocator, pImage):
        if ok(result):
            e = ci.extent
            dev.res.images[int(pImage[0])] = Image(ci.format, e.width, e.height, e.depth, ci.arrayLayers,
                                                   ci.mipLevels, ci.samples, ci.usage)

    def before_vkDestroyImage(self, dev, device, image, pAllocator):
        dev.res.images.pop(int(image), None)

    def after_vkCreateImageView(self, dev, result, device, ci, pAllocator, pView):
        if ok(result):
            layers = ci.subresourceRange.layerCount
            if layers == vk.VK_REMAINING_ARRAY_LAYERS:
                img = dev.res.images.get(int(ci.image))
                layers = img.layers - ci.subresourceRange.baseArrayLayer if img else 1
            dev.res.views[int(pView[0])] = ImageView(int(ci.image), ci.format, layers)

    def before_vkDestroyImageView(self, dev, device, view, pAllocator):
        dev.res.views.pop(int(view), None)

    def after_vkCreateFramebuffer(self, dev, result, device, ci, pAllocator, pFramebuffer):
        if ok(result):
            imageless = ci.flags & vk.VK_FRAMEBUFFER_CREATE_IMAGELESS_BIT
            views = () if imageless else tuple(int(ci.pAttachments[i]) for i in range(ci.attachmentCount))
            dev.res.framebuffers[int(pFramebuffer[0])] = Framebuffer(ci.width, ci.height, ci.layers, views)

    def before_vkDestroyFramebuffer(self, dev, device, framebuffer, pAllocator):
        dev.res.framebuffers.pop(int(framebuffer), None)

    def after_vkCreateRenderPass(self, dev, result, device, ci, pAllocator, pRenderPass):
        if ok(result):
            dev.res.render_passes[int(pRenderPass[0])] = self.render_pass(ci)

    def after_vkCreateRenderPass2(self, dev, result, device, ci, pAllocator, pRenderPass):
        if ok(result):
            dev.res.render_passes[int(pRenderPass[0])] = self.render_pass(ci)

    def before_vkDestroyRenderPass(self, dev, device, renderPass, pAllocator):
        dev.res.render_passes.pop(int(renderPass), None)

    def render_pass(self, ci) -> RenderPass:
        """What a VkRenderPassCreateInfo or VkRenderPassCreateInfo2 says (the fields read are the same)."""
        atts = tuple(Attachment(a.format, a.samples, a.loadOp, a.storeOp, a.stencilLoadOp, a.stencilStoreOp)
                     for a in (ci.pAttachments[i] for i in range(ci.attachmentCount)))
        resolves = set()
        for s in range(ci.subpassCount):
            sp = ci.pSubpasses[s]
            refs = sp.pResolveAttachments
            if refs != self.ffi.NULL:
                for c in range(sp.colorAttachmentCount):
                    if refs[c].attachment != vk.VK_ATTACHMENT_UNUSED:
                        resolves.add(refs[c].attachment)
        deps = [ci.pDependencies[i] for i in range(ci.dependencyCount)]
        return RenderPass(atts, ci.subpassCount, tuple(sorted(resolves)),
                          waits_before=any(d.srcSubpass == vk.VK_SUBPASS_EXTERNAL for d in deps),
                          waits_after=any(d.dstSubpass == vk.VK_SUBPASS_EXTERNAL for d in deps))


def register(hooks, ffi) -> ResourceHooks:
    return hooks.bind(ResourceHooks(ffi))
