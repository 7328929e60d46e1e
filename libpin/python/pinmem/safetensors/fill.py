# SPDX-License-Identifier: MIT
"""Filling a region the caller already has: a checkpoint, or any tensors.

    ck = pinmem.load_safetensors("a.safetensors")    # sealed region
    r = ck.regions[0]; ck.close(); del tensors       # views gone
    r.donate(); r.reopen()                           # the seed's reuse
    placed = load_into(r, "b.safetensors")           # io_uring, O_DIRECT
    r.seal()
    w = placed.tensors()                             # torch, read-only
    # or, through a writable view the caller holds:
    with r.view(np.uint8, (n,), writable=True) as v:
        placed = fill_view(v, "b.safetensors")

Each returns a Placement: where every tensor now lies in the region
(offset, format, shape), the metadata and the I/O stats; its arrays() and
tensors() make read-only views (one view mapping for all of them).
"""
import ctypes
import os
from collections import namedtuple

import numpy as np

from .. import _lib
from .._lib import lib
from ..core import PinError, _check, _mapping_of
from . import _format
from .native import _St, _metadata, _opts, _stats, _tensor_dtype, _need

Place = namedtuple("Place", "offset format shape nbytes")
Place.__doc__ = "Where one tensor lies: region offset, dtype name, shape."


class Placement:
    """The tensors of one fill: name -> Place, in file order."""

    def __init__(self, region, places, metadata, stats):
        self.region = region
        self.places = places
        self.metadata = metadata
        self.stats = stats

    def __repr__(self):
        return "<pinmem.Placement %d tensors%s>" % (
            len(self.places),
            " in region %d" % self.region.id if self.region else "")

    def _raw(self, writable):
        if self.region is None:
            raise ValueError("pinmem: this placement has no Region (pass "
                             "region= to fill_view)")
        if not self.places:
            return None, 0
        lo = min(p.offset for p in self.places.values())
        hi = max(p.offset + p.nbytes for p in self.places.values())
        return self.region.view(np.uint8, (max(hi - lo, 1),), offset=lo,
                                writable=writable), lo

    def arrays(self, writable=False):
        """name -> NumPy array over the region (formats NumPy lacks come
        as raw void bytes, as pinmem.load_safetensors gives them)."""
        raw, lo = self._raw(writable)
        out = {}
        for name, p in self.places.items():
            code = lib.pin_dtype_from_name(p.format.encode())
            _, dt = _tensor_dtype(code)
            b = raw[p.offset - lo:p.offset - lo + p.nbytes]
            shape = p.shape
            if lib.pin_dtype_bits(code) != 8 * dt.itemsize:
                shape = (p.nbytes,)         # F4, F6: packed, as bytes
            out[name] = b.view(dt).reshape(shape)
        return out

    def tensors(self, writable=False):
        """name -> torch tensor over the region (one mapping for all)."""
        from .. import torch as pt
        raw, lo = self._raw(writable)
        out = {}
        for name, p in self.places.items():
            tdt, shape = pt.tensor_dtype(p.format, p.shape, name)
            out[name] = pt.from_array(
                raw[p.offset - lo:p.offset - lo + p.nbytes], tdt, shape)
        return out


def _places(ck, base=0):
    places = {}
    t = _lib.init(_lib.PinStTensor)
    for i in range(lib.pin_st_count(ck.ptr)):
        _check(lib.pin_st_tensor(ck.ptr, i, ctypes.byref(t)), ck.err,
               "tensor %d" % i)
        shape = tuple(t.shape[k] for k in range(t.ndim))
        places[_lib.text(t.name)] = Place(
            base + (t.region_offset if t.region else t.file_offset),
            _lib.text(lib.pin_dtype_name(t.dtype)), shape, t.nbytes)
    return places


