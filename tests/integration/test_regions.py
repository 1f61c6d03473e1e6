"""VK_ARM_performance_counters_by_region in the emulated Mali, through the real loader, driver and
backend (issue #13): properties, enumeration (count / VK_INCOMPLETE), and per-region values of known
geometry against an independent numpy rasterisation of the same rectangles and the shaders'
control flow, byte for byte in the registry's layout (padding untouched); misuse reported, never
written. The app is tests/integration/apps/regions_api.py."""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from integration_support import PYTHON, REPO, run

sys.path.insert(0, str(REPO / "tests" / "integration" / "apps"))
import regions_api as app  # noqa: E402

VK_INCOMPLETE = 5
NAMES = ["Fragment threads", "Covered samples", "Killed fragments", "FMA pipe thread-operations",
         "CVT pipe thread-operations", "SFU pipe thread-operations", "LS pipe thread-operations",
         "Texture pipe thread-operations", "Varying pipe thread-operations", "Tile write-back bytes"]
IDS = list(range(0x1001, 0x100B))
PIPES = ["fma", "cvt", "sfu", "ls", "tex", "var"]
OPS_INDEX = {"fma": 0, "cvt": 1, "sfu": 2, "ls": 3, "var": 4, "tex": 5}   # compiler BlockCost.ops order
REGION, ROW_ALIGN, REGION_ALIGN = (32, 32), 64, 16


@pytest.fixture(scope="module")
def reads(shims, tmp_path_factory) -> dict:
    from tessera.tools.launch import LaunchConfig, environment

    env = environment(LaunchConfig(tmp_path_factory.mktemp("regions") / "session"))
    out = run([PYTHON, REPO / "tests" / "integration" / "apps" / "regions_api.py"], env)
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads(out.stdout.strip().splitlines()[-2])
    data["stderr"] = out.stderr
    return data


# ---- the CPU reference ---------------------------------------------------------------------------
def block_ops(shader: str) -> list[list[int]]:
    sys.path.insert(0, str(REPO / "examples"))
    import vkapp

    from tessera.compiler import api

    code = vkapp.compile_glsl(vkapp.Settings.from_env(), vkapp.SHADER_DIR / shader)
    return [[int(round(b.ops[OPS_INDEX[p]])) for p in PIPES] for b in api.shader_cost(code, "main", "mali-g720",
                                                                                      None).blocks]


def branchy_pixel(x: int, y: int) -> tuple[list[int], bool]:
    """Block executions of examples/shaders/branchy.frag for one fragment (tests/shader_references.py
    branchy_blocks, per pixel), and whether it discards."""
    c = [0] * 11
    c[0] = 1
    if (x + y) % 3 == 0:
        c[1] = 1
        return c, True
    c[2] = 1
    if x < 8:
        c[3] = 1
    else:
        trips = y % 4
        c[4], c[5], c[6], c[7], c[8], c[9] = 1, trips + 1, trips + 1, trips, trips, 1
    c[10] = 1
    return c, False


def coverage(rect, shape, scissor) -> np.ndarray:
    """1 where a pixel centre is inside the rectangle and the scissor (edges on pixel boundaries)."""
    h, w = shape
    x0, y0, x1, y1 = rect
    sx, sy, sw, sh = scissor
    m = np.zeros((h, w), dtype=np.int64)
    m[max(y0, sy):min(y1, sy + sh), max(x0, sx):min(x1, sx + sw)] = 1
    return m


