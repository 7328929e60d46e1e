# SPDX-License-Identifier: GPL-2.0
"""pinmem.safetensors.{numpy,torch} against safetensors 0.7's documented
behaviour: the bytes it writes, the reference library's own files, lazy
slicing, and its exception types and messages. The expected bytes and
messages are written out here by hand, not produced by the code under
test."""
import json
import os
import struct

import numpy as np
import pytest

import pinmem
from pinmem.safetensors import SafetensorError, safe_open
import pinmem.safetensors.numpy as stnp
from helpers import mapped, mapping_path

torch = pytest.importorskip("torch", reason="PyTorch is not installed "
                            "(Debian: python3-torch)")
import pinmem.torch as pt  # noqa: E402
import pinmem.safetensors.torch as stpt  # noqa: E402

REF = os.environ.get("PINMEM_FIXTURES") or os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "shared", "fixtures",
    "safetensors-reference")
REF_CODES = "BHIbhiefd"


def padded(header):
    h = header.encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h


def test_save_is_byte_identical_to_safetensors(scratch):
    """safetensors 0.7: compact JSON, __metadata__ first, tensors by
    dtype (later in its Dtype enum first: I64 > F32 > BF16 > U8), then by
    name, data back to back, header padded with spaces to 8 bytes."""
    d = {"b": torch.tensor([[1.0, -2.0, 0.5]], dtype=torch.bfloat16),
         "a": torch.tensor([1.0, 2.0], dtype=torch.float32),
         "c": torch.tensor([7, 8], dtype=torch.float32),
         "u": torch.tensor([5], dtype=torch.uint8),
         "z": torch.zeros((0, 2), dtype=torch.int64),
         "s": torch.tensor(3, dtype=torch.int64)}
    header = ('{"__metadata__":{"format":"pt"},'
              '"s":{"dtype":"I64","shape":[],"data_offsets":[0,8]},'
              '"z":{"dtype":"I64","shape":[0,2],"data_offsets":[8,8]},'
              '"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},'
              '"c":{"dtype":"F32","shape":[2],"data_offsets":[16,24]},'
              '"b":{"dtype":"BF16","shape":[1,3],"data_offsets":[24,30]},'
              '"u":{"dtype":"U8","shape":[1],"data_offsets":[30,31]}}')
    data = (struct.pack("<q", 3) + struct.pack("<2f", 1, 2) +
            struct.pack("<2f", 7, 8) + b"\x80\x3f\x00\xc0\x00\x3f" + b"\x05")
    want = padded(header) + data
    assert stpt.save(d, metadata={"format": "pt"}) == want
    path = os.path.join(scratch, "t.safetensors")
    stpt.save_file(d, path, metadata={"format": "pt"})
    assert open(path, "rb").read() == want
    # NumPy's writer, same rules; no metadata means no __metadata__ key.
    n = {"x": np.arange(3, dtype=np.int16), "w": np.ones(2, np.float64),
         "y": np.array([True, False])}
    header = ('{"w":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},'
              '"x":{"dtype":"I16","shape":[3],"data_offsets":[16,22]},'
              '"y":{"dtype":"BOOL","shape":[2],"data_offsets":[22,24]}}')
    want = padded(header) + np.ones(2).tobytes() + \
        np.arange(3, dtype="<i2").tobytes() + b"\x01\x00"
    assert padded(header).endswith(b"}" + b" " * (8 - len(header) % 8))
    assert stnp.save(n) == want
    stnp.save_file(n, path)
    assert open(path, "rb").read() == want
    # Empty, and names that JSON must escape, as serde_json escapes them.
    assert stnp.save({}) == padded("{}")
    odd = {'q"\\\n\x01é': np.zeros(1, np.uint8)}
    assert stnp.save(odd, metadata={"k\t": "v\x1f"}) == padded(
        '{"__metadata__":{"k\\t":"v\\u001f"},'
        '"q\\"\\\\\\n\\u0001é":{"dtype":"U8","shape":[1],'
        '"data_offsets":[0,1]}}') + b"\x00"
    # Big-endian input is written little-endian, as safetensors.numpy does.
    assert stnp.save({"x": np.array([1, 2], ">i4")}) == \
        stnp.save({"x": np.array([1, 2], "<i4")})


