# SPDX-License-Identifier: GPL-2.0
"""Filling regions the caller already has: a loaded checkpoint's Region is
the caller's to donate, reopen and refill (pin_st_load_into), a writable
view takes a checkpoint (fill_view) or any tensors (fill); region fds pass
between processes (send_fd/recv_fd)."""
import errno
import gc
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

import pinmem
from pinmem.safetensors import fill, fill_view, load_into

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def write_checkpoint(path, seed, n=3):
    rng = np.random.default_rng(seed)
    arrays = {"w%d" % i: rng.standard_normal((64 + i, 33)).astype(np.float32)
              for i in range(n)}
    arrays["ids"] = np.arange(seed, seed + 100, dtype=np.int64)
    pinmem.save_safetensors(path, arrays, metadata={"seed": str(seed)})
    return arrays


def same(got, want):
    assert sorted(got) == sorted(want)
    for k in want:
        assert got[k].tobytes() == want[k].tobytes(), k


def test_checkpoint_regions_are_the_callers(scratch, dev):
    a = write_checkpoint(os.path.join(scratch, "a.safetensors"), 1)
    b_path = os.path.join(scratch, "b.safetensors")
    b = write_checkpoint(b_path, 2)
    ck = pinmem.load_safetensors(os.path.join(scratch, "a.safetensors"),
                                 dev=dev)
    (r,) = ck.regions
    assert isinstance(r, pinmem.Region) and r.id == ck.region_ids[0]
    assert r.state == "sealed"
    same(ck, a)
    if dev.backend == "device":
        with pytest.raises(pinmem.BusyError):
            r.donate()                      # the tensors are views
        ck.close()
        gc.collect()
        r.donate()                          # the seed's reuse
        r.reopen()
    else:
        # Portable: no donation; refill a fresh region of the same size.
        r = dev.alloc(r.size)
    placed = load_into(r, b_path)
    assert placed.metadata == {"seed": "2"}
    assert r.state == "open"                # left as it was
    assert all(p.offset % 1 == 0 and p.offset + p.nbytes <= r.size
               for p in placed.places.values())
    r.seal()
    same(placed.arrays(), b)
    if os.environ.get("PINMEM_SCRATCH") and dev.backend == "device":
        assert placed.stats["direct"], placed.stats["fallback_reason"]


def test_load_into_refusals(scratch, dev):
    path = os.path.join(scratch, "c.safetensors")
    write_checkpoint(path, 3)
    small = dev.alloc(4096)
    with pytest.raises(pinmem.PinError) as e:
        load_into(small, path)
    assert e.value.errno == errno.ENOSPC and "do not fit" in e.value.strerror
    r = dev.alloc(4 << 20)
    with pytest.raises(pinmem.PinError) as e:
        load_into(r, path, offset=100)
    assert e.value.errno == errno.EINVAL
    r.seal()
    with pytest.raises(pinmem.PinError) as e:
        load_into(r, path)
    assert e.value.errno == errno.EPERM and "sealed" in e.value.strerror


def test_fill_view_through_a_writable_view(scratch, dev):
    path = os.path.join(scratch, "d.safetensors")
    want = write_checkpoint(path, 4)
    r = dev.alloc(4 << 20)
    with r.view(np.uint8, (2 << 20,), offset=1 << 20, writable=True) as v:
        placed = fill_view(v, path, region=r)
    assert all(p.offset >= 1 << 20 for p in placed.places.values())
    r.seal()                                # no writable view is left
    same(placed.arrays(), want)
    with pytest.raises(ValueError, match="writable"):
        fill_view(r.view(np.uint8, (4096,)), path)


def test_fill_any_tensors(dev):
    r = dev.alloc(1 << 20)
    src = {"a": np.arange(10, dtype=np.int16),
           "b": np.ones((3, 5), np.float64), "c": np.zeros(0, np.uint8)}
    placed = fill(r, src, offset=4096, align=256)
    assert [p.offset % 256 for p in placed.places.values()] == [0, 0, 0]
    assert placed.places["a"].offset == 4096
    r.seal()
    same(placed.arrays(), src)


@pytest.mark.torch
def test_fill_any_tensors_torch(dev):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    r = dev.alloc(1 << 20)
    src = {"a": np.arange(10, dtype=np.int16),
           "b": np.ones((3, 5), np.float64), "c": np.zeros(0, np.uint8)}
    placed = fill(r, src, offset=4096, align=256)
    r.seal()
    t = placed.tensors()
    assert t["b"].dtype == torch.float64 and float(t["b"].sum()) == 15.0
    r2 = dev.alloc(1 << 20)
    p2 = fill(r2, {"x": torch.arange(6, dtype=torch.bfloat16)})
    assert p2.places["x"].format == "BF16"
    r2.seal()
    assert p2.tensors()["x"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


CHILD = r"""
import sys, socket
sys.path.insert(0, %r)
import numpy as np, pinmem
s = socket.socket(fileno=int(sys.argv[1]))
fd = pinmem.recv_fd(s)
r = pinmem.open().import_region(fd)
a = r.view(np.int32, (1000,))
print(r.id, int(a.sum()), r.state)
""" % os.path.join(TOP, "libpin", "python")


def test_region_fd_passes_to_another_process(dev):
    r = dev.alloc(1 << 20)
    with r.view(np.int32, (1000,), writable=True) as w:
        w[:] = np.arange(1000)
    r.seal()
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(b.fileno())],
                         pass_fds=[b.fileno()], stdout=subprocess.PIPE,
                         text=True)
    b.close()
    pinmem.send_fd(a, r.fd())
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0
    assert out.split() == [str(r.id), str(sum(range(1000))), "sealed"]
    a.close()


def test_recv_fd_errors():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.send(b"x")                          # a message without an fd
    with pytest.raises(pinmem.PinError) as e:
        pinmem.recv_fd(b)
    assert e.value.errno == errno.EPROTO
    a.close()
    with pytest.raises(pinmem.PinError) as e:
        pinmem.recv_fd(b)
    assert e.value.errno == errno.ECONNRESET
    b.close()
