# SPDX-License-Identifier: GPL-2.0
"""Ending a view while a slice of it lives is refused, however the end is
reached: the name bound by ``as`` deleted inside the block, or release()
called unbound. Before, both emptied the array and unmapped the memory the
slice still pointed into (the child interpreter died of SIGSEGV reading
it), so each case runs in a child interpreter."""
import os
from forked import run_python

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

PRELUDE = r"""
import sys
sys.path.insert(0, %r)
import numpy as np
import pinmem
dev = pinmem.open()
r = dev.alloc(4 << 20)
""" % os.path.join(TOP, "libpin", "python")

NAME_DELETED = r"""
def f():
    try:
        with r.view(np.uint8, (8192,), writable=True) as a:
            a[:] = 3
            s = a[10:]
            del a
    except pinmem.ViewInUseError as e:
        print("refused:", "1 other array" in str(e))
    print("slice", s.mapped, int(s[0]), int(s[-1]), flush=True)
    rng = s.mapping_range
    del s
    print("gone", not any(l.startswith("%x-%x " % rng)
                          for l in open("/proc/self/maps")))
f()
"""

UNBOUND_RELEASE = r"""
a = r.view(np.uint8, (8192,), writable=True)
a[:] = 5
s = a.reshape(2, 4096)[1]
try:
    pinmem.PinnedArray.release(a)
except pinmem.ViewInUseError:
    print("refused: True")
print("slice", s.mapped, int(s[0]), int(s[-1]), flush=True)
del a
print("alone", s.mapped)
"""


def run(body):
    p = run_python(PRELUDE + body, timeout=60)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    return p.stdout


def test_with_block_whose_name_was_deleted():
    assert run(NAME_DELETED) == "refused: True\nslice True 3 3\ngone True\n"


def test_unbound_release_with_a_slice_alive():
    assert run(UNBOUND_RELEASE) == "refused: True\nslice True 5 5\nalone True\n"
