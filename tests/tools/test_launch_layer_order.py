"""Where `tessera run` puts Tessera's layer among the user's (tools/launch.py `environment`), without
Vulkan: on top by default; below the layers the user's VK_INSTANCE_LAYERS names before it (Arm's ML
Graph emulation layer over Tessera, docs/ml.md), its folder then after theirs on VK_ADD_LAYER_PATH
(loader 1.3.239 stacks explicit layers in the order their folders are searched)."""
from __future__ import annotations

from tessera.tools.launch import LAYER_NAME, LaunchConfig, environment
from tessera.vkapi import paths

GRAPH = "VK_LAYER_ML_Graph_Emulation"
OURS = str(paths.LAYER_MANIFEST_DIR)


def _env(tmp_path, **base):
    env = environment(LaunchConfig(tmp_path), base=base)
    return env["VK_INSTANCE_LAYERS"].split(":"), env["VK_ADD_LAYER_PATH"].split(":")


def test_on_top_by_default(tmp_path):
    assert _env(tmp_path) == ([LAYER_NAME], [OURS])
    assert _env(tmp_path, VK_INSTANCE_LAYERS=GRAPH, VK_ADD_LAYER_PATH="/g") == ([LAYER_NAME, GRAPH], [OURS, "/g"])
    assert _env(tmp_path, VK_INSTANCE_LAYERS=f"{LAYER_NAME}:{GRAPH}", VK_ADD_LAYER_PATH="/g") == \
        ([LAYER_NAME, GRAPH], [OURS, "/g"])


def test_below_the_layers_named_before_it(tmp_path):
    assert _env(tmp_path, VK_INSTANCE_LAYERS=f"{GRAPH}:{LAYER_NAME}", VK_ADD_LAYER_PATH="/g") == \
        ([GRAPH, LAYER_NAME], ["/g", OURS])
    assert _env(tmp_path, VK_INSTANCE_LAYERS=f"{GRAPH}:{LAYER_NAME}") == ([GRAPH, LAYER_NAME], [OURS])


def test_without_the_layer_nothing_is_added(tmp_path):
    env = environment(LaunchConfig(tmp_path, layer=False), base={"VK_INSTANCE_LAYERS": GRAPH})
    assert env["VK_INSTANCE_LAYERS"] == GRAPH and "VK_ADD_LAYER_PATH" not in env
