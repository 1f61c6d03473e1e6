"""Arm's ML SDK for Vulkan as a real client: TOSA models through model-converter and scenario_runner.

Each model (TOSA MLIR written here) is converted by Arm's `model-converter` to a VGF, `vgf_dump`
writes its scenario, and Arm's `scenario_runner` runs it three ways:
- the reference: lavapipe under Arm's two emulation layers (VkLayer_Graph over VkLayer_Tensor);
- the same with Tessera's layer between them as an observer: how many compute dispatches Arm's
  Graph layer records for the graph (the layer's own count of its vkCmdDispatch records);
- Tessera: `tessera run` with Arm's Graph layer above Tessera's layer and driver (Tessera's driver
  provides VK_ARM_tensors, lowering the Graph layer's tensor shaders; docs/ml.md).
The outputs must equal numpy's (computed here from the same inputs) and the reference's: exactly
where every intermediate value is exact in float32 (small multiples of 1/4), within 2e-6 for the
3×3 convolution of random values (summation order differs) and 1e-6 for the sigmoid. Tessera's
merged trace must hold one GPU event with layer metadata per dispatch the observer counted, and
the session report must name them.

Needs the 'ml' extra of pyproject.toml (`make setup`; Linux x86-64 wheels only: skipped elsewhere).
"""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from integration_support import REPO, lavapipe_manifest, records_made_in_c, run

from tessera.schemas import perfetto as pf

BIN = REPO / ".venv" / "bin"
TESSERA = BIN / "tessera"
TOOLS = {name: BIN / name for name in ("model-converter", "vgf_dump", "scenario_runner")}
LAYER = "VK_LAYER_TESSERA_timeline"

MAX_F32 = "3.4028235e+38"


def _f(values: np.ndarray) -> str:
    """A float32 array as an MLIR dense literal (exact: 10 significant digits, always with a point)."""
    if values.ndim == 0:
        return f"{float(values):.9e}"
    return "[" + ", ".join(_f(v) for v in values) + "]"


def _t(shape) -> str:
    return "tensor<" + "x".join(map(str, shape)) + "xf32>"


def _add_model(rng):
    a = rng.integers(-8, 8, (1, 4)).astype(np.float32)
    b = rng.integers(-8, 8, (1, 4)).astype(np.float32)
    mlir = f"""module {{
  func.func @main(%a: {_t(a.shape)}, %b: {_t(b.shape)}) -> {_t(a.shape)} {{
    %0 = tosa.add %a, %b : ({_t(a.shape)}, {_t(b.shape)}) -> {_t(a.shape)}
    return %0 : {_t(a.shape)}
  }}
}}"""
    return mlir, [a, b], a + b


def _matmul_model(rng):
    x = (rng.integers(-8, 8, (1, 3, 5)) / 4).astype(np.float32)
    w = (rng.integers(-8, 8, (1, 5, 4)) / 4).astype(np.float32)
    c = (rng.integers(-8, 8, (1, 3, 4)) / 4).astype(np.float32)
    out = (1, 3, 4)
    mlir = f"""module {{
  func.func @main(%x: {_t(x.shape)}, %w: {_t(w.shape)}, %c: {_t(out)}) -> {_t(out)} {{
    %xzp = "tosa.const"() <{{values = dense<0.0> : tensor<1xf32>}}> : () -> tensor<1xf32>
    %wzp = "tosa.const"() <{{values = dense<0.0> : tensor<1xf32>}}> : () -> tensor<1xf32>
    %0 = tosa.matmul %x, %w, %xzp, %wzp : ({_t(x.shape)}, {_t(w.shape)}, tensor<1xf32>, tensor<1xf32>) -> {_t(out)}
    %1 = tosa.add %0, %c : ({_t(out)}, {_t(out)}) -> {_t(out)}
    %2 = tosa.clamp %1 {{min_val = 0.0 : f32, max_val = {MAX_F32} : f32}} : ({_t(out)}) -> {_t(out)}
    return %2 : {_t(out)}
  }}
}}"""
    return mlir, [x, w, c], np.maximum(x.astype(np.float64) @ w + c, 0).astype(np.float32)


