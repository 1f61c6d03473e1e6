"""layer/allocations.py's counts, by hand: what the validation layer's small-allocation (< 256 KiB) and
small-dedicated-allocation (a resource filling a block < 1 MiB, per bind) rules would count, and the
bytes small allocations leave in their last 4 KiB page. No GPU (the hooks are run through the real
loader by tests/integration/test_advice.py, against the validation layer's own counts)."""
from __future__ import annotations

from tessera.layer.allocations import PAGE_BYTES, SMALL_ALLOCATION_BYTES, SMALL_DEDICATED_BYTES, DeviceAllocations


def test_thresholds_are_the_validation_layers() -> None:
    assert (SMALL_ALLOCATION_BYTES, SMALL_DEDICATED_BYTES, PAGE_BYTES) == (262144, 1048576, 4096)


def test_counts() -> None:
    a = DeviceAllocations()
    a.allocated(1, 1000)                 # small, 3096 bytes of its page unused
    a.allocated(2, 8192)                 # small, whole pages
    a.allocated(3, 512 * 1024)           # not small (>= 256 KiB) but under 1 MiB
    a.allocated(4, 4 << 20)              # large
    a.bound(1, 1000)                     # fills its block: small dedicated
    a.bound(2, 4096)                     # half its block: sub-allocated
    a.bound(3, 512 * 1024)               # fills a 512 KiB block: small dedicated, not a small allocation
    a.bound(4, 4 << 20)                  # fills a large block: fine
    a.bound(9, 100)                      # memory the layer never saw allocated: not counted
    assert a.to_json() == {"made": 4, "small": 2, "small_bytes": 9192, "page_waste_bytes": 3096,
                           "small_dedicated": 2, "small_dedicated_bytes": 1000 + 512 * 1024}
