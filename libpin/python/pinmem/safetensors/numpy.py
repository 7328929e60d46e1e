# SPDX-License-Identifier: MIT
"""safetensors.numpy's API, over pinned memory.

    from pinmem.safetensors.numpy import load_file, save_file
    tensors = load_file("model.safetensors")   # read-only arrays, pinned
    save_file({"w": w}, "copy.safetensors")     # byte-identical to safetensors

Same names, signatures, defaults, exception types and messages as
safetensors 0.7's safetensors.numpy. Differences: loaded arrays are
read-only views of a sealed pinned region (writing raises ValueError);
BF16/F8 need ml_dtypes (without it: TypeError saying so; use
pinmem.safetensors.torch).
"""
import numpy as np

from . import _atomic, _format, _sharded
from . import shared as _shared
from ._open import load_all, load_bytes, safe_open, to_framework

__all__ = ["save", "save_file", "save_sharded", "load", "load_file"]


def _entries(tensor_dict):
    out = []
    for name, a in tensor_dict.items():
        a = np.asarray(a)
        dt = _format.file_dtype(a.dtype.name)
        if a.dtype.byteorder == ">":
            a = a.byteswap().view(a.dtype.newbyteorder("<"))
        # (ascontiguousarray alone makes a 0-d array 1-d: shape [1].)
        a = np.ascontiguousarray(a).reshape(a.shape)
        out.append((name, dt, a.shape, a.reshape(-1).view(np.uint8)))
    return out


def save(tensor_dict, metadata=None):
    """The safetensors file image of tensor_dict (name -> array), as bytes."""
    return b"".join(bytes(p) for p in _format.serialize(
        _entries(tensor_dict), metadata))


def save_file(tensor_dict, filename, metadata=None):
    """Write tensor_dict to filename as safetensors does (same bytes),
    replacing the file whole: a crash leaves the old file or the new one."""
    parts = _format.serialize(_entries(tensor_dict), metadata)
    _atomic.replace_file(filename, parts)


def save_sharded(tensor_dict, index_filename, max_shard_size="5GB", metadata=None):
    """Write tensor_dict as a sharded checkpoint: shards of at most max_shard_size
    (an int, or "5GB", "512MiB") and the index index_filename
    (PREFIX.safetensors.index.json), as Hugging Face's loaders read it.
    A crash leaves the old checkpoint or the new one; the old shards are
    deleted once the new index is in place. Returns the shards' names."""
    return _sharded.save(_entries(tensor_dict), index_filename, metadata, max_shard_size)


def load(data):
    """name -> read-only array (pinned) from a safetensors file image."""
    return load_bytes(data, "np")


def load_file(filename, shared=False):
    """name -> read-only array over pinned memory, in file order.
    shared=True: the one copy pinmem-cached holds for the whole host
    (pinmem.safetensors.shared); without a service, a private load and a
    warning."""
    if shared:
        ents = _shared.load(filename)
        if ents is not None:
            return {name: to_framework(raw, dt, shape, "np")
                    for name, dt, shape, raw in ents}
    return load_all(filename, "np")