def _conv_model(rng, k: int, exact: bool):
    """NHWC input 1×6×6×3, OHWI weights 4×k×k×3, bias 4, 'same' padding, then relu (tosa.clamp)."""
    if exact:
        x = (rng.integers(-8, 8, (1, 6, 6, 3)) / 4).astype(np.float32)
        w = (rng.integers(-8, 8, (4, k, k, 3)) / 4).astype(np.float32)
        b = (rng.integers(-8, 8, (4,)) / 4).astype(np.float32)
    else:
        x = rng.uniform(-1, 1, (1, 6, 6, 3)).astype(np.float32)
        w = rng.uniform(-1, 1, (4, k, k, 3)).astype(np.float32)
        b = rng.uniform(-1, 1, (4,)).astype(np.float32)
    p = k // 2
    out = (1, 6, 6, 4)
    mlir = f"""module {{
  func.func @main(%x: {_t(x.shape)}) -> {_t(out)} {{
    %w = "tosa.const"() <{{values = dense<{_f(w)}> : {_t(w.shape)}}}> : () -> {_t(w.shape)}
    %b = "tosa.const"() <{{values = dense<{_f(b)}> : {_t(b.shape)}}}> : () -> {_t(b.shape)}
    %xzp = "tosa.const"() <{{values = dense<0.0> : tensor<1xf32>}}> : () -> tensor<1xf32>
    %wzp = "tosa.const"() <{{values = dense<0.0> : tensor<1xf32>}}> : () -> tensor<1xf32>
    %0 = tosa.conv2d %x, %w, %b, %xzp, %wzp {{acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: {p}, {p}, {p}, {p}>, stride = array<i64: 1, 1>}} : ({_t(x.shape)}, {_t(w.shape)}, {_t(b.shape)}, tensor<1xf32>, tensor<1xf32>) -> {_t(out)}
    %1 = tosa.clamp %0 {{min_val = 0.0 : f32, max_val = {MAX_F32} : f32}} : ({_t(out)}) -> {_t(out)}
    return %1 : {_t(out)}
  }}
}}"""
    padded = np.pad(x.astype(np.float64), ((0, 0), (p, p), (p, p), (0, 0)))
    acc = np.zeros(out)
    for dy in range(k):
        for dx in range(k):
            acc += np.einsum("nyxi,oi->nyxo", padded[:, dy:dy + 6, dx:dx + 6, :], w[:, dy, dx, :].astype(np.float64))
    return mlir, [x], np.maximum(acc + b, 0).astype(np.float32)


def _pool_model(rng):
    """avg_pool2d and max_pool2d (2×2, stride 2) of a 1×4×4×2 input, their difference reshaped to 1×8,
    times a second input (tosa.mul, shift 0), then tosa.sigmoid."""
    x = (rng.integers(-8, 8, (1, 4, 4, 2)) / 4).astype(np.float32)
    b = (rng.integers(-8, 8, (1, 8)) / 4).astype(np.float32)
    pooled = (1, 2, 2, 2)
    mlir = f"""module {{
  func.func @main(%x: {_t(x.shape)}, %b: {_t(b.shape)}) -> {_t(b.shape)} {{
    %izp = "tosa.const"() <{{values = dense<0.0> : tensor<1xf32>}}> : () -> tensor<1xf32>
    %ozp = "tosa.const"() <{{values = dense<0.0> : tensor<1xf32>}}> : () -> tensor<1xf32>
    %avg = tosa.avg_pool2d %x, %izp, %ozp {{acc_type = f32, kernel = array<i64: 2, 2>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>}} : ({_t(x.shape)}, tensor<1xf32>, tensor<1xf32>) -> {_t(pooled)}
    %max = tosa.max_pool2d %x {{kernel = array<i64: 2, 2>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>}} : ({_t(x.shape)}) -> {_t(pooled)}
    %d = tosa.sub %avg, %max : ({_t(pooled)}, {_t(pooled)}) -> {_t(pooled)}
    %shape = tosa.const_shape {{values = dense<[1, 8]> : tensor<2xindex>}} : () -> !tosa.shape<2>
    %flat = tosa.reshape %d, %shape : ({_t(pooled)}, !tosa.shape<2>) -> {_t(b.shape)}
    %shift = "tosa.const"() <{{values = dense<0> : tensor<1xi8>}}> : () -> tensor<1xi8>
    %m = tosa.mul %flat, %b, %shift : ({_t(b.shape)}, {_t(b.shape)}, tensor<1xi8>) -> {_t(b.shape)}
    %0 = tosa.sigmoid %m : ({_t(b.shape)}) -> {_t(b.shape)}
    return %0 : {_t(b.shape)}
  }}
}}"""
    windows = x.astype(np.float64).reshape(1, 2, 2, 2, 2, 2)          # n, y, dy, x, dx, c
    diff = windows.mean(axis=(2, 4)) - windows.max(axis=(2, 4))
    return mlir, [x, b], (1 / (1 + np.exp(-(diff.reshape(1, 8) * b)))).astype(np.float32)


