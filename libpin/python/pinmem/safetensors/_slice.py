# SPDX-License-Identifier: MIT
"""get_slice indexing for framework="np", with safetensors' checks and
messages (safetensors 0.8: bindings/python/src/lib.rs: slice_to_indexer,
PySafeSlice::__getitem__ and its Disp; safetensors/src/slice.rs:
SliceIterator::new and InvalidSlice's Display).

safetensors turns each index into a TensorIndexer: an int is Select(i),
negative ints counted from the end ("Invalid index I for dimension D of
size N" when still negative); a slice is Narrow(start, stop) taken every
step; one Ellipsis stands for the dimensions the others leave ("Only one
ellipsis (...) is allowed in slice index" for two). It then checks the
dimensions from the last to the first: a start at or past the size, or a
stop past it, is "Error during slicing [INDEXERS] with shape [SHAPE]:
index ASKED out of bounds for tensor dimension #D of size N", ASKED being
the start if that is out, else stop - 1. Anything else in the key is
"Unsupported slice index at position P: expected slice, int, or ellipsis"
(P counted with the Ellipsis expanded), but for the key [] (an empty
narrow of the first dimension); a non-empty list as the whole key is
"Non empty lists are not implemented" (pinmem: where it holds anything
but ints).

pinmem applies those checks and messages, then indexes with NumPy, which
also honours what safetensors does not take: lists of indices (as the
whole key or for any dimension: NumPy's, and torch's, advanced indexing;
integer NumPy arrays alike; an index past the size is the out-of-bounds
error above), negative slice bounds (an OverflowError there) and negative
steps (there "Slice step must be a positive integer, got S", which a
zero step is here too); more indexes than dimensions raise
SafetensorError("... more slicing indexes than dimensions in tensor")
where safetensors drops the extra ones.

framework="pt" is not here: safetensors indexes a torch tensor over the
file there, so torch's own rules and errors apply, and pinmem does the
same over the pinned region.
"""
import numpy as np

from ._format import SafetensorError


def _bound(b):
    return "" if b is None else str(b)


def _disp(items):
    # lib.rs Disp: "[" + indexers joined by ", " + "]"; a Narrow prints as
    # "start:stop", ":step" added when not 1, an absent bound as nothing;
    # a Select as its index.
    out = []
    for i in items:
        if isinstance(i, slice):
            step = "" if i.step in (None, 1) else ":%s" % i.step
            out.append("%s:%s%s" % (_bound(i.start), _bound(i.stop), step))
        elif i is Ellipsis:
            out.append("...")
        elif isinstance(i, np.ndarray):
            out.append(str(i.tolist()))
        else:
            out.append(str(i))
    return "[" + ", ".join(out) + "]"


def _expand(idx, ndim):
    if isinstance(idx, list) and not idx:
        idx = slice(0, 0)               # safetensors: [] narrows to 0:0
    if not isinstance(idx, tuple):
        idx = (idx,)
    if sum(1 for i in idx if i is Ellipsis) > 1:
        raise SafetensorError("Only one ellipsis (...) is allowed in slice "
                              "index")
    if any(i is Ellipsis for i in idx):
        k = next(j for j, i in enumerate(idx) if i is Ellipsis)
        fill = ndim - (len(idx) - 1)
        idx = idx[:k] + (slice(None),) * max(fill, 0) + idx[k + 1:]
    return idx


def _unsupported(d):
    return SafetensorError("Unsupported slice index at position %d: "
                           "expected slice, int, or ellipsis" % d)


def _indices(i, d, n):
    """A list (or NumPy array) of indices for dimension d of size n: an
    intp array, negative ones counted from the end, each in range."""
    try:
        a = np.asarray(i)
    except ValueError:                  # ragged nested lists
        raise _unsupported(d) from None
    if a.size == 0:
        a = a.astype(np.intp)
    if a.dtype.kind not in "iu" or (isinstance(i, list) and
                                    not _all_ints(i)):
        raise _unsupported(d)
    return a.astype(np.intp)


def _all_ints(i):
    for x in i:
        if isinstance(x, list):
            if not _all_ints(x):
                return False
        elif isinstance(x, bool) or not hasattr(x, "__index__"):
            return False
    return True


def _select(i, d, n):
    if isinstance(i, (list, np.ndarray)):
        return _indices(i, d, n)
    k = i.__index__()
    if k < 0:
        if k + n < 0:
            raise SafetensorError("Invalid index %d for dimension %d of "
                                  "size %d" % (k, d, n))
        k += n
    return k


def _out_of_range(item, n):
    """ASKED when safetensors' range check fails for this dimension."""
    if isinstance(item, np.ndarray):
        out = item[(item >= n) | (item < -n)]
        return int(out.flat[0]) if out.size else None
    if isinstance(item, slice):
        if (item.start is not None and item.start < 0) or \
                (item.stop is not None and item.stop < 0):
            return None                 # Python's meaning (pinmem only)
        start = 0 if item.start is None else item.start
        stop = n if item.stop is None else item.stop
    else:
        start, stop = item, item + 1
    if start >= n:
        return start
    if stop > n:
        return max(stop - 1, 0)
    return None


def _supported(i):
    return isinstance(i, (slice, list, np.ndarray)) or (
        not isinstance(i, float) and hasattr(i, "__index__"))


def numpy_key(idx, shape):
    """idx (what [] was given) -> a NumPy key over an array of this shape,
    after safetensors' checks."""
    if isinstance(idx, list) and idx and not _all_ints(idx):
        raise SafetensorError("Non empty lists are not implemented")
    if isinstance(idx, list) and idx:
        try:
            np.asarray(idx, np.intp)
        except ValueError:              # ragged
            raise SafetensorError("Non empty lists are not implemented") \
                from None
    idx = _expand(idx, len(shape))
    # safetensors converts every index first (an index past the
    # dimensions against a size of 0), then counts them.
    items = []
    for d, i in enumerate(idx):
        n = shape[d] if d < len(shape) else 0
        if not _supported(i):
            raise _unsupported(d)
        if isinstance(i, slice):
            if i.step == 0:
                raise SafetensorError("Slice step must be a positive "
                                      "integer, got 0")
            items.append(i)
        else:
            items.append(_select(i, d, n))
    if len(idx) > len(shape):
        raise SafetensorError("Error during slicing %s with shape %s: more "
                              "slicing indexes than dimensions in tensor" %
                              (_disp(idx), list(shape)))
    for d in reversed(range(len(items))):
        asked = _out_of_range(items[d], shape[d])
        if asked is not None:
            raise SafetensorError(
                "Error during slicing %s with shape %s: index %d out of "
                "bounds for tensor dimension #%d of size %d" %
                (_disp(items), list(shape), asked, d, shape[d]))
    # (Ellipsis last: all-int keys give a 0-d array, not a scalar.)
    return tuple(items) + (Ellipsis,)