def per_region(pixels: np.ndarray, area) -> np.ndarray:
    """Sum of a per-pixel map over each region of the render area: (rows, cols)."""
    x, y, w, h = area
    rw, rh = REGION
    rows, cols = -(-h // rh), -(-w // rw)
    out = np.zeros((rows, cols), dtype=np.int64)
    for ry in range(rows):
        for rx in range(cols):
            out[ry, rx] = pixels[y + ry * rh:min(y + h, y + (ry + 1) * rh),
                                 x + rx * rw:min(x + w, x + (rx + 1) * rw)].sum()
    return out


def layout(width: int, height: int, c: int) -> tuple[int, int, int]:
    """(region stride, row stride, total bytes): vk.xml's formula."""
    region = -(-c * 4 // REGION_ALIGN) * REGION_ALIGN
    row = -(-(-(-width // REGION[0]) * region) // ROW_ALIGN) * ROW_ALIGN
    return region, row, row * -(-height // REGION[1])


def expected_bytes(grids: list[np.ndarray], width: int, height: int, size: int) -> bytes:
    """The buffer as the registry lays it out: region values, sentinel in padding and past the end."""
    c = len(grids)
    region, row, total = layout(width, height, c)
    data = bytearray([app.SENTINEL]) * size
    rows, cols = grids[0].shape
    for ry in range(rows):
        for rx in range(cols):
            for k in range(c):
                data[ry * row + rx * region + 4 * k:ry * row + rx * region + 4 * k + 4] = \
                    int(grids[k][ry, rx]).to_bytes(4, "little")
    return bytes(data)


def area_reference() -> list[np.ndarray]:
    iw, ih = app.AREA_IMAGE
    shape = (ih, iw)
    area = app.AREA
    full = (area[0], area[1], area[0] + area[2], area[1] + area[3])
    solid_cov = coverage(full, shape, area) + 2 * coverage(app.SQUARE, shape, area)
    branchy_cov = coverage(app.BRANCHY, shape, area)
    solid_ops, branchy_ops = np.array(block_ops("solid.frag")), np.array(block_ops("branchy.frag"))
    assert len(solid_ops) == 1
    killed = np.zeros(shape, dtype=np.int64)
    pipes = np.zeros((len(PIPES),) + shape, dtype=np.int64)
    pipes += solid_ops[0][:, None, None] * solid_cov[None]
    for y, x in zip(*np.nonzero(branchy_cov)):
        blocks, discarded = branchy_pixel(int(x), int(y))
        killed[y, x] = int(discarded)
        pipes[:, y, x] += np.array(blocks) @ branchy_ops
    threads = solid_cov + branchy_cov
    grids = [per_region(threads, area), per_region(threads, area), per_region(killed, area)]
    grids += [per_region(pipes[p], area) for p in range(len(PIPES))]
    grids.append(per_region(coverage(full, shape, area), area) * 4)    # RGBA8, one sample, stored
    return grids


def arrays(hexes) -> list[bytes]:
    return [bytes.fromhex(h) for h in hexes]


# ---- tests ---------------------------------------------------------------------------------------
def test_properties_region_size_is_a_multiple_of_the_tile(reads):
    p = reads["properties"]
    assert p["region"] == [32, 32] and all(v % 16 == 0 for v in p["region"])
    assert p["max"] >= 8 and p["max"] == len(IDS)
    assert (p["row_alignment"], p["region_alignment"], p["identity"]) == (ROW_ALIGN, REGION_ALIGN, 1)


def test_enumeration_ids_names_and_incomplete(reads):
    full, short = reads["counters"], reads["short"]
    assert full["result"] == 0 and full["ids"] == IDS and full["names"] == NAMES
    assert short["result"] == VK_INCOMPLETE and short["written"] == 3 and short["total"] == len(IDS)
    assert short["ids"] == IDS[:3] and short["sentinel_intact"]


def test_area_not_a_multiple_with_offset_overdraw_and_discard_match_the_reference(reads):
    """All ten counters, render area 100x70 at (8, 4): every region value, the registry's layout,
    padding and the 64 bytes past the array untouched."""
    got = bytes.fromhex(reads["area"]["bytes"])
    assert reads["area"]["size"] == layout(app.AREA[2], app.AREA[3], len(IDS))[2]
    grids = area_reference()
    want = expected_bytes(grids, app.AREA[2], app.AREA[3], len(got))
    if got != want:   # name the first differing counter and region
        region, row, _ = layout(app.AREA[2], app.AREA[3], len(IDS))
        for ry, rx, k in np.ndindex(grids[0].shape[0], grids[0].shape[1], len(IDS)):
            o = ry * row + rx * region + 4 * k
            value = int.from_bytes(got[o:o + 4], "little")
            assert value == grids[k][ry, rx], f"{NAMES[k]} region ({rx}, {ry}): {value} != {grids[k][ry, rx]}"
    assert got == want


def test_overdraw_square_covers_exactly_one_region(reads):
    got = bytes.fromhex(reads["area"]["bytes"])
    region, row, _ = layout(app.AREA[2], app.AREA[3], len(IDS))
    threads = int.from_bytes(got[row:row + 4], "little")   # region (0, 1), then (1, 1)
    square = int.from_bytes(got[row + region:row + region + 4], "little")
    # Region (1, 1) is the square: the full quad, the square twice, and branchy's rows 36..49 (32 x 14).
    assert square == 32 * 32 * 3 + 32 * 14
    assert threads == 32 * 32 + 20 * 14   # region (0, 1) is x 8..39: branchy covers x 20..39, rows 36..49


def test_two_subpasses_one_array_each(reads):
    w, h = app.SMALL
    got = arrays(reads["subpasses"]["bytes"])
    for s, rect in enumerate(app.SUB_RECTS):
        grid = per_region(coverage(rect, (h, w), (0, 0, w, h)), (0, 0, w, h))
        assert got[s] == expected_bytes([grid], w, h, len(got[s])), f"subpass {s}"


def test_too_few_addresses_write_only_the_arrays_given(reads):
    w, h = app.SMALL
    got = arrays(reads["few"]["bytes"])
    grid = per_region(coverage(app.SUB_RECTS[0], (h, w), (0, 0, w, h)), (0, 0, w, h))
    assert got[0] == expected_bytes([grid], w, h, len(got[0]))
    assert got[1] == bytes([app.SENTINEL]) * len(got[1])
    assert "counterAddressCount 1 is less than the 2 arrays" in reads["stderr"]


def test_multiview_one_array_per_view(reads):
    w, h = app.SMALL
    got = arrays(reads["views"]["bytes"])
    x0, y0, x1, y1 = app.VIEW_RECT
    for v, rect in enumerate([app.VIEW_RECT, (x0 // 2, y0, x1 // 2, y1)]):
        grid = per_region(coverage(rect, (h, w), (0, 0, w, h)), (0, 0, w, h))
        assert got[v] == expected_bytes([grid], w, h, len(got[v])), f"view {v}"


def test_two_layers_without_layer_writes_count_in_layer_zero(reads):
    w, h = app.SMALL
    got = arrays(reads["layers"]["bytes"])
    grid = per_region(coverage(app.VIEW_RECT, (h, w), (0, 0, w, h)), (0, 0, w, h))
    assert got[0] == expected_bytes([grid], w, h, len(got[0]))
    assert got[1] == expected_bytes([grid * 0], w, h, len(got[1]))   # written: zeros, padding untouched


def test_capture_disabled_and_misuse_write_nothing(reads):
    for key in ("disabled", "unknown", "too_many", "tight"):
        data = bytes.fromhex(reads[key]["bytes"])
        assert data == bytes([app.SENTINEL]) * len(data), key
    err = reads["stderr"]
    assert "unknown counter ID(s) 0xdead" in err
    assert "counterIndexCount 11 is more than maxPerRegionPerformanceCounters (10)" in err
    assert "has fewer than the 192 bytes the array needs" in err


def test_device_lists_the_extension(tessera_env, lavapipe_env):
    def extensions(env) -> list[str]:
        out = run([PYTHON, REPO / "tests" / "integration" / "apps" / "identity_query.py"], env)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])["extensions"]
    assert "VK_ARM_performance_counters_by_region" in extensions(tessera_env)
    assert "VK_ARM_performance_counters_by_region" not in extensions(lavapipe_env)
