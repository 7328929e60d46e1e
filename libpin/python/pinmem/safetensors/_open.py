# SPDX-License-Identifier: MIT
"""safe_open: safetensors' lazy file handle, over pinned memory.

Opening reads and checks the header only (the rules and messages of
safetensors 0.7). The data section is read on the first access to data
(get_tensor, or indexing a get_slice), in one pass of libpin's io_uring
reader (O_DIRECT where allowed) into one pinned region per file. NumPy's
arrays are read-only views of it, sealed; torch's tensors are writable,
over the process's own region left open (pinmem.safetensors.torch states
the rule). Either way the region's one view mapping is pinned and
CUDA-registered, and lives as long as any tensor over it.
"""
import json
import os
import warnings
from collections.abc import Mapping

import numpy as np

from .. import _forks, core
from .. import dtypes as _dtypes
from . import _format
from ._format import SafetensorError
from ._slice import numpy_key
from .native import load_error, load_lazily, load_safetensors

# lib.rs Framework::extract: exact, case-sensitive names.
_FRAMEWORKS = {"pt": "pt", "torch": "pt", "pytorch": "pt",
               "np": "np", "numpy": "np"}
_FRAMEWORK_NAMES = {"pt": "pytorch", "np": "numpy"}
_OTHER_FRAMEWORKS = ("tf", "tensorflow", "jax", "flax", "mlx", "paddle")
# lib.rs Device::extract: bare names, and NAME:INDEX for these.
_DEVICES = ("cuda", "musa", "mps", "npu", "xpu", "xla", "mlu", "hpu")


def framework_of(name):
    if not isinstance(name, str):
        raise TypeError("argument 'framework': '%s' object cannot be "
                        "converted to 'PyString'" % type(name).__name__)
    if name in _FRAMEWORKS:
        return _FRAMEWORKS[name]
    if name in _OTHER_FRAMEWORKS:
        raise SafetensorError("framework %s is not supported by pinmem "
                              "(numpy and pytorch are)" % name)
    raise SafetensorError("framework %s is invalid" % name)


def _parse_device(name):
    """A device string as safetensors parses it: its canonical name."""
    if name == "cpu":
        return None
    if name in _DEVICES:
        return name if name == "mps" else name + ":0"
    kind = name.split(":")[0]
    if kind in _DEVICES and name.startswith(kind + ":"):
        tokens = name.split(":")
        if len(tokens) != 2:
            raise SafetensorError("device %s is invalid" % name)
        if not tokens[1].isdigit():
            # Rust's usize::from_str error, raised as ValueError
            raise ValueError("invalid digit found in string" if tokens[1]
                             else "cannot parse integer from empty string")
        index = int(tokens[1])
        if kind == "mps":
            if index:
                raise SafetensorError("device %s is invalid: only mps or "
                                      "mps:0 is supported" % name)
            return "mps"
        return "%s:%d" % (kind, index)
    raise SafetensorError("device %s is invalid" % name)


def device_of(device, fw):
    """None for the CPU (device "cpu" or None), else what torch's .to() is
    given after the load. Other frameworks take the CPU only."""
    if fw == "pt" and type(device).__name__ == "device":
        import torch
        if isinstance(device, torch.device):      # pinmem also takes these
            return None if device.type == "cpu" else device
    if device is None:
        dev = None
    elif isinstance(device, str):
        dev = _parse_device(device)
    elif isinstance(device, int) and device >= 0:
        dev = device                  # an index: torch picks the accelerator
    else:
        raise SafetensorError("device %r is invalid" % (device,))
    if dev is not None and fw != "pt":
        raise SafetensorError("Device %s is not supported for framework %s"
                              % (dev, _FRAMEWORK_NAMES[fw]))
    return dev


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
        self._wholes = {}           # id(region array) -> region_bytes()

    def _index(self):
        with _format.open_file(self.path) as f:
            index = json.load(f)
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

    def load(self, writable=False):
        """The tensors' bytes, pinned and registered (load_safetensors).
        writable=True (torch's private loads): over a writable mapping
        of the process's own region, left open; else read-only views of
        a sealed region (pinmem.torch refuses torch writes into them with
        ReadOnlyError). The first load decides."""
        if self.arrays is None:
            # A device this user may not open: pinmem.PinPermissionError,
            # as from every loader. libpin's failures to load are
            # SafetensorPinError (both types; load_safetensors says).
            dev = core.open()
            try:
                ck = load_safetensors(self.path, dev=dev, writable=writable)
            finally:
                dev.close()
            self.arrays = _RawBytes(ck)
            self.checkpoint = ck
        return self.arrays

    def tensor(self, name, dt, shape, writable):
        """torch's tensor of name (dtype name dt, shape), loading first:
        cut from one uint8 tensor over its file's region where the bytes
        allow (pinmem.torch.over_bytes), else as to_framework makes it."""
        raws = self.load(writable)
        places = getattr(self.checkpoint, "_places", None)
        if places is not None and name in places:
            from .. import torch as pt
            tdt, tshape = torch_dtype(dt, shape, name)
            _, _, raw, offset, _ = places[name]
            whole = self._wholes.get(id(raw))
            if whole is None:
                whole = self._wholes[id(raw)] = pt.region_bytes(raw)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                t = pt.over_bytes(whole, offset, tdt, tshape)
            if t is not None:
                return t
        return to_framework(raws[name], dt, shape, "pt", name=name)


