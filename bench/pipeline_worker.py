"""Worker of bench_pipeline.py: times the creation of the examples' pipelines in the current Vulkan environment.

Run by bench_pipeline.py once per loader environment; alone:
    VK_DRIVER_FILES=$(.venv/bin/python -m tessera.icd.backend) \
        .venv/bin/python bench/pipeline_worker.py [--cold C] [--warm W]

The pipelines, built with the examples' own helpers (examples/vkapp.py):
  collatz      compute, collatz.comp, specialization {0: 64}        (compute_collatz.py, debug_labels.py)
  quad+solid   graphics, quad.vert + solid.frag, dynamic rendering  (render_passes.py)
  fs+invert    graphics, fullscreen.vert + invert.frag, subpass with an input attachment (render_passes.py)
Per pipeline, timed with perf_counter around the helper call (so including the creation of its
shader modules from SPIR-V already in memory):
  first  the first creation in this process, original SPIR-V;
  cold   C creations each from SPIR-V made unique by changing the generator-version half of header
         word 2 (a random value per process, +1 each time): a different SPIR-V hash, so a cache miss
         in the emulated driver's compiler model;
  warm   W creations from the original SPIR-V again (cache hit).
Output: one JSON line {"pipelines": {name: {"first": s, "cold": [s...], "warm": [s...]}}}.
"""
from __future__ import annotations

import argparse
import json
import random
import struct
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import vkapp  # noqa: E402
import vulkan as vk  # noqa: E402

FORMAT = vk.VK_FORMAT_R8G8B8A8_UNORM


class SaltedContext(vkapp.Context):
    """vkapp.Context whose shader modules can be made from salted SPIR-V (a unique hash per salt)."""

    salt: int | None = None

    def shader(self, name: str) -> Any:
        code = self._spirv(name)
        if self.salt is not None:
            # Header word 2 = generator magic: tool id (high 16 bits, kept) and tool version (low 16 bits).
            tool = struct.unpack_from("<I", code, 8)[0] & 0xFFFF0000
            code = code[:8] + struct.pack("<I", tool | (self.salt & 0xFFFF)) + code[12:]
        info = vk.VkShaderModuleCreateInfo(sType=vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                           codeSize=len(code), pCode=code)
        return self.own(vk.vkDestroyShaderModule, vk.vkCreateShaderModule(self.device, info, None))

    def _spirv(self, name: str) -> bytes:
        cache = self.__dict__.setdefault("_code", {})
        if name not in cache:
            cache[name] = vkapp.compile_glsl(self.settings, vkapp.SHADER_DIR / name)
        return cache[name]


def builders(ctx: SaltedContext) -> dict[str, Callable[[], Any]]:
    """name -> a function creating that pipeline once (layouts and the render pass made here, once)."""
    compute, frag = vk.VK_SHADER_STAGE_COMPUTE_BIT, vk.VK_SHADER_STAGE_FRAGMENT_BIT
    storage = vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
    collatz_layout = ctx.pipeline_layout([ctx.set_layout([(0, storage, compute), (1, storage, compute)])],
                                         push_size=4, push_stages=compute)
    solid_layout = ctx.pipeline_layout([], push_size=16, push_stages=frag)
    invert_layout = ctx.pipeline_layout([ctx.set_layout([(0, vk.VK_DESCRIPTOR_TYPE_INPUT_ATTACHMENT, frag)])])
    attachment = dict(format=FORMAT, samples=vk.VK_SAMPLE_COUNT_1_BIT, loadOp=vk.VK_ATTACHMENT_LOAD_OP_LOAD,
                      storeOp=vk.VK_ATTACHMENT_STORE_OP_STORE, stencilLoadOp=vk.VK_ATTACHMENT_LOAD_OP_DONT_CARE,
                      stencilStoreOp=vk.VK_ATTACHMENT_STORE_OP_DONT_CARE)
    attachments = [
        vk.VkAttachmentDescription(**attachment, initialLayout=vk.VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL,
                                   finalLayout=vk.VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL),
        vk.VkAttachmentDescription(**attachment, initialLayout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
                                   finalLayout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL),
    ]
    input_ref = vk.VkAttachmentReference(attachment=0, layout=vk.VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL)
    color_ref = vk.VkAttachmentReference(attachment=1, layout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL)
    subpass = vk.VkSubpassDescription(pipelineBindPoint=vk.VK_PIPELINE_BIND_POINT_GRAPHICS,
                                      inputAttachmentCount=1, pInputAttachments=[input_ref],
                                      colorAttachmentCount=1, pColorAttachments=[color_ref])
    rp_info = vk.VkRenderPassCreateInfo(sType=vk.VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO, attachmentCount=2,
                                        pAttachments=attachments, subpassCount=1, pSubpasses=[subpass])
    render_pass = ctx.own(vk.vkDestroyRenderPass, vk.vkCreateRenderPass(ctx.device, rp_info, None))
    return {
        "collatz": lambda: ctx.compute_pipeline("collatz.comp", collatz_layout, spec={0: 64}),
        "quad+solid": lambda: ctx.graphics_pipeline("quad.vert", "solid.frag", solid_layout, color_formats=[FORMAT]),
        "fs+invert": lambda: ctx.graphics_pipeline("fullscreen.vert", "invert.frag", invert_layout,
                                                   render_pass=render_pass, subpass=0, vec2_input=False),
    }


def timed(create: Callable[[], Any]) -> float:
    t = time.perf_counter()
    create()
    return time.perf_counter() - t


def measure(ctx: SaltedContext, cold: int, warm: int) -> dict[str, dict]:
    salt = random.randrange(0x1000, 0xF000 - 3 * cold)  # 3 pipelines x `cold` salts
    out: dict[str, dict] = {}
    for name, create in builders(ctx).items():
        ctx.salt = None
        first = timed(create)
        cold_times = []
        for _ in range(cold):
            ctx.salt, salt = salt, salt + 1
            cold_times.append(timed(create))
        ctx.salt = None
        out[name] = {"first": first, "cold": cold_times, "warm": [timed(create) for _ in range(warm)]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cold", type=int, default=10)
    ap.add_argument("--warm", type=int, default=30)
    args = ap.parse_args()
    ctx = SaltedContext(vkapp.Settings.from_env(), "pipeline_worker", dynamic_rendering=True)
    try:
        result = {"pipelines": measure(ctx, args.cold, args.warm)}
    finally:
        ctx.close()
    if ctx.validation_messages:
        sys.exit(f"pipeline_worker: {len(ctx.validation_messages)} validation message(s); first: "
                 f"{ctx.validation_messages[0][:300]}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
