#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Load throughput of pinmem.safetensors.torch.load_file against the C
pinload on the same file, cold cache each run (root: drop_caches), runs
alternating; medians. Not a test: the README's numbers come from it.

    tests/python/bench_load_file.py FILE [RUNS]
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
t0 = time.perf_counter()
with st.safe_open(sys.argv[1], framework="pt") as f:
    sd = {k: f.get_tensor(k) for k in f.offset_keys()}
    s = f.checkpoint.stats
t = time.perf_counter() - t0
print(t, s["io_seconds"], s["bytes"], int(s["direct"]))
""" % os.path.join(TOP, "libpin", "python")


def drop():
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def main():
    path = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    size = os.path.getsize(path)
    c_e2e, c_io, p_e2e, p_io = [], [], [], []
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
        t, io, nbytes, direct = float(out[0]), float(out[1]), int(out[2]), \
            out[3]
        p_e2e.append(size / t / 1e9)
        p_io.append(nbytes / io / 1e9)
    print("file %s, %d bytes, %d runs, %s cache" %
          (path, size, runs, "cold" if cold else "WARM (not root)"))
    for name, xs in (("pinload (C), transfer", c_io),
                     ("pinload (C), end to end", c_e2e),
                     ("load_file (Python), transfer", p_io),
                     ("load_file (Python), end to end", p_e2e)):
        print("  %-32s %6.3f GB/s   %s" % (name, statistics.median(xs),
                                          " ".join("%.2f" % x for x in xs)))
    print("  load_file / pinload end to end: %.2f" %
          (statistics.median(p_e2e) / statistics.median(c_e2e)))


if __name__ == "__main__":
    main()
