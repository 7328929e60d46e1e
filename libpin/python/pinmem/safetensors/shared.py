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

Every request has a deadline, as libpin's pin_cache_open has: timeout=
(seconds) where the calls here take it, else $PIN_CACHE_TIMEOUT
(seconds, "0.5" allowed), else 5. It bounds the wait for the connection
to be accepted and then for each word from the service; the request asks
the service to say, every interval while it loads, that it is still at
it, and each such word restarts the wait (for the longer of the deadline
and twice the interval, at most 60 s). A service that stays silent past
the deadline is Unavailable: a private load, and the warning says so.

The protocol is Documentation/cache.md's: one SOCK_SEQPACKET packet per
message, a 16-byte header (magic, version, type, length, 0) and a payload.
"""
import array
import ctypes
import errno
import grp
import json
import mmap
import os
import socket
import struct

import numpy as np

from .._errors import warn_caller
from . import _format
from ._format import SafetensorError

SOCKET = "/run/pinmem/cache.sock"
TIMEOUT = 5.0
_WAIT_MAX = 60.0
_MAGIC = 0x53434D50
_HDR = struct.Struct("=IHHII")
_REP_LOAD = struct.Struct("=QQQII")
_REQ_LOAD, _REP_LOAD_T, _REP_WAIT, _REP_ERROR = 1, 0x81, 0x83, 0xFF
_HEARTBEAT = 1
# The request reads images whose tensors the service put on 64 bytes; the
# reply's flag says the image is one (Documentation/cache.md).
_ALIGNED_OK, _LOAD_ALIGNED = 2, 2
ALIGN = 64
_OLD_SERVICE = "load request: unknown flags"
_warned = []
# Errors that say the service will not serve the request (not that the file
# is bad): the caller loads privately. The request is well-formed, so a
# refusal of the request itself (a service that could not take its fd, out
# of fds or memory) is one too.
_REFUSED = "the service refused the request"
_DECLINED = {errno.ENOSPC: "the service has no room",
             errno.EAGAIN: "the service is busy",
             errno.EOPNOTSUPP: "the service does not cache this file",
             errno.EPROTO: _REFUSED, errno.EMSGSIZE: _REFUSED,
             errno.EMFILE: _REFUSED, errno.ENFILE: _REFUSED,
             errno.ENOMEM: _REFUSED}


class Unavailable(Exception):
    """No service answered; the caller loads privately."""


def socket_path(sock=None):
    """libpin's pin_cache_socket rule, the one every pinmem program uses:
    sock, else $PIN_CACHE_SOCKET when set and not empty, else SOCKET."""
    return sock or os.environ.get("PIN_CACHE_SOCKET") or SOCKET


def timeout_of(timeout=None):
    """The deadline in seconds: timeout when given (> 0), else
    $PIN_CACHE_TIMEOUT when it is a number > 0, else TIMEOUT."""
    if timeout is not None:
        if not timeout > 0:
            raise ValueError("timeout must be > 0 seconds, not %r" %
                             (timeout,))
        return float(timeout)
    try:
        t = float(os.environ.get("PIN_CACHE_TIMEOUT", ""))
    except ValueError:
        return TIMEOUT
    return t if 0 < t < float("inf") else TIMEOUT


def _fds_of(ancdata):
    fds = array.array("i")
    for level, typ, data in ancdata:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    return list(fds)


def _connect(path, timeout):
    """A socket connected to the service within timeout. An AF_UNIX
    connect waits only while the listener's backlog is full, and a
    non-blocking one then fails at once (EAGAIN): so it blocks, with
    SO_SNDTIMEO as its deadline, as libpin's does."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sec = int(timeout)
    usec = int((timeout - sec) * 1e6) or (0 if sec else 1)  # 0 0: forever
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                 struct.pack("@ll", sec, usec))
    try:
        s.connect(path)
    except BlockingIOError:
        s.close()
        raise Unavailable("the service at %s did not accept the connection "
                          "within %.1f s" % (path, timeout))
    except OSError as e:
        s.close()
        if e.errno in (errno.EACCES, errno.EPERM):
            raise Unavailable(_refused_user(path, e.strerror))
        raise Unavailable("no service at %s (%s)" % (path, e.strerror))
    return s


