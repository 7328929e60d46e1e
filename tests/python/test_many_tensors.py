# SPDX-License-Identifier: GPL-2.0
"""load_file on a header of many tensors: the Python work per tensor is
bounded, counted rather than timed (the Python-level calls sys.setprofile
sees, between a header of N tensors and one of 4N), so that the slow path
(a Python header check, a NumPy array and several torch calls per tensor)
cannot come back unnoticed on any machine, however loaded. _format's
check runs only to word a refusal. Empty tensors at one offset keep the
header's order. The timings are tools' (tests/python/bench_header.py)."""
import json
import os
import struct
import sys
import warnings

import numpy as np
import pytest

import pinmem.safetensors as pst
import pinmem.safetensors.numpy as pnp
from pinmem.safetensors import _format

# Python-level calls per tensor a load_file may make, at most: the torch
# path makes pinmem.torch's over_bytes and element_size (and one to
# spare); NumPy's makes
# the Checkpoint's __getitem__ and PinnedArray's registration (its
# __array_finalize__, the mapping's lookup, the weak dictionary's
# insertion). The slow path made 20 and more.
TORCH_CALLS = 3
NUMPY_CALLS = 8


def write_header(path, names, shape=(2,), nbytes=8, order=None):
    """A safetensors file of F32 tensors of shape, one after another in
    the order of names (the header in the order of `order`, default the
    same), each its index's bytes."""
    ents = {}
    for i, n in enumerate(names):
        ents[n] = {"dtype": "F32", "shape": list(shape),
                   "data_offsets": [i * nbytes, (i + 1) * nbytes]}
    keys = order or names
    head = json.dumps({k: ents[k] for k in keys},
                      separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    data = np.arange(len(names) * nbytes // 4, dtype="<f4").tobytes()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + data)
    return path


def calls_of(fn, *args, **kw):
    """fn's result and the Python-level calls made while it ran."""
    n = [0]

    def count(frame, event, arg):
        if event == "call":
            n[0] += 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # shared=True without service
        sys.setprofile(count)
        try:
            out = fn(*args, **kw)
        finally:
            sys.setprofile(None)
    return out, n[0]


def per_tensor(scratch, load, small=300, big=1200):
    """Python-level calls per tensor added between a header of `small`
    tensors and one of `big`, each file loaded once first (imports)."""
    counts = []
    for n in (small, big):
        path = write_header(os.path.join(scratch, "n%d.safetensors" % n),
                            ["t%06d" % i for i in range(n)])
        calls_of(load, path)
        out, calls = calls_of(load, path)
        assert len(out) == n
        first = out["t000001"]
        assert tuple(first.shape) == (2,)
        assert [float(x) for x in first] == [2.0, 3.0]
        del out, first
        counts.append(calls)
    return (counts[1] - counts[0]) / (big - small)


def test_numpy_load_file_calls_per_tensor(scratch):
    got = per_tensor(scratch, pnp.load_file)
    assert got <= NUMPY_CALLS, "%.1f Python calls per tensor" % got


@pytest.mark.torch
@pytest.mark.parametrize("shared", [False, True])
def test_torch_load_file_calls_per_tensor(scratch, shared, monkeypatch):
    pytest.importorskip("torch", reason="PyTorch is not installed")
    import pinmem.safetensors.torch as ptst
    # shared=True without a service: the private fallback, read-only.
    monkeypatch.setenv("PIN_CACHE_SOCKET",
                       os.path.join(scratch, "no-service.sock"))
    got = per_tensor(scratch, lambda p: ptst.load_file(p, shared=shared))
    assert got <= TORCH_CALLS, "%.1f Python calls per tensor" % got


def test_header_checked_in_python_only_to_word_a_refusal(scratch,
                                                         monkeypatch):
    seen = []
    parse = _format.parse_header
    monkeypatch.setattr(_format, "parse_header",
                        lambda *a: seen.append(1) or parse(*a))
    path = write_header(os.path.join(scratch, "ok.safetensors"),
                        ["a", "b"])
    assert list(pnp.load_file(path)) == ["a", "b"]
    assert seen == []
    # A hole in the data section: libpin refuses, and the error is
    # safetensors' words, from _format.
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 8)
    with pytest.raises(pst.SafetensorError) as e:
        pnp.load_file(path)
    assert seen == [1]
    assert str(e.value).startswith("Error while deserializing header: "
                                   "incomplete metadata, file not fully "
                                   "covered")


def test_empty_tensors_keep_the_header_order(scratch):
    """Empty tensors at one offset come in the order of the header, as
    safe_open's offset_keys() (the Python reader) gives them."""
    names = ["first"] + ["e%02d" % i for i in range(40)] + ["last"]
    order = ["last"] + names[-2:0:-1] + ["first"]
    path = os.path.join(scratch, "empties.safetensors")
    ents = {"first": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
            "last": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}
    for n in names[1:-1]:
        ents[n] = {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}
    head = json.dumps({k: ents[k] for k in order}).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + bytes(8))
    with pst.safe_open(path, framework="np") as f:
        want = f.offset_keys()
    assert want == ["first"] + order[1:-1] + ["last"]
    assert list(pnp.load_file(path)) == want
