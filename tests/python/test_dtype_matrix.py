# SPDX-License-Identifier: GPL-2.0
"""Every safetensors dtype through every loader: NumPy and torch
(pinmem.safetensors.numpy / .torch: load_file, safe_open().get_tensor,
get_slice) and JAX (pinmem.jax.load_safetensors), each load private,
shared=True served by pinmem-cached, and shared=True falling back to a
private load with no service answering.

Each file holds one tensor of 2 x 4 elements. A dtype the framework has
must come back bit for bit as the file holds it, read at the address the
framework uses, and that address must lie in pinned memory (the private
load's mapping, or the service's view: no copy, Documentation/python.md);
shared results are read-only. A dtype the framework lacks must raise the
documented error, naming the dtype. torch runs under Debian's python3
(50-python), JAX under the venv (52-python-venv); NumPy under both, with
and without ml_dtypes. On the host the service runs on the portable
backend, in the guests on the device backend."""
import ctypes
import json
import math
import os
import re
import shutil
import struct
import tempfile
import warnings

import numpy as np
import pytest

from pinmem import core
from pinmem.safetensors import safe_open, shared
from pinmem.safetensors import numpy as stnp
from helpers import CACHED, cached_service

# safetensors dtype -> bits per element
BITS = {"BOOL": 8, "U8": 8, "I8": 8, "U16": 16, "I16": 16, "U32": 32,
        "I32": 32, "U64": 64, "I64": 64, "F16": 16, "BF16": 16, "F32": 32,
        "F64": 64, "C64": 64, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8,
        "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "F4": 4, "F6_E2M3": 6,
        "F6_E3M2": 6}
SHAPE = (2, 4)
# NumPy's own types; ml_dtypes' names of the others
PLAIN = {"BOOL", "U8", "I8", "U16", "I16", "U32", "I32", "U64", "I64",
         "F16", "F32", "F64", "C64"}
ML = {"BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn",
      "F8_E5M2": "float8_e5m2", "F8_E8M0": "float8_e8m0fnu",
      "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz"}
# torch's names (present from some torch version on)
TORCH = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "U16": "uint16",
         "I16": "int16", "U32": "uint32", "I32": "int32", "U64": "uint64",
         "I64": "int64", "F16": "float16", "BF16": "bfloat16",
         "F32": "float32", "F64": "float64", "C64": "complex64",
         "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
         "F8_E8M0": "float8_e8m0fnu", "F8_E4M3FNUZ": "float8_e4m3fnuz",
         "F8_E5M2FNUZ": "float8_e5m2fnuz", "F4": "float4_e2m1fn_x2"}
# The first torch release with each of the dtypes torch 1.13 lacks.
TORCH_SINCE = {"F8_E4M3": "2.1", "F8_E5M2": "2.1", "F8_E4M3FNUZ": "2.2",
               "F8_E5M2FNUZ": "2.2", "U16": "2.3", "U32": "2.3",
               "U64": "2.3", "F8_E8M0": "2.7", "F4": "2.8"}
WIDE = {"U64", "I64", "F64"}
ROUTES = ["private", "served", "fallback"]


def _data(name):
    n = SHAPE[0] * SHAPE[1] * BITS[name] // 8
    if name == "BOOL":
        return bytes([1, 0, 1, 1, 0, 0, 1, 0])
    return bytes((i * 37 + len(name) * 11 + 5) & 0xFF for i in range(n))


def _write(d, name):
    b = _data(name)
    h = json.dumps({"w": {"dtype": name, "shape": list(SHAPE),
                          "data_offsets": [0, len(b)]}},
                   separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    path = os.path.join(d, "d-%s.safetensors" % name)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b)
    return path