def _refused_user(path, strerror):
    """The service is there, its socket refused this user: which group to
    join, in libpin's words (the socket's group; pinmem where it is
    root's, as the project's units make it pinmem's)."""
    name = "pinmem"
    try:
        gid = os.stat(path).st_gid
        if gid:
            name = grp.getgrgid(gid).gr_name
    except (OSError, KeyError):
        pass
    return ("the service at %s refused this user (%s): join group %s "
            "(sudo usermod -aG %s $USER, then log in again)"
            % (path, strerror, name, name))


def _reply(s, path, timeout):
    """(packet, fds) of the reply, read past each WAIT (which restarts
    the deadline)."""
    wait = timeout
    while True:
        s.settimeout(wait)
        try:
            data, anc, _, _ = s.recvmsg(1 << 16, socket.CMSG_SPACE(16))
        except socket.timeout:
            raise Unavailable("the service at %s did not answer within "
                              "%.1f s" % (path, timeout))
        fds = _fds_of(anc)
        magic, _, typ, _, _ = _HDR.unpack_from(data.ljust(_HDR.size))
        if len(data) != _HDR.size + 8 or fds or magic != _MAGIC or \
                typ != _REP_WAIT:
            return data, fds
        interval = struct.unpack_from("=I", data, _HDR.size)[0] / 1000
        wait = max(timeout, min(2 * interval, _WAIT_MAX))


def _exchange(path, fd, flags, timeout):
    """Send a LOAD for fd with flags: (reply packet, its fds, the socket).
    The caller closes the socket once it has mapped the view: until then
    the service keeps the entry from eviction."""
    s = _connect(path, timeout)
    try:
        req = _HDR.pack(_MAGIC, 1, _REQ_LOAD, 8, 0) + struct.pack(
            "=II", flags, 0)
        try:
            s.sendmsg([req], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                               array.array("i", [fd]).tobytes())])
            return _reply(s, path, timeout) + (s,)
        except BlockingIOError:
            raise Unavailable("the service at %s did not answer within "
                              "%.1f s" % (path, timeout))
        except OSError as e:
            raise Unavailable("the service at %s failed the request (%s)"
                              % (path, e.strerror))
    except BaseException:
        s.close()
        raise


def _error(data):
    """(errno, text) of an ERROR reply, or None."""
    if len(data) < _HDR.size + 8 or _HDR.unpack_from(data)[2] != _REP_ERROR:
        return None
    err, _ = struct.unpack_from("=iI", data, _HDR.size)
    return err, data[_HDR.size + 8:].decode(errors="replace")


def _ask(path, fd, timeout):
    """(entry, file_size, view_length, view fd, flags, socket) for the
    file open at fd; the caller closes the socket after mapping the view.
    Heartbeats asked for, aligned images taken; a service from before
    these refuses the flags (EPROTO, "load request: unknown flags") and
    is asked once more without them."""
    data, fds, s = _exchange(path, fd, _HEARTBEAT | _ALIGNED_OK, timeout)
    if _error(data) == (errno.EPROTO, _OLD_SERVICE):
        s.close()
        data, fds, s = _exchange(path, fd, 0, timeout)
    try:
        return _load_reply(path, data, fds) + (s,)
    except BaseException:
        s.close()
        raise


def _load_reply(path, data, fds):
    """(entry, file_size, view_length, view fd, flags) of a LOAD reply;
    Unavailable or SafetensorError for an ERROR one."""
    if len(data) < _HDR.size:
        for f in fds:
            os.close(f)
        raise Unavailable("the service at %s went away mid-request" % path)
    magic, _, typ, _, _ = _HDR.unpack_from(data)
    error = _error(data)
    if error:
        err, text = error
        if err in _DECLINED:    # not the file's fault: load privately
            raise Unavailable("%s: %s" % (_DECLINED[err], text))
        raise SafetensorError("pinmem-cached: %s (%s)" %
                              (text, os.strerror(err)))
    if magic != _MAGIC or typ != _REP_LOAD_T or len(fds) != 1:
        for f in fds:
            os.close(f)
        raise Unavailable("the service at %s answered nonsense" % path)
    entry, size, vlen, _backend, flags = _REP_LOAD.unpack_from(
        data, _HDR.size)
    return entry, size, vlen, fds[0], flags


def request(filename, sock=None, timeout=None):
    """(read-only uint8 array of the image in the service's view, entry
    id, the file's size, whether the service put the tensors on ALIGN
    bytes: then the array is the whole view, else the file's bytes; give
    the last three to tensors()). Raises Unavailable when no service can serve it (no
    service, over its budget, no word from it within timeout seconds:
    see timeout_of), SafetensorError for the file's own failures."""
    path = socket_path(sock)
    timeout = timeout_of(timeout)
    with _format.open_file(filename) as f:
        entry, size, vlen, vfd, flags, s = _ask(path, f.fileno(), timeout)
    try:
        image = _map_view(vfd, entry, vlen)
    finally:
        os.close(vfd)
        s.close()
    aligned = bool(flags & _LOAD_ALIGNED)
    return image[:vlen if aligned else size], entry, size, aligned


