"""Shared boilerplate for the Python sample applications in examples/.

Role summary: one `Context` per example process. It creates the instance
(Vulkan 1.3, VK_EXT_debug_utils when the loader offers it), picks the first
physical device and its first graphics+compute queue family, creates the
device, and owns every object created through it: `close()` destroys them in
reverse creation order, then the device, the debug messenger and the
instance. It also compiles GLSL with glslangValidator into a content-hashed
cache, and has buffer, image, command-buffer, barrier and readback helpers.

Key properties:
- Single-threaded; nothing here is shared between threads.
- Settings (shader cache dir) are read from the environment once, in
  `Settings.from_env()`, at the edge (`run_main`), and passed in.
- Validation messages (WARNING/ERROR severity, VALIDATION type) received via
  the debug messenger are printed to stderr and counted (except the advisory
  ones in ADVISORY_MESSAGE_IDS); `run_main` makes the
  example fail if any arrived, so running under VK_LAYER_KHRONOS_validation is
  a strict check.
- `vulkan` package pitfalls handled here: structs that own strings or arrays
  are kept in local variables until the call that uses them returns, and
  VK_WHOLE_SIZE is `WHOLE_SIZE` (the package exposes it as a negative number).

Run an example with plain lavapipe:
    VK_DRIVER_FILES=$(.venv/bin/python -m tessera.icd.backend) \
        .venv/bin/python examples/compute_collatz.py
Add VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation to validate.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import vulkan as vk

WHOLE_SIZE = 0xFFFFFFFFFFFFFFFF  # VK_WHOLE_SIZE; the package's constant is negative.
EXAMPLES_DIR = Path(__file__).resolve().parent
REPO_DIR = EXAMPLES_DIR.parent
SHADER_DIR = EXAMPLES_DIR / "shaders"
# Validation messages printed but not counted as failures, each with its reason. Best-practices
# checks run only when asked for (VK_LAYER_ENABLES=...BEST_PRACTICES...) and are advice, not validity:
# on these examples they flag VK_EXT_debug_marker (used on purpose, debug_labels) and the
# WorkgroupSize built-in of collatz.comp's spec-constant work-group size (its interface is fixed).
ADVISORY_MESSAGE_IDS = ("UNASSIGNED-BestPractices-",)
# Optional device extensions that need an instance extension enabled first (registry "depends").
DEVICE_EXTENSION_NEEDS = {"VK_EXT_debug_marker": "VK_EXT_debug_report"}


class CheckFailed(Exception):
    """A result check of an example failed; the message says which and how."""


@dataclass(frozen=True)
class Settings:
    shader_cache: Path
    glslang: str

    @staticmethod
    def from_env() -> "Settings":
        cache = os.environ.get("TESSERA_SHADER_CACHE") or str(REPO_DIR / "build" / "examples" / "spv-cache")
        return Settings(shader_cache=Path(cache), glslang=os.environ.get("GLSLANG_VALIDATOR", "glslangValidator"))


def compile_glsl(settings: Settings, source: Path) -> bytes:
    """Compile a GLSL file to SPIR-V (Vulkan 1.2 target: no LocalSizeId, which would need maintenance4), cached by content hash."""
    args = ["-V", "--target-env", "vulkan1.2"]
    digest = hashlib.sha256(source.read_bytes() + " ".join(args).encode()).hexdigest()[:20]
    settings.shader_cache.mkdir(parents=True, exist_ok=True)
    out = settings.shader_cache / f"{source.name}.{digest}.spv"
    if not out.exists():
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        proc = subprocess.run([settings.glslang, *args, "-o", str(tmp), str(source)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"glslangValidator failed on {source}:\n{proc.stdout}{proc.stderr}")
        os.replace(tmp, out)  # atomic: concurrent runs never see a partial file
    return out.read_bytes()


def _text(value: Any) -> str:
    """A C string from the `vulkan` package, which sometimes already converted it."""
    return value if isinstance(value, str) else vk.ffi.string(value).decode(errors="replace")


def _names(props: Sequence[Any]) -> set[str]:
    return {_text(p.extensionName) for p in props}


_SEVERITY_NAMES = {
    vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT: "WARNING",
    vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT: "ERROR",
}


@dataclass
class Buffer:
    handle: Any
    memory: Any
    size: int
    mapped: Any = None  # cffi buffer when host-visible

    def array(self, dtype: Any = np.uint8) -> np.ndarray:
        """A numpy view of the whole mapped buffer (host-coherent memory)."""
        return np.frombuffer(self.mapped, dtype=dtype)


@dataclass
class Image:
    handle: Any
    memory: Any
    width: int
    height: int
    format: int
    view: Any = None


class Context:
    """Instance, first device, one queue, and ownership of created objects.

    `device_features`: a feature struct (chain) for VkDeviceCreateInfo.pNext
    when `dynamic_rendering` is off."""

    def __init__(self, settings: Settings, app_name: str, *,
                 optional_instance_extensions: Sequence[str] = (),
                 optional_device_extensions: Sequence[str] = (),
                 dynamic_rendering: bool = False, device_features: Any = None) -> None:
        self.settings = settings
        self.validation_messages: list[str] = []
        self._owned: list[tuple[Callable[..., None], Any]] = []
        self.messenger = None

        inst_exts = _names(vk.vkEnumerateInstanceExtensionProperties(None))
        self.has_debug_utils = "VK_EXT_debug_utils" in inst_exts
        wanted_inst = ["VK_EXT_debug_utils", *optional_instance_extensions]
        enabled_inst = [e for e in wanted_inst if e in inst_exts]
        self.instance_extensions = enabled_inst
        app_info = vk.VkApplicationInfo(
            sType=vk.VK_STRUCTURE_TYPE_APPLICATION_INFO, pApplicationName=app_name,
            applicationVersion=1, pEngineName="tessera-examples", engineVersion=1,
            apiVersion=vk.VK_MAKE_VERSION(1, 3, 0),
        )
        inst_info = vk.VkInstanceCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, pApplicationInfo=app_info,
            enabledExtensionCount=len(enabled_inst), ppEnabledExtensionNames=enabled_inst,
        )
        self.instance = vk.vkCreateInstance(inst_info, None)
        if self.has_debug_utils:
            self._create_messenger()

        self.physical_device = vk.vkEnumeratePhysicalDevices(self.instance)[0]
        self.properties = vk.vkGetPhysicalDeviceProperties(self.physical_device)
        self.device_name = _text(self.properties.deviceName)
        self.api_version = self.properties.apiVersion
        if dynamic_rendering and self.api_version < vk.VK_MAKE_VERSION(1, 3, 0):
            raise CheckFailed(f"device {self.device_name} is not Vulkan 1.3; dynamic rendering needs it")
        self.mem_props = vk.vkGetPhysicalDeviceMemoryProperties(self.physical_device)
        families = vk.vkGetPhysicalDeviceQueueFamilyProperties(self.physical_device)
        want = vk.VK_QUEUE_GRAPHICS_BIT | vk.VK_QUEUE_COMPUTE_BIT
        self.queue_family = next(i for i, f in enumerate(families) if f.queueFlags & want == want)

        # With pLayerName NULL only the driver's and implicit layers' extensions are listed;
        # explicitly enabled layers (e.g. validation, which offers VK_EXT_debug_marker) are asked by name.
        dev_exts = _names(vk.vkEnumerateDeviceExtensionProperties(self.physical_device, None))
        for layer in vk.vkEnumerateDeviceLayerProperties(self.physical_device):
            dev_exts |= _names(vk.vkEnumerateDeviceExtensionProperties(self.physical_device, _text(layer.layerName)))
        self.device_extensions = [e for e in optional_device_extensions if e in dev_exts
                                  and DEVICE_EXTENSION_NEEDS.get(e, e) in (*enabled_inst, e)]
        prio = vk.ffi.new("float[1]", [1.0])
        queue_info = vk.VkDeviceQueueCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
            queueFamilyIndex=self.queue_family, queueCount=1, pQueuePriorities=prio,
        )
        features13 = vk.VkPhysicalDeviceVulkan13Features(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
            dynamicRendering=vk.VK_TRUE,
        )
        dev_info = vk.VkDeviceCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
            pNext=features13 if dynamic_rendering else device_features,
            queueCreateInfoCount=1, pQueueCreateInfos=[queue_info],
            enabledExtensionCount=len(self.device_extensions),
            ppEnabledExtensionNames=self.device_extensions,
        )
        self.device = vk.vkCreateDevice(self.physical_device, dev_info, None)
        self.queue = vk.vkGetDeviceQueue(self.device, self.queue_family, 0)
        pool_info = vk.VkCommandPoolCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, queueFamilyIndex=self.queue_family,
        )
        self.command_pool = self.own(vk.vkDestroyCommandPool, vk.vkCreateCommandPool(self.device, pool_info, None))

    # -- lifetime ---------------------------------------------------------
    def own(self, destroy: Callable[..., None], handle: Any) -> Any:
        """Register `handle` to be destroyed with `destroy(device, handle, None)` at close."""
        self._owned.append((destroy, handle))
        return handle

    def close(self) -> None:
        if self.device is not None:
            vk.vkDeviceWaitIdle(self.device)
            for destroy, handle in reversed(self._owned):
                destroy(self.device, handle, None)
            self._owned.clear()
            vk.vkDestroyDevice(self.device, None)
            self.device = None
        if self.messenger is not None:
            destroy_messenger = vk.vkGetInstanceProcAddr(self.instance, "vkDestroyDebugUtilsMessengerEXT")
            destroy_messenger(self.instance, self.messenger, None)
            self.messenger = None
        if self.instance is not None:
            vk.vkDestroyInstance(self.instance, None)
            self.instance = None

    def _create_messenger(self) -> None:
        def callback(severity: int, types: int, data: Any, user: Any) -> int:
            msg = _text(data.pMessage)
            msg_id = _text(data.pMessageIdName) if data.pMessageIdName != vk.ffi.NULL else ""
            if msg_id.startswith(ADVISORY_MESSAGE_IDS):
                print(f"[validation advisory] {msg}", file=sys.stderr)
            elif types & vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT:
                line = f"[validation {_SEVERITY_NAMES.get(severity, severity)}] {msg}"
                self.validation_messages.append(line)
                print(line, file=sys.stderr)
            return vk.VK_FALSE

        info = vk.VkDebugUtilsMessengerCreateInfoEXT(
            sType=vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
            messageSeverity=vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT
            | vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
            messageType=vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT
            | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT
            | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
            pfnUserCallback=callback,
        )
        self._callback = callback  # the package keeps a module-global reference too
        create = vk.vkGetInstanceProcAddr(self.instance, "vkCreateDebugUtilsMessengerEXT")
        self.messenger = create(self.instance, info, None)

    # -- memory -----------------------------------------------------------
    def memory_type(self, type_bits: int, flags: int) -> int:
        for i in range(self.mem_props.memoryTypeCount):
            if type_bits & (1 << i) and self.mem_props.memoryTypes[i].propertyFlags & flags == flags:
                return i
        raise RuntimeError(f"no memory type with flags {flags:#x} in bits {type_bits:#x}")

    def _allocate(self, reqs: Any, flags: int) -> Any:
        info = vk.VkMemoryAllocateInfo(
            sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, allocationSize=reqs.size,
            memoryTypeIndex=self.memory_type(reqs.memoryTypeBits, flags),
        )
        return self.own(vk.vkFreeMemory, vk.vkAllocateMemory(self.device, info, None))

    def buffer(self, size: int, usage: int, data: bytes | np.ndarray | None = None) -> Buffer:
        """A host-visible, host-coherent, persistently mapped buffer, optionally filled."""
        info = vk.VkBufferCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, size=size, usage=usage,
            sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE,
        )
        handle = vk.vkCreateBuffer(self.device, info, None)
        memory = self._allocate(vk.vkGetBufferMemoryRequirements(self.device, handle),
                                vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)
        self.own(vk.vkDestroyBuffer, handle)  # destroyed before its memory is freed
        vk.vkBindBufferMemory(self.device, handle, memory, 0)
        buf = Buffer(handle, memory, size, vk.vkMapMemory(self.device, memory, 0, size, 0))
        if data is not None:
            raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
            buf.mapped[0:len(raw)] = raw
        return buf

    def image(self, width: int, height: int, fmt: int, usage: int, *,
              samples: int = vk.VK_SAMPLE_COUNT_1_BIT, view: bool = False) -> Image:
        """A 2D optimal-tiling image in device-local memory (layout UNDEFINED)."""
        info = vk.VkImageCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO, imageType=vk.VK_IMAGE_TYPE_2D, format=fmt,
            extent=vk.VkExtent3D(width=width, height=height, depth=1), mipLevels=1, arrayLayers=1,
            samples=samples, tiling=vk.VK_IMAGE_TILING_OPTIMAL, usage=usage,
            sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE, initialLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED,
        )
        handle = vk.vkCreateImage(self.device, info, None)
        memory = self._allocate(vk.vkGetImageMemoryRequirements(self.device, handle),
                                vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
        self.own(vk.vkDestroyImage, handle)
        vk.vkBindImageMemory(self.device, handle, memory, 0)
        img = Image(handle, memory, width, height, fmt)
        if view:
            view_info = vk.VkImageViewCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO, image=handle,
                viewType=vk.VK_IMAGE_VIEW_TYPE_2D, format=fmt, subresourceRange=color_range(),
            )
            img.view = self.own(vk.vkDestroyImageView, vk.vkCreateImageView(self.device, view_info, None))
        return img

    def color_pass(self, image: Image, initial: int, final: int) -> tuple[Any, Any]:
        """A render pass object of one subpass writing `image` (its view) as its one color attachment, cleared
        at load and stored, from layout `initial` to `final`, and its framebuffer: (render pass, framebuffer)."""
        attachment = vk.VkAttachmentDescription(
            format=image.format, samples=vk.VK_SAMPLE_COUNT_1_BIT, loadOp=vk.VK_ATTACHMENT_LOAD_OP_CLEAR,
            storeOp=vk.VK_ATTACHMENT_STORE_OP_STORE, stencilLoadOp=vk.VK_ATTACHMENT_LOAD_OP_DONT_CARE,
            stencilStoreOp=vk.VK_ATTACHMENT_STORE_OP_DONT_CARE, initialLayout=initial, finalLayout=final)
        ref = vk.VkAttachmentReference(attachment=0, layout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL)
        subpass = vk.VkSubpassDescription(pipelineBindPoint=vk.VK_PIPELINE_BIND_POINT_GRAPHICS,
                                          colorAttachmentCount=1, pColorAttachments=[ref])
        render_pass = self.own(vk.vkDestroyRenderPass, vk.vkCreateRenderPass(self.device, vk.VkRenderPassCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO, attachmentCount=1, pAttachments=[attachment],
            subpassCount=1, pSubpasses=[subpass]), None))
        framebuffer = self.own(vk.vkDestroyFramebuffer, vk.vkCreateFramebuffer(self.device, vk.VkFramebufferCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_FRAMEBUFFER_CREATE_INFO, renderPass=render_pass, attachmentCount=1,
            pAttachments=[image.view], width=image.width, height=image.height, layers=1), None))
        return render_pass, framebuffer

    # -- shaders and pipelines -------------------------------------------
    def shader(self, name: str) -> Any:
        """A shader module from examples/shaders/<name>, compiled (cached) at run time."""
        code = compile_glsl(self.settings, SHADER_DIR / name)
        info = vk.VkShaderModuleCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, codeSize=len(code), pCode=code,
        )
        return self.own(vk.vkDestroyShaderModule, vk.vkCreateShaderModule(self.device, info, None))

    def set_layout(self, bindings: Sequence[tuple[int, int, int]]) -> Any:
        """Descriptor set layout from (binding, descriptorType, stageFlags) tuples."""
        items = [vk.VkDescriptorSetLayoutBinding(binding=b, descriptorType=t, descriptorCount=1, stageFlags=s)
                 for b, t, s in bindings]
        info = vk.VkDescriptorSetLayoutCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
            bindingCount=len(items), pBindings=items,
        )
        return self.own(vk.vkDestroyDescriptorSetLayout, vk.vkCreateDescriptorSetLayout(self.device, info, None))

    def pipeline_layout(self, set_layouts: Sequence[Any], push_size: int = 0, push_stages: int = 0) -> Any:
        ranges = [vk.VkPushConstantRange(stageFlags=push_stages, offset=0, size=push_size)] if push_size else []
        info = vk.VkPipelineLayoutCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
            setLayoutCount=len(set_layouts), pSetLayouts=list(set_layouts) or None,
            pushConstantRangeCount=len(ranges), pPushConstantRanges=ranges or None,
        )
        return self.own(vk.vkDestroyPipelineLayout, vk.vkCreatePipelineLayout(self.device, info, None))

    def descriptor_pool(self, sizes: dict[int, int], max_sets: int) -> Any:
        pool_sizes = [vk.VkDescriptorPoolSize(type=t, descriptorCount=n) for t, n in sizes.items()]
        info = vk.VkDescriptorPoolCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, maxSets=max_sets,
            poolSizeCount=len(pool_sizes), pPoolSizes=pool_sizes,
        )
        return self.own(vk.vkDestroyDescriptorPool, vk.vkCreateDescriptorPool(self.device, info, None))

    def allocate_set(self, pool: Any, layout: Any) -> Any:
        info = vk.VkDescriptorSetAllocateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, descriptorPool=pool,
            descriptorSetCount=1, pSetLayouts=[layout],
        )
        return vk.vkAllocateDescriptorSets(self.device, info)[0]

    def write_storage_buffers(self, dset: Any, buffers: Sequence[tuple[int, Buffer, int, int]]) -> None:
        """Point storage-buffer bindings at (binding, buffer, offset, range) ranges."""
        infos = [vk.VkDescriptorBufferInfo(buffer=b.handle, offset=off, range=rng) for _, b, off, rng in buffers]
        writes = [vk.VkWriteDescriptorSet(
            sType=vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, dstSet=dset, dstBinding=binding,
            descriptorCount=1, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, pBufferInfo=[info])
            for (binding, _, _, _), info in zip(buffers, infos)]
        vk.vkUpdateDescriptorSets(self.device, len(writes), writes, 0, None)

    def compute_pipeline(self, shader: str, layout: Any, *, spec: dict[int, int] | None = None,
                         flags: int = 0, pnext: Any = None) -> Any:
        """A compute pipeline; `spec` maps specialization constant ids to uint32 values; `pnext`
        extends the create info (e.g. VkPipelineCreateFlags2CreateInfoKHR)."""
        module = self.shader(shader)
        spec_info = None
        if spec:
            ids = sorted(spec)
            entries = [vk.VkSpecializationMapEntry(constantID=cid, offset=4 * i, size=4) for i, cid in enumerate(ids)]
            data = np.array([spec[c] for c in ids], dtype=np.uint32).tobytes()
            data_c = vk.ffi.new("char[]", data)
            spec_info = vk.VkSpecializationInfo(mapEntryCount=len(entries), pMapEntries=entries,
                                                dataSize=len(data), pData=data_c)
        stage = vk.VkPipelineShaderStageCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, stage=vk.VK_SHADER_STAGE_COMPUTE_BIT,
            module=module, pName="main", pSpecializationInfo=spec_info,
        )
        info = vk.VkComputePipelineCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, pNext=pnext, flags=flags, stage=stage,
            layout=layout, basePipelineIndex=-1,
        )
        pipeline = vk.vkCreateComputePipelines(self.device, None, 1, [info], None)[0]
        return self.own(vk.vkDestroyPipeline, pipeline)

    def graphics_pipeline(self, vert: str, frag: str, layout: Any, *, render_pass: Any = None, subpass: int = 0,
                          color_formats: Sequence[int] = (), vec2_input: bool = True, pnext: Any = None,
                          view_mask: int = 0, topology: int = vk.VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST,
                          primitive_restart: bool = False, cull_mode: int = vk.VK_CULL_MODE_NONE,
                          front_face: int = vk.VK_FRONT_FACE_COUNTER_CLOCKWISE, dynamic: Sequence[int] = ()) -> Any:
        """A triangle-list pipeline with one color attachment, no blending, no culling,
        dynamic viewport and scissor. With `render_pass` None it is for dynamic
        rendering (VkPipelineRenderingCreateInfo with `color_formats`).
        `vec2_input`: one vec2 vertex attribute at location 0 from binding 0; `pnext` extends
        the create info; `view_mask`: multiview views of dynamic rendering; `topology`,
        `primitive_restart`, `cull_mode`, `front_face` and more `dynamic` states, where another
        pipeline is wanted."""
        vmod, fmod = self.shader(vert), self.shader(frag)
        stages = [
            vk.VkPipelineShaderStageCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, stage=vk.VK_SHADER_STAGE_VERTEX_BIT,
                module=vmod, pName="main"),
            vk.VkPipelineShaderStageCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, stage=vk.VK_SHADER_STAGE_FRAGMENT_BIT,
                module=fmod, pName="main"),
        ]
        bindings = [vk.VkVertexInputBindingDescription(binding=0, stride=8, inputRate=vk.VK_VERTEX_INPUT_RATE_VERTEX)]
        attributes = [vk.VkVertexInputAttributeDescription(location=0, binding=0, format=vk.VK_FORMAT_R32G32_SFLOAT,
                                                           offset=0)]
        vertex_input = vk.VkPipelineVertexInputStateCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO,
            vertexBindingDescriptionCount=1 if vec2_input else 0, pVertexBindingDescriptions=bindings if vec2_input else None,
            vertexAttributeDescriptionCount=1 if vec2_input else 0,
            pVertexAttributeDescriptions=attributes if vec2_input else None,
        )
        assembly = vk.VkPipelineInputAssemblyStateCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO,
            topology=topology, primitiveRestartEnable=vk.VK_TRUE if primitive_restart else vk.VK_FALSE,
        )
        viewport = vk.VkPipelineViewportStateCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO, viewportCount=1, scissorCount=1,
        )
        raster = vk.VkPipelineRasterizationStateCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO,
            polygonMode=vk.VK_POLYGON_MODE_FILL, cullMode=cull_mode,
            frontFace=front_face, lineWidth=1.0,
        )
        multisample = vk.VkPipelineMultisampleStateCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO,
            rasterizationSamples=vk.VK_SAMPLE_COUNT_1_BIT,
        )
        blend_attachment = vk.VkPipelineColorBlendAttachmentState(
            blendEnable=vk.VK_FALSE,
            colorWriteMask=vk.VK_COLOR_COMPONENT_R_BIT | vk.VK_COLOR_COMPONENT_G_BIT
            | vk.VK_COLOR_COMPONENT_B_BIT | vk.VK_COLOR_COMPONENT_A_BIT,
        )
        blend = vk.VkPipelineColorBlendStateCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO,
            attachmentCount=1, pAttachments=[blend_attachment],
        )
        dynamic_states = [vk.VK_DYNAMIC_STATE_VIEWPORT, vk.VK_DYNAMIC_STATE_SCISSOR, *dynamic]
        dynamic = vk.VkPipelineDynamicStateCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_DYNAMIC_STATE_CREATE_INFO,
            dynamicStateCount=len(dynamic_states), pDynamicStates=dynamic_states,
        )
        rendering = None
        if render_pass is None:
            rendering = vk.VkPipelineRenderingCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO, pNext=pnext,
                colorAttachmentCount=len(color_formats), pColorAttachmentFormats=list(color_formats),
                viewMask=view_mask,
            )
        info = vk.VkGraphicsPipelineCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO, pNext=rendering if rendering else pnext,
            stageCount=len(stages), pStages=stages, pVertexInputState=vertex_input,
            pInputAssemblyState=assembly, pViewportState=viewport, pRasterizationState=raster,
            pMultisampleState=multisample, pColorBlendState=blend, pDynamicState=dynamic,
            layout=layout, renderPass=render_pass, subpass=subpass, basePipelineIndex=-1,
        )
        pipeline = vk.vkCreateGraphicsPipelines(self.device, None, 1, [info], None)[0]
        return self.own(vk.vkDestroyPipeline, pipeline)

    # -- commands ---------------------------------------------------------
    def primary(self) -> Any:
        """A primary command buffer of the context's pool, not begun (a frame loop records it again and again)."""
        info = vk.VkCommandBufferAllocateInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, commandPool=self.command_pool,
            level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1,
        )
        return vk.vkAllocateCommandBuffers(self.device, info)[0]

    def fence(self) -> Any:
        """An unsignalled fence (the caller destroys it)."""
        return vk.vkCreateFence(self.device, vk.VkFenceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO), None)

    def cmd_labels(self) -> tuple[Any, Any]:
        """vkCmdBeginDebugUtilsLabelEXT and vkCmdEndDebugUtilsLabelEXT of the instance."""
        return (vk.vkGetInstanceProcAddr(self.instance, "vkCmdBeginDebugUtilsLabelEXT"),
                vk.vkGetInstanceProcAddr(self.instance, "vkCmdEndDebugUtilsLabelEXT"))

    def command_buffer(self) -> Any:
        """A primary command buffer in the recording state (one-time submit)."""
        cmd = self.primary()
        begin = vk.VkCommandBufferBeginInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
            flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
        )
        vk.vkBeginCommandBuffer(cmd, begin)
        return cmd

    def submit(self, cmds: Sequence[Any], *, before: Callable[[], None] | None = None,
               after: Callable[[], None] | None = None) -> None:
        """End the command buffers, submit them in one batch of one vkQueueSubmit, and wait.

        `before`/`after` run right before the submit and right after the wait
        (debug_labels uses them for queue labels)."""
        for cmd in cmds:
            vk.vkEndCommandBuffer(cmd)
        fence_info = vk.VkFenceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO)
        fence = vk.vkCreateFence(self.device, fence_info, None)
        submit = vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO,
                                 commandBufferCount=len(cmds), pCommandBuffers=list(cmds))
        if before:
            before()
        vk.vkQueueSubmit(self.queue, 1, [submit], fence)
        vk.vkWaitForFences(self.device, 1, [fence], vk.VK_TRUE, 10 * 1000**3)
        if after:
            after()
        vk.vkDestroyFence(self.device, fence, None)
        vk.vkFreeCommandBuffers(self.device, self.command_pool, len(cmds), list(cmds))

    def read_image(self, img: Image, layout: int, texel_bytes: int = 4) -> np.ndarray:
        """Copy a color image (currently in `layout`, written by earlier submits) to host; H x W x texel bytes."""
        buf = self.buffer(img.width * img.height * texel_bytes, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
        cmd = self.command_buffer()
        copy_image_to_buffer(cmd, img, layout, buf)
        host_barrier(cmd)
        self.submit([cmd])
        return buf.array().reshape(img.height, img.width, texel_bytes).copy()


# -- recording helpers (free functions: they only need a command buffer) ----
def color_range() -> Any:
    return vk.VkImageSubresourceRange(aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, baseMipLevel=0, levelCount=1,
                                      baseArrayLayer=0, layerCount=1)


def color_layers() -> Any:
    return vk.VkImageSubresourceLayers(aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, mipLevel=0,
                                       baseArrayLayer=0, layerCount=1)


def image_barrier(cmd: Any, image: Any, old: int, new: int, src_stage: int, src_access: int,
                  dst_stage: int, dst_access: int) -> None:
    """Layout transition plus memory dependency for the whole color image."""
    barrier = vk.VkImageMemoryBarrier(
        sType=vk.VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER, srcAccessMask=src_access, dstAccessMask=dst_access,
        oldLayout=old, newLayout=new, srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
        dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED, image=image.handle if isinstance(image, Image) else image,
        subresourceRange=color_range(),
    )
    vk.vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 0, None, 0, None, 1, [barrier])


