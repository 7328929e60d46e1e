#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""pinmem demo, part 7 (make demo runs it after demo.py, under the Python
of tests/python-venv, which has jax): JAX issue 26216's loop in real JAX.

A bf16 checkpoint loaded with pinmem.jax.load_safetensors (jax.Arrays over
a sealed region, no copy); a NumPy view of the weights cached, as JAX once
cached it; the weights donated to a jitted step. The region is the reused
buffer: DONATE is refused while the cached view lives, naming it, the
view's bytes are never written, and DONATE succeeds once the view dies.
Then what JAX does with a donated pinned array: XLA allocates the output,
the region keeps its bytes, and JAX's release of the array unmaps it.

Exits 0 when every check held, 1 otherwise.
"""
import gc
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

import pinmem  # noqa: E402
import pinmem.jax as pj  # noqa: E402

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("   !! CHECK FAILED: %s" % what)
    return ok


def mapped(addr):
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= addr < hi:
                return True
    return False


def main():
    t0 = time.perf_counter()
    base = os.environ.get("PINMEM_SCRATCH") or None
    outdir = tempfile.mkdtemp(prefix="pinmem-demo-jax-", dir=base)
    path = os.path.join(outdir, "weights.safetensors")
    dev = pinmem.open()
    print()
    print("7. The loop in real JAX (jax %s on %s, backend %s)" %
          (jax.__version__, jax.devices()[0].platform, dev.backend))
    w = (np.sin(np.arange(1 << 19, dtype=np.float32) / 97.0)
         .astype(ml_dtypes.bfloat16).reshape(512, 1024))
    pinmem.save_safetensors(path, {"w": w})
    params = pj.load_safetensors(path, dev=dev)
    region = params.regions[0]
    x = params.pop("w")
    addr = x.unsafe_buffer_pointer()
    rng = pj.mapping_range(x)
    print("   w: jax.Array %s %s at 0x%x, in region %d's view mapping "
          "0x%x-0x%x (no copy)" % (x.dtype, x.shape, addr, region.id,
                                    rng[0], rng[1]))
    check(rng[0] <= addr < rng[1], "part 7: the array reads the mapping")
    check(np.array_equal(np.asarray(x), w), "part 7: the weights loaded")
    cached = np.asarray(x)          # the cached NumPy view
    step = jax.jit(lambda a: a * 2, donate_argnums=0)
    y = step(x)
    y.block_until_ready()
    del x                           # the array is gone; its view is not
    gc.collect()
    print("   cached np.asarray view at 0x%x; w donated to a jitted step "
          "(JAX copied: a view lives)" % cached.ctypes.data)
    try:
        region.donate()
        check(False, "part 7: DONATE with a live view must be refused")
    except pinmem.BusyError as e:
        print("   region DONATE -> refused (EBUSY): %s" % e.strerror)
        mine = [h for h in e.holders if h.kind == "view"]
        check([(h.pid, h.start, h.end) for h in mine] ==
              [(os.getpid(),) + rng], "part 7: the holder named is the view")
    except pinmem.PinError as e:
        print("   backend %s: donate -> %s" % (dev.backend, e))
        check(e.errno == 95, "part 7: portable donate says unsupported")
    check(np.array_equal(cached, w), "part 7: nothing overwritten under "
          "the live view")
    check(np.array_equal(np.asarray(y), (w.astype(np.float32) * 2)
                         .astype(ml_dtypes.bfloat16)), "part 7: the step")
    del cached
    gc.collect()
    check(not mapped(rng[0]), "part 7: the last view gone, unmapped")
    if dev.donation_supported:
        region.donate()
        print("   cached view dropped -> region DONATE: ok, state %s, "
              "views %d" % (region.state, region.info().view_mappings))
        check(region.state == "donated", "part 7: donated")
        region.publish()
    # Donation of a pinned array with no view left: XLA cannot write an
    # imported buffer, so it allocates the output; the region is unchanged.
    off = addr - rng[0]             # w's offset in the region
    params = pj.load_safetensors(path, dev=dev)
    x = params.pop("w")
    rng = pj.mapping_range(x)
    y = step(x)
    y.block_until_ready()
    gc.collect()
    out = y.unsafe_buffer_pointer()
    print("   a new load donated with no view: w deleted %s, output at 0x%x "
          "(XLA's), mapping 0x%x-0x%x %s" %
          (x.is_deleted(), out, rng[0], rng[1],
           "still mapped" if mapped(rng[0]) else "unmapped"))
    check(x.is_deleted(), "part 7: the donated array is deleted")
    check(not rng[0] <= out < rng[1], "part 7: the output is not the region")
    check(not mapped(rng[0]), "part 7: JAX released the mapping")
    r2 = params.regions[0]
    same = np.array_equal(r2.view(ml_dtypes.bfloat16, w.shape, offset=off), w)
    print("   region %d after the step: %s" %
          (r2.id, "unchanged" if same else "CHANGED"))
    check(same, "part 7: the donated array's region unchanged")
    del x, y
    r2.close()
    region.close()
    for name in os.listdir(outdir):
        os.unlink(os.path.join(outdir, name))
    os.rmdir(outdir)
    dev.close()
    print()
    print("demo (part 7, JAX): %s in %.1f s" % (
        "all checks passed" if not failures else
        "%d check(s) FAILED" % len(failures), time.perf_counter() - t0))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
