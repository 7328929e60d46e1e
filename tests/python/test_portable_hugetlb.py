# SPDX-License-Identifier: GPL-2.0
"""Views of a portable region on a hugetlb memfd: libpin maps those only
in whole 2 MiB pages, so region.view() of a few bytes anywhere in such a
region must still work (and see the right bytes)."""
import os

import numpy as np
import pytest

import pinmem

HUGE = 2 << 20
POOL = "/proc/sys/vm/nr_hugepages"


@pytest.fixture
def huge_region():
    """A portable region on a hugetlb memfd. In the guest rig (root, with
    $PINMEM_SCRATCH) the pool is grown for the test and restored after;
    elsewhere the test skips unless the pool has room."""
    old = None
    if os.geteuid() == 0 and os.environ.get("PINMEM_SCRATCH"):
        with open(POOL) as f:
            old = int(f.read())
        with open(POOL, "w") as f:
            f.write(str(old + 2))
    dev = pinmem.open("portable")
    try:
        r = dev.alloc(2 * HUGE)
        i = r.info()
        if not (i.min_order == i.chunk_order == 9 and
                i.nr_fallback_chunks == 0):
            r.close()
            pytest.skip("no free 2 MiB pages in the hugetlb pool (the "
                        "region is a shmem memfd)")
        yield r
        r.close()
    finally:
        dev.close()
        if old is not None:
            with open(POOL, "w") as f:
                f.write(str(old))


def test_small_views_anywhere_in_a_hugetlb_region(huge_region):
    r = huge_region
    with r.view(np.uint8, (16,), offset=4096, writable=True) as a:
        a[:] = np.arange(16, dtype=np.uint8)
    with r.view(np.uint32, (8,), offset=HUGE + 12, writable=True) as b:
        b[:] = 0xdeadbeef
    whole = r.view(np.uint8, (2 * HUGE,))
    assert (whole[4096:4112] == np.arange(16, dtype=np.uint8)).all()
    assert (whole[HUGE + 12:HUGE + 44].view(np.uint32) == 0xdeadbeef).all()
    assert whole[:4096].sum() == 0
