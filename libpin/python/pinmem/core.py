# SPDX-License-Identifier: MIT
"""Devices, regions and NumPy views over libpin.

Ownership: every libpin handle has exactly one Python owner, and is ended
by that owner's finalizer (weakref.finalize), or earlier by close().

  Device        owns a pin_dev.
  Region        owns a pin_region (and, through it, the owner mapping).
                Arrays over the owner mapping (Region.owner_array) keep the
                handle alive through _OwnerMapping.
  _ViewMapping  owns one pin_view and the one mapping made of it. It is
                the base of the NumPy array that region.view() returns, so
                NumPy keeps it alive exactly as long as that array or any
                array derived from it, and its finalizer unmaps when the
                last of them is collected. Nothing else refers to it.
"""
import ctypes
import errno as _errno
import math
import os
import sys
import threading
import warnings
import weakref
from collections import namedtuple

import numpy as np

from . import _lib
from ._lib import lib

__all__ = ["PinError", "BusyError", "ViewInUseError", "Device", "Region",
           "PinnedArray", "Holder", "RefRange", "RegionInfo", "DeviceInfo",
           "open"]


# ---- Errors ---------------------------------------------------------------

class PinError(OSError):
    """A libpin failure: .errno (an errno value) and .strerror (libpin's
    description of the failure, in words)."""

    def __init__(self, err, text, holders=None, refs=None):
        super().__init__(err, text)
        self.holders = holders or []
        self.refs = refs or []

    def __str__(self):
        return "[Errno %d %s] %s" % (self.errno,
                                     _errno.errorcode.get(self.errno, "?"),
                                     self.strerror)


class BusyError(PinError):
    """EBUSY from seal or donate (or a view mapping while donated). .holders
    lists the mappings that held the region when it was refused (device
    backend), and the text names them: pid, command, address range. .refs
    lists the byte ranges still referenced outside any mapping (RefRange:
    a pipe holding a view's pages, O_DIRECT in flight, a registration made
    through a view), which the text names too; the kernel cannot say who
    holds those."""


class PortableBackendWarning(UserWarning):
    """pinmem.open() fell back to the portable backend because /dev/pinmem
    is absent: nothing arbitrates donation. Silence it with
    warnings.simplefilter("ignore", pinmem.PortableBackendWarning), or ask
    for open("portable") explicitly."""


class ViewInUseError(RuntimeError):
    """A view could not be ended because something besides the array that
    was ended still refers to its memory. The mapping stays valid; it is
    unmapped when the last of those references is gone."""


def pci_numa_node(bus_id):
    """The NUMA node of a PCI device ("0000:3b:00.0", CUDA's spelling
    too), from sysfs; -1 when the platform names none."""
    ret = lib.pin_pci_numa_node(bus_id.encode())
    if ret < -1:
        raise PinError(-ret, "NUMA node of PCI device %s: %s" %
                       (bus_id, os.strerror(-ret)))
    return ret


def _check(ret, handle_error, what, holders_of=None, refs_of=None):
    if ret >= 0:
        return ret
    err = -ret
    text = _lib.text(handle_error()) or os.strerror(err)
    if what and not text.startswith(what):
        text = "%s: %s" % (what, text)
    if err == _errno.EBUSY:
        holders = holders_of() if holders_of else []
        refs = refs_of() if refs_of else []
        raise BusyError(err, text, holders, refs)
    raise PinError(err, text)


# ---- Records --------------------------------------------------------------

def _prot_str(prot):
    return ("r" if prot & _lib.PROT_READ else "-") + \
           ("w" if prot & _lib.PROT_WRITE else "-") + \
           ("x" if prot & _lib.PROT_EXEC else "-")


class Holder(namedtuple("Holder", "pid comm kind start end offset prot "
                                  "writable text")):
    """One mapping of a region: who (pid, comm), what (kind 'owner' or
    'view'), where (start, end in that process, None when the kernel
    withholds them: another user's process; offset into the region),
    prot ('r--', 'rw-'), writable (counts as a writable mapping), and
    libpin's one-line text."""
    __slots__ = ()

    def __str__(self):
        return self.text