def _concat_model(rng):
    """tosa.concat of 1×2×3 and 1×4×3 along axis 1, tosa.transpose (0, 2, 1), tosa.reduce_sum along axis 2."""
    a = (rng.integers(-8, 8, (1, 2, 3)) / 4).astype(np.float32)
    b = (rng.integers(-8, 8, (1, 4, 3)) / 4).astype(np.float32)
    mlir = f"""module {{
  func.func @main(%a: {_t(a.shape)}, %b: {_t(b.shape)}) -> {_t((1, 3, 1))} {{
    %0 = tosa.concat %a, %b {{axis = 1 : i32}} : ({_t(a.shape)}, {_t(b.shape)}) -> {_t((1, 6, 3))}
    %1 = tosa.transpose %0 {{perms = array<i32: 0, 2, 1>}} : ({_t((1, 6, 3))}) -> {_t((1, 3, 6))}
    %2 = tosa.reduce_sum %1 {{axis = 2 : i32}} : ({_t((1, 3, 6))}) -> {_t((1, 3, 1))}
    return %2 : {_t((1, 3, 1))}
  }}
}}"""
    joined = np.concatenate([a, b], axis=1).astype(np.float64)
    return mlir, [a, b], np.transpose(joined, (0, 2, 1)).sum(axis=2, keepdims=True).astype(np.float32)


# name -> (model builder, tolerance: 0 = bit-exact)
MODELS = {
    "add_1x4": (_add_model, 0.0),
    "matmul_add_relu": (_matmul_model, 0.0),
    "conv1x1_relu": (lambda rng: _conv_model(rng, 1, True), 0.0),
    "conv3x3_relu": (lambda rng: _conv_model(rng, 3, False), 2e-6),
    "pool_reshape_mul_sigmoid": (_pool_model, 1e-6),
    "concat_transpose_reduce": (_concat_model, 0.0),
}


@pytest.fixture(scope="module")
def ml_layers(tmp_path_factory):
    """Arm's ML SDK tools and the two layer folders (tools/ml_layers.py)."""
    from tessera.tools.ml_layers import MlLayersMissing, write_manifests

    if platform.system() != "Linux" or platform.machine() != "x86_64":
        pytest.skip("Arm's ML SDK wheels are for Linux x86-64 only")
    missing = [str(p) for p in TOOLS.values() if not p.exists()]
    try:
        layers = write_manifests(tmp_path_factory.mktemp("ml-layers"))
    except MlLayersMissing as e:
        missing.append(str(e))
    if missing:
        pytest.fail(f"Arm's ML SDK is not installed ({'; '.join(missing)}): `make setup` installs it")
    return layers


