#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Checkpoint loads across file layouts, backends and I/O geometries.

Each case writes a safetensors file to DIR (the guest's ext4 scratch disk),
loads it with `pinload --json --verify` and checks that every byte arrived
(verify "ok"), that the path asked for was taken (backend, registered
buffers, O_DIRECT) and that the load ended within a per-case time limit, so
that a kernel that hangs fails the case at once instead of at the rig's
timeout; after a timeout the remaining cases are skipped (the kernel is
suspect) and the rig's kernel checks report what happened.

The layouts are the ones that broke the kernel (issue 15: a registered
buffer of 4 KiB pages whose bvec count left to its end wraps bio->bi_vcnt,
Documentation/kernel-bug-fixed-vcnt.md): data sections that start at 8-byte aligned
offsets from 80 (about the least that holds one tensor's header) to 8200 and
at odd ones, tensors that are and are not page multiples, files
from 1 to 600 MiB, requests and queue depths at and around the defaults.

  load-matrix.py [--full] [--only TEXT] [--timeout S] DIR
  load-matrix.py --write MIB START TENSOR_MIB FILE

Without --full a fixed sample runs (make check); --full runs the whole
product (make stress). TAP on stdout.
"""
import argparse
import itertools
import json
import os
import struct
import subprocess
import sys
import time

import numpy as np

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PINLOAD = os.environ.get("PINMEM_PINLOAD",
                         os.path.join(TOP, "build", "bin", "pinload"))
MiB = 1 << 20


def header_for(tensors, data_start):
    """The JSON header, padded with spaces so that data starts at data_start."""
    meta = {}
    off = 0
    for name, dtype, shape, nbytes in tensors:
        meta[name] = {"dtype": dtype, "shape": shape,
                      "data_offsets": [off, off + nbytes]}
        off += nbytes
    raw = json.dumps(meta, separators=(",", ":")).encode()
    n = data_start - 8
    if n < len(raw):
        raise ValueError("data start %d leaves %d header bytes, %d needed"
                         % (data_start, n, len(raw)))
    return raw + b" " * (n - len(raw)), off


def tensors_for(total, tensor_bytes, dtype="BF16"):
    """Tensors of tensor_bytes each (the last one smaller) adding to total."""
    width = {"BF16": 2, "F32": 4, "U8": 1}[dtype]
    out = []
    i = 0
    left = total
    while left > 0:
        n = min(tensor_bytes, left)
        n -= n % width
        if n == 0:
            break
        out.append(("t%d" % i, dtype, [n // width], n))
        left -= n
        i += 1
    return out


def fit_tensors(total, tensor_bytes, data_start):
    """The tensors asked for, or one tensor of all the data where their
    header would not fit before data_start (a small data start leaves room
    for one name: 80 bytes is about the least that holds one tensor)."""
    tensors = tensors_for(total, tensor_bytes)
    try:
        header_for(tensors, data_start)
    except ValueError:
        tensors = tensors_for(total, total)
    return tensors


def write_file(path, tensors, data_start, seed):
    """Random bytes, with every 4 KiB of the file stamped with its offset,
    so that a page landing in the wrong place cannot match."""
    hdr, size = header_for(tensors, data_start)
    rng = np.random.default_rng(seed)
    block = rng.integers(0, 256, size=MiB, dtype=np.uint8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)))
        f.write(hdr)
        done = 0
        while done < size:
            n = min(MiB, size - done)
            chunk = block[:n].copy()
            # stamp the first 8 bytes of every 4 KiB of the *file*
            first = (-(data_start + done)) % 4096
            words = np.arange(first, n - 7, 4096)
            stamps = np.uint64(seed << 40) + (data_start + done + words).astype(np.uint64)
            for k in range(8):
                chunk[words + k] = ((stamps >> np.uint64(8 * k)) & np.uint64(0xFF)).astype(np.uint8)
            f.write(chunk.tobytes())
            done += n
    return data_start + size


class Case:
    def __init__(self, mib, data_start, tensor_mib, backend, fixed,
                 qd=16, rs=4 * MiB, note=""):
        self.mib = mib
        self.data_start = data_start
        self.tensor_mib = tensor_mib
        self.backend = backend
        self.fixed = fixed
        self.qd = qd
        self.rs = rs
        self.note = note

    def file_key(self):
        return (self.mib, self.data_start, self.tensor_mib)

    def name(self):
        return ("%s %s, %g MiB data from byte %d, tensors %s MiB, qd %d x %d KiB%s"
                % (self.backend, "fixed" if self.fixed else "no-fixed",
                   self.mib, self.data_start, self.tensor_mib, self.qd,
                   self.rs // 1024, " (" + self.note + ")" if self.note else ""))


def sample_cases():
    """make check: the reported layouts plus a spread of the rest."""
    c = []
    # the report: 8 x 64 MiB BF16 tensors, data from byte 766
    for be in ("portable", "device"):
        c.append(Case(512, 766, 64, be, True, note="issue 15"))
    # 65537 pages from the first request: the smallest file that wrapped
    c.append(Case(256, 766, 64, "portable", True, note="65537 pages"))
    c.append(Case(256, 4096, 64, "portable", True))
    c.append(Case(300, 1009, 7.5, "portable", False))
    c.append(Case(64, 80, 0.3, "portable", True, qd=1, rs=1 * MiB))
    c.append(Case(64, 2048, 1, "device", True, qd=32, rs=8 * MiB))
    c.append(Case(1, 4088, 0.1, "portable", True))
    c.append(Case(1, 8200, 0.25, "device", False))
    return c


def full_cases():
    """make stress: the product of the axes (files up to 600 MiB)."""
    c = []
    starts = [80, 128, 512, 760, 766, 1000, 1009, 1024, 2048, 4088, 4096, 4097, 4104, 8200]
    sizes = [1, 63.5, 256, 300, 600]
    tmibs = [64, 7.5]
    geos = [(16, 4 * MiB), (8, 4 * MiB), (32, 4 * MiB), (16, 1 * MiB),
            (16, 8 * MiB), (1, 64 * MiB)]
    for mib, start, tm in itertools.product(sizes, starts, tmibs):
        for be, fixed in itertools.product(("portable", "device"), (True, False)):
            qd, rs = geos[(len(c)) % len(geos)]
            c.append(Case(mib, start, tm, be, fixed, qd=qd, rs=rs))
    return c


def run_case(case, path, timeout):
    cmd = [PINLOAD, "--json", "--verify", "--no-progress",
           "--backend", case.backend, "--queue-depth", str(case.qd),
           "--request-size", str(case.rs), path]
    if not case.fixed:
        cmd.insert(1, "--no-fixed")
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # A load stuck in the kernel may not die: do not wait for it, so
        # that the rig gets to its kernel checks.
        p.kill()
        try:
            p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        return "timeout", "no result within %d s" % timeout, None
    dt = time.monotonic() - t0
    if p.returncode != 0:
        return "fail", "pinload exited %d: %s" % (p.returncode, err.strip()[-300:]), None
    try:
        r = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return "fail", "no JSON: %r" % out[-200:], None
    if r.get("verify") != "ok":
        return "fail", "verify %s" % r.get("verify"), r
    if r.get("backend") != case.backend:
        return "fail", "backend %s" % r.get("backend"), r
    if not case.fixed and r.get("fixed_buffers"):
        return "fail", "registered buffers used with --no-fixed", r
    return "ok", "%.1f s, fixed %s, direct %s%s" % (
        dt, r.get("fixed_buffers"), r.get("direct"),
        ("; " + r["fallback_reason"]) if r.get("fallback_reason") else ""), r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--timeout", type=int, default=int(os.environ.get(
        "PINMEM_MATRIX_TIMEOUT", "150")))
    ap.add_argument("--only", help="run the cases whose name contains this")
    ap.add_argument("--write", nargs=3, metavar=("MIB", "START", "TENSOR_MIB"),
                    help="only write DIR (a file name here) with that layout")
    ap.add_argument("dir")
    a = ap.parse_args()

    if a.write:
        mib, start, tmib = float(a.write[0]), int(a.write[1]), float(a.write[2])
        write_file(a.dir, fit_tensors(int(mib * MiB), int(tmib * MiB), start),
                   start, seed=1)
        return 0
    have_device = os.path.exists("/dev/pinmem")
    cases = full_cases() if a.full else sample_cases()
    if a.only:
        cases = [c for c in cases if a.only in c.name()]
    cases.sort(key=lambda c: c.file_key())
    print("1..%d" % len(cases))
    path = os.path.join(a.dir, "matrix.safetensors")
    cur = None
    dead = None
    failed = 0
    for i, case in enumerate(cases, 1):
        name = case.name()
        if dead:
            print("ok %d - %s # SKIP %s" % (i, name, dead))
            continue
        if case.backend == "device" and not have_device:
            print("ok %d - %s # SKIP no /dev/pinmem (pinmem.ko not loaded)" % (i, name))
            continue
        if case.file_key() != cur:
            tensors = fit_tensors(int(case.mib * MiB),
                                  int(case.tensor_mib * MiB), case.data_start)
            write_file(path, tensors, case.data_start, seed=i)
            cur = case.file_key()
        verdict, why, _ = run_case(case, path, a.timeout)
        if verdict == "ok":
            print("ok %d - %s: %s" % (i, name, why))
        else:
            print("not ok %d - %s: %s" % (i, name, why))
            failed += 1
            if verdict == "timeout":
                dead = "an earlier load hung: the kernel is suspect"
        sys.stdout.flush()
    if os.path.exists(path):
        os.unlink(path)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
