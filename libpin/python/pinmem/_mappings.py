# SPDX-License-Identifier: MIT
"""The mappings NumPy arrays over a region stand on: a view mapping with the
view fd it was made from, and the owner mapping; _mapping_of finds the view
mapping under an array. Below both PinnedArray (_arrays.py) and the DLPack
export (dlpack.py). Part of pinmem.core, which re-exports every name (the
classes keep "pinmem.core" as their module); core's docstring says who owns
what."""
import ctypes
import errno as _errno
import os
import resource
import sys
import weakref

import numpy as np

from . import _cuda_auto, _forks, _lib
from ._errors import PinError, _check
from ._lib import lib

_CORE = "pinmem.core"

# ---- Mappings -------------------------------------------------------------

def _end_view(view, addr):
    """Finalizer of a _ViewMapping: end its CUDA registration, unmap, then
    close the view fd."""
    _cuda_auto.AUTO.unregister(view, addr)
    ret = lib.pin_view_unmap(view, addr)
    if ret < 0:
        sys.stderr.write("pinmem: unmapping a view at 0x%x failed: %s\n" %
                         (addr, _lib.text(lib.pin_view_error(view))))
    lib.pin_view_close(view)


def _end_owner(handle, region, addr):
    """Finalizer of a _ViewMapping over the owner mapping: end its CUDA
    registration; the mapping goes with the region handle, which this
    call's arguments held until now."""
    _cuda_auto.AUTO.unregister(None, addr, region=region)


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                       ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mlock.restype = ctypes.c_int
_libc.mlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_MAP_PRIVATE = 0x02
_MAP_FAILED = ctypes.c_void_p(-1).value


def _end_private(view, addr, length):
    """Finalizer of a copy-on-write _ViewMapping: unmap, close the view."""
    if _libc.munmap(addr, length):
        sys.stderr.write("pinmem: unmapping a private view at 0x%x failed: "
                         "%s\n" % (addr, os.strerror(ctypes.get_errno())))
    lib.pin_view_close(view)


# Why the module refused a copy-on-write view mapping (ABI 7's rules).
_PRIVATE_WHY = {
    1: "the region is not sealed (copy-on-write views of a pinmem region "
       "need it SEALED)",                                     # EPERM
    16: "the region is donated or a donate is waiting",       # EBUSY
}


def _map_private(v, file_offset, length, holders_of=None):
    """A MAP_PRIVATE, PROT_READ|PROT_WRITE mapping of a read-only view:
    reads see the region, writes go to private copies of the pages. A
    portable view is a memfd (file_offset: the region's); a device view
    fd starts at the view's first byte (file_offset 0), and the module
    (ABI 7) maps it only while the region is SEALED."""
    addr = _libc.mmap(None, length, _lib.PROT_READ | _lib.PROT_WRITE,
                      _MAP_PRIVATE, lib.pin_view_fd(v), file_offset)
    if addr in (None, _MAP_FAILED):
        err = ctypes.get_errno()
        why = _PRIVATE_WHY.get(err, os.strerror(err))
        _check(-err, lambda: None, "view map (copy-on-write): " + why,
               holders_of)
    return addr


def _mlock(addr, length, region_id):
    """Lock a portable view mapping's pages in memory for as long as it is
    mapped (munmap ends the lock): the memfd's pages are ordinary shmem,
    which nothing else keeps resident once the region's owner mapping is
    gone. PinError naming RLIMIT_MEMLOCK when the kernel refuses."""
    if _libc.mlock(addr, length) == 0:
        return
    err = ctypes.get_errno()
    soft = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    limit = "unlimited" if soft == resource.RLIM_INFINITY else \
        "%d bytes" % soft
    raise PinError(err or _errno.ENOMEM,
                   "cannot lock the %d bytes of a view of region %d in "
                   "memory (mlock: %s): RLIMIT_MEMLOCK is %s, and it counts "
                   "every locked mapping of this process. Raise it (ulimit "
                   "-l, LimitMEMLOCK= of a systemd unit, limits.conf), or "
                   "use the pinmem module, whose pages the kernel pins "
                   "without it" % (length, region_id,
                                   os.strerror(err or _errno.ENOMEM), limit))


def _map_shared(v, writable, holders_of):
    """pin_view_map of view v; the view is closed when it fails."""
    addr = ctypes.c_void_p()
    prot = _lib.PROT_READ | (_lib.PROT_WRITE if writable else 0)
    ret = lib.pin_view_map(v, prot, ctypes.byref(addr))
    if ret < 0:
        text = lib.pin_view_error(v)
        try:
            _check(ret, lambda: text, "view map", holders_of)
        finally:
            lib.pin_view_close(v)
    return addr.value


