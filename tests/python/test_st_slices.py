# SPDX-License-Identifier: GPL-2.0
"""safe_open(..., "np").get_slice(name)[key] judged by the real
safetensors library over a seeded corpus of keys: ints (negative ones
too), slices with steps, Ellipsis, lists of indices, and things neither
takes.

Where safetensors answers, pinmem gives the same array (shape, dtype,
values); where it refuses, pinmem refuses with the same exception and
words -- but where safetensors 0.8 fails on a stepped slice whose stop
lies before its start (ValueError "cannot reshape ...": pinmem gives
NumPy's empty array), and for lists of indices, which safetensors does not implement
("Non empty lists are not implemented", "Unsupported slice index ..."):
pinmem takes them as NumPy (and torch) do, and refuses only what NumPy
refuses (an index out of range) or what safetensors refuses for the same
key with each list made a one-element slice (its bounds rules).

Run alone: $(tests/python-venv path)/bin/python -m pytest -q
tests/python/test_st_slices.py (PIN_BACKEND=portable on a host without
the module).
"""
import os
import random

import numpy as np
import pytest

st = pytest.importorskip("safetensors", reason="safetensors is not "
                         "installed (the venv of tests/python-venv has it)")
import safetensors.numpy as snp  # noqa: E402

from pinmem.safetensors import SafetensorError, safe_open  # noqa: E402

SEED = 40
SHAPES = {"a": (3, 4, 5), "v": (6,), "m": (2, 3), "s": ()}
UNSUPPORTED = ["x", None, 1.5, (0, 1), range(2)]


def _int(rng, n):
    return rng.choice([0, 1, n - 1, n, n + 1, -1, -n, -n - 1])


def _slice(rng, n):
    b = [None, 0, 1, n // 2, n, n + 2]
    return slice(rng.choice(b), rng.choice(b), rng.choice([None, 1, 2, 3]))


def _list(rng, n):
    k = rng.choice([0, 1, 2, 3])
    vals = [rng.randrange(-n, n) for _ in range(k)]
    if rng.random() < 0.15:
        vals.append(rng.choice([n, -n - 1]))      # out of range
    return vals


def _item(rng, n):
    r = rng.random()
    if r < 0.3:
        return _int(rng, n)
    if r < 0.6:
        return _slice(rng, n)
    if r < 0.9:
        return _list(rng, n)
    return rng.choice(UNSUPPORTED)


def keys(rng, shape):
    """Keys for a tensor of shape, some with more items than dimensions."""
    out = []
    for _ in range(40):
        dims = list(shape) + [2]
        k = rng.randint(0, len(shape) + (1 if rng.random() < 0.1 else 0))
        items = [_item(rng, max(dims[d], 1)) for d in range(k)]
        if items and rng.random() < 0.2:
            items.insert(rng.randrange(len(items) + 1), Ellipsis)
        if len(items) == 1 and rng.random() < 0.5:
            out.append(items[0])            # a bare key: s[3], s[[0, 2]]
        else:
            out.append(tuple(items))
    return out + [[], [0], [[0]], (Ellipsis,), (Ellipsis, Ellipsis)]


def has_list(key):
    items = key if isinstance(key, tuple) else (key,)
    return any(isinstance(i, list) and (i or key is not i) for i in items)


def outcome(fn):
    try:
        return "ok", np.asarray(fn())
    except Exception as e:      # noqa: BLE001 - the verdict is the type
        return type(e).__name__, str(e)


def numpy_outcome(full, key):
    items = key if isinstance(key, tuple) else (key,)
    items = tuple(np.asarray(i, np.intp) if isinstance(i, list) else i
                  for i in items)
    return outcome(lambda: full[items])


def without_lists(key):
    items = key if isinstance(key, tuple) else (key,)
    return tuple(slice(0, 1) if isinstance(i, list) else i for i in items)


def test_get_slice_agrees_with_safetensors(tmp_path):
    path = str(tmp_path / "slices.safetensors")
    rng = random.Random(SEED)
    full = {n: (np.arange(int(np.prod(s)), dtype=np.float32) * 3 + 1)
            .reshape(s) for n, s in SHAPES.items()}
    snp.save_file(full, path)
    real = st.safe_open(path, framework="np")
    n_lists = n_same = n_bugs = 0
    with safe_open(path, framework="np") as mine:
        for name, shape in SHAPES.items():
            rs, ms = real.get_slice(name), mine.get_slice(name)
            for key in keys(rng, shape):
                want = outcome(lambda: rs[key])
                got = outcome(lambda: ms[key])
                if has_list(key) and want[0] != "ok":
                    n_lists += 1
                    ref = numpy_outcome(full[name], key)
                    if got[0] == "ok":
                        assert ref[0] == "ok", (name, key, got, ref)
                        assert got[1].shape == ref[1].shape and \
                            np.array_equal(got[1], ref[1]), (name, key)
                    else:
                        assert got[0] == "SafetensorError", (name, key, got)
                        alone = outcome(lambda: rs[without_lists(key)])
                        assert ref[0] == "IndexError" or \
                            alone[0] == "SafetensorError", \
                            (name, key, got, ref, alone)
                    continue
                if want[0] == "ValueError" and "cannot reshape" in want[1]:
                    # safetensors 0.8's bug: a stepped narrow whose stop is
                    # before its start overflows; NumPy's answer (empty).
                    ref = numpy_outcome(full[name], key)
                    assert got[0] == ref[0] == "ok" and \
                        np.array_equal(got[1], ref[1]), (name, key, got)
                    n_bugs += 1
                    continue
                n_same += 1
                assert got[0] == want[0], (name, key, got, want)
                if want[0] == "ok":
                    assert got[1].dtype == want[1].dtype
                    assert got[1].shape == want[1].shape, (name, key)
                    assert np.array_equal(got[1], want[1]), (name, key)
                else:
                    assert got[1] == want[1], (name, key)
    assert n_lists >= 30 and n_same >= 100 and n_bugs, \
        (n_lists, n_same, n_bugs)


def test_lists_of_indices(tmp_path):
    """The cases the issue names, spelled out: a list as the whole key or
    for one dimension gives NumPy's (and torch's) selection; [] is
    safetensors' empty narrow; a list out of range or of non-ints is
    refused in safetensors' words."""
    path = str(tmp_path / "l.safetensors")
    a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    snp.save_file({"a": a}, path)
    with safe_open(path, framework="np") as f:
        s = f.get_slice("a")
        assert np.array_equal(s[[0, 2]], a[[0, 2]])
        assert np.array_equal(s[:, [3, 1]], a[:, [3, 1]])
        assert np.array_equal(s[1, [0, -1], 2:4], a[1, [0, -1], 2:4])
        assert np.array_equal(s[..., [4]], a[..., [4]])
        assert s[[]].shape == (0, 4, 5)
        with pytest.raises(SafetensorError, match=r"^Error during slicing "
                           r"\[:, \[1, 4\]\] with shape \[3, 4, 5\]: index 4 "
                           r"out of bounds for tensor dimension #1 of size "
                           r"4$"):
            s[:, [1, 4]]
        with pytest.raises(SafetensorError,
                           match="^Non empty lists are not implemented$"):
            s[[True, False, True]]
        with pytest.raises(SafetensorError, match="^Unsupported slice index "
                           "at position 1: expected slice, int, or "
                           "ellipsis$"):
            s[0, [0.5]]
