#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Write a small safetensors file for pinmem-cached's tests, with nothing
but struct and json: a U8 tensor of KIB KiB whose bytes follow SEED, and a
small F32 tensor. --sharded: N such files as the shards of INDEX (a
*.index.json beside them), their tensors named "sK.big" and "sK.small".
--packed: laid out as the safetensors package may write it, no tensor on
64 bytes: the data section 8 bytes past a multiple of 64, "big" 4 bytes
longer.

  mkst.py PATH KIB [SEED] [PATH KIB SEED]...
  mkst.py --sharded INDEX N KIB
  mkst.py --packed PATH KIB SEED
  mkst.py --packed --sharded INDEX N KIB
"""
import json
import os
import struct
import sys


def write(path, kib, seed, prefix="", packed=False):
    n = kib * 1024 + (4 if packed else 0)
    big = (bytes(range(256)) * (n // 256 + 1))[:n]
    big = bytes((b + seed) & 0xFF for b in big[:4096]) + big[4096:]
    small = struct.pack("<4f", 1.0, 2.0, 3.0, float(seed))
    hdr = {
        "__metadata__": {"seed": str(seed)},
        prefix + "big": {"dtype": "U8", "shape": [n],
                         "data_offsets": [0, n]},
        prefix + "small": {"dtype": "F32", "shape": [4],
                           "data_offsets": [n, n + len(small)]},
    }
    text = json.dumps(hdr).encode()
    text += b" " * (-(8 + len(text)) % 8)
    while packed and (8 + len(text)) % 64 != 8:
        text += b" " * 8
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + big + small)
    os.rename(tmp, path)


def write_sharded(index, n, kib, packed=False):
    stem = os.path.basename(index)[:-len(".index.json")]
    weight_map = {}
    for k in range(n):
        name = "%s-%05d-of-%05d.safetensors" % (stem, k + 1, n)
        write(os.path.join(os.path.dirname(index), name), kib, k + 1,
              "s%d." % k, packed)
        weight_map["s%d.big" % k] = weight_map["s%d.small" % k] = name
    with open(index, "w") as f:
        json.dump({"metadata": {"total_size":
                                n * (kib * 1024 + 4 * packed + 16)},
                   "weight_map": weight_map}, f)


def main():
    args = sys.argv[1:]
    if args[:1] == ["--sharded"]:
        write_sharded(args[1], int(args[2]), int(args[3]))
        return
    if args[:2] == ["--packed", "--sharded"]:
        write_sharded(args[2], int(args[3]), int(args[4]), packed=True)
        return
    if args[:1] == ["--packed"]:
        write(args[1], int(args[2]), int(args[3]), packed=True)
        return
    if len(args) == 2:
        args.append("1")
    for i in range(0, len(args) - 2, 3):
        write(args[i], int(args[i + 1]), int(args[i + 2]))


main()
