# SPDX-License-Identifier: GPL-2.0
"""NUMA placement through the binding: alloc(node=...),
load_safetensors(node=...) and Region.nodes() on either backend, and
pci_numa_node against sysfs."""
import errno
import os
import struct

import numpy as np
import pytest

import pinmem


def _placed(dev, nbytes):
    """Bytes the node query counts: whole chunks on the device."""
    if dev.backend == "device":
        return (nbytes + (2 << 20) - 1) & ~((2 << 20) - 1)
    return (nbytes + 4095) & ~4095


def test_alloc_on_node0_and_nodes(dev):
    r = dev.alloc((6 << 20) + 4096, node=0)
    try:
        assert r.nodes() == {0: _placed(dev, (6 << 20) + 4096)}
    finally:
        r.close()
    r = dev.alloc(4 << 20)
    try:
        assert sum(r.nodes().values()) == 4 << 20
    finally:
        r.close()


def test_load_on_node0(dev, tmp_path):
    data = np.arange(3 << 20, dtype=np.uint8)
    hdr = b'{"w":{"dtype":"U8","shape":[%d],"data_offsets":[0,%d]}}' % (
        data.size, data.size)
    path = tmp_path / "w.safetensors"
    path.write_bytes(struct.pack("<Q", len(hdr)) + hdr + data.tobytes())
    ck = pinmem.load_safetensors(str(path), dev=dev, node=0)
    try:
        assert np.array_equal(ck["w"], data)
        if ck.regions is not None:
            r = ck.regions[0]
            assert r.nodes() == {0: _placed(dev, r.size)}
    finally:
        ck.close()
    with pytest.raises(ValueError):
        pinmem.load_safetensors(str(path), dev=dev, any_node=True)
    with pytest.raises(pinmem.PinError) as e:
        pinmem.load_safetensors(str(path), dev=dev, node=1 << 20)
    assert e.value.errno == errno.EINVAL


def test_bad_node_arguments(dev):
    with pytest.raises(ValueError):
        dev.alloc(2 << 20, any_node=True)
    with pytest.raises(pinmem.PinError) as e:
        dev.alloc(2 << 20, node=-2)
    assert e.value.errno == errno.EINVAL
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
