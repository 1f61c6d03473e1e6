"""The CPU culling of captured positions (icd/visible_prims.py count_visible), against hand-worked cases:
the frustum test (a primitive is culled only when all its vertices lie outside one and the same clip
plane), the facing test as Vulkan defines a triangle's area (spec 28.7.1: framebuffer y grows downwards
with a positive viewport height), zero-area triangles, lines (no facing). No GPU."""
from __future__ import annotations

import numpy as np
import pytest

from tessera.icd.visible_prims import count_visible

NONE, FRONT, BACK, BOTH = 0, 1, 2, 3
CCW, CW = 0, 1
# On screen (y down) (0, 0) -> (0.5, 0) -> (0, 0.5) turns clockwise: framebuffer area a < 0.
CLOCKWISE = [(0, 0), (0.5, 0), (0, 0.5)]
COUNTER_CLOCKWISE = [(0, 0), (0, 0.5), (0.5, 0)]


def prims(*triangles, z: float = 0.5, w: float = 1.0) -> np.ndarray:
    """Clip-space vertices of 2D (NDC) primitives, each vertex scaled by `w`."""
    return np.array([(x * w, y * w, z * w, w) for t in triangles for (x, y) in t], dtype=np.float32)


@pytest.mark.parametrize("cull, front_face, flip, want", [
    (NONE, CCW, False, 1), (BOTH, CCW, False, 0),
    (BACK, CCW, False, 0), (FRONT, CCW, False, 1),      # clockwise is back-facing with CCW front
    (BACK, CW, False, 1), (FRONT, CW, False, 0),
    (BACK, CCW, True, 1), (FRONT, CCW, True, 0),        # a negative viewport height turns the winding
])
def test_facing(cull, front_face, flip, want):
    assert count_visible(prims(CLOCKWISE), 3, cull, front_face, flip) == want
    assert count_visible(prims(COUNTER_CLOCKWISE), 3, cull, front_face, flip) == (
        1 - want if cull in (FRONT, BACK) else want)


def test_facing_does_not_depend_on_positive_w():
    for w in (0.25, 3.0):
        assert count_visible(prims(CLOCKWISE, w=w), 3, BACK, CCW, False) == 0
        assert count_visible(prims(COUNTER_CLOCKWISE, w=w), 3, BACK, CCW, False) == 1


def test_frustum_needs_one_plane_for_all_vertices():
    right = [(1.5, 0), (2, 0), (1.5, 0.5)]            # all x > w
    straddling = [(0.5, 0), (2, 0), (0.5, 0.5)]
    around = [(-10, -10), (10, -10), (0, 10)]          # outside some plane each, covering the view
    # beside the view's corner (1, -1), wholly outside it but beyond no single plane: kept, as the plane
    # test keeps it (a Mali then culls it by its sample test, which is not modelled: docs/counters.md)
    corner = [(1.6, -0.6), (0.6, -1.6), (2, -2)]
    assert count_visible(prims(right, straddling, around, corner), 3, NONE, CCW, False) == 3
    below = [(0, 1.5), (0.5, 1.5), (0, 2)]
    assert count_visible(prims(below), 3, NONE, CCW, False) == 0


def test_depth_planes():
    t = COUNTER_CLOCKWISE
    assert count_visible(prims(t, z=1.5), 3, NONE, CCW, False) == 0          # beyond the far plane
    assert count_visible(prims(t, z=-0.5), 3, NONE, CCW, False) == 0         # before the near plane
    assert count_visible(prims(t, z=-0.5), 3, NONE, CCW, False, depth_clip=False) == 1
    assert count_visible(prims(t, z=-0.5), 3, NONE, CCW, False, z_negative_one=True) == 1
    assert count_visible(prims(t, z=-1.5), 3, NONE, CCW, False, z_negative_one=True) == 0


def test_behind_the_eye_and_zero_area():
    behind = np.array([(0, 0, 0, -1), (0.1, 0, 0, -1), (0, 0.1, 0, -1)], dtype=np.float32)   # x > w for all
    assert count_visible(behind, 3, NONE, CCW, False) == 0
    collinear = [(0, 0), (0.25, 0.25), (0.5, 0.5)]
    assert count_visible(prims(collinear), 3, NONE, CCW, False) == 0


def test_lines_have_no_facing():
    inside, outside = [(0, 0), (0.5, 0.5)], [(1.5, 0), (2, 0.5)]
    assert count_visible(prims(inside, outside), 2, BOTH, CCW, False) == 1
