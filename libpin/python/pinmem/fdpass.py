# SPDX-License-Identifier: MIT
"""Passing region fds between processes (SCM_RIGHTS over a Unix socket),
through libpin's pin_fd_send/pin_fd_recv.

    # process A                              # process B
    pinmem.send_fd(sock, region.fd())        fd = pinmem.recv_fd(sock)
                                             r = dev.import_region(fd)
                                             a = r.view(np.float32, (n,))

A received fd is the receiver's (O_CLOEXEC); import_region keeps a
duplicate, so the receiver closes its fd when it is done with it.
"""
import ctypes
import errno
import os

from ._lib import lib
from .core import PinError


def _fileno(sock):
    return sock if isinstance(sock, int) else sock.fileno()


def send_fd(sock, fd):
    """Send fd over the Unix socket sock (a socket or its fileno)."""
    ret = lib.pin_fd_send(_fileno(sock), fd)
    if ret < 0:
        raise PinError(-ret, "send_fd: %s" % os.strerror(-ret))


def recv_fd(sock):
    """Receive one fd from sock. PinError ECONNRESET at end of stream,
    EPROTO for a message that carried no fd or more than one."""
    fd = ctypes.c_int(-1)
    ret = lib.pin_fd_recv(_fileno(sock), ctypes.byref(fd))
    if ret < 0:
        what = {errno.ECONNRESET: "the peer closed the socket",
                errno.EPROTO: "the message carried no fd, or more than one"}
        raise PinError(-ret, "recv_fd: %s" % what.get(-ret,
                                                      os.strerror(-ret)))
    return fd.value
