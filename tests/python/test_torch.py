# SPDX-License-Identifier: GPL-2.0
"""pinmem.torch: tensors over view mappings live exactly as long as the
last tensor sharing their storage; dtypes are exact; the kernel names the
holder of a donation a tensor keeps waiting; read-only memory faults."""
import gc
import os
import threading
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed "
                            "(Debian: python3-torch)")

import pinmem  # noqa: E402
import pinmem.torch as pt  # noqa: E402
from forked import run_python  # noqa: E402
from helpers import (count_maps, debugfs, mapped, mapping_path,  # noqa: E402
                     nr_fds, nr_maps, rss_kib)

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def views_counted(region):
    return region.info().view_mappings if region.backend == "device" \
        else None


def where(t):
    rng = pt.mapping_range(t)
    assert rng is not None
    return rng, mapping_path(rng)


# Bytes each dtype must have in memory for the values [1, -2] (little
# endian), written without torch: the tensor must see exactly these.
EXACT = {
    torch.bfloat16: b"\x80\x3f\x00\xc0",
    torch.float16: b"\x00\x3c\x00\xc0",
    torch.float32: b"\x00\x00\x80\x3f\x00\x00\x00\xc0",
    torch.float64: b"\x00" * 6 + b"\xf0\x3f" + b"\x00" * 7 + b"\xc0",
    torch.int8: b"\x01\xfe",
    torch.int16: b"\x01\x00\xfe\xff",
    torch.int32: b"\x01\x00\x00\x00\xfe\xff\xff\xff",
    torch.int64: b"\x01" + b"\x00" * 7 + b"\xfe" + b"\xff" * 7,
    torch.uint8: b"\x01\xfe",        # 254 for -2
}


@pytest.mark.parametrize("dtype", list(EXACT), ids=str)
def test_dtypes_are_exact(region, dtype):
    want = EXACT[dtype]
    raw = region.view(np.uint8, (len(want),), offset=8192, writable=True)
    raw[:] = np.frombuffer(want, np.uint8)
    t = pt.view(region, dtype, (2,), offset=8192)
    assert t.dtype == dtype and t.shape == (2,)
    expect = torch.tensor([1, 254 if dtype == torch.uint8 else -2],
                          dtype=dtype)
    assert torch.equal(t, expect)
    # And the other way: torch writes, the bytes are the format's.
    raw[:] = 0
    w = pt.view(region, dtype, (2,), offset=8192, writable=True)
    w.copy_(expect)
    assert raw.tobytes() == want
    assert pt.dtype_name(dtype) in ("BF16", "F16", "F32", "F64", "I8", "I16",
                                    "I32", "I64", "U8")


def test_bfloat16_values_round_trip_through_numpy_bytes(region):
    vals = [1.0, -2.5, 0.15625, 2.0 ** 100, -0.0]
    w = pt.view(region, torch.bfloat16, (5,), writable=True)
    w.copy_(torch.tensor(vals, dtype=torch.bfloat16))
    bits = region.view(np.uint16, (5,))
    # bf16 is the top half of float32's bits (these values are exact).
    f32 = np.array(vals, np.float32).view(np.uint32) >> 16
    assert (bits == f32.astype(np.uint16)).all()
    assert pt.view(region, torch.bfloat16, (5,)).float().tolist() == \
        [float(torch.tensor(v, dtype=torch.bfloat16)) for v in vals]


@pytest.mark.parametrize("derive", ["slice", "view", "reshape", "as_strided",
                                    "detach", "numpy", "dlpack"])
def test_mapping_outlives_every_tensor_sharing_storage(region, derive):
    t = pt.view(region, torch.float32, (64, 64), writable=True)
    t.copy_(torch.arange(64 * 64, dtype=torch.float32).view(64, 64))
    (rng, path) = where(t)
    d = {"slice": lambda: t[3:5, 10:],
         "view": lambda: t.view(-1),
         "reshape": lambda: t.reshape(16, 256),
         "as_strided": lambda: t.as_strided((4, 4), (65, 1), 130),
         "detach": lambda: t.detach(),
         "numpy": lambda: t.numpy(),
         "dlpack": lambda: torch.utils.dlpack.from_dlpack(
             torch.utils.dlpack.to_dlpack(t))}[derive]()
    first = float(d.reshape(-1)[0]) if derive != "numpy" else float(d.flat[0])
    del t
    gc.collect()
    assert mapped(rng, path) and views_counted(region) in (None, 1)
    again = float(d.reshape(-1)[0]) if derive != "numpy" else \
        float(d.flat[0])
    assert again == first
    del d                          # the last one: unmapped now
    assert not mapped(rng, path)
    assert views_counted(region) in (None, 0)