def memory_barrier(cmd: Any, src_stage: int, src_access: int, dst_stage: int, dst_access: int) -> None:
    barrier = vk.VkMemoryBarrier(sType=vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                 srcAccessMask=src_access, dstAccessMask=dst_access)
    vk.vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, [barrier], 0, None, 0, None)


def transfer_barrier(cmd: Any) -> None:
    """Order earlier transfer writes before later transfer reads and writes."""
    memory_barrier(cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                   vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                   vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT)


def host_barrier(cmd: Any, src_stage: int = vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                 src_access: int = vk.VK_ACCESS_TRANSFER_WRITE_BIT) -> None:
    """Make device writes visible to host reads after the fence wait."""
    memory_barrier(cmd, src_stage, src_access, vk.VK_PIPELINE_STAGE_HOST_BIT, vk.VK_ACCESS_HOST_READ_BIT)


def copy_image_to_buffer(cmd: Any, img: Image, layout: int, buf: Buffer, offset: int = 0) -> None:
    region = vk.VkBufferImageCopy(
        bufferOffset=offset, bufferRowLength=0, bufferImageHeight=0, imageSubresource=color_layers(),
        imageOffset=vk.VkOffset3D(x=0, y=0, z=0),
        imageExtent=vk.VkExtent3D(width=img.width, height=img.height, depth=1),
    )
    vk.vkCmdCopyImageToBuffer(cmd, img.handle, layout, buf.handle, 1, [region])