def _holder(h):
    buf = ctypes.create_string_buffer(256)
    n = lib.pin_holder_format(ctypes.byref(h), buf, len(buf))
    kind = {_lib.PIN_HOLDER_OWNER: "owner",
            _lib.PIN_HOLDER_VIEW: "view"}.get(h.kind, "mapping")
    text = _lib.text(buf.value) if n >= 0 or n == -_errno.ENOSPC else ""
    return Holder(pid=h.pid, comm=_lib.text(h.comm), kind=kind,
                  start=h.start or None,
                  end=h.start + h.length if h.start else None,
                  offset=h.offset,
                  prot=_prot_str(h.prot), writable=bool(h.maywrite),
                  text=text)


class RefRange(namedtuple("RefRange", "offset length refs pinned expected "
                                      "text")):
    """Bytes [offset, offset + length) of a region referenced outside any
    mapping: refs references, pinned of them DMA pins (FOLL_PIN), expected
    the owner's share; text is libpin's one line about them."""
    __slots__ = ()

    def __str__(self):
        return self.text


def _ref_range(r):
    buf = ctypes.create_string_buffer(320)
    n = lib.pin_ref_format(ctypes.byref(r), buf, len(buf))
    text = _lib.text(buf.value) if n >= 0 or n == -_errno.ENOSPC else ""
    return RefRange(offset=r.offset, length=r.length, refs=r.refs,
                    pinned=r.pinned, expected=r.expected, text=text)


RegionInfo = namedtuple("RegionInfo", [
    "id", "size", "state", "donate_pending", "chunk_order", "min_order",
    "nr_chunks", "nr_fallback_chunks", "owner_mappings", "view_mappings",
    "writable_view_mappings", "view_fds", "owner_uid", "owner_pid"])
RegionInfo.__doc__ = """A region's state ('open', 'sealed', 'donated') and
the kernel's counts. On the portable backend only this handle's owner
mapping is counted (view_mappings is 0)."""

DeviceInfo = namedtuple("DeviceInfo", [
    "backend", "abi_version", "abi_min_compat", "chunk_size",
    "max_total_bytes", "max_region_bytes", "total_bytes", "nr_regions",
    "nr_mappings", "nr_view_fds"])


def _state_name(state):
    return _lib.text(lib.pin_state_name(state)) or str(state)


def _region_info(rptr, rerr):
    i = _lib.PinRegionInfo()
    _check(lib.pin_region_info(rptr, ctypes.byref(i)), rerr, "info")
    d = {f: getattr(i, f) for f, _ in _lib.PinRegionInfo._fields_}
    d["state"] = _state_name(i.state)
    d["donate_pending"] = bool(i.donate_pending)
    return RegionInfo(**d)


# ---- Device ---------------------------------------------------------------

class _Handle:
    """A C handle and the finalizer that ends it; nothing else."""
    __slots__ = ("ptr", "_fin", "__weakref__")

    def __init__(self, ptr, end):
        self.ptr = ptr
        self._fin = weakref.finalize(self, end, ptr)
        # Not at interpreter exit: arrays over the owner mapping may still
        # be read then (a later atexit hook, a daemon thread), and the
        # kernel ends the handle with the process anyway.
        self._fin.atexit = False

    def end(self):
        self._fin()

    @property
    def alive(self):
        return self._fin.alive


