#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""pinmem's loaders against the other checkpoint loaders, side by side:
pinmem's load_file (Python) and pinload (C), fastsafetensors (CPU, no
GDS), Run:ai's model streamer and safetensors, each with and without a
copy into locked memory (what pin_memory() makes), the JAX loaders
(pinmem.jax against safetensors.flax + jax.device_put to pinned_host),
and fio --fixedbufs (the disk's pace for the C loader). Checkpoints: one
of large tensors (16 bf16), one of many small ones (2,000), and the
first as a sharded index (4 shards). Every load runs in a process of its
own (bench_peers_loader.py), the page cache dropped before it (root:
drop_caches; else posix_fadvise DONTNEED of the files), the loaders in
turn, RUNS rounds. Printed: median GB/s (file bytes over the time from the
call to every tensor in hand) with every run, CPU seconds per GB, the
share of the tensors' memory locked after the load and registered with
CUDA (the driver test double stands in for the driver on pinmem's rows),
and whether every tensor equals safetensors' own load of it.

    tests/python/bench_peers.py [--small | --mib N] [--runs N] [--dir DIR]
                                [--json FILE] [--fadvise] [--rows LIST]

--mib N: N MiB of large tensors and N/2 MiB of small ones (default 1024);
--small: 16 MiB and 8 MiB (200 tensors), make check's smoke test. The
peers come from the test venv (tests/python-venv); they need torch, which
is Debian's python3-torch. Not a test of speed.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LOADER = os.path.join(TOP, "tests", "python", "bench_peers_loader.py")
DOUBLE = os.path.join(TOP, "build", "tests", "cuda", "libcuda-double.so")

# (row, what it is, pinned): pinned rows give locked memory.
ROWS = [
    ("pinmem", "pinmem load_file (Python)", True),
    ("pinload", "pinmem pinload (C)", True),
    ("fst", "fastsafetensors, CPU tensors", False),
    ("fst+lock", "fastsafetensors + copy into locked", True),
    ("runai", "Run:ai streamer, CPU tensors", False),
    ("runai+lock", "Run:ai streamer + copy into locked", True),
    ("st+lock", "safetensors + copy into locked", True),
    ("pinmem-jax", "pinmem.jax.load_safetensors", True),
    ("st-jax+pinned", "safetensors.flax + device_put pinned_host", False),
    ("fio", "fio --fixedbufs (O_DIRECT, io_uring)", None),
]
JAX_ROWS = ("pinmem-jax", "st-jax+pinned")


def venv():
    out = subprocess.run([os.path.join(TOP, "tests", "python-venv"), "path"],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def write_checkpoint(path, sizes, seed):
    """A safetensors file of bf16 tensors of the given byte sizes (each a
    multiple of 64), data from a seeded generator, the header padded with
    spaces so that the data start on 4096 bytes (every tensor then on 64:
    JAX can take each in place). Names t00000, t00001, ..."""
    import random
    rng = random.Random(seed)
    hdr, off = {}, 0
    for i, n in enumerate(sizes):
        hdr["t%05d" % i] = {"dtype": "BF16", "shape": [n // 64, 32],
                            "data_offsets": [off, off + n]}
        off += n
    text = json.dumps(hdr, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 4096)
    with open(path + ".tmp", "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        for n in sizes:
            f.write(rng.randbytes(n))
    os.rename(path + ".tmp", path)


def write_index(folder, large, shards):
    """The tensors of large, in shards files and an index naming them."""
    with open(large, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        hdr = json.loads(f.read(n))
        base = 8 + n
        names = sorted(hdr)
        per = -(-len(names) // shards)
        wm = {}
        for s in range(shards):
            part = names[s * per:(s + 1) * per]
            fname = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
            sizes = []
            for k in part:
                a, b = hdr[k]["data_offsets"]
                sizes.append((a, b - a))
                wm[k] = fname
            sub, off = {}, 0
            for k, (_, ln) in zip(part, sizes):
                sub[k] = dict(hdr[k], data_offsets=[off, off + ln])
                off += ln
            text = json.dumps(sub, separators=(",", ":")).encode()
            text += b" " * (-(8 + len(text)) % 4096)
            with open(os.path.join(folder, fname), "wb") as out:
                out.write(len(text).to_bytes(8, "little") + text)
                for a, ln in sizes:
                    f.seek(base + a)
                    out.write(f.read(ln))
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f)


def checkpoints(folder, mib):
    """(label, path) of the three checkpoints, written when absent: mib
    MiB of 16 large tensors, mib / 2 MiB of 2,000 small ones (200 under
    64 MiB), and the first as an index of 4 shards."""
    os.makedirs(folder, exist_ok=True)
    n = 2000 if mib >= 64 else 200
    large = os.path.join(folder, "large-%dm.safetensors" % mib)
    many = os.path.join(folder, "many-%dm-%d.safetensors" % (mib // 2, n))
    shard_dir = os.path.join(folder, "sharded-%dm" % mib)
    index = os.path.join(shard_dir, "model.safetensors.index.json")
    if not os.path.exists(large):
        write_checkpoint(large, [(mib << 20) // 16] * 16, 1)
    if not os.path.exists(many):
        # n tensors of 20 sizes, 64 B up to twice the mean, in turn (a
        # model's layers repeat their shapes).
        top = 2 * (((mib << 20) // 2) // n // 64 - 1)
        write_checkpoint(many, [64 * (1 + (i % 20) * top // 19)
                                for i in range(n)], 2)
    if not os.path.exists(index):
        os.makedirs(shard_dir, exist_ok=True)
        write_index(shard_dir, large, 4)
    return [("%d MiB, 16 large tensors" % mib, large),
            ("%d MiB, %d small tensors" % (os.path.getsize(many) >> 20, n),
             many),
            ("sharded index, 4 x %d MiB" % (mib // 4), index)]


def files_of(path):
    if not path.endswith(".index.json"):
        return [path]
    with open(path) as f:
        wm = json.load(f)["weight_map"]
    return [os.path.join(os.path.dirname(path), n)
            for n in sorted(set(wm.values()))]


def cold(path, fadvise):
    """Drop the checkpoint from the page cache: True when it was."""
    os.sync()
    if not fadvise:
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            return True
        except OSError:
            pass
    for f in files_of(path):
        fd = os.open(f, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return True


def run_pinload(path):
    out = subprocess.run([os.path.join(TOP, "build", "bin", "pinload"),
                          "--json", "--no-progress", "--verify", path],
                         check=True, capture_output=True, text=True).stdout
    r = json.loads(out)
    return {"seconds": r["seconds"], "cpu_seconds": r["cpu_seconds"],
            "file_bytes": sum(os.path.getsize(f) for f in files_of(path)),
            "tensors": r["tensors"], "tensor_bytes": r["tensor_bytes"],
            # The process is gone: what it said it did (its regions are
            # pinned, mlock on the portable backend, as it reads).
            "locked_bytes": r["tensor_bytes"] if r["pin_seconds"] > 0
            else None, "registered_bytes": None,
            "check": "ok" if r["verify"] == "ok" else r["verify"],
            "pages": r["pages"], "backend": r["backend"]}


def run_fio(path):
    secs = cpu = nbytes = 0.0
    for f in files_of(path):
        out = subprocess.run(
            ["fio", "--name=peers", "--readonly", "--rw=read",
             "--ioengine=io_uring", "--direct=1", "--fixedbufs",
             "--bs=4M", "--iodepth=16", "--output-format=json",
             "--filename", f, "--size=%d" % os.path.getsize(f)],
            check=True, capture_output=True, text=True).stdout
        job = json.loads(out[out.index("{"):])["jobs"][0]
        secs += job["read"]["runtime"] / 1e3
        nbytes += job["read"]["io_bytes"]
        cpu += (job["usr_cpu"] + job["sys_cpu"]) / 100 * \
            job["read"]["runtime"] / 1e3
    return {"seconds": secs, "cpu_seconds": cpu, "file_bytes": nbytes,
            "tensors": None, "tensor_bytes": None, "locked_bytes": None,
            "registered_bytes": None, "check": None}


def run_one(row, path, env, venv_dir, site):
    if row == "pinload":
        return run_pinload(path)
    if row == "fio":
        return run_fio(path)
    py = "/usr/bin/python3"
    if row in JAX_ROWS:
        # CPU jax has no CUDA backend for a registered (kDLCUDAHost) array.
        py = os.path.join(venv_dir, "bin", "python")
        env = {k: v for k, v in env.items() if k != "PIN_CUDA_LIBRARY"}
    p = subprocess.run([py, LOADER, row, path, site], env=env,
                       capture_output=True, text=True)
    if p.returncode:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def measure(cks, rows, runs, fadvise):
    env = dict(os.environ, PIN_BACKEND=os.environ.get("PIN_BACKEND",
                                                      "portable"))
    if os.path.exists(DOUBLE):
        env["PIN_CUDA_LIBRARY"] = DOUBLE
    venv_dir = venv()
    site = os.path.join(venv_dir, "lib", "python%d.%d" % sys.version_info[:2],
                        "site-packages")
    res = {(c, r): [] for c, _ in cks for r in rows}
    for _ in range(runs):
        for label, path in cks:
            for r in rows:
                cold(path, fadvise)
                res[(label, r)].append(run_one(r, path, env, venv_dir, site))
    return res


def summary(runs):
    """Median GB/s, every run's GB/s, median CPU s/GB, and the last run's
    locked/registered shares and check (all runs' checks must agree)."""
    ok = [x for x in runs if "error" not in x]
    if not ok:
        return {"error": runs[0]["error"]}
    gbps = [x["file_bytes"] / x["seconds"] / 1e9 for x in ok]
    cpu = [x["cpu_seconds"] / (x["file_bytes"] / 1e9) for x in ok]
    last = ok[-1]
    tb = last["tensor_bytes"]

    def share(k):
        return None if last[k] is None or not tb else last[k] / tb
    checks = sorted({str(x["check"]) for x in ok})
    return {"gbps": statistics.median(gbps), "runs": gbps,
            "cpu_s_per_gb": statistics.median(cpu),
            "locked": share("locked_bytes"),
            "registered": share("registered_bytes"),
            "tensors": last["tensors"],
            "check": None if checks == ["None"] else
            "ok" if checks == ["ok"] else "; ".join(checks),
            "failed_runs": len(runs) - len(ok)}


def pct(x):
    return "-" if x is None else "%d%%" % round(100 * x)


def table(cks, rows, res):
    """The side-by-side table as text lines."""
    out = []
    for label, path in cks:
        out.append("%s (%s)" % (label, os.path.relpath(path, TOP)))
        out.append("  %-44s %6s %7s %7s %5s %5s  %s" % (
            "loader", "GB/s", "CPU s/GB", "locked", "reg", "check", "runs"))
        for r, what, _ in ROWS:
            if r not in rows:
                continue
            s = summary(res[(label, r)])
            if "error" in s:
                out.append("  %-44s failed: %s" % (what, s["error"]))
                continue
            out.append("  %-44s %6.2f %7.2f %7s %5s %5s  %s" % (
                what, s["gbps"], s["cpu_s_per_gb"], pct(s["locked"]),
                pct(s["registered"]), s["check"] or "-",
                " ".join("%.2f" % g for g in s["runs"])))
    return out


def targets(cks, res):
    """The ratios the targets are about, per checkpoint."""
    out = []
    for label, _ in cks:
        s = {r: summary(res[(label, r)]) for r, _, _ in ROWS
             if (label, r) in res}
        g = {r: v["gbps"] for r, v in s.items() if "gbps" in v}
        unp = [r for r in ("fst", "runai") if r in g]
        pin = [r for r in ("fst+lock", "runai+lock", "st+lock") if r in g]
        line = "  %s:" % label
        if "pinmem" in g and unp:
            best = max(unp, key=g.get)
            line += " load_file / fastest unpinned (%s) %.2f;" % (
                best, g["pinmem"] / g[best])
        if "pinmem" in g and pin:
            best = max(pin, key=g.get)
            line += " / fastest pinned (%s) %.2f;" % (best,
                                                      g["pinmem"] / g[best])
        if "pinload" in g and "fio" in g:
            line += " pinload / fio --fixedbufs %.2f" % (g["pinload"] /
                                                         g["fio"])
        out.append(line)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", action="store_true", help="--mib 16")
    ap.add_argument("--mib", type=int, default=1024,
                    help="the large checkpoint's size (default 1024)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", default=os.path.join(TOP, "build", "bench",
                                                  "peers"))
    ap.add_argument("--json", help="write every run and summary here")
    ap.add_argument("--fadvise", action="store_true",
                    help="posix_fadvise DONTNEED, not drop_caches")
    ap.add_argument("--rows", default=",".join(r for r, _, _ in ROWS))
    a = ap.parse_args()
    rows = a.rows.split(",")
    unknown = set(rows) - {r for r, _, _ in ROWS}
    if unknown:
        ap.error("unknown rows: %s" % ", ".join(sorted(unknown)))
    if a.mib < 16 or a.mib % 16:
        ap.error("--mib must be a multiple of 16")
    cks = checkpoints(a.dir, 16 if a.small else a.mib)
    res = measure(cks, rows, a.runs, a.fadvise)
    print("pinbench peers: %d runs each, alternating, cold cache (%s), "
          "backend %s" % (a.runs, "fadvise" if a.fadvise else "drop_caches",
                          os.environ.get("PIN_BACKEND", "portable")))
    print("\n".join(table(cks, rows, res)))
    print("ratios of medians:")
    print("\n".join(targets(cks, res)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": a.runs, "checkpoints": [
                {"label": label, "path": path, "rows": {
                    r: {"summary": summary(res[(label, r)]),
                        "every_run": res[(label, r)]} for r in rows}}
                for label, path in cks]}, f, indent=1)


if __name__ == "__main__":
    main()