def set_viewport_scissor(cmd: Any, width: int, height: int) -> None:
    viewport = vk.VkViewport(x=0.0, y=0.0, width=float(width), height=float(height), minDepth=0.0, maxDepth=1.0)
    scissor = vk.VkRect2D(offset=vk.VkOffset2D(x=0, y=0), extent=vk.VkExtent2D(width=width, height=height))
    vk.vkCmdSetViewport(cmd, 0, 1, [viewport])
    vk.vkCmdSetScissor(cmd, 0, 1, [scissor])

def check_equal(what: str, got: np.ndarray, want: np.ndarray) -> None:
    """Raise CheckFailed naming the first mismatch if arrays differ."""
    if got.shape != want.shape:
        raise CheckFailed(f"{what}: shape {got.shape} != expected {want.shape}")
    bad = np.argwhere(got != want)
    if len(bad):
        idx = tuple(bad[0])
        raise CheckFailed(f"{what}: {len(bad)} mismatching elements; first at {idx}: got {got[idx]}, want {want[idx]}")


def run_main(name: str, body: Callable[[Context], str], **context_args: Any) -> None:
    """Run one example: create the Context, call body, print '<name>: OK <summary>' and exit 0.

    Exits 1 with '<name>: FAIL <reason>' on a failed check or on validation
    messages, 2 on an unexpected error."""
    settings = Settings.from_env()
    ctx = None
    try:
        ctx = Context(settings, name, **context_args)
        summary = body(ctx)
        ctx.close()
    except CheckFailed as exc:
        if ctx is not None:
            ctx.close()
        print(f"{name}: FAIL {exc}", file=sys.stderr)
        sys.exit(1)
    except Exception as exc:  # noqa: BLE001 - report any error as a failed run
        traceback.print_exc()
        print(f"{name}: FAIL unexpected error: {exc!r}", file=sys.stderr)
        sys.exit(2)
    if ctx.validation_messages:
        print(f"{name}: FAIL {len(ctx.validation_messages)} validation message(s); first: "
              f"{ctx.validation_messages[0][:300]}", file=sys.stderr)
        sys.exit(1)
    print(f"{name}: OK {summary}")

