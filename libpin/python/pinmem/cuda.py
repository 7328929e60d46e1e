# SPDX-License-Identifier: MIT
"""CUDA, only where a driver exists: libpin's registration of a region's
owner mapping (cuMemHostRegister, pin_cuda_*), and a device buffer to copy
from (the driver API through ctypes, for the demo's device-to-host copy).

Where no driver can be loaded, Cuda() raises PinError ENOENT with
libpin's words (which name the library it tried)."""
import ctypes
import weakref

from . import _lib, dlpack
from ._lib import lib
from ._cuda_auto import _CudaOpts
from .core import PinError, _check


def _close_cuda(ptr, registered, key):
    """Unregister what is left and release the context, then let go of
    the regions (their handles may be freed only after unregistering)."""
    lib.pin_cuda_close(ptr)
    for r in registered:
        dlpack._CUDA_RANGES.pop((key, r.id), None)
    registered.clear()


class Cuda:
    """libpin's CUDA handle for one device (its primary context). close()
    ends it; so does collecting it (not at interpreter exit, where the
    process's end releases the driver anyway)."""

    def __init__(self, device=0):
        if not _lib.has("pin_cuda_open"):
            raise PinError(38, "this libpin has no CUDA support")
        p = ctypes.c_void_p()
        buf = ctypes.create_string_buffer(512)
        opts = _lib.why_of(_lib.init(_CudaOpts), buf)
        ret = lib.pin_cuda_open(ctypes.byref(p), device, ctypes.byref(opts))
        if ret < 0:
            raise PinError(-ret, _lib.text(buf.value) or "pin_cuda_open")
        self.ptr = p.value
        self.device = device
        self._registered = []
        self._fin = weakref.finalize(self, _close_cuda, self.ptr,
                                     self._registered, id(self))
        self._fin.atexit = False

    def numa_node(self):
        """The NUMA node of this GPU (-1: the platform names none), for
        Device.alloc(..., node=cuda.numa_node())."""
        ret = lib.pin_cuda_numa_node(self.ptr)
        if ret >= -1:
            return ret
        return _check(ret, lambda: lib.pin_cuda_error(self.ptr),
                      "cuda numa node")

    def register(self, region):
        """cuMemHostRegister the region's owner mapping."""
        _check(lib.pin_cuda_register(self.ptr, region._ptr(), 0),
               lambda: lib.pin_cuda_error(self.ptr), "cuda register")
        self._registered.append(region)
        # DLPack reports arrays in this range as kDLCUDAHost.
        addr = ctypes.c_void_p()
        if lib.pin_region_map(region._ptr(), ctypes.byref(addr)) == 0:
            dlpack._CUDA_RANGES[(id(self), region.id)] = \
                (addr.value, addr.value + region.size)

    def unregister(self, region):
        _check(lib.pin_cuda_unregister(self.ptr, region._ptr()),
               lambda: lib.pin_cuda_error(self.ptr), "cuda unregister")
        self._registered.remove(region)
        dlpack._CUDA_RANGES.pop((id(self), region.id), None)

    def close(self):
        if self.ptr:
            self._fin()                     # unregisters what is left
            self.ptr = None


class DeviceBuffer:
    """nbytes of device memory in the primary context of a device, through
    the driver API: fill it from host memory once, copy it out to host
    memory (a registered pinned region) as often as wanted. Untested here:
    the development machines have no GPU."""

    def __init__(self, nbytes, device=0):
        try:
            cu = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise PinError(2, "libcuda.so.1: %s" % e) from None
        self.cu = cu
        self.nbytes = nbytes
        self.dptr = None
        dev = ctypes.c_int()
        ctx = ctypes.c_void_p()
        self._ok(cu.cuInit(0), "cuInit")
        self._ok(cu.cuDeviceGet(ctypes.byref(dev), device), "cuDeviceGet")
        self._ok(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev),
                 "cuDevicePrimaryCtxRetain")
        self.dev, self.ctx = dev, ctx
        dptr = ctypes.c_uint64()
        try:
            self._in_ctx(cu.cuMemAlloc_v2, ctypes.byref(dptr),
                         ctypes.c_size_t(nbytes), what="cuMemAlloc")
        except PinError:
            self._release_ctx()
            raise
        self.dptr = dptr

    def _release_ctx(self):
        rel = getattr(self.cu, "cuDevicePrimaryCtxRelease_v2", None) or \
            self.cu.cuDevicePrimaryCtxRelease
        rel(self.dev)

    @staticmethod
    def _ok(res, what):
        if res != 0:
            raise PinError(5, "%s failed: CUresult %d" % (what, res))

    def _in_ctx(self, fn, *args, what=""):
        self._ok(self.cu.cuCtxPushCurrent_v2(self.ctx), "cuCtxPushCurrent")
        try:
            self._ok(fn(*args), what)
        finally:
            self.cu.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))

    def upload(self, host_addr):
        self._in_ctx(self.cu.cuMemcpyHtoD_v2, self.dptr,
                     ctypes.c_void_p(host_addr), ctypes.c_size_t(self.nbytes),
                     what="cuMemcpyHtoD")

    def download(self, host_addr):
        """A synchronous device-to-host copy of the whole buffer."""
        self._in_ctx(self.cu.cuMemcpyDtoH_v2, ctypes.c_void_p(host_addr),
                     self.dptr, ctypes.c_size_t(self.nbytes),
                     what="cuMemcpyDtoH")

    def close(self):
        if self.dptr is not None:
            try:
                self._in_ctx(self.cu.cuMemFree_v2, self.dptr,
                             what="cuMemFree")
            finally:
                self.dptr = None
                self._release_ctx()
