# SPDX-License-Identifier: GPL-2.0
"""pinmem.torch.empty's pool of small tensors: many small tensors share a
few regions, each tensor's bytes are its own, and a region is freed with
the last tensor over it."""
import gc
import random
import threading

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed "
                            "(Debian: python3-torch)")

import pinmem.torch as pt  # noqa: E402
from helpers import maps_lines  # noqa: E402


def mappings_under(ts):
    """The distinct mappings (/proc/self/maps lines) the tensors lie in."""
    spans = []
    for line in maps_lines():
        lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
        spans.append((lo, hi, line))
    out = set()
    for t in ts:
        p = t.data_ptr()
        out.update(line for lo, hi, line in spans if lo <= p < hi)
    return out


def still_mapped(lines):
    now = set(maps_lines())
    return [line for line in lines if line in now]


def nbytes(t):
    return t.numel() * t.element_size()


def sizes(n, seed):
    rnd = random.Random(seed)
    return [rnd.randrange(4 << 10, (64 << 10) + 1, 4) for _ in range(n)]


def fill(ts):
    """A pattern per tensor: every int32 of tensor i holds i + 1."""
    for i, t in enumerate(ts):
        t.fill_(i + 1)


def check(ts):
    for i, t in enumerate(ts):
        assert bool((t == i + 1).all()), "tensor %d was overwritten" % i


def test_thousand_small_tensors_share_few_regions(dev):
    gc.collect()
    before = dev.info()
    ts = [pt.empty((n // 4,), torch.int32, dev=dev)
          for n in sizes(1000, 1)]
    regions = pt.pool_regions(dev)
    # 4-64 KiB each, ~33 MiB in all: slabs of 2, 4, 8, 16, 32 MiB.
    assert len(regions) <= 5, regions
    maps = mappings_under(ts)
    assert len(maps) == len(regions), maps
    if dev.backend == "device":
        assert dev.info().nr_regions - before.nr_regions == len(regions)
    assert all(bool((t == 0).all()) for t in ts)
    fill(ts)
    check(ts)
    del ts
    gc.collect()
    assert pt.pool_regions(dev) == []
    assert still_mapped(maps) == []
    after = dev.info()
    assert (after.nr_regions, after.total_bytes) == \
        (before.nr_regions, before.total_bytes)


def test_freed_blocks_are_reused_zeroed_and_apart(dev):
    keep = [pt.empty((n // 4,), torch.int32, dev=dev)
            for n in sizes(300, 2)]
    fill(keep)
    # Free every other tensor; new ones reuse those blocks.
    for i in range(0, len(keep), 2):
        keep[i] = None
    gc.collect()
    regions = set(pt.pool_regions(dev))
    new = [pt.empty((n // 4,), torch.int32, dev=dev)
           for n in sizes(150, 3)]
    assert set(pt.pool_regions(dev)) == regions     # no new slab needed
    assert all(bool((t == 0).all()) for t in new)
    new_base = len(keep)
    for j, t in enumerate(new):
        t.fill_(new_base + j + 1)
    for i, t in enumerate(keep):
        if t is not None:
            assert bool((t == i + 1).all()), "tensor %d overwritten" % i
    for j, t in enumerate(new):
        assert bool((t == new_base + j + 1).all())


def test_a_view_of_a_pooled_tensor_keeps_its_block(dev):
    t = pt.empty((4096,), torch.int32, dev=dev)
    t.fill_(7)
    tail = t[100:]
    del t
    gc.collect()
    others = [pt.empty((4096,), torch.int32, dev=dev) for _ in range(8)]
    for o in others:
        o.fill_(-1)
    assert bool((tail == 7).all())


def test_threads_get_disjoint_blocks(dev):
    out = [[] for _ in range(4)]

    def work(k):
        for n in sizes(100, 10 + k):
            t = pt.empty((n // 4,), torch.int32, dev=dev)
            t.fill_(k * 1000 + len(out[k]) + 1)
            out[k].append(t)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for k in range(4):
        for i, t in enumerate(out[k]):
            assert bool((t == k * 1000 + i + 1).all())
    spans = sorted((t.data_ptr(), t.data_ptr() + nbytes(t))
                   for ts in out for t in ts)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


def test_large_tensors_get_a_region_each(dev):
    t = pt.empty((2 << 20,), torch.uint8, dev=dev)
    u = pt.empty((2 << 20,), torch.uint8, dev=dev)
    maps = mappings_under([t, u])
    assert len(maps) == 2 and pt.pool_regions(dev) == []
    del t, u
    gc.collect()
    assert still_mapped(maps) == []
