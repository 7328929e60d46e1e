# SPDX-License-Identifier: MIT
"""get_slice indexing for framework="np", with safetensors' checks and
messages (bindings/python/src/lib.rs: slice_to_indexer,
PySafeSlice::__getitem__ and its Disp; safetensors/src/slice.rs:
SliceIterator::new and InvalidSlice's Display).

safetensors turns each index into a TensorIndexer: an int is Select(i),
negative ints counted from the end ("Invalid index I for dimension D of
size N" when still negative); a slice is Narrow(start, stop), its step not
read. It then checks the dimensions from the last to the first: a start at
or past the size, or a stop past it, is "Error during slicing [INDEXERS]
with shape [SHAPE]: index ASKED out of bounds for tensor dimension #D of
size N", ASKED being the start if that is out, else stop - 1.

pinmem applies those checks and messages, then indexes with NumPy, which
also honours what safetensors does not take: steps (safetensors ignores
them), negative slice bounds (an OverflowError there), Ellipsis (a
TypeError there), and more indexes than dimensions raise
SafetensorError("... more slicing indexes than dimensions in tensor")
where safetensors drops the extra ones.

framework="pt" is not here: safetensors indexes a torch tensor over the
file there, so torch's own rules and errors apply, and pinmem does the
same over the pinned region.
"""
from ._format import SafetensorError


def _bound(b):
    return "" if b is None else str(b)


def _disp(items):
    # lib.rs Disp: "[" + indexers joined by ", " + "]"; a Narrow prints as
    # "start:stop", an absent bound as nothing; a Select as its index.
    out = []
    for i in items:
        if isinstance(i, slice):
            out.append("%s:%s" % (_bound(i.start), _bound(i.stop)))
        elif i is Ellipsis:
            out.append("...")
        else:
            out.append(str(i))
    return "[" + ", ".join(out) + "]"


def _expand(idx, ndim):
    if not isinstance(idx, tuple):
        idx = (idx,)
    if any(i is Ellipsis for i in idx):
        k = idx.index(Ellipsis)
        fill = ndim - (len(idx) - 1)
        idx = idx[:k] + (slice(None),) * max(fill, 0) + idx[k + 1:]
    return idx


def _select(i, d, n):
    try:
        k = i.__index__()
    except AttributeError:
        raise TypeError("slice indices must be integers, slices or "
                        "Ellipsis, not %s" % type(i).__name__) from None
    if k < 0:
        if k + n < 0:
            raise SafetensorError("Invalid index %d for dimension %d of "
                                  "size %d" % (k, d, n))
        k += n
    return k


def _out_of_range(item, n):
    """ASKED when safetensors' range check fails for this dimension."""
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


def numpy_key(idx, shape):
    """idx (what [] was given) -> a NumPy key over an array of this shape,
    after safetensors' checks."""
    idx = _expand(idx, len(shape))
    if len(idx) > len(shape):
        raise SafetensorError("Error during slicing %s with shape %s: more "
                              "slicing indexes than dimensions in tensor" %
                              (_disp(idx), list(shape)))
    items = []
    for d, (i, n) in enumerate(zip(idx, shape)):
        if isinstance(i, slice):
            if i.step == 0:
                raise ValueError("slice step cannot be zero")
            items.append(i)
        else:
            items.append(_select(i, d, n))
    for d in reversed(range(len(items))):
        asked = _out_of_range(items[d], shape[d])
        if asked is not None:
            raise SafetensorError(
                "Error during slicing %s with shape %s: index %d out of "
                "bounds for tensor dimension #%d of size %d" %
                (_disp(items), list(shape), asked, d, shape[d]))
    # (Ellipsis last: all-int keys give a 0-d array, not a scalar.)
    return tuple(items) + (Ellipsis,)
