# SPDX-License-Identifier: GPL-2.0
"""Interpreter exit never unmaps memory that arrays still read."""
import os
import subprocess
import sys

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# The atexit hook is registered before pinmem makes its first finalizer, so
# it runs after weakref.finalize's own exit hook: a view or owner mapping
# unmapped there is read by the hook (SIGSEGV).
SCRIPT = r"""
import atexit, sys
sys.path.insert(0, %r)
held = {}
def late():
    print("view", int(held["v"][0]), "owner", int(held["o"][1]), flush=True)
atexit.register(late)
import numpy as np
import pinmem
dev = pinmem.open()
r = dev.alloc(4 << 20)
held["v"] = r.view(np.uint8, 4096, writable=True)
held["v"][0] = 7
held["o"] = r.owner_array(np.uint8, 4096)
held["o"][1] = 9
held["r"] = r
""" % os.path.join(TOP, "libpin", "python")


def test_arrays_stay_mapped_through_exit_hooks():
    p = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, (p.returncode, p.stderr)
    assert p.stdout == "view 7 owner 9\n"
