# SPDX-License-Identifier: MIT
"""The demo's PyTorch parts (demo.py runs them after parts 1-3 when torch
is importable):

  4. The loop in PyTorch: part 1's donate -> copy -> publish -> view ->
     save loop with torch.bfloat16 tensors over the region's views and
     pinmem.safetensors.torch.save_file; the same end-state checks.
  5. The fill phase into a reused region: a checkpoint loaded with
     load_file, its Region taken back (donate, reopen), a second checkpoint
     read into it through a writable view, sealed, every tensor compared.
"""
import os
import time

import numpy as np
import torch

import pinmem
import pinmem.torch as pt
from pinmem.safetensors import fill_view
from pinmem.safetensors.torch import load_file, save_file

MiB = 1 << 20


def part4(dev, size, iterations, outdir, check, snapshot, meter,
          table):
    print()
    print("4. The loop in PyTorch (bfloat16 tensors)")
    n = size // 2
    region = dev.alloc(size)
    owner = pt.from_array(region.owner_array(np.uint8, (n * 2,)),
                          torch.bfloat16)
    src = torch.sin(torch.arange(n, dtype=torch.float32) / 97.0).to(
        torch.bfloat16)
    donation = dev.donation_supported
    print("   region %d: %.1f MiB of torch.bfloat16 (%d values), %d "
          "iterations" % (region.id, size / MiB, n, iterations))
    print("   each: donate -> owner.copy_(weights) -> publish -> "
          "pinmem.torch.view -> safetensors save_file(view) -> view dropped")
    path = os.path.join(outdir, "weights-torch.safetensors")
    t = dict(donate=0.0, copy=0.0, publish=0.0, view=0.0, save=0.0)
    stale = 0
    first = None
    clock = time.perf_counter
    t_start = clock()
    for i in range(1, iterations + 1):
        t0 = clock()
        if donation:
            region.donate()                 # no wait: views must be 0
        t1 = clock()
        owner.copy_(src)
        owner[0] = float(i % 256)           # the iteration's own tag
        t2 = clock()
        if donation:
            region.publish()
        t3 = clock()
        view = pt.view(region, torch.bfloat16, (n,))
        if float(view[0]) != float(i % 256):
            stale += 1
        t4 = clock()
        save_file({"w": view}, path, metadata={"iteration": str(i)})
        t5 = clock()
        del view                            # unmapped here
        t["donate"] += t1 - t0
        t["copy"] += t2 - t1
        t["publish"] += t3 - t2
        t["view"] += t4 - t3
        t["save"] += t5 - t4
        if i == 1:
            first = snapshot(region)
        meter.after(i)
    total = clock() - t_start
    last = snapshot(region)
    print("   %d iterations in %.2f s (%.2f ms each: donate %.3f, copy %.3f, "
          "publish %.3f, view %.3f, save_file %.3f)" %
          (iterations, total, 1e3 * total / iterations,
           *(1e3 * t[k] / iterations for k in ("donate", "copy", "publish",
                                                "view", "save"))))
    back = load_file(path)["w"]
    want = src.clone()
    want[0] = float(iterations % 256)
    ok_file = torch.equal(back, want)
    del back
    print("   views that saw stale weights: %d; last save_file reads back "
          "equal (load_file): %s" % (stale, "yes" if ok_file else "NO"))
    table(first, last, size, meter)
    check(stale == 0, "part 4: no stale view")
    check(ok_file, "part 4: last file equal")
    check(last["views (kernel)"] == 0, "part 4: no view left")
    del owner
    region.close()


def part5(dev, ckpt_mb, outdir, check):
    print()
    print("5. The fill phase into a reused region, through a writable view")
    g = torch.Generator().manual_seed(26216)
    a, b = {}, {}
    per = max(1, ckpt_mb // 2) * MiB
    for d, tag in ((a, "a"), (b, "b")):
        total, i = 0, 0
        while total < per:
            rows = int(torch.randint(64, 512, (1,), generator=g))
            w = torch.randn(rows, 1024, generator=g).to(torch.bfloat16)
            d["layers.%d.weight" % i] = w
            total += w.numel() * 2
            i += 1
    pa = os.path.join(outdir, "ckpt-a.safetensors")
    pb = os.path.join(outdir, "ckpt-b.safetensors")
    save_file(a, pa, metadata={"ckpt": "a"})
    save_file(b, pb, metadata={"ckpt": "b"})
    t0 = time.perf_counter()
    sd = load_file(pa)
    t_load = time.perf_counter() - t0
    mb = os.path.getsize(pa) / MiB
    ok_a = all(torch.equal(sd[k], a[k]) for k in a)
    print("   checkpoint a: %d bf16 tensors, %.1f MiB, load_file in %.3f s "
          "(%.2f GB/s end to end), equal: %s" %
          (len(sd), mb, t_load, mb * MiB / t_load / 1e9,
           "yes" if ok_a else "NO"))
    check(ok_a, "part 5: checkpoint a equal")
    with pinmem.safetensors.safe_open(pa, framework="pt") as f:
        f.get_tensor(f.keys()[0])
        ck = f.checkpoint
    (region,) = ck.regions
    del sd, f
    ck.close()
    if dev.donation_supported:
        region.donate()
        region.reopen()
        print("   region %d: donated (no tensor left), reopened: %s" %
              (region.id, region.state))
    else:
        region = dev.alloc(region.size)
        print("   backend %s: no donation; a fresh region %d stands in" %
              (dev.backend, region.id))
    need = os.path.getsize(pb) + 2 * 4096
    if need > region.size:
        region = dev.alloc(need)
    t0 = time.perf_counter()
    with region.view(np.uint8, (region.size,), writable=True) as v:
        placed = fill_view(v, pb, region=region)
    t_fill = time.perf_counter() - t0
    region.seal()
    st = placed.stats
    print("   checkpoint b read into it through a writable view: %.1f MiB in "
          "%.3f s (%.2f GB/s), O_DIRECT: %s; sealed: %s" %
          (st["bytes"] / MiB, t_fill, st["gb_per_s"],
           "yes" if st["direct"] else "no (%s)" % st["fallback_reason"],
           region.state))
    tensors = placed.tensors()
    good = sum(torch.equal(tensors[k], b[k]) for k in b)
    print("   read through read-only torch tensors: %d/%d equal to the "
          "source" % (good, len(b)))
    check(good == len(b), "part 5: every tensor of b")
    if os.environ.get("PINMEM_SCRATCH") and dev.backend == "device":
        check(st["direct"], "part 5: O_DIRECT on the scratch disk")
    del tensors
    region.close()
