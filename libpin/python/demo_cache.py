#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""pinmem demo, part 6: one checkpoint, four workers, one copy in memory.

pinmem-cached serves a checkpoint to four worker processes, each of which
loads it with load_file(path, shared=True) as a tensor-parallel worker
would. Shown: one copy in pinned memory (not four), each worker's
tensors, an eviction the kernel refuses while the workers map the copy
(the refusal names them), and the same eviction allowed once they exit.
On the portable backend (no module) the last two cannot be shown: nobody
counts the views, and the demo says so.

Run by demo.py (make demo), or alone: python3 demo_cache.py [DIR].
"""
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import pinmem  # noqa: E402
from pinmem.safetensors import numpy as stnp  # noqa: E402
from pinmem.safetensors import shared  # noqa: E402

MiB = 1 << 20
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))

WORKER = r"""
import os, sys, zlib
sys.path.insert(0, %r)
from pinmem.safetensors import numpy as stnp
sd = stnp.load_file(%r, shared=True)
sums = " ".join("%%s=%%08x" %% (k, zlib.crc32(v.tobytes())) for k, v in sd.items())
print("   worker pid %%d: %%d tensors over the shared copy: %%s" %%
      (os.getpid(), len(sd), sums), flush=True)
sys.stdin.readline()
"""


def cached_binary():
    for p in (os.path.join(TOP, "build", "sbin", "pinmem-cached"),
              "/usr/sbin/pinmem-cached"):
        if os.access(p, os.X_OK):
            return p
    return None


def write_checkpoint(path, mib, seed):
    rng = np.random.default_rng(seed)
    n = mib * MiB // 4 // 4
    stnp.save_file({"layer%d.w" % i: rng.standard_normal(n, np.float32)
                    for i in range(4)}, path)


def pinned_total():
    with pinmem.open() as dev:
        return dev.info().total_bytes if dev.backend == "device" else None


def start_service(binary, sock, budget_mib):
    # One user asks here: its share is the whole budget (by default one
    # user may hold half, so that it cannot starve the others).
    p = subprocess.Popen([binary, "--socket", sock, "--budget",
                          "%dM" % budget_mib, "--user-share", "100"],
                         stderr=subprocess.DEVNULL)
    for _ in range(100):
        if os.path.exists(sock):
            return p
        time.sleep(0.05)
    return p


def listing(binary, sock):
    out = subprocess.run([binary, "--list", "--socket", sock],
                         capture_output=True, text=True).stdout
    return "".join("     " + line + "\n" for line in out.splitlines())


def try_second(path, sock):
    """Ask for a second checkpoint that needs the first one's room."""
    try:
        image, entry = shared.request(path, sock)[:2]
        del image
        return True, "served as entry %d" % entry
    except shared.Unavailable as e:
        return False, str(e)


def part6(outdir, check):
    print("6. One copy per host: pinmem-cached and four workers")
    binary = cached_binary()
    if binary is None:
        print("   skipped: pinmem-cached is not built (make)")
        return
    a = os.path.join(outdir, "model-a.safetensors")
    b = os.path.join(outdir, "model-b.safetensors")
    write_checkpoint(a, 32, 1)
    write_checkpoint(b, 32, 2)
    sock = os.path.join(outdir, "cache.sock")
    before = pinned_total()
    svc = start_service(binary, sock, 48)       # room for one of them
    workers = []
    try:
        for _ in range(4):
            w = subprocess.Popen([sys.executable, "-c", WORKER % (HERE, a)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True, env=dict(os.environ,
                                                     PIN_CACHE_SOCKET=sock))
            workers.append(w)
        lines = [w.stdout.readline().rstrip() for w in workers]
        for line in lines:
            print(line)
        check(len(set(x.split("shared copy: ")[-1] for x in lines)) == 1,
              "every worker sees the same bytes")
        after = pinned_total()
        if before is not None:
            grew = (after - before) / MiB
            print("   pinned memory grew by %.0f MiB for a %.0f MiB checkpoint "
                  "and 4 workers: one copy, not four" %
                  (grew, os.path.getsize(a) / MiB))
            check(grew < 2 * os.path.getsize(a) / MiB, "one copy in memory")
        print(listing(binary, sock), end="")
        ok, text = try_second(b, sock)
        device = before is not None
        print("   a second checkpoint needs the first one's room: %s" %
              ("served" if ok else "refused"))
        print("     " + text[:400])
        if device:
            check(not ok and any("pid %d " % w.pid in text for w in workers),
                  "the eviction is refused and names a worker")
        else:
            print("   (portable backend: nobody counts the views, so the "
                  "service only dropped its reference; the workers keep "
                  "their mappings)")
        for w in workers:
            w.stdin.close()
            w.wait()
        workers = []
        print("   the workers have exited")
        ok, text = try_second(b, sock)
        print("   the second checkpoint again: %s" % text)
        check(ok, "the eviction is allowed once no worker maps the copy")
        print(listing(binary, sock), end="")
    finally:
        for w in workers:
            w.kill()
            w.wait()
        svc.terminate()
        svc.wait()
        for f in (a, b, sock):
            if os.path.exists(f):
                os.unlink(f)


def main():
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)
            print("   !! CHECK FAILED: %s" % what)
        return ok

    outdir = tempfile.mkdtemp(prefix="pinmem-demo-cache-",
                              dir=sys.argv[1] if len(sys.argv) > 1 else None)
    part6(outdir, check)
    os.rmdir(outdir)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
