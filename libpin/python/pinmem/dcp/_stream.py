# SPDX-License-Identifier: MIT
"""A .distcp file as a list of parts, written with libpin's writer.

torch's FileSystemWriter writes each tensor with torch.save into the
rank's file; torch.save hands the tensor's bytes to its stream as one
memoryview over the tensor's own memory. _Parts records that view (no
copy) and copies only the small framing around it, so the file written
from the parts is the bytes torch writes, and the payload goes to disk
straight from the (staged, pinned) tensor with pin_file_write: io_uring,
O_DIRECT where the filesystem allows it.
"""
import ctypes
import os

import numpy as np

from .. import _lib
from .._lib import lib
from ..core import PinError

ALIGN = 4096                    # PIN_IO_ALIGN: pin_file_write's file offsets
_DIRECT_MIN = 1 << 20           # parts this large are written in place
_PENDING_MAX = 8 << 20          # copied bytes gathered before a write
_NO_SYNC = 1 << 4               # PIN_IO_NO_SYNC


class _Parts:
    """A write-only stream (what torch.save and BytesIO items are written
    to) keeping large writes that lie inside a kept object's memory as
    views of it and copying everything else."""

    def __init__(self):
        self.parts = []
        self.pos = 0
        self._keep = None

    def tell(self):
        return self.pos

    def flush(self):
        pass

    def write(self, b):
        mv = memoryview(b).cast("B")
        n = mv.nbytes
        if n >= _DIRECT_MIN and self._inside_kept(mv):
            self.parts.append((mv, self._keep))
        elif n:
            self.parts.append((bytes(mv), None))
        self.pos += n
        return n

    def _inside_kept(self, mv):
        if self._keep is None:
            return False
        lo, hi = self._keep_range
        a = _address(mv)
        return lo <= a and a + mv.nbytes <= hi

    def keep(self, tensor):
        """Writes inside tensor's storage are views from now on (the
        tensor is held as long as they are)."""
        self._keep = tensor
        st = tensor.untyped_storage()
        self._keep_range = (st.data_ptr(), st.data_ptr() + st.nbytes())


def _address(mv):
    if not mv.nbytes:
        return 0
    return np.frombuffer(mv, np.uint8).__array_interface__["data"][0]


def write_parts(path, parts, opts):
    """Write parts (byte strings and views, in order) as the new file path
    (created here: FileExistsError if it exists), synced once after the
    last write (each pin_file_write with PIN_IO_NO_SYNC: a sync per part
    cost a tenth of a second per 256 MiB in four parts). Views of 1 MiB and more go from their own memory;
    smaller parts are gathered so that every write starts at a multiple
    of ALIGN, as pin_file_write needs."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL |
                     os.O_CLOEXEC, 0o666))
    pending = bytearray()
    off = 0                     # file offset of pending[0]: ALIGN multiple
    for p, _ in parts:
        mv = memoryview(p).cast("B")
        if mv.nbytes < _DIRECT_MIN:
            pending += mv
            if len(pending) >= _PENDING_MAX:
                n = len(pending) // ALIGN * ALIGN
                opts.put(path, memoryview(pending)[:n], off)
                off += n
                del pending[:n]
            continue
        head = -len(pending) % ALIGN
        pending += mv[:head]
        if pending:
            opts.put(path, memoryview(pending), off)
            off += len(pending)
        body = (mv.nbytes - head) // ALIGN * ALIGN
        opts.put(path, mv[head:head + body], off)
        off += body
        pending = bytearray(mv[head + body:])
    if pending:
        opts.put(path, memoryview(pending), off)
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class IoOpts:
    """pin_io_opts for a run of writes and reads, with room for libpin's
    text of a failure."""

    def __init__(self, queue_depth=None, request_size=None, direct=True):
        self._args = (queue_depth, request_size, direct)
        self.c = _lib.init(_lib.PinIoOpts)
        self.c.queue_depth = queue_depth or 0
        self.c.request_size = request_size or 0
        self.c.flags = 0 if direct else 1       # PIN_IO_BUFFERED
        self._why = ctypes.create_string_buffer(512)
        _lib.why_of(self.c, self._why)
        self.stats = _lib.init(_lib.PinIoStats)

    def __reduce__(self):
        # By its options: the ctypes structures do not pickle, and DCP's
        # checkpoint process gets the storage writer pickled.
        return (IoOpts, self._args)

    def _error(self, ret, what):
        return PinError(-ret, _lib.text(self._why.value) or
                        "%s: %s" % (what, os.strerror(-ret)))

    def put(self, path, mv, off):
        """pin_file_write of the bytes of mv at file offset off, not synced
        (write_parts syncs the file)."""
        self._why.value = b""
        self.c.flags |= _NO_SYNC
        ret = lib.pin_file_write(_address(mv), mv.nbytes, os.fsencode(path),
                                 off, ctypes.byref(self.c),
                                 ctypes.byref(self.stats))
        self.c.flags &= ~_NO_SYNC
        if ret < 0:
            raise self._error(ret, "%s: writing %d bytes at offset %d" % (
                path, mv.nbytes, off))

    def get(self, addr, buf_len, path, off, length):
        """pin_file_read of [off, off + length) of path into buf_len bytes
        at addr; the offset of off's byte in the buffer."""
        self._why.value = b""
        ret = lib.pin_file_read(addr, buf_len, os.fsencode(path), off,
                                length, ctypes.byref(self.c),
                                ctypes.byref(self.stats))
        if ret < 0:
            raise self._error(ret, "%s: reading %d bytes at offset %d" % (
                path, length, off))
        return ret
