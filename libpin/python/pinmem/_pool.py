# SPDX-License-Identifier: MIT
"""Small pinned blocks carved out of shared regions, for
pinmem.torch.empty/zeros (PyTorch's host allocator pools its pinned
memory the same way): without it every small tensor took a region of its
own, at least a 2 MiB chunk on the device backend, charged to
RLIMIT_MEMLOCK.

A pool keeps slabs: each a region of its own (2 MiB, then twice the last,
up to 32 MiB) seen through one writable view mapping, whose region handle
is closed at once (the mapping keeps the memory). A request of at most
MAX bytes gets a block of the next power of two (at least 512 bytes,
aligned to its size up to a page) from a slab's free blocks of that size,
else from the slab's unused top, else from a new slab. A block is an
object that holds its slab's mapping; arrays over it hold the block. When
the block dies (the last array, and so the last tensor, over it is gone)
it goes back to its slab's free blocks; when every block of a slab is
gone, so is the slab's mapping, and the kernel frees the region. The pool
never holds a slab's mapping itself (a weak reference only).

Blocks freed by the garbage collector are queued without a lock (a
collection may run inside take()); take() picks them up under its lock.
"""
import collections
import threading
import weakref

import numpy as np

from ._mappings import _page

MAX = 1 << 20               # larger requests get a region of their own
SLAB_MIN = 2 << 20
SLAB_MAX = 32 << 20
BLOCK_MIN = 512


class _Block:
    """Bytes [offset, offset + length) of a slab's mapping, to NumPy; holds
    the slab's array (and so its mapping) while it lives."""

    __slots__ = ("_pinmem_base", "offset", "length", "__weakref__")

    def __init__(self, base, offset, length):
        self._pinmem_base = base
        self.offset = offset
        self.length = length

    @property
    def __array_interface__(self):
        addr = self._pinmem_base.__array_interface__["data"][0]
        return {"version": 3, "shape": (self.length,), "typestr": "|u1",
                "data": (addr + self.offset, False)}


class _Slab:
    __slots__ = ("base", "size", "top", "free", "region_id")

    def __init__(self, base, size, region_id):
        self.base = weakref.ref(base)
        self.size = size
        self.top = 0
        self.free = collections.defaultdict(list)     # size -> offsets
        self.region_id = region_id


def block_size(nbytes):
    """The block a request of nbytes gets."""
    return max(BLOCK_MIN, 1 << (max(nbytes, 1) - 1).bit_length())


class Pool:
    """Blocks of at most MAX bytes; thread-safe."""

    def __init__(self):
        self._lock = threading.Lock()
        self._slabs = []
        self._freed = collections.deque()   # (slab, offset, size)
        self._next = SLAB_MIN

    def _collect(self):
        while self._freed:
            slab, off, size = self._freed.popleft()
            slab.free[size].append(off)
        self._slabs = [s for s in self._slabs if s.base() is not None]

    def _carve(self, size):
        """(slab array, offset, reused) of a free block, or None."""
        for slab in self._slabs:
            base = slab.base()
            if base is None:
                continue
            if slab.free[size]:
                return base, slab, slab.free[size].pop(), True
            start = -(-slab.top // min(size, _page())) * min(size, _page())
            if start + size <= slab.size:
                slab.top = start + size
                return base, slab, start, False
        return None

    def _grow(self, alloc, size):
        want = max(self._next, size)
        r = alloc(want)
        self._next = min(self._next * 2, SLAB_MAX)
        try:
            base = r.view(np.uint8, (r.size,), writable=True)
        finally:
            r.close()           # the view mapping keeps the memory
        slab = _Slab(base, r.size, r.id)
        self._slabs.append(slab)
        slab.top = size
        return base, slab, 0, False

    def take(self, nbytes, alloc):
        """A zeroed, writable uint8 array of nbytes (0 < nbytes <= MAX)
        over a pooled block; alloc(size) makes a region of at least size
        bytes when a new slab is needed."""
        size = block_size(nbytes)
        with self._lock:
            self._collect()
            got = self._carve(size) or self._grow(alloc, size)
        base, slab, off, reused = got
        block = _Block(base, off, nbytes)
        weakref.finalize(block, self._freed.append, (slab, off, size))
        a = np.asarray(block)
        if reused:
            a[:] = 0
        return a

    def regions(self):
        """The ids of the regions whose slabs are alive."""
        with self._lock:
            self._collect()
            return [s.region_id for s in self._slabs]
