# SPDX-License-Identifier: MIT
"""The records libpin's answers become: Holder (a mapping of a region),
RefRange (bytes referenced outside any mapping), RegionInfo and
DeviceInfo. Part of pinmem.core, which re-exports every name; the records
keep "pinmem.core" as their module, where they have always been found."""
import ctypes
import errno as _errno
from collections import namedtuple

from . import _lib
from ._errors import _check
from ._lib import lib

_CORE = "pinmem.core"


def _prot_str(prot):
    return ("r" if prot & _lib.PROT_READ else "-") + \
           ("w" if prot & _lib.PROT_WRITE else "-") + \
           ("x" if prot & _lib.PROT_EXEC else "-")


class Holder(namedtuple("Holder", "pid comm kind start end offset prot "
                                  "writable text", module=_CORE)):
    """One mapping of a region: who (pid, comm), what (kind 'owner' or
    'view'), where (start, end in that process, None when the kernel
    withholds them: another user's process; offset into the region),
    prot ('r--', 'rw-'), writable (counts as a writable mapping), and
    libpin's one-line text."""
    __slots__ = ()
    __module__ = _CORE

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
                                      "text", module=_CORE)):
    """Bytes [offset, offset + length) of a region referenced outside any
    mapping: refs references, pinned of them DMA pins (FOLL_PIN), expected
    the owner's share; text is libpin's one line about them."""
    __slots__ = ()
    __module__ = _CORE

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
    "writable_view_mappings", "view_fds", "owner_uid", "owner_pid"],
    module=_CORE)
RegionInfo.__doc__ = """A region's state ('open', 'sealed', 'donated') and
the kernel's counts. On the portable backend only this handle's owner
mapping is counted (view_mappings is 0)."""

DeviceInfo = namedtuple("DeviceInfo", [
    "backend", "abi_version", "abi_min_compat", "chunk_size",
    "max_total_bytes", "max_region_bytes", "total_bytes", "nr_regions",
    "nr_mappings", "nr_view_fds"], module=_CORE)


def _state_name(state):
    return _lib.text(lib.pin_state_name(state)) or str(state)


def _region_info(rptr, rerr):
    i = _lib.init(_lib.PinRegionInfo)
    _check(lib.pin_region_info(rptr, ctypes.byref(i)), rerr, "info")
    d = {f: getattr(i, f) for f, _ in _lib.PinRegionInfo._fields_
         if f not in ("size", "region_size")}
    d["size"] = i.region_size
    d["state"] = _state_name(i.state)
    d["donate_pending"] = bool(i.donate_pending)
    return RegionInfo(**d)
