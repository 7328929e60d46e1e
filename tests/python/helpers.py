# SPDX-License-Identifier: GPL-2.0
"""What the tests observe from outside the binding: /proc/self/maps, memory,
open fds, and the module's debugfs counters; and a pinmem-cached of their
own to talk to."""
import contextlib
import os
import subprocess
import time

DEBUGFS = "/sys/kernel/debug/pinmem"
CACHED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                      "build", "sbin", "pinmem-cached")


@contextlib.contextmanager
def cached_service(directory, budget="64M", args=()):
    """A pinmem-cached listening in directory: its socket's path, or None
    when the service is not built. Waits until the socket is there (a
    loaded machine can take seconds to start it, and a test that went on
    without it would load privately and fail for the wrong reason)."""
    if not os.path.exists(CACHED):
        yield None
        return
    sock = os.path.join(str(directory), "cache.sock")
    p = subprocess.Popen([CACHED, "--socket", sock, "--budget", budget,
                          "--backend", os.environ.get("PIN_BACKEND", "auto"),
                          *args],
                         stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not os.path.exists(sock):
            if p.poll() is not None:
                raise RuntimeError("pinmem-cached exited with %d before its "
                                   "socket was there" % p.returncode)
            if time.monotonic() > deadline:
                raise RuntimeError("pinmem-cached made no socket in 120 s")
            time.sleep(0.05)
        yield sock
    finally:
        if p.poll() is None:
            p.terminate()
        p.wait()


def maps_lines():
    with open("/proc/self/maps") as f:
        return f.read().splitlines()


def _parse(line):
    parts = line.split(None, 5)
    lo, hi = (int(x, 16) for x in parts[0].split("-"))
    path = parts[5] if len(parts) > 5 else ""
    return lo, hi, path


def mapping_path(rng):
    """The pathname /proc/self/maps shows for the mapping at rng."""
    for line in maps_lines():
        lo, hi, path = _parse(line)
        if lo <= rng[0] < hi:
            return path
    return None


def mapped(rng, path):
    """Whether a mapping of path overlaps the address range rng."""
    for line in maps_lines():
        lo, hi, p = _parse(line)
        if p == path and lo < rng[1] and rng[0] < hi:
            return True
    return False


def count_maps(path_part):
    return sum(1 for line in maps_lines() if path_part in _parse(line)[2])


def nr_maps():
    return len(maps_lines())


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def nr_fds():
    return len(os.listdir("/proc/self/fd"))


def debugfs():
    """The module's counters, or None where they cannot be read."""
    out = {}
    for name in ("regions", "pages", "mappings", "view_fds"):
        try:
            with open(os.path.join(DEBUGFS, name)) as f:
                out[name] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            return None
    return out