def ref_path(code):
    p = os.path.join(REF, code + ".safetensors")
    if not os.path.exists(p):
        pytest.skip("the safetensors reference files are absent (%s): they "
                    "live outside the repository" % REF)
    return p


@pytest.mark.parametrize("code", REF_CODES)
def test_reference_files_load_through_both_modules(code):
    want = np.arange(-3, 3).astype(code)
    arrays = stnp.load_file(ref_path(code))
    assert list(arrays) == [code]
    assert arrays[code].tobytes() == want.tobytes()
    assert not arrays[code].flags.writeable
    try:
        pt.dtype_from_name({"H": "U16", "I": "U32"}.get(code, "U8"))
    except KeyError:            # torch before 2.3 has no uint16/uint32
        with pytest.raises(TypeError, match="no torch"):
            stpt.load_file(ref_path(code))
    else:
        tensors = stpt.load_file(ref_path(code))
        assert tensors[code].numpy().tobytes() == want.tobytes()
    with safe_open(ref_path(code), framework="pt") as f:
        assert f.metadata() == {"test": "a"}
        assert f.keys() == [code]


def test_reference_overall_file_and_resave(scratch):
    arrays = stnp.load_file(ref_path("overall"))
    assert sorted(arrays) == sorted(REF_CODES)
    for code in REF_CODES:
        assert arrays[code].tobytes() == np.arange(-3, 3).astype(code)\
            .tobytes()
    # Saved again: the same tensors, padded and in the writer's order,
    # and every reader takes it.
    path = os.path.join(scratch, "overall.safetensors")
    stnp.save_file(arrays, path, metadata={"test": "a"})
    again = pinmem.load_safetensors(path)
    assert again.metadata == {"test": "a"}
    for code in REF_CODES:
        assert again[code].tobytes() == arrays[code].tobytes()


def test_loaded_tensors_are_pinned_and_hold_the_mapping(scratch):
    path = os.path.join(scratch, "p.safetensors")
    stpt.save_file({"a": torch.arange(1000, dtype=torch.int16),
                    "b": torch.ones(10)}, path)
    sd = stpt.load_file(path)
    a, b = sd["a"], sd["b"]
    rng = pt.mapping_range(a)
    where = mapping_path(rng)
    assert ("pinmem" in where) or ("memfd:" in where), where
    assert pt.mapping_range(b) == rng       # one mapping per file
    del sd, b
    assert mapped(rng, where) and int(a[999]) == 999
    del a
    assert not mapped(rng, where)


def test_native_and_compatible_files_read_each_other(scratch):
    t = {"w": torch.randn(33, 17).to(torch.bfloat16),
         "i": torch.arange(10, dtype=torch.int32)}
    compat = os.path.join(scratch, "compat.safetensors")
    native = os.path.join(scratch, "native.safetensors")
    stpt.save_file(t, compat)
    ck = pinmem.load_safetensors(compat)            # libpin's C reader
    assert ck.formats == {"w": "BF16", "i": "I32"}
    assert ck["w"].tobytes() == t["w"].view(torch.int16).numpy().tobytes()
    raw = {k: ck[k] for k in ck}
    pinmem.save_safetensors(native, raw, formats=ck.formats)
    with open(native, "rb") as f:
        assert (8 + struct.unpack("<Q", f.read(8))[0]) % 4096 == 0
    back = stpt.load_file(native)
    assert torch.equal(back["w"], t["w"]) and torch.equal(back["i"], t["i"])


def test_load_and_save_bytes():
    d = {"x": torch.arange(12, dtype=torch.float16).view(3, 4)}
    blob = stpt.save(d, metadata={"m": "1"})
    out = stpt.load(blob)
    assert torch.equal(out["x"], d["x"])
    assert pt.mapping_range(out["x"]) is not None     # pinned
    assert stnp.load(stnp.save({"y": np.arange(3)}))["y"].tolist() == [0, 1,
                                                                        2]