class Device:
    """An open libpin backend: the pinmem device, or the portable memfd
    backend. Use pinmem.open()."""

    def __init__(self, backend="auto"):
        code = {"auto": _lib.PIN_BACKEND_AUTO,
                "device": _lib.PIN_BACKEND_DEVICE,
                "portable": _lib.PIN_BACKEND_PORTABLE}.get(backend)
        if code is None:
            raise ValueError("pinmem: backend must be 'auto', 'device' or "
                             "'portable', not %r" % (backend,))
        p = ctypes.c_void_p()
        why = ctypes.create_string_buffer(1024)
        ret = lib.pin_open_why(ctypes.byref(p), code, why, len(why))
        if ret < 0:
            raise PinError(-ret, _lib.text(why.value) or
                           "open %s backend: %s" % (backend,
                                                    os.strerror(-ret)))
        self._h = _Handle(p.value, lib.pin_close)
        self._lock = threading.Lock()
        self.backend = _lib.text(lib.pin_backend_name(
            lib.pin_dev_backend(p.value)))
        #: which backend, and why, in libpin's words
        self.backend_why = _lib.text(lib.pin_dev_backend_why(p.value))
        if backend == "auto" and self.backend == "portable" and \
                "PIN_BACKEND" not in self.backend_why:
            warnings.warn("pinmem: " + self.backend_why,
                          PortableBackendWarning, stacklevel=3)

    def _ptr(self):
        if not self._h.alive:
            raise ValueError("pinmem: device is closed")
        return self._h.ptr

    def _err(self):
        return lib.pin_dev_error(self._h.ptr)

    def close(self):
        """Close the device handle. Regions made from it stay usable."""
        self._h.end()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def donation_supported(self):
        """Whether the kernel arbitrates donation (the device backend)."""
        return self.backend == "device"

    def info(self):
        i = _lib.PinDevInfo()
        with self._lock:
            _check(lib.pin_dev_info(self._ptr(), ctypes.byref(i)),
                   self._err, "device info")
        d = {f: getattr(i, f) for f, _ in _lib.PinDevInfo._fields_}
        d["backend"] = _lib.text(lib.pin_backend_name(i.backend))
        return DeviceInfo(**d)

    def alloc(self, nbytes, fallback=False, node=None, any_node=False):
        """A new zeroed, pinned region of at least nbytes, OPEN. With node
        (a NUMA node number) every chunk comes from that node, else
        PinError ENOMEM, unless any_node lets other nodes serve; without
        it the caller's mempolicy places the memory."""
        if nbytes <= 0:
            raise ValueError("pinmem: region size must be positive")
        if any_node and node is None:
            raise ValueError("pinmem: any_node needs a node")
        p = ctypes.c_void_p()
        flags = _lib.PIN_ALLOC_FALLBACK if fallback else 0
        if any_node:
            flags |= _lib.PIN_ALLOC_ANY_NODE
        with self._lock:
            _check(lib.pin_alloc_on_node(self._ptr(), nbytes, flags,
                                         -1 if node is None else node,
                                         ctypes.byref(p)),
                   self._err, "alloc %d bytes" % nbytes)
        return Region(p.value, self)

    def import_region(self, fd):
        """A Region handle of a region fd (from recv_fd, say); the handle
        owns a duplicate, the caller keeps fd."""
        p = ctypes.c_void_p()
        with self._lock:
            _check(lib.pin_region_import(self._ptr(), fd, ctypes.byref(p)),
                   self._err, "import region fd %d" % fd)
        return Region(p.value, self)

    def __repr__(self):
        return "<pinmem.Device %s%s>" % (self.backend,
                                         "" if self._h.alive else " closed")


def open(backend="auto"):  # noqa: A001 - the API's name
    """Open libpin: 'auto' (the device when /dev/pinmem exists, the
    portable backend only when it does not, with a PortableBackendWarning;
    a device this user may not open, or of another ABI, raises PinError
    saying how to fix it; $PIN_BACKEND overrides), 'device' or 'portable'.
    Device.backend names the backend, Device.backend_why says why."""
    return Device(backend)


# ---- Mappings -------------------------------------------------------------

def _end_view(view, addr):
    """Finalizer of a _ViewMapping: unmap, then close the view fd."""
    ret = lib.pin_view_unmap(view, addr)
    if ret < 0:
        sys.stderr.write("pinmem: unmapping a view at 0x%x failed: %s\n" %
                         (addr, _lib.text(lib.pin_view_error(view))))
    lib.pin_view_close(view)


class _ViewMapping:
    """One view mapping, and the view fd it was made from. Exposes its bytes
    to NumPy through __array_interface__; unmapped by its finalizer."""

    __slots__ = ("addr", "length", "offset", "writable", "region_id",
                 "arrays", "_fin", "__weakref__")

    def __init__(self, rptr, region_id, offset, length, writable,
                 rerr, holders_of):
        v = ctypes.c_void_p()
        flags = _lib.PIN_VIEW_WRITE if writable else 0
        _check(lib.pin_view_create(rptr, offset, length, flags,
                                   ctypes.byref(v)), rerr, "view", holders_of)
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
        self.writable = writable
        self.region_id = region_id
        # Every PinnedArray over these bytes (PinnedArray.__array_finalize__).
        self.arrays = weakref.WeakValueDictionary()   # id -> array
        self._fin = weakref.finalize(self, _end_view, v.value, addr.value)
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


