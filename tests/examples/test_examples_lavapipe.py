"""Integration tests: every sample app in examples/ passes its own checks on plain lavapipe.

Runs the real Khronos loader with only Mesa lavapipe (VK_DRIVER_FILES), each
app in a subprocess: the Python examples with this interpreter, the C app and
the C benchmark after `make -C examples`. Each run must exit 0 and print its
one-line summary ("<name>: OK ..."). The same runs are repeated under
VK_LAYER_KHRONOS_validation with synchronization validation, where the apps fail on any validation warning or
error they receive through VK_EXT_debug_utils (skipped when the layer is not
installed). The emulated-driver variants live elsewhere (the lead's suites).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
VALIDATION_LAYER = "VK_LAYER_KHRONOS_validation"
LAYER_DIRS = [Path("/usr/share/vulkan/explicit_layer.d"), Path("/usr/local/share/vulkan/explicit_layer.d"),
              Path("/etc/vulkan/explicit_layer.d")]
PY_EXAMPLES = ["compute_collatz", "render_passes", "transfers", "debug_labels", "ray_tracing", "ray_query",
               "shader_costs", "overdraw"]
HELPERS = {"vkapp", "rt_scene", "vktensors", "vkgraphs"}   # shared modules of the examples, not examples
# Examples of extensions only the emulated Mali has (tested through it in tests/integration).
EMULATED_ONLY = {"mlp_tensors": "VK_ARM_tensors: tests/integration/test_tensors.py",
                 "conv_net_graph": "VK_ARM_data_graph: tests/icd/test_data_graph_ops.py"}
TIMEOUT_S = 300



def _backend() -> Path | None:
    """The backend the emulated driver uses by default (tessera.icd.backend.default_manifest)."""
    from tessera.icd.backend import BackendError, default_manifest

    try:
        return default_manifest()
    except BackendError:
        return None


LAVAPIPE = _backend()
pytestmark = pytest.mark.skipif(LAVAPIPE is None, reason="no lavapipe ICD manifest installed (make setup)")


def _has_validation_layer() -> bool:
    return any(d.glob("*khronos_validation*.json") for d in LAYER_DIRS if d.is_dir())


MODES = [
    pytest.param("plain", id="plain"),
    pytest.param("validation", id="validation",
                 marks=pytest.mark.skipif(not _has_validation_layer(), reason="validation layer not installed")),
]


def _env(mode: str, tmp_cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("VK_ICD_FILENAMES", "VK_ADD_DRIVER_FILES", "VK_INSTANCE_LAYERS", "VK_LOADER_LAYERS_ENABLE",
                        "VK_LAYER_ENABLES")}
    env["VK_DRIVER_FILES"] = str(LAVAPIPE)
    env["TESSERA_SHADER_CACHE"] = str(tmp_cache)
    if mode == "validation":
        env["VK_INSTANCE_LAYERS"] = VALIDATION_LAYER
        env["VK_LAYER_ENABLES"] = "VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT"
    return env


def _run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT_S)


def _assert_ok(proc: subprocess.CompletedProcess[str], name: str) -> str:
    detail = f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
    assert proc.returncode == 0, detail
    lines = proc.stdout.strip().splitlines()
    assert lines and re.fullmatch(rf"{re.escape(name)}: OK \S.*", lines[-1]), detail
    return lines[-1]


@pytest.fixture(scope="session")
def shader_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spv-cache")


@pytest.fixture(scope="session")
def built() -> Path:
    """Build the C app, its SPIR-V and the C benchmark once per session."""
    proc = subprocess.run(["make", "-C", str(EXAMPLES)], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, f"make -C examples failed:\n{proc.stdout}\n{proc.stderr}"
    return REPO / "build"


def test_every_python_example_is_tested() -> None:
    found = {p.stem for p in EXAMPLES.glob("*.py")} - HELPERS - EMULATED_ONLY.keys()
    assert found == set(PY_EXAMPLES)


@pytest.mark.parametrize("name", PY_EXAMPLES)
def test_examples_start_with_run_docstring(name: str) -> None:
    text = (EXAMPLES / f"{name}.py").read_text()
    assert text.startswith('"""') and "Run" in text.split('"""')[1] and "check" in text.split('"""')[1]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", PY_EXAMPLES)
def test_python_example(name: str, mode: str, shader_cache: Path) -> None:
    proc = _run([sys.executable, str(EXAMPLES / f"{name}.py")], _env(mode, shader_cache))
    summary = _assert_ok(proc, name)
    if name == "debug_labels" and mode == "validation":
        # The validation layer offers VK_EXT_debug_marker, so that path runs too.
        assert "with VK_EXT_debug_marker" in summary


@pytest.mark.parametrize("mode", MODES)
def test_c_compute_and_draw(mode: str, built: Path, shader_cache: Path) -> None:
    exe = built / "examples" / "compute_and_draw"
    _assert_ok(_run([str(exe)], _env(mode, shader_cache)), "compute_and_draw")
    # The shader directory may also be given on the command line.
    _assert_ok(_run([str(exe), str(built / "examples" / "shaders")], _env(mode, shader_cache)), "compute_and_draw")


def test_c_compute_and_draw_reports_missing_shaders(built: Path, tmp_path: Path) -> None:
    proc = _run([str(built / "examples" / "compute_and_draw"), str(tmp_path)], _env("plain", tmp_path))
    assert proc.returncode != 0
    assert "compute_and_draw: FAIL cannot open SPIR-V" in proc.stderr


@pytest.mark.parametrize("mode", ["draw", "dispatch", "submit"])
def test_record_cost_bench(built: Path, shader_cache: Path, mode: str) -> None:
    proc = _run([str(built / "bench" / "record_cost"), mode, "500", "2"], _env("plain", shader_cache))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["mode"] == mode and result["calls"] == 500 and result["ns_per_call"] > 0
