#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""PyTorch distributed checkpoint saves side by side, one process, no
process group (pinbench dcp runs this): per row, SAVES saves of a state
dict of SIZE, the model changed between them as a training step would,
STEP seconds of training apart.

  bench_dcp.py [--gib G[,G...]] [--saves N] [--step S] [--dir DIR]
               [--rows ROWS] [--json FILE]

Rows: save (dcp.save), default (dcp.async_save with one DefaultStager kept
for every save), blocking (with BlockingAsyncStager), pinmem (pinmem.dcp's
stager and storage writer), hf-default and hf-pinmem (the same two in
DCP's Hugging Face layout: torch's HuggingFaceStorageWriter with a kept
DefaultStager, pinmem.dcp's stager and PinHuggingFaceStorageWriter),
fio (sequential O_DIRECT writes of the same bytes, io_uring: the disk's
pace). Per row: the time the loop is blocked
per save (until save/async_save returns; the median, and the fastest
and slowest save), the time until the save is on
disk, the write rate (bytes over the time on disk), the staging memory
(the process's anonymous resident growth over the run plus pinmem's
staging region, against the state dict's size) and CPU seconds per GB.
Needs torch >= 2.9 (DCP's stagers): run under Debian's python3 it re-runs
itself under the test venv's.
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


sys.path.insert(0, os.path.join(TOP, "libpin", "python"))


def reexec_in_venv():
    venv = subprocess.run([os.path.join(TOP, "tests", "python-venv"), "path"],
                          capture_output=True, text=True).stdout.strip()
    py = os.path.join(venv, "bin", "python")
    if not os.access(py, os.X_OK) or os.path.realpath(sys.prefix) == \
            os.path.realpath(venv):
        sys.exit("bench_dcp: needs torch >= 2.9 (the test venv: "
                 "tests/deps.sh)")
    os.execv(py, [py] + sys.argv)


try:
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.staging import (
        BlockingAsyncStager, DefaultStager, StagingOptions)
except ImportError:
    reexec_in_venv()

ROWS = ("save", "default", "blocking", "pinmem", "hf-default", "hf-pinmem",
        "fio")


def anon_bytes():
    """The process's anonymous resident memory (a pinmem region's pages
    are shared memory, counted once from the stager instead: RSS would
    count them once per mapping)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def state_dict(nbytes):
    """Tensors of 64 MiB (the last smaller) totalling nbytes, bf16 and f32
    as a model and its optimizer state."""
    sd, left, i = {}, nbytes, 0
    while left > 0:
        n = min(left, 64 << 20)
        dt = torch.bfloat16 if i % 2 else torch.float32
        sd["layer%d.weight" % i] = torch.randn(n // dt.itemsize).to(dt)
        left -= n
        i += 1
    return sd


def step(sd):
    for t in sd.values():
        t.add_(1)


def pinmem_parts(d, layout):
    from pinmem import dcp as pdcp
    make = pdcp.PinHuggingFaceStorageWriter if layout == "hf" else \
        pdcp.PinStorageWriter
    return pdcp.PinStager(), lambda k: make(os.path.join(d, str(k)))


def make_row(row, d):
    """(stager or None, writer factory, async)."""
    fs = dcp.FileSystemWriter
    if row == "hf-default":
        st = DefaultStager(StagingOptions(False, False, False, False))
        return st, lambda k: dcp.HuggingFaceStorageWriter(
            os.path.join(d, str(k))), True
    if row == "hf-pinmem":
        stager, writer = pinmem_parts(d, "hf")
        return stager, writer, True
    if row == "save":
        return None, lambda k: fs(os.path.join(d, str(k))), False
    if row == "default":
        st = DefaultStager(StagingOptions(False, False, False, False))
        return st, lambda k: fs(os.path.join(d, str(k))), True
    if row == "blocking":
        return BlockingAsyncStager(), lambda k: fs(os.path.join(d, str(k))), \
            True
    stager, writer = pinmem_parts(d, "distcp")
    return stager, writer, True


def staged_bytes(stager):
    region = getattr(stager, "region", None)
    return region.size if region is not None else 0


def run_row(row, sd, nbytes, saves, d, step_s):
    stager, writer, is_async = make_row(row, d)
    anon0, cpu0 = anon_bytes(), cpu_s()
    blocked, durable, futures = [], [], []
    for k in range(saves):
        if k:
            time.sleep(step_s)
        t0 = time.monotonic()
        if not is_async:
            dcp.save(sd, storage_writer=writer(k), no_dist=True)
            blocked.append(time.monotonic() - t0)
            durable.append(blocked[-1])
            step(sd)
            continue
        fut = dcp.async_save(sd, storage_writer=writer(k),
                             async_stager=stager, no_dist=True)
        blocked.append(time.monotonic() - t0)
        step(sd)
        up = getattr(fut, "upload_completion", fut)
        up.add_done_callback(
            lambda _, t0=t0: durable.append(time.monotonic() - t0))
        futures.append(up)
    for f in futures:
        f.result()
    cpu = cpu_s() - cpu0
    growth = anon_bytes() - anon0 + staged_bytes(stager)
    if stager is not None:
        stager.close()
    blocked.sort()
    durable.sort()
    return {
        "blocked_s": blocked[len(blocked) // 2],
        "blocked_range": "%.3f-%.3f" % (blocked[0], blocked[-1]),
        "durable_s": durable[len(durable) // 2],
        "write_gbps": nbytes / durable[len(durable) // 2] / 1e9,
        "staging_x": max(growth, 0) / nbytes,
        "cpu_s_per_gb": cpu / (saves * nbytes / 1e9),
    }


def run_fio(d, nbytes):
    path = os.path.join(d, "fio.dat")
    out = subprocess.run(
        ["fio", "--name=dcp", "--rw=write", "--direct=1", "--bs=1M",
         "--ioengine=io_uring", "--iodepth=16", "--end_fsync=1",
         "--size=%d" % nbytes, "--filename=" + path, "--output-format=json"],
        capture_output=True, text=True)
    os.unlink(path)
    if out.returncode:
        return None
    job = json.loads(out.stdout)["jobs"][0]["write"]
    return {"write_gbps": job["bw_bytes"] / 1e9}


def fmt(r, key, spec):
    return (spec % r[key]) if r and key in r else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gib", default="1,4")
    ap.add_argument("--saves", type=int, default=5)
    ap.add_argument("--step", type=float, default=None,
                    help="seconds of training between saves (default: "
                    "twice dcp.save's time, so that a save ends before "
                    "the next; 0: back to back)")
    ap.add_argument("--dir", default=os.path.join(TOP, "build", "bench",
                                                  "dcp"))
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = a.rows.split(",")
    bad = [r for r in rows if r not in ROWS]
    if bad:
        ap.error("unknown row(s) %s (of %s)" % (",".join(bad),
                                                 ",".join(ROWS)))
    results = {}
    for g in (float(x) for x in a.gib.split(",")):
        nbytes = int(g * (1 << 30))
        sd = state_dict(nbytes)
        step = a.step
        if step is None:
            os.makedirs(a.dir, exist_ok=True)
            t0 = time.monotonic()
            dcp.save(sd, storage_writer=dcp.FileSystemWriter(
                os.path.join(a.dir, "probe")), no_dist=True)
            step = 2 * (time.monotonic() - t0)
        print("state dict %.3g GiB, %d saves per row, %.2f s of training "
              "between saves, in %s" % (g, a.saves, step, a.dir))
        print("  %-10s %10s %12s %10s %9s %9s %9s" % (
            "row", "blocked s", "(min-max)", "durable s", "GB/s", "staging",
            "CPU s/GB"))
        for row in rows:
            shutil.rmtree(a.dir, ignore_errors=True)
            os.makedirs(a.dir)
            try:
                r = run_fio(a.dir, nbytes) if row == "fio" else \
                    run_row(row, sd, nbytes, a.saves, a.dir, step)
            except (ImportError, AttributeError) as e:
                r = {"error": str(e)}
            results["%g:%s" % (g, row)] = r
            print("  %-10s %10s %12s %10s %9s %9s %9s" % (
                row, fmt(r, "blocked_s", "%.3f"),
                fmt(r, "blocked_range", "%s"), fmt(r, "durable_s", "%.3f"),
                fmt(r, "write_gbps", "%.2f"), fmt(r, "staging_x", "%.2fx"),
                fmt(r, "cpu_s_per_gb", "%.2f")) +
                ("  (%s)" % r["error"] if r and "error" in r else ""))
        shutil.rmtree(a.dir, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
