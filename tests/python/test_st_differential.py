# SPDX-License-Identifier: GPL-2.0
"""The real safetensors library as the judge of pinmem's safetensors
reader and writer, over the seeded corpus of st_corpus.py and
st_invalid.py (valid and invalid file images) and round trips both ways.

On every file the readers must agree: the real library
(safetensors.deserialize, and safe_open on the file), pinmem's Python
reader (pinmem.safetensors: the header checks of _format, and safe_open's
load through libpin into pinned memory) and libpin's C parser
(pin_st_parse_buffer, pin_st_parse_file): the same tensors bit for bit
(names, dtype, shape, bytes) and metadata on a valid file, a refusal from
each on an invalid one. Where the real library accepts a file the format
forbids, or one past a limit of pinmem's own, the case says why
(st_invalid.LAX, st_invalid.LIMIT) and pinmem must refuse it.

Run alone: $(tests/python-venv path)/bin/python -m pytest -q
tests/python/test_st_differential.py (PIN_BACKEND=portable on a host
without the module).
"""
import ctypes
import os
import random

import numpy as np
import pytest

from pinmem import _lib
from pinmem._lib import lib
import pinmem.safetensors.numpy as pnp

import st_corpus
import st_invalid

st = pytest.importorskip("safetensors", reason="safetensors is not "
                         "installed (the venv of tests/python-venv has it)")
import safetensors.numpy as snp  # noqa: E402
ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not "
                                "installed")
from st_judge import (PIN_READERS, pin_c_read, pin_load,  # noqa: E402
                      pin_py_read, real_read)

@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("st-corpus")


def _write(d, case):
    path = os.path.join(str(d), case.id + ".safetensors")
    with open(path, "wb") as f:
        f.write(case.blob)
    return path


def _judge(case, path, readers, invalid=False):
    """Disagreements of pinmem's readers with the real library's verdict
    on one case (an empty list when they agree)."""
    ref = real_read(case.blob, path)
    want_refusal = case.lax or case.limit
    bad = []
    if invalid and not want_refusal and ref[0] == "ok":
        bad.append("%s: the real library reads this invalid file" % case.id)
    if want_refusal:
        if ref[0] != "ok":
            bad.append("%s: the real library refuses it (%s), yet the "
                       "case says it accepts it" % (case.id, ref[1][:80]))
    for name, read in readers.items():
        try:
            got = read(case.blob, path)
        except Exception as e:      # a crash, not a refusal
            bad.append("%s: pinmem's %s reader raised %r" % (case.id, name,
                                                            e))
            continue
        if got is None:
            continue
        if want_refusal or ref[0] == "refused":
            if got[0] != "refused":
                bad.append("%s: pinmem's %s reader accepts what %s" %
                           (case.id, name, want_refusal or
                            "the real library refuses: " + ref[1][:120]))
        elif got[0] != "ok":
            bad.append("%s: pinmem's %s reader refuses a file the real "
                       "library reads: %s" % (case.id, name, got[1][:160]))
        elif got[1:] != ref[1:]:
            diff = [n for n in set(got[1]) | set(ref[1])
                    if got[1].get(n) != ref[1].get(n)]
            bad.append("%s: pinmem's %s reader differs on tensors %r%s" %
                       (case.id, name, diff[:3],
                        ", metadata" if got[2] != ref[2] else ""))
    return bad, ref[0]


# Every STRIDE-th case only ($PINMEM_ST_CORPUS_STRIDE, default 1: all).
# The emulated guests judge a fifth: the readers there differ from the
# host's only in the device backend's load.
STRIDE = int(os.environ.get("PINMEM_ST_CORPUS_STRIDE", "1"))


def test_valid_corpus_reads_alike(corpus_dir):
    """>= 500 valid files: every reader returns the real library's tensors
    bit for bit (name, dtype, shape, bytes) and its metadata."""
    cases = st_corpus.valid()
    assert len(cases) >= 500
    cases = cases[::STRIDE]
    bad, ok = [], 0
    for case in cases:
        path = _write(corpus_dir, case)
        try:
            b, verdict = _judge(case, path, PIN_READERS)
        finally:
            os.unlink(path)
        bad += b
        ok += verdict == "ok"
    assert not bad, "%d disagreements:\n%s" % (len(bad), "\n".join(bad[:30]))
    # The corpus is what it says: the real library reads every file.
    assert ok == len(cases)


