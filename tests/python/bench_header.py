#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A header of many tensors through the Python loaders, side by side:
pinmem's load_file (NumPy and torch; private, and shared=True without a
service, the private read-only fallback) and pinmem.load_safetensors
against safetensors' own load_file (NumPy and torch), on one file of N
F32 tensors of shape [1] (the header is nearly all of it: about 70
bytes a tensor), written for the run. Each load in a fresh process, the loaders
alternating run by run, the page cache warm (the file is read once
first); the time is load_file's call alone (imports outside). Medians,
and each loader's ratio to safetensors' load_file of the same framework
and to safetensors.numpy's.
NumPy's loaders run under the venv's python (tests/python-venv, which has
safetensors), torch's under Debian's python3 (safetensors' with the venv's
packages after Debian's on the path). Not a test: benchmarks.md's numbers come
from it; tests/python/test_many_tensors.py guards the per-tensor work by
counting.

    tests/python/bench_load_file.py --header [TENSORS [RUNS]]
    (default 1000000 tensors, 3 runs)
"""
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

PY = r"""
import sys, time, warnings
sys.path.insert(0, %r)
which, path = sys.argv[1], sys.argv[2]
if len(sys.argv) > 3:
    sys.path.append(sys.argv[3])
warnings.simplefilter("ignore")
if which == "safetensors numpy":
    from safetensors.numpy import load_file
elif which == "safetensors torch":
    from safetensors.torch import load_file
elif which.startswith("pinmem numpy"):
    import pinmem.safetensors.numpy as m
    load_file = m.load_file
elif which.startswith("pinmem torch"):
    import pinmem.safetensors.torch as m
    load_file = m.load_file
else:
    import pinmem
    load_file = pinmem.load_safetensors
kw = {"shared": True} if which.endswith("shared=True") else {}
t0 = time.perf_counter()
sd = load_file(path, **kw)
t = time.perf_counter() - t0
print(t, len(sd))
""" % os.path.join(TOP, "libpin", "python")

LOADERS = (
    ("safetensors numpy", "venv"),
    ("pinmem numpy load_file", "venv"),
    ("pinmem numpy load_file shared=True", "venv"),
    ("pinmem.load_safetensors", "venv"),
    ("safetensors torch", "debian"),
    ("pinmem torch load_file", "debian"),
    ("pinmem torch load_file shared=True", "debian"),
)


def venv():
    return subprocess.run([os.path.join(TOP, "tests", "python-venv"),
                           "path"], check=True, capture_output=True,
                          text=True).stdout.strip()


def write(path, n):
    """n F32 tensors of shape [1], named t0000000..., in order."""
    with open(path, "wb") as f:
        parts = ['"t%07d":{"dtype":"F32","shape":[1],"data_offsets":[%d,%d]}'
                 % (i, 4 * i, 4 * i + 4) for i in range(n)]
        head = ("{" + ",".join(parts) + "}").encode()
        head += b" " * (-len(head) % 8)
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        f.write(bytes(4 * n))
    return len(head)


def run_one(which, kind, path, n, py_venv, site, env):
    if kind == "venv":
        cmd = [py_venv, "-c", PY, which, path]
    elif which.startswith("safetensors"):
        cmd = ["/usr/bin/python3", "-c", PY, which, path, site]
    else:       # the venv's ml_dtypes are NumPy 2's: not Debian's NumPy
        cmd = ["/usr/bin/python3", "-c", PY, which, path]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                         env=env).stdout.split()
    if int(out[1]) != n:
        raise SystemExit("%s: %s tensors, not %d" % (which, out[1], n))
    return float(out[0])


def main(args):
    n = int(args[0]) if args else 1000000
    runs = int(args[1]) if len(args) > 1 else 3
    v = venv()
    py_venv = os.path.join(v, "bin", "python")
    site = os.path.join(v, "lib", "python%d.%d" % sys.version_info[:2],
                        "site-packages")
    with tempfile.TemporaryDirectory(prefix="bench-header-") as d:
        path = os.path.join(d, "header.safetensors")
        head = write(path, n)
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass
        env = dict(os.environ,
                   PIN_CACHE_SOCKET=os.path.join(d, "no-service.sock"))
        times = {}
        for _ in range(runs):
            for which, kind in LOADERS:
                times.setdefault(which, []).append(
                    run_one(which, kind, path, n, py_venv, site, env))
    print("%d tensors, header %d bytes, %d runs, warm cache, PIN_BACKEND=%s"
          % (n, head, runs, os.environ.get("PIN_BACKEND", "(default)")))
    med = {k: statistics.median(x) for k, x in times.items()}
    print("  %-36s %9s  %-24s %s  %s" % (
        "loader", "median", "/ same framework's", "/ numpy's", "runs"))
    for which, _ in LOADERS:
        ref = "safetensors torch" if "torch" in which else \
            "safetensors numpy"
        print("  %-36s %7.2f s  %5.2fx %-18s %5.2fx      %s" % (
            which, med[which], med[which] / med[ref], ref,
            med[which] / med["safetensors numpy"],
            " ".join("%.2f" % x for x in times[which])))
    print(json.dumps({"tensors": n, "runs": runs, "median_s": med}))


if __name__ == "__main__":
    main(sys.argv[1:])
