#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Load throughput of pinmem.safetensors.torch.load_file against the C
pinload and against safetensors.torch.load_file + pinning (the reference
library, then each tensor copied into page-locked memory, as
pin_memory() does into cudaHostAlloc memory: here an anonymous mapping,
mlock()ed, which is what cudaHostAlloc makes without a GPU driver) on the
same file, cold cache each run (root: drop_caches), runs alternating;
medians, and CPU seconds (user + system) per GB of each Python load. The
reference needs the safetensors package: from the test venv
(tests/python-venv), put after Debian's packages on the path, so torch and
NumPy stay Debian's. Not a test: benchmarks.md's numbers come from it.

End to end, as a user needs it: checkpoint file -> tensors ready for a
direct GPU copy (pinned and CUDA-registered, pinmem.torch.is_pinned),
per backend (portable; the device where /dev/pinmem exists), without
registration (PINMEM_CUDA_REGISTER=0) and with it: through libcuda.so.1
where a driver is installed, else through the driver test double
(build/tests/cuda/libcuda-double.so, whose per-page checks stand in for
the driver's pinning and are labelled so).

    tests/python/bench_load_file.py FILE [RUNS]

A header of many tensors (pinmem's Python loaders against safetensors'
on a file that is nearly all header; bench_header.py says how):

    tests/python/bench_load_file.py --header [TENSORS [RUNS]]
"""
import json
import os
import statistics
import subprocess
import sys

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

PY = r"""
import sys, time
sys.path.insert(0, %r)
from pinmem.safetensors.torch import load_file
import pinmem.safetensors as st
import resource
ru0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
with st.safe_open(sys.argv[1], framework="pt") as f:
    sd = {k: f.get_tensor(k) for k in f.offset_keys()}
    s = f.checkpoint.stats
t = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_SELF)
import pinmem.torch as pt
ready = all(pt.is_pinned(v) for v in sd.values())
print(t, s["io_seconds"], s["bytes"], int(s["direct"]),
      ru.ru_utime + ru.ru_stime - ru0.ru_utime - ru0.ru_stime, int(ready))
