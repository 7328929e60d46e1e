# SPDX-License-Identifier: MIT
"""A tensor over the bytes of one torch.save record, without a copy.

A .distcp file holds one torch.save archive (a stored, uncompressed zip)
per tensor item. torch.load would copy the payload into a new storage;
here the zip's directory and the small pickle are read, and the tensor
is made over the payload where it already lies (pinned memory that
libpin read the file into), so the only copy left is into the caller's
target tensor.
"""
import io
import pickle
import struct
import zipfile

import torch
from torch import _weights_only_unpickler

_LOCAL_HEADER = struct.Struct("<4s22xHH")       # signature, name, extra


class _Bytes(io.RawIOBase):
    """A seekable read-only file over a memoryview (zipfile reads the
    directory through it; nothing is copied but what is read)."""

    def __init__(self, mv):
        self.mv = mv
        self.pos = 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, off, whence=0):
        base = (0, self.pos, len(self.mv))[whence]
        self.pos = max(0, base + off)
        return self.pos

    def readinto(self, b):
        n = max(0, min(len(b), len(self.mv) - self.pos))
        b[:n] = self.mv[self.pos:self.pos + n]
        self.pos += n
        return n


def _payload_offset(mv, info):
    """Where the bytes of a stored zip member start in mv."""
    h = info.header_offset
    sig, name_len, extra_len = _LOCAL_HEADER.unpack_from(mv, h)
    if sig != b"PK\x03\x04":
        raise ValueError("no zip member header at offset %d" % h)
    start = h + _LOCAL_HEADER.size + name_len + extra_len
    if info.compress_type != zipfile.ZIP_STORED or \
            start + info.file_size > len(mv):
        raise ValueError("member %s is compressed or runs past the record"
                         % info.filename)
    return start


def load_tensor(arr, base, length):
    """The tensor torch.save wrote into bytes [base, base + length) of arr
    (a writable NumPy uint8 array), sharing arr's memory."""
    mv = memoryview(arr)[base:base + length]
    zf = zipfile.ZipFile(_Bytes(mv))
    names = zf.namelist()
    pkl = [n for n in names if n.endswith("/data.pkl")]
    if len(pkl) != 1:
        raise ValueError("no data.pkl in the record")
    prefix = pkl[0][:-len("data.pkl")]
    order = prefix + "byteorder"
    if order in names and zf.read(order) != b"little":
        raise ValueError("the record is big-endian")

    def storage(pid):
        if pid[0] != "storage":
            raise pickle.UnpicklingError("unknown persistent id %r" % (pid,))
        kind, key, _location, numel = pid[1:5]
        dtype = torch.uint8 if kind is torch.UntypedStorage else kind.dtype
        info = zf.getinfo(prefix + "data/" + key)
        nbytes = numel * torch._utils._element_size(dtype)
        if info.file_size != nbytes:
            raise ValueError("storage %s holds %d bytes, its pickle says %d"
                             % (key, info.file_size, nbytes))
        start = _payload_offset(mv, info)
        st = torch.frombuffer(arr, dtype=torch.uint8, count=nbytes,
                              offset=base + start).untyped_storage() \
            if nbytes else torch.UntypedStorage(0)
        return torch.storage.TypedStorage(wrap_storage=st, dtype=dtype,
                                          _internal=True)

    u = _weights_only_unpickler.Unpickler(io.BytesIO(zf.read(pkl[0])))
    u.persistent_load = storage
    t = u.load()
    if not isinstance(t, torch.Tensor):
        raise ValueError("the record holds %s, not a tensor" %
                         type(t).__name__)
    return t
