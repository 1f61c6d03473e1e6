"""Feature objects bound by HookSet.bind (issue #24), without Vulkan: each one's methods are exactly the
commands the intercept table gives its module (in the driver and, for the shared vkapi ones, the layer),
and the logic they expose (shader instrumentation's begin/end and action numbering, the resource and
pipeline records) called directly with stand-ins for the driver, its ffi and its objects."""
from __future__ import annotations

import logging
from types import SimpleNamespace as NS

import pytest

from tessera.icd import device, instance
from tessera.icd.device import Devices
from tessera.icd.instance import Instances
from tessera.icd.instrumentation import hooks as instrumentation
from tessera.icd.instrumentation.hooks import Instrumentation
from tessera.icd.objects import CommandBuffer
from tessera.vkapi import intercepts, pipelines, resource_hooks
from tessera.vkapi.commands import DISPATCHES, DRAWS, TRACE_RAYS
from tessera.vkapi.dispatch import HookSet
from tessera.vkapi.log import HookErrors
from tessera.vkapi.resources import Attachment, Image, Pipeline, RenderPass, Resources
from tessera.vkapi.vkconst import vk


def hook_set() -> HookSet:
    return HookSet(HookErrors(logging.getLogger("test_feature_objects")))


class Objects:
    """The driver's objects: handles are themselves."""

    def get(self, handle, kind=None):
        return handle

    def address(self, handle) -> int:
        return int(handle)


def driver(hooks: HookSet | None = None):
    hooks = hooks or hook_set()
    return NS(ffi=NS(NULL=None), hooks=hooks, objects=Objects(), lib=None, profile=None, features=[])


def bound_commands(*features) -> set[str]:
    hooks = hook_set()
    for f in features:
        hooks.bind(f)
    return set(hooks.modules())


def named(shim: str, module: str) -> set[str]:
    return {name for name, modules in intercepts.owners(shim).items() if f"tessera.{module}" in modules}


@pytest.mark.parametrize("module, make", [
    ("icd.instrumentation.hooks", lambda: [Instrumentation(driver())]),
    ("icd.instance", lambda: [Instances(driver())]),
    ("icd.device", lambda: [Devices(driver())]),
    ("vkapi.resource_hooks", lambda: [resource_hooks.ResourceHooks(None)]),
    ("vkapi.pipelines", lambda: [pipelines.Pipelines(None, None, None), pipelines.RayTracingPipelines(None, None),
                                 pipelines.ShaderObjects(None, None, None)]),
])
def test_a_driver_features_methods_are_the_commands_its_rows_name(module, make):
    assert bound_commands(*make()) == named(intercepts.ICD, module)


def test_the_layers_shared_features_are_the_commands_its_rows_name():
    assert bound_commands(resource_hooks.ResourceHooks(None)) == named(intercepts.LAYER, "vkapi.resource_hooks")
    assert bound_commands(pipelines.Pipelines(None, None, None), pipelines.ShaderObjects(None, None, None)) == \
        named(intercepts.LAYER, "vkapi.pipelines")


def test_registering_keeps_the_callers_signatures_and_binds_the_objects():
    hooks = hook_set()
    assert isinstance(pipelines.register(hooks, None), pipelines.Pipelines)
    assert isinstance(pipelines.register_ray_tracing(hooks, None, lambda stages: {}), pipelines.RayTracingPipelines)
    assert isinstance(pipelines.register_shader_objects(hooks, None), pipelines.ShaderObjects)
    assert isinstance(resource_hooks.register(hooks, None), resource_hooks.ResourceHooks)
    drv = driver(hooks)
    f = instrumentation.register(drv)
    assert drv.features == [f]   # its device lifecycle (icd/feature.py)
    instance.register(drv)
    device.register(drv)
    # The queues a device gives out are followed by vkapi/commands.py's hooks (its row), into Devices.
    assert {fn.__module__ for fn in hooks.afters["vkGetDeviceQueue"]} == {"tessera.vkapi.commands"}


# ---- shader instrumentation -----------------------------------------------------------------------
def instrumented():
    hooks = hook_set()
    python_path: list = []
    hooks.recorder = NS(python_path=lambda handle, on: python_path.append((handle, on)))
    f = Instrumentation(driver(hooks))
    obj = NS(next_index=0, regions={})
    dev = NS(instrumentation=NS(objects={0x1A: obj}), res=Resources(), handle=0xDE)
    cb = CommandBuffer(handle=0xC0, device=dev, pool=1, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, address=0xC0)
    return f, cb, obj, python_path


def test_one_instrumentation_object_is_active_at_a_time_and_each_misuse_is_warned_once(caplog):
    f, cb, obj, _ = instrumented()
    f.replace_vkCmdEndShaderInstrumentationARM(cb)
    f.replace_vkCmdBeginShaderInstrumentationARM(cb, 0x2B)   # unknown
    assert cb.instrumentation is None
    f.replace_vkCmdBeginShaderInstrumentationARM(cb, 0x1A)
    f.replace_vkCmdBeginShaderInstrumentationARM(cb, 0x1A)   # twice
    f.replace_vkCmdBeginShaderInstrumentationARM(cb, 0x1A)
    assert cb.instrumentation is obj
    f.before_vkCmdExecuteCommands(cb, cb.handle, 0, None)
    f.replace_vkCmdEndShaderInstrumentationARM(cb)
    assert cb.instrumentation is None
    assert f.warned == {"end-none", "begin-unknown", "begin-twice", "execute"}
    assert len(caplog.records) == 4


