# SPDX-License-Identifier: GPL-2.0
"""pinmem.cuda over libpin's CUDA registration: a clear error without a
driver, and registration of the owner mapping through the driver test
double (tests/cuda/cuda-double.c) that the CUDA tests build."""
import errno
import os

import numpy as np
import pytest

import pinmem
from pinmem.cuda import Cuda

import cuda_double

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOUBLE = os.path.join(TOP, "build", "tests", "cuda", "libcuda-double.so")


def test_no_driver_is_a_clear_error(monkeypatch):
    missing = os.path.join(TOP, "build", "no-such-libcuda.so.1")
    monkeypatch.setenv("PIN_CUDA_LIBRARY", missing)
    with pytest.raises(pinmem.PinError) as e:
        Cuda(0)
    assert e.value.errno == errno.ENOENT
    assert missing in e.value.strerror


@pytest.mark.skipif(not os.path.exists(DOUBLE),
                    reason="the CUDA driver double is not built (make all)")
def test_register_owner_mapping_through_the_double(monkeypatch, dev):
    monkeypatch.setenv("PIN_CUDA_LIBRARY", DOUBLE)
    s = cuda_double.stats(DOUBLE)
    r = dev.alloc(4 << 20)
    c = Cuda(0)
    try:
        before, n = s.register_calls, s.nr_calls
        c.register(r)
        own = r.owner_array(np.uint8, (16,))
        addr = own.ctypes.data
        del own
        assert s.register_calls == before + 1 and s.live == 1
        if n < 64:                  # the double logs the first 64 calls
            call = s.log[n]
            assert (call.op, call.base, call.size) == (b"R", addr, 4 << 20)
        # The registered region cannot be freed under the driver.
        with pytest.raises(pinmem.BusyError) as e:
            r.close()
        assert e.value.errno == errno.EBUSY
        assert r.info().size == 4 << 20          # the handle is still there
        c.unregister(r)
        assert s.live == 0 and s.violations == 0, s.last_violation
        r.close()
    finally:
        c.close()
    assert s.primary_refs == 0 and s.ctx_depth == 0


@pytest.mark.skipif(not os.path.exists(DOUBLE),
                    reason="the CUDA driver double is not built (make all)")
def test_dropped_handle_unregisters(monkeypatch, dev):
    """A Cuda handle dropped without close() unregisters its regions and
    releases the context, so the regions can be freed."""
    import gc
    monkeypatch.setenv("PIN_CUDA_LIBRARY", DOUBLE)
    s = cuda_double.stats(DOUBLE)
    r = dev.alloc(2 << 20)
    c = Cuda(0)
    c.register(r)
    assert s.live == 1
    del c
    gc.collect()
    assert s.live == 0 and s.violations == 0, s.last_violation
    assert s.primary_refs == 0 and s.ctx_depth == 0
    r.close()