def test_get_slice_is_lazy_and_indexes_like_torch(scratch):
    path = os.path.join(scratch, "s.safetensors")
    full = torch.arange(4 * 5 * 6, dtype=torch.float32).view(4, 5, 6)
    stpt.save_file({"t": full, "u": torch.ones(2)}, path)
    with safe_open(path, framework="pt") as f:
        s = f.get_slice("t")
        assert f._img.arrays is None                # nothing read yet
        assert s.get_shape() == [4, 5, 6] and s.get_dtype() == "F32"
        assert f._img.arrays is None
        for idx in [(slice(None),), (1,), (-1,), (slice(1, 3), 2),
                    (slice(None), slice(None, None, 2)),
                    (slice(None, None, 3), slice(4, 0, -1), slice(1, 6, 2)),
                    (Ellipsis, 5), (0, Ellipsis, slice(2, 4)), (3, 4, 5),
                    (slice(2, 100),), (slice(-100, 2),)]:
            got = s[idx]
            want = full.numpy()[idx]
            want = torch.from_numpy(np.array(want, copy=True, ndmin=0))
            assert torch.equal(got, want), idx
            assert got.is_contiguous()
        assert s[1:3].shape == (2, 5, 6)
    with safe_open(path, framework="np") as f:
        s = f.get_slice("t")
        assert (s[:, ::2, 1] == full.numpy()[:, ::2, 1]).all()
        assert s[1, 2, 3].shape == () and s[1, 2, 3] == full.numpy()[1, 2, 3]
        assert not s[1].flags.writeable             # a view of the region


def test_safetensors_errors(scratch):
    missing = os.path.join(scratch, "missing.safetensors")
    with pytest.raises(FileNotFoundError) as e:
        stpt.load_file(missing)
    assert str(e.value) == 'No such file or directory: "%s"' % missing
    path = os.path.join(scratch, "e.safetensors")
    stpt.save_file({"t": torch.zeros(2, 3)}, path)
    with safe_open(path, framework="pt") as f:
        with pytest.raises(SafetensorError,
                           match="^File does not contain tensor nope$"):
            f.get_tensor("nope")
        s = f.get_slice("t")
        with pytest.raises(SafetensorError, match="index 2 out of bounds "
                           "for tensor dimension #0 of size 2"):
            s[2]
        with pytest.raises(SafetensorError, match="more slicing indexes"):
            s[0, 0, 0]
    for call in (f.keys, f.metadata, lambda: f.get_tensor("t"),
                 lambda: f.get_slice("t")):
        with pytest.raises(SafetensorError, match="^File is closed$"):
            call()
    with pytest.raises(SafetensorError, match="^framework jnp is invalid$"):
        safe_open(path, framework="jnp")
    with pytest.raises(SafetensorError, match="^device gpu is invalid$"):
        safe_open(path, framework="pt", device="gpu")
    t = torch.zeros(4, 4)
    with pytest.raises(ValueError, match="^You are trying to save a non "
                       "contiguous tensor: `t` which is not allowed"):
        stpt.save_file({"t": t.t()}, path)
    with pytest.raises(RuntimeError, match=r"Some tensors share memory.*"
                       r"\[\{'[ab]', '[ab]'\}\]"):
        stpt.save_file({"a": t, "b": t}, path)
    with pytest.raises(ValueError, match="^Expected a dict of"):
        stpt.save([t], path)
    with pytest.raises(ValueError, match="^Key `k` is invalid, expected "
                       "torch.Tensor but received <class 'list'>$"):
        stpt.save({"k": [1]})
    with pytest.raises(SafetensorError,
                       match="^dtype complex128 is not covered$"):
        stnp.save({"c": np.zeros(2, np.complex128)})
    with pytest.raises(TypeError, match="'int' object cannot be converted"):
        stnp.save({"c": np.zeros(2)}, metadata={"k": 1})
    assert open(path, "rb").read()[8:9] == b"{"      # left as it was


def write(path, blob):
    with open(path, "wb") as f:
        f.write(blob)
    return path


def header_case(h, data=b""):
    hb = h.encode() if isinstance(h, str) else h
    return struct.pack("<Q", len(hb)) + hb + data