def test_every_draw_dispatch_and_trace_rays_takes_the_active_objects_next_result_index():
    f, cb, obj, _ = instrumented()
    actions = (*DRAWS, *DISPATCHES, *TRACE_RAYS)
    f.before_vkCmdDraw(cb, cb.handle, 3, 1, 0, 0)   # no object active: nothing numbered
    cb.instrumentation = obj
    for name in actions:
        getattr(f, f"before_{name}")(cb, cb.handle)
    assert obj.next_index == len(actions) and obj.regions == {}   # no pipeline instrumented: no region


def test_a_device_with_the_feature_records_every_command_buffer_through_python():
    f, cb, _, python_path = instrumented()
    f.after_vkBeginCommandBuffer(cb, vk.VK_ERROR_OUT_OF_HOST_MEMORY, cb.handle, None)
    f.after_vkBeginCommandBuffer(cb, vk.VK_SUCCESS, cb.handle, None)
    cb.device.instrumentation = None
    f.after_vkBeginCommandBuffer(cb, vk.VK_SUCCESS, cb.handle, None)
    assert python_path == [(cb.handle, True)]


# ---- resources and pipelines ----------------------------------------------------------------------
class Array(list):
    """A C array stand-in: indexable; `!= None` as a non-NULL pointer is."""


def test_a_render_pass_records_its_attachments_resolves_and_external_dependencies():
    att = NS(format=vk.VK_FORMAT_R8G8B8A8_UNORM, samples=4, loadOp=0, storeOp=1, stencilLoadOp=2, stencilStoreOp=1)
    unused = NS(attachment=vk.VK_ATTACHMENT_UNUSED)
    subpasses = Array([NS(colorAttachmentCount=2, pResolveAttachments=Array([NS(attachment=1), unused])),
                       NS(colorAttachmentCount=1, pResolveAttachments=None)])
    ci = NS(attachmentCount=1, pAttachments=Array([att]), subpassCount=2, pSubpasses=subpasses, dependencyCount=1,
            pDependencies=Array([NS(srcSubpass=vk.VK_SUBPASS_EXTERNAL, dstSubpass=0)]))
    dev = NS(res=Resources())
    resource_hooks.ResourceHooks(NS(NULL=None)).after_vkCreateRenderPass2(dev, vk.VK_SUCCESS, None, ci, None, [0x77])
    assert dev.res.render_passes[0x77] == RenderPass((Attachment(att.format, 4, 0, 1, 2, 1),), 2, (1,),
                                                     waits_before=True, waits_after=False)


def test_an_image_view_of_the_remaining_layers_counts_the_images_layers_after_its_base():
    dev = NS(res=Resources())
    dev.res.images[5] = Image(vk.VK_FORMAT_R8G8B8A8_UNORM, 8, 8, 1, 6, 1, 1)
    ci = NS(image=5, format=vk.VK_FORMAT_R8G8B8A8_UNORM,
            subresourceRange=NS(layerCount=vk.VK_REMAINING_ARRAY_LAYERS, baseArrayLayer=2))
    hooks = resource_hooks.ResourceHooks(None)
    hooks.after_vkCreateImageView(dev, vk.VK_SUCCESS, None, ci, None, [9])
    assert dev.res.views[9].layers == 4
    hooks.before_vkDestroyImageView(dev, None, 9, None)
    assert dev.res.views == {}


def test_a_ray_tracing_pipeline_costs_each_stage_type_as_the_mean_of_its_shaders():
    ffi = NS(NULL=None, string=lambda p: p)
    dev = NS(res=Resources(shaders={1: b"raygen", 2: b"miss-a", 3: b"miss-b"}))
    stage = lambda bit, module: NS(stage=bit, module=module, pName=b"main", pSpecializationInfo=None)
    info = NS(stageCount=3, pStages=[stage(vk.VK_SHADER_STAGE_RAYGEN_BIT_KHR, 1),
                                     stage(vk.VK_SHADER_STAGE_MISS_BIT_KHR, 2), stage(vk.VK_SHADER_STAGE_MISS_BIT_KHR, 3)])
    costs = {b"raygen": 10.0, b"miss-a": 4.0, b"miss-b": 8.0}
    rt = pipelines.RayTracingPipelines(ffi, lambda stages: {stages[0][0]: costs[stages[0][1]]})
    rt.after_vkCreateRayTracingPipelinesKHR(dev, vk.VK_SUCCESS, None, None, None, 2, [info, info], None, [0x50, 0])
    assert dev.res.pipelines == {0x50: Pipeline(vk.VK_PIPELINE_BIND_POINT_RAY_TRACING_KHR, None,
                                                {"raygen": 10.0, "miss": 6.0})}