class _ViewMapping:
    """One view mapping, and the view fd it was made from. Exposes its bytes
    to NumPy through __array_interface__; unmapped by its finalizer.
    private=True: a copy-on-write mapping of a read-only view, writable,
    whose writes never reach the region (backend: the region's, which
    says where the view fd's offset 0 lies). view: a pin_view already
    made (pin_view_import of a view fd another process passed), used
    instead of making one of rptr.

    Pinned: on the portable backend a shared mapping is mlocked (lock=True;
    lock=False leaves it to lock(), for a caller that first drops another
    locked mapping of the same pages), the device backend's pages are
    pinned by the kernel; and a shared mapping is registered with CUDA
    where a driver is present (_cuda_auto), unless register=False (a
    caller that registered the region's owner mapping once instead, and
    hands out a fresh view of the same pages at every use: pinmem.dcp).
    .locked says the first."""

    __module__ = _CORE
    __slots__ = ("addr", "length", "offset", "writable", "private",
                 "region_id", "arrays", "locked", "backend", "file", "_fin",
                 "__weakref__")

    def __init__(self, rptr, region_id, offset, length, writable,
                 rerr, holders_of, private=False, backend="portable",
                 view=None, lock=True, register=True):
        v = ctypes.c_void_p(view)
        flags = _lib.PIN_VIEW_WRITE if writable and not private else 0
        if view is None:
            _check(lib.pin_view_create(rptr, offset, length, flags,
                                       ctypes.byref(v)), rerr, "view",
                   holders_of)
        if private:
            try:
                file_offset = offset if backend == "portable" else 0
                addr = ctypes.c_void_p(_map_private(v.value, file_offset,
                                                    length, holders_of))
            except BaseException:
                lib.pin_view_close(v.value)
                raise
        else:
            addr = ctypes.c_void_p(_map_shared(v.value, writable,
                                               holders_of))
        self.addr = addr.value
        self.length = length
        self.offset = offset
        # The memfd and offset of the pages (portable: view fds are the
        # region's memfd), for a forked child's private mapping (_forks).
        self.file = (lib.pin_view_fd(v.value), offset) \
            if backend == "portable" else None
        self.writable = bool(writable or private)
        self.private = bool(private)
        self.region_id = region_id
        # The device backend's pages are pinned by the kernel.
        self.locked = backend == "device"
        self.backend = backend
        # Every PinnedArray over these bytes (PinnedArray.__array_finalize__).
        self.arrays = weakref.WeakValueDictionary()   # id -> array
        if private:
            self._fin = weakref.finalize(self, _end_private, v.value,
                                         addr.value, length)
        else:
            self._fin = weakref.finalize(self, _end_view, v.value,
                                         addr.value)
            if register:
                _cuda_auto.AUTO.register(v.value, addr.value, length)
        # weakref.finalize would otherwise unmap at interpreter exit while
        # arrays over the mapping still live (a later atexit hook or a
        # daemon thread reading one segfaults); exit unmaps it anyway.
        self._fin.atexit = False
        if lock and not private:
            try:
                self.lock()
            except PinError:
                self._fin()
                raise

    @classmethod
    def of_owner(cls, handle, region_id, length, rerr):
        """The owner mapping of a portable region that a private load
        left OPEN (handle: its Region's), in place of a view mapping:
        pin_st_load read into it and locked it (PIN_ST_LOAD_OPEN), so the
        tensors use those pages as they are, with no second mapping to
        fault, lock and register. Locked again here (nothing to do unless
        RLIMIT_MEMLOCK stopped the load's lock: then PinError), then
        registered with CUDA. Keeps the region handle alive; the portable
        backend counts no views, so nothing is lost by not making one."""
        addr = ctypes.c_void_p()
        _check(lib.pin_region_map(handle.ptr, ctypes.byref(addr)), rerr,
               "map")
        self = cls.__new__(cls)
        self.addr, self.length, self.offset = addr.value, length, 0
        self.writable, self.private, self.locked = True, False, False
        self.region_id, self.backend = region_id, "portable"
        self.file = (lib.pin_region_fd(handle.ptr), 0)
        self.arrays = weakref.WeakValueDictionary()
        self._fin = weakref.finalize(self, _end_owner, handle, handle.ptr,
                                     addr.value)
        self._fin.atexit = False
        self.lock()
        _cuda_auto.AUTO.register(None, addr.value, length, region=handle.ptr)
        _forks.private_in_child(self)
        return self

    def lock(self):
        """mlock a portable mapping (once); see the class's notes."""
        if not self.locked:
            _mlock(self.addr, self.length, self.region_id)
            self.locked = True

    @property
    def mapped(self):
        return self._fin.alive

    @property
    def __array_interface__(self):
        return {"version": 3, "shape": (self.length,), "typestr": "|u1",
                "data": (self.addr, not self.writable)}


class _OwnerMapping:
    """The region's owner mapping as seen by NumPy; keeps the region handle
    (and so the mapping) alive while arrays over it exist."""

    __module__ = _CORE
    __slots__ = ("_h", "addr", "length", "readonly", "__weakref__")

    def __init__(self, handle, addr, length, readonly):
        self._h = handle
        self.addr = addr
        self.length = length
        self.readonly = readonly

    @property
    def __array_interface__(self):
        return {"version": 3, "shape": (self.length,), "typestr": "|u1",
                "data": (self.addr, self.readonly)}


def _page():
    return os.sysconf("SC_PAGE_SIZE")


def _shape_tuple(shape):
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def _over(base, dtype, shape, skip, cls):
    """An array of dtype and shape starting skip bytes into base's bytes."""
    dtype = np.dtype(dtype)
    shape = _shape_tuple(shape)
    raw = np.asarray(base)
    return np.ndarray.__new__(cls, shape, dtype=dtype, buffer=raw,
                              offset=skip)


def _mapping_of(a):
    """The _ViewMapping at the end of a's base chain (through the blocks
    of _pool, which name theirs in _pinmem_base), or None."""
    x = a
    while isinstance(x, np.ndarray) or hasattr(x, "_pinmem_base"):
        x = x.base if isinstance(x, np.ndarray) else x._pinmem_base
    return x if isinstance(x, _ViewMapping) else None