def _scenario(folder: Path, mlir: str, inputs: list[np.ndarray], formats: dict | None = None,
              out_dtype=None) -> Path:
    """model-converter and vgf_dump: the VGF and its scenario, with the inputs as .npy files. Each input's
    tensor format must be `formats[its dtype]` (VK_FORMAT_R32_SFLOAT without `formats`) and, with
    `out_dtype`, the output's `formats[out_dtype]` (test_ml_sdk_quantized.py uses it too)."""
    (folder / "model.mlir").write_text(mlir)
    out = run([TOOLS["model-converter"], "-i", folder / "model.mlir", "-o", folder / "model.vgf"], None)
    assert out.returncode == 0 and (folder / "model.vgf").exists(), out.stdout + out.stderr
    out = run([TOOLS["vgf_dump"], "-i", folder / "model.vgf", "--scenario-template", "-o", folder / "scenario.json"],
              None)
    assert out.returncode == 0, out.stdout + out.stderr
    scenario = json.loads((folder / "scenario.json").read_text())
    tensors = [r["tensor"] for r in scenario["resources"] if "tensor" in r]
    sources = [t for t in tensors if "src" in t]
    assert len(sources) == len(inputs) and sum("dst" in t for t in tensors) == 1, scenario
    for i, (tensor, value) in enumerate(zip(sources, inputs)):
        fmt = formats[value.dtype] if formats is not None else "VK_FORMAT_R32_SFLOAT"
        assert tensor["dims"] == list(value.shape) and tensor["format"] == fmt, tensor
        np.save(folder / f"in{i}.npy", value)
        tensor["src"] = f"in{i}.npy"
    (dst,) = [t for t in tensors if "dst" in t]
    if out_dtype is not None:
        assert dst["format"] == formats[np.dtype(out_dtype)], dst
    dst["dst"] = "out0.npy"
    (folder / "scenario.json").write_text(json.dumps(scenario))
    return folder / "scenario.json"


def _reference_env(layers, observer: Path | None = None) -> dict:
    """lavapipe under Graph over Tensor; with `observer` (a session folder), Tessera's layer between them
    (loader 1.3.239 stacks layers in the order of their folders on VK_ADD_LAYER_PATH)."""
    from tessera.vkapi import paths

    env = {k: v for k, v in os.environ.items() if not k.startswith(("VK_", "TESSERA_"))}
    env.update(VK_DRIVER_FILES=lavapipe_manifest(), XDG_RUNTIME_DIR=env.get("XDG_RUNTIME_DIR", "/tmp"),
               VK_ADD_LAYER_PATH=f"{layers.graph_dir}:{layers.tensor_dir}",
               VK_INSTANCE_LAYERS="VK_LAYER_ML_Graph_Emulation:VK_LAYER_ML_Tensor_Emulation")
    if observer is not None:
        observer.mkdir()
        env.update(VK_ADD_LAYER_PATH=f"{layers.graph_dir}:{paths.LAYER_MANIFEST_DIR}:{layers.tensor_dir}",
                   VK_INSTANCE_LAYERS=f"VK_LAYER_ML_Graph_Emulation:{LAYER}:VK_LAYER_ML_Tensor_Emulation",
                   TESSERA_LOG="info", TESSERA_SESSION_DIR=str(observer))
    return env


def _scenario_run(scenario: Path, output: Path, env: dict, prefix: list | None = None):
    """scenario_runner (after `prefix`, e.g. `tessera run ... --`) writing into `output`: its process and
    output tensor (test_ml_sdk_quantized.py uses it too)."""
    output.mkdir()
    out = run([*(prefix or []), TOOLS["scenario_runner"], "--scenario", scenario, "--output", output], env,
              cwd=scenario.parent)
    assert out.returncode == 0, out.stdout + out.stderr
    return out, np.load(output / "out0.npy")


def _check(result: np.ndarray, expected: np.ndarray, tolerance: float, what: str) -> None:
    assert result.shape == expected.shape and result.dtype == np.float32, (what, result.shape, result.dtype)
    if tolerance == 0:
        assert np.array_equal(result, expected), f"{what}: {result} != {expected}"
    else:
        diff = float(np.max(np.abs(result.astype(np.float64) - expected)))
        assert diff <= tolerance, f"{what}: max difference {diff} > {tolerance}"


