#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""pinmem demo (make demo): JAX issue 26216's loop, rebuilt on pinmem.

  1. The loop: a pinned staging region of bfloat16 weights; each iteration
     donates it (the kernel checks that no view is left), copies new weights
     in (from the GPU where a CUDA driver exists; ordinary memory stands in
     otherwise), publishes it, takes a NumPy view, np.save()s from the view,
     and lets the view go. At the end: no views, the counts and the
     module's counters as they were after the first iteration, and no
     growth of the process's memory per iteration (LeakMeter).
  2. The failure made safe: a view kept alive (as JAX's cached NumPy view
     was); donation is refused and names the holder; the view is released;
     donation succeeds.
  3. The fill phase: a safetensors checkpoint loaded with O_DIRECT (read by
     the module's FILL on the device backend, else io_uring) into a region,
     sealed, read through NumPy views, every tensor checked against the
     file by an independent reader.
  4-5. With PyTorch (demo_torch.py): part 1's loop with torch.bfloat16
     tensors, and a checkpoint read into a donated, reopened region through
     a writable view.
  7. One copy per host (demo_cache.py): four workers load one checkpoint
     through pinmem-cached; one copy in memory, an eviction refused naming
     a worker that maps it, allowed once they exit.

Exits 0 when every check held, 1 otherwise. Runs where tests/vm/run puts it
(the device backend, files on $PINMEM_SCRATCH); on a host without the
module it runs on the portable backend and says what that cannot do.
"""
import argparse
import ctypes
import gc
import json
import os
import platform
import statistics
import struct
import sys
import tempfile
import threading
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import pinmem  # noqa: E402

MiB = 1 << 20
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("   !! CHECK FAILED: %s" % what)
    return ok


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def nr_maps():
    """Mappings of a file or device: every pinmem region and view (their
    anon inodes), memfds, libraries. Anonymous memory is left out: the
    allocators map and keep arenas of it as they see fit (one more after
    some 20 iterations, seen once in a CI run), which says nothing about
    leaked views."""
    n = 0
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split(None, 5)
            if len(fields) == 6 and not fields[5].startswith("["):
                n += 1
    return n


def nr_fds():
    return len(os.listdir("/proc/self/fd"))


def debugfs():
    d = "/sys/kernel/debug/pinmem"
    out = {}
    for name in ("regions", "pages", "mappings", "view_fds"):
        try:
            with open(os.path.join(d, name)) as f:
                out[name] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            return None
    return out


def bf16_bits(f32):
    """float32 -> bfloat16 bit patterns (round to nearest even)."""
    u = np.ascontiguousarray(f32, np.float32).view(np.uint32)
    u = u + (0x7FFF + ((u >> 16) & 1))
    return (u >> 16).astype(np.uint16)


# ml_dtypes' bfloat16, else raw 2-byte void elements (no arithmetic, no
# safetensors name: saved as BF16 only where the demo says so).
BF16 = pinmem.bfloat16 if pinmem.HAVE_ML_DTYPES else np.dtype("V2")


def as_bf16(bits):
    """bits as BF16 (ml_dtypes' type, or the raw form)."""
    return bits.view(BF16)


def trim():
    """Give back memory that is free but kept by the allocators (Python's
    free lists, glibc's heap), so that RSS counts what is in use."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def snapshot(region):
    trim()                              # at both ends alike
    info = region.info()
    return {"views (kernel)": info.view_mappings,
            "writable views": info.writable_view_mappings,
            "view fds": info.view_fds,
            "owner mappings": info.owner_mappings,
            "state": info.state,
            "file mappings": nr_maps(),
            "open fds": nr_fds(),
            "RSS KiB": rss_kib(),
            "debugfs": debugfs()}


class LeakMeter:
    """RSS along a loop, to tell a leak per iteration from the allocators'
    noise. A leak per iteration grows RSS by the same amount in every
    stretch of k iterations; what the interpreter and the allocators keep
    for themselves (a new arena, a library page first touched, a free list
    that grows) comes in steps, in one stretch or a few. So RSS is read,
    after trim(), at the ends of STRETCHES equal stretches that follow a
    warm-up of a fifth of the loop, and the leak per iteration is the
    median of the stretches' growths over k: steps in fewer than half of
    the stretches do not move it, a leak in every stretch does. Comparing
    the first iteration with the last, as before, failed on one such step
    (2,028 KiB over a limit of 1,024) with nothing leaked."""
    STRETCHES = 8
    # A leak per iteration of at least this is caught: half a page, so a
    # page per iteration is (and a leaked view of the weights, size bytes
    # per iteration, by far). Per stretch of 100 iterations: 200 KiB.
    LIMIT_KIB = 2.0

    def __init__(self, iterations):
        self.warmup = max(1, iterations // 5)
        self.k = (iterations - self.warmup) // self.STRETCHES
        self.ends = set()
        if self.k:
            self.ends = {self.warmup + j * self.k
                         for j in range(self.STRETCHES + 1)}
        self.rss = []

    def after(self, i):
        """Call after iteration i (1-based) of the loop."""
        if i in self.ends:
            trim()
            self.rss.append(rss_kib())

    def growths(self):
        return [b - a for a, b in zip(self.rss, self.rss[1:])]

    def per_iteration(self):
        """KiB per iteration (median_low: with an even count, the lower of
        the middle two, so more than half must grow), or None when the
        loop was too short to measure."""
        g = self.growths()
        if len(g) != self.STRETCHES:
            return None
        return statistics.median_low(g) / self.k


def fmt_dbg(d):
    if d is None:
        return "n/a (no module)"
    return "%dr %dp %dm %dv" % (d["regions"], d["pages"], d["mappings"],
                                d["view_fds"])


# ---- part 1 ----------------------------------------------------------------

class GpuSource:
    """Where the new weights come from: a CUDA device buffer copied into the
    registered region (a real device-to-host copy), or ordinary memory."""

    def __init__(self, region, nbytes, host_init):
        self.cuda = self.buf = None
        self.what = None
        try:
            from pinmem.cuda import Cuda, DeviceBuffer
            self.cuda = Cuda(0)
            self.cuda.register(region)
            self.buf = DeviceBuffer(nbytes)
            self.buf.upload(host_init.ctypes.data)
            self.what = "CUDA device %d: cuMemcpyDtoH into the registered " \
                        "region" % 0
        except pinmem.PinError as e:
            self.close()
            self.reason = e.strerror
            self.host = host_init
            self.what = "no GPU: host memory stands in (%s)" % \
                        self.reason.split(":")[0]

    def copy_into(self, owner, i):
        if self.buf is not None:
            self.buf.download(owner.ctypes.data)
        else:
            np.copyto(owner, self.host)
        owner[0] = i & 0x7F7F           # the iteration's own tag

    def close(self):
        if self.buf is not None:
            self.buf.close()
            self.buf = None
        if self.cuda is not None:
            self.cuda.close()
            self.cuda = None


def report_counts(first, last, size, iterations, part, meter):
    """The table of counts after the first and the last iteration, and
    the checks that they match; RSS is judged by meter (a LeakMeter)."""
    print("   %-26s %18s %18s" % ("", "after iteration 1",
                                  "after iteration %d" % iterations))
    rows = ["views (kernel)", "writable views", "view fds", "owner mappings",
            "state", "file mappings", "open fds"]
    for k in rows:
        print("   %-26s %18s %18s" % (k, first[k], last[k]))
    print("   %-26s %18s %18s" % ("RSS (trimmed)",
                                  "%.1f MiB" % (first["RSS KiB"] / 1024),
                                  "%.1f MiB (%+d KiB)" %
                                  (last["RSS KiB"] / 1024,
                                   last["RSS KiB"] - first["RSS KiB"])))
    print("   %-26s %18s %18s" % ("module counters", fmt_dbg(
        first["debugfs"]), fmt_dbg(last["debugfs"])))
    same = all(first[k] == last[k] for k in rows) and \
        first["debugfs"] == last["debugfs"]
    print("   (module counters: debugfs regions r, pages p, mappings m, view "
          "fds v)")
    print("   views 0 at the end: %s; counts and counters unchanged: %s" %
          ("yes" if last["views (kernel)"] == 0 else "NO",
           "yes" if same else "NO"))
    check(last["views (kernel)"] == 0, part + ": views 0 at the end")
    check(same, part + ": counters after the first and the last iteration")
    leak = meter.per_iteration()
    if leak is None:
        print("   RSS leak check: not made (%d iterations, too few for %d "
              "stretches after a warm-up)" % (iterations, meter.STRETCHES))
        return
    rss_ok = leak < meter.LIMIT_KIB
    print("   RSS growth over %d stretches of %d iterations (after %d): %s "
          "KiB" % (meter.STRETCHES, meter.k, meter.warmup,
                   " ".join("%+d" % g for g in meter.growths())))
    print("   leak per iteration (median stretch / %d): %.2f KiB, under %.1f "
          "(a leaked view would be %d): %s" %
          (meter.k, leak, meter.LIMIT_KIB, size // 1024,
           "yes" if rss_ok else "NO"))
    check(rss_ok, part + ": RSS leak per iteration")


def part1(dev, size, iterations, outdir):
    print("1. The original loop, rebuilt on pinmem")
    n = size // 2
    region = dev.alloc(size)
    owner = region.owner_array(np.uint16, (n,))
    weights = bf16_bits(np.sin(np.arange(n, dtype=np.float32) / 97.0))
    src = GpuSource(region, size, weights)
    donation = dev.donation_supported
    print("   region %d: %.1f MiB of bfloat16 weights (%d values, %s), %d "
          "iterations" % (region.id, size / MiB, n,
                          "ml_dtypes" if pinmem.HAVE_ML_DTYPES else
                          "raw bytes: ml_dtypes not installed", iterations))
    print("   each: donate (kernel-checked) -> copy new weights in -> publish"
          " -> NumPy view -> np.save(view) -> view dropped")
    print("   copy: %s" % src.what)
    if not donation:
        print("   backend %s: no kernel-arbitrated donation, the loop runs "
              "without donate/publish" % dev.backend)
    path = os.path.join(outdir, "weights.npy")
    t = dict(donate=0.0, copy=0.0, publish=0.0, view=0.0, save=0.0)
    refused = mismatched = 0
    first = None
    meter = LeakMeter(iterations)
    clock = time.perf_counter
    t_start = clock()
    with warnings.catch_warnings():
        # np.save warns about the raw bfloat16 dtype's format note.
        warnings.simplefilter("ignore", UserWarning)
        for i in range(1, iterations + 1):
            t0 = clock()
            if donation:
                try:
                    region.donate()             # no wait: views must be 0
                except pinmem.BusyError:
                    refused += 1
                    raise
            t1 = clock()
            src.copy_into(owner, i)
            t2 = clock()
            if donation:
                region.publish()
            t3 = clock()
            view = region.view(BF16, (n,))
            if view[:1].view(np.uint16)[0] != (i & 0x7F7F):
                mismatched += 1
            t4 = clock()
            np.save(path, view)
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
    elapsed = clock() - t_start
    last = snapshot(region)
    saved = np.load(path)
    expect = weights.copy()
    expect[0] = iterations & 0x7F7F
    src.close()
    print("   %d iterations in %.2f s (%.2f ms each: donate %.3f, copy %.3f, "
          "publish %.3f, view %.3f, np.save %.3f)" %
          (iterations, elapsed, 1e3 * elapsed / iterations,
           *(1e3 * t[k] / iterations for k in
             ("donate", "copy", "publish", "view", "save"))))
    print("   donations refused: %d; views that saw stale weights: %d; last "
          "np.save file matches: %s" %
          (refused, mismatched,
           "yes" if saved.tobytes() == expect.tobytes() else "NO"))
    check(refused == 0 and mismatched == 0, "part 1: every iteration clean")
    check(saved.tobytes() == expect.tobytes(), "part 1: saved weights")
    report_counts(first, last, size, iterations, "part 1", meter)
    del owner
    region.close()


# ---- part 2 ----------------------------------------------------------------

def part2(dev):
    print()
    print("2. The failure made safe")
    if not dev.donation_supported:
        region = dev.alloc(2 * MiB)
        kept = region.view(BF16, (1024,))
        try:
            region.donate()
        except pinmem.PinError as e:
            print("   backend %s: donate -> %s" % (dev.backend, e))
            check(e.errno == 95, "part 2: portable donate says unsupported")
        del kept
        region.close()
        return
    region = dev.alloc(2 * MiB)
    own = region.owner_array(np.uint16)
    own[:] = bf16_bits(np.linspace(0, 1, own.size, dtype=np.float32))
    del own
    region.seal()
    kept = region.view(BF16, (1024, 1024))  # a cached view
    print("   a view kept alive: region %d, 0x%x-0x%x (as JAX's cached "
          "NumPy view was)" % ((region.id,) + kept.mapping_range))
    try:
        region.donate()
        check(False, "part 2: donation with a live view must be refused")
    except pinmem.BusyError as e:
        print("   donate -> refused, errno %d (EBUSY): %s" %
              (e.errno, e.strerror))
        mine = [h for h in e.holders if h.kind == "view"]
        for h in mine:
            print("     holder: pid %d, command %s, %s 0x%x-0x%x %s" %
                  (h.pid, h.comm, h.kind, h.start, h.end, h.prot))
        check([(h.pid, h.start, h.end) for h in mine] ==
              [(os.getpid(),) + kept.mapping_range],
              "part 2: the holder named is this view")
    print("   state still %s; kernel counts %d view mapping(s)" %
          (region.info().state, region.info().view_mappings))
    # The explicit end refuses, rather than unmapping under a reference.
    try:
        with region.view(BF16, (16,)) as v:
            escaped = v[4:]
    except pinmem.ViewInUseError as e:
        print("   with-block whose slice escaped -> ViewInUseError: %s" %
              str(e).split(" (another")[0])
        check(escaped.mapped and escaped.size == 12,
              "part 2: escaped slice still valid")
    del v, escaped
    # A donate that waits: the view is dropped by another thread.
    box = [kept]
    del kept

    def drop_later():
        time.sleep(0.3)
        box.clear()                     # the last reference: unmapped
    th = threading.Thread(target=drop_later)
    t0 = time.perf_counter()
    th.start()
    region.donate(timeout=30)
    waited = time.perf_counter() - t0
    th.join()
    info = region.info()
    print("   view released (by another thread, 0.3 s later) -> donate("
          "timeout=30) waited %.2f s: ok, state %s, views %d" %
          (waited, info.state, info.view_mappings))
    check(info.state == "donated" and info.view_mappings == 0,
          "part 2: donation after release")
    part2_pipe(region)
    region.close()


def vmsplice(fd, addr, length):
    """vmsplice(2) one range into a pipe (not in the os module)."""
    class Iovec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
    libc = ctypes.CDLL(None, use_errno=True)
    iov = Iovec(addr, length)
    n = libc.vmsplice(fd, ctypes.byref(iov), ctypes.c_ulong(1),
                      ctypes.c_uint(0))
    if n < 0:
        raise OSError(ctypes.get_errno(), "vmsplice")
    return n


def part2_pipe(region):
    """A reference that outlives its view: a pipe holds the view's pages
    after the view is gone; the kernel refuses the donation naming the
    bytes, and allows it once the pipe is drained."""
    region.reopen()
    v = region.view(np.uint8, (2 * MiB,))
    rfd, wfd = os.pipe()
    n = vmsplice(wfd, v.mapping_range[0], 4 * 4096)
    del v
    print("   a view's first %d bytes spliced into a pipe, the view "
          "unmapped (views %d)" % (n, region.info().view_mappings))
    try:
        region.donate()
        check(False, "part 2: donation with a pipe holding pages refused")
    except pinmem.BusyError as e:
        print("   donate -> refused, errno %d (EBUSY): %s" %
              (e.errno, e.refs[0] if e.refs else e.strerror))
        check([(r.offset, r.length, r.refs) for r in e.refs] ==
              [(0, 2 * MiB, 4)], "part 2: the pipe's range named")
    os.close(wfd)
    got = len(os.read(rfd, 1 << 20))
    os.close(rfd)
    region.donate()
    print("   the pipe drained (%d bytes read) -> donate: ok, state %s" %
          (got, region.info().state))
    check(region.info().state == "donated" and got == n,
          "part 2: donation after the drain")


# ---- part 3 ----------------------------------------------------------------

def read_file_independently(path):
    """safetensors without libpin: json header, numpy.fromfile per tensor."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    start = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        out[name] = (e["dtype"], tuple(e["shape"]),
                     np.fromfile(path, np.uint8, end - b, offset=start + b))
    return out


def part3(dev, ckpt_mb, outdir):
    print()
    print("3. The fill phase: a safetensors checkpoint into a sealed region")
    rng = np.random.default_rng(26216)
    tensors = {}
    total = 0
    i = 0
    target = ckpt_mb * MiB
    while total < target:
        rows = int(rng.integers(64, 512))
        cols = 1024
        if i % 4 == 3:
            a = rng.standard_normal((rows, cols // 4)).astype(np.float32)
        else:
            a = as_bf16(bf16_bits(rng.standard_normal((rows, cols))))
        tensors["layers.%d.weight" % i] = a
        total += a.nbytes
        i += 1
    path = os.path.join(outdir, "demo.safetensors")
    t0 = time.perf_counter()
    pinmem.save_safetensors(path, tensors, metadata={"demo": "pinmem"},
                            formats={k: "BF16" for k, a in tensors.items()
                                     if a.dtype == BF16})
    t_save = time.perf_counter() - t0
    print("   checkpoint: %d tensors (bfloat16, float32), %.1f MiB, written "
          "with pinmem.save_safetensors in %.2f s to %s" %
          (len(tensors), total / MiB, t_save, path))
    ck = pinmem.load_safetensors(path, dev=dev)
    st = ck.stats
    print("   loaded: %.1f MiB read in %.3f s = %.2f GB/s (the whole load "
          "%.3f s); %s, O_DIRECT: %s, queue depth %d, %d KiB requests, "
          "%d requests%s" %
          (st["bytes"] / MiB, st["io_seconds"], st["gb_per_s"],
           st["seconds"],
           "read by the module (FILL)" if st.get("kernel_fill") else
           "io_uring", "yes" if st["direct"] else "no", st["queue_depth"],
           st["request_size"] // 1024, st["requests"],
           "" if not st["fallback_reason"] else
           " (%s)" % st["fallback_reason"]))
    (info,) = ck.region_info
    pages = "%d chunk(s) of 2 MiB" % info.nr_chunks if info.nr_chunks \
        else "%d smaller chunk(s)" % info.nr_fallback_chunks
    print("   region %d: %.1f MiB in %s, state %s after the load" %
          (info.id, info.size / MiB, pages, info.state))
    check(info.state == "sealed", "part 3: region sealed")
    if os.environ.get("PINMEM_SCRATCH") and dev.backend == "device":
        check(st["direct"], "part 3: O_DIRECT on the scratch disk")
    indep = read_file_independently(path)
    good = 0
    t0 = time.perf_counter()
    for name, (dtype, shape, raw) in indep.items():
        view = ck[name]
        ok = (ck.formats[name] == dtype and view.shape == shape and
              not view.flags.writeable and
              np.array_equal(view.reshape(-1).view(np.uint8), raw) and
              np.array_equal(view.reshape(-1).view(np.uint8),
                             np.ascontiguousarray(tensors[name]).reshape(-1)
                             .view(np.uint8)))
        good += ok
    t_check = time.perf_counter() - t0
    print("   read through read-only NumPy views: %d/%d tensors equal to the "
          "file (independent reader: json + numpy.fromfile) and to the "
          "source, in %.2f s" % (good, len(indep), t_check))
    check(good == len(indep) == len(tensors), "part 3: every tensor")
    view = next(iter(ck.values()))
    try:
        view[0, 0] = 0
        check(False, "part 3: a loaded tensor must be read-only")
    except ValueError as e:
        print("   writing into a loaded tensor -> ValueError (%s)" % e)
    del view
    ck.close()
    del ck


def torch_parts(dev, parts, size, args, outdir):
    try:
        import demo_torch
    except ImportError as e:
        print()
        print("4-5. PyTorch parts skipped: %s (Debian: python3-torch)" % e)
        return
    if "4" in parts:
        demo_torch.part4(dev, size, args.iterations, outdir, check, snapshot,
                         LeakMeter(args.iterations),
                         lambda f, la, sz, m: report_counts(
                             f, la, sz, args.iterations, "part 4", m))
    if "5" in parts:
        demo_torch.part5(dev, args.ckpt_mb, outdir, check)


def cache_part(outdir):
    try:
        import demo_cache
    except ImportError as e:
        print()
        print("6. One copy per host skipped: %s" % e)
        return
    print()
    demo_cache.part6(outdir, check)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mb", type=float, default=1.0,
                    help="part 1: MiB of bfloat16 weights (default 1)")
    ap.add_argument("--iterations", type=int, default=1000,
                    help="part 1: iterations (default 1000)")
    ap.add_argument("--ckpt-mb", type=int, default=32,
                    help="part 3: MiB of checkpoint (default 32)")
    ap.add_argument("--parts", default="1,2,3,4,5,6",
                    help="the parts to run, comma-separated (default all: "
                    "1,2,3,4,5,6; part 7, JAX, is demo_jax.py)")
    ap.add_argument("--out", default=None,
                    help="where files go (default: $PINMEM_SCRATCH, else a "
                    "temporary folder)")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    if not parts <= {"1", "2", "3", "4", "5", "6"}:
        ap.error("--parts: %s: the parts are 1, 2, 3, 4, 5 and 6" % args.parts)
    base = args.out or os.environ.get("PINMEM_SCRATCH") or None
    outdir = tempfile.mkdtemp(prefix="pinmem-demo-", dir=base)
    size = max(4096, int(args.size_mb * MiB) // 4096 * 4096)

    t_all = time.perf_counter()
    dev = pinmem.open()
    info = dev.info()
    print("pinmem demo: kernel %s, backend %s%s, Python %s, NumPy %s" %
          (platform.release(), dev.backend,
           " (ABI %d)" % info.abi_version if info.abi_version else
           " (no module: memfd)", platform.python_version(), np.__version__))
    print("files in %s" % outdir)
    print()
    if "1" in parts:
        part1(dev, size, args.iterations, outdir)
    if "2" in parts:
        part2(dev)
    if "3" in parts:
        part3(dev, args.ckpt_mb, outdir)
    if parts & {"4", "5"}:
        torch_parts(dev, parts, size, args, outdir)
    if "6" in parts:
        cache_part(outdir)
    dev.close()
    for name in os.listdir(outdir):
        os.unlink(os.path.join(outdir, name))
    os.rmdir(outdir)
    print()
    print("demo: %s (parts %s) in %.1f s" % (
        "all checks passed" if not failures else
        "%d check(s) FAILED" % len(failures),
        ",".join(sorted(parts)), time.perf_counter() - t_all))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
