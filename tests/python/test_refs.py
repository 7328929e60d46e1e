# SPDX-License-Identifier: GPL-2.0
"""References outside any mapping through the binding: a pipe holding a
view's pages after the view is gone makes donate raise BusyError whose
text and .refs name the bytes; Region.refs() lists them; once the pipe is
drained the donation succeeds."""
import ctypes
import errno
import os

import numpy as np
import pytest

import pinmem

_libc = ctypes.CDLL(None, use_errno=True)


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def _vmsplice(fd, addr, length):
    iov = _Iovec(addr, length)
    n = _libc.vmsplice(fd, ctypes.byref(iov), ctypes.c_ulong(1),
                       ctypes.c_uint(0))
    if n < 0:
        raise OSError(ctypes.get_errno(), "vmsplice")
    return n


def test_pipe_holding_a_view_blocks_donate(device_only, region):
    if not pinmem.core._lib.has("pin_region_refs"):
        pytest.skip("this libpin has no pin_region_refs")
    v = region.view(np.uint8, (2 << 20,), offset=2 << 20)
    start, _ = v.mapping_range
    rfd, wfd = os.pipe()
    try:
        assert _vmsplice(wfd, start, 4 * 4096) == 4 * 4096
        del v
        assert region.info().view_mappings == 0
        with pytest.raises(pinmem.BusyError) as e:
            region.donate()
        assert e.value.errno == errno.EBUSY
        assert e.value.holders == []
        text = str(e.value)
        assert "bytes [2 MiB, 4 MiB) referenced outside any mapping: " \
               "4 references, not DMA pins" in text, text
        assert [(r.offset, r.length, r.refs, r.pinned, r.expected)
                for r in e.value.refs] == [(2 << 20, 2 << 20, 4, 0, 0)]
        assert "vmsplice" in str(e.value.refs[0])
        assert [r.refs for r in region.refs()] == [4]
        with pytest.raises(pinmem.PinError) as e:
            region.donate(timeout=0.1)
        assert e.value.errno == errno.ETIMEDOUT
    finally:
        os.close(wfd)
        assert len(os.read(rfd, 1 << 20)) == 4 * 4096
        os.close(rfd)
    assert region.refs() == []
    region.donate()
    assert region.info().state == "donated"
