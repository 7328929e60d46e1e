# SPDX-License-Identifier: GPL-2.0
"""pinmem.jax.load_safetensors beyond the dtype matrix
(test_dtype_matrix.py): 64-bit tensors while jax_enable_x64 is off
(x64="error", "numpy", "convert"), a CUDA driver with a CPU-only JAX
(the driver test double), and a service view this process's libpin
could not import (a plain read-only mmap). Runs where jax is installed
(the venv suites)."""
import json
import os
import shutil
import tempfile

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="jax is not installed")

import pinmem.jax as pj  # noqa: E402
from pinmem import core  # noqa: E402
from pinmem.safetensors import shared  # noqa: E402
from pinmem.safetensors.numpy import save_file  # noqa: E402
from forked import run_python  # noqa: E402
from helpers import CACHED, cached_service  # noqa: E402

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOUBLE = os.path.join(TOP, "build", "tests", "cuda", "libcuda-double.so")

needs_x64_off = pytest.mark.skipif(
    jax.config.jax_enable_x64, reason="64-bit types are on in this process")


@pytest.fixture
def scratch():
    """Files on a disk (the service does not cache files on tmpfs)."""
    base = os.environ.get("PINMEM_SCRATCH")
    d = tempfile.mkdtemp(prefix="pytest-jaxload-",
                         dir=base if base and os.path.isdir(base) else None)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def service(scratch):
    if not os.path.exists(CACHED):
        pytest.skip("pinmem-cached is not built")
    with cached_service(scratch) as sock:
        yield sock


def _ckpt(d):
    path = os.path.join(d, "m.safetensors")
    save_file({"ids": np.arange(5, dtype=np.int64) - 2,
               "scale": np.array([1.5, -2.25], np.float64),
               "count": np.array([2 ** 40 + 3], np.uint64),
               "w": np.arange(6, dtype=np.float32)}, path)
    return path


def _load(path, route, sock, monkeypatch, **kw):
    if route == "served":
        monkeypatch.setenv("PIN_CACHE_SOCKET", sock)
        monkeypatch.setattr(shared, "_warned", [])
    return pj.load_safetensors(path, shared=route == "served", **kw)


@needs_x64_off
@pytest.mark.parametrize("route", ["private", "served"])
def test_x64_error_names_the_choices(route, scratch, request, monkeypatch):
    sock = request.getfixturevalue("service") if route == "served" else None
    path = _ckpt(scratch)
    with pytest.raises(ValueError) as e:
        _load(path, route, sock, monkeypatch)
    text = str(e.value)
    assert "while 64-bit types are off" in text
    for fix in ('x64="numpy"', 'x64="convert"', "jax_enable_x64"):
        assert fix in text, text
    with pytest.raises(ValueError, match="x64='maybe': one of 'error', "
                       "'numpy', 'convert'"):
        _load(path, route, sock, monkeypatch, x64="maybe")


