# SPDX-License-Identifier: GPL-2.0
"""A view's mapping lives exactly as long as the arrays over it."""
import gc
import os

import numpy as np
import pytest

import pinmem
from helpers import (count_maps, debugfs, mapped, mapping_path, nr_fds,
                     nr_maps, rss_kib)


def views_counted(region):
    """The kernel's count of view mappings (device backend), else None."""
    if region.backend != "device":
        return None
    return region.info().view_mappings


def test_view_is_its_own_mapping(region):
    a = region.view(np.uint32, (1024,))
    b = region.view(np.uint32, (1024,))
    assert isinstance(a, pinmem.PinnedArray) and a.mapped
    # Two views of the same bytes are two mappings: nothing is cached.
    assert a.mapping_range != b.mapping_range
    path = mapping_path(a.mapping_range)
    assert path is not None and mapped(a.mapping_range, path)
    assert mapped(b.mapping_range, path)
    if region.backend == "device":
        assert views_counted(region) == 2
    del a, b
    assert views_counted(region) in (None, 0)


def test_mapping_outlives_every_derived_array(region):
    a = region.view(np.float32, (64, 256), writable=True)
    a[...] = np.arange(64 * 256, dtype=np.float32).reshape(64, 256)
    rng = a.mapping_range
    path = mapping_path(rng)
    s = a[3:5, 10:]                 # slice
    t = np.asarray(s)               # plain ndarray over the same memory
    u = t.view(np.uint8)            # view of a view
    w = u[:, ::4]                   # and a strided one
    del a
    assert mapped(rng, path) and views_counted(region) in (None, 1)
    del s, t
    assert mapped(rng, path) and views_counted(region) in (None, 1)
    # The data is still there through the last derived array.
    assert w.base is not None and np.shares_memory(w, u)
    expect = np.arange(64 * 256, dtype=np.float32).reshape(64, 256)[3:5, 10:]
    assert (w == expect.view(np.uint8)[:, ::4]).all()
    del u
    assert mapped(rng, path)
    del w                          # the last one: unmapped now, no gc pass
    assert not mapped(rng, path)
    assert views_counted(region) in (None, 0)


def test_unmapped_by_gc_in_a_cycle(region):
    a = region.view(np.uint8, (4096,))
    rng, path = a.mapping_range, mapping_path(a.mapping_range)

    class Box:
        pass
    box = Box()
    box.self = box                  # a reference cycle holds the array
    box.a = a
    del a, box
    assert mapped(rng, path)        # only the cycle collector frees it
    gc.collect()
    assert not mapped(rng, path)
    assert views_counted(region) in (None, 0)


def test_offset_view_sees_the_right_bytes(region):
    full = region.view(np.uint8, (3 * 4096,), writable=True)
    full[...] = np.arange(full.size) % 251
    part = region.view(np.uint16, (100,), offset=4096 + 6)
    expect = (np.arange(4096 + 6, 4096 + 206) % 251).astype(np.uint8)
    assert part.tobytes() == expect.tobytes()
    # The offset view maps only the page it needs.
    assert part.mapping_range[1] - part.mapping_range[0] == 4096


def test_view_out_of_range(region):
    with pytest.raises(ValueError):
        region.view(np.uint8, (region.size + 1,))
    with pytest.raises(ValueError):
        region.view(np.uint8, (16,), offset=region.size - 8)


def test_read_only_view_stays_read_only(region):
    a = region.view(np.uint8, (16,))
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0] = 1
    with pytest.raises(ValueError):
        a.flags.writeable = True


def test_with_unmaps_at_exit(region):
    with region.view(np.int32, (1000,), writable=True) as a:
        a[:] = 7
        rng, path = a.mapping_range, mapping_path(a.mapping_range)
        assert mapped(rng, path) and views_counted(region) in (None, 1)
    assert not mapped(rng, path)
    assert views_counted(region) in (None, 0)
    # The name is left holding an empty array, not a dangling one.
    assert a.size == 0 and not a.mapped
    with region.view(np.int32, (1000,)) as b:
        assert (b == 7).all()