def _map_view(vfd, entry, vlen):
    """The view, read-only: through libpin where this process can take
    the fd, else mapped plainly. Unavailable where the kernel refuses it
    (EBUSY: the region donated, the entry evicted after all, as it is for
    a process slower than the service's --client-timeout)."""
    try:
        image = _pinned_image(vfd, entry)
        if image is None:
            m = mmap.mmap(vfd, vlen, flags=mmap.MAP_SHARED,
                          prot=mmap.PROT_READ)
            image = np.frombuffer(m, np.uint8, vlen)
    except OSError as e:
        if e.errno != errno.EBUSY:
            raise
        raise Unavailable("the service evicted entry %d before this "
                          "process mapped it" % entry) from None
    return image


def _pinned_image(vfd, entry):
    """The service's view fd mapped read-only through libpin
    (pin_view_import): locked and CUDA-registered as a private load's
    mapping is (pinmem.core's _ViewMapping). None where this process's
    libpin cannot take the fd (a backend other than the service's): the
    caller maps it plainly."""
    from .. import core
    from .._lib import lib
    try:
        kind = os.readlink("/proc/self/fd/%d" % vfd)
    except OSError:
        return None
    backend = "portable" if kind.startswith("/memfd:") else "device"
    try:
        dev = core.open(backend)
    except core.PinError:
        return None
    v = ctypes.c_void_p()
    try:
        if lib.pin_view_import(dev._ptr(), vfd, ctypes.byref(v)) < 0:
            return None
    finally:
        dev.close()
    m = core._ViewMapping(None, entry, lib.pin_view_offset(v.value),
                          lib.pin_view_length(v.value), False, None, None,
                          backend=backend, view=v.value)
    return np.asarray(m)


def open_image(filename, sock=None, timeout=None):
    """request(), or None after warning (once per process) why not."""
    try:
        return request(filename, sock, timeout)
    except Unavailable as e:
        if not _warned:
            _warned.append(True)
            warn_caller("pinmem: %s; loading privately (one copy per "
                          "process)" % e, RuntimeWarning)
        return None


def tensors(image, file_size=None, aligned=False):
    """(name, file dtype, shape, uint8 bytes) of each tensor of a file
    image, in file order, checked as safetensors' load(bytes) checks.
    aligned (request()'s): the image holds the file's header, and each
    tensor where libpin's PIN_ST_LOAD_ALIGN puts it: in file order, each at
    the first multiple of ALIGN at or after the end of the one before."""
    size = image.nbytes if file_size is None else file_size
    _meta, ents, start = _format.parse_bytes(memoryview(image)[:size])
    out, at = [], 0
    for name, dt, shape, b, e in ents:
        if aligned:
            n = e - b
            b = -(-(start + at) // ALIGN) * ALIGN - start
            e = at = b + n
            if start + e > image.nbytes:
                raise SafetensorError("pinmem-cached: tensor %s ends at %d, "
                                      "past its view's %d bytes" %
                                      (name, start + e, image.nbytes))
        out.append((name, dt, shape, image[start + b:start + e]))
    return out


def shards(index_path):
    """The shard files a *.safetensors.index.json names, in order."""
    with _format.open_file(index_path) as f:
        index = json.load(f)
    wm = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(wm, dict):
        raise SafetensorError("%s: index has no \"weight_map\" object" %
                              index_path)
    where = os.path.dirname(index_path)
    return [os.path.join(where, s) for s in sorted(set(wm.values()))]


def load(filename, sock=None, timeout=None):
    """tensors() over the shared view of filename, or of every shard of a
    *.safetensors.index.json, each shard an entry of its own; None when
    the caller must load privately (all of it: one shard that cannot be
    shared makes the whole load private). timeout: each request's
    deadline in seconds (None: $PIN_CACHE_TIMEOUT, else TIMEOUT)."""
    path = os.fspath(filename)
    files = shards(path) if path.endswith(".index.json") else [path]
    out = []
    for f in files:
        got = open_image(f, sock, timeout)
        if got is None:
            return None
        out += tensors(*got[:1] + got[2:])
    return out