@needs_x64_off
@pytest.mark.parametrize("route", ["private", "served"])
def test_x64_numpy_gives_pinned_read_only_arrays(route, scratch, request,
                                                 monkeypatch):
    sock = request.getfixturevalue("service") if route == "served" else None
    path = _ckpt(scratch)
    out = _load(path, route, sock, monkeypatch, x64="numpy")
    assert sorted(out.as_numpy) == ["count", "ids", "scale"]
    assert out.converted == [] and out.copied == []
    assert out["ids"].tolist() == [-2, -1, 0, 1, 2]
    assert out["ids"].dtype == np.int64
    assert out["scale"].tolist() == [1.5, -2.25]
    assert out["count"].tolist() == [2 ** 40 + 3]
    for k in out.as_numpy:
        a = out[k]
        assert isinstance(a, np.ndarray) and not a.flags.writeable
        m = core._mapping_of(a)         # no copy: the pinned mapping
        lo = a.__array_interface__["data"][0]
        assert m is not None and m.addr <= lo < m.addr + m.length
        assert not m.writable
        with pytest.raises(ValueError):
            a[0] = 0
    assert isinstance(out["w"], jax.Array)
    assert pj.mapping_range(out["w"]) is not None
    assert out["w"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


@needs_x64_off
@pytest.mark.parametrize("route", ["private", "served"])
def test_x64_convert_copies_and_names_them(route, scratch, request,
                                           monkeypatch):
    sock = request.getfixturevalue("service") if route == "served" else None
    path = _ckpt(scratch)
    out = _load(path, route, sock, monkeypatch, x64="convert")
    assert sorted(out.converted) == ["count", "ids", "scale"]
    assert out.as_numpy == [] and out.copied == []
    assert out["ids"].dtype == np.int32
    assert out["ids"].tolist() == [-2, -1, 0, 1, 2]
    assert out["scale"].dtype == np.float32
    assert out["scale"].tolist() == [1.5, -2.25]
    assert out["count"].dtype == np.uint32      # JAX's own conversion
    for k in out.converted:
        assert pj.mapping_range(out[k]) is None     # JAX's memory
    assert pj.mapping_range(out["w"]) is not None


def test_unimportable_service_view_is_still_zero_copy(service, scratch,
                                                      monkeypatch):
    """A view fd this process's libpin cannot take is mapped plainly,
    read-only (shared.request); bf16 over it still imports in place."""
    import ml_dtypes
    path = os.path.join(scratch, "b.safetensors")
    want = (np.arange(64, dtype=np.float32) / 8).astype(ml_dtypes.bfloat16)
    save_file({"b": want}, path)
    monkeypatch.setenv("PIN_CACHE_SOCKET", service)
    monkeypatch.setattr(shared, "_pinned_image", lambda vfd, entry: None)
    seen = []
    real = shared.open_image

    def spy(*a, **kw):
        got = real(*a, **kw)
        assert core._mapping_of(got[0]) is None     # a plain mmap
        lo = got[0].__array_interface__["data"][0]
        seen.append((lo, lo + got[0].nbytes))
        return got
    monkeypatch.setattr(shared, "open_image", spy)
    out = pj.load_safetensors(path, shared=True)
    x = out["b"]
    ptr = x.unsafe_buffer_pointer()
    assert seen and seen[0][0] <= ptr < seen[0][1]
    assert np.asarray(x).tobytes() == want.tobytes()


CHILD = r'''
import json, os, sys, warnings
import numpy as np
warnings.simplefilter("error")
import jax, pinmem, pinmem.jax as pj
from pinmem import _cuda_auto, dlpack
from pinmem.safetensors.numpy import save_file
import cuda_double

path = os.path.join(sys.argv[1], "m.safetensors")
save_file({"w": np.arange(16, dtype=np.float32)}, path)
out = {"platforms": sorted({d.platform for d in jax.devices()})}
for shared in (False, True):
    got = pj.load_safetensors(path, shared=shared)
    x = got["w"]
    ptr = x.unsafe_buffer_pointer()
    held = [a for a in dlpack.exported_arrays()
            if a.__array_interface__["data"][0] == ptr]
    out["shared" if shared else "private"] = {
        "values": x.tolist(), "device": str(x.device.platform),
        "in_mapping": pj.mapping_range(x) is not None,
        "dl_device": [dlpack.device(a)[0] for a in held]}
r = pinmem.open().alloc(1 << 16)
r.seal()
v = pj.view(r, np.float32, (8,))
out["view"] = [str(v.device.platform), pj.mapping_range(v) is not None]
s = cuda_double.stats(os.environ["PIN_CUDA_LIBRARY"])
out["handle"] = _cuda_auto.AUTO.ptr is not None
out["violations"] = [s.violations, s.last_violation.decode()]
print(json.dumps(out))
'''


@pytest.mark.skipif(not os.path.exists(DOUBLE),
                    reason="the CUDA driver double is not built (make all)")
@pytest.mark.skipif(os.environ.get("PIN_BACKEND") == "device",
                    reason="the driver double's check runs on the host: "
                    "in the emulated guest its JAX child costs a minute")
def test_cuda_driver_with_cpu_only_jax(service, scratch):
    """Registered memory is kDLCUDAHost to pinmem; a JAX without CUDA
    gets it as the plain CPU memory it is, private, shared and view()."""
    lib = shutil.copy(DOUBLE, os.path.join(scratch, "libcuda-double.so"))
    p = run_python(CHILD, [scratch], env={"PIN_CUDA_LIBRARY": lib,
                                          "PIN_CACHE_SOCKET": service},
                   timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout.splitlines()[-1])
    assert "cuda" not in out["platforms"]
    assert out["handle"], "the double was not opened: nothing registered"
    for k in ("private", "shared"):
        assert out[k]["values"] == list(range(16)), out
        assert out[k]["device"] == "cpu" and out[k]["in_mapping"], out
        assert out[k]["dl_device"] == [3], out     # kDLCUDAHost to pinmem
    assert out["view"] == ["cpu", True]
    assert out["violations"] == [0, ""]
