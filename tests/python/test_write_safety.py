# SPDX-License-Identifier: GPL-2.0
"""Writing a loaded tensor never kills the process.

safetensors' tensors are writable. pinmem's private torch loads are too:
they lie over the process's own region, left open, and a write lands in
it (on every module: no copy-on-write needed); shared=True's are
read-only and the write is refused with pinmem.ReadOnlyError.
Copy-on-write views (NumPy's, region.view(copy_on_write=True)) keep the
region's bytes. Each write runs in a child process, so that a write that
faulted fails the test, not the run."""
import errno
import gc
import os

import numpy as np
import pytest

import pinmem
from forked import run_python

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture
def cow(dev):
    if not dev.copy_on_write_supported:
        pytest.skip("this pinmem module (ABI %d) maps views shared only" %
                    dev.info().abi_version)


def _in_child(check):
    """Run check() in a forked process: its exit status (0: it held)."""
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if check() else 1)
        except BaseException:
            os._exit(2)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_copy_on_write_view_keeps_the_region(region, cow):
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
    # Another process, through a shared view of its own, sees the region.
    assert _in_child(lambda: float(region.view(
        np.float32, (1024,)).sum()) == 7.0 * 1024) == 0
    rng = a.mapping_range
    del a
    gc.collect()
    with open("/proc/self/maps") as f:
        assert not any(line.startswith("%x-" % rng[0]) for line in f)


def test_copy_on_write_view_holds_donation(region, cow, device_only):
    with region.view(np.uint8, (4096,), writable=True) as w:
        w[:] = 5
    region.seal()
    a = region.view(np.uint8, (8192,), copy_on_write=True)
    a[:] = 1                                     # every page copied
    assert region.info().view_mappings == 1
    assert region.info().writable_view_mappings == 0
    with pytest.raises(pinmem.BusyError) as e:
        region.donate()
    assert [h.kind for h in e.value.holders if h.kind == "view"] == ["view"]
    del a
    gc.collect()
    region.donate()
    assert region.state == "donated"


def test_copy_on_write_needs_a_sealed_region_on_the_device(region, cow,
                                                           device_only):
    with pytest.raises(pinmem.PinError) as e:
        region.view(np.uint8, (4096,), copy_on_write=True)
    assert e.value.errno == errno.EPERM
    assert "not sealed" in str(e.value)
    assert region.info().view_mappings == 0


def test_copy_on_write_refused_by_a_module_without_it(device_only, scratch):
    # A module older than ABI 7, as the library sees it.
    old = pinmem.open()
    old.copy_on_write_supported = False
    try:
        r = old.alloc(1 << 20)
        r.seal()
        with pytest.raises(pinmem.PinError) as e:
            r.view(np.uint8, (4096,), copy_on_write=True)
        assert e.value.errno == errno.EOPNOTSUPP
        assert "shared only" in str(e.value)
        p = os.path.join(scratch, "a.safetensors")
        pinmem.save_safetensors(p, {"a": np.ones(4, np.float32)})
        with pytest.raises(pinmem.PinError) as e:
            pinmem.load_safetensors(p, dev=old, copy_on_write=True)
        assert e.value.errno == errno.EOPNOTSUPP
        assert r.info().view_mappings == 0
        r.close()
    finally:
        old.close()


def test_copy_on_write_and_writable_exclude_each_other(region):
    with pytest.raises((ValueError, pinmem.PinError)):
        region.view(np.uint8, (4096,), writable=True, copy_on_write=True)


CHILD = r"""
import sys
sys.path.insert(0, %r)
import os
import numpy as np, torch, pinmem
if os.environ.get("PINMEM_TEST_COW_ABI"):   # a module without copy-on-write
    pinmem.core._COW_ABI = int(os.environ["PINMEM_TEST_COW_ABI"])
from pinmem.safetensors.torch import load_file, load, save_file
from pinmem.safetensors import safe_open
path = sys.argv[1]
save_file({"w": torch.full((4, 4), 3.0), "b": torch.arange(4.0)}, path)
with open(path, "rb") as f:
    image = f.read()
cases = [("load_file", lambda: load_file(path)["w"]),
         ("get_tensor", lambda: safe_open(path, "pt").get_tensor("w")),
         ("get_slice", lambda: safe_open(path, "pt").get_slice("w")[1:]),
         ("load", lambda: load(image)["w"]),
         ("shared", lambda: load_file(path, shared=True)["w"])]
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
# A private load's write lands in the process's own region (open).
f = safe_open(path, "pt")
t = f.get_tensor("w")
t.add_(1)
ck = f.checkpoint
a = ck["w"]
off = a.__array_interface__["data"][0] - a.mapping_range[0]
r = ck.regions[0]
print("region", r.state, r.view(np.float32, (4,), offset=off).tolist(),
      flush=True)
"""  % os.path.join(TOP, "libpin", "python")


@pytest.mark.torch
@pytest.mark.parametrize("module", ["current", "without_cow"])
def test_writing_a_loaded_tensor_never_kills_the_process(scratch, dev,
                                                         module):
    pytest.importorskip("torch", reason="PyTorch is not installed")
    if module == "without_cow" and dev.backend != "device":
        pytest.skip("the portable backend has no module")
    # A module without copy-on-write views changes nothing any more.
    env = {} if module == "current" else {"PINMEM_TEST_COW_ABI": "1000000"}
    p = run_python(CHILD, [os.path.join(scratch, "m.safetensors")],
                   timeout=300, preload=("torch",), env=env)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    lines = p.stdout.splitlines()
    names = ("load_file", "get_tensor", "get_slice", "load")
    # As safetensors: the tensor changes (in its pinned region).
    assert lines[:4] == ["%s wrote [-1.0, 6.0, 6.0, 6.0] "
                         "[6.0, 6.0, 6.0, 6.0]" % n for n in names]
    # shared=True without a service: read-only, as the service's.
    assert lines[4] == "shared refused [3.0, 3.0, 3.0, 3.0]"
    # Another load is another region: it never saw the writes.
    assert lines[5:] == ["again [3.0, 3.0, 3.0, 3.0]",
                         "region open [4.0, 4.0, 4.0, 4.0]"]