""" % os.path.join(TOP, "libpin", "python")

# Every tensor of sd copied into one mlock()ed anonymous mapping (what
# pin_memory() makes, cudaHostAlloc's memory, without a driver): pinned.
# Needs ctypes, mmap, torch and libc = ctypes.CDLL(None, use_errno=True).
PIN = r"""
total = sum(-(-v.numel() * v.element_size() // 64) * 64 for v in sd.values())
buf = mmap.mmap(-1, max(total, 1))
addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
if libc.mlock(ctypes.c_void_p(addr), ctypes.c_size_t(total)):
    raise OSError(ctypes.get_errno(), "mlock")
pinned, off = {}, 0
for k, v in sd.items():
    n = v.numel() * v.element_size()
    d = torch.frombuffer(buf, dtype=torch.uint8, count=n, offset=off)
    d.copy_(v.reshape(-1).view(torch.uint8))
    pinned[k] = d.view(v.dtype).view(v.shape)
    off += -(-n // 64) * 64
"""

# safetensors.torch.load_file, then pin: one mlock()ed anonymous mapping
# for all tensors (cudaHostAlloc's memory without a driver), each tensor
# copied in. Time and CPU of the whole, as for pinmem's load.
REF = r"""
import ctypes, mmap, resource, sys, time
sys.path.append(sys.argv[2])
import torch
from safetensors.torch import load_file
libc = ctypes.CDLL(None, use_errno=True)
ru0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
sd = load_file(sys.argv[1])
t1 = time.perf_counter()
"""+ PIN + r"""t = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_SELF)
print(t, t1 - t0, ru.ru_utime + ru.ru_stime - ru0.ru_utime - ru0.ru_stime)
"""


def venv_site():
    venv = subprocess.run([os.path.join(TOP, "tests", "python-venv"),
                           "path"], check=True, capture_output=True,
                          text=True).stdout.strip()
    return os.path.join(venv, "lib", "python%d.%d" % sys.version_info[:2],
                        "site-packages")


def drop():
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def driver():
    """(PIN_CUDA_LIBRARY, label) of the registration runs."""
    try:
        import ctypes
        ctypes.CDLL("libcuda.so.1")
        return "libcuda.so.1", "CUDA driver"
    except OSError:
        return (os.path.join(TOP, "build", "tests", "cuda",
                             "libcuda-double.so"), "driver test double")


def ready_runs(path, runs, size):
    """End-to-end GB/s of file -> tensors ready for a direct GPU copy, per
    (backend, registration): {label: [GB/s per run]}."""
    lib, what = driver()
    backends = ["portable"] + (["device"] if os.path.exists("/dev/pinmem")
                               else [])
    out = {}
    for _ in range(runs):
        for b in backends:
            for reg in (False, True):
                env = dict(os.environ, PIN_BACKEND=b,
                           PINMEM_CUDA_REGISTER="1" if reg else "0",
                           PIN_CUDA_LIBRARY=lib)
                drop()
                o = subprocess.run(["/usr/bin/python3", "-W", "ignore", "-c",
                                    PY, path], check=True, env=env,
                                   capture_output=True, text=True).stdout
                o = o.split()
                label = "ready for GPU, %s, %s" % (
                    b, ("registered (%s)" % what) if reg else
                    "locked, not registered")
                if reg and o[5] != "1":
                    label += " NOT ALL PINNED"
                out.setdefault(label, []).append(size / float(o[0]) / 1e9)
    return out


def main():
    if sys.argv[1:2] == ["--header"]:
        import bench_header
        return bench_header.main(sys.argv[2:])
    path = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    size = os.path.getsize(path)
    site = venv_site()
    c_e2e, c_io, p_e2e, p_io, p_cpu = [], [], [], [], []
    r_e2e, r_load, r_cpu = [], [], []
    cold = True
    for _ in range(runs):
        cold &= drop()
        r = json.loads(subprocess.run(
            [os.path.join(TOP, "build", "bin", "pinload"), "--json",
             "--no-progress", path], check=True, capture_output=True,
            text=True).stdout)
        c_e2e.append(r["bytes_read"] / r["seconds"] / 1e9)
        c_io.append(r["bytes_read"] / r["transfer_seconds"] / 1e9)
        cold &= drop()
        out = subprocess.run(["/usr/bin/python3", "-c", PY, path],
                             check=True, capture_output=True,
                             text=True).stdout.split()
        t, io, nbytes = float(out[0]), float(out[1]), int(out[2])
        p_e2e.append(size / t / 1e9)
        p_io.append(nbytes / io / 1e9)
        p_cpu.append(float(out[4]) / (size / 1e9))
        cold &= drop()
        out = subprocess.run(["/usr/bin/python3", "-c", REF, path, site],
                             check=True, capture_output=True,
                             text=True).stdout.split()
        r_e2e.append(size / float(out[0]) / 1e9)
        r_load.append(size / float(out[1]) / 1e9)
        r_cpu.append(float(out[2]) / (size / 1e9))
    print("file %s, %d bytes, %d runs, %s cache" %
          (path, size, runs, "cold" if cold else "WARM (not root)"))
    for name, xs, unit in (
            ("pinload (C), transfer", c_io, "GB/s"),
            ("pinload (C), end to end", c_e2e, "GB/s"),
            ("load_file (pinmem), transfer", p_io, "GB/s"),
            ("load_file (pinmem), end to end", p_e2e, "GB/s"),
            ("load_file (pinmem), CPU", p_cpu, "s/GB"),
            ("safetensors load_file alone (lazy)", r_load, "GB/s"),
            ("safetensors load_file + pinning", r_e2e, "GB/s"),
            ("safetensors + pinning, CPU", r_cpu, "s/GB")):
        print("  %-34s %6.3f %s   %s" % (name, statistics.median(xs), unit,
                                        " ".join("%.2f" % x for x in xs)))
    for name, xs in ready_runs(path, runs, size).items():
        print("  %-34s %6.3f GB/s   %s" % (name, statistics.median(xs),
                                         " ".join("%.2f" % x for x in xs)))
    print("  load_file / pinload end to end: %.2f" %
          (statistics.median(p_e2e) / statistics.median(c_e2e)))
    print("  pinmem load_file / safetensors + pinning: %.2f" %
          (statistics.median(p_e2e) / statistics.median(r_e2e)))


if __name__ == "__main__":
    main()
