# SPDX-License-Identifier: GPL-2.0
"""DLPack export of views: NumPy, torch and a small C consumer take sealed
(read-only) tensors; the view mapping lives until the consumer's deleter
runs; a consumer that writes read-only memory faults without changing it."""
import ctypes
import gc
import os
import shutil
import subprocess

import numpy as np
import pytest

import pinmem
from pinmem import dlpack
from forked import run_python
from helpers import mapped, mapping_path

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HERE = os.path.dirname(os.path.abspath(__file__))


def sealed_view(region, n=1024):
    with region.view(np.float32, (n,), writable=True) as w:
        w[:] = np.arange(n, dtype=np.float32)
    region.seal()
    a = region.view(np.float32, (n,))
    return a, a.mapping_range, mapping_path(a.mapping_range)


def test_numpy_takes_a_sealed_view_and_holds_its_mapping(region):
    a, rng, path = sealed_view(region)
    n0 = dlpack.live_exports()
    b = np.from_dlpack(a)
    assert b.__array_interface__["data"][0] == rng[0]
    assert (b == np.arange(1024)).all()
    assert a.__dlpack_device__() == (dlpack.kDLCPU, 0)
    del a
    gc.collect()
    assert mapped(rng, path)            # the consumer's array holds it
    assert float(b[1023]) == 1023.0
    del b
    gc.collect()
    assert not mapped(rng, path)
    assert dlpack.live_exports() == n0


def test_strided_slices_export_with_their_strides(region):
    a, rng, path = sealed_view(region)
    s = a.reshape(32, 32)[1::3, ::-2]
    b = np.from_dlpack(s)
    assert b.shape == s.shape and (b == s).all()


@pytest.mark.torch
def test_torch_takes_a_sealed_view_and_holds_its_mapping(region):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    a, rng, path = sealed_view(region)
    t = torch.from_dlpack(a)
    assert t.dtype == torch.float32 and t.data_ptr() == rng[0]
    del a
    gc.collect()
    assert mapped(rng, path) and float(t[5]) == 5.0
    del t
    gc.collect()
    assert not mapped(rng, path)


def consumer(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the C consumer")
    so = os.path.join(str(tmp_path), "libdlconsumer.so")
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2",
                    "-shared", "-fPIC", "-o", so,
                    os.path.join(HERE, "dlpack_consumer.c")], check=True)
    lib = ctypes.CDLL(so)
    lib.dl_consume.argtypes = [ctypes.c_void_p, ctypes.c_int,
                               ctypes.POINTER(ctypes.c_double),
                               ctypes.POINTER(ctypes.c_uint64),
                               ctypes.c_char_p, ctypes.c_size_t]
    return lib


def take(cap, versioned):
    """What a C extension does with a capsule: take the pointer, rename."""
    name = dlpack.NAME_VERSIONED if versioned else dlpack.NAME
    api = ctypes.PyDLL(None)
    api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    p = api.PyCapsule_GetPointer(cap, name)
    used = dlpack.USED_VERSIONED if versioned else dlpack.USED
    assert api.PyCapsule_SetName(cap, used) == 0
    return p


@pytest.mark.parametrize("versioned", [False, True])
def test_c_consumer(region, tmp_path, versioned):
    lib = consumer(tmp_path)
    a, rng, path = sealed_view(region)
    s = a.reshape(32, 32)[::2, 1::4]            # strided
    n0 = dlpack.live_exports()
    cap = s.__dlpack__(max_version=(1, 0) if versioned else None)
    del a, s
    gc.collect()
    p = take(cap, versioned)
    assert mapped(rng, path)
    total, flags = ctypes.c_double(), ctypes.c_uint64()
    desc = ctypes.create_string_buffer(256)
    assert lib.dl_consume(p, int(versioned), ctypes.byref(total),
                          ctypes.byref(flags), desc, 256) == 0
    want = np.arange(1024, dtype=np.float64).reshape(32, 32)[::2, 1::4].sum()
    assert total.value == want
    assert desc.value == b"device 1/0 ndim 2 code 2 bits 32 lanes 1 shape " \
        b"16 8"
    assert flags.value == (dlpack.FLAG_READ_ONLY if versioned else 0)
    # The deleter ran: the export is gone, and with it the last reference.
    assert dlpack.live_exports() == n0
    del cap
    gc.collect()
    assert not mapped(rng, path)


def test_unconsumed_capsule_releases_its_mapping(region):
    a, rng, path = sealed_view(region)
    n0 = dlpack.live_exports()
    cap = a.__dlpack__()
    del a
    assert dlpack.live_exports() == n0 + 1 and mapped(rng, path)
    del cap
    gc.collect()
    assert dlpack.live_exports() == n0 and not mapped(rng, path)


