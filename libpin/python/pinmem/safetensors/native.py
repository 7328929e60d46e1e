# SPDX-License-Identifier: MIT
"""safetensors checkpoints in pinned memory, through libpin's reader and
writer (io_uring, O_DIRECT where the filesystem allows it)."""
import ctypes
import errno
import math
import os
from collections.abc import Mapping

import numpy as np

from .. import _forks, _lib, dtypes
from .._lib import lib
from ..core import (PinError, PinnedArray, PinPermissionError, Region,
                   _ViewMapping, _check, _region_info)
from ..core import open as _open
from . import _format


def _need(name):
    if not _lib.has(name):
        raise PinError(38, "this libpin (%s) has no %s: checkpoint I/O is "
                       "not built in" % (lib.pinmem_path, name))


def _opts(queue_depth, request_size, direct):
    o = _lib.init(_lib.PinIoOpts)
    o.queue_depth = queue_depth or 0
    o.request_size = request_size or 0
    o.flags = 0 if direct else 1        # PIN_IO_BUFFERED
    return o


def _kernel_fill(ck):
    """Whether the module's FILL read the load (device backend, ABI 5)."""
    step = _lib.init(_lib.PinStStep)
    return lib.pin_st_timeline(ck, ctypes.byref(step), 1) > 0 and \
        bool(step.flags & _lib.PIN_ST_STEP_KERNEL_FILL)


def _stats(ck):
    s = _lib.init(_lib.PinIoStats)
    if lib.pin_st_stats(ck, ctypes.byref(s)) < 0:
        return {}
    secs = s.ns / 1e9
    io_secs = (s.io_ns or s.ns) / 1e9
    return {"bytes": s.bytes, "seconds": secs, "io_seconds": io_secs,
            "gb_per_s": (s.bytes / io_secs / 1e9) if io_secs > 0 else 0.0,
            "requests": s.requests, "short_ios": s.short_ios,
            "retries": s.retries, "queue_depth": s.queue_depth,
            "request_size": s.request_size, "direct": bool(s.direct),
            "fixed_buffers": bool(s.fixed_buffers),
            "kernel_fill": _kernel_fill(ck),
            "fallback_reason": _lib.text(s.fallback_reason)}


def _align_stats(ck):
    """What placing the tensors on 64 bytes moved (pin_st_phases)."""
    ph = _lib.init(_lib.PinStPhases)
    if lib.pin_st_phases(ck, ctypes.byref(ph)) < 0:
        return {}
    return {"align_bytes": ph.align_bytes, "align_seconds": ph.align_ns / 1e9}


