"""The timing model (icd/timing.py) against durations computed by hand from its documented constants.

A Mali-G720-class profile with 8 shader cores at 1000 MHz (1 cycle = 1 ns), pixel rate 4/clk/core
(the shipped mali-g720 reports its device file's 10 cores; the hand computations use 8).
Mali-G78 profile: 20 cores at 850 MHz. Constants used: job setup 2000 cycles,
50 cycles per invocation, 20 per vertex, 10 per fragment, 1 tiler cycle per
primitive, 64 cycles per 16x16 tile, draws cover 1/4 of the area, 64 varying
bytes per vertex, 32 bytes/ns memory, transfers move each byte twice.
"""
from __future__ import annotations

import os
import subprocess
import sys

from dataclasses import replace

import pytest

from tessera.icd import timing
from tessera.icd.profiles import PROFILES

G720, G78 = replace(PROFILES["mali-g720"], shader_cores=8), PROFILES["mali-g78"]


def test_constants_are_the_documented_ones():
    # If one changes, every hand computation below must be redone.
    assert (timing.JOB_SETUP_CYCLES, timing.DEFAULT_INVOCATION_CYCLES, timing.DEFAULT_VERTEX_CYCLES,
            timing.DEFAULT_FRAGMENT_CYCLES, timing.TILER_CYCLES_PER_PRIMITIVE, timing.TILE_CYCLES,
            timing.DRAW_COVERAGE, timing.VARYING_BYTES_PER_VERTEX, timing.MEMORY_BYTES_PER_NS,
            timing.TRANSFER_TRAFFIC_PER_BYTE, timing.TILE_SIZE) == (2000, 50.0, 20.0, 10.0, 1.0, 64.0, 0.25, 64,
                                                                    32.0, 2.0, 16)
    assert (G720.shader_cores, G720.clock_mhz, G720.pixel_rate) == (8, 1000, 4)
    assert (G78.shader_cores, G78.clock_mhz) == (20, 850)


