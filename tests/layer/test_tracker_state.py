"""The layer's per-object state is declared on its trackers (layer/trackers.py), no Vulkan: the shader
objects bound are a typed field of the command buffer tracker that workloads.py keeps and reads.
"""
from __future__ import annotations

from types import SimpleNamespace as NS

from tessera.layer import workloads
from tessera.layer.instrument import Recording
from tessera.layer.trackers import CommandBufferTracker
from tessera.vkapi.dispatch import HookSet
from tessera.vkapi.resources import Pipeline, Resources
from tessera.vkapi.vkconst import vk

COMPUTE_STAGE, VERTEX = vk.VK_SHADER_STAGE_COMPUTE_BIT, vk.VK_SHADER_STAGE_VERTEX_BIT
NULL = object()


class Hooks:
    """Keeps what a register function installs, by (verb, command)."""

    def __init__(self) -> None:
        self.installed: dict[tuple[str, str], object] = {}

    bind = HookSet.bind   # a feature object's methods, installed by the verbs below

    def __getattr__(self, verb: str):
        def named(name: str):
            def install(fn):
                self.installed[(verb, name)] = fn
                return fn
            return install
        return named


def tracker() -> CommandBufferTracker:
    return CommandBufferTracker(handle=None, address=0x10, level=0, pool=1)


def test_the_shader_objects_bound_are_a_field_of_each_tracker_kept_across_a_reset():
    a, b = tracker(), tracker()
    assert a.shader_objects == {} and a.shader_objects is not b.shader_objects
    a.shader_objects[VERTEX] = Pipeline(vk.VK_PIPELINE_BIND_POINT_GRAPHICS, None, {})
    a.reset()
    assert list(a.shader_objects) == [VERTEX]


def test_binding_a_compute_shader_object_sizes_the_trackers_dispatches():
    cs = Pipeline(vk.VK_PIPELINE_BIND_POINT_COMPUTE, (8, 4, 1), {})
    res = Resources()
    res.shader_objects[0x5] = (COMPUTE_STAGE, cs)
    t = tracker()
    hooks = Hooks()
    workloads.register(hooks, NS(command_buffer=lambda dev, cb: t, ffi=NS(NULL=NULL)), None, None)
    bind = hooks.installed[("before", "vkCmdBindShadersEXT")]
    bind(NS(res=res), "cb", 1, [COMPUTE_STAGE], [0x5])
    assert t.shader_objects == {COMPUTE_STAGE: cs} and t.compute_pipeline is cs
    bind(NS(res=res), "cb", 1, [COMPUTE_STAGE], NULL)    # NULL pShaders: the stage unbound
    assert t.shader_objects == {} and t.compute_pipeline is None


def test_an_instrumented_recording_declares_its_shader_objects():
    r, s = Recording(1), Recording(2)
    assert r.shader_objects == {} and r.shader_objects is not s.shader_objects