_PREPARED: dict[str, tuple] = {}


def _prepared(name: str, layers, tmp_path_factory) -> tuple[Path, np.ndarray, np.ndarray, float]:
    """(scenario, numpy's output, the reference's output, tolerance) of model `name`, made once per session:
    the reference (lavapipe under Arm's two emulation layers) is checked against numpy here."""
    if name not in _PREPARED:
        build, tolerance = MODELS[name]
        mlir, inputs, expected = build(np.random.default_rng(sum(map(ord, name))))
        folder = tmp_path_factory.mktemp(name)
        scenario = _scenario(folder, mlir, inputs)
        _, reference = _scenario_run(scenario, folder / "out-reference", _reference_env(layers))
        _check(reference, expected, tolerance, "lavapipe + Arm's emulation layers vs numpy")
        _PREPARED[name] = (scenario, expected, reference, tolerance)
    return _PREPARED[name]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_scenario_on_tessera_equals_numpy_and_reference(name, ml_layers, shims, tmp_path, tmp_path_factory):
    """Arm's Graph layer above Tessera: the layer implements VK_ARM_data_graph itself (it does not use the
    driver's) and lowers each graph to compute dispatches on the emulated Mali."""
    scenario, expected, reference, tolerance = _prepared(name, ml_layers, tmp_path_factory)

    observed, observed_result = _scenario_run(scenario, tmp_path / "out-observed",
                                              _reference_env(ml_layers, tmp_path / "observer"))
    _check(observed_result, expected, tolerance, "reference with Tessera's layer observing vs numpy")
    dispatches = records_made_in_c(observed.stderr).get("layer", {}).get("vkCmdDispatch", 0)
    assert dispatches >= 1, observed.stderr

    # Tessera: Arm's Graph layer above Tessera's layer (named below it in VK_INSTANCE_LAYERS) and driver.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VK_", "TESSERA_"))}
    env.update(VK_ADD_LAYER_PATH=str(ml_layers.graph_dir), VK_INSTANCE_LAYERS=f"VK_LAYER_ML_Graph_Emulation:{LAYER}",
               TESSERA_LOG="info")
    session = tmp_path / "session"
    ran, result = _scenario_run(scenario, tmp_path / "out-tessera", env,
                                [TESSERA, "run", "--out", session, "--"])
    assert "cannot be lowered" not in ran.stderr and "Traceback" not in ran.stderr, ran.stderr
    _check(result, expected, tolerance, "Tessera vs numpy")
    _check(result, reference, tolerance, "Tessera vs the reference")

    packets = list(pf.read_packets(session / "merged.perfetto-trace"))
    assert pf.check_render_stages(packets).problems == []
    events = [p.gpu_render_stage_event for p in packets if p.HasField("gpu_render_stage_event")]
    assert all(pf.extra(e, "metadata") != "missing" for e in events)
    computes = [e for e in events if pf.extra(e, "command") == "vkCmdDispatch"]
    assert len(computes) == dispatches, [e.name for e in events]
    assert all(e.duration > 0 and e.name.startswith("Dispatch ") for e in computes)
    # the session report names them: their count by type, the longest by name, nothing without metadata
    assert re.search(rf"^\s+dispatch\s+{dispatches}$", ran.stdout, re.M), ran.stdout
    assert "GPU events without metadata" not in ran.stdout, ran.stdout
    longest = Counter(e.name for e in sorted(events, key=lambda e: -e.duration)[:5])
    assert any(n in ran.stdout for n in longest if n.startswith("Dispatch ")), ran.stdout