@pytest.mark.parametrize("invocations, cycles, want", [
    (1000, None, 2000 + 1000 * 50 // 8),       # 8250 ns
    (64, None, 2000 + 64 * 50 // 8),           # 2400
    (64, 12.5, 2000 + 100),                    # compiler-model cost: 64 * 12.5 / 8 = 100
    (0, None, 2000),                           # setup only
    (3, None, 2019),                           # 2000 + 18.75 cycles, rounded up
])
def test_dispatch_on_g720(invocations, cycles, want):
    phase = timing.dispatch(G720, invocations, cycles)
    assert (phase.stage, phase.queue, phase.duration_ns) == ("compute", "non-fragment", want)


def test_dispatch_on_g78_converts_cycles_at_850_mhz():
    # 2000 + 1000 * 50 / 20 = 4500 cycles; 4500 / 0.85 = 5294.1 ns, rounded up
    assert timing.dispatch(G78, 1000).duration_ns == 5295


def test_trace_rays():
    # No pipeline cost known: 50 (default invocation) + 100 (traversal) cycles per ray; 800 * 150 / 8 = 15000
    phase = timing.trace_rays(G720, 800)
    assert (phase.stage, phase.queue, phase.duration_ns) == ("trace_rays", "non-fragment", 2000 + 15000)


def test_ray_cost_from_pipeline_stages():
    assert (timing.TRAVERSAL_CYCLES_PER_RAY, timing.RAY_HIT_FRACTION) == (100.0, 0.5)
    # raygen 4 + traversal 100 + half of (closest hit 6 + any hit 2) + half of miss 2 + callable 1 = 110
    assert timing.ray_cycles({"raygen": 4.0, "closest_hit": 6.0, "any_hit": 2.0, "miss": 2.0,
                              "callable": 1.0}) == 110.0
    assert timing.ray_cycles({}) is None
    # 64 x 64 rays at 110 cycles over 8 cores: 4096 * 110 / 8 = 56320
    assert timing.trace_rays(G720, 64 * 64, 110.0).duration_ns == 2000 + 56320


@pytest.mark.parametrize("stage, primitives, instances, want", [
    # fast build: 30 cycles/primitive; 3 triangles: 3 * 30 / 8 = 11.25 -> 2000 + 11.25 cycles -> 2012 ns;
    # memory 3 * 64 / 32 = 6 ns
    ("acceleration structure 'fast build' build", 3, 0, 2012 + 6),
    # fast trace: 120 cycles per primitive, instances weigh 1.5: 3 instances = 4.5 * 120 / 8 = 67.5 -> 2068;
    # memory 3 * 128 / 32 = 12
    ("acceleration structure 'fast trace' build", 0, 3, 2068 + 12),
    # update: 10 cycles per primitive: 800 * 10 / 8 = 1000; memory 800 * 64 / 32 = 1600
    ("acceleration structure update", 800, 0, 3000 + 1600),
    ("acceleration structure 'fast trace' build", -1, -1, 2000),   # unknown sizes: setup only
])
def test_acceleration_structure_builds(stage, primitives, instances, want):
    phase = timing.accel_build(G720, stage, primitives, instances)
    assert (phase.stage, phase.queue, phase.duration_ns) == (stage, "non-fragment", want)


def test_acceleration_structure_copies_are_transfers():
    phase = timing.accel_copy(G720, "acceleration structure copy to memory", 16384)
    assert (phase.queue, phase.duration_ns) == ("transfer", 2000 + 1024)
    assert timing.accel_copy(G720, "acceleration structure copy from memory", -1).duration_ns == 2000


@pytest.mark.parametrize("stage, nbytes, want", [
    ("fill buffer", 988, 2000 + 62),           # 988 * 2 / 32 = 61.75 -> 62
    ("copy image to buffer", 16384, 2000 + 1024),
    ("update buffer", 64, 2000 + 4),
    ("copy buffer", 0, 2000),
])
def test_transfer(stage, nbytes, want):
    phase = timing.transfer(G720, stage, nbytes)
    assert (phase.stage, phase.queue, phase.duration_ns) == (stage, "transfer", want)


def test_render_pass_shader_bound():
    # 64x64, 2 draws of 6 vertices (4 triangles), one RGBA8 attachment stored (16384 bytes).
    binning, main = timing.render_pass(G720, width=64, height=64, layers=1, draws=2, vertices=12, primitives=4,
                                       load_bytes=0, store_bytes=16384)
    # binning: 2000 + max(12 * 20 / 8 = 30, 4 * 1) = 2030 cycles, + 12 * 64 / 32 = 24 ns of varyings
    assert (binning.stage, binning.queue, binning.duration_ns) == ("binning", "non-fragment", 2054)
    # main: fragments 4096 * 2 * 0.25 = 2048; shading 2048 * 10 / 8 = 2560 > pixels 2048 / (4 * 8) = 64;
    # 16 tiles * 64 / 8 = 128; 2000 + 2560 + 128 = 4688, + 16384 / 32 = 512 ns stored
    assert (main.stage, main.queue, main.duration_ns) == ("main", "fragment", 5200)


def test_render_pass_tiler_bound_binning():
    binning, _ = timing.render_pass(G720, width=16, height=16, layers=1, draws=1, vertices=30, primitives=1000,
                                    load_bytes=0, store_bytes=0)
    # shading 30 * 20 / 8 = 75 < tiling 1000: 2000 + 1000, + 30 * 64 / 32 = 60
    assert binning.duration_ns == 3060


def test_render_pass_pixel_bound_and_partial_tiles():
    # 17x17: ceil(17/16)^2 = 4 tiles; fragments 289 * 4 * 0.25 = 289; shading 289 * 0.01 / 8 = 0.36
    # < pixels 289 / 32 = 9.03; tiles 4 * 64 / 8 = 32; 2000 + 9.03 + 32 = 2041.03 -> 2042; load 100 + store 28 = 4 ns
    _, main = timing.render_pass(G720, width=17, height=17, layers=1, draws=4, vertices=12, primitives=4,
                                 load_bytes=100, store_bytes=28, fragment_cycles=0.01)
    assert main.duration_ns == 2042 + 4


def test_render_pass_layers_multiply_area_and_tiles():
    # 16x16 x 2 layers, 1 draw: fragments 512 * 0.25 = 128; 128 * 10 / 8 = 160; 2 tiles * 8 = 16
    _, main = timing.render_pass(G720, width=16, height=16, layers=2, draws=1, vertices=3, primitives=1,
                                 load_bytes=0, store_bytes=0)
    assert main.duration_ns == 2000 + 160 + 16


def test_compiler_model_costs_replace_defaults():
    binning, main = timing.render_pass(G720, width=16, height=16, layers=1, draws=1, vertices=80, primitives=1,
                                       load_bytes=0, store_bytes=0, vertex_cycles=4.0, fragment_cycles=2.0)
    assert binning.duration_ns == 2000 + 80 * 4 // 8 + 80 * 64 // 32          # 2000 + 40 + 160
    assert main.duration_ns == 2000 + 64 * 2 // 8 + 8                          # 64 fragments * 2 / 8 = 16


_G78_PASS = "from tessera.icd import timing; from tessera.icd.profiles import PROFILES; print([p.duration_ns " \
            "for p in timing.render_pass(PROFILES['mali-g78'], width=100, height=60, layers=1, draws=3, vertices=99, " \
            "primitives=33, load_bytes=24000, store_bytes=24000)])"


@pytest.mark.parametrize("hash_seed", ["0", "1", "random"])
def test_same_workload_same_duration_in_any_run(hash_seed):
    """Two runs of an app give the same durations: each run is a new interpreter (hash seeds
    differ), and each must give the hand-computed values, so a drift in any one run fails."""
    # binning: shading 99 * 20 / 20 = 99 > tiling 33: 2099 cycles / 0.85 = 2469.4 -> 2470 ns, + 99 * 64 / 32 = 198
    # main: 100x60, 7 x 4 = 28 tiles; fragments 6000 * 3 * 0.25 = 4500; shading 4500 * 10 / 20 = 2250 > pixels
    # 4500 / (2 * 20) = 112.5; tiles 28 * 64 / 20 = 89.6; 4339.6 / 0.85 = 5105.4 -> 5106, + 48000 / 32 = 1500
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)
    out = subprocess.run([sys.executable, "-c", _G78_PASS], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[2668, 6606]"