def test_invalid_corpus_is_refused_by_all(corpus_dir):
    """>= 500 invalid files: the real library refuses each one (but the
    recorded lax/limit cases) and so does every pinmem reader."""
    cases = st_invalid.invalid()
    assert len(cases) >= 500
    cases = cases[::STRIDE]
    bad = []
    for case in cases:
        path = _write(corpus_dir, case)
        try:
            bad += _judge(case, path, PIN_READERS, invalid=True)[0]
        finally:
            os.unlink(path)
    assert not bad, "%d disagreements:\n%s" % (len(bad), "\n".join(bad[:30]))


def test_corpus_is_deterministic():
    a = st_invalid.invalid(60)
    b = st_invalid.invalid(60)
    assert [c.blob for c in a] == [c.blob for c in b]
    assert [c.blob for c in st_corpus.valid(40)] == \
        [c.blob for c in st_corpus.valid(40)]


# ---- the writers ------------------------------------------------------------

ML_NAMES = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu",
            "float8_e4m3fnuz", "float8_e5m2fnuz"]
NUMPY_NAMES = ["bool", "uint8", "int8", "uint16", "int16", "uint32",
               "int32", "uint64", "int64", "float16", "float32", "float64",
               "complex64"]


def _np_dtype(name):
    return np.dtype(getattr(ml_dtypes, name)) if name in ML_NAMES \
        else np.dtype(name)


def random_arrays(rng, names=NUMPY_NAMES + ML_NAMES):
    """name -> array of random bits, of random shapes (0-d and empty
    included), dtypes drawn from names."""
    out = {}
    for i in range(rng.randint(0, 6)):
        dt = _np_dtype(rng.choice(names))
        shape = tuple(rng.choice([0, 1, 2, 3, 5]) for _ in
                      range(rng.choice([0, 1, 1, 2, 3])))
        raw = bytes(rng.getrandbits(8) for _ in
                    range(int(np.prod(shape, dtype=np.int64)) * dt.itemsize))
        a = np.frombuffer(raw, np.uint8).view(dt).reshape(shape)
        if dt == np.bool_:
            a = np.asarray(a.view(np.uint8) & 1).astype(bool)
        out[rng.choice(["w", "b\u00e9", "l.%d" % i, "\U0001f600", "q\"\\"])
            + str(i)] = a
    return out


def same_arrays(a, b):
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype, k
        assert a[k].shape == b[k].shape, k
        assert a[k].tobytes() == b[k].tobytes(), k


def as_real_tensors(arrays):
    """arrays as the real library's deserialize lists them."""
    from pinmem.safetensors._format import FROM_FRAMEWORK
    return {k: (FROM_FRAMEWORK[a.dtype.name], a.shape, a.tobytes())
            for k, a in arrays.items()}


def test_numpy_save_writes_the_real_librarys_bytes():
    """pinmem.safetensors.numpy.save gives byte for byte what
    safetensors.numpy.save gives (one metadata key at most: with more the
    real library's order is a hash map's), every dtype both take."""
    rng = random.Random(st_corpus.SEED + 3)
    for i in range(60):
        arrays = random_arrays(rng)
        meta = rng.choice([None, {}, {"format": "np"}, {"\u00e9": "x\ny"}])
        ours = pnp.save(arrays, metadata=meta)
        if real_writer_bug(arrays, meta):
            continue
        assert ours == snp.save(arrays, metadata=meta), (i, arrays, meta)


def real_writer_bug(arrays, meta):
    """safetensors 0.8 writes no tensors with an empty metadata map as the
    header '{},"__metadata__":{}}', which no reader takes, itself
    included; pinmem writes '{"__metadata__":{}}'."""
    if arrays or meta != {}:
        return False
    with pytest.raises(st.SafetensorError, match="trailing characters"):
        st.deserialize(snp.save(arrays, metadata=meta))
    assert st.deserialize(pnp.save(arrays, metadata=meta)) == []
    return True


