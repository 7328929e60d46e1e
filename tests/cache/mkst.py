#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Write a small safetensors file for pinmem-cached's tests, with nothing
but struct and json: a U8 tensor of KIB KiB whose bytes follow SEED, and a
small F32 tensor.

  mkst.py PATH KIB [SEED] [PATH KIB SEED]...
"""
import json
import os
import struct
import sys


def write(path, kib, seed):
    n = kib * 1024
    big = (bytes(range(256)) * (n // 256 + 1))[:n]
    big = bytes((b + seed) & 0xFF for b in big[:4096]) + big[4096:]
    small = struct.pack("<4f", 1.0, 2.0, 3.0, float(seed))
    hdr = {
        "__metadata__": {"seed": str(seed)},
        "big": {"dtype": "U8", "shape": [n], "data_offsets": [0, n]},
        "small": {"dtype": "F32", "shape": [4],
                  "data_offsets": [n, n + len(small)]},
    }
    text = json.dumps(hdr).encode()
    text += b" " * (-(8 + len(text)) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + big + small)
    os.rename(tmp, path)


def main():
    args = sys.argv[1:]
    if len(args) == 2:
        args.append("1")
    for i in range(0, len(args) - 2, 3):
        write(args[i], int(args[i + 1]), int(args[i + 2]))


main()
