# SPDX-License-Identifier: MIT
"""torch tensors over pinmem-cached's views, for
pinmem.safetensors.torch.load_file(path, shared=True): read-only
(ReadOnlyTensor), each file's one copy for the whole host, mapped
through libpin (locked, CUDA-registered) where it takes the view fd."""
import numpy as np

from . import shared as _shared
from ._open import device_of, to_framework
from .. import torch as _pt
from ..core import _mapping_of


class _SharedImage(np.ndarray):
    """The service's file image: an array that carries its _SharedView,
    so that the view is known to pinmem.torch exactly as long as a tensor
    over it lives (its registry holds views weakly)."""


class _SharedView:
    """The service's view mapping as pinmem.torch's read-only guard knows
    mappings: while a tensor over it lives, a torch write into it raises
    ReadOnlyError instead of SIGSEGV."""
    writable = False
    mapped = True

    def __init__(self, image, entry):
        self.addr = image.__array_interface__["data"][0]
        self.length = image.nbytes
        self.region_id = entry


def load_shared(filename, device):
    """name -> ReadOnlyTensor over the shared views, or None: load
    privately."""
    path = str(filename)
    files = _shared.shards(path) if path.endswith(".index.json") else [path]
    dev = device_of(device, "pt")
    out = {}
    for f in files:
        got = _shared.open_image(f)
        if got is None:
            return None
        image = got[0]
        if _mapping_of(image) is None:
            # Mapped without libpin (shared._pinned_image): not
            # registered, but read-only to torch all the same.
            image = image.view(_SharedImage)
            image.shared_view = _SharedView(image, got[1])
            _pt._MAPPINGS[image.shared_view.addr] = image.shared_view
        for name, dt, shape, raw in _shared.tensors(image, got[2],
                                                    got[3]):
            t = to_framework(raw, dt, shape, "pt", name=name).as_subclass(
                _pt.ReadOnlyTensor)
            out[name] = t if dev is None else t.to(dev)
    return out
