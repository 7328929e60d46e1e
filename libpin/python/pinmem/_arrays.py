# SPDX-License-Identifier: MIT
"""NumPy arrays over a region's memory: the mappings they stand on (a view
mapping with the view fd it was made from, the owner mapping), and
PinnedArray, the array over a view mapping whose end unmaps it. Part of
pinmem.core, which re-exports every name (the classes keep "pinmem.core"
as their module); core's docstring says who owns what."""
import ctypes
import os
import sys
import weakref

import numpy as np

from . import _lib
from ._errors import PinError, ViewInUseError, _check
from ._lib import lib

_CORE = "pinmem.core"


# ---- Mappings -------------------------------------------------------------

def _end_view(view, addr):
    """Finalizer of a _ViewMapping: unmap, then close the view fd."""
    ret = lib.pin_view_unmap(view, addr)
    if ret < 0:
        sys.stderr.write("pinmem: unmapping a view at 0x%x failed: %s\n" %
                         (addr, _lib.text(lib.pin_view_error(view))))
    lib.pin_view_close(view)


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                       ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_MAP_PRIVATE = 0x02
_MAP_FAILED = ctypes.c_void_p(-1).value


def _end_private(view, addr, length):
    """Finalizer of a copy-on-write _ViewMapping: unmap, close the view."""
    if _libc.munmap(addr, length):
        sys.stderr.write("pinmem: unmapping a private view at 0x%x failed: "
                         "%s\n" % (addr, os.strerror(ctypes.get_errno())))
    lib.pin_view_close(view)


def _map_private(v, offset, length):
    """A MAP_PRIVATE, PROT_READ|PROT_WRITE mapping of a portable view
    (a read-only memfd: its offset is the region's): reads see the
    region, writes go to private copies of the pages."""
    addr = _libc.mmap(None, length, _lib.PROT_READ | _lib.PROT_WRITE,
                      _MAP_PRIVATE, lib.pin_view_fd(v), offset)
    if addr in (None, _MAP_FAILED):
        err = ctypes.get_errno()
        raise PinError(err, "view map (copy-on-write): %s" %
                       os.strerror(err))
    return addr


class _ViewMapping:
    """One view mapping, and the view fd it was made from. Exposes its bytes
    to NumPy through __array_interface__; unmapped by its finalizer.
    private=True (portable backend only): a copy-on-write mapping of a
    read-only view, writable, whose writes never reach the region."""

    __module__ = _CORE
    __slots__ = ("addr", "length", "offset", "writable", "private",
                 "region_id", "arrays", "_fin", "__weakref__")

    def __init__(self, rptr, region_id, offset, length, writable,
                 rerr, holders_of, private=False):
        v = ctypes.c_void_p()
        flags = _lib.PIN_VIEW_WRITE if writable and not private else 0
        _check(lib.pin_view_create(rptr, offset, length, flags,
                                   ctypes.byref(v)), rerr, "view", holders_of)
        if private:
            try:
                addr = ctypes.c_void_p(_map_private(v.value, offset, length))
            except BaseException:
                lib.pin_view_close(v.value)
                raise
        else:
            addr = ctypes.c_void_p()
            prot = _lib.PROT_READ | (_lib.PROT_WRITE if writable else 0)
            ret = lib.pin_view_map(v.value, prot, ctypes.byref(addr))
            if ret < 0:
                text = lib.pin_view_error(v.value)
                try:
                    _check(ret, lambda: text, "view map", holders_of)
                finally:
                    lib.pin_view_close(v.value)
        self.addr = addr.value
        self.length = length
        self.offset = offset
        self.writable = bool(writable or private)
        self.private = bool(private)
        self.region_id = region_id
        # Every PinnedArray over these bytes (PinnedArray.__array_finalize__).
        self.arrays = weakref.WeakValueDictionary()   # id -> array
        if private:
            self._fin = weakref.finalize(self, _end_private, v.value,
                                         addr.value, length)
        else:
            self._fin = weakref.finalize(self, _end_view, v.value,
                                         addr.value)
        # weakref.finalize would otherwise unmap at interpreter exit while
        # arrays over the mapping still live (a later atexit hook or a
        # daemon thread reading one segfaults); exit unmaps it anyway.
        self._fin.atexit = False

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


# ---- Arrays over view mappings ---------------------------------------------

def _mapping_of(a):
    """The _ViewMapping at the end of a's base chain, or None."""
    x = a
    while isinstance(x, np.ndarray):
        x = x.base
    return x if isinstance(x, _ViewMapping) else None


def _outside_refs(a, baseline):
    """References to a beyond the one name it is held by and the
    interpreter's own (baseline, measured at import by _calibrate)."""
    return sys.getrefcount(a) - baseline


