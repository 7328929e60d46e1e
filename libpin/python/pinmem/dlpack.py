# SPDX-License-Identifier: MIT
"""DLPack export of arrays over pinned memory, read-only ones included.

    t = torch.from_dlpack(ck["w"])        # a sealed checkpoint tensor
    a = np.from_dlpack(region.view(np.float32, (n,)))

PinnedArray.__dlpack__ hands out a DLManagedTensor (a "dltensor" capsule;
a DLManagedTensorVersioned, "dltensor_versioned", to consumers that ask
with max_version >= (1, 0)) whose manager context holds the array, and so
its view mapping: the mapping lives until the consumer calls the deleter
(or, unconsumed, the capsule is collected). __dlpack_device__ answers
(kDLCPU, 0), or (kDLCUDAHost, 0) when the memory lies in a range
registered with CUDA through pinmem.cuda, so GPU frameworks see pinned
host memory.

Read-only memory. DLPack before 1.0 has no read-only flag, and NumPy 1.24
and torch 1.13 (Debian 12's) speak only that. The policy:
- a read-only array whose view mapping is itself read-only (a sealed
  region's views, every read-only view) is exported: the kernel enforces
  PROT_READ on that mapping (mprotect cannot add write), so a consumer that
  writes gets SIGSEGV at the write and never changes the memory. That is a
  crash, not corruption; consumers that follow the protocol's own rule
  ("the consumer must not write unless it owns the data") never see it.
- versioned consumers (max_version >= 1.0) get the READ_ONLY flag set.
- a read-only array over a *writable* mapping (writeable=False set on a
  writable view) is refused to legacy consumers with BufferError, since
  nothing would stop their writes; versioned consumers get it flagged.
"""
import ctypes
import threading

import numpy as np

from . import _cuda_auto
from ._mappings import _mapping_of

kDLCPU = 1
kDLCUDA = 2
kDLCUDAHost = 3

_INT, _UINT, _FLOAT, _BFLOAT, _COMPLEX, _BOOL = 0, 1, 2, 4, 5, 6
# DLPack 1.1's float8 codes (ml_dtypes' names).
_FLOAT8 = {"float8_e4m3fn": 10, "float8_e4m3fnuz": 11, "float8_e5m2": 12,
           "float8_e5m2fnuz": 13, "float8_e8m0fnu": 14}
FLAG_READ_ONLY = 1 << 0


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice),
                ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", _Deleter)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", _Deleter), ("flags", ctypes.c_uint64),
                ("dl_tensor", DLTensor)]


# Exports not yet released by their consumer: address of the managed
# struct -> (struct, shape/strides arrays, the array that holds the
# mapping). The deleter drops the entry, and with it the mapping.
_LIVE = {}
_LIVE_LOCK = threading.Lock()

# Ranges registered with CUDA by pinmem.cuda: id -> (start, end).
_CUDA_RANGES = {}


def _release(addr):
    with _LIVE_LOCK:
        _LIVE.pop(addr, None)


_DELETER = _Deleter(_release)

# A handle of our own: ctypes.pythonapi's functions are shared, and their
# argtypes are anyone's to change.
_api = ctypes.PyDLL(None)
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                               ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

# Capsule names must outlive the capsules: module constants.
NAME = b"dltensor"
NAME_VERSIONED = b"dltensor_versioned"
USED = b"used_dltensor"
USED_VERSIONED = b"used_dltensor_versioned"


def _capsule_destructor(cap):
    # Called with the capsule at refcount 0 (an address, not an object).
    # Still named "dltensor": never consumed, so the deleter is ours to
    # call; renamed "used_dltensor": the consumer owns it now.
    for name in (NAME, NAME_VERSIONED):
        if _api.PyCapsule_IsValid(cap, name):
            _release(_api.PyCapsule_GetPointer(cap, name))


_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_capsule_destructor)


