#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""What placing every tensor on 64 bytes costs a load (PIN_ST_LOAD_ALIGN,
pinmem.load_safetensors(align=True), which pinmem.jax uses): the same file
loaded with and without it, runs alternating, cold cache each run (root:
drop_caches); medians of the whole load's seconds, and the bytes the
placing moved and the time it took (the load's stats). Without FILE, a
checkpoint as the safetensors package lays it out (header padded to 8
bytes, so every tensor is off 64) is written to a temporary file: SIZE MiB
of F32 tensors of 1-16 MiB each. Not a test: python.md's figure comes
from it.

    tests/python/bench_align.py [--file FILE | --size MIB] [--runs N]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

PY = r"""
import sys, time
sys.path.insert(0, %r)
import pinmem
t0 = time.perf_counter()
ck = pinmem.load_safetensors(sys.argv[1], align=sys.argv[2] == "1")
t = time.perf_counter() - t0
s = ck.stats
print(t, s.get("align_bytes", 0), s.get("align_seconds", 0.0), s["bytes"])
""" % os.path.join(TOP, "libpin", "python")


def write_packed(path, mib):
    """A safetensors file laid out as the safetensors package writes one:
    an 8-byte length, the JSON header padded with spaces to a multiple of
    8 (not of 64), tensors back to back."""
    sizes, left, i = [], mib << 20, 0
    while left > 0:
        n = min(left, ((i % 16) + 1) << 20)
        sizes.append(n)
        left -= n
        i += 1
    hdr, at = {}, 0
    for k, n in enumerate(sizes):
        hdr["layer.%d.weight" % k] = {"dtype": "F32", "shape": [n // 4],
                                      "data_offsets": [at, at + n]}
        at += n
    text = json.dumps(hdr, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    if (8 + len(text)) % 64 == 0:
        text += b" " * 8
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        chunk = bytes(range(256)) * 4096
        for n in sizes:
            for off in range(0, n, len(chunk)):
                f.write(chunk[:min(len(chunk), n - off)])


def drop_caches():
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--file")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    tmp = None
    path = a.file
    if not path:
        tmp = tempfile.NamedTemporaryFile(suffix=".safetensors",
                                          dir=os.environ.get("TMPDIR",
                                                             "/var/tmp"),
                                          delete=False)
        tmp.close()
        path = tmp.name
        write_packed(path, a.size)
    res = {0: [], 1: []}
    try:
        for _ in range(a.runs):
            for align in (0, 1):
                os.sync()
                drop_caches()
                out = subprocess.run([sys.executable, "-c", PY, path,
                                      str(align)], check=True,
                                     capture_output=True, text=True).stdout
                res[align].append([float(x) for x in out.split()])
    finally:
        if tmp:
            os.unlink(path)
    med = {k: [statistics.median(r[i] for r in v) for i in range(4)]
           for k, v in res.items()}
    gb = med[0][3] / 1e9
    print("file %s: %.2f GB, backend %s, %d runs each, medians" %
          (a.file or "(packed, as the safetensors package writes)", gb,
           os.environ.get("PIN_BACKEND", "auto"), a.runs))
    print("  align=False: %.3f s (%.2f GB/s)" % (med[0][0], gb / med[0][0]))
    print("  align=True:  %.3f s (%.2f GB/s), %.2f GB moved in %.3f s "
          "(%.2f GB/s)" % (med[1][0], gb / med[1][0], med[1][1] / 1e9,
                           med[1][2], med[1][1] / 1e9 / max(med[1][2], 1e-9)))


if __name__ == "__main__":
    main()