def test_with_escaped_reference_raises_and_stays_valid(region):
    with pytest.raises(pinmem.ViewInUseError,
                       match="still referenced.*1 object"):
        with region.view(np.int64, (512,), writable=True) as a:
            a[:] = np.arange(512)
            rng, path = a.mapping_range, mapping_path(a.mapping_range)
            escaped = a[100:]
    # Nothing was unmapped under the escaped slice, nor emptied.
    assert mapped(rng, path) and views_counted(region) in (None, 1)
    assert a.size == 512
    assert (escaped == np.arange(100, 512)).all()
    del a
    assert mapped(rng, path)
    del escaped
    assert not mapped(rng, path)
    assert views_counted(region) in (None, 0)


@pytest.mark.parametrize("escape", ["alias", "memoryview", "list",
                                    "asarray"])
def test_with_other_escapes(region, escape):
    keep = None
    with pytest.raises(pinmem.ViewInUseError):
        with region.view(np.uint8, (64,)) as a:
            rng, path = a.mapping_range, mapping_path(a.mapping_range)
            if escape == "alias":
                keep = a
            elif escape == "memoryview":
                keep = memoryview(a)
            elif escape == "list":
                keep = [a]
            else:
                keep = np.asarray(a)
    assert mapped(rng, path)
    assert bytes(np.asarray(keep[0] if escape == "list" else keep)) == \
        bytes(64)
    del a, keep
    assert not mapped(rng, path)


def test_with_exception_in_flight_is_not_hidden(region):
    with pytest.raises(KeyError):
        with region.view(np.uint8, (64,)) as a:
            rng, path = a.mapping_range, mapping_path(a.mapping_range)
            raise KeyError("inner")
    del a
    assert not mapped(rng, path)


def test_release(region):
    a = region.view(np.uint8, (64,))
    rng, path = a.mapping_range, mapping_path(a.mapping_range)
    a.release()
    assert a.size == 0 and not mapped(rng, path)
    b = region.view(np.uint8, (64,))
    c = b[1:]
    with pytest.raises(pinmem.ViewInUseError):
        b.release()
    assert c.mapped


def test_with_on_an_owning_array_is_refused(region):
    a = region.view(np.uint8, (64,))
    c = a.copy()
    with pytest.raises(TypeError):
        with c:
            pass
    # Fresh results are plain arrays, not views.
    assert type(a + 1) is np.ndarray


CYCLES = int(os.environ.get("PINMEM_TEST_CYCLES", "10000"))


def test_create_drop_cycles_leak_nothing(region):
    """CYCLES (10,000 unless $PINMEM_TEST_CYCLES says otherwise) view
    create/drop cycles: mappings, fds, memory and the module's counters end
    where they started."""
    def cycle(n):
        for i in range(n):
            a = region.view(np.uint16, (2048,), offset=(i % 8) * 4096,
                            writable=bool(i & 1))
            s = a[::2]
            int(s[0])
            del a, s
            with region.view(np.uint8, (16,)) as b:
                int(b[0])
    cycle(200)                      # warm up allocator and caches
    gc.collect()
    ours0 = count_maps("pinmem") + count_maps("memfd:")
    maps0, fds0, rss0, dbg0 = nr_maps(), nr_fds(), rss_kib(), debugfs()
    cycle(CYCLES)
    gc.collect()
    maps1, fds1, rss1, dbg1 = nr_maps(), nr_fds(), rss_kib(), debugfs()
    assert (maps1, fds1) == (maps0, fds0)
    assert count_maps("pinmem") + count_maps("memfd:") == ours0
    assert dbg1 == dbg0
    assert views_counted(region) in (None, 0)
    # 2 * CYCLES mappings came and went. A leaked view keeps at least its
    # 4 KiB page, a leaked Python object at least 56 bytes: at 10,000
    # cycles either shows far above 1 MiB (52 bytes per mapping), while
    # allocator noise (seen up to ~0.4 MiB in the demo) stays below it.
    assert rss1 - rss0 < 1024, "RSS grew %d KiB" % (rss1 - rss0)
