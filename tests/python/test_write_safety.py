# SPDX-License-Identifier: GPL-2.0
"""Writing a loaded tensor never kills the process.

safetensors' tensors are writable. pinmem's live in a sealed region: on the
portable backend torch's get copy-on-write mappings (the write lands on a
private copy of the page, the region keeps its bytes); on the device
backend, whose module maps views shared only, they are read-only and the
write is refused with pinmem.ReadOnlyError. Each write runs in a child
process, so that a write that faulted fails the test, not the run."""
import errno
import gc
import os
import subprocess
import sys

import numpy as np
import pytest

import pinmem

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture
def portable_only(dev):
    if dev.backend != "portable":
        pytest.skip("device backend: the module maps views shared only (no "
                    "copy-on-write); see the device tests")


def test_copy_on_write_view_keeps_the_region(region, portable_only):
    with region.view(np.float32, (1024,), writable=True) as w:
        w[:] = 7
    region.seal()
    a = region.view(np.float32, (1024,), copy_on_write=True)
    b = region.view(np.float32, (1024,), copy_on_write=True)
    assert a.flags.writeable and a.mapping_range != b.mapping_range
    a *= 2
    a[0] = -1
    assert a[0] == -1 and float(a[1:].sum()) == 14.0 * 1023
    assert float(b.sum()) == 7.0 * 1024                 # its own pages
    assert float(region.view(np.float32, (1024,)).sum()) == 7.0 * 1024
    rng = a.mapping_range
    del a
    gc.collect()
    with open("/proc/self/maps") as f:
        assert not any(line.startswith("%x-" % rng[0]) for line in f)


def test_copy_on_write_refused_on_the_device_backend(region, device_only,
                                                     scratch, dev):
    region.seal()
    with pytest.raises(pinmem.PinError) as e:
        region.view(np.uint8, (4096,), copy_on_write=True)
    assert e.value.errno == errno.EOPNOTSUPP
    assert "shared only" in str(e.value)
    p = os.path.join(scratch, "a.safetensors")
    pinmem.save_safetensors(p, {"a": np.ones(4, np.float32)})
    with pytest.raises(pinmem.PinError) as e:
        pinmem.load_safetensors(p, dev=dev, copy_on_write=True)
    assert e.value.errno == errno.EOPNOTSUPP
    assert region.info().view_mappings == 0


def test_copy_on_write_and_writable_exclude_each_other(region):
    with pytest.raises((ValueError, pinmem.PinError)):
        region.view(np.uint8, (4096,), writable=True, copy_on_write=True)


CHILD = r"""
import sys
sys.path.insert(0, %r)
import numpy as np, torch, pinmem
from pinmem.safetensors.torch import load_file, load, save_file
from pinmem.safetensors import safe_open
path = sys.argv[1]
save_file({"w": torch.full((4, 4), 3.0), "b": torch.arange(4.0)}, path)
with open(path, "rb") as f:
    image = f.read()
cases = [("load_file", lambda: load_file(path)["w"]),
         ("get_tensor", lambda: safe_open(path, "pt").get_tensor("w")),
         ("get_slice", lambda: safe_open(path, "pt").get_slice("w")[1:]),
         ("load", lambda: load(image)["w"])]
for name, get in cases:
    t = get()
    try:
        t.mul_(2)
        t[0, 0] = -1
        print(name, "wrote", t[0].tolist(), t[1].tolist(), flush=True)
    except pinmem.ReadOnlyError:
        print(name, "refused", t[0].tolist(), flush=True)
    del t
print("again", load_file(path)["w"][0].tolist(), flush=True)
# The region under a written tensor keeps its bytes.
f = safe_open(path, "pt")
t = f.get_tensor("w")
try:
    t.add_(1)
except pinmem.ReadOnlyError:
    pass
ck = f.checkpoint
a = ck["w"]
off = a.__array_interface__["data"][0] - a.mapping_range[0]
r = ck.regions[0]
print("region", r.state, r.view(np.float32, (4,), offset=off).tolist(),
      flush=True)
"""  % os.path.join(TOP, "libpin", "python")


@pytest.mark.torch
def test_writing_a_loaded_tensor_never_kills_the_process(scratch, dev):
    pytest.importorskip("torch", reason="PyTorch is not installed")
    p = subprocess.run([sys.executable, "-c", CHILD,
                        os.path.join(scratch, "m.safetensors")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    lines = p.stdout.splitlines()
    names = ("load_file", "get_tensor", "get_slice", "load")
    if dev.backend == "portable":
        # As safetensors: the tensor changes, on private pages.
        assert lines[:4] == ["%s wrote [-1.0, 6.0, 6.0, 6.0] "
                             "[6.0, 6.0, 6.0, 6.0]" % n for n in names]
    else:
        assert lines[:4] == ["%s refused [3.0, 3.0, 3.0, 3.0]" % n
                             for n in names]
    # Nobody else saw the writes: a new load, the region itself.
    assert lines[4:] == ["again [3.0, 3.0, 3.0, 3.0]",
                         "region sealed [3.0, 3.0, 3.0, 3.0]"]
