"""Tessera stacked with other people's layers (issue #23): Debian's vkBasalt and MangoHud (implicit
layers, always above ours), Mesa's overlay and the Khronos validation layer on either side.

vkBasalt and MangoHud ask the next element's vkGetInstanceProcAddr for `(NULL, "vkCreateDevice")` in
their vkCreateDevice: the layer must answer its own intercepts for a NULL instance (chain.py
make_proc_addr). A layer below ours may not pass the instance-extension query down (the validation
layer answers VK_ERROR_LAYER_NOT_PRESENT): the layer still enables VK_EXT_debug_utils, so every GPU
event keeps its metadata for an application that does not enable it (chain.py _instance_info).
"""
from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import pytest
from integration_support import PYTHON, REPO, run

from tessera.hostd.embedded import merge_session
from tessera.layer.shim_spec import LAYER_NAME
from tessera.schemas import perfetto as pf
from tessera.tools.launch import LaunchConfig, environment

FRAMES = 20
OVERLAY = "VK_LAYER_MESA_overlay"
VALIDATION = "VK_LAYER_KHRONOS_validation"
IMPLICIT = Path("/usr/share/vulkan/implicit_layer.d")
EXPLICIT = Path("/usr/share/vulkan/explicit_layer.d")
MANIFESTS = {"vkbasalt": IMPLICIT / "vkBasalt.json", "mangohud": IMPLICIT / "MangoHud.json",
             "overlay": EXPLICIT / "VkLayer_MESA_overlay.json",
             "validation": EXPLICIT / "VkLayer_khronos_validation.json"}


def _needs(name: str) -> None:
    if not MANIFESTS[name].exists():
        pytest.fail(f"{MANIFESTS[name]} missing: `make setup` installs Debian's vkbasalt, mangohud, "
                    "mesa-vulkan-drivers and vulkan-validationlayers")


def _stack(env: dict[str, str], above: tuple[str, ...] = (), below: tuple[str, ...] = ()) -> dict[str, str]:
    """`env` with explicit layers `above` and `below` ours. The loader (1.3.239) orders explicit layers
    by where it found their manifests, not by VK_INSTANCE_LAYERS: the folders of VK_ADD_LAYER_PATH
    first, in order, then the system's. So ours (VK_ADD_LAYER_PATH, set by `tessera run`) is above the
    system's layers; the system's folder named first in VK_ADD_LAYER_PATH puts them above it."""
    env = dict(env, VK_INSTANCE_LAYERS=os.pathsep.join([*above, LAYER_NAME, *below]))
    if above:
        env["VK_ADD_LAYER_PATH"] = os.pathsep.join([str(EXPLICIT), env["VK_ADD_LAYER_PATH"]])
    return env


def _vkbasalt(env, tmp):
    config = tmp / "vkBasalt.conf"
    config.write_text("effects = cas\ncasSharpness = 0.4\n")
    return dict(env, ENABLE_VKBASALT="1", VKBASALT_CONFIG_FILE=str(config))


# name -> (the other layer, whether it is above ours, environment (env, tmp) -> env, what it left in the trace:
# (render-stage event names -> count) -> bool). A layer above ours is seen by ours: every GPU event has its
# metadata. A layer below ours does its own GPU work unseen by ours (Mesa's overlay): only the
# application's events have metadata.
STACKS = {
    # vkBasalt draws its effect in a render pass of its own after each of the application's.
    "vkbasalt-above": ("VK_LAYER_VKBASALT_post_processing", True, _vkbasalt,
                       lambda names: names["Render pass 500×500, 1 draw"] == 4 * FRAMES),
    # MangoHud draws its HUD in a render pass of its own (2 draws) after each of the application's.
    "mangohud-above": ("VK_LAYER_MANGOHUD_overlay", True, lambda env, tmp: dict(env, MANGOHUD="1"),
                       lambda names: names["Render pass 500×500, 2 draws"] >= 2 * (FRAMES - 1)),
    # Mesa's overlay draws its HUD in a render pass of its own (2 draws), as MangoHud (its fork) does.
    "overlay-above": (OVERLAY, True, lambda env, tmp: _stack(env, above=(OVERLAY,)),
                      lambda names: names["Render pass 500×500, 2 draws"] >= 2 * (FRAMES - 1)),
    "overlay-below": (OVERLAY, False, lambda env, tmp: _stack(env, below=(OVERLAY,)), None),
    "validation-above": (VALIDATION, True, lambda env, tmp: _stack(env, above=(VALIDATION,)), None),
    # vkcube does not enable VK_EXT_debug_utils (without --validate): the layer enables it below.
    "validation-below": (VALIDATION, False, lambda env, tmp: _stack(env, below=(VALIDATION,)), None),
}
_CALLSTACK = re.compile(r"^(?:\w+ \| )?LAYER:\s+(VK_LAYER_\w+)\s*$", re.M)


