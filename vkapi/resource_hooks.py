"""Create/destroy hooks that remember resource properties (see resources.py).

Shared by the layer and the driver: the observer's owner (their device
object) must have a `res` attribute holding a `Resources`.
"""
from __future__ import annotations

from .resources import Attachment, Framebuffer, Image, ImageView, RenderPass
from .vkconst import vk



def register(hooks, ffi) -> None:

    def ok(result) -> bool:
        return result == vk.VK_SUCCESS

    @hooks.after("vkCreateBuffer")
    def after_create_buffer(dev, result, device, pCreateInfo, pAllocator, pBuffer):
        if ok(result):
            dev.res.buffers[int(pBuffer[0])] = pCreateInfo.size

    @hooks.before("vkDestroyBuffer")
    def before_destroy_buffer(dev, device, buffer, pAllocator):
        dev.res.buffers.pop(int(buffer), None)

    @hooks.after("vkCreateImage")
    def after_create_image(dev, result, device, ci, pAllocator, pImage):
        if ok(result):
            e = ci.extent
            dev.res.images[int(pImage[0])] = Image(ci.format, e.width, e.height, e.depth, ci.arrayLayers,
                                                   ci.mipLevels, ci.samples)

    @hooks.before("vkDestroyImage")
    def before_destroy_image(dev, device, image, pAllocator):
        dev.res.images.pop(int(image), None)

    @hooks.after("vkCreateImageView")
    def after_create_view(dev, result, device, ci, pAllocator, pView):
        if ok(result):
            layers = ci.subresourceRange.layerCount
            if layers == vk.VK_REMAINING_ARRAY_LAYERS:
                img = dev.res.images.get(int(ci.image))
                layers = img.layers - ci.subresourceRange.baseArrayLayer if img else 1
            dev.res.views[int(pView[0])] = ImageView(int(ci.image), ci.format, layers)

    @hooks.before("vkDestroyImageView")
    def before_destroy_view(dev, device, view, pAllocator):
        dev.res.views.pop(int(view), None)

    @hooks.after("vkCreateFramebuffer")
    def after_create_framebuffer(dev, result, device, ci, pAllocator, pFramebuffer):
        if ok(result):
            imageless = ci.flags & vk.VK_FRAMEBUFFER_CREATE_IMAGELESS_BIT
            views = () if imageless else tuple(int(ci.pAttachments[i]) for i in range(ci.attachmentCount))
            dev.res.framebuffers[int(pFramebuffer[0])] = Framebuffer(ci.width, ci.height, ci.layers, views)

    @hooks.before("vkDestroyFramebuffer")
    def before_destroy_framebuffer(dev, device, framebuffer, pAllocator):
        dev.res.framebuffers.pop(int(framebuffer), None)

    @hooks.after("vkCreateRenderPass")
    def after_create_render_pass(dev, result, device, ci, pAllocator, pRenderPass):
        if ok(result):
            dev.res.render_passes[int(pRenderPass[0])] = _render_pass(ci, ci.pSubpasses, "pResolveAttachments")

    @hooks.after("vkCreateRenderPass2")
    def after_create_render_pass2(dev, result, device, ci, pAllocator, pRenderPass):
        if ok(result):
            dev.res.render_passes[int(pRenderPass[0])] = _render_pass(ci, ci.pSubpasses, "pResolveAttachments")

    @hooks.before("vkDestroyRenderPass")
    def before_destroy_render_pass(dev, device, renderPass, pAllocator):
        dev.res.render_passes.pop(int(renderPass), None)

    def _render_pass(ci, subpasses, resolve_field: str) -> RenderPass:
        atts = tuple(Attachment(a.format, a.samples, a.loadOp, a.storeOp, a.stencilLoadOp, a.stencilStoreOp)
                     for a in (ci.pAttachments[i] for i in range(ci.attachmentCount)))
        resolves = set()
        for s in range(ci.subpassCount):
            sp = subpasses[s]
            refs = getattr(sp, resolve_field)
            if refs != ffi.NULL:
                for c in range(sp.colorAttachmentCount):
                    if refs[c].attachment != vk.VK_ATTACHMENT_UNUSED:
                        resolves.add(refs[c].attachment)
        deps = [ci.pDependencies[i] for i in range(ci.dependencyCount)]
        return RenderPass(atts, ci.subpassCount, tuple(sorted(resolves)),
                          waits_before=any(d.srcSubpass == vk.VK_SUBPASS_EXTERNAL for d in deps),
                          waits_after=any(d.dstSubpass == vk.VK_SUBPASS_EXTERNAL for d in deps))
