# SPDX-License-Identifier: MIT
"""One pinned copy per host: checkpoints served by pinmem-cached.

    from pinmem.safetensors.torch import load_file
    sd = load_file("model.safetensors", shared=True)

The file is opened here (this process's permissions decide) and its open
fd passed to the service (socket $PIN_CACHE_SOCKET, else
/run/pinmem/cache.sock), which loads it once into a sealed pinned region
and answers with a read-only view; the tensors are views of that one copy,
read-only (numpy: writes raise ValueError; torch: ReadOnlyTensor raises
pinmem.ReadOnlyError). The view stays mapped while any tensor of it lives,
and while it is mapped the service cannot evict the file (device backend:
the kernel refuses). Without a service the callers load privately and warn
once per process (RuntimeWarning) saying why.

The protocol is Documentation/cache.md's: one SOCK_SEQPACKET packet per
message, a 16-byte header (magic, version, type, length, 0) and a payload.
"""
import array
import json
import mmap
import os
import socket
import struct
import warnings

import numpy as np

from . import _format
from ._format import SafetensorError

SOCKET = "/run/pinmem/cache.sock"
_MAGIC = 0x53434D50
_HDR = struct.Struct("=IHHII")
_REP_LOAD = struct.Struct("=QQQII")
_REQ_LOAD, _REP_LOAD_T, _REP_ERROR = 1, 0x81, 0xFF
_warned = []
# Errors that say the service will not serve the request (not that the file
# is bad): the caller loads privately.
_DECLINED = {28: "the service has no room",            # ENOSPC
             11: "the service is busy",                # EAGAIN
             95: "the service does not cache this file"}  # EOPNOTSUPP


class Unavailable(Exception):
    """No service answered; the caller loads privately."""


def socket_path(sock=None):
    return sock or os.environ.get("PIN_CACHE_SOCKET") or SOCKET


def _fds_of(ancdata):
    fds = array.array("i")
    for level, typ, data in ancdata:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    return list(fds)


def _ask(path, fd):
    """(entry, file_size, view_length, view fd) for the file open at fd."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        try:
            s.connect(path)
        except OSError as e:
            raise Unavailable("no service at %s (%s)" % (path, e.strerror))
        req = _HDR.pack(_MAGIC, 1, _REQ_LOAD, 8, 0) + bytes(8)
        try:
            s.sendmsg([req], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                               array.array("i", [fd]).tobytes())])
            data, anc, _, _ = s.recvmsg(1 << 16, socket.CMSG_SPACE(16))
        except OSError as e:
            raise Unavailable("the service at %s failed the request (%s)"
                              % (path, e.strerror))
    finally:
        s.close()
    fds = _fds_of(anc)
    if len(data) < _HDR.size:
        for f in fds:
            os.close(f)
        raise Unavailable("the service at %s went away mid-request" % path)
    magic, _, typ, _, _ = _HDR.unpack_from(data)
    if typ == _REP_ERROR and len(data) >= _HDR.size + 8:
        err, _ = struct.unpack_from("=iI", data, _HDR.size)
        text = data[_HDR.size + 8:].decode(errors="replace")
        if err in _DECLINED:    # not the file's fault: load privately
            raise Unavailable("%s: %s" % (_DECLINED[err], text))
        raise SafetensorError("pinmem-cached: %s (%s)" %
                              (text, os.strerror(err)))
    if magic != _MAGIC or typ != _REP_LOAD_T or len(fds) != 1:
        for f in fds:
            os.close(f)
        raise Unavailable("the service at %s answered nonsense" % path)
    entry, size, vlen, _backend, _flags = _REP_LOAD.unpack_from(
        data, _HDR.size)
    return entry, size, vlen, fds[0]


def request(filename, sock=None):
    """(read-only uint8 array of the file image in the service's view,
    entry id). Raises Unavailable when no service can serve it (no
    service, over its budget), SafetensorError for the file's own
    failures."""
    path = socket_path(sock)
    fd = os.open(os.fspath(filename), os.O_RDONLY | os.O_CLOEXEC)
    try:
        entry, size, vlen, vfd = _ask(path, fd)
    finally:
        os.close(fd)
    try:
        m = mmap.mmap(vfd, vlen, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    finally:
        os.close(vfd)
    return np.frombuffer(m, np.uint8, size), entry


def open_image(filename, sock=None):
    """request(), or None after warning (once per process) why not."""
    try:
        return request(filename, sock)
    except Unavailable as e:
        if not _warned:
            _warned.append(True)
            warnings.warn("pinmem: %s; loading privately (one copy per "
                          "process)" % e, RuntimeWarning, stacklevel=4)
        return None


def tensors(image):
    """(name, file dtype, shape, uint8 bytes) of each tensor of a file
    image, in file order, checked as safetensors' load(bytes) checks."""
    _meta, ents, start = _format.parse_bytes(memoryview(image))
    return [(name, dt, shape, image[start + b:start + e])
            for name, dt, shape, b, e in ents]


def shards(index_path):
    """The shard files a *.safetensors.index.json names, in order."""
    with open(index_path, "rb") as f:
        index = json.load(f)
    wm = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(wm, dict):
        raise SafetensorError("%s: index has no \"weight_map\" object" %
                              index_path)
    where = os.path.dirname(index_path)
    return [os.path.join(where, s) for s in sorted(set(wm.values()))]


def load(filename, sock=None):
    """tensors() over the shared view of filename, or of every shard of a
    *.safetensors.index.json, each shard an entry of its own; None when
    the caller must load privately (all of it: one shard that cannot be
    shared makes the whole load private)."""
    path = os.fspath(filename)
    files = shards(path) if path.endswith(".index.json") else [path]
    out = []
    for f in files:
        got = open_image(f, sock)
        if got is None:
            return None
        out += tensors(got[0])
    return out
