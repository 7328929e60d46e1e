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
import io as _io
import os as _os

from .core import (BusyError, Device, DeviceInfo, Holder, PinError,
                   PinnedArray, PortableBackendWarning, RefRange, Region,
                   RegionInfo, ViewInUseError, open)
from .dtypes import (HAVE_ML_DTYPES, as_format, bfloat16, float8_e4m3fn,
                     float8_e5m2, format_of)
from .safetensors import Checkpoint, load_safetensors, save_safetensors
from ._lib import lib as _libpin

LIBPIN_PATH = _libpin.pinmem_path


def _project_version():
    """The project's version: written into an installed package by
    setup.py, read from the checkout's VERSION when run from there."""
    try:
        from ._version import version
        return version
    except ImportError:
        pass
    here = _os.path.dirname(_os.path.abspath(__file__))
    try:
        with _io.open(_os.path.join(here, "..", "..", "..", "VERSION"),
                      encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return "0+unknown"


__version__ = _project_version()
#: the version of the libpin this binding loaded (LIBPIN_PATH)
LIBPIN_VERSION = _libpin.pin_version().decode()

__all__ = ["open", "Device", "Region", "PinnedArray", "Holder", "RefRange",
           "RegionInfo", "DeviceInfo", "PinError", "BusyError",
           "ViewInUseError", "bfloat16", "float8_e4m3fn", "float8_e5m2",
           "HAVE_ML_DTYPES", "format_of", "as_format", "load_safetensors",
           "save_safetensors", "Checkpoint", "LIBPIN_PATH",
           "LIBPIN_VERSION", "PortableBackendWarning", "__version__"]
