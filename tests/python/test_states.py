# SPDX-License-Identifier: GPL-2.0
"""Region states through the binding: writable views only while OPEN,
seal and donate refused while views hold the region, naming them."""
import errno
import os
import threading
import time

import numpy as np
import pytest

import pinmem


def test_info_and_errors_carry_errno(dev, region):
    info = region.info()
    assert info.state == "open" and info.size == region.size == 4 << 20
    assert info.id == region.id
    with pytest.raises(ValueError):
        dev.alloc(0)
    # publish is only for a donated region (and not on portable at all).
    with pytest.raises(pinmem.PinError) as e:
        region.publish()
    want = errno.EPERM if dev.backend == "device" else errno.EOPNOTSUPP
    assert e.value.errno == want
    assert e.value.strerror and "publish" in e.value.strerror


def test_writable_view_only_while_open(region):
    w = region.view(np.uint8, (4096,), writable=True)
    w[:5] = [1, 2, 3, 4, 5]
    del w
    region.seal()
    assert region.info().state == "sealed"
    with pytest.raises(pinmem.PinError) as e:
        region.view(np.uint8, (4096,), writable=True)
    assert e.value.errno == errno.EPERM
    r = region.view(np.uint8, (5,))
    assert list(r) == [1, 2, 3, 4, 5] and not r.flags.writeable


def test_seal_with_writable_view_names_the_holder(region):
    w = region.view(np.uint8, (8192,), offset=4096, writable=True)
    ro = region.view(np.uint8, (4096,))
    with pytest.raises(pinmem.BusyError) as e:
        region.seal()
    assert e.value.errno == errno.EBUSY
    assert region.info().state == "open"
    if region.backend == "device":
        start, end = w.mapping_range
        text = str(e.value)
        assert "pid %d" % os.getpid() in text
        assert "0x%x-0x%x" % (start, end) in text
        # Only the writable view blocks a seal, and only it is named.
        ro_start = ro.mapping_range[0]
        assert "0x%x" % ro_start not in text
        writers = [h for h in e.value.holders if h.writable]
        assert [(h.pid, h.start, h.end, h.kind, h.prot, h.offset)
                for h in writers] == \
            [(os.getpid(), start, end, "view", "rw-", 4096)]
    del w
    region.seal()
    assert region.info().state == "sealed"


def test_donation_unavailable_on_portable(dev, region):
    if dev.backend == "device":
        pytest.skip("device backend: donation is available")
    assert not dev.donation_supported
    with pytest.raises(pinmem.PinError) as e:
        region.donate()
    assert e.value.errno == errno.EOPNOTSUPP
    with pytest.raises(pinmem.PinError) as e:
        region.holders()
    assert e.value.errno == errno.EOPNOTSUPP


def test_holders_lists_every_mapping(device_only, region):
    own = region.owner_array()
    a = region.view(np.uint8, (4096,))
    b = region.view(np.uint8, (4096,), offset=8192, writable=True)
    hs = region.holders()
    got = sorted((h.kind, h.start, h.end, h.prot, h.writable) for h in hs)
    want = sorted([
        ("owner", own.ctypes.data, own.ctypes.data + region.size, "rw-",
         True),
        ("view",) + a.mapping_range + ("r--", False),
        ("view",) + b.mapping_range + ("rw-", True)])
    assert got == want
    assert all(h.pid == os.getpid() and h.comm for h in hs)
    assert all(str(h).startswith("pid %d (" % os.getpid()) for h in hs)


def test_donate_refused_while_a_view_lives(device_only, region):
    a = region.view(np.float32, (1024,))
    with pytest.raises(pinmem.BusyError) as e:
        region.donate()
    assert e.value.errno == errno.EBUSY
    start, end = a.mapping_range
    assert "pid %d" % os.getpid() in str(e.value)
    assert "0x%x-0x%x" % (start, end) in str(e.value)
    assert [(h.pid, h.start, h.end) for h in e.value.holders
            if h.kind == "view"] == [(os.getpid(), start, end)]
    assert region.info().state == "open"
    del a
    region.donate()
    assert region.info().state == "donated"


def test_donated_region_refuses_views(device_only, region):
    region.donate()
    with pytest.raises(pinmem.BusyError) as e:
        region.view(np.uint8, (16,))
    assert e.value.errno == errno.EBUSY
    # The owner rewrites the region while it is donated.
    own = region.owner_array(np.uint32, (4,))
    own[:] = [9, 8, 7, 6]
    region.publish()
    assert region.info().state == "sealed"
    v = region.view(np.uint32, (4,))
    assert list(v) == [9, 8, 7, 6]
    with pytest.raises(pinmem.PinError) as e:
        region.view(np.uint8, (16,), writable=True)
    assert e.value.errno == errno.EPERM
    del v
    region.donate()
    region.reopen()
    assert region.info().state == "open"
    w = region.view(np.uint32, (4,), writable=True)
    w[0] = 1
    with pytest.raises(pinmem.PinError) as e:
        region.publish()            # only from donated
    assert e.value.errno == errno.EPERM


def test_donate_waits_for_the_view_to_go(device_only, region):
    a = region.view(np.uint8, (4096,))
    box = [a]
    del a

    def drop():
        time.sleep(0.5)
        box.clear()                 # the last reference: unmapped here
    t = threading.Thread(target=drop)
    t0 = time.monotonic()
    t.start()
    region.donate(timeout=30)
    waited = time.monotonic() - t0
    t.join()
    assert region.info().state == "donated"
    assert waited >= 0.4


def test_donate_wait_times_out(device_only, region):
    a = region.view(np.uint8, (4096,))
    t0 = time.monotonic()
    with pytest.raises(pinmem.PinError) as e:
        region.donate(timeout=0.3)
    assert e.value.errno == errno.ETIMEDOUT
    assert time.monotonic() - t0 >= 0.25
    assert region.info().state == "open"
    assert a.mapped
    del a
    region.donate()


def test_close_keeps_views_valid(dev):
    r = dev.alloc(1 << 20)
    w = r.view(np.uint8, (4096,), writable=True)
    w[:3] = [4, 5, 6]
    r.close()
    assert list(w[:3]) == [4, 5, 6]
    w[3] = 7
    assert w[3] == 7
    with pytest.raises(ValueError):
        r.info()


def test_close_refused_while_owner_arrays_live(dev):
    r = dev.alloc(1 << 20)
    own = r.owner_array(np.uint8, (16,))
    with pytest.raises(ValueError):
        r.close()
    del own
    r.close()


def test_owner_array_after_seal_on_portable(dev, region):
    if dev.backend != "portable":
        pytest.skip("device backend: the owner mapping stays writable")
    own = region.owner_array(np.uint8, (16,))
    own[0] = 3
    with pytest.raises(pinmem.BusyError) as e:
        region.seal()               # it would turn own read-only under it
    assert e.value.errno == errno.EBUSY and "owner" in e.value.strerror
    del own
    region.seal()
    ro = region.owner_array(np.uint8, (16,))
    assert ro[0] == 3 and not ro.flags.writeable
