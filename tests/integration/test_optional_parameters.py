"""A Vulkan call valid on the backend is valid under Tessera (issue #23, deliverable 3).

apps/optional_parameters.py calls the commands the shims intercept with their optional parameters
left out (NULL pApplicationInfo, NULL pAllocator, NULL pNext, zero counts with NULL arrays,
VK_NULL_HANDLE destroys and frees). It runs on lavapipe alone, then through the real loader with
the emulated driver alone and with the layer and the driver: every call must give what it gives on
lavapipe, and no hook may raise (vkCreateInstance without application info used to fail with
VK_ERROR_INCOMPATIBLE_DRIVER: icd/instance.py read VK_API_VERSION_1_0, which the generated
constants lacked)."""
from __future__ import annotations

import json

import pytest
from integration_support import PYTHON, REPO, run

APP = REPO / "tests" / "integration" / "apps" / "optional_parameters.py"
# Intercepted create, allocate and destroy commands the app does not call, each with the reason.
NOT_SWEPT = {
    **dict.fromkeys(("vkCreateTensorARM", "vkDestroyTensorARM", "vkCreateTensorViewARM", "vkDestroyTensorViewARM"),
                    "VK_ARM_tensors on a device that enables it: apps/tensors_api.py (NULL allocators, NULL regions)"),
    **dict.fromkeys(("vkCreateShaderInstrumentationARM", "vkDestroyShaderInstrumentationARM"),
                    "the shaderInstrumentation feature: apps/instrumentation_api.py, apps/object_naming.py"),
    **dict.fromkeys(("vkCreateAccelerationStructureKHR", "vkDestroyAccelerationStructureKHR",
                     "vkCreateRayTracingPipelinesKHR"),
                    "ray tracing extensions and features: examples/ray_tracing.py, examples/ray_query.py"),
    **dict.fromkeys(("vkCreateShadersEXT", "vkDestroyShaderEXT"),
                    "VK_EXT_shader_object: apps/shader_object.py"),
    **dict.fromkeys(("vkCreateDataGraphPipelinesARM", "vkCreateDataGraphPipelineSessionARM",
                     "vkDestroyDataGraphPipelineSessionARM"),
                    "VK_ARM_data_graph is the emulated Mali's alone (lavapipe, the reference here, lacks it): "
                    "examples/vkgraphs.py creates with VK_NULL_HANDLE deferredOperation and pipelineCache and NULL "
                    "pAllocator, destroys with NULL pAllocator (tests/icd/test_data_graph_ops.py, "
                    "examples/conv_net_graph.py, apps/object_naming.py)"),
    "vkAllocateMemory": "every app allocates with a NULL pAllocator (examples/vkapp.py); the layer's hook only "
                        "counts (layer/allocations.py), tests/integration/test_advice.py",
    "vkDestroySwapchainKHR": "a swapchain needs a window: vkcube under tessera (tests/integration/test_advice.py); "
                             "the layer's hook only forgets the swapchain's images (layer/queues.py)",
}


def _results(env) -> tuple[dict, str]:
    out = run([PYTHON, APP], env)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


@pytest.fixture(scope="module")
def on_lavapipe():
    import os

    from tessera.icd.backend import default_manifest

    # Under Khronos validation: the calls are valid Vulkan, so the backend's answers are the reference.
    env = dict(os.environ, VK_DRIVER_FILES=str(default_manifest()), VK_INSTANCE_LAYERS="VK_LAYER_KHRONOS_validation")
    results, stderr = _results(env)
    assert "Validation Error" not in stderr, stderr
    assert results and all(v == 0 for k, v in results.items() if not k.startswith("physical")), results
    return results


@pytest.mark.parametrize("layer", [True, False], ids=["layer+driver", "driver"])
def test_optional_parameters_left_out_give_what_the_backend_gives(shims, tmp_path, on_lavapipe, layer):
    from tessera.tools.launch import LaunchConfig, environment

    env = environment(LaunchConfig(tmp_path / "session", layer=layer))
    env.pop("TESSERA_HOSTD", None)
    results, stderr = _results(env)
    assert results == on_lavapipe
    assert "Traceback" not in stderr and "exception" not in stderr.lower(), stderr


def test_the_sweep_covers_every_intercepted_create_and_destroy(on_lavapipe):
    """A command the table starts intercepting is swept here or named in NOT_SWEPT with its reason."""
    from tessera.vkapi import intercepts

    called = {name.split("(")[0] for name in on_lavapipe}
    wanted = {name for name in intercepts.INTERCEPTS if name.startswith(("vkCreate", "vkAllocate", "vkDestroy"))}
    assert sorted(wanted - called - set(NOT_SWEPT)) == []
