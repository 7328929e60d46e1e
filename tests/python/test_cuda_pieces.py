# SPDX-License-Identifier: GPL-2.0
"""A loaded array larger than one cuMemHostRegister call may be (the
driver test double's CUDA_DOUBLE_REGISTER_MAX, libpin's pieces lowered to
the same 2 MiB by PIN_CUDA_TEST_CHUNK) is registered in pieces that cover
it, and the binding calls it registered (kDLCUDAHost); when a piece in the
middle fails, nothing stays registered and the binding says so (kDLCPU,
one CudaRegistrationWarning naming the piece)."""
import json
import os
import shutil

import pytest
from forked import run_python

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOUBLE = os.path.join(TOP, "build", "tests", "cuda", "libcuda-double.so")
MiB = 1 << 20

CHILD = r'''
import json, os, sys, warnings
import numpy as np
import pinmem
from pinmem import _cuda_auto, dlpack
from pinmem.safetensors.numpy import save_file, load_file
import cuda_double

path = os.path.join(sys.argv[1], "m.safetensors")
save_file({"a": np.arange(9 << 18, dtype=np.float32)}, path)   # 9 MiB
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    sd = load_file(path)
s = cuda_double.stats(os.environ["PIN_CUDA_LIBRARY"])
a = sd["a"]
print(json.dumps({
    "span": [a.ctypes.data, a.ctypes.data + a.nbytes],
    "device": dlpack.device(a)[0],
    "calls": [(c.op.decode(), c.base, c.size, c.result)
              for c in s.log[:min(s.nr_calls, 64)]],
    "live": s.live, "violations": s.violations,
    "warnings": [str(x.message) for x in w
                 if x.category is _cuda_auto.CudaRegistrationWarning]}))
'''


def child(tmp_path, **env):
    library = shutil.copy(DOUBLE, tmp_path / "libcuda-double.so")
    e = dict(PIN_CUDA_LIBRARY=str(library), PIN_CUDA_TEST_CHUNK=str(2 * MiB),
             CUDA_DOUBLE_REGISTER_MAX=str(2 * MiB), **env)
    p = run_python(CHILD, [tmp_path], env=e)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.splitlines()[-1])


needs_double = pytest.mark.skipif(
    not os.path.exists(DOUBLE),
    reason="the CUDA driver double is not built (make all)")


@needs_double
def test_registered_in_pieces_that_cover_the_array(tmp_path):
    out = child(tmp_path)
    regs = sorted((b, b + n) for op, b, n, res in out["calls"]
                  if op == "R" and res == 0)
    assert len(regs) >= 5 and all(hi - lo <= 2 * MiB for lo, hi in regs)
    assert all(a[1] == b[0] for a, b in zip(regs, regs[1:])), regs
    lo, hi = out["span"]
    assert regs[0][0] <= lo and hi <= regs[-1][1], (out["span"], regs)
    assert out["device"] == 3               # kDLCUDAHost: registered
    assert out["violations"] == 0 and out["warnings"] == []


@needs_double
def test_a_piece_failing_leaves_nothing_registered(tmp_path):
    out = child(tmp_path, CUDA_DOUBLE_FAIL_REGISTER="3")
    ops = [(op, res) for op, b, n, res in out["calls"]]
    assert ops[:5] == [("R", 0), ("R", 0), ("R", 2), ("U", 0), ("U", 0)], ops
    assert out["live"] == 0 and out["violations"] == 0
    assert out["device"] == 1               # kDLCPU: not registered
    assert len(out["warnings"]) == 1
    assert "piece 3 of" in out["warnings"][0], out["warnings"]