class _St:
    """A pin_st context, freed on exit (with the regions it loaded; views
    made of them stay valid)."""

    def __init__(self):
        _need("pin_st_create")
        self.ptr = lib.pin_st_create()
        if not self.ptr:
            raise MemoryError("pinmem: pin_st_create")

    def err(self):
        return lib.pin_st_error(self.ptr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        lib.pin_st_close(self.ptr)
        self.ptr = None
        return False


def _tensor_dtype(code):
    name = _lib.text(lib.pin_dtype_name(code))
    try:
        return name, dtypes.from_name(name)
    except KeyError:
        # No NumPy form (F4, F6_*, F8_E8M0; BF16/F8 without ml_dtypes):
        # raw void bytes, nameless, so that no save can mislabel them.
        # Sub-byte formats come as their packed bytes (shape (nbytes,)).
        return name, dtypes.raw_dtype(name, lib.pin_dtype_bits(code))


class Checkpoint(Mapping):
    """A loaded checkpoint: name -> read-only array over pinned memory.

    Each file was read into its own region, which was then sealed; the
    tensors of one file share one read-only view mapping of that region,
    which lives as long as any of them. Tensors whose format NumPy lacks
    (F4, F6, F8_E8M0; BF16/F8 without ml_dtypes) are raw void bytes ('V2'
    for BF16) with no arithmetic; .formats names their format.

    Attributes: metadata (the __metadata__ map), files (paths, in load
    order), regions (each file's Region: donate, reopen and refill it with
    pinmem.safetensors.load_into), region_ids, region_info (each region's RegionInfo when the
    load finished: sealed, its counts), stats (the load's I/O: bytes,
    seconds (the whole call), io_seconds (moving bytes), gb_per_s (bytes
    over io_seconds),
    direct, fixed_buffers, fallback_reason, requests, ...), formats
    (name -> safetensors dtype name)."""

    def __init__(self, places, formats, metadata, files, region_ids, stats,
                 region_info, regions=None):
        # name -> (shape, NumPy dtype, its file's whole region array, byte
        # offset in it, the header's shape), in file order; each array
        # made when first asked for (pinmem.safetensors' torch tensors are
        # cut from the region, and a header of many tensors would pay for
        # arrays none use).
        self._places = places
        self._arrays = {}
        # The Region of each file (the caller's now: seal, donate, reopen,
        # refill it; views outlive it), or None where libpin cannot hand
        # them over.
        self.regions = regions
        self.formats = formats
        self.metadata = metadata
        self.files = files
        self.region_ids = region_ids
        self.stats = stats
        self.region_info = region_info

    def __getitem__(self, name):
        a = self._arrays.get(name)
        if a is None:
            shape, dt, raw, offset, _ = self._places[name]
            a = self._arrays[name] = np.ndarray.__new__(
                PinnedArray, shape, dtype=dt, buffer=raw, offset=offset)
        return a

    def __iter__(self):
        return iter(self._places)

    def __len__(self):
        return len(self._places)

    def close(self):
        """Drop the checkpoint's references to its tensors; each file's
        view mapping goes with the last of its tensors."""
        self._arrays = {}
        self._places = {}

    def __repr__(self):
        return "<pinmem.Checkpoint %d tensors in %d file(s)>" % (
            len(self._places), len(self.files))


def _file_mappings(ck, dev, path, files, writable, copy_on_write):
    """Each loaded file's bytes for the arrays: {region pointer: uint8
    array over one mapping of it}, the regions' RegionInfo, and the
    Regions (ours now: pin_st_close no longer frees them; None where
    libpin cannot hand them over)."""
    rps, infos = [], []
    for i in range(len(files)):
        rp = lib.pin_st_region(ck.ptr, i)
        if not rp:
            raise PinError(5, "load %s: file %s has no region" %
                           (path, files[i]))
        rps.append(rp)
        infos.append(_region_info(rp, lambda rp=rp: lib.pin_region_error(rp)))
    if not _lib.has("pin_st_take_region"):
        maps = {rp: _load_view(rp, dev, writable, copy_on_write)
                for rp in rps}
        if writable:
            for m in maps.values():
                _forks.private_in_child(m)
        return {rp: np.asarray(m) for rp, m in maps.items()}, infos, None
    if writable and dev.backend == "portable":
        # The load's own locked, writable mapping (PIN_ST_LOAD_OPEN).
        regions = [Region(lib.pin_st_take_region(ck.ptr, i), dev)
                   for i in range(len(files))]
        return ({r._h.ptr: np.asarray(r._load_mapping()) for r in regions},
                infos, regions)
    # A view of each region, locked once the owner mapping (locked by the
    # load, and not needed until someone asks for it) is gone:
    # RLIMIT_MEMLOCK counts both.
    maps = {rp: _load_view(rp, dev, writable, copy_on_write, lock=False)
            for rp in rps}
    regions = []
    for i in range(len(files)):
        rp = lib.pin_st_take_region(ck.ptr, i)
        lib.pin_region_unmap(rp)
        regions.append(Region(rp, dev))
    for m in maps.values():
        if not m.private:
            m.lock()
        if writable:
            _forks.private_in_child(m)
    return {rp: np.asarray(m) for rp, m in maps.items()}, infos, regions


def _load_view(rp, dev, writable, copy_on_write, lock=True):
    return _ViewMapping(rp, lib.pin_region_id(rp), 0, lib.pin_region_size(rp),
                        writable, lambda: lib.pin_region_error(rp), None,
                        private=copy_on_write, backend=dev.backend, lock=lock)


def load_safetensors(path, dev=None, queue_depth=None, request_size=None,
                     direct=True, node=None, any_node=False,
                     copy_on_write=False, writable=False, align=False):
    """Load a .safetensors file, or the shards of a
    .safetensors.index.json, into pinned regions (one per file, sealed)
    with libpin's io_uring reader, and return a Checkpoint: a mapping of
    name -> read-only NumPy view. dev: a pinmem Device (default: open
    one). direct=False reads without O_DIRECT. node: every region on that
    NUMA node (pinmem.pci_numa_node of the GPU it is for), else PinError
    ENOMEM, unless any_node lets other nodes serve; on either backend.
    copy_on_write=True (where dev.copy_on_write_supported, else PinError
    EOPNOTSUPP): the arrays are writable, over a private mapping whose
    writes go to copies of the pages and never into the region.
    writable=True: each region is left OPEN (not sealed) and the arrays
    are writable, over a shared mapping of it: writes go to the pinned
    region itself, which only this process maps unless it hands the
    region on (what pinmem.safetensors.torch gives PyTorch).

    The arrays' memory is pinned while any of them lives: mlocked on the
    portable backend (PinError naming RLIMIT_MEMLOCK when the limit is
    too small), pinned by the kernel on the device backend; and, where a
    CUDA driver is present, registered with it (not copy_on_write's).

    align=True: every tensor starts at a multiple of 64 bytes of its
    region (PIN_ST_LOAD_ALIGN: the tensors the file has elsewhere are
    moved inside the region before the seal; .stats["align_bytes"] and
    ["align_seconds"] say what that cost), as JAX needs to use them in
    place; without it they lie as in the file.

    Errors: a file that cannot be opened, as pinmem.safetensors' loaders
    say it (FileNotFoundError in safetensors' words, PermissionError,
    IsADirectoryError); a device this user may not open,
    pinmem.PinPermissionError; libpin's failures to load (the header
    refused, in libpin's words; RLIMIT_MEMLOCK; memory),
    pinmem.safetensors.SafetensorPinError: a SafetensorError and a
    PinError."""
    if any_node and node is None:
        raise ValueError("pinmem: any_node needs a node")
    _need("pin_st_load")
    _format.open_file(path).close()
    own_dev = dev is None
    if own_dev:
        dev = _open()
    try:
        ck = _load(path, dev, queue_depth, request_size, direct, node,
                   any_node, copy_on_write, writable, align)
    except PinError as e:
        raise load_error(e) from None
    finally:
        if own_dev:
            dev.close()
    for name in ck:
        ck[name]    # every array made: NumPy's refusal of a shape, now
    return ck


def load_lazily(path, dev, writable):
    """load_safetensors(path, dev, writable=writable), each array made
    when first asked for (pinmem.safetensors' load_file)."""
    _need("pin_st_load")
    _format.open_file(path).close()
    try:
        return _load(path, dev, None, None, True, None, False, False,
                     writable, False)
    except PinError as e:
        raise load_error(e) from None


def load_error(e):
    """A PinError of a load as the loaders raise it: SafetensorPinError,
    but a PinPermissionError (the device, the region) as it is."""
    if isinstance(e, (_format.SafetensorPinError, PinPermissionError)):
        return e
    return _format.SafetensorPinError(e.errno, e.strerror)


def _load(path, dev, queue_depth, request_size, direct, node, any_node,
          copy_on_write, writable, align):
    if copy_on_write and writable:
        raise ValueError("pinmem: writable=True and copy_on_write=True "
                         "exclude each other")
    if copy_on_write and not dev.copy_on_write_supported:
        raise PinError(errno.EOPNOTSUPP, "load %s: copy-on-write views "
                       "need the portable backend or a pinmem module "
                       "of ABI 7 or later (this one maps views shared "
                       "only)" % path)
    opts = _opts(queue_depth, request_size, direct)
    load = _lib.init(_lib.PinStLoadOpts, io=ctypes.pointer(opts))
    if writable:
        load.flags |= _lib.PIN_ST_LOAD_OPEN
    if align:
        load.flags |= _lib.PIN_ST_LOAD_ALIGN
    if node is not None:
        place = _lib.init(_lib.PinRegionOpts, node=node)
        place.flags = _lib.PIN_REGION_NODE | \
            (_lib.PIN_REGION_ANY_NODE if any_node else 0)
        load.region = ctypes.pointer(place)
    with _St() as ck:
        ret = lib.pin_st_load(ck.ptr, dev._ptr(), os.fsencode(path),
                              ctypes.byref(load))
        _check(ret, ck.err, "load %s" % path)
        stats = _stats(ck.ptr)
        stats.update(_align_stats(ck.ptr))
        files = [os.fsdecode(lib.pin_st_file_path(ck.ptr, i))
                 for i in range(lib.pin_st_file_count(ck.ptr))]
        by_region, infos, regions = _file_mappings(
            ck, dev, path, files, writable, copy_on_write)
        region_ids = [i.id for i in infos]
        places, formats = _tensors(ck, path, by_region)
        meta = _metadata(ck)
    return Checkpoint(places, formats, meta, files, region_ids, stats,
                      infos, regions)


def _tensors(ck, path, by_region):
    """name -> (shape, NumPy dtype, region array, offset, the header's
    shape), and name -> format, of every tensor of a load, in file order. Per tensor one call
    into libpin and no NumPy array: a header may name a million."""
    places, formats, kinds = {}, {}, {}
    t = _lib.init(_lib.PinStTensor)
    ref, get = ctypes.byref(t), lib.pin_st_tensor
    for i in range(lib.pin_st_count(ck.ptr)):
        ret = get(ck.ptr, i, ref)
        if ret < 0:
            _check(ret, ck.err, "tensor %d" % i)
        kind = kinds.get(t.dtype)
        if kind is None:
            fmt, dt = _tensor_dtype(t.dtype)
            packed = lib.pin_dtype_bits(t.dtype) != 8 * dt.itemsize
            kind = kinds[t.dtype] = (fmt, dt, packed)
        fmt, dt, packed = kind
        name = t.name.decode("utf-8", "replace")
        shape = file_shape = tuple(t.shape[:t.ndim])
        if packed:
            shape = (t.nbytes,)         # F4, F6: packed, as bytes
        if math.prod(shape) * dt.itemsize != t.nbytes:
            raise PinError(22, "load %s: tensor %s: %d bytes for "
                           "shape %s of %s" %
                           (path, name, t.nbytes, shape, fmt))
        places[name] = (shape, dt, by_region[t.region], t.region_offset,
                        file_shape)
        formats[name] = fmt
    return places, formats


def save_safetensors(path, arrays, metadata=None, queue_depth=None,
                     request_size=None, direct=True, formats=None):
    """Write arrays (a mapping, or pairs, of name -> array) to path as a
    safetensors file with libpin's writer (written to a temporary name,
    fsynced, renamed over path). The dtype names the format (bfloat16 and
    float8 through ml_dtypes); formats (name -> safetensors dtype name)
    says it for raw arrays (a loaded checkpoint's .formats fits), whose
    element size must match. Returns the I/O stats."""
    _need("pin_st_save")
    items = list(arrays.items()) if isinstance(arrays, Mapping) \
        else list(arrays)
    n = len(items)
    tensors = _lib.init_array(_lib.PinStTensor, max(n, 1))
    keep = []
    for i, (name, a) in enumerate(items):
        a = np.asarray(a)
        fmt = (formats or {}).get(name) or dtypes.format_of(a)
        code = lib.pin_dtype_from_name(fmt.encode())
        if code <= 0:
            raise ValueError("pinmem: libpin does not know dtype %s" % fmt)
        if lib.pin_dtype_bits(code) != 8 * a.dtype.itemsize and \
                lib.pin_dtype_bits(code) % 8 == 0:
            raise ValueError("pinmem: %s: %s elements are %d bits, the "
                             "array's %s %d" % (name, fmt,
                                                lib.pin_dtype_bits(code),
                                                a.dtype, 8 * a.dtype.itemsize))
        if not a.flags.c_contiguous:
            a = a.copy(order="C")     # (ascontiguousarray makes 0-d 1-d)
        bname = name.encode("utf-8")
        shape = (ctypes.c_uint64 * max(a.ndim, 1))(*a.shape)
        keep += [a, bname, shape]
        t = tensors[i]
        t.name = bname
        t.dtype = code
        t.ndim = a.ndim
        t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_uint64))
        t.nbytes = a.nbytes
        t.data = a.ctypes.data if a.nbytes else None
    meta = list((metadata or {}).items())
    keys = (ctypes.c_char_p * max(len(meta), 1))(
        *[k.encode() for k, _ in meta])
    vals = (ctypes.c_char_p * max(len(meta), 1))(
        *[v.encode() for _, v in meta])
    opts = _opts(queue_depth, request_size, direct)
    with _St() as ck:
        _check(lib.pin_st_save(ck.ptr, os.fsencode(path), tensors, n, keys,
                               vals, len(meta), ctypes.byref(opts)),
               ck.err, "save %s" % path)
        return _stats(ck.ptr)


def _metadata(ck):
    """The __metadata__ map of libpin checkpoint ck."""
    meta = {}
    for i in range(lib.pin_st_metadata_count(ck.ptr)):
        k, v = ctypes.c_char_p(), ctypes.c_char_p()
        if lib.pin_st_metadata(ck.ptr, i, ctypes.byref(k),
                               ctypes.byref(v)) == 0:
            meta[_lib.text(k.value)] = _lib.text(v.value)
    return meta