def _file_bytes(path):
    """The tensor's bytes as the file holds them (read here, by hand)."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack_from("<Q", raw)[0]
    b, e = json.loads(raw[8:8 + n])["w"]["data_offsets"]
    return raw[8 + n + b:8 + n + e]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """One file per dtype, on a disk (the service does not cache files on
    tmpfs; the guest's /tmp is one): its scratch disk where there is one."""
    base = os.environ.get("PINMEM_SCRATCH")
    if base and os.path.isdir(base):
        d = tempfile.mkdtemp(prefix="pytest-dtypes-", dir=base)
    else:
        d, base = str(tmp_path_factory.mktemp("dtypes")), None
    yield d, {n: _write(d, n) for n in BITS}
    if base:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def service(files):
    if not os.path.exists(CACHED):
        pytest.skip("pinmem-cached is not built")
    with cached_service(files[0]) as sock:
        yield sock


class Route:
    """How a test loads: shared= to pass, and, for a served load, the
    service's images (ranges) the loader got."""

    def __init__(self, kind, request, monkeypatch):
        self.kind, self.images, self.said = kind, [], []
        self.shared = kind != "private"
        if kind == "served":
            monkeypatch.setenv("PIN_CACHE_SOCKET",
                               request.getfixturevalue("service"))
            real = shared.open_image

            def spy(*a, **kw):
                got = real(*a, **kw)
                assert got is not None, "the service did not serve"
                lo = got[0].__array_interface__["data"][0]
                self.images.append((lo, lo + got[0].nbytes))
                return got
            monkeypatch.setattr(shared, "open_image", spy)
        elif kind == "fallback":
            d = request.getfixturevalue("files")[0]
            monkeypatch.setenv("PIN_CACHE_SOCKET",
                               os.path.join(d, "no-service.sock"))
            monkeypatch.setattr(shared, "_warned", [])

    def load(self, fn):
        """fn()'s result; the fallback's warning is checked."""
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                return fn()
            finally:
                if self.kind == "fallback":
                    assert any("loading privately" in str(x.message)
                               for x in w), [str(x.message) for x in w]

    def check(self, ptr, want, mapping):
        """want is at ptr, in the service's view (served) or in the
        pinned mapping the loader made (mapping: (start, end))."""
        n = len(want)
        assert ctypes.string_at(ptr, n) == want
        if self.kind == "served":
            assert any(lo <= ptr and ptr + n <= hi
                       for lo, hi in self.images), (hex(ptr), self.images)
        else:
            assert mapping is not None and \
                mapping[0] <= ptr and ptr + n <= mapping[1]


def _named(name):
    return r"(?<![A-Z0-9_])%s(?![A-Z0-9_])" % re.escape(name)


def _numpy_has(name):
    if name in PLAIN:
        return True
    try:
        import ml_dtypes
    except ImportError:
        return False
    # pinmem's NumPy loaders name the types safetensors has by name
    return name in ("BF16", "F8_E4M3", "F8_E5M2") and \
        hasattr(ml_dtypes, ML[name])


def _np_mapping(a):
    m = core._mapping_of(a)
    return (m.addr, m.addr + m.length) if m is not None else None


APIS = [("load_file", r) for r in ROUTES] + [("get_tensor", "private"),
                                             ("get_slice", "private")]


def _get(api, route, path, fw, load_file):
    if api == "load_file":
        return route.load(lambda: load_file(path, shared=route.shared)["w"])
    with safe_open(path, fw) as f:
        if api == "get_tensor":
            return f.get_tensor("w")
        return f.get_slice("w")[1:]


@pytest.mark.parametrize("api,route", APIS)
@pytest.mark.parametrize("name", list(BITS))
def test_numpy(name, api, route, files, request, monkeypatch):
    path = files[1][name]
    r = Route(route, request, monkeypatch)
    if not _numpy_has(name):
        with pytest.raises(TypeError, match=_named(name)):
            _get(api, r, path, "np", stnp.load_file)
        return
    a = _get(api, r, path, "np", stnp.load_file)
    want = _file_bytes(path)
    if api == "get_slice":
        want = want[len(want) // 2:]
    assert a.tobytes() == want and not a.flags.writeable
    r.check(a.__array_interface__["data"][0], want, _np_mapping(a))


@pytest.mark.torch
@pytest.mark.parametrize("api,route", APIS)
@pytest.mark.parametrize("name", list(BITS))
def test_torch(name, api, route, files, request, monkeypatch):
    torch = pytest.importorskip("torch")
    import pinmem.torch as pt
    from pinmem.safetensors import torch as stt
    path = files[1][name]
    r = Route(route, request, monkeypatch)
    if not hasattr(torch, TORCH.get(name, "-")):
        with pytest.raises(TypeError, match=_named(name)) as e:
            _get(api, r, path, "pt", stt.load_file)
        _says_torch_lacks(str(e.value), "w", name, torch)
        return
    t = _get(api, r, path, "pt", stt.load_file)
    assert t.dtype == getattr(torch, TORCH[name]) and t.is_contiguous()
    # F4: torch's float4_e2m1fn_x2 counts bytes, the file elements
    want_shape = (2, 2) if name == "F4" else SHAPE
    if api == "get_slice":
        want_shape = (1,) + want_shape[1:]
    assert tuple(t.shape) == want_shape
    want = _file_bytes(path)
    if api == "get_slice":
        want = want[len(want) // 2:]
    assert t.numel() * t.element_size() == len(want)
    assert isinstance(t, pt.ReadOnlyTensor) == r.shared
    r.check(t.data_ptr(), want, pt.mapping_range(t))


def _says_torch_lacks(msg, tensor, name, torch):
    """msg names the tensor, its dtype, this torch and the release that
    has the dtype (none has F6)."""
    assert "'%s'" % tensor in msg and torch.__version__ in msg, msg
    since = TORCH_SINCE.get(name)
    assert ("torch %s and later" % since) in msg if since else \
        "no torch release" in msg, msg


@pytest.mark.torch
@pytest.mark.parametrize("name", list(BITS))
def test_torch_lacks_keeps_rest(name, tmp_path):
    """A file with a tensor of a dtype this torch lacks: safe_open still
    lists every key and gives the other tensors; that one's error names
    it, its dtype and the torch that has it (load_file fails whole)."""
    torch = pytest.importorskip("torch")
    from pinmem.safetensors import torch as stt
    b = _data(name)
    h = json.dumps({"a": {"dtype": "U8", "shape": [2],
                          "data_offsets": [0, 2]},
                    "w": {"dtype": name, "shape": list(SHAPE),
                          "data_offsets": [2, 2 + len(b)]}}).encode()
    path = tmp_path / "two.safetensors"
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"\x07\x09" + b)
    with safe_open(str(path), "pt") as f:
        assert f.keys() == ["a", "w"]
        assert f.get_slice("w").get_shape() == list(SHAPE)
        assert f.get_slice("w").get_dtype() == name
        if hasattr(torch, TORCH.get(name, "-")):
            assert f.get_tensor("w").dtype == getattr(torch, TORCH[name])
            return
        for get in (lambda: f.get_tensor("w"), lambda: f.get_slice("w")[:1]):
            with pytest.raises(TypeError, match=_named(name)) as e:
                get()
            _says_torch_lacks(str(e.value), "w", name, torch)
        assert f.get_tensor("a").tolist() == [7, 9]
    with pytest.raises(TypeError, match=_named(name)):
        stt.load_file(str(path))


def _jax_has(name, ml_dtypes):
    return name in PLAIN or hasattr(ml_dtypes, ML.get(name, "-"))


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", list(BITS))
def test_jax(name, route, files, request, monkeypatch):
    jax = pytest.importorskip("jax", reason="jax is not installed")
    import ml_dtypes
    import pinmem.jax as pj
    path = files[1][name]
    r = Route(route, request, monkeypatch)
    load = lambda: pj.load_safetensors(path, shared=r.shared)  # noqa: E731
    if not _jax_has(name, ml_dtypes):
        with pytest.raises(ValueError, match="%s, which JAX has no type" %
                           _named(name)):
            r.load(load)
        return
    if name in WIDE and not jax.config.jax_enable_x64:
        with pytest.raises(ValueError, match=r'x64="numpy"'):
            r.load(load)
        return
    out = r.load(load)
    x = out["w"]
    assert out.formats == {"w": name} and out.copied == []
    assert x.shape == SHAPE
    want = _file_bytes(path)
    assert np.asarray(x).tobytes() == want
    r.check(x.unsafe_buffer_pointer(), want, pj.mapping_range(x))


# Shapes the differential test saves: a matrix, a scalar, empty tensors.
REF_SHAPES = [(2, 4), (), (0,), (2, 0)]


def _ref_tensor(torch, name, shape):
    """A tensor of name's torch dtype and shape with varied bits."""
    dt = getattr(torch, TORCH[name])
    n = math.prod(shape) * torch.empty((), dtype=dt).element_size()
    raw = torch.tensor([(i * 37 + 5) & (1 if name == "BOOL" else 0xFF)
                        for i in range(n)], dtype=torch.uint8)
    return raw.view(dt).reshape(shape)


def _tbytes(t):
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size())


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert _tbytes(got) == _tbytes(want)


def _dlpack(torch, t):
    """torch's DLPack round trip of t: the tensor, or the error's type."""
    try:
        return torch.from_dlpack(t)
    except Exception as e:      # torch's answer for a dtype DLPack lacks
        return type(e)


@pytest.mark.torch
@pytest.mark.parametrize("shape", REF_SHAPES, ids=str)
@pytest.mark.parametrize("name", [n for n in BITS if n in TORCH])
def test_torch_vs_safetensors(name, shape, tmp_path):
    """Every dtype this torch has, judged by safetensors on the same
    torch, both ways: what safetensors writes, pinmem reads bit for bit
    (load_file, load, safe_open: get_tensor, get_slice, metadata), and
    what pinmem writes (save, save_file, save_sharded) is safetensors'
    file; a DLPack export does what torch does with safetensors' own."""
    torch = pytest.importorskip("torch")
    ref = pytest.importorskip("safetensors.torch",
                              reason="safetensors is not installed")
    from safetensors import safe_open as ref_open
    from pinmem.safetensors import SafetensorError
    from pinmem.safetensors import torch as stt
    if not hasattr(torch, TORCH[name]):
        pytest.skip("torch %s has no %s" % (torch.__version__, TORCH[name]))
    x = _ref_tensor(torch, name, shape)
    meta = {"format": "pt"}
    if name == "F4" and not shape:
        # one F4 element is half a byte: both refuse, in the same words
        with pytest.raises(Exception) as want:
            ref.save({"w": x})
        with pytest.raises(SafetensorError) as got:
            stt.save({"w": x})
        assert str(got.value) == str(want.value)
        return
    image = ref.save({"w": x}, metadata=meta)
    assert stt.save({"w": x}, metadata=meta) == image
    theirs, ours = tmp_path / "ref.safetensors", tmp_path / "pin.safetensors"
    ref.save_file({"w": x}, str(theirs), metadata=meta)
    stt.save_file({"w": x}, str(ours), metadata=meta)
    assert ours.read_bytes() == theirs.read_bytes() == image
    want = ref.load_file(str(theirs))["w"]
    _same(want, x)
    _same(stt.load_file(str(theirs))["w"], want)
    _same(stt.load(image)["w"], want)
    with safe_open(str(theirs), "pt") as f, \
            ref_open(str(theirs), "pt") as g:
        assert f.metadata() == g.metadata() == meta
        _same(f.get_tensor("w"), g.get_tensor("w"))
        sl = f.get_slice("w")
        assert sl.get_shape() == g.get_slice("w").get_shape()
        assert sl.get_dtype() == g.get_slice("w").get_dtype() == name
        if shape:
            # safetensors 0.8.0's own get_slice of F4 data fails (it
            # shapes the bytes by F4's element count): its tensor's
            # slice is the judge
            _same(sl[1:], want[1:])
    index = tmp_path / "model.safetensors.index.json"
    shards = stt.save_sharded({"w": x}, str(index), max_shard_size=1 << 20)
    got = {}
    for s in shards:
        got.update(ref.load_file(str(tmp_path / s)))
    _same(got["w"], x)
    _same(stt.load_file(str(index))["w"], x)
    loaded = stt.load_file(str(ours))["w"]
    a, b = _dlpack(torch, loaded), _dlpack(torch, want)
    if isinstance(b, type):
        assert a is b
    else:
        _same(a, want)
        assert a.data_ptr() == loaded.data_ptr()


@pytest.mark.torch
def test_torch_f4_odd_last_dim(tmp_path):
    """An F4 tensor whose last dimension is odd has no float4_e2m1fn_x2
    form: safetensors' error, and safe_open's other tensors still load."""
    torch = pytest.importorskip("torch")
    from pinmem.safetensors import SafetensorError
    from pinmem.safetensors import torch as stt
    if not hasattr(torch, "float4_e2m1fn_x2"):
        pytest.skip("torch %s has no float4_e2m1fn_x2" % torch.__version__)
    h = json.dumps({"a": {"dtype": "U8", "shape": [2],
                          "data_offsets": [0, 2]},
                    "w": {"dtype": "F4", "shape": [2, 3],
                          "data_offsets": [2, 5]}}).encode()
    path = tmp_path / "odd.safetensors"
    path.write_bytes(struct.pack("<Q", len(h)) + h + bytes(range(5)))
    msg = ("f4_x2 dtype requires that the last dim be divisible by 2 in "
           "torch: got [2, 3]")
    with pytest.raises(SafetensorError, match=re.escape(msg)):
        stt.load_file(str(path))
    with safe_open(str(path), "pt") as f:
        with pytest.raises(SafetensorError, match=re.escape(msg)):
            f.get_tensor("w")
        assert f.get_tensor("a").tolist() == [0, 1]