def test_unmapped_by_gc_in_a_cycle(region):
    t = pt.view(region, torch.int32, (1024,))
    rng, path = where(t)
    box = [t]
    box.append(box)
    del t, box
    assert mapped(rng, path)
    gc.collect()
    assert not mapped(rng, path)


def test_tensor_escaping_a_with_block(region):
    with pytest.raises(pinmem.ViewInUseError, match="sharing its storage"):
        with pt.scoped_view(region, torch.int64, (512,),
                            writable=True) as t:
            t.copy_(torch.arange(512))
            rng, path = where(t)
            escaped = t[100:]
    assert t.numel() == 0                  # the name holds an empty tensor
    assert mapped(rng, path) and views_counted(region) in (None, 1)
    assert torch.equal(escaped, torch.arange(100, 512))
    del escaped
    assert not mapped(rng, path)
    assert views_counted(region) in (None, 0)


def test_with_block_ends_the_mapping(region):
    with pt.scoped_view(region, torch.float16, (100,), writable=True) as t:
        t.fill_(2.0)
        rng, path = where(t)
    assert not mapped(rng, path) and t.numel() == 0
    with pt.scoped_view(region, torch.float16, (100,)) as u:
        assert bool((u == 2.0).all())
        del u                              # deleted inside: still fine
    assert views_counted(region) in (None, 0)


def test_with_block_alias_is_refused_and_keeps_everything(region):
    with pytest.raises(pinmem.ViewInUseError, match="1 other name"):
        with pt.scoped_view(region, torch.uint8, (64,)) as t:
            rng, path = where(t)
            keep = t
    assert keep.numel() == 64 and mapped(rng, path)
    del t, keep
    assert not mapped(rng, path)


def test_tensor_held_by_a_child_thread(region):
    t = pt.view(region, torch.float32, (256,), writable=True)
    t.fill_(4.0)
    rng, path = where(t)
    seen = []
    go = threading.Event()

    def worker(x):
        go.wait()
        time.sleep(0.3)
        seen.append(float(x.sum()))
        del x                              # the thread's reference ends
    th = threading.Thread(target=worker, args=(t[128:],))
    th.start()
    del t
    assert mapped(rng, path)
    t0 = time.monotonic()
    go.set()
    if region.backend == "device":
        region.donate(timeout=30)           # waits for the thread's tensor
        assert time.monotonic() - t0 >= 0.25
        assert region.state == "donated"
    th.join()
    gc.collect()
    assert seen == [512.0]
    assert not mapped(rng, path)


def test_busy_error_names_the_tensor_holding_a_donation(region,
                                                        device_only):
    region.seal()
    t = pt.view(region, torch.bfloat16, (1024,))
    row = t[7:]
    del t
    with pytest.raises(pinmem.BusyError) as e:
        region.donate()
    assert e.value.errno == 16
    rng = pt.mapping_range(row)
    views = [h for h in e.value.holders if h.kind == "view"]
    assert [(h.pid, h.start, h.end) for h in views] == \
        [(os.getpid(), rng[0], rng[1])]
    assert "pid %d" % os.getpid() in e.value.strerror
    del row
    region.donate()
    assert region.state == "donated"


def test_empty_and_zeros_are_pinned_and_writable(dev):
    for make in (pt.empty, pt.zeros):
        t = make((300, 7), torch.bfloat16, dev=dev)
        assert t.shape == (300, 7) and t.dtype == torch.bfloat16
        assert bool((t == 0).all())
        rng, path = where(t)
        assert ("pinmem" in path) or ("memfd:" in path), path
        t.fill_(1.0)
        assert float(t.float().sum()) == 2100.0
        del t
        assert not mapped(rng, path)
    z = pt.zeros(5)                       # a device of its own, float32
    assert z.dtype == torch.float32 and z.tolist() == [0.0] * 5


CYCLES = int(os.environ.get("PINMEM_TEST_CYCLES", "10000"))


def test_create_drop_cycles_leak_nothing(region):
    def cycle(n):
        for i in range(n):
            t = pt.view(region, torch.bfloat16, (2048,),
                        offset=(i % 8) * 4096, writable=bool(i & 1))
            s = t[::2].view(32, 32)
            float(s[0, 0])
            del t, s
    cycle(200)
    gc.collect()
    ours0 = count_maps("pinmem") + count_maps("memfd:")
    maps0, fds0, rss0, dbg0 = nr_maps(), nr_fds(), rss_kib(), debugfs()
    cycle(CYCLES)
    gc.collect()
    assert (nr_maps(), nr_fds()) == (maps0, fds0)
    assert count_maps("pinmem") + count_maps("memfd:") == ours0
    assert debugfs() == dbg0
    assert views_counted(region) in (None, 0)
    # Leaked mappings are caught exactly above; RSS catches leaked Python
    # or torch objects: a tensor with its storage is over 500 bytes, so
    # 10,000 leaked ones pass 4 MiB, while the allocator's high-water moves
    # in steps (+1.9 MiB seen once in a guest with nothing leaked).
    grew = rss_kib() - rss0
    assert grew < 4096, "RSS grew %d KiB over %d cycles" % (grew, CYCLES)


