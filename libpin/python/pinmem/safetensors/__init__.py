# SPDX-License-Identifier: MIT
"""safetensors checkpoints in pinned memory.

    from pinmem.safetensors.torch import load_file, save_file   # as safetensors.torch
    from pinmem.safetensors.numpy import load_file, save_file   # as safetensors.numpy
    from pinmem.safetensors import safe_open, SafetensorError

    with safe_open("model.safetensors", framework="pt") as f:
        w = f.get_tensor("w")                # pinned, read-only memory
        part = f.get_slice("w")[:, ::2]

The safetensors-compatible modules take the same calls, defaults and
errors as safetensors 0.7 and write the same bytes; what they return lives
in a sealed pinned region read with libpin's io_uring reader. The native
API (load_safetensors, save_safetensors: 4096-aligned data section,
O_DIRECT, atomic rename; Checkpoint with regions and I/O stats) is here
too.
"""
from ._format import SafetensorError, SafetensorPinError
from ._open import safe_open
from .fill import Place, Placement, fill, fill_view, load_into
from .native import Checkpoint, load_safetensors, save_safetensors

__all__ = ["safe_open", "SafetensorError", "SafetensorPinError",
           "Checkpoint", "load_safetensors",
           "save_safetensors", "load_into", "fill_view", "fill", "Placement",
           "Place"]