def test_real_writer_bug_is_recorded():
    assert real_writer_bug({}, {})


def test_files_written_by_one_load_in_the_other(tmp_path):
    """pinmem's save_file read by the real library, the real library's
    save_file read by pinmem (load_file where NumPy has the dtype, else
    the checkpoint's raw bytes), with several metadata keys."""
    rng = random.Random(st_corpus.SEED + 4)
    for i in range(30):
        arrays = random_arrays(rng)
        meta = {"k%d" % j: "v\u00e9" * j for j in range(rng.randint(0, 4))}
        mine, theirs = str(tmp_path / "p.st"), str(tmp_path / "r.st")
        pnp.save_file(arrays, mine, metadata=meta)
        snp.save_file(arrays, theirs, metadata=meta)
        for path in (mine, theirs)[:1 if real_writer_bug(arrays, meta)
                                    else 2]:
            with open(path, "rb") as f:
                blob = f.read()
            ref = real_read(blob, path)
            assert ref == ("ok", as_real_tensors(arrays), meta)
            assert pin_c_read(blob, path) == ref
            assert pin_load(path) == ref
            numpy_ok = {k: a for k, a in arrays.items()
                        if a.dtype.name not in ML_NAMES[3:]}
            if len(numpy_ok) == len(arrays):
                same_arrays(pnp.load_file(path), arrays)
                same_arrays(pnp.load(blob), arrays)


def c_save(path, tensors, meta):
    """libpin's writer (pin_st_save) over (name, dtype, shape, bytes)."""
    n = len(tensors)
    ts = _lib.init_array(_lib.PinStTensor, max(n, 1))
    keep = []
    for i, (name, dt, shape, data) in enumerate(tensors):
        buf = ctypes.create_string_buffer(data, max(len(data), 1))
        shp = (ctypes.c_uint64 * max(len(shape), 1))(*shape)
        keep += [buf, shp, name.encode()]
        ts[i].name = keep[-1]
        ts[i].dtype = lib.pin_dtype_from_name(dt.encode())
        ts[i].ndim = len(shape)
        ts[i].shape = ctypes.cast(shp, ctypes.POINTER(ctypes.c_uint64))
        ts[i].nbytes = len(data)
        ts[i].data = ctypes.addressof(buf)
    items = list(meta.items())
    keys = (ctypes.c_char_p * max(len(items), 1))(
        *[k.encode() for k, _ in items])
    vals = (ctypes.c_char_p * max(len(items), 1))(
        *[v.encode() for _, v in items])
    opts = _lib.init(_lib.PinIoOpts)
    opts.flags = 1                      # PIN_IO_BUFFERED
    ck = lib.pin_st_create()
    try:
        ret = lib.pin_st_save(ck, os.fsencode(path), ts, n, keys, vals,
                              len(items), ctypes.byref(opts))
        assert ret == 0, _lib.text(lib.pin_st_error(ck))
    finally:
        lib.pin_st_close(ck)


def test_libpin_writer_is_read_alike_by_the_real_library(tmp_path):
    """Files of libpin's own writer (pin_st_save: 4096-aligned data,
    every dtype, F4/F6 packed) read by the real library as written, and by
    pinmem's readers alike."""
    rng = random.Random(st_corpus.SEED + 5)
    path = str(tmp_path / "c.st")
    for i in range(24):
        m = st_corpus.Model(rng)
        tensors = [(n, dt, shape, data) for n, dt, shape, data in m.tensors
                   if "\0" not in n]
        meta = {k: v for k, v in (m.meta or {}).items()}
        c_save(path, tensors, meta)
        with open(path, "rb") as f:
            blob = f.read()
        assert (8 + struct_len(blob)) % 4096 == 0
        want = ("ok", {n: (dt, tuple(shape), data)
                       for n, dt, shape, data in tensors}, meta)
        assert real_read(blob, path) == want, i
        assert pin_py_read(blob, path) == want, i
        assert pin_c_read(blob, path) == want, i


def struct_len(blob):
    return int.from_bytes(blob[:8], "little")