WRITER = r"""
import sys
sys.path.insert(0, %r)
import numpy as np, torch, pinmem, pinmem.torch as pt
r = pinmem.open().alloc(1 << 20)
w = pt.view(r, torch.float32, (4,), writable=True)
w.fill_(7.0)
del w
r.seal()
t = pt.view(r, torch.float32, (4,))
print("read", t.tolist(), flush=True)
row = t[1:]
writes = [("add_", lambda: t.add_(1.0)), ("setitem", lambda: t.__setitem__(0, 1)),
          ("iadd", lambda: row.__iadd__(1)), ("copy_", lambda: row.copy_(torch.ones(3))),
          ("out=", lambda: torch.add(t, 1, out=t)), ("zero_ of .data", lambda: t.data.zero_()),
          ("foreach", lambda: torch._foreach_add_([t], 1.0))]
for name, write in writes:
    try:
        write()
        print("wrote", name, flush=True)
    except pinmem.ReadOnlyError as e:
        assert "read-only view of region %%d" %% r.id in str(e), e
        print("refused", name, flush=True)
n = t.numpy()
try:
    n[0] = 1
    print("wrote numpy", flush=True)
except ValueError:
    print("refused numpy", flush=True)
print("read", t.tolist(), flush=True)
"""  % os.path.join(TOP, "libpin", "python")


def test_writing_a_read_only_tensor_is_refused_and_changes_nothing():
    # In a child: a write that got through would end it with SIGSEGV.
    p = run_python(WRITER, preload=("torch",))
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    assert p.stdout.splitlines() == [
        "read [7.0, 7.0, 7.0, 7.0]", "refused add_", "refused setitem",
        "refused iadd", "refused copy_", "refused out=",
        "refused zero_ of .data", "refused foreach", "refused numpy",
        "read [7.0, 7.0, 7.0, 7.0]"]


def test_read_only_tensor_reads_and_computes_as_a_tensor(region):
    w = pt.view(region, torch.float32, (8,), writable=True)
    assert type(w) is torch.Tensor          # writable: a plain tensor
    w.copy_(torch.arange(8.0))
    del w
    region.seal()
    t = pt.view(region, torch.float32, (8,))
    assert isinstance(t, pt.ReadOnlyTensor) and isinstance(t, torch.Tensor)
    assert isinstance(t[2:], pt.ReadOnlyTensor)          # shares the memory
    assert isinstance(t.view(2, 4), pt.ReadOnlyTensor)
    y = t * 2 + 1                                        # new memory
    assert type(y) is torch.Tensor
    y.add_(1)                                            # writable
    assert y.tolist() == [float(2 * i + 2) for i in range(8)]
    c = t.clone()
    assert type(c) is torch.Tensor
    c.mul_(0)
    assert t.tolist() == [float(i) for i in range(8)]
    # What models do with loaded weights: copy them into parameters.
    lin = torch.nn.Linear(8, 1, bias=False)
    lin.load_state_dict({"weight": t.view(1, 8)})
    assert lin.weight.tolist() == [[float(i) for i in range(8)]]
    assert not t.requires_grad and t.requires_grad_(False) is not None


def test_bfloat16_without_ml_dtypes_is_refused_not_faked():
    if pinmem.HAVE_ML_DTYPES:
        pytest.skip("ml_dtypes is installed: pinmem.bfloat16 is its dtype")
    for name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        with pytest.raises(AttributeError, match="pinmem.torch"):
            getattr(pinmem, name)
        assert not hasattr(pinmem, name)
    with pytest.raises(KeyError, match="BF16.*ml_dtypes"):
        pinmem.as_format(np.zeros(3, np.uint16), "BF16")


def test_dtype_names():
    assert pt.dtype_from_name("BF16") is torch.bfloat16
    assert pt.dtype_name(torch.complex64) == "C64"
    with pytest.raises(ValueError):
        pt.dtype_name(torch.complex128)
    with pytest.raises(KeyError, match="F6_E2M3.*no torch release"):
        pt.dtype_from_name("F6_E2M3")
    if not hasattr(torch, "float4_e2m1fn_x2"):
        with pytest.raises(KeyError, match="F4 needs torch.float4_e2m1fn_x2"
                           ".*torch 2.8 and later"):
            pt.dtype_from_name("F4")
    else:
        assert pt.dtype_from_name("F4") is torch.float4_e2m1fn_x2