# TOSA operators per model: each is one operator of the data-graph workload (RESHAPE included)
OPERATORS = {"add_1x4": ["ADD"], "matmul_add_relu": ["MATMUL", "ADD", "CLAMP"], "conv1x1_relu": ["CONV2D", "CLAMP"],
             "conv3x3_relu": ["CONV2D", "CLAMP"],
             "pool_reshape_mul_sigmoid": ["AVG_POOL2D", "MAX_POOL2D", "SUB", "RESHAPE", "MUL", "SIGMOID"],
             "concat_transpose_reduce": ["CONCAT", "TRANSPOSE", "REDUCE_SUM"]}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_scenario_natively_on_tessera(name, ml_layers, shims, tmp_path, tmp_path_factory):
    """No Arm layer: the emulated Mali's own VK_ARM_data_graph (icd/data_graph/) runs the VGF's graph; the
    outputs equal numpy's and the reference's, and the trace has one data-graph workload per dispatch."""
    scenario, expected, reference, tolerance = _prepared(name, ml_layers, tmp_path_factory)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VK_", "TESSERA_"))}
    env["TESSERA_LOG"] = "info"
    session = tmp_path / "session"
    ran, result = _scenario_run(scenario, tmp_path / "out-native", env, [TESSERA, "run", "--out", session, "--"])
    assert "Traceback" not in ran.stderr and "VK_ARM_data_graph:" not in ran.stderr, ran.stderr
    _check(result, expected, tolerance, "Tessera's own data graph vs numpy")
    _check(result, reference, tolerance, "Tessera's own data graph vs the reference")

    packets = list(pf.read_packets(session / "merged.perfetto-trace"))
    assert pf.check_render_stages(packets).problems == []
    events = [p.gpu_render_stage_event for p in packets if p.HasField("gpu_render_stage_event")]
    graphs = [e for e in events if pf.extra(e, "command") == "vkCmdDispatchDataGraphARM"]
    assert len(graphs) == 1 and not any(pf.extra(e, "command") == "vkCmdDispatch" for e in events), \
        [(e.name, pf.extra(e, "command")) for e in events]
    g = graphs[0]
    # tagged by the layer like any other workload (its t<tag> label joined to kind data_graph), on the compute stage
    assert pf.extra(g, "kind") == "data_graph" and pf.extra(g, "metadata") != "missing" and g.name == "Data graph"
    assert re.fullmatch(r"t\d+", pf.extra(g, "Labels") or "")
    costs = json.loads(pf.extra(g, "Operators"))
    assert [c["operator"] for c in costs] == OPERATORS[name], costs
    assert all(c["bytes"] > 0 and c["ns"] > 0 for c in costs)
    assert int(pf.extra(g, "Ops")) == sum(c["ops"] for c in costs)
    assert g.duration >= sum(c["ns"] for c in costs)
    # the report: one data graph workload, and each operator in the breakdown
    assert re.search(r"^\s+data graph\s+1$", ran.stdout, re.M), ran.stdout
    assert "data-graph operators (modelled on the emulated GPU)" in ran.stdout, ran.stdout
    for op in set(OPERATORS[name]):
        assert re.search(rf"^\s+{op}\s+{OPERATORS[name].count(op)}\s+\d+\s+\d+\s+[\d.]+ ns$", ran.stdout, re.M), \
            ran.stdout
    # Arm's export: the workload is Arm's DispatchDataGraph record (type datagraph) under the same tag
    from tessera.hostd.arm_metadata import read_metadata

    out = run([TESSERA, "export", session, "--format", "arm", "-o", tmp_path / "arm"], None)
    assert out.returncode == 0, out.stdout + out.stderr
    arm = [w for path in (tmp_path / "arm").glob("*.metadata") for frame in read_metadata(path)
           for submit in frame["submits"] for w in submit["workloads"]]
    assert [w for w in arm if w["type"] == "datagraph"] == [{"type": "datagraph", "tid": int(pf.extra(g, "tag")),
                                                            "label": []}], arm


def test_tools_present_when_installed():
    """The console scripts the tests use are the 'ml' extra's (a rename upstream fails here first)."""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        pytest.skip("Arm's ML SDK wheels are for Linux x86-64 only")
    assert all(shutil.which(str(p)) for p in TOOLS.values()), TOOLS
