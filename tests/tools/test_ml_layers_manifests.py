"""tools/ml_layers.py on the installed ai-ml-emulation-layer-for-vulkan wheel (the 'ml' extra), without
Vulkan: each manifest in a folder of its own, its library_path absolute and existing, the rest of Arm's
manifest unchanged; the command prints the folders."""
from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest

from tessera.tools import ml_layers


@pytest.fixture
def deploy():
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        pytest.skip("Arm's ML SDK wheels are for Linux x86-64 only")
    try:
        return ml_layers.deploy_dir()
    except ml_layers.MlLayersMissing as e:
        pytest.fail(f"{e}")


def test_manifests_in_folders_of_their_own_with_absolute_libraries(deploy, tmp_path, capsys):
    assert ml_layers.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out.split()
    assert out == [f"ML_GRAPH_LAYER_DIR={tmp_path / 'graph'}", f"ML_TENSOR_LAYER_DIR={tmp_path / 'tensor'}"]
    for folder, name, layer in (("graph", "VkLayer_Graph.json", ml_layers.GRAPH_LAYER),
                                ("tensor", "VkLayer_Tensor.json", ml_layers.TENSOR_LAYER)):
        assert [p.name for p in (tmp_path / folder).iterdir()] == [name]
        written = json.loads((tmp_path / folder / name).read_text())
        original = json.loads((deploy / "share/vulkan/explicit_layer.d" / name).read_text())
        library = written["layer"].pop("library_path")
        assert library.startswith("/") and library.endswith(original["layer"].pop("library_path"))
        assert Path(library).is_file()
        assert written == original and written["layer"]["name"] == layer


def test_usage(capsys):
    assert ml_layers.main([]) == 2 and "usage" in capsys.readouterr().err
