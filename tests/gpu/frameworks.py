#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""pinmem under JAX and PyTorch on a GPU: the framework half of
tests/gpu/check.sh (the portable backend: the GPU machine cannot load the
module). Each part runs where its framework imports, and says so where not.

  jax-view    a pinmem view -> a JAX array on the GPU's pinned_host memory,
              zero-copy (its buffer pointer is the view mapping's address)
  jax-h2d     device_put to GPU memory, GB/s: from that pinmem array,
              from JAX's own pinned_host buffer, from pageable NumPy memory
  jax-26216   issue 26216's loop on the GPU: weights loaded into a sealed
              region, a NumPy view of them cached, the weights donated to a
              jitted step; the region's bytes never change under the view
  torch-h2d   .cuda(non_blocking=True), GB/s: from a tensor of
              pinmem.safetensors.torch.load_file (private and shared=True),
              from pin_memory(), from pageable memory; is_pinned() of each,
              torch's own against pinmem.torch.is_pinned; the target: a
              loaded tensor at >= 0.95x pin_memory()'s rate, and a
              non_blocking copy from it returning before the copy is done
              (CUDA events)

The JAX target: device_put from pinmem.jax arrays (a view, and
load_safetensors's) at >= 0.95x JAX's own pinned_host buffer.

  tests/gpu/frameworks.py [--mib N] [--runs K] [--cpu] [--parts a,b]

--cpu: no GPU needed (JAX's CPU device, no CUDA registration, no timings
against a GPU): the script's own check on a machine without one. Exits 0
when every check held, 1 when one failed, 77 when no framework imports.
"""
import argparse
import gc
import os
import sys
import tempfile
import time
import traceback

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "libpin", "python"))

import numpy as np  # noqa: E402

failures = []


def check(ok, what):
    print("   %s %s" % ("ok:" if ok else "!! CHECK FAILED:", what))
    if not ok:
        failures.append(what)
    return ok


def gbps(nbytes, seconds):
    return nbytes / seconds / 1e9


def best_of(runs, fn):
    """The shortest of runs timed calls of fn (fn waits for its copy)."""
    best = None
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best


def weights(nbytes):
    """A float32 array of nbytes, not all zero."""
    n = nbytes // 4
    return (np.arange(n, dtype=np.uint32) % 1021).astype(np.float32)


def sealed_region(dev, w):
    r = dev.alloc(w.nbytes)
    r.owner_array(np.float32, w.shape)[:] = w
    r.seal()
    return r


# -- JAX

def jax_devices(cpu):
    import jax
    if cpu:
        return jax, jax.devices("cpu")[0]
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus:
        raise RuntimeError("JAX sees no GPU (jax.devices(): %s); --cpu runs "
                           "without one" % jax.devices())
    return jax, gpus[0]


def memory_kind(x):
    try:
        return x.sharding.memory_kind
    except Exception as e:      # noqa: BLE001 - report, do not judge
        return "unknown (%s)" % e


def part_jax_view(a, dev, w):
    import pinmem.jax as pj
    jax, target = jax_devices(a.cpu)
    r = sealed_region(dev, w)
    x = pj.view(r, np.float32, w.shape)   # raises if JAX copied
    rng = pj.mapping_range(x) or (0, 0)     # None: not over a mapping
    ptr = x.unsafe_buffer_pointer()
    print("   view of region %d: jax.Array on %s, memory_kind %s, buffer "
          "0x%x, mapping 0x%x-0x%x" % (r.id, list(x.devices())[0],
                                       memory_kind(x), ptr, rng[0], rng[1]))
    check(rng[0] <= ptr < rng[1], "the JAX array reads the view mapping "
          "(zero-copy)")
    if not a.cpu:
        check(memory_kind(x) == "pinned_host",
              "a CUDA-registered view is a pinned_host array")
        check(list(x.devices())[0] == target, "on the GPU's pinned_host")
    check(np.array_equal(np.asarray(x), w), "the array holds the bytes")
    del x
    gc.collect()
    r.close()


def part_jax_h2d(a, dev, w):
    import pinmem.jax as pj
    jax, target = jax_devices(a.cpu)
    from jax.sharding import SingleDeviceSharding
    to_dev = SingleDeviceSharding(target, memory_kind="device")
    r = sealed_region(dev, w)
    x = pj.view(r, np.float32, w.shape)

    def put(src):
        def once():
            y = jax.device_put(src, to_dev)
            y.block_until_ready()
            if not a.cpu:       # on the CPU, y may share src's buffer
                y.delete()
        return once

    path = os.path.join(a.tmp, "j.safetensors")
    import pinmem
    pinmem.save_safetensors(path, {"w": w})
    loaded = pj.load_safetensors(path, dev=dev)
    rows = [("pinmem view (%s)" % memory_kind(x), x),
            ("pinmem.jax.load_safetensors (%s)" % memory_kind(loaded["w"]),
             loaded["w"])]
    try:
        host = jax.device_put(w, SingleDeviceSharding(
            target, memory_kind="pinned_host"))
        host.block_until_ready()
        rows.append(("JAX's own pinned_host buffer", host))
    except Exception as e:      # noqa: BLE001 - not every backend has it
        print("   JAX's pinned_host buffer: not available here (%s)" % e)
    rows.append(("pageable NumPy memory", w))
    rate = {}
    for what, src in rows:
        put(src)()              # warm-up: compile, first-touch
        t = best_of(a.runs, put(src))
        rate[what] = gbps(w.nbytes, t)
        print("   device_put %-44s %7.2f GB/s (best of %d, %d MiB)" %
              (what, rate[what], a.runs, w.nbytes >> 20))
    own = rate.get("JAX's own pinned_host buffer")
    if own and not a.cpu:
        for what, _ in rows[:2]:
            check(rate[what] >= 0.95 * own, "%s at %.2fx pinned_host's "
                  "rate (target >= 0.95)" % (what, rate[what] / own))
    y = jax.device_put(x, to_dev)
    check(np.array_equal(np.asarray(y), w), "the copy on the device equals "
          "the weights")
    del x, y, rows, loaded
    os.unlink(path)
    gc.collect()
    r.close()


def part_jax_26216(a, dev, w):
    import jax.numpy as jnp
    import pinmem
    import pinmem.jax as pj
    jax, target = jax_devices(a.cpu)
    path = os.path.join(a.tmp, "w.safetensors")
    pinmem.save_safetensors(path, {"w": w})
    step = jax.jit(lambda v: v * 2, donate_argnums=0)
    for i in range(a.loops):
        params = pj.load_safetensors(path, dev=dev)
        region = params.regions[0]
        x = params.pop("w")
        rng = pj.mapping_range(x) or (0, 0)
        cached = np.asarray(x)          # the cached NumPy view
        xd = jax.device_put(x, target)  # the weights on the GPU
        y = step(xd)                    # donated: XLA may reuse xd
        y.block_until_ready()
        try:                            # the pinned array itself donated
            z = step(x)
            z.block_until_ready()
            what = "ran (output at 0x%x, %s)" % (
                z.unsafe_buffer_pointer(),
                "inside the region" if rng[0] <= z.unsafe_buffer_pointer()
                < rng[1] else "not the region")
            check(not rng[0] <= z.unsafe_buffer_pointer() < rng[1],
                  "loop %d: XLA did not write into the region" % i)
            del z
        except Exception as e:  # noqa: BLE001 - what JAX does is the result
            what = "refused: %s: %s" % (type(e).__name__,
                                        str(e).splitlines()[0][:100])
        del x, xd
        gc.collect()
        try:
            region.donate()
            donated = "DONATE allowed (a view lives!)"
            check(False, "loop %d: DONATE with a live view refused" % i)
        except pinmem.BusyError as e:
            donated = "DONATE refused: %s" % e.strerror
        except pinmem.PinError as e:
            donated = "DONATE: %s (the portable backend)" % e.strerror
        if i == 0:
            print("   a pinned_host array donated to jit: %s" % what)
            print("   cached view at 0x%x; %s" % (cached.ctypes.data,
                                                   donated))
        check(np.array_equal(cached, w), "loop %d: the cached view's bytes "
              "unchanged" % i)
        check(np.array_equal(np.asarray(y), jnp.asarray(w) * 2),
              "loop %d: the step's output" % i)
        del cached, y
        gc.collect()
        region.close()
    os.unlink(path)


# -- PyTorch

def part_torch_h2d(a, dev, w):
    import torch
    import pinmem
    import pinmem.safetensors.torch as pst
    import pinmem.torch as pt
    path = os.path.join(a.tmp, "t.safetensors")
    pinmem.save_safetensors(path, {"w": w})
    sd = pst.load_file(path)
    shared = pst.load_file(path, shared=True)    # the service's, or not
    t = sd["w"]
    check(torch.equal(t, torch.from_numpy(w)), "load_file's tensor equals "
          "the weights")
    print("   pinmem.torch.pin_state: private %s, shared %s" %
          (pt.pin_state(t), pt.pin_state(shared["w"])))
    if a.cpu or not torch.cuda.is_available():
        print("   torch %s: no CUDA here; is_pinned() and the timings need "
              "a GPU" % torch.__version__)
        del sd, t, shared
        os.unlink(path)
        return
    pinned = torch.from_numpy(w.copy()).pin_memory()
    pageable = torch.from_numpy(w.copy())

    def up(src):
        def once():
            g = src.cuda(non_blocking=True)
            torch.cuda.synchronize()
            del g
        return once

    rate = {}
    for what, src in [("pinmem load_file tensor", t),
                      ("pinmem load_file shared=True", shared["w"]),
                      ("pin_memory() tensor", pinned),
                      ("pageable tensor", pageable)]:
        up(src)()
        s = best_of(a.runs, up(src))
        rate[what] = gbps(w.nbytes, s)
        print("   .cuda(non_blocking=True) %-30s is_pinned %-5s (pinmem: "
              "%-5s) %7.2f GB/s" % (what, src.is_pinned(), pt.is_pinned(src),
                                    rate[what]))
    for what in ("pinmem load_file tensor", "pinmem load_file shared=True"):
        r = rate[what] / rate["pin_memory() tensor"]
        check(r >= 0.95, "%s at %.2fx pin_memory()'s rate (target >= 0.95)"
              % (what, r))
    check(t.is_pinned() and shared["w"].is_pinned(),
          "torch's own is_pinned() says the loaded tensors are pinned")
    check(t.is_pinned() == pt.is_pinned(t), "pinmem.torch.is_pinned agrees "
          "with torch's")
    # non_blocking=True returns while the copy still runs (CUDA events).
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    t0 = time.perf_counter()
    g = t.cuda(non_blocking=True)
    end.record()
    returned = time.perf_counter() - t0
    busy = not end.query()
    end.synchronize()
    gpu = start.elapsed_time(end) / 1000
    print("   non_blocking copy: returned after %.3f ms, the copy took %.3f "
          "ms on the GPU, still running at return: %s" %
          (returned * 1e3, gpu * 1e3, busy))
    check(busy and returned < gpu / 2, "a non_blocking copy from a loaded "
          "tensor returns before it completes")
    t[0] = 12345.0                     # a private tensor's write...
    check(t.cuda()[0].item() == 12345.0, "...is what the GPU copies")
    del g
    check(torch.equal(t.cuda().cpu()[1:], pageable[1:]), "the GPU copy "
          "equals the weights")
    del sd, t, pinned, pageable, shared
    os.unlink(path)


# The 8-bit and packed 4-bit types of current checkpoints (FP8 weights,
# MXFP8/MXFP4 scales, ROCm's FNUZ), and bf16: those the running torch has.
LOW_BIT = ["float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "float8_e4m3fnuz",
           "float8_e5m2fnuz", "float4_e2m1fn_x2", "bfloat16"]


def part_torch_low_bit(a, dev, w):
    """Each low-bit dtype loaded by pinmem (private and shared=True), then
    copied to the GPU with non_blocking=True and back: bit for bit. Random
    bytes, so every code (NaNs included) makes the trip."""
    import torch
    import pinmem.safetensors.torch as pst
    import pinmem.torch as pt
    names = [n for n in LOW_BIT if hasattr(torch, n)]
    print("   torch %s: %s" % (torch.__version__, ", ".join(names)))
    raw = torch.from_numpy(np.random.default_rng(7).integers(
        0, 256, size=(256, 64), dtype=np.uint8))
    tensors = {n: raw.clone().view(getattr(torch, n)) for n in names}
    path = os.path.join(a.tmp, "low.safetensors")
    pst.save_file(tensors, path)
    gpu = not a.cpu and torch.cuda.is_available()
    for shared in (False, True):
        sd = pst.load_file(path, shared=shared)
        for n in names:
            t = sd[n]
            same = torch.equal(t.view(torch.uint8), raw)
            if gpu:
                g = t.cuda(non_blocking=True)
                torch.cuda.synchronize()
                same = same and torch.equal(g.cpu().view(torch.uint8), raw)
                same = same and t.is_pinned()
            check(same, "%s%s: %s bit for bit%s" % (
                n, " (shared=True)" if shared else "",
                "loaded and copied to the GPU and back" if gpu else "loaded",
                ", torch's is_pinned()" if gpu else ""))
            check(pt.is_pinned(t), "%s%s: pinmem.torch.is_pinned" % (
                n, " (shared=True)" if shared else ""))
        del sd
    os.unlink(path)


PARTS = {"jax-view": ("jax", part_jax_view),
         "jax-h2d": ("jax", part_jax_h2d),
         "jax-26216": ("jax", part_jax_26216),
         "torch-h2d": ("torch", part_torch_h2d),
         "torch-low-bit": ("torch", part_torch_low_bit)}


def importable(name):
    try:
        __import__(name)
        return True
    except Exception as e:      # noqa: BLE001 - say why, skip the part
        print("   (%s does not import: %s)" % (name, e))
        return False


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=None,
                   help="size of the weights (default 1024, 16 with --cpu)")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--loops", type=int, default=3,
                   help="rounds of the 26216 loop")
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--parts", default=",".join(PARTS))
    a = p.parse_args()
    if a.cpu:
        os.environ["PINMEM_CUDA_REGISTER"] = "0"
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import pinmem
    w = weights((a.mib or (16 if a.cpu else 1024)) << 20)
    dev = pinmem.open()
    print("frameworks: backend %s, %d MiB, %s" %
          (dev.backend, w.nbytes >> 20, "CPU only" if a.cpu else "GPU"))
    ran = 0
    with tempfile.TemporaryDirectory(prefix="pinmem-gpu-") as a.tmp:
        for name in a.parts.split(","):
            fw, fn = PARTS[name]
            print("%s:" % name)
            if not importable(fw):
                print("   skipped: no %s" % fw)
                continue
            t0 = time.perf_counter()
            ran += 1
            try:
                fn(a, dev, w)
            except Exception:   # noqa: BLE001 - one part's crash, not all
                traceback.print_exc(file=sys.stdout)
                check(False, "%s ran to its end" % name)
                gc.collect()
            print("   (%.1f s)" % (time.perf_counter() - t0))
    dev.close()
    print("frameworks: %d part(s) ran, %s" % (
        ran, "all checks passed" if not failures else
        "%d check(s) FAILED" % len(failures)))
    return 1 if failures else 0 if ran else 77


if __name__ == "__main__":
    sys.exit(main())
