# SPDX-License-Identifier: MIT
"""pinmem: pinned host memory whose sharing and reuse the kernel arbitrates.

    import pinmem
    dev = pinmem.open()                       # /dev/pinmem, else portable
    r = dev.alloc(64 << 20)                   # zeroed, pinned, OPEN
    with r.view(pinmem.bfloat16, (4096, 4096), writable=True) as w:
        w[...] = 0                            # fill while OPEN
    r.seal()                                  # read-only to views now
    a = r.view(pinmem.bfloat16, (4096, 4096)) # its own mapping, counted
    r.donate()                                # BusyError naming a's holder
    del a                                     # unmapped with the last array
    r.donate()                                # succeeds

A ctypes binding over libpin (build/lib/libpin.so.0 of the checkout, or
$PINMEM_LIBPIN, or the installed libpin.so.0). See README.md.
"""
from .core import (BusyError, Device, DeviceInfo, Holder, PinError,
                   PinnedArray, Region, RegionInfo, ViewInUseError, open)
from . import dtypes as _dtypes
from .dtypes import HAVE_ML_DTYPES, as_format, format_of
if HAVE_ML_DTYPES:
    from .dtypes import bfloat16, float8_e4m3fn, float8_e5m2
from .safetensors.native import (Checkpoint, load_safetensors,
                                 save_safetensors)
from .fdpass import recv_fd, send_fd
from ._lib import lib as _libpin

LIBPIN_PATH = _libpin.pinmem_path


def __getattr__(name):
    # bfloat16 and float8 without ml_dtypes: an AttributeError saying why.
    return _dtypes.__getattr__(name)


__all__ = ["open", "Device", "Region", "PinnedArray", "Holder",
           "RegionInfo", "DeviceInfo", "PinError", "BusyError",
           "ViewInUseError", "HAVE_ML_DTYPES", "format_of", "as_format", "load_safetensors",
           "save_safetensors", "Checkpoint", "LIBPIN_PATH", "send_fd",
           "recv_fd"]
if HAVE_ML_DTYPES:
    __all__ += ["bfloat16", "float8_e4m3fn", "float8_e5m2"]
