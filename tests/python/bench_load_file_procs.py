#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""N processes that each load one checkpoint the way a PyTorch user does
today: safetensors.torch.load_file, then every tensor copied into
page-locked memory (pin_memory()'s work without a GPU: an mlock()ed
anonymous mapping, as in bench_load_file.py). For N = 1, 2, 4, ... up to
--procs: the time from the start signal (every interpreter up, torch and
safetensors imported) until all N hold their pinned tensors and have read
one byte of each page, as a multiple of one process's load; and the pinned
memory (the workers' VmLck, summed) as a multiple of the file. Page cache
dropped before each step (root). The peer row of benchmarks.md's "One
checkpoint, N processes" (pinbench shared gives pinmem's rows). The
safetensors package comes from the test venv, after Debian's packages on
the path. Not a test.

    tests/python/bench_load_file_procs.py FILE [--procs N] [--runs R]
"""
import argparse
import json
import os
import statistics
import subprocess
import time

from bench_load_file import PIN, drop, venv_site

WORKER = r"""
import ctypes, mmap, os, sys
sys.path.append(sys.argv[2])
import torch
from safetensors.torch import load_file
ready, start, go = (int(x) for x in sys.argv[3:6])
libc = ctypes.CDLL(None, use_errno=True)
os.write(ready, b"i")
os.read(start, 1)
sd = load_file(sys.argv[1])
"""+ PIN + r"""
s = sum(int(d.reshape(-1).view(torch.uint8)[::4096].sum())
        for d in pinned.values())
locked = 0
for line in open("/proc/self/status"):
    if line.startswith("VmLck:"):
        locked = int(line.split()[1]) * 1024
os.write(ready, b"%d\n" % locked)
os.read(go, 1)
"""


def step(path, site, n):
    """n workers at once: (seconds until all are ready, pinned bytes)."""
    ready_r, ready_w = os.pipe()
    start_r, start_w = os.pipe()
    go_r, go_w = os.pipe()
    fds = (ready_w, start_r, go_r)
    procs = [subprocess.Popen(["/usr/bin/python3", "-c", WORKER, path, site]
                              + [str(f) for f in fds], pass_fds=fds)
             for _ in range(n)]
    for f in fds:
        os.close(f)
    with os.fdopen(ready_r, "rb") as ready:
        assert ready.read(n) == b"i" * n, "a worker did not start"
        t0 = time.perf_counter()
        os.close(start_w)           # EOF: every worker starts its load
        locked = [int(ready.readline()) for _ in range(n)]
        secs = time.perf_counter() - t0
        os.close(go_w)
    for p in procs:
        if p.wait() != 0:
            raise RuntimeError("a worker failed (%d)" % p.returncode)
    return secs, sum(locked)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    size = os.path.getsize(args.file)
    site = venv_site()
    steps = [1 << k for k in range(8) if 1 << k < args.procs] + [args.procs]
    secs = {n: [] for n in steps}
    mem = {n: [] for n in steps}
    cold = True
    for _ in range(args.runs):
        for n in steps:
            cold &= drop()
            s, m = step(args.file, site, n)
            secs[n].append(s)
            mem[n].append(m)
    one = statistics.median(secs[1])
    rows = [{"procs": n, "all_ready_s": statistics.median(secs[n]),
             "pinned_bytes": statistics.median(mem[n])} for n in steps]
    print(json.dumps({"bench": "load_file_procs", "file": args.file,
                      "bytes": size, "runs": args.runs, "cold_cache": cold,
                      "one_load_s": one, "steps": rows}))
    for r in rows:
        print("# %d procs: all ready %.3f s (%.2fx one load), pinned %.0f MiB "
              "(%.2fx the file)" % (r["procs"], r["all_ready_s"],
                                    r["all_ready_s"] / one,
                                    r["pinned_bytes"] / 2**20,
                                    r["pinned_bytes"] / size))


if __name__ == "__main__":
    main()
