# SPDX-License-Identifier: MIT
"""safe_open: safetensors' lazy file handle, over pinned memory.

Opening reads and checks the header only (the rules and messages of
safetensors 0.7). The data section is read on the first access to data
(get_tensor, or indexing a get_slice), in one pass of libpin's io_uring
reader (O_DIRECT where allowed) into one pinned region per file, which is
then sealed: every tensor handed out is a read-only view of it, and the
region's view mapping lives as long as any of them.
"""
import json
import os

import numpy as np

from .. import core
from .. import dtypes as _dtypes
from . import _format
from ._format import SafetensorError
from .native import load_safetensors

_FRAMEWORKS = {"pt": "pt", "torch": "pt", "pytorch": "pt",
               "np": "np", "numpy": "np"}
_OTHER_FRAMEWORKS = ("tf", "tensorflow", "jax", "flax", "mlx", "paddle",
                     "paddlepaddle")


def framework_of(name):
    fw = _FRAMEWORKS.get(str(name).lower()) if name is not None else None
    if fw:
        return fw
    if str(name).lower() in _OTHER_FRAMEWORKS:
        raise SafetensorError("framework %s is not supported by pinmem "
                              "(numpy and pytorch are)" % name)
    raise SafetensorError("framework %s is invalid" % name)


def device_of(device, fw):
    """'cpu' (None), or what torch's .to() is given after the load."""
    if fw == "pt":
        import torch
        if isinstance(device, torch.device):
            return None if device.type == "cpu" else device
    if isinstance(device, int) and not isinstance(device, bool):
        if fw == "np":
            raise SafetensorError("device %d is invalid" % device)
        return "cuda:%d" % device
    if device == "cpu":
        return None
    if isinstance(device, str) and fw == "pt" and device.split(":")[0] in (
            "cuda", "mps", "xpu", "npu", "xla", "hpu", "mlu", "musa"):
        return device
    raise SafetensorError("device %s is invalid" % (device,))


class _Image:
    """A file's (or a sharded checkpoint's) header, checked, and its data
    once loaded: name -> (dtype, shape) in offset order; metadata."""

    def __init__(self, filename):
        self.path = os.fspath(filename)
        self.entries = {}
        if self.path.endswith(".index.json"):
            self.metadata = self._index()
        else:
            meta, ents, _ = _format.parse_file(self.path)
            self.metadata = meta
            for name, dt, shape, _b, _e in ents:
                self.entries[name] = (dt, shape)
        self.arrays = None          # name -> raw uint8 PinnedArray, loaded
        self.checkpoint = None

    def _index(self):
        try:
            with open(self.path, "rb") as f:
                index = json.load(f)
        except FileNotFoundError:
            raise FileNotFoundError("No such file or directory: %s" %
                                    _format._rust_debug_path(self.path)) \
                from None
        wm = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(wm, dict):
            raise SafetensorError("%s: index has no \"weight_map\" object" %
                                  self.path)
        where = os.path.dirname(self.path)
        for shard in sorted(set(wm.values())):
            _, ents, _ = _format.parse_file(os.path.join(where, shard))
            for name, dt, shape, _b, _e in ents:
                self.entries[name] = (dt, shape)
        meta = index.get("metadata")
        if isinstance(meta, dict):
            return {k: v for k, v in meta.items() if isinstance(v, str)}
        return None

    def load(self):
        if self.arrays is None:
            try:
                ck = load_safetensors(self.path)
            except core.PinError as e:
                raise SafetensorError(e.strerror) from e
            self.arrays = {name: ck[name].reshape(-1).view(np.uint8)
                           for name in ck}
            self.checkpoint = ck
        return self.arrays


def numpy_dtype(name):
    try:
        return _dtypes.from_name(name)
    except KeyError as e:
        raise TypeError("pinmem.safetensors.numpy: %s" % e.args[0]) \
            from None


def to_framework(raw, dt, shape, fw, device=None):
    """A read-only tensor/array of file dtype dt over raw bytes."""
    if fw == "np":
        return raw.view(numpy_dtype(dt)).reshape(shape)
    from .. import torch as pt
    try:
        tdt = pt.dtype_from_name(dt)
    except KeyError as e:
        raise TypeError(e.args[0]) from None
    t = pt.from_array(raw, tdt, shape)
    return t if device is None else t.to(device)


