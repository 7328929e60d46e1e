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
                One kind owns no view: a private load's, over the owner
                mapping of the portable region it left OPEN
                (_ViewMapping.of_owner); it keeps the Region's handle alive
                instead, and the Region refuses close() while it lives.

Where: Device, Region and open() here; the exceptions in _errors.py, the
records (Holder, RefRange, RegionInfo, DeviceInfo) in _records.py, the
mappings in _mappings.py, PinnedArray in _arrays.py. This module re-exports all of
them, so that pinmem.core.NAME is what it always was.
"""
import ctypes
import errno as _errno
import math
import os
import threading
import weakref

import numpy as np

from . import _lib
from ._lib import lib
# The parts, re-exported (the package, torch.py, dlpack.py, safetensors/
# and the tests use core's private names too).
from ._errors import (BusyError, PinError, PinPermissionError,  # noqa: F401
                      PortableBackendWarning, ReadOnlyError, ViewInUseError,
                      _check, pin_error, warn_once)
from ._records import (DeviceInfo, Holder, RefRange, RegionInfo,  # noqa: F401
                       _holder, _prot_str, _ref_range, _region_info,
                       _state_name)
from ._mappings import (_OwnerMapping, _ViewMapping,  # noqa: F401
                       _end_view, _mapping_of, _over, _page, _shape_tuple)
from ._arrays import (PinnedArray, _Probe,  # noqa: F401
                      _BASE_EXIT, _BASE_EXIT_EXC, _BASE_RELEASE, _calibrate,
                      _end, _outside_refs)

__all__ = ["PinError", "BusyError", "PinPermissionError", "ViewInUseError",
           "ReadOnlyError",
           "Device", "Region",
           "PinnedArray", "Holder", "RefRange", "RegionInfo", "DeviceInfo",
           "open"]


def pci_numa_node(bus_id):
    """The NUMA node of a PCI device ("0000:3b:00.0", CUDA's spelling
    too), from sysfs; -1 when the platform names none."""
    ret = lib.pin_pci_numa_node(bus_id.encode())
    if ret < -1:
        raise PinError(-ret, "NUMA node of PCI device %s: %s" %
                       (bus_id, os.strerror(-ret)))
    return ret


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


# The module's first ABI with copy-on-write (MAP_PRIVATE) view mappings.
_COW_ABI = 7


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
        opts = _lib.why_of(_lib.init(_lib.PinDevOpts), why)
        ret = lib.pin_dev_open(ctypes.byref(p), code, ctypes.byref(opts))
        if ret < 0:
            raise pin_error(-ret, _lib.text(why.value) or
                            "open %s backend: %s" % (backend,
                                                     os.strerror(-ret)))
        self._h = _Handle(p.value, lib.pin_dev_close)
        self._lock = threading.Lock()
        self.backend = _lib.text(lib.pin_backend_name(
            lib.pin_dev_backend(p.value)))
        #: which backend, and why, in libpin's words
        self.backend_why = _lib.text(lib.pin_dev_backend_why(p.value))
        #: whether view(..., copy_on_write=True) can map privately: memfd
        #: can; the module from ABI 7 on (views of SEALED regions)
        self.copy_on_write_supported = self.backend == "portable" or \
            self.info().abi_version >= _COW_ABI
        if backend == "auto" and self.backend == "portable" and \
                "PIN_BACKEND" not in self.backend_why:
            warn_once(PortableBackendWarning, "pinmem: " + self.backend_why)

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
        i = _lib.init(_lib.PinDevInfo)
        with self._lock:
            _check(lib.pin_dev_info(self._ptr(), ctypes.byref(i)),
                   self._err, "device info")
        d = {f: getattr(i, f) for f, _ in _lib.PinDevInfo._fields_
             if f != "size"}
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
        o = _lib.init(_lib.PinRegionOpts)
        o.flags = _lib.PIN_REGION_FALLBACK if fallback else 0
        if node is not None:
            o.flags |= _lib.PIN_REGION_NODE
            o.node = node
        if any_node:
            o.flags |= _lib.PIN_REGION_ANY_NODE
        with self._lock:
            _check(lib.pin_region_create(self._ptr(), nbytes,
                                         ctypes.byref(o), ctypes.byref(p)),
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


# ---- Regions --------------------------------------------------------------

class Region:
    """A pinned region. States: 'open' (views may write), 'sealed'
    (read-only views), 'donated' (no views: the owner rewrites it)."""

    def __init__(self, ptr, dev):
        self._h = _Handle(ptr, lib.pin_region_close)
        self._lock = threading.Lock()
        self._owner = None          # weakref to the _OwnerMapping
        self.id = lib.pin_region_id(ptr)
        self.size = lib.pin_region_size(ptr)
        self.backend = dev.backend
        self.copy_on_write_supported = dev.copy_on_write_supported
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
                ret = lib.pin_region_close(self._h.ptr)
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
        out (whole 2 MiB chunks on the device backend, pages on the
        portable one)."""
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
            arr = _lib.init_array(_lib.PinHolder, cap)
            n = lib.pin_region_holders(self._h.ptr, arr, cap)
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
        if not _lib.has("pin_region_refs"):
            return []
        cap = 16
        while True:
            arr = _lib.init_array(_lib.PinRefRange, cap)
            n = lib.pin_region_refs(self._h.ptr, arr, cap)
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
        self._call(lib.pin_region_seal, "seal")

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
        self._call(lib.pin_region_donate, "donate", ms)

    def publish(self):
        """DONATED -> SEALED."""
        self._call(lib.pin_region_publish, "publish")

    def reopen(self):
        """DONATED -> OPEN."""
        self._call(lib.pin_region_reopen, "reopen")

    # -- memory

    def view(self, dtype, shape, offset=0, writable=False,
             copy_on_write=False):
        """A NumPy array over bytes [offset, offset + nbytes) of the region,
        backed by its own view mapping (the kernel counts it). The mapping
        lives exactly as long as this array and the arrays derived from it;
        ``with region.view(...) as a:`` ends it at the end of the block.
        writable=True needs the region OPEN. copy_on_write=True: a
        writable array over a private mapping of a read-only view: reads
        see the region, writes go to private copies of the pages (ordinary
        memory) and never into the region. On the portable backend in any
        state; on the device backend only while SEALED (else PinError
        EPERM) and with a module of ABI 7 or later (else PinError
        EOPNOTSUPP; Device.copy_on_write_supported says which)."""
        if copy_on_write and not self.copy_on_write_supported:
            raise PinError(_errno.EOPNOTSUPP, "view: region %d: "
                           "copy-on-write views need the portable backend "
                           "or a pinmem module of ABI %d or later (this "
                           "one maps views shared only)" % (self.id,
                                                            _COW_ABI))
        if copy_on_write and writable:
            raise ValueError("pinmem: writable=True and copy_on_write=True "
                             "exclude each other")
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
                             bool(writable), self._err, self._busy_holders,
                             private=bool(copy_on_write),
                             backend=self.backend)
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

    def _load_mapping(self):
        """The owner mapping as the mapping of a private load's tensors
        (_ViewMapping.of_owner); close() is refused while it lives, as
        for owner_array()'s."""
        with self._lock:
            m = _ViewMapping.of_owner(self._h, self.id, self.size, self._err)
            self._owner = weakref.ref(m)
        return m

    def fd(self):
        """The region fd (owned by this handle), e.g. to pass on."""
        return lib.pin_region_fd(self._ptr())
