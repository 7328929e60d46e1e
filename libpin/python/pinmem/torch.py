# SPDX-License-Identifier: MIT
"""PyTorch tensors over pinned regions (importable only where torch is).

    import torch, pinmem, pinmem.torch as pt
    x = pt.empty((4096, 4096), torch.bfloat16)     # pin_memory=True, in a region
    r = pinmem.open().alloc(64 << 20)
    w = pt.view(r, torch.bfloat16, (4096, 4096), writable=True)
    w.fill_(1.0); del w                             # unmapped with its last tensor
    r.seal()
    t = pt.view(r, torch.bfloat16, (4096, 4096))   # read-only, kernel-counted
    row = t[7]                                      # shares t's storage
    del t                                           # still mapped: row holds it
    r.donate()                                      # BusyError names the holder
    del row                                         # unmapped now
    r.donate()

Lifetime: a tensor made here is backed by one view mapping, owned by its
storage. Every tensor that shares that storage (slices, .view(), reshape,
as_strided, .detach(), torch.from_dlpack of it, .numpy()) keeps the mapping
alive; it is unmapped when the storage is freed, i.e. with the last of them.
Nothing caches it. ``with pt.scoped_view(...) as t:`` ends it at the end
of the block (ViewInUseError if something else still uses it).

Read-only tensors: torch has none of its own. A tensor over a sealed
region (or a read-only view) lies in a PROT_READ mapping that the kernel
enforces, so a write would kill the process with SIGSEGV. Such tensors are
ReadOnlyTensor (a torch.Tensor subclass; so are the tensors derived from
them that share their memory: slices, views, .data), which refuses every
torch write into that memory (in-place methods, t[0] = 1, t += 1, copy_
into it, out=) with pinmem.ReadOnlyError before it happens, and whose
.numpy() is read-only. Reading, and every operation that makes a new
tensor, is unchanged (results are plain tensors). Not covered: raw
pointers (ctypes, C extensions), the storage object, and consumers of a
DLPack export that ignore its read-only contract. Use tensors of a view
made with writable=True (region OPEN), or a copy (t.clone()), to write.

dtypes are exact: torch.bfloat16, float16, float32, float64, complex64,
bool, uint8, int8/16/32/64 (and, where this torch has them, uint16/32/64,
the float8s and float4_e2m1fn_x2: SINCE) view the region's bytes as they
are.
"""
import collections
import math
import sys
import warnings
import weakref

import numpy as np
import torch

from . import _cuda_auto, _pool, core
from .core import ViewInUseError

__all__ = ["view", "empty", "zeros", "from_array", "scoped_view",
           "ReadOnlyTensor", "pool_regions", "is_pinned", "pin_state",
           "PinState",
           "mapping_range",
           "dtype_name", "dtype_from_name", "tensor_dtype", "file_shape",
           "element_size"]

# torch dtype -> safetensors name. Optional dtypes only where torch has them.
_NAMES = {torch.bool: "BOOL", torch.uint8: "U8", torch.int8: "I8",
          torch.int16: "I16", torch.float16: "F16", torch.bfloat16: "BF16",
          torch.int32: "I32", torch.float32: "F32", torch.float64: "F64",
          torch.int64: "I64", torch.complex64: "C64"}
# safetensors name -> (torch's name, the first torch release that has it).
SINCE = {"F8_E4M3": ("float8_e4m3fn", "2.1"),
         "F8_E5M2": ("float8_e5m2", "2.1"),
         "F8_E4M3FNUZ": ("float8_e4m3fnuz", "2.2"),
         "F8_E5M2FNUZ": ("float8_e5m2fnuz", "2.2"),
         "U16": ("uint16", "2.3"), "U32": ("uint32", "2.3"),
         "U64": ("uint64", "2.3"),
         "F8_E8M0": ("float8_e8m0fnu", "2.7"),
         "F4": ("float4_e2m1fn_x2", "2.8")}
for _name, (_attr, _) in SINCE.items():
    if hasattr(torch, _attr):
        _NAMES[getattr(torch, _attr)] = _name
_BY_NAME = {v: k for k, v in _NAMES.items()}