class _RawBytes(Mapping):
    """name -> a loaded tensor's bytes (uint8 PinnedArray), each made when
    first asked for: torch's loads cut their tensors elsewhere."""

    def __init__(self, ck):
        self._ck = ck

    def __getitem__(self, name):
        return self._ck[name].reshape(-1).view(np.uint8)

    def __iter__(self):
        return iter(self._ck)

    def __len__(self):
        return len(self._ck)


def numpy_dtype(name):
    try:
        return _dtypes.from_name(name)
    except KeyError as e:
        raise TypeError("pinmem.safetensors.numpy: %s" % e.args[0]) \
            from None


def torch_dtype(dt, shape, name):
    """(torch dtype, torch shape) of tensor name of file dtype dt and
    shape (pinmem.torch.tensor_dtype): TypeError where this torch lacks
    the dtype, SafetensorError for an F4 shape torch cannot hold."""
    from .. import torch as pt
    try:
        return pt.tensor_dtype(dt, shape, name)
    except ValueError as e:
        raise SafetensorError(str(e)) from None


def to_framework(raw, dt, shape, fw, device=None, name=None):
    """A read-only tensor/array of file dtype dt over raw bytes (those of
    tensor name, which errors name)."""
    if fw == "np":
        return raw.view(numpy_dtype(dt)).reshape(shape)
    from .. import torch as pt
    tdt, shape = torch_dtype(dt, shape, name)
    t = pt.from_array(raw, tdt, shape)
    return t if device is None else t.to(device)


class safe_slice:
    """get_slice's result: the shape and dtype without reading data.
    framework="pt": indexing is torch's over a tensor on the pinned region
    (its results, views where torch gives views, and its errors), as
    safetensors indexes a torch tensor over the file. framework="np":
    safetensors' checks and messages, then NumPy indexing (see _slice);
    the result is C-contiguous: a read-only view of the region when the
    selection is contiguous, else a copy."""

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
        if self._h._fw == "np":
            key = numpy_key(idx, self._shape)
            raw = img.load(self._h._writable)[self._name]
            try:
                part = to_framework(raw, self._dt, self._shape, "np")[key]
            except IndexError as e:     # lists that do not broadcast
                raise SafetensorError("Error during slicing with shape %s: "
                                      "%s" % (list(self._shape), e)) from e
            return part if part.flags.c_contiguous else part.copy()
        raw = img.load(self._h._writable)[self._name]
        part = to_framework(raw, self._dt, self._shape, "pt",
                            name=self._name)[idx]
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
        # torch's tensors are writable, over the process's own region
        # (pinmem.safetensors.torch's rule); load_file(shared=True)'s
        # private fallback turns this off: read-only, as the service's.
        self._writable = self._fw == "pt"

    def _image(self):
        if self._img is None:
            raise SafetensorError("File is closed")
        return self._img

    def __enter__(self):
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
        if self._fw == "pt":
            t = img.tensor(name, dt, shape, self._writable)
            return t if self._device is None else t.to(self._device)
        return to_framework(img.load(self._writable)[name], dt, shape,
                            self._fw, self._device, name=name)

    def get_slice(self, name):
        if name not in self._image().entries:
            raise SafetensorError("File does not contain tensor %s" % name)
        return safe_slice(self, name)

    @property
    def checkpoint(self):
        """pinmem's loaded Checkpoint behind this handle (its regions,
        stats), loading the data if it was not yet."""
        img = self._image()
        img.load(self._writable)
        return img.checkpoint