# ---- Regions --------------------------------------------------------------

class Region:
    """A pinned region. States: 'open' (views may write), 'sealed'
    (read-only views), 'donated' (no views: the owner rewrites it)."""

    def __init__(self, ptr, dev):
        self._h = _Handle(ptr, lib.pin_region_free)
        self._lock = threading.Lock()
        self._owner = None          # weakref to the _OwnerMapping
        self.id = lib.pin_region_id(ptr)
        self.size = lib.pin_region_size(ptr)
        self.backend = dev.backend
        # View mappings start and end on this boundary: a page, but 2 MiB
        # for a portable region on a hugetlb memfd (libpin refuses less).
        self._view_align = _page()
        if self.backend == "portable":
            i = _region_info(ptr, lambda: lib.pin_region_error(ptr))
            if i.min_order == i.chunk_order and i.nr_fallback_chunks == 0:
                self._view_align = 2 << 20     # one huge page

    def _ptr(self):
        if not self._h.alive:
            raise ValueError("pinmem: region %d is closed" % self.id)
        return self._h.ptr

    def _err(self):
        return lib.pin_region_error(self._h.ptr)

    def _busy_holders(self):
        try:
            return self._holders_unlocked()
        except PinError:
            return []

    def _busy_refs(self):
        try:
            return self._refs_unlocked()
        except PinError:
            return []

    def _call(self, fn, what, *args):
        with self._lock:
            return _check(fn(self._ptr(), *args), self._err, what,
                          self._busy_holders, self._busy_refs)

    def __repr__(self):
        if not self._h.alive:
            return "<pinmem.Region %d closed>" % self.id
        return "<pinmem.Region %d %d bytes %s>" % (self.id, self.size,
                                                  self.info().state)

    # -- lifetime

    def close(self):
        """End the handle (its owner mapping and fd). Views made from it
        stay valid. Refused (ValueError) while arrays over
        the owner mapping exist."""
        # Checked under the lock owner_array() makes the mapping under, so
        # that one cannot appear between this check and the free.
        with self._lock:
            owner = self._owner() if self._owner else None
            if owner is not None:
                raise ValueError("pinmem: region %d: arrays over the owner "
                                 "mapping still exist" % self.id)
            if self._h.alive:
                ret = lib.pin_region_free(self._h.ptr)
                if ret < 0:
                    _check(ret, self._err, "free")
                self._h._fin.detach()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # -- queries

    def info(self):
        with self._lock:
            return _region_info(self._ptr(), self._err)

    def nodes(self):
        """{node: bytes} of the region's memory, nodes holding none left
        out (device backend; PinError EOPNOTSUPP on the portable one)."""
        with self._lock:
            n = _check(lib.pin_region_nodes(self._ptr(), None, 0),
                       self._err, "nodes")
            arr = (ctypes.c_uint64 * n)()
            n = _check(lib.pin_region_nodes(self._ptr(), arr, n),
                       self._err, "nodes")
        return {i: arr[i] for i in range(min(n, len(arr))) if arr[i]}

    @property
    def state(self):
        return self.info().state

    def _holders_unlocked(self):
        cap = 16
        while True:
            arr = (_lib.PinHolder * cap)()
            n = lib.pin_holders(self._h.ptr, arr, cap)
            if n < 0:
                _check(n, self._err, "holders")
            if n <= cap:
                return [_holder(arr[i]) for i in range(n)]
            cap = n + 8

    def holders(self):
        """Every mapping of the region (a list of Holder records).
        PinError EOPNOTSUPP on the portable backend."""
        with self._lock:
            self._ptr()
            return self._holders_unlocked()

    def _refs_unlocked(self):
        if not _lib.has("pin_refs"):
            return []
        cap = 16
        while True:
            arr = (_lib.PinRefRange * cap)()
            n = lib.pin_refs(self._h.ptr, arr, cap)
            if n < 0:
                _check(n, self._err, "refs")
            if n <= cap:
                return [_ref_range(arr[i]) for i in range(n)]
            cap = n + 8

    def refs(self):
        """The byte ranges referenced outside any mapping (a list of
        RefRange records): what holds up a donation once the views are
        gone. PinError EOPNOTSUPP on the portable backend or a module
        before ABI 2."""
        with self._lock:
            self._ptr()
            return self._refs_unlocked()

    # -- state changes

    def seal(self):
        """OPEN -> SEALED. BusyError (naming them) while writable views
        exist. On the portable backend sealing makes the owner mapping
        read-only, so it is refused there while owner arrays exist."""
        if self.backend == "portable" and self._owner and self._owner():
            raise BusyError(_errno.EBUSY, "seal: region %d: arrays over the "
                            "owner mapping exist, and the portable backend "
                            "makes that mapping read-only when it seals; "
                            "drop them first" % self.id)
        self._call(lib.pin_seal, "seal")

    def donate(self, timeout=0):
        """OPEN/SEALED -> DONATED, only when no view mapping exists and no
        reference taken through one remains (a pipe holding its pages,
        O_DIRECT in flight, a registration). timeout: seconds to wait for
        both to drain (0: do not wait; None: wait without limit).
        BusyError names the holders or the referenced bytes (.refs);
        PinError ETIMEDOUT after a wait; EOPNOTSUPP on the portable
        backend."""
        if timeout is None:
            ms = -1
        else:
            if timeout < 0:
                raise ValueError("pinmem: timeout must be >= 0 or None")
            ms = int(round(timeout * 1000))
            if timeout > 0 and ms == 0:
                ms = 1
            ms = min(ms, 2**31 - 1)
        self._call(lib.pin_donate, "donate", ms)

    def publish(self):
        """DONATED -> SEALED."""
        self._call(lib.pin_publish, "publish")

    def reopen(self):
        """DONATED -> OPEN."""
        self._call(lib.pin_reopen, "reopen")

    # -- memory

    def view(self, dtype, shape, offset=0, writable=False):
        """A NumPy array over bytes [offset, offset + nbytes) of the region,
        backed by its own view mapping (the kernel counts it). The mapping
        lives exactly as long as this array and the arrays derived from it;
        ``with region.view(...) as a:`` ends it at the end of the block.
        writable=True needs the region OPEN."""
        dtype = np.dtype(dtype)
        shape = _shape_tuple(shape)
        nbytes = math.prod(shape) * dtype.itemsize
        if offset < 0 or nbytes < 0 or offset + nbytes > self.size:
            raise ValueError("pinmem: %d bytes at offset %d do not fit in "
                             "region %d (%d bytes)" %
                             (nbytes, offset, self.id, self.size))
        page = self._view_align
        start = offset - offset % page
        end = -(-max(offset + nbytes, offset + 1) // page) * page
        end = min(end, -(-self.size // page) * page)
        with self._lock:
            m = _ViewMapping(self._ptr(), self.id, start, end - start,
                             bool(writable), self._err, self._busy_holders)
        return _over(m, dtype, shape, offset - start, PinnedArray)

    def owner_array(self, dtype=np.uint8, shape=None, offset=0):
        """An array over the owner mapping (the runtime's own mapping, not
        a view: not counted as a view, allowed in every state; by contract
        the owner writes only while OPEN or DONATED). Writable, except on
        the portable backend once sealed. Keeps the region handle alive
        while it exists."""
        dtype = np.dtype(dtype)
        if shape is None:
            shape = ((self.size - offset) // dtype.itemsize,)
        shape = _shape_tuple(shape)
        nbytes = math.prod(shape) * dtype.itemsize
        if offset < 0 or offset + nbytes > self.size:
            raise ValueError("pinmem: %d bytes at offset %d do not fit in "
                             "region %d" % (nbytes, offset, self.id))
        with self._lock:
            owner = self._owner() if self._owner else None
            if owner is None:
                addr = ctypes.c_void_p()
                _check(lib.pin_region_map(self._ptr(), ctypes.byref(addr)),
                       self._err, "map")
                # Portable: once sealed, the owner mapping is read-only.
                ro = self.backend == "portable" and \
                    _region_info(self._h.ptr, self._err).state != "open"
                owner = _OwnerMapping(self._h, addr.value, self.size, ro)
                self._owner = weakref.ref(owner)
        return _over(owner, dtype, shape, offset, np.ndarray)

    def fd(self):
        """The region fd (owned by this handle), e.g. to pass on."""
        return lib.pin_region_fd(self._ptr())


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
