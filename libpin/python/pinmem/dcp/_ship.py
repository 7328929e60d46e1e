# SPDX-License-Identifier: MIT
"""Staged tensors that travel to DCP's checkpoint process as the staging
region's fd, not as a copy.

DCP's process-based async_save sends the staged dict down a
multiprocessing pipe, pickled by multiprocessing's ForkingPickler, into
which torch.multiprocessing registers its reduction for torch.Tensor and
Parameter: it moves each CPU storage into a new shared-memory segment (a
copy of every staged byte) and passes that. The pickler looks reductions
up by exact type, so a tensor subclass falls through to its own
__reduce_ex__: ShippedTensor's names the region (one RegionFd per region
and pickle: pickle's memo sends it once) and where the tensor lies in it.
The checkpoint process imports the region from the fd (sent as
multiprocessing's DupFd, the way torch sends its own segments' fds), maps
one read-only view of it and rebuilds plain tensors over that view: its
writer reads the staged pages themselves, and on the device backend the
kernel counts its view, so the next save that reuses the region waits for
it (Region.donate).
"""
import os
import warnings
import weakref
from multiprocessing import reduction

import numpy as np
import torch

from .. import core


class RegionFd:
    """A staging region as pickled for another process: a duplicate of
    its fd, the backend to import it with, the bytes to map. Owning the
    duplicate (closed when this is collected) lets the stager close the
    region before DCP pickles the staged dict (PinStager.close() right
    after async_save returns)."""

    def __init__(self, region, nbytes):
        self.fd = os.dup(region.fd())
        self.backend = region.backend
        self.nbytes = nbytes
        weakref.finalize(self, os.close, self.fd)

    def __reduce__(self):
        # DupFd duplicates the fd again, for the other process to take
        # when it unpickles.
        return (_map_region, (reduction.DupFd(self.fd), self.backend,
                              self.nbytes))


class ShippedTensor(torch.Tensor):
    """A staged tensor, in the process that staged it: a plain tensor
    over the region's read-only view there, which pickles as (RegionFd,
    offset, dtype, shape). Operations on it give plain tensors."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __reduce_ex__(self, protocol):
        return (_tensor_over, (self._pin_region_fd, self._pin_offset,
                               self.dtype, tuple(self.shape)))


def ship(tensors, offsets, region, nbytes):
    """tensors (over the region, at offsets) as ShippedTensors; empty
    ones, which own no bytes, stay as they are (torch pickles those
    without shared memory)."""
    where = RegionFd(region, nbytes)
    out = []
    for t, off in zip(tensors, offsets):
        if t.numel() == 0:
            out.append(t)
            continue
        s = t.as_subclass(ShippedTensor)
        s._pin_region_fd = where
        s._pin_offset = off
        out.append(s)
    return out


def _map_region(dup, backend, nbytes):
    """In the receiving process: a read-only NumPy array over a view of
    the region the fd names. The view mapping lives as long as the
    tensors over it; the handles it was made with are closed at once."""
    fd = dup.detach()
    dev = core.open(backend)
    try:
        region = dev.import_region(fd)
    finally:
        os.close(fd)
        dev.close()
    try:
        return region.view(np.uint8, (nbytes,))
    finally:
        region.close()


def _tensor_over(buf, offset, dtype, shape):
    count = 1
    for n in shape:
        count *= n
    with warnings.catch_warnings():
        # Read-only memory: the writer only reads it.
        warnings.simplefilter("ignore", UserWarning)
        t = torch.frombuffer(buf, dtype=dtype, count=count, offset=offset)
    return t.view(shape)
