# SPDX-License-Identifier: GPL-2.0
"""Loaded checkpoints are registered with CUDA where a driver is present
(pinmem._cuda_auto), seen through the driver test double
(tests/cuda/cuda-double.c): the exact ranges and flags torch's or JAX's
copy would find registered, unregistered when the tensors die; no driver,
no change and no warning. Each case runs in a child process: the handle
is the process's, opened once."""
import json
import os
import shutil

import pytest
from forked import run_python

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOUBLE = os.path.join(TOP, "build", "tests", "cuda", "libcuda-double.so")

CHILD = r'''
import gc, json, os, sys, warnings
import numpy as np
warnings.simplefilter("error")
import pinmem
from pinmem import _cuda_auto, dlpack
from pinmem.safetensors.numpy import save_file, load_file
import cuda_double

def stats():
    lib = os.environ.get("PIN_CUDA_LIBRARY", "")
    return cuda_double.stats(lib) if os.path.exists(lib) else None

def calls(s):
    return [(c.op.decode(), c.base, c.size, c.flags)
            for c in s.log[:min(s.nr_calls, 64)]] if s else []

def span(ptr, n):
    return [ptr, ptr + n]

path = os.path.join(sys.argv[1], "m.safetensors")
save_file({"a": np.arange(4096, dtype=np.float32),
           "b": np.ones(3, np.int8)}, path)
out = {"backend": pinmem.open().backend,
       "cow": pinmem.open().copy_on_write_supported}
sd = load_file(path)
out["np"] = {k: span(v.ctypes.data, v.nbytes) for k, v in sd.items()}
out["np_dlpack"] = [dlpack.device(v)[0] for v in sd.values()]
try:
    if os.environ.get("PINMEM_TEST_TORCH") == "0":
        raise ImportError("torch left out: nothing of it is asserted")
    import torch, pinmem.torch as pt
    from pinmem.safetensors.torch import load_file as tload
    td = tload(path)
    out["pt"] = {k: span(v.data_ptr(), v.numel() * v.element_size())
                 for k, v in td.items()}
    e = pt.empty((1024,), torch.float32)
    out["pt_empty"] = span(e.data_ptr(), 4096)
    out["pinned"] = [bool(v.is_pinned()) for v in td.values()]
    del td, e
except ImportError:
    pass
s = stats()
out["live"] = s.live if s else None
out["calls"] = calls(s)
out["handle"] = _cuda_auto.AUTO.ptr is not None
del sd
gc.collect()
out["live_after"] = s.live if s else None
out["violations"] = [s.violations, s.last_violation.decode()] if s else None
print(json.dumps(out))
'''


def child(tmp_path, library, **env):
    if os.path.exists(library):
        # The child is a fork of this process, which may have loaded the
        # double already (test_cuda.py): a copy of its own starts it with
        # a driver as fresh as a new process's.
        library = shutil.copy(library, tmp_path / "libcuda-double.so")
    e = dict(PIN_CUDA_LIBRARY=str(library), **env)
    torch = () if env.get("PINMEM_TEST_TORCH") == "0" else ("torch",)
    p = run_python(CHILD, [tmp_path], env=e, preload=torch)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.splitlines()[-1]), p.stderr


def covered(spans, calls, ro):
    """Each span lies in one registration of the right flags."""
    want = 0x01 | (0x08 if ro else 0)       # PORTABLE (| READ_ONLY)
    for lo, hi in spans:
        if not any(op == "R" and base <= lo and hi <= base + size and
                   flags == want for op, base, size, flags in calls):
            return False
    return True


needs_double = pytest.mark.skipif(
    not os.path.exists(DOUBLE),
    reason="the CUDA driver double is not built (make all)")


@needs_double
def test_loaded_tensors_are_registered_and_unregistered(tmp_path):
    out, err = child(tmp_path, DOUBLE)
    assert out["handle"]
    assert covered(out["np"].values(), out["calls"], ro=True), out
    assert out["np_dlpack"] == [3, 3]       # kDLCUDAHost: JAX's pinned_host
    if "pt" in out:
        # A private torch load: writable views of the process's own
        # region, registered writable on every backend (test_pinned.py
        # has every loader and the write routes).
        assert covered(out["pt"].values(), out["calls"], ro=False), out
        assert covered([out["pt_empty"]], out["calls"], ro=False), out
        # torch 1.13 of Debian is a CPU build: is_pinned() asks CUDA's
        # runtime, which it does not have, so it says False whatever the
        # driver registered.
        assert out["pinned"] == [False, False]
    assert out["live_after"] == 0
    assert out["violations"] == [0, ""]
    assert err == ""


@needs_double
def test_switched_off_registers_nothing(tmp_path):
    # torch's import costs a minute under the emulator; nothing here needs it
    out, err = child(tmp_path, DOUBLE, PINMEM_CUDA_REGISTER="0",
                     PINMEM_TEST_TORCH="0")
    assert not out["handle"] and out["calls"] == []
    assert out["np_dlpack"] == [1, 1]       # kDLCPU


def test_no_driver_changes_nothing_and_says_nothing(tmp_path):
    missing = os.path.join(TOP, "build", "no-such-libcuda.so.1")
    out, err = child(tmp_path, missing, PINMEM_TEST_TORCH="0")
    assert not out["handle"] and out["np_dlpack"] == [1, 1]
    assert err == ""
