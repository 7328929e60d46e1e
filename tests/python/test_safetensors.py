# SPDX-License-Identifier: GPL-2.0
"""safetensors through the binding: save with libpin's writer, check the
file with an independent reader (json + NumPy), load into pinned regions
and compare. bfloat16 and float8 included."""
import json
import os
import struct

import numpy as np
import pytest

import pinmem
from helpers import mapped, mapping_path


def read_independently(path):
    """name -> (dtype name, shape, raw bytes), straight from the file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        out[name] = (e["dtype"], tuple(e["shape"]), data[b:end])
    return out, header.get("__metadata__", {}), 8 + n


def rng_bits(shape, dtype, seed):
    r = np.random.default_rng(seed)
    n = int(np.prod(shape))
    return r.integers(0, 256, n * np.dtype(dtype).itemsize,
                      dtype=np.uint8).view(dtype).reshape(shape)


# Formats NumPy lacks (without ml_dtypes): raw void bytes of the element
# size, saved under an explicitly given format name.
RAW = {"BF16": (pinmem.bfloat16 if pinmem.HAVE_ML_DTYPES else "V2"),
       "F8_E4M3": (pinmem.float8_e4m3fn if pinmem.HAVE_ML_DTYPES else "V1"),
       "F8_E5M2": (pinmem.float8_e5m2 if pinmem.HAVE_ML_DTYPES else "V1")}


def test_raw_formats_cannot_be_mislabelled(scratch):
    """Without ml_dtypes no dtype stands for BF16 over integer values:
    np.ones of pinmem.bfloat16 was saved as BF16 bits 0x0001 before."""
    if pinmem.HAVE_ML_DTYPES:
        pytest.skip("ml_dtypes is installed: bfloat16 is its dtype")
    with pytest.raises(AttributeError, match="ml_dtypes"):
        np.ones((4, 4), pinmem.bfloat16)
    path = os.path.join(scratch, "raw.safetensors")
    raw = np.ones(4, "V2")                  # b"\x01\x00" each
    with pytest.raises(ValueError, match="raw bytes"):
        pinmem.format_of(raw)
    with pytest.raises(ValueError, match="raw bytes"):
        pinmem.save_safetensors(path, {"w": raw})
    assert not os.path.exists(path)
    with pytest.raises(ValueError, match="16 bits, the array's int8 8"):
        pinmem.save_safetensors(path, {"w": np.zeros(4, np.int8)},
                                formats={"w": "BF16"})
    assert pinmem.format_of(np.zeros(3, np.uint16)) == "U16"


def test_round_trip_bf16_and_float8(scratch, dev):
    path = os.path.join(scratch, "model.safetensors")
    arrays = {
        "w.bf16": rng_bits((33, 65), RAW["BF16"], 1),
        "w.e4m3": rng_bits((17, 9), RAW["F8_E4M3"], 2),
        "w.e5m2": rng_bits((5, 7, 3), RAW["F8_E5M2"], 3),
        "f32": np.linspace(-1, 1, 300, dtype=np.float32).reshape(10, 30),
        "i64": np.arange(-5, 6, dtype=np.int64),
        "scalar": np.array(3.5, dtype=np.float64),
        "empty": np.zeros((0, 4), np.float16),
        "strided": np.arange(100, dtype=np.int32)[::3],
    }
    raw_formats = {"w.bf16": "BF16", "w.e4m3": "F8_E4M3",
                   "w.e5m2": "F8_E5M2"}
    pinmem.save_safetensors(path, arrays, metadata={"format": "pt"},
                            formats=raw_formats)

    # The file, read without libpin.
    on_disk, meta, data_start = read_independently(path)
    assert meta == {"format": "pt"}
    assert data_start % 4096 == 0
    want_names = {"w.bf16": "BF16", "w.e4m3": "F8_E4M3", "w.e5m2": "F8_E5M2",
                  "f32": "F32", "i64": "I64", "scalar": "F64",
                  "empty": "F16", "strided": "I32"}
    for name, a in arrays.items():
        dt, shape, raw = on_disk[name]
        assert dt == want_names[name]
        assert shape == a.shape
        assert raw == np.ascontiguousarray(a).tobytes()

    ck = pinmem.load_safetensors(path, dev=dev)
    assert set(ck) == set(arrays)
    assert ck.metadata == {"format": "pt"}
    assert ck.formats == want_names
    for name, a in arrays.items():
        t = ck[name]
        assert isinstance(t, pinmem.PinnedArray)
        assert t.shape == a.shape and t.dtype == a.dtype
        assert not t.flags.writeable
        assert t.tobytes() == np.ascontiguousarray(a).tobytes()
        if name not in raw_formats or pinmem.HAVE_ML_DTYPES:
            assert pinmem.format_of(t) == want_names[name]
    # Saved back as loaded, with the checkpoint's own format names.
    again = os.path.join(scratch, "again.safetensors")
    pinmem.save_safetensors(again, ck, formats=ck.formats)
    assert read_independently(again)[0] == on_disk
    st = ck.stats
    assert st["bytes"] >= sum(a.nbytes for a in arrays.values())
    if os.environ.get("PINMEM_SCRATCH") and dev.backend == "device":
        assert st["direct"], st["fallback_reason"]


def test_loaded_tensors_hold_the_region(scratch, dev):
    """The tensors of a file share one read-only view mapping of its
    region, which lives as long as any of them and no longer."""
    path = os.path.join(scratch, "hold.safetensors")
    pinmem.save_safetensors(path, {"a": np.arange(1000, dtype=np.int16),
                                   "b": np.ones(10, np.float32)})
    ck = pinmem.load_safetensors(path, dev=dev)
    a, b = ck["a"], ck["b"]
    rng = a.mapping_range
    where = mapping_path(rng)
    assert b.mapping_range == rng and mapped(rng, where)
    if dev.backend == "device":
        n0 = dev.info().nr_mappings
    ck.close()
    del b
    assert a.mapped and a[999] == 999 and mapped(rng, where)
    del a
    assert not mapped(rng, where)
    if dev.backend == "device":
        assert dev.info().nr_mappings == n0 - 1


@pytest.mark.skipif(not pinmem.HAVE_ML_DTYPES, reason="ml_dtypes is not "
                    "installed (raw void forms are tested instead)")
def test_round_trip_ml_dtypes_values(scratch, dev):
    import ml_dtypes
    path = os.path.join(scratch, "ml.safetensors")
    v = np.array([1.0, -2.5, 0.15625, 3e38], dtype=ml_dtypes.bfloat16)
    e = np.array([1.0, -0.5, 448.0], dtype=ml_dtypes.float8_e4m3fn)
    pinmem.save_safetensors(path, {"v": v, "e": e})
    ck = pinmem.load_safetensors(path, dev=dev)
    assert ck["v"].dtype == ml_dtypes.bfloat16
    assert (ck["v"].astype(np.float32) == v.astype(np.float32)).all()
    assert (ck["e"].astype(np.float32) == e.astype(np.float32)).all()


def test_sharded_index(scratch, dev):
    a = {"x": np.arange(50, dtype=np.float32)}
    b = {"y": rng_bits((9,), RAW["BF16"], 7),
         "z": np.arange(4, dtype=np.uint8)}
    pinmem.save_safetensors(os.path.join(scratch, "m-1.safetensors"), a)
    pinmem.save_safetensors(os.path.join(scratch, "m-2.safetensors"), b,
                            formats={"y": "BF16"})
    index = os.path.join(scratch, "m.safetensors.index.json")
    with open(index, "w") as f:
        json.dump({"metadata": {}, "weight_map": {
            "x": "m-1.safetensors", "y": "m-2.safetensors",
            "z": "m-2.safetensors"}}, f)
    ck = pinmem.load_safetensors(index, dev=dev)
    assert len(ck.files) == 2 and len(ck.region_ids) == 2
    assert ck["x"].tobytes() == a["x"].tobytes()
    assert ck["y"].tobytes() == b["y"].tobytes()
    assert ck["z"].tobytes() == b["z"].tobytes()
    assert ck.formats["y"] == "BF16"


def test_load_errors_carry_words(scratch, dev):
    path = os.path.join(scratch, "bad.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", 10) + b"not json!!")
    with pytest.raises(pinmem.PinError) as e:
        pinmem.load_safetensors(path, dev=dev)
    assert e.value.errno == 22 and "bad.safetensors" in e.value.strerror
    # A file that is not there: what every loader raises (python.md,
    # *Errors from the loaders*), not a PinError.
    with pytest.raises(FileNotFoundError) as e:
        pinmem.load_safetensors(os.path.join(scratch, "absent"), dev=dev)
    assert e.value.errno == 2