def load_bytes(data, fw):
    """safetensors' load(bytes): checked as a file would be, the data
    section copied into a new pinned region, views of it returned (name
    -> tensor, in file order): for torch writable (the region left open,
    the process's own), else read-only (the region sealed)."""
    data = memoryview(data).cast("B")
    meta, ents, start = _format.parse_bytes(data)
    size = data.nbytes - start
    try:
        raw = _copy_in(data, start, size, fw)
    except core.PinError as e:
        raise load_error(e) from None
    out = {}
    for name, dt, shape, b, e in ents:
        out[name] = to_framework(raw[b:e], dt, shape, fw, name=name)
    return out


def _copy_in(data, start, size, fw):
    """The data section copied into a new pinned region, and a view of
    it: for torch writable (the region left open, the process's own),
    else read-only (the region sealed)."""
    dev = core.open()
    try:
        r = dev.alloc(max(size, 1))
    finally:
        dev.close()
    with r:
        if size:
            with r.view(np.uint8, (size,), writable=True) as w:
                w[:] = np.frombuffer(data, np.uint8, size, start)
        if fw != "pt":
            r.seal()
        raw = r.view(np.uint8, (max(size, 1),), writable=fw == "pt")
    if fw == "pt":          # torch's writable tensors: copied in a child
        _forks.private_in_child(core._mapping_of(raw))
    return raw


def load_all(filename, fw, device=None, writable=False):
    """{name: get_tensor(name)} of safe_open(filename, fw, device) in file
    order (load_file's result), with libpin's parser as the one header
    check of a load that succeeds: tests/python/test_st_differential.py
    keeps it agreeing with _format's, whose Python pass over a header of
    a million tensors would cost more than the load. _format words a
    refusal, as safe_open would. Sharded checkpoints go through
    safe_open."""
    dev = device_of(device, framework_of(fw))
    path = os.fspath(filename)
    if path.endswith(".index.json"):
        with safe_open(path, framework=fw, device=device) as f:
            f._writable = writable
            return {k: f.get_tensor(k) for k in f.offset_keys()}
    ck = _load_checked(path, writable)
    if fw == "np":
        known, out = set(), {}
        for name, fmt in ck.formats.items():
            if fmt not in known:
                numpy_dtype(fmt)        # TypeError for those NumPy lacks
                known.add(fmt)
            out[name] = ck[name]
        return out
    return _torch_tensors(ck, dev)


def _load_checked(path, writable):
    """load_lazily(path); where it fails, _format's refusal of the
    header first (safe_open's order: the header before the device)."""
    try:
        dev = core.open()
        try:
            return load_lazily(path, dev, writable)
        finally:
            dev.close()
    except (OSError, SafetensorError) as e:
        err = e
    _format.parse_file(path)
    raise err


def _torch_tensors(ck, device):
    """Every tensor of ck as torch's (_Image.tensor's tensors, .to(device)
    where one is given)."""
    with warnings.catch_warnings():
        # torch's warning of read-only memory (pinmem.torch says what a
        # write does), once for every tensor.
        warnings.simplefilter("ignore", UserWarning)
        out = _cut_tensors(ck)
    if device is not None:
        out = {k: t.to(device) for k, t in out.items()}
    return out


def _cut_tensors(ck):
    from .. import torch as pt
    out, kinds, wholes = {}, {}, {}
    for name, (_, _, raw, offset, shape) in ck._places.items():
        fmt = ck.formats[name]
        tdt, tshape = kinds.get(fmt), shape
        if tdt is None or fmt == "F4":
            # torch_dtype's shape differs from the file's for F4 alone.
            tdt, tshape = torch_dtype(fmt, shape, name)
            kinds[fmt] = tdt
        whole = wholes.get(id(raw))
        if whole is None:
            whole = wholes[id(raw)] = pt.region_bytes(raw)
        t = pt.over_bytes(whole, offset, tdt, tshape)
        if t is None:
            t = to_framework(ck[name].reshape(-1).view(np.uint8), fmt, shape,
                             "pt")
        out[name] = t
    return out