def _layer_order(stderr: str) -> list[str]:
    """The instance's layers, from the application down, as VK_LOADER_DEBUG=layer prints them."""
    block = stderr.split("vkCreateInstance layer callstack setup to:", 1)[1].split("<Drivers>", 1)[0]
    return _CALLSTACK.findall(block)


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_vkcube_with_another_layer(stack, shims, tmp_path, xvfb_display):
    """vkcube runs as it does without the other layer, and every GPU event of what passes through
    our layer has its metadata."""
    other, above, arrange, drawn = STACKS[stack]
    _needs(stack.split("-")[0])
    session = tmp_path / "session"
    env = dict(environment(LaunchConfig(session)), DISPLAY=xvfb_display, VK_LOADER_DEBUG="layer")
    env.pop("TESSERA_HOSTD", None)   # the layer spools; merged below
    out = run(["vkcube", "--c", str(FRAMES)], arrange(env, tmp_path), timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-3000:]
    order = _layer_order(out.stderr)
    assert (order.index(other) < order.index(LAYER_NAME)) == above, order
    assert "Selected GPU 0: Mali-G720 (emulated)" in text
    assert "Traceback" not in text and "exception in" not in text, text[-3000:]
    assert "Validation Error" not in text, text[-3000:]
    result = merge_session(session)
    names = Counter(e.gpu_render_stage_event.name for e in pf.read_packets(result.output)
                    if e.HasField("gpu_render_stage_event"))
    if above:
        assert result.gpu_events >= 2 * FRAMES and result.events_without_metadata == 0, (result.gpu_events,
                                                                                          result.examples)
    else:   # vkcube's own render passes (binning and main) and nothing else
        assert result.events_with_metadata == 2 * FRAMES, (result.gpu_events, result.examples)
    assert names["Render pass 500×500, 1 draw"] >= 2 * FRAMES, names
    if drawn is not None:
        assert drawn(names), names


EXAMPLES = ["compute_collatz", "render_passes", "transfers"]
WITHOUT_DEBUG_UTILS = REPO / "tests" / "integration" / "apps" / "without_debug_utils.py"


@pytest.mark.parametrize("enabled_by", ["environment", "application"])
@pytest.mark.parametrize("example", EXAMPLES)
def test_validation_below_an_application_without_debug_utils(example, enabled_by, tessera_env):
    """The validation layer below ours (named in VK_INSTANCE_LAYERS, or enabled by the application
    itself, which the loader places below the environment's layers) does not pass the
    instance-extension query down; the layer still enables VK_EXT_debug_utils for its labels, so
    every GPU event has its metadata."""
    _needs("validation")
    env = _stack(tessera_env, below=(VALIDATION,)) if enabled_by == "environment" else dict(tessera_env)
    env.pop("TESSERA_HOSTD", None)
    argv = [PYTHON, WITHOUT_DEBUG_UTILS, example] + ([VALIDATION] if enabled_by == "application" else [])
    out = run(argv, dict(env, VK_LOADER_DEBUG="layer"))
    assert out.returncode == 0 and "without_debug_utils: OK" in out.stdout, out.stdout + out.stderr
    order = _layer_order(out.stderr)
    assert order.index(LAYER_NAME) < order.index(VALIDATION), order
    assert "Validation Error" not in out.stdout + out.stderr
    assert "exception in" not in out.stderr, out.stderr
    result = merge_session(Path(env["TESSERA_SESSION_DIR"]))
    assert result.gpu_events > 0
    assert result.events_without_metadata == 0, (result.gpu_events, result.examples)