def _normalize(idx, shape, what):
    """Indexes -> a tuple of ints and slices of length <= ndim; raises
    SafetensorError like safetensors for too many or out-of-range ints."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    if any(i is Ellipsis for i in idx):
        k = idx.index(Ellipsis)
        fill = len(shape) - (len(idx) - 1)
        idx = idx[:k] + (slice(None),) * max(fill, 0) + idx[k + 1:]
    if len(idx) > len(shape):
        raise SafetensorError("Error during slicing %s with shape %s: more "
                              "slicing indexes than dimensions in tensor" %
                              (what, list(shape)))
    out = []
    for d, (i, n) in enumerate(zip(idx, shape)):
        if isinstance(i, slice):
            if i.step == 0:
                raise ValueError("slice step cannot be zero")
            out.append(i)
            continue
        try:
            k = i.__index__()
        except AttributeError:
            raise TypeError("slice indices must be integers, slices or "
                            "Ellipsis, not %s" % type(i).__name__) from None
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise SafetensorError(
                "Error during slicing %s with shape %s: index %d out of "
                "bounds for tensor dimension #%d of size %d" %
                (what, list(shape), i, d, n))
        out.append(k)
    return tuple(out)


class safe_slice:
    """get_slice's result: the shape and dtype without reading data;
    indexing (ints, slices with any step, Ellipsis, on any dimension)
    returns a C-contiguous tensor/array: a read-only view of the pinned
    region when the selection is contiguous, else a copy."""

    def __init__(self, handle, name):
        self._h = handle
        self._name = name
        self._dt, self._shape = handle._image().entries[name]

    def get_shape(self):
        return list(self._shape)

    def get_dtype(self):
        return self._dt

    def __getitem__(self, idx):
        img = self._h._image()
        # (Ellipsis last: all-int keys give a 0-d array, not a scalar.)
        key = _normalize(idx, self._shape, repr(idx)) + (Ellipsis,)
        raw = img.load()[self._name]
        if self._h._fw == "np":
            part = to_framework(raw, self._dt, self._shape, "np")[key]
            return part if part.flags.c_contiguous else part.copy()
        # NumPy indexes the bytes (torch has no negative steps); a
        # contiguous selection stays a view of the pinned region.
        from .. import torch as pt
        tdt = pt.dtype_from_name(self._dt)
        size = pt.element_size(tdt)
        cells = raw.view(pt._CARRIER[size]).reshape(self._shape)[key]
        if not cells.flags.c_contiguous:
            cells = cells.copy()
        part = pt.from_array(cells, tdt, cells.shape)
        if self._h._device is not None:
            part = part.to(self._h._device)
        return part


class safe_open:
    """safe_open(filename, framework, device="cpu"): a handle on a
    safetensors file (or a model.safetensors.index.json), usable as a
    context manager; after the with block every method raises
    SafetensorError("File is closed")."""

    def __init__(self, filename, framework, device="cpu"):
        self._fw = framework_of(framework)
        self._device = device_of(device, self._fw)
        self._img = _Image(filename)

    def _image(self):
        if self._img is None:
            raise SafetensorError("File is closed")
        return self._img

    def __enter__(self):
        self._image()
        return self

    def __exit__(self, *exc):
        self._img = None
        return False

    def keys(self):
        """Tensor names, sorted."""
        return sorted(self._image().entries)

    def offset_keys(self):
        """Tensor names in the order of their data in the file."""
        return list(self._image().entries)

    def metadata(self):
        """The __metadata__ map, or None when the file has none."""
        m = self._image().metadata
        return dict(m) if m is not None else None

    def get_tensor(self, name):
        img = self._image()
        if name not in img.entries:
            raise SafetensorError("File does not contain tensor %s" % name)
        dt, shape = img.entries[name]
        return to_framework(img.load()[name], dt, shape, self._fw,
                            self._device)

    def get_slice(self, name):
        if name not in self._image().entries:
            raise SafetensorError("File does not contain tensor %s" % name)
        return safe_slice(self, name)

    @property
    def checkpoint(self):
        """pinmem's loaded Checkpoint behind this handle (its regions,
        stats), loading the data if it was not yet."""
        img = self._image()
        img.load()
        return img.checkpoint


def load_bytes(data, fw):
    """safetensors' load(bytes): checked as a file would be, the data
    section copied into a new pinned region (sealed), read-only views of
    it returned (name -> tensor, in file order)."""
    data = memoryview(data).cast("B")
    meta, ents, start = _format.parse_bytes(data)
    size = data.nbytes - start
    dev = core.open()
    try:
        r = dev.alloc(max(size, 1))
    finally:
        dev.close()
    with r:
        if size:
            with r.view(np.uint8, (size,), writable=True) as w:
                w[:] = np.frombuffer(data, np.uint8, size, start)
        r.seal()
        raw = r.view(np.uint8, (max(size, 1),))
    out = {}
    for name, dt, shape, b, e in ents:
        out[name] = to_framework(raw[b:e], dt, shape, fw)
    return out
