"""vkapi/submits.Licence: after grants that handled nothing, grant attempts are skipped 1, 2, 4 ... up to
SKIP_MAX at a time, and one that handled something lets the next attempt through (icd/placed_submits.py,
layer/reported_submits.py)."""
from __future__ import annotations

import cffi

from tessera.vkapi.submits import Licence


def _skipped(licence: Licence) -> int:
    """Attempts skipped before one goes through."""
    n = 0
    while licence.skip():
        n += 1
    return n


def test_grants_that_handle_nothing_space_out_the_next_attempts_and_one_that_does_resets_them():
    licence = Licence(cffi.FFI(), lambda counts: None, "placed")
    assert _skipped(licence) == 0                       # the first attempt goes through
    seen = []
    for _ in range(9):
        licence.ended(0)
        seen.append(_skipped(licence))
    assert seen == [1, 2, 4, 8, 16, 32, 64, 64, 64]
    licence.ended(5)
    assert _skipped(licence) == 0
    licence.ended(0)
    assert _skipped(licence) == 1                       # counted again from the start


def test_counts_name_what_c_handled():
    ffi = cffi.FFI()

    def fill(counts):
        counts[0], counts[1] = 7, 112

    assert Licence(ffi, fill, "reported").counts() == "submits reported in C: 7 (command buffers: 112)"
