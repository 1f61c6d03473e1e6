"""Layer manifests for Arm's ML emulation layers (VkLayer_Graph, VkLayer_Tensor), ready to stack.

Role: Arm's `ai-ml-emulation-layer-for-vulkan` wheel ships the two layers' manifests side by side
with bare library file names (found through LD_LIBRARY_PATH). With the Vulkan loader of Debian 12
(1.3.239), layers are stacked in the order their manifests are found on VK_ADD_LAYER_PATH, and the
Graph layer must sit above the Tensor layer (device creation fails otherwise), so each manifest
goes to a folder of its own with an absolute library_path, and the Graph folder comes first. `write_manifests(DIR)` writes
DIR/graph/VkLayer_Graph.json and DIR/tensor/VkLayer_Tensor.json and returns their folders
(`MlLayers`); docs/ml.md shows the environments built from them: Graph over Tessera (Tessera's driver
provides VK_ARM_tensors), and Graph over Tensor over lavapipe (Arm's reference path).

`python -m tessera.tools.ml_layers DIR` writes them and prints the folders as shell assignments.
Raises MlLayersMissing (with what to install) when the wheel is not installed.
Threads: none (a command-line helper and a test fixture).
"""
from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path

GRAPH_LAYER = "VK_LAYER_ML_Graph_Emulation"
TENSOR_LAYER = "VK_LAYER_ML_Tensor_Emulation"
PACKAGE = "emulation_layer"                         # the import name of ai-ml-emulation-layer-for-vulkan
_MANIFESTS = {"graph": "VkLayer_Graph.json", "tensor": "VkLayer_Tensor.json"}


class MlLayersMissing(RuntimeError):
    """Arm's ML emulation layer is not installed (or its wheel's layout is not the one known)."""


@dataclass(frozen=True)
class MlLayers:
    graph_dir: Path       # holds VkLayer_Graph.json (VK_LAYER_ML_Graph_Emulation)
    tensor_dir: Path      # holds VkLayer_Tensor.json (VK_LAYER_ML_Tensor_Emulation)


def deploy_dir() -> Path:
    """The wheel's deploy folder (lib/ and share/vulkan/explicit_layer.d/)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MlLayersMissing("Arm's ML emulation layer is not installed: `make setup` installs it (the 'ml' extra "
                              "of pyproject.toml, ai-ml-emulation-layer-for-vulkan 0.11)")
    deploy = Path(next(iter(spec.submodule_search_locations))) / "deploy"
    if not (deploy / "share/vulkan/explicit_layer.d").is_dir():
        raise MlLayersMissing(f"{deploy}: no share/vulkan/explicit_layer.d (not the layout of "
                              "ai-ml-emulation-layer-for-vulkan 0.11)")
    return deploy


def write_manifests(out: Path) -> MlLayers:
    """Write the two manifests (absolute library_path) to out/graph and out/tensor."""
    deploy = deploy_dir()
    source = deploy / "share/vulkan/explicit_layer.d"
    folders = {}
    for key, name in _MANIFESTS.items():
        path = source / name
        try:
            manifest = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise MlLayersMissing(f"{path}: cannot be read as a layer manifest ({e})") from None
        # a bare file name, which Arm's `emulation_layer` command has the loader find through LD_LIBRARY_PATH
        # (deploy/lib64, deploy/lib)
        named = manifest["layer"]["library_path"]
        candidates = [(folder / named).resolve() for folder in (deploy / "lib64", deploy / "lib", path.parent)]
        library = next((c for c in candidates if c.is_file()), None)
        if library is None:
            raise MlLayersMissing(f"{path}: its library {named} is not in {deploy}/lib64, {deploy}/lib or beside it")
        manifest["layer"]["library_path"] = str(library)
        folder = out / key
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(json.dumps(manifest, indent=4) + "\n")
        folders[key] = folder.resolve()
    return MlLayers(folders["graph"], folders["tensor"])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tessera.tools.ml_layers DIR", file=sys.stderr)
        return 2
    try:
        layers = write_manifests(Path(args[0]))
    except MlLayersMissing as e:
        print(f"tessera: {e}", file=sys.stderr)
        return 1
    print(f"ML_GRAPH_LAYER_DIR={layers.graph_dir}")
    print(f"ML_TENSOR_LAYER_DIR={layers.tensor_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