def test_read_only_array_over_writable_memory_needs_the_flag(region):
    w = region.view(np.int16, (64,), writable=True)
    w.flags.writeable = False
    with pytest.raises(BufferError, match="max_version=\\(1, 0\\)"):
        w.__dlpack__()
    cap = w.__dlpack__(max_version=(1, 0))
    api = ctypes.PyDLL(None)
    api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
    assert api.PyCapsule_IsValid(cap, dlpack.NAME_VERSIONED) == 1
    del cap
    w2 = region.view(np.int16, (64,), writable=True)
    b = np.from_dlpack(w2)              # writable: exported as such
    assert b.__array_interface__["data"][0] == \
        w2.__array_interface__["data"][0]
    try:
        import torch
    except ImportError:
        return
    torch.from_dlpack(w2)[0] = 5        # NumPy 1.24 imports read-only
    assert w2[0] == 5


WRITER = r"""
import sys
sys.path.insert(0, %r)
import numpy as np, pinmem
r = pinmem.open().alloc(1 << 20)
with r.view(np.float32, (4,), writable=True) as w:
    w[:] = 7
r.seal()
a = r.view(np.float32, (4,))
if sys.argv[1] == "torch":
    import torch
    t = torch.from_dlpack(a)
    print("read", t.tolist(), flush=True)
    t.add_(1.0)
else:
    b = np.from_dlpack(a)
    print("read", b.tolist(), flush=True)
    if not b.flags.writeable:
        print("numpy: read-only", flush=True)
        b.flags.writeable = True
    b[0] = 1
print("wrote", flush=True)
""" % os.path.join(TOP, "libpin", "python")


@pytest.mark.parametrize("who", ["numpy",
                                 pytest.param("torch", marks=pytest.mark.torch)])
def test_consumer_that_writes_read_only_memory_faults(who):
    if who == "torch":
        pytest.importorskip("torch", reason="PyTorch is not installed")
    p = run_python(WRITER, [who], preload=(who,))
    if who == "numpy" and p.returncode == 1:
        # NumPy refuses to make its imported array writable: also safe.
        assert "read-only" in p.stdout and "ValueError" in p.stderr, p.stderr
        return
    assert p.returncode == -11, (p.returncode, p.stdout, p.stderr)
    assert p.stdout.startswith("read [7.0, 7.0, 7.0, 7.0]\n")
    assert "wrote" not in p.stdout


DOUBLE = os.path.join(TOP, "build", "tests", "cuda", "libcuda-double.so")


@pytest.mark.skipif(not os.path.exists(DOUBLE),
                    reason="the CUDA driver double is not built (make all)")
def test_cuda_registered_memory_is_cuda_host(monkeypatch, region):
    from pinmem.cuda import Cuda
    monkeypatch.setenv("PIN_CUDA_LIBRARY", DOUBLE)
    own = region.owner_array(np.uint8, (4096,))
    assert dlpack.device(own) == (dlpack.kDLCPU, 0)
    c = Cuda(0)
    c.register(region)
    assert dlpack.device(own) == (dlpack.kDLCUDAHost, 0)
    assert dlpack.device(own[100:200]) == (dlpack.kDLCUDAHost, 0)
    v = region.view(np.uint8, (4096,))          # another mapping: not it
    assert v.__dlpack_device__() == (dlpack.kDLCPU, 0)
    c.unregister(region)
    assert dlpack.device(own) == (dlpack.kDLCPU, 0)
    c.close()


@pytest.mark.skipif(not os.path.exists(DOUBLE),
                    reason="the CUDA driver double is not built (make all)")
def test_registered_memory_exports_as_cpu_when_asked(monkeypatch, region):
    """dl_device=(kDLCPU, 0): CUDA-registered host memory as the host
    memory it is, for a consumer without CUDA; no other device."""
    from pinmem.cuda import Cuda
    monkeypatch.setenv("PIN_CUDA_LIBRARY", DOUBLE)
    own = region.owner_array(np.float32, (16,))
    c = Cuda(0)
    c.register(region)
    try:
        assert dlpack.device(own) == (dlpack.kDLCUDAHost, 0)
        cap = dlpack.to_dlpack(own, None, (dlpack.kDLCPU, 0))
        t = dlpack.DLManagedTensor.from_address(
            dlpack._api.PyCapsule_GetPointer(ctypes.c_void_p(id(cap)),
                                             dlpack.NAME))
        assert t.dl_tensor.device.device_type == dlpack.kDLCPU
        assert t.dl_tensor.data == own.__array_interface__["data"][0]
        del t, cap
        with pytest.raises(BufferError, match="device"):
            dlpack.to_dlpack(own, None, (dlpack.kDLCUDA, 0))
    finally:
        del own
        c.unregister(region)
        c.close()
