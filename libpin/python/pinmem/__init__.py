# SPDX-License-Identifier: MIT
"""pinmem: pinned host memory whose sharing and reuse the kernel arbitrates.

Checkpoints, as safetensors users load them (tensors in pinned memory):

    from pinmem.safetensors.torch import load_file, save_file
    sd = load_file("model.safetensors")       # sealed region, read-only
    from pinmem.safetensors import safe_open
    with safe_open("model.safetensors", framework="pt") as f:
        w = f.get_slice("w")[:, ::2]

PyTorch tensors over regions (pinmem.torch), mapping owned by the storage:

    import torch, pinmem, pinmem.torch as pt
    r = pinmem.open().alloc(64 << 20)         # /dev/pinmem, else portable
    w = pt.view(r, torch.bfloat16, (4096, 4096), writable=True)
    w.fill_(1.0); del w                       # fill while OPEN
    r.seal()                                  # read-only to views now
    t = pt.view(r, torch.bfloat16, (4096, 4096))
    r.donate()                                # BusyError naming t's holder
    del t                                     # unmapped with its storage
    r.donate()                                # succeeds

NumPy views (PinnedArray), the same way:

    import numpy as np
    a = r.view(np.float16, (4096, 4096))      # its own mapping, counted
    with r.view(np.uint8, (4096,)) as b:      # ends with the block
        ...

A ctypes binding over libpin ($PINMEM_LIBPIN, or build/lib/libpin.so.1 of
the checkout, or the installed libpin.so.1, through the dynamic loader or
in /usr/local/lib and /usr/lib). See README.md.
"""
import io as _io
import os as _os

from .core import (BusyError, Device, DeviceInfo, Holder, PinError,
                   PinPermissionError, PinnedArray, PortableBackendWarning,
                   ReadOnlyError,
                   RefRange, Region, RegionInfo, ViewInUseError, open,
                   pci_numa_node)
# core's parts are modules of their own but not names of the package
# (pinmem.core re-exports what they define): importing core bound them.
from . import _arrays, _errors, _mappings, _records
del _arrays, _errors, _mappings, _records
from . import dtypes as _dtypes
from .dtypes import HAVE_ML_DTYPES, as_format, format_of
if HAVE_ML_DTYPES:
    from .dtypes import bfloat16, float8_e4m3fn, float8_e5m2
from .safetensors.native import (Checkpoint, load_safetensors,
                                 save_safetensors)
from .fdpass import recv_fd, send_fd
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

def __getattr__(name):
    # bfloat16 and float8 without ml_dtypes: an AttributeError saying why.
    return _dtypes.__getattr__(name)


__all__ = ["open", "Device", "Region", "PinnedArray", "Holder", "RefRange",
           "RegionInfo", "DeviceInfo", "PinError", "BusyError",
           "PinPermissionError",
           "ViewInUseError", "ReadOnlyError", "HAVE_ML_DTYPES", "format_of",
           "as_format",
           "load_safetensors", "save_safetensors", "Checkpoint",
           "LIBPIN_PATH", "LIBPIN_VERSION", "PortableBackendWarning",
           "send_fd", "recv_fd", "pci_numa_node", "__version__"]
if HAVE_ML_DTYPES:
    __all__ += ["bfloat16", "float8_e4m3fn", "float8_e5m2"]
