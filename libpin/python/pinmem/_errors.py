# SPDX-License-Identifier: MIT
"""The binding's exceptions, and _check(), which turns a libpin result
into one of them. Part of pinmem.core, which re-exports every name; the
classes keep "pinmem.core" as their module, where they have always been
found (tracebacks, pickles)."""
import errno as _errno
import os
import sys
import threading
import warnings

from . import _lib

_CORE = "pinmem.core"
_said = set()
_said_lock = threading.Lock()


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _inside(code):
    return os.path.abspath(code.co_filename).startswith(_PACKAGE)


def warn_caller(text, category):
    """warnings.warn() attributed to the first frame outside pinmem: the
    caller's line, however deep in the binding the cause was found."""
    level, f = 2, sys._getframe(1)
    while f is not None and _inside(f.f_code):
        f = f.f_back
        level += 1
    warnings.warn(text, category, stacklevel=level)


def warn_once(category, text):
    """warn_caller() the first time a category is issued in this process,
    and never again: the warnings module's own once-per-call-site filter
    lets a warning through again from every other caller, and from every
    call under "always", though its cause (the host) has not changed."""
    with _said_lock:
        if category in _said:
            return
        _said.add(category)
    warn_caller(text, category)


class PinError(OSError):
    """A libpin failure: .errno (an errno value) and .strerror (libpin's
    description of the failure, in words)."""
    __module__ = _CORE

    def __init__(self, err, text, holders=None, refs=None):
        super().__init__(err, text)
        self.holders = holders or []
        self.refs = refs or []

    def __str__(self):
        return "[Errno %d %s] %s" % (self.errno,
                                     _errno.errorcode.get(self.errno, "?"),
                                     self.strerror)


class BusyError(PinError):
    """EBUSY from seal or donate (or a view mapping while donated). .holders
    lists the mappings that held the region when it was refused (device
    backend), and the text names them: pid, command, address range. .refs
    lists the byte ranges still referenced outside any mapping (RefRange:
    a pipe holding a view's pages, O_DIRECT in flight, a registration made
    through a view), which the text names too; the kernel cannot say who
    holds those."""
    __module__ = _CORE


class PinPermissionError(PinError, PermissionError):
    """EACCES or EPERM from libpin (a device this user may not open, an
    operation the region's owner may not do): a PinError, with libpin's
    words and the fix, that is also the PermissionError Python raises
    for the same errno, so either except clause catches it."""
    __module__ = _CORE


def pin_error(err, text):
    """The PinError for err: PinPermissionError for EACCES and EPERM."""
    if err in (_errno.EACCES, _errno.EPERM):
        return PinPermissionError(err, text)
    return PinError(err, text)


class ReadOnlyError(RuntimeError):
    """A write into read-only pinned memory, refused before it happened: a
    torch tensor over a read-only view mapping (a checkpoint loaded on the
    device backend), which the kernel would answer with SIGSEGV. Copy the
    tensor (t.clone()) to modify it."""
    __module__ = _CORE


class PortableBackendWarning(UserWarning):
    """pinmem.open() fell back to the portable backend because /dev/pinmem
    is absent: nothing arbitrates donation. Issued once per process, by the
    first open() that falls back. Silence it with
    warnings.simplefilter("ignore", pinmem.PortableBackendWarning), or ask
    for open("portable") explicitly."""
    __module__ = _CORE


class ViewInUseError(RuntimeError):
    """A view could not be ended because something besides the array that
    was ended still refers to its memory. The mapping stays valid; it is
    unmapped when the last of those references is gone."""
    __module__ = _CORE


def _check(ret, handle_error, what, holders_of=None, refs_of=None):
    if ret >= 0:
        return ret
    err = -ret
    text = _lib.text(handle_error()) or os.strerror(err)
    if what and not text.startswith(what):
        text = "%s: %s" % (what, text)
    if err == _errno.EBUSY:
        holders = holders_of() if holders_of else []
        refs = refs_of() if refs_of else []
        raise BusyError(err, text, holders, refs)
    raise pin_error(err, text)
