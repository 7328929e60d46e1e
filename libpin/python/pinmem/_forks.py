# SPDX-License-Identifier: MIT
"""What a forked child sees of the process's private loads.

A private load's tensors (pinmem.safetensors.torch's default, NumPy's
writable=True) are writable memory no other process maps, but it is a
shared mapping: the portable backend's owner mapping of the region's
memfd, or the device backend's view mapping of an OPEN region. fork()
hands a child the same pages, so a worker's write would land in the
parent's and its siblings' weights, where ordinary memory would be
copied on write. So in the child, right after fork (os.register_at_fork):

- portable backend: each such mapping is replaced, in place, by a
  MAP_PRIVATE mapping of the same memfd range (MAP_FIXED): the child reads
  the bytes it read before and writes into copies of the pages, as with
  ordinary memory. One difference: a page the child has not written yet
  still shows the parent's later writes to it (a private file mapping's
  rule), where anonymous memory would keep the bytes of the fork.
- device backend: the module maps OPEN regions shared only (private views
  need a SEALED region), so each is made read-only (mprotect PROT_READ): a
  write in the child faults (SIGSEGV) instead of changing the parent's.

Neither is locked in the child (mlock is not inherited) nor registered
with its CUDA driver. Part of pinmem.core's mappings; see
Documentation/python.md, *What a loaded torch tensor is*."""
import ctypes
import os
import sys
import threading
import weakref

from . import _lib

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                       ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.mprotect.restype = ctypes.c_int
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_MAP_PRIVATE, _MAP_FIXED = 0x02, 0x10
_MAP_FAILED = ctypes.c_void_p(-1).value

# The private loads' mappings (_ViewMapping), weakly: each goes with its
# last array.
_private = weakref.WeakSet()
_lock = threading.Lock()


def private_in_child(mapping):
    """Have a forked child see mapping (a writable shared _ViewMapping of
    a private load) copy-on-write: remapped MAP_PRIVATE from the file its
    .file names (portable backend), else read-only."""
    with _lock:
        _private.add(mapping)


def _say(what, m, err):
    sys.stderr.write("pinmem: after fork, %s of the private load at 0x%x "
                     "failed: %s\n" % (what, m.addr, os.strerror(err)))


def _remap(m, fd, file_offset):
    addr = _libc.mmap(m.addr, m.length, _lib.PROT_READ | _lib.PROT_WRITE,
                      _MAP_PRIVATE | _MAP_FIXED, fd, file_offset)
    if addr in (None, _MAP_FAILED) or addr != m.addr:
        _say("the copy-on-write mapping", m, ctypes.get_errno())
        return False
    m.locked = False
    return True


def _read_only(m):
    if _libc.mprotect(m.addr, m.length, _lib.PROT_READ):
        _say("mprotect(PROT_READ)", m, ctypes.get_errno())


def _in_child():
    # The forking thread is the child's only one: no lock can be held
    # by another, but one this thread held at fork would be; take none.
    for m in list(_private):
        if not m.mapped:
            continue
        if m.file is None or not _remap(m, *m.file):
            _read_only(m)


os.register_at_fork(after_in_child=_in_child)
