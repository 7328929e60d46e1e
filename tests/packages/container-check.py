#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Inside a container of the container test (tests/packages/guest-containers):
load CHECKPOINT with pinmem.safetensors.numpy.load_file(..., shared=True),
check every tensor against MANIFEST (sha256 of each tensor's bytes, written
where the checkpoint was made), and say how it was served and what this
container's memory cgroup holds (the cgroup namespace makes
/sys/fs/cgroup the container's own). Hashing reads the tensors where they
lie: nothing is copied into the container's memory.

    container-check.py hold|once CHECKPOINT MANIFEST

hold: print "ready" and keep the tensors mapped; SIGUSR1 checks them again
("recheck: ok"), SIGTERM exits 0. once: exit after the check (0: all
tensors match). Each line also goes to /status/out when the container has
a /status directory, where the test reads it without asking podman."""
import hashlib
import json
import os
import signal
import sys
import warnings


def say(line):
    print(line, flush=True)
    if os.path.isdir("/status"):
        with open("/status/out", "a") as f:
            f.write(line + "\n")


def check(sd, manifest):
    bad = [n for n, h in sorted(manifest.items())
           if n not in sd or hashlib.sha256(sd[n]).hexdigest() != h]
    return bad


def main():
    mode, path, manifest_path = sys.argv[1:4]
    with open(manifest_path) as f:
        manifest = json.load(f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import pinmem
        import pinmem.safetensors.numpy as st
        dev = pinmem.open()
        say("backend: %s (%s)" % (dev.backend, dev.backend_why))
        dev.close()
        sd = st.load_file(path, shared=True)
    words = [str(w.message) for w in caught]
    for w in words:
        say("warning: %s" % w)
    private = any("loading privately" in w for w in words)
    say("load: %s" % ("private" if private else "shared"))
    bad = check(sd, manifest)
    if bad:
        say("tensors: %d differ from the file: %s" % (len(bad), bad))
        return 1
    say("tensors: %d, every one the file's bytes" % len(manifest))
    # What this container is charged for the load, before anything else is
    # loaded: the report below reads the file once more, and its copy
    # stays until its Checkpoint is gone, not at close().
    with open("/sys/fs/cgroup/memory.current") as f:
        say("memory.current: %d" % int(f.read()))
    if private:
        # The reads' own word on how they went: under a default seccomp
        # profile, plain reads instead of io_uring.
        ck = pinmem.load_safetensors(path)
        say("reads: %s" % (ck.stats.get("fallback_reason") or "io_uring"))
        ck.close()
    if mode == "once":
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGUSR1, lambda *_: None)
    say("ready")
    while True:
        signal.pause()
        say("recheck: %s" % ("ok" if not check(sd, manifest) else "bad"))


if __name__ == "__main__":
    sys.exit(main())