def load_into(region, path, offset=0, queue_depth=None, request_size=None,
              direct=True):
    """Read a .safetensors file's data section into region (OPEN or
    DONATED: e.g. donated, then reopened) at offset (a multiple of 4096),
    with libpin's io_uring reader (pin_st_load_into: O_DIRECT where
    allowed). The region's state is left as it was. Returns a Placement.
    PinError: EPERM (sealed), ENOSPC (does not fit), EINVAL (offset,
    format)."""
    _need("pin_st_load_into")
    opts = _opts(queue_depth, request_size, direct)
    load = _lib.init(_lib.PinStLoadOpts, io=ctypes.pointer(opts))
    with _St() as ck:
        _check(lib.pin_st_load_into(ck.ptr, region._ptr(), offset,
                                    os.fsencode(path), ctypes.byref(load)),
               ck.err, "load %s into region %d" % (path, region.id))
        return Placement(region, _places(ck), _metadata(ck),
                         _stats(ck.ptr))


def fill_view(view, path, region=None, queue_depth=None, request_size=None,
              direct=True):
    """Read a .safetensors file's data section into a writable view (a
    PinnedArray of region.view(..., writable=True)) with pin_file_read
    (io_uring, O_DIRECT where allowed); the view must start on a page and
    hold the section's 4096-aligned superset. Places are region offsets,
    so that views made after sealing find the tensors; region (the view's
    Region) lets the Placement make them."""
    _need("pin_file_read")
    m = _mapping_of(view)
    if m is None or not view.flags.writeable or not view.flags.c_contiguous:
        raise ValueError("pinmem: fill_view needs a writable, contiguous "
                         "view of a region (region.view(..., writable=True))")
    addr = view.__array_interface__["data"][0]
    meta, ents, start = _format.parse_file(path)
    data_len = os.stat(path).st_size - start
    need = lib.pin_file_span(start, data_len)
    if need > view.nbytes:
        raise ValueError("pinmem: %s needs %d bytes of view (the data "
                         "section's 4096-aligned superset), the view has %d"
                         % (path, need, view.nbytes))
    opts = _opts(queue_depth, request_size, direct)
    why = ctypes.create_string_buffer(512)
    _lib.why_of(opts, why)
    st = _lib.init(_lib.PinIoStats)
    ret = lib.pin_file_read(addr, view.nbytes, os.fsencode(path), start,
                            data_len, ctypes.byref(opts), ctypes.byref(st))
    if ret < 0:
        raise PinError(-ret, _lib.text(why.value) or os.strerror(-ret))
    base = m.offset + (addr - m.addr) + ret
    places = {}
    for name, dt, shape, b, e in ents:
        places[name] = Place(base + b, dt, shape, e - b)
    secs = st.ns / 1e9
    stats = {"bytes": st.bytes, "seconds": secs,
             "gb_per_s": st.bytes / secs / 1e9 if secs > 0 else 0.0,
             "direct": bool(st.direct), "fixed_buffers": bool(st.fixed_buffers),
             "fallback_reason": _lib.text(st.fallback_reason),
             "requests": st.requests}
    if region is not None and region.id != m.region_id:
        raise ValueError("pinmem: the view is of region %d, not %d" %
                         (m.region_id, region.id))
    return Placement(region, places, meta or {}, stats)


def fill(region, tensors, offset=0, align=64):
    """Copy tensors (name -> NumPy array or torch tensor) into region
    (OPEN) from offset on, each at a multiple of align, through one
    writable view; returns the Placement (the layout computed here)."""
    places, at = {}, offset
    items = []
    for name, a in tensors.items():
        fmt, raw = _bytes_of(a)
        at = -(-at // align) * align
        places[name] = Place(at, fmt, tuple(a.shape), raw.nbytes)
        items.append((at, raw))
        at += raw.nbytes
    if places:
        with region.view(np.uint8, (max(at - offset, 1),), offset=offset,
                         writable=True) as w:
            for where, raw in items:
                w[where - offset:where - offset + raw.nbytes] = raw
            del raw
    return Placement(region, places, {}, {})


def _bytes_of(a):
    """(safetensors name, uint8 array of the bytes) of an array/tensor."""
    if isinstance(a, np.ndarray):
        from .. import dtypes
        fmt = dtypes.format_of(a)
        return fmt, np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    from .. import torch as pt
    fmt = pt.dtype_name(a.dtype)
    size = a.element_size()
    carrier = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}[size]
    import torch
    c = a.detach().contiguous().reshape(-1).view(getattr(torch, carrier))
    return fmt, c.numpy().view(np.uint8)

