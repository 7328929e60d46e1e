#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""pinctl --json cache reads the service's LIST table into fields: a fake
service (fakeservice.py list) answers with a device backend's table (two
entries, pids, another user's file and clients, a refused eviction, timed
evictions, sizes in GiB, MiB and KiB), and every field must come back.

  pinctl-json.py PINCTL
Exit 0 when every field is as the table says; else prints what differs.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = """\
pinmem-cached: device backend, 3 entries, 1.5 GiB of 2.0 GiB budget, 7 loads
evictions: 2; the last: 128.0 MiB, DONATE 0.041 ms, release 9.817 ms; the slowest 9.858 ms
  ID       SIZE      AGE     IDLE STATE    FILE
   5    1.2 GiB    12.4s     0.3s ready    /models/b \\x0a.safetensors
    clients: pid 4242 (python3), pid 4243 (a)b), and 2 of other users
    evict: no, mapped by the clients above
    last refused eviction: mapped by 3 clients
    charged to: /kubepods/pod1234
   3    256 KiB    30.1s    30.0s ready    (a file of another user)
    kept: pinned
    evict: no, kept loaded (pinctl cache unpin FILE lets it go)
    clients: none mapping it
   2    4.0 MiB     1.0s     1.0s loading  /models/c.safetensors
    clients: 2 waiting for the load
"""

WANT = {
    "backend": "device", "entry_count": 3, "used": "1.5 GiB",
    "used_bytes": 3 << 29, "budget": "2.0 GiB", "budget_bytes": 2 << 30,
    "loads": 7,
    "evictions": {"count": 2, "last": "128.0 MiB", "last_bytes": 128 << 20,
                  "last_donate_ms": 0.041, "last_release_ms": 9.817,
                  "slowest_ms": 9.858},
    "entries": [
        {"id": 5, "size": "1.2 GiB", "size_bytes": int(1.2 * (1 << 30) + 0.5),
         "age_s": 12.4, "idle_s": 0.3, "state": "ready",
         "file": "/models/b \\x0a.safetensors",
         "clients": [{"pid": 4242, "comm": "python3"},
                     {"pid": 4243, "comm": "a)b"}],
         "clients_of_other_users": 2, "evictable": False,
         "evict": "no, mapped by the clients above",
         "last_refused_eviction": "mapped by 3 clients",
         "charged_to": "/kubepods/pod1234", "kept": False},
        {"id": 3, "size": "256.0 KiB", "size_bytes": 256 << 10,
         "age_s": 30.1, "idle_s": 30.0, "state": "ready", "file": None,
         "clients": [], "clients_of_other_users": 0, "evictable": False,
         "evict": "no, kept loaded (pinctl cache unpin FILE lets it go)",
         "kept": True, "kept_by": "pinned"},
        {"id": 2, "size": "4.0 MiB", "size_bytes": 4 << 20, "age_s": 1.0,
         "idle_s": 1.0, "state": "loading", "file": "/models/c.safetensors",
         "waiting": 2, "kept": False},
    ],
    "table": TABLE,
}


def main():
    pinctl = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        table, sock = os.path.join(d, "table"), os.path.join(d, "s")
        with open(table, "w") as f:
            f.write(TABLE)
        fake = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "fakeservice.py"), sock,
             "list", "--table", table], stdout=subprocess.PIPE, text=True)
        try:
            fake.stdout.readline()
            out = subprocess.run([pinctl, "--json", "cache", sock],
                                 capture_output=True, text=True, timeout=30)
        finally:
            fake.kill()
            fake.wait()
    try:
        got = json.loads(out.stdout)
    except ValueError as e:
        sys.exit("not JSON (%s): rc %d %r %r" % (e, out.returncode,
                                                  out.stdout, out.stderr))
    got.pop("socket", None)
    if got != WANT:
        for k in sorted(set(got) | set(WANT)):
            if got.get(k) != WANT.get(k):
                print("%s: got %r, want %r" % (k, got.get(k), WANT.get(k)))
        sys.exit(1)


main()
