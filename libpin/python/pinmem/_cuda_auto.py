# SPDX-License-Identifier: MIT
"""CUDA registration of the view mappings Python hands to frameworks,
where a CUDA driver is present, so that copies from them to a GPU are
direct (the driver sees page-locked memory, as for cudaHostAlloc) and
DLPack reports them as kDLCUDAHost (JAX's pinned_host).

The first shared view mapping of the process opens libpin's CUDA handle
for GPU 0 (pin_cuda_open: libcuda.so.1, or $PIN_CUDA_LIBRARY). If that
fails (no driver, no GPU) nothing is registered, now or later, and nothing
is said. Otherwise every shared view mapping is registered once it is
mapped (pin_cuda_register_view: in chunks, read-only for a read-only
mapping; a private load's owner mapping, which its tensors use instead
of a view, through pin_cuda_register) and unregistered before it is
unmapped; a registration the
driver refuses is said once (a warning) and the mapping stays usable,
unregistered. That covers every loader's tensors and arrays: torch's
private loads (writable, over the process's own open region), shared
and NumPy/JAX loads (read-only), pinmem.torch.empty/zeros and their
pool's slabs, and pinmem-cached's views (imported through libpin).
Copy-on-write (private) mappings, which only Region.view(...,
copy_on_write=True) and load_safetensors(..., copy_on_write=True) make,
are never registered: the driver would pin the pages the mapping reads
now, and a write would then give the process a private copy the GPU
never sees.
PINMEM_CUDA_REGISTER=0 turns all of it off. At exit, what is still
registered is unregistered and the handle closed.
"""
import atexit
import ctypes
import os
import threading

from . import _lib
from ._errors import warn_once
from ._lib import lib


class _CudaOpts(ctypes.Structure):
    """struct pin_cuda_opts"""
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("why", ctypes.c_void_p),
        ("why_len", ctypes.c_size_t),
    ]


_P = ctypes.c_void_p
_lib._OPTIONAL.update({
    "pin_cuda_open": (ctypes.c_int, [ctypes.POINTER(_P), ctypes.c_int, _P]),
    "pin_cuda_close": (None, [_P]),
    "pin_cuda_error": (ctypes.c_char_p, [_P]),
    "pin_cuda_register": (ctypes.c_int, [_P, _P, ctypes.c_uint]),
    "pin_cuda_numa_node": (ctypes.c_int, [_P]),
    "pin_cuda_unregister": (ctypes.c_int, [_P, _P]),
    "pin_cuda_register_view": (ctypes.c_int, [_P, _P, _P, ctypes.c_uint]),
    "pin_cuda_unregister_view": (ctypes.c_int, [_P, _P, _P]),
})
for _n in [n for n in _lib._OPTIONAL if n.startswith("pin_cuda_")]:
    if _lib.has(_n):
        _f = getattr(lib, _n)
        _f.restype, _f.argtypes = _lib._OPTIONAL[_n]


class CudaRegistrationWarning(UserWarning):
    """The driver refused to register a view mapping (said once)."""


class _Auto:
    """The process's handle, opened on first use; ranges it registered."""

    def __init__(self):
        self.lock = threading.RLock()
        self.tried = False
        self.ptr = None
        #: view mapping address -> (start, end), registered
        self.ranges = {}
        #: the CUDA device ordinal registrations are made for
        self.device = 0

    def _open(self):
        self.tried = True
        if os.environ.get("PINMEM_CUDA_REGISTER") == "0" or \
                not _lib.has("pin_cuda_register_view"):
            return
        p = ctypes.c_void_p()
        opts = _lib.init(_CudaOpts)
        if lib.pin_cuda_open(ctypes.byref(p), 0, ctypes.byref(opts)) == 0:
            self.ptr = p.value
            atexit.register(self.close)

    def register(self, view, addr, length, region=None):
        """Register the view mapping at addr, or with region (and view
        None) the region's owner mapping at addr."""
        with self.lock:
            if not self.tried:
                self._open()
            if self.ptr is None:
                return
            if region is None:
                ret = lib.pin_cuda_register_view(self.ptr, view, addr, 0)
            else:
                ret = lib.pin_cuda_register(self.ptr, region, 0)
            if ret < 0:
                warn_once(CudaRegistrationWarning,
                          "pinmem: CUDA did not register a view mapping "
                          "(%s); copies from it to a GPU are staged as "
                          "from pageable memory" %
                          _lib.text(lib.pin_cuda_error(self.ptr)))
                return
            self.ranges[addr] = (addr, addr + length)

    def active(self):
        """Whether a driver is open and registering."""
        with self.lock:
            return self.ptr is not None

    def covers(self, lo, hi):
        """Whether [lo, hi) lies in one live registration."""
        with self.lock:
            return any(a <= lo and hi <= b for a, b in self.ranges.values())

    def unregister(self, view, addr, region=None):
        with self.lock:
            if self.ranges.pop(addr, None) is None or not self.ptr:
                return
            if region is None:
                lib.pin_cuda_unregister_view(self.ptr, view, addr)
            else:
                lib.pin_cuda_unregister(self.ptr, region)

    def close(self):
        with self.lock:
            if self.ptr:
                lib.pin_cuda_close(self.ptr)    # unregisters what is left
            self.ptr = None
            self.ranges.clear()


AUTO = _Auto()