def _end(a, baseline, quiet):
    """End array a's view mapping: empty a in place (the name it is held
    by now sees a 0-element array) and unmap. Refuses with ViewInUseError,
    keeping everything valid, while anything besides that one name refers
    to a (another name, a derived array, a memoryview, a container)."""
    if a.base is None or _mapping_of(a) is None:
        raise TypeError("pinmem: this array is not a view over a pinned "
                        "region (it owns its memory)")
    m = _mapping_of(a)
    others = _outside_refs(a, baseline)
    if others > 0:
        if quiet:
            return False
        raise ViewInUseError(
            "pinmem: view of region %d (0x%x-0x%x) is still referenced at "
            "its end by %d object(s) besides the name it is held by (another "
            "name, a derived array or slice, a memoryview, a container); "
            "it stays mapped until they are gone" %
            (m.region_id, m.addr, m.addr + m.length, others))
    # A derived PinnedArray (a slice, a reshape) holds a itself, not the
    # mapping: emptying a would leave it pointing into an unmapped range.
    # The count above misses it when a is held by no name (del'd inside
    # the with block) or the call was not the calibrated one.
    derived = sum(1 for x in list(m.arrays.values()) if x is not a)
    if derived:
        if quiet:
            return False
        raise ViewInUseError(
            "pinmem: view of region %d (0x%x-0x%x) is still referenced at "
            "its end by %d other array(s) over the same mapping (a slice or "
            "another view derived from it); it stays mapped until they are "
            "gone" % (m.region_id, m.addr, m.addr + m.length, derived))
    mref = weakref.ref(m)
    del m
    # Drop a's reference to its memory: a becomes a 0-element array.
    np.ndarray.__setstate__(a, (1, (0,), a.dtype, False, b""))
    m = mref()
    if m is not None:
        # Someone took a reference to an intermediate base or to the
        # mapping itself; it stays valid until that reference is gone.
        if quiet:
            return False
        raise ViewInUseError(
            "pinmem: view of region %d (0x%x-0x%x): the array was emptied "
            "but its mapping is still held by another object reached "
            "through .base; it stays mapped until that object is gone" %
            (m.region_id, m.addr, m.addr + m.length))
    return True


class PinnedArray(np.ndarray):
    """A NumPy array over a pinned region's view mapping (region.view()).

    Behaves like any ndarray. Arrays derived from it (slices, reshapes,
    np.asarray) keep the mapping alive; it is unmapped when the last of
    them is collected. As a context manager it ends the mapping at the end
    of the block: the array becomes a 0-element array (the name bound by
    ``as`` sees that), and ViewInUseError is raised instead, with the
    mapping left valid, if anything else still refers to it (another name
    included)."""
    __module__ = _CORE

    def __array_finalize__(self, obj):
        # Known to the mapping, so that ending one array can tell whether
        # another still reads the same bytes.
        m = _mapping_of(self)
        if m is not None:
            m.arrays[id(self)] = self

    def __array_wrap__(self, obj, context=None, return_scalar=False):
        # Results that own fresh memory are plain arrays, not views.
        if obj.base is None or _mapping_of(obj) is None:
            obj = obj.view(np.ndarray)
        return obj[()] if return_scalar else obj

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if et is None:
            _end(self, _BASE_EXIT, quiet=False)
        else:
            # Do not hide the exception in flight: end the view if it is
            # free; otherwise its references (the traceback's frames, say)
            # end it when they go.
            _end(self, _BASE_EXIT_EXC, quiet=True)
        return False

    def release(self):
        """End the mapping now, as the end of a with block does: the name
        the array is held by must be its only reference."""
        _end(self, _BASE_RELEASE, quiet=False)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None,
                   copy=None):
        """DLPack export, read-only views included (pinmem.dlpack says
        how); the view mapping lives until the consumer releases it."""
        from . import dlpack
        return dlpack.to_dlpack(self, max_version)

    def __dlpack_device__(self):
        """(kDLCPU, 0), or (kDLCUDAHost, 0) in a CUDA-registered range."""
        from . import dlpack
        return dlpack.device(self)

    @property
    def mapped(self):
        """Whether this array still reads a live view mapping."""
        m = _mapping_of(self)
        return m is not None and m.mapped

    @property
    def mapping_range(self):
        """(start, end) addresses of the view mapping, or None."""
        m = _mapping_of(self)
        return (m.addr, m.addr + m.length) if m is not None else None

    @property
    def region_id(self):
        m = _mapping_of(self)
        return m.region_id if m is not None else None


# ---- Calibration: the references the interpreter itself holds to the
# array while __exit__/release run (the bound method, the arguments), plus
# the one name it is held by, found by running the same calls on an object
# held by exactly one name.

class _Probe:
    __module__ = _CORE

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        self.seen = _outside_refs(self, 0)
        return et is not None

    def release(self):
        self.seen = _outside_refs(self, 0)


def _calibrate():
    with _Probe() as p:
        pass
    with _Probe() as q:
        raise KeyError
    r = _Probe()
    r.release()
    # PinnedArray's path passes the array through _end: one more argument.
    return p.seen + 1, q.seen + 1, r.seen + 1


_BASE_EXIT, _BASE_EXIT_EXC, _BASE_RELEASE = _calibrate()
