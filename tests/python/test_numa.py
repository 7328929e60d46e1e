# SPDX-License-Identifier: GPL-2.0
"""NUMA placement through the binding: alloc(node=...) and
Region.nodes() on the device backend, a clear EOPNOTSUPP on the portable
one, and pci_numa_node against sysfs."""
import errno
import os

import pytest

import pinmem


def test_alloc_on_node0_and_nodes(dev):
    if dev.backend != "device":
        with pytest.raises(pinmem.PinError) as e:
            dev.alloc(2 << 20, node=0)
        assert e.value.errno == errno.EOPNOTSUPP
        return
    r = dev.alloc((6 << 20) + 4096, node=0)
    try:
        assert r.nodes() == {0: 8 << 20}
    finally:
        r.close()
    r = dev.alloc(4 << 20)
    try:
        assert sum(r.nodes().values()) == 4 << 20
    finally:
        r.close()


def test_bad_node_arguments(dev):
    with pytest.raises(ValueError):
        dev.alloc(2 << 20, any_node=True)
    with pytest.raises(pinmem.PinError) as e:
        dev.alloc(2 << 20, node=-2)
    assert e.value.errno == errno.EINVAL
    if dev.backend == "device":
        with pytest.raises(pinmem.PinError) as e:
            dev.alloc(2 << 20, node=1 << 20)
        assert e.value.errno == errno.EINVAL
        assert "node" in e.value.strerror


def test_pci_numa_node_matches_sysfs():
    base = "/sys/bus/pci/devices"
    names = sorted(os.listdir(base)) if os.path.isdir(base) else []
    for name in names:
        with open(os.path.join(base, name, "numa_node")) as f:
            want = int(f.read())
        assert pinmem.pci_numa_node(name) == want
        assert pinmem.pci_numa_node("0000" + name.upper()) == want
    with pytest.raises(pinmem.PinError) as e:
        pinmem.pci_numa_node("fffe:fe:1f.7")
    assert e.value.errno == errno.ENOENT
    with pytest.raises(pinmem.PinError) as e:
        pinmem.pci_numa_node("not a bus id")
    assert e.value.errno == errno.EINVAL