# Integer storage NumPy and torch.from_numpy share, per element size.
_CARRIER = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}


# dtype -> element size: asked of torch once per dtype, not per tensor.
_SIZES = {}


def element_size(dtype):
    size = _SIZES.get(dtype)
    if size is None:
        size = _SIZES[dtype] = torch.empty((), dtype=dtype).element_size()
    return size


def dtype_name(dtype):
    """The safetensors name of a torch dtype ('BF16'); ValueError if none."""
    try:
        return _NAMES[dtype]
    except KeyError:
        raise ValueError("pinmem: %s has no safetensors name" % dtype) \
            from None


def _lacks(name):
    """Why this torch has no dtype for safetensors format name."""
    if name in SINCE:
        return "torch.%s, which torch %s lacks (torch %s and later have " \
            "it)" % (SINCE[name][0], torch.__version__, SINCE[name][1])
    return "no torch dtype (torch %s; no torch release has one)" % \
        torch.__version__


def dtype_from_name(name):
    """The torch dtype of a safetensors name; KeyError if this torch has
    none (F6 in every torch; F8, U16/U32/U64, F8_E8M0 and F4 before
    torch 2.1, 2.3, 2.7 and 2.8: SINCE)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError("pinmem: safetensors dtype %s needs %s"
                       % (name, _lacks(name))) from None


def tensor_dtype(fmt, shape, tensor):
    """(torch dtype, torch shape) of file tensor `tensor` of safetensors
    format fmt and shape. F4 packs two elements a byte, and torch's
    float4_e2m1fn_x2 counts those bytes: its last dimension is half the
    file's (safetensors.torch's rule: an odd one is a ValueError).
    TypeError, naming the tensor, where this torch has no such dtype."""
    dt = _BY_NAME.get(fmt)
    if dt is None:
        raise TypeError("pinmem: tensor %r is %s, which needs %s" %
                        (tensor, fmt, _lacks(fmt)))
    shape = tuple(int(s) for s in shape)
    if fmt == "F4":
        if not shape or shape[-1] % 2:
            # safetensors.torch's words (a SafetensorError there).
            raise ValueError("f4_x2 dtype requires that the last dim be "
                             "divisible by 2 in torch: got %s" % list(shape))
        shape = shape[:-1] + (shape[-1] // 2,)
    return dt, shape


def file_shape(t):
    """The safetensors shape of torch tensor t: a float4_e2m1fn_x2 one
    counts F4 elements, two a byte (its last dimension doubled; a 0-d one
    stays 0-d: one F4 element, which no file can hold)."""
    shape = tuple(t.shape)
    if shape and _NAMES.get(t.dtype) == "F4":
        return shape[:-1] + (shape[-1] * 2,)
    return shape


def from_array(a, dtype, shape=None):
    """A tensor of dtype (and shape; default a's element count) over the
    bytes of NumPy array a (C-contiguous), sharing its memory: the tensor's
    storage holds a, so a PinnedArray's mapping lives as long as the
    tensor and every tensor sharing its storage."""
    if not a.flags.c_contiguous:
        raise ValueError("pinmem: from_array needs C-contiguous memory")
    size = element_size(dtype)
    if a.nbytes % size:
        raise ValueError("pinmem: %d bytes are not whole %s elements" %
                         (a.nbytes, dtype))
    if shape is None:
        shape = (a.nbytes // size,)
    shape = tuple(int(s) for s in shape)
    if math.prod(shape) * size != a.nbytes:
        raise ValueError("pinmem: shape %s of %s is not %d bytes" %
                         (shape, dtype, a.nbytes))
    m = core._mapping_of(a)
    if m is not None:
        _MAPPINGS[m.addr] = m
    carrier = a.reshape(-1).view(np.uint8).view(_CARRIER[size])
    with warnings.catch_warnings():
        # Read-only memory: see the module's docstring for what a write does.
        warnings.simplefilter("ignore", UserWarning)
        t = torch.from_numpy(carrier)
    v = t.view(dtype).view(shape)
    # A tensor of its own over the storage, not a view of a base tensor
    # that would outlive t.set_() (scoped_view) through ._base.
    out = torch.empty(0, dtype=dtype)
    out.set_(v)
    if m is not None and not m.writable:
        out = out.as_subclass(ReadOnlyTensor)
    return out


def region_bytes(a):
    """What over_bytes cuts tensors from: a, a C-contiguous array over a
    view mapping (a loaded file's region), made known to pinmem.torch, and
    whether the mapping is writable. Each tensor cut holds a, so the
    mapping lives as long as any of them."""
    m = core._mapping_of(a)
    if m is not None:
        _MAPPINGS[m.addr] = m
    return a.reshape(-1).view(np.uint8), m is None or m.writable


def over_bytes(whole, offset, dtype, shape):
    """The tensor of dtype and shape at byte offset of whole (region_bytes'
    pair): what from_array gives for those bytes (a storage of its own
    over exactly them, holding the region's array, no ._base), in one
    torch call (torch.frombuffer) and no NumPy array of its own; None
    where the bytes are none or not at a multiple of the element size
    (from_array handles those). Called with torch's UserWarning ignored
    where the mapping is read-only."""
    a, writable = whole
    size = element_size(dtype)
    count = math.prod(shape)
    if not count or offset % size or offset + count * size > a.nbytes:
        return None
    # torch warns of read-only memory (the module's docstring says what a
    # write does): the caller, once for all of a file's tensors, has
    # UserWarning ignored.
    out = torch.frombuffer(a, dtype=dtype, count=count, offset=offset)
    if shape != (count,):
        out.resize_(shape)      # its own bytes: no copy, no view
    return out if writable else out.as_subclass(ReadOnlyTensor)


# In-place operators that do not write the tensor's memory.
_NOT_WRITES = frozenset(("requires_grad_", "set_", "share_memory_",
                         "detach_", "retain_grad", "resize_"))
_INPLACE_DUNDERS = frozenset(
    "__i%s__" % op for op in ("add", "sub", "mul", "matmul", "truediv",
                              "floordiv", "mod", "pow", "and", "or", "xor",
                              "lshift", "rshift", "div"))


def _read_only_mapping(t):
    """The read-only view mapping tensor t's memory lies in, or None."""
    if not isinstance(t, torch.Tensor):
        return None
    with torch._C.DisableTorchFunction():
        if t.device.type != "cpu":
            return None
        ptr = t.data_ptr()
    if not ptr:
        return None
    for m in list(_MAPPINGS.values()):
        if not m.writable and m.addr <= ptr < m.addr + m.length and \
                m.mapped:
            return m
    return None


def _targets(name, args, kwargs):
    """The tensors an operation named name would write."""
    out = []
    if name in ("__setitem__", "__dlpack__") or name in _INPLACE_DUNDERS or (
            name.endswith("_") and not name.startswith("__") and
            name not in _NOT_WRITES):
        if args:
            first = args[0]
            out += list(first) if isinstance(first, (list, tuple)) \
                else [first]
    o = (kwargs or {}).get("out")
    if o is not None:
        out += list(o) if isinstance(o, (list, tuple)) else [o]
    return out


def _guard(x):
    """Results that share read-only memory stay ReadOnlyTensor; the rest
    are plain tensors."""
    if isinstance(x, torch.Tensor):
        ro = _read_only_mapping(x) is not None
        if ro and type(x) is not ReadOnlyTensor:
            return x.as_subclass(ReadOnlyTensor)
        if not ro and type(x) is ReadOnlyTensor:
            return x.as_subclass(torch.Tensor)
        return x
    if isinstance(x, (list, tuple)) and any(isinstance(y, torch.Tensor)
                                            for y in x):
        return type(x)(_guard(y) for y in x) if type(x) in (list, tuple) \
            else x
    return x


class ReadOnlyTensor(torch.Tensor):
    """A tensor over read-only pinned memory: torch writes into that
    memory raise pinmem.ReadOnlyError instead of faulting (see the
    module's notes)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        for t in _targets(name, args, kwargs):
            m = _read_only_mapping(t)
            if m is not None:
                raise core.ReadOnlyError(
                    "pinmem: %s would %s a tensor over a read-only view "
                    "of region %d (0x%x-0x%x), which the kernel answers "
                    "with SIGSEGV: it is shared, read-only pinned memory "
                    "(a sealed region's, or pinmem-cached's one copy; "
                    "load_file(..., shared=True) gives such tensors "
                    "whoever serves the file). Copy it first (t.clone()), "
                    "or load privately (shared=False: writable)" %
                    (name, "export (DLPack has no read-only mark; a "
                     "consumer could write)" if name == "__dlpack__"
                     else "write", m.region_id, m.addr,
                     m.addr + m.length))
        with torch._C.DisableTorchFunction():
            ret = func(*args, **(kwargs or {}))
        if name == "numpy" and isinstance(ret, np.ndarray) and args and \
                _read_only_mapping(args[0]) is not None:
            ret.flags.writeable = False
            return ret
        return _guard(ret)


def view(region, dtype, shape, offset=0, writable=False):
    """A tensor over bytes [offset, offset + nbytes) of region, backed by
    its own view mapping (counted by the kernel), which lives as long as
    this tensor and every tensor sharing its storage. writable=True needs
    the region OPEN; otherwise the memory is read-only (a write faults)."""
    shape = core._shape_tuple(shape)
    nbytes = math.prod(shape) * element_size(dtype)
    raw = region.view(np.uint8, (nbytes,), offset=offset, writable=writable)
    return from_array(raw, dtype, shape)


def empty(shape, dtype=torch.float32, dev=None):
    """A new writable tensor in pinned memory (the pin_memory=True
    analogue), zero-filled, so this is zeros() too. dev: a pinmem Device
    (default: open one when memory is needed). Up to 1 MiB the tensor is
    a block of a pooled region that other small tensors share (pinmem's
    _pool: 1,000 tensors of 4-64 KiB take a few regions, not 1,000);
    larger ones get a region of their own. Either way the memory is
    freed with the last tensor over it (for a pooled region: over any of
    its blocks). No region handle is kept: such a tensor is pinned
    memory to compute in, not a region to donate (use view() of a region
    you own for that; the kernel counts the pool's one view mapping per
    region, and holders() names it)."""
    shape = core._shape_tuple(shape)
    nbytes = max(math.prod(shape) * element_size(dtype), 1)
    if nbytes <= _pool.MAX:
        pool = _POOL if dev is None else _pool_of(dev)
        return from_array(pool.take(nbytes, lambda size: _alloc(dev, size)),
                          dtype, shape)
    r = _alloc(dev, nbytes)
    try:
        return view(r, dtype, shape, writable=True)
    finally:
        r.close()           # the view mapping keeps the memory


def _alloc(dev, nbytes):
    """A new region of dev, or of a device opened for the call."""
    if dev is not None:
        return dev.alloc(nbytes)
    with core.open() as d:
        return d.alloc(nbytes)


# The pool of small tensors per Device; one for the devices empty() opens.
_POOLS = weakref.WeakKeyDictionary()
_POOL = _pool.Pool()


def _pool_of(dev):
    return _POOLS.setdefault(dev, _pool.Pool())


def pool_regions(dev=None):
    """The ids of the live regions that pool small tensors for dev (None:
    for the devices empty() opened itself)."""
    return (_POOL if dev is None else _pool_of(dev)).regions()


def zeros(shape, dtype=torch.float32, dev=None):
    """As empty(): a fresh region is zero-filled by the kernel (device) or
    by memfd (portable), and the pool zeroes a block it hands out again."""
    return empty(shape, dtype, dev)


def _views_hold_base():
    """Whether this torch's views hold their base's Python object (torch
    2.x: one reference while any C++ owner, such as a view, lives)."""
    t = torch.zeros(2)
    n = sys.getrefcount(t)
    v = t[1:]
    held = sys.getrefcount(t) > n and hasattr(t, "_use_count")
    del v
    return held


_VIEWS_HOLD_BASE = []


def _held_for_views(t):
    """The references to t's Python object that its C++ owners hold: 1
    where this torch keeps one for them and they exist, else 0."""
    if not _VIEWS_HOLD_BASE:
        _VIEWS_HOLD_BASE.append(_views_hold_base())
    return int(_VIEWS_HOLD_BASE[0] and t._use_count() > 1)


def _mapping_alive(ref):
    return ref() is not None and ref().mapped


class scoped_view:
    """``with pinmem.torch.scoped_view(region, dtype, shape, ...) as t:``
    -- a tensor whose mapping ends with the block. At the end, t (the name
    bound by ``as``) is emptied in place (t.set_(): a 0-element tensor) and
    the mapping is unmapped. If another name refers to t, nothing is
    emptied and ViewInUseError is raised; if other tensors share t's
    storage (a slice, a view that escaped the block), t is emptied, the
    mapping stays valid for them, and ViewInUseError says so -- it is
    unmapped when the last of them is gone."""

    def __init__(self, region, dtype, shape, offset=0, writable=False):
        self._t = view(region, dtype, shape, offset, writable)
        self._map = weakref.ref(_mapping_of_tensor(self._t))
        self.region_id = region.id

    def __enter__(self):
        return self._t

    def __exit__(self, et, ev, tb):
        t = self._t
        # self._t, the local name, getrefcount's argument, the 'as' name;
        # and, in a torch that keeps a tensor's Python object alive for
        # its C++ owners (a view's base), one held for those.
        extra = sys.getrefcount(t) - 4 - _held_for_views(t)
        if extra > 0:
            if et is None:
                raise ViewInUseError(
                    "pinmem: tensor over region %d is still referred to at "
                    "the end of its block by %d other name(s) or "
                    "container(s); it stays mapped until they are gone" %
                    (self.region_id, extra))
            return False
        t.set_()
        del t
        self._t = None
        if _mapping_alive(self._map) and et is None:
            m = self._map()
            raise ViewInUseError(
                "pinmem: view of region %d (0x%x-0x%x) is still used at the "
                "end of its block by tensors sharing its storage (a slice or "
                "view that escaped); it stays mapped until they are gone" %
                (self.region_id, m.addr, m.addr + m.length))
        return False


# Every live view mapping behind a tensor of this module, by address: the
# tensor itself cannot point back to it (its storage holds it through C).
_MAPPINGS = weakref.WeakValueDictionary()


def _mapping_of_tensor(t):
    """The view mapping t's memory lies in, or None."""
    ptr = t.data_ptr()
    for m in list(_MAPPINGS.values()):
        if m.addr <= ptr < m.addr + m.length and m.mapped:
            return m
    return None


def mapping_range(t):
    """(start, end) of the view mapping a tensor of this module reads, or
    None (not such a tensor, or unmapped)."""
    m = _mapping_of_tensor(t)
    return (m.addr, m.addr + m.length) if m is not None else None


PinState = collections.namedtuple("PinState",
                                  "locked registered device backend")
PinState.__doc__ = """What libpin knows of the memory under a tensor:
locked (page-locked: the module's pinned pages, or an mlocked portable
mapping), registered (CUDA-registered through pinmem for the whole range
the tensor covers), device (the CUDA device ordinal of that registration,
else None), backend ("device", "portable"; None for a mapping made
without libpin)."""


def pin_state(t):
    """PinState of tensor t's memory, from what pinmem and libpin know
    (not from CUDA: Debian's CPU torch cannot ask it), or None where t
    is not over memory of this module (a plain tensor, a copy)."""
    m = _mapping_of_tensor(t)
    if m is None:
        return None
    lo = t.data_ptr()
    hi = lo + max(t.numel() * t.element_size(), 1)
    reg = _cuda_auto.AUTO.covers(lo, hi)
    locked = bool(getattr(m, "locked", False))
    backend = getattr(m, "backend", None)
    return PinState(locked, reg, _cuda_auto.AUTO.device if reg else None,
                    backend)


def is_pinned(t):
    """Whether t's memory is what torch's is_pinned() calls pinned, as
    libpin knows it: page-locked and, where pinmem opened a CUDA driver,
    registered with it for the whole range t covers."""
    st = pin_state(t)
    if st is None or not st.locked:
        return False
    return st.registered or not _cuda_auto.AUTO.active()
