# SPDX-License-Identifier: MIT
"""PinnedArray, the NumPy array over a view mapping (_mappings.py) whose
end unmaps it. Part of pinmem.core, which re-exports every name (the
classes keep "pinmem.core" as their module); core's docstring says who owns
what."""
import sys
import weakref

import numpy as np

from . import dlpack
from ._errors import ViewInUseError
from ._mappings import _CORE, _mapping_of


# ---- Arrays over view mappings ---------------------------------------------

def _outside_refs(a, baseline):
    """References to a beyond the one name it is held by and the
    interpreter's own (baseline, measured at import by _calibrate)."""
    return sys.getrefcount(a) - baseline


def _end(a, baseline, quiet):
    """End array a's view mapping: empty a in place (the name it is held
    by now sees a 0-element array) and unmap. Refuses with ViewInUseError,
    keeping everything valid, while anything besides that one name refers
    to a (another name, a derived array, a memoryview, a container)."""
    if a.base is None or _mapping_of(a) is None:
        raise TypeError("pinmem: this array is not a view over a pinned "
                        "region (it owns its memory)")
    m = _mapping_of(a)
    others = _outside_refs(a, baseline)
    if others > 0:
        if quiet:
            return False
        raise ViewInUseError(
            "pinmem: view of region %d (0x%x-0x%x) is still referenced at "
            "its end by %d object(s) besides the name it is held by (another "
            "name, a derived array or slice, a memoryview, a container); "
            "it stays mapped until they are gone" %
            (m.region_id, m.addr, m.addr + m.length, others))
    # A derived PinnedArray (a slice, a reshape) holds a itself, not the
    # mapping: emptying a would leave it pointing into an unmapped range.
    # The count above misses it when a is held by no name (del'd inside
    # the with block) or the call was not the calibrated one.
    derived = sum(1 for x in list(m.arrays.values()) if x is not a)
    if derived:
        if quiet:
            return False
        raise ViewInUseError(
            "pinmem: view of region %d (0x%x-0x%x) is still referenced at "
            "its end by %d other array(s) over the same mapping (a slice or "
            "another view derived from it); it stays mapped until they are "
            "gone" % (m.region_id, m.addr, m.addr + m.length, derived))
    mref = weakref.ref(m)
    del m
    # Drop a's reference to its memory: a becomes a 0-element array.
    np.ndarray.__setstate__(a, (1, (0,), a.dtype, False, b""))
    m = mref()
    if m is not None:
        # Someone took a reference to an intermediate base or to the
        # mapping itself; it stays valid until that reference is gone.
        if quiet:
            return False
        raise ViewInUseError(
            "pinmem: view of region %d (0x%x-0x%x): the array was emptied "
            "but its mapping is still held by another object reached "
            "through .base; it stays mapped until that object is gone" %
            (m.region_id, m.addr, m.addr + m.length))
    return True


class PinnedArray(np.ndarray):
    """A NumPy array over a pinned region's view mapping (region.view()).

    Behaves like any ndarray. Arrays derived from it (slices, reshapes,
    np.asarray) keep the mapping alive; it is unmapped when the last of
    them is collected. As a context manager it ends the mapping at the end
    of the block: the array becomes a 0-element array (the name bound by
    ``as`` sees that), and ViewInUseError is raised instead, with the
    mapping left valid, if anything else still refers to it (another name
    included)."""
    __module__ = _CORE

    def __array_finalize__(self, obj):
        # Known to the mapping, so that ending one array can tell whether
        # another still reads the same bytes.
        m = _mapping_of(self)
        if m is not None:
            m.arrays[id(self)] = self

    def __array_wrap__(self, obj, context=None, return_scalar=False):
        # Results that own fresh memory are plain arrays, not views.
        if obj.base is None or _mapping_of(obj) is None:
            obj = obj.view(np.ndarray)
        return obj[()] if return_scalar else obj

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if et is None:
            _end(self, _BASE_EXIT, quiet=False)
        else:
            # Do not hide the exception in flight: end the view if it is
            # free; otherwise its references (the traceback's frames, say)
            # end it when they go.
            _end(self, _BASE_EXIT_EXC, quiet=True)
        return False

    def release(self):
        """End the mapping now, as the end of a with block does: the name
        the array is held by must be its only reference."""
        _end(self, _BASE_RELEASE, quiet=False)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None,
                   copy=None):
        """DLPack export, read-only views included (pinmem.dlpack says
        how); the view mapping lives until the consumer releases it."""
        return dlpack.to_dlpack(self, max_version, dl_device)

    def __dlpack_device__(self):
        """(kDLCPU, 0), or (kDLCUDAHost, 0) in a CUDA-registered range."""
        return dlpack.device(self)

    @property
    def mapped(self):
        """Whether this array still reads a live view mapping."""
        m = _mapping_of(self)
        return m is not None and m.mapped

    @property
    def mapping_range(self):
        """(start, end) addresses of the view mapping, or None."""
        m = _mapping_of(self)
        return (m.addr, m.addr + m.length) if m is not None else None

    @property
    def region_id(self):
        m = _mapping_of(self)
        return m.region_id if m is not None else None


# ---- Calibration: the references the interpreter itself holds to the
# array while __exit__/release run (the bound method, the arguments), plus
# the one name it is held by, found by running the same calls on an object
# held by exactly one name.

class _Probe:
    __module__ = _CORE

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        self.seen = _outside_refs(self, 0)
        return et is not None

    def release(self):
        self.seen = _outside_refs(self, 0)


def _calibrate():
    with _Probe() as p:
        pass
    with _Probe() as q:
        raise KeyError
    r = _Probe()
    r.release()
    # PinnedArray's path passes the array through _end: one more argument.
    return p.seen + 1, q.seen + 1, r.seen + 1


_BASE_EXIT, _BASE_EXIT_EXC, _BASE_RELEASE = _calibrate()