MALFORMED = [
    ("short", b"\x01\x02", "header too small"),
    ("huge", struct.pack("<Q", 100_000_001) + b"{}", "header too large"),
    ("past_end", struct.pack("<Q", 64) + b"{}", "invalid header length"),
    ("utf8", header_case(b'{"\xff":1}'), "invalid UTF-8 in header"),
    ("start", header_case(' {}'), "invalid start character in header, "
     "must be `{`"),
    ("json", header_case('{"a":'), "invalid JSON in header"),
    ("dtype", header_case('{"a":{"dtype":"F33","shape":[1],'
                          '"data_offsets":[0,4]}}', b"\0" * 4),
     "invalid JSON in header: unknown variant `F33`"),
    ("hole", header_case('{"a":{"dtype":"U8","shape":[1],'
                         '"data_offsets":[1,2]}}', b"\0" * 2),
     "invalid offset for tensor `a`"),
    ("size", header_case('{"a":{"dtype":"F32","shape":[2],'
                         '"data_offsets":[0,4]}}', b"\0" * 4),
     "invalid shape, data type, or offset for tensor"),
    ("tail", header_case('{"a":{"dtype":"U8","shape":[1],'
                         '"data_offsets":[0,1]}}', b"\0" * 3),
     "incomplete metadata, file not fully covered"),
    ("meta", header_case('{"__metadata__":{"a":1}}'),
     "invalid JSON in header"),
]


@pytest.mark.parametrize("case", MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_files(scratch, case):
    name, blob, msg = case
    path = write(os.path.join(scratch, name + ".safetensors"), blob)
    want = "Error while deserializing header: " + msg
    for load in (stnp.load_file, stpt.load_file, lambda p: safe_open(p, "np"),
                 lambda p: stpt.load(open(p, "rb").read())):
        with pytest.raises(SafetensorError) as e:
            load(path)
        assert str(e.value).startswith(want), (str(e.value), want)


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight        # tied, as LMs do
        self.norm = torch.nn.LayerNorm(4)


def test_save_model_and_load_model_with_shared_tensors(scratch):
    torch.manual_seed(0)
    m = Tied()
    path = os.path.join(scratch, "m.safetensors")
    with pytest.raises(RuntimeError, match="Some tensors share memory"):
        stpt.save_file(m.state_dict(), path)
    stpt.save_model(m, path)
    with safe_open(path, framework="pt") as f:
        assert f.keys() == ["emb.weight", "norm.bias", "norm.weight"]
        assert f.metadata() == {"head.weight": "emb.weight"}
    m2 = Tied()
    missing, unexpected = stpt.load_model(m2, path)
    assert (set(missing), unexpected) == (set(), [])
    assert torch.equal(m2.head.weight, m.emb.weight)
    assert m2.head.weight.data_ptr() == m2.emb.weight.data_ptr()
    other = torch.nn.Linear(4, 3)
    with pytest.raises(RuntimeError, match=r"^Error\(s\) in loading "
                       r"state_dict for Linear:\n    Missing key\(s\) in "
                       r'state_dict: "bias", "weight"\n    Unexpected'):
        stpt.load_model(other, path)


def test_sharded_checkpoint_through_the_same_calls(scratch):
    a = {"x": torch.arange(5, dtype=torch.float32)}
    b = {"y": torch.ones(3, dtype=torch.bfloat16)}
    stpt.save_file(a, os.path.join(scratch, "m-1.safetensors"))
    stpt.save_file(b, os.path.join(scratch, "m-2.safetensors"))
    index = os.path.join(scratch, "m.safetensors.index.json")
    with open(index, "w") as f:
        json.dump({"metadata": {"total_size": "26"}, "weight_map": {
            "x": "m-1.safetensors", "y": "m-2.safetensors"}}, f)
    sd = stpt.load_file(index)
    assert sorted(sd) == ["x", "y"]
    assert torch.equal(sd["x"], a["x"]) and torch.equal(sd["y"], b["y"])
    with safe_open(index, framework="pt") as f:
        assert f.keys() == ["x", "y"]
        assert f.metadata() == {"total_size": "26"}
        assert torch.equal(f.get_slice("y")[1:], b["y"][1:])


def test_numpy_bf16_without_ml_dtypes_says_so(scratch):
    if pinmem.HAVE_ML_DTYPES:
        pytest.skip("ml_dtypes is installed: NumPy has bfloat16")
    path = os.path.join(scratch, "bf.safetensors")
    stpt.save_file({"w": torch.ones(2, dtype=torch.bfloat16)}, path)
    with pytest.raises(TypeError, match="BF16.*ml_dtypes.*pinmem.torch"):
        stnp.load_file(path)
    assert stpt.load_file(path)["w"].tolist() == [1.0, 1.0]