def _dtype(dt):
    if dt.byteorder == ">":
        raise BufferError("pinmem: big-endian %s has no DLPack form" % dt)
    # ml_dtypes' types by name first: their kind is "V" or "f" depending
    # on the type and the ml_dtypes version.
    if dt.name == "bfloat16" and dt.itemsize == 2:
        return DLDataType(_BFLOAT, 16, 1)
    if dt.name in _FLOAT8 and dt.itemsize == 1:
        return DLDataType(_FLOAT8[dt.name], 8, 1)
    kind = {"i": _INT, "u": _UINT, "f": _FLOAT, "c": _COMPLEX, "b": _BOOL}
    if dt.kind in kind:
        return DLDataType(kind[dt.kind], dt.itemsize * 8, 1)
    raise BufferError("pinmem: %s has no DLPack type" % dt)


def device(a):
    """(device_type, device_id) of an array's memory: kDLCUDAHost when it
    lies in a CUDA-registered range (pinmem.cuda, or registered by
    _cuda_auto), else kDLCPU."""
    lo = a.__array_interface__["data"][0]
    hi = lo + a.nbytes
    for start, end in list(_CUDA_RANGES.values()) + \
            list(_cuda_auto.AUTO.ranges.values()):
        if start <= lo and hi <= end:
            return (kDLCUDAHost, 0)
    return (kDLCPU, 0)


def _mapping_writable(a):
    m = _mapping_of(a)
    if m is not None:
        return m.writable
    return True         # not a view mapping: nothing enforces read-only


def to_dlpack(a, max_version=None, dl_device=None, read_only_map=False):
    """A DLPack capsule over array a's memory (see the module's notes for
    read-only arrays). The capsule's tensor holds a until released.
    dl_device: (kDLCPU, 0) exports registered memory as plain host memory
    (for a consumer without CUDA). read_only_map: the caller vouches that
    a's memory is mapped without PROT_WRITE (an mmap it made read-only),
    which the policy then treats as a read-only view mapping."""
    if not isinstance(a, np.ndarray):
        raise TypeError("pinmem: to_dlpack needs a NumPy array")
    versioned = max_version is not None and tuple(max_version)[0] >= 1
    readonly = not a.flags.writeable
    if readonly and not versioned and not read_only_map and \
            _mapping_writable(a):
        raise BufferError(
            "pinmem: this read-only array lies over writable memory, and "
            "DLPack before 1.0 cannot say read-only: a consumer could write "
            "it. Ask with max_version=(1, 0) (READ_ONLY flag), or export "
            "an array over a read-only view (a sealed region's), where the "
            "kernel refuses writes")
    ndim = a.ndim
    shape = (ctypes.c_int64 * max(ndim, 1))(*a.shape)
    item = a.dtype.itemsize
    if any(s % item for s in a.strides):
        raise BufferError("pinmem: strides %s are not whole elements" %
                          (a.strides,))
    strides = (ctypes.c_int64 * max(ndim, 1))(*[s // item for s in a.strides])
    cls = DLManagedTensorVersioned if versioned else DLManagedTensor
    m = cls()
    t = m.dl_tensor
    t.data = a.__array_interface__["data"][0] if a.size else None
    dev = device(a)
    if dl_device is not None and tuple(dl_device) != dev:
        if tuple(dl_device) != (kDLCPU, 0):
            raise BufferError("pinmem: cannot export host memory to DLPack "
                              "device %s" % (tuple(dl_device),))
        dev = (kDLCPU, 0)       # registered host memory is host memory
    t.device = DLDevice(*dev)
    t.ndim = ndim
    t.dtype = _dtype(a.dtype)
    t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    m.deleter = _DELETER
    if versioned:
        m.version = DLPackVersion(1, 0)
        m.flags = FLAG_READ_ONLY if readonly else 0
    addr = ctypes.addressof(m)
    m.manager_ctx = addr
    with _LIVE_LOCK:
        _LIVE[addr] = (m, shape, strides, a)
    return _api.PyCapsule_New(addr, NAME_VERSIONED if versioned else NAME,
                              ctypes.cast(_DESTRUCTOR, ctypes.c_void_p))


def live_exports():
    """How many exports wait for their consumer's deleter (tests)."""
    with _LIVE_LOCK:
        return len(_LIVE)


def exported_arrays():
    """The arrays of the exports not yet released (their mappings live)."""
    with _LIVE_LOCK:
        return [entry[3] for entry in _LIVE.values()]
