#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Independent safetensors writer and checker for libpin's tests.

Written from the published format (huggingface/safetensors README), with
nothing but struct and json, so that libpin's reader is tested against files
it did not write and its writer against a reader it does not share.

  stgen.py gen DIR     write the fixtures and DIR/manifest.txt
  stgen.py check FILE  check a file libpin wrote: format, 4096-aligned data
                       section, and every tensor's bytes = pattern(name)

Tensor bytes follow pattern(name, j) = (fnv1a32(name) + 131 * j) & 0xff
(& 1 for BOOL); tests/io/io-test.h computes the same.
"""
import json
import os
import random
import struct
import sys

BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32,
    "F32": 32, "F64": 64, "I64": 64, "U64": 64, "C64": 64, "F4": 4,
    "F6_E2M3": 6, "F6_E3M2": 6,
}


def fnv1a32(s):
    h = 0x811C9DC5
    for b in s.encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def pattern(name, dtype, n):
    seed = fnv1a32(name)
    mask = 1 if dtype == "BOOL" else 0xFF
    return bytes(((seed + 131 * j) & 0xFF) & mask for j in range(n))


def nbytes(dtype, shape):
    count = 1
    for d in shape:
        count *= d
    bits = count * BITS[dtype]
    assert bits % 8 == 0, (dtype, shape)
    return bits // 8


def write(path, tensors, metadata=None, pad=0, shuffle=True):
    """tensors: list of (name, dtype, shape). Header padded with `pad`
    spaces only (so the data section usually starts unaligned)."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    entries = []
    for name, dtype, shape in tensors:
        n = nbytes(dtype, shape)
        entries.append((name, {"dtype": dtype, "shape": list(shape),
                               "data_offsets": [len(data), len(data) + n]}))
        data += pattern(name, dtype, n)
    if shuffle:
        random.Random(path).shuffle(entries)
    for name, e in entries:
        header[name] = e
    text = json.dumps(header, ensure_ascii=False,
                      separators=(",", ":")).encode() + b" " * pad
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.write(data)
    return 8 + len(text)


def gen(d):
    os.makedirs(d, exist_ok=True)
    man = []

    def add(fname, tensors, **kw):
        start = write(os.path.join(d, fname), tensors, **kw)
        for name, dtype, shape in tensors:
            man.append("%s %s %s %s" % (fname, name, dtype,
                                        ",".join(map(str, shape)) or "-"))
        return start

    alld = [
        ("bool", "BOOL", [3, 5]), ("u8", "U8", [7]), ("i8", "I8", [1, 1, 3]),
        ("f8e5m2", "F8_E5M2", [5]), ("f8e4m3", "F8_E4M3", [2, 3]),
        ("f8e8m0", "F8_E8M0", [4]), ("i16", "I16", [3, 3]),
        ("u16", "U16", [5]), ("f16", "F16", [2, 7]), ("bf16", "BF16", [9]),
        ("i32", "I32", [3, 1]), ("u32", "U32", [2]), ("f32", "F32", [1, 2, 3]),
        ("f64", "F64", [3]), ("i64", "I64", [2, 2]), ("u64", "U64", [1]),
        ("c64", "C64", [3]), ("f4", "F4", [2, 3]), ("f6e2m3", "F6_E2M3", [4]),
        ("f6e3m2", "F6_E3M2", [2, 4]), ("scalar", "F32", []),
        ("empty0", "F32", [0]), ("empty1", "I64", [3, 0, 2]),
        ("odd.name/with \"quotes\" é", "U8", [13]),
    ]
    s = add("alldtypes.safetensors", alld,
            metadata={"format": "pt", "note": "é \"q\" \\ end"})
    assert s % 8 != 0
    add("empty-meta.safetensors", [("a", "F16", [3]), ("b", "U8", [1])],
        metadata={})
    add("no-tensors.safetensors", [], metadata={"only": "metadata"})
    add("unaligned.safetensors", [("x", "F64", [5, 3]), ("y", "I8", [1])],
        pad=3)
    add("big.safetensors", [("w0", "F32", [1024, 300]),
                            ("w1", "BF16", [777, 1000]),
                            ("w2", "U8", [12345])])
    # A sharded checkpoint with an index.
    shards = [[("layer.0.w", "F32", [64, 33]), ("layer.0.b", "F32", [33])],
              [("layer.1.w", "BF16", [128, 17])],
              [("layer.2.w", "F16", [5, 5, 5]), ("layer.2.b", "U8", [0])]]
    wm = {}
    total = 0
    for i, ts in enumerate(shards):
        fname = "model-%05d-of-%05d.safetensors" % (i + 1, len(shards))
        add(fname, ts, metadata={"format": "pt"})
        for name, dtype, shape in ts:
            wm[name] = fname
            total += nbytes(dtype, shape)
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f,
                  indent=2)
    with open(os.path.join(d, "manifest.txt"), "w") as f:
        f.write("\n".join(man) + "\n")


def check(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    text = blob[8:8 + n]
    if (8 + n) % 4096:
        return "data section starts at %d, not a multiple of 4096" % (8 + n)
    if text[:1] != b"{" or text.rstrip(b" ").decode()[-1] != "}":
        return "header does not start with { or end in } + spaces"
    header = json.loads(text.decode())
    header.pop("__metadata__", None)
    data = blob[8 + n:]
    at = 0
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        b, end = e["data_offsets"]
        if b != at:
            return "%s: begins at %d, expected %d" % (name, b, at)
        if end - b != nbytes(e["dtype"], e["shape"]):
            return "%s: size mismatch" % name
        if data[b:end] != pattern(name, e["dtype"], end - b):
            return "%s: bytes differ from the pattern" % name
        at = end
    if at != len(data):
        return "data section is %d bytes, tensors cover %d" % (len(data), at)
    return None


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "gen":
        gen(sys.argv[2])
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "check":
        err = check(sys.argv[2])
        if err:
            print("%s: %s" % (sys.argv[2], err), file=sys.stderr)
            return 1
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
