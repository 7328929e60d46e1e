# SPDX-License-Identifier: GPL-2.0
"""The readers the safetensors differential tests compare: the real
safetensors library (the judge), pinmem's Python reader, pinmem's
safe_open (libpin's load into pinned memory), libpin's load that places
every tensor on 64 bytes (pinmem.jax's) and libpin's C parser. Each
takes a file image and its path and returns ("ok", {name: (dtype, shape,
bytes)}, metadata dict) or ("refused", why). Imported after
pytest.importorskip("safetensors").
"""
import ctypes
import os

import numpy as np
import safetensors as st

from pinmem import _lib
from pinmem._lib import lib
from pinmem.safetensors import _format
import pinmem
import pinmem.safetensors as pst

lib.pin_st_parse_buffer.restype = ctypes.c_int
lib.pin_st_parse_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                    ctypes.c_uint64, ctypes.c_char_p]
lib.pin_st_create.restype = ctypes.c_void_p
lib.pin_st_close.argtypes = [ctypes.c_void_p]


def real_read(blob, path):
    try:
        items = st.deserialize(blob)
    except st.SafetensorError as e:
        bytes_verdict = ("refused", str(e))
    else:
        bytes_verdict = ("ok", {n: (d["dtype"], tuple(d["shape"]),
                                    bytes(d["data"])) for n, d in items})
    try:
        with st.safe_open(path, framework="np") as f:
            meta = f.metadata()
            keys = sorted(f.keys())
    except st.SafetensorError as e:
        file_verdict = ("refused", str(e))
    else:
        file_verdict = ("ok", keys, meta)
    # The real library's two readers agree with each other.
    assert bytes_verdict[0] == file_verdict[0], (bytes_verdict,
                                                 file_verdict)
    if bytes_verdict[0] == "refused":
        return bytes_verdict
    assert file_verdict[1] == sorted(bytes_verdict[1])
    return "ok", bytes_verdict[1], file_verdict[2] or {}


def pin_py_read(blob, path):
    """pinmem's Python reader: _format's header checks, over the bytes and
    over the file, which must agree."""
    try:
        meta, ents, start = _format.parse_bytes(blob)
    except pst.SafetensorError as e:
        verdict = ("refused", str(e))
    else:
        verdict = ("ok", {n: (dt, tuple(shape), blob[start + b:start + e])
                          for n, dt, shape, b, e in ents}, meta or {})
    try:
        fmeta, fents, _ = _format.parse_file(path)
    except pst.SafetensorError:
        assert verdict[0] == "refused", "parse_bytes took what parse_file " \
            "refused"
    else:
        assert verdict[0] == "ok", "parse_file took what parse_bytes refused"
        assert fmeta == meta and fents == ents
    return verdict


def numpy_holds(shape):
    try:
        np.empty(shape, np.uint64)
    except (ValueError, MemoryError):
        return False
    return True


def pin_load(path):
    """pinmem's safe_open: the header checked, the data read by libpin
    into a sealed pinned region. None (not compared) for a file with a
    tensor of a shape NumPy cannot hold (over 64 dimensions, or sizes
    whose product overflows before a zero), which neither library's NumPy
    loader can give."""
    try:
        with pst.safe_open(path, framework="np") as f:
            meta = f.metadata() or {}
            names = f.offset_keys()
            shapes = {n: (f.get_slice(n).get_dtype(),
                          tuple(f.get_slice(n).get_shape())) for n in names}
            if not all(numpy_holds(s[1]) for s in shapes.values()):
                return None
            ck = f.checkpoint
            out = {n: shapes[n] + (ck[n].tobytes(),) for n in names}
            for n in names:
                assert ck.formats[n] == shapes[n][0]
            return "ok", out, meta
    except pst.SafetensorError as e:
        return "refused", str(e)


def pin_aligned_load(path):
    """libpin's load with PIN_ST_LOAD_ALIGN (pinmem.jax's): the file's
    bytes, each tensor at a multiple of 64 bytes of its region and the
    padding between tensors zero (checked here). None where NumPy cannot
    hold a shape, as pin_load."""
    from pinmem import core
    try:
        ck = pinmem.load_safetensors(path, align=True)
    except pinmem.PinError as e:
        assert e.errno == 22, e
        return "refused", str(e)
    except ValueError as e:             # a shape NumPy cannot hold
        assert "dimension" in str(e) or "too big" in str(e), e
        return None
    try:
        _, ents, _ = _format.parse_file(path)
        out, places = {}, []
        for name, dt, shape, b, e in ents:
            a = ck[name]
            m = core._mapping_of(a)
            off = a.__array_interface__["data"][0] - m.addr + m.offset
            assert off % 64 == 0, (path, name, off)
            out[name] = (dt, tuple(shape), a.tobytes())
            places.append((off, off + e - b))
        if places:
            places.sort()
            r = ck.regions[0]
            with r.view(np.uint8, (places[-1][1] - places[0][0],),
                        offset=places[0][0]) as v:
                lo = places[0][0]
                gaps = [(end, nxt) for (_, end), (nxt, _) in
                        zip(places, places[1:])
                        if v[end - lo:nxt - lo].any()]
                assert not gaps, (path, "padding not zero", gaps)
        return "ok", out, dict(ck.metadata)
    finally:
        ck.close()
        for r in ck.regions or ():
            r.close()


def _c_tensors(ck, with_data, blob=None):
    out = {}
    t = _lib.init(_lib.PinStTensor)
    for i in range(lib.pin_st_count(ck)):
        assert lib.pin_st_tensor(ck, i, ctypes.byref(t)) == 0
        dt = _lib.text(lib.pin_dtype_name(t.dtype))
        shape = tuple(t.shape[k] for k in range(t.ndim))
        if with_data:
            data = ctypes.string_at(t.data, t.nbytes) if t.nbytes else b""
        else:
            data = blob[t.file_offset:t.file_offset + t.nbytes]
        out[t.name.decode("utf-8")] = (dt, shape, data)
    meta = {}
    for i in range(lib.pin_st_metadata_count(ck)):
        k, v = ctypes.c_char_p(), ctypes.c_char_p()
        assert lib.pin_st_metadata(ck, i, ctypes.byref(k), ctypes.byref(v)) \
            == 0
        meta[k.value.decode("utf-8")] = v.value.decode("utf-8")
    return out, meta


def pin_c_read(blob, path):
    """libpin's C parser, over the bytes (pin_st_parse_buffer) and over
    the file (pin_st_parse_file, the header reader pin_st_load uses),
    which must agree."""
    verdicts = []
    for parse in ("buffer", "file"):
        ck = lib.pin_st_create()
        try:
            if parse == "buffer":
                ret = lib.pin_st_parse_buffer(ck, blob, len(blob), b"corpus")
            else:
                ret = lib.pin_st_parse_file(ck, os.fsencode(path))
            if ret:
                assert ret == -22, (ret, _lib.text(lib.pin_st_error(ck)))
                verdicts.append(("refused",
                                 _lib.text(lib.pin_st_error(ck))))
            else:
                verdicts.append(("ok",) + _c_tensors(ck, parse == "buffer",
                                                     blob))
        finally:
            lib.pin_st_close(ck)
    assert verdicts[0][0] == verdicts[1][0], verdicts
    if verdicts[0][0] == "ok":
        assert verdicts[0] == verdicts[1]
    return verdicts[0]


PIN_READERS = {"python": lambda b, p: pin_py_read(b, p),
               "c": pin_c_read,
               "load": lambda b, p: pin_load(p),
               "aligned": lambda b, p: pin_aligned_load(p)}
