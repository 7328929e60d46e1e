# SPDX-License-Identifier: GPL-2.0
"""pinmem.jax: zero-copy jax.Arrays over pinned regions, their mappings'
lifetime, and donation -- in real JAX on the CPU.

The loop of JAX's cached-NumPy-view donation bug (a bf16 array viewed with
np.asarray, kept, and donated to a jitted function) runs here with pinmem
holding the memory: the kernel refuses to give the region back while any
view of it lives, names the holder, and gives it back the moment the last
one dies; nothing under a live view is ever written.

Runs where jax is installed: the venv suites (tests/*.d/52-python-venv)
install it and let nothing skip for want of it."""
import gc
import os

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="jax is not installed")
import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402

import pinmem  # noqa: E402
import pinmem.dlpack as dl  # noqa: E402
import pinmem.jax as pj  # noqa: E402

from helpers import mapped, mapping_path, maps_lines  # noqa: E402

BF16 = ml_dtypes.bfloat16


def fill(region, dtype, values, offset=0):
    """Write values into region (OPEN) through a writable view."""
    values = np.asarray(values, dtype=dtype)
    with region.view(dtype, values.shape, offset=offset,
                     writable=True) as w:
        w[...] = values


def where(x):
    rng = pj.mapping_range(x)
    assert rng is not None
    return rng, mapping_path(rng)


def mapping_at(ptr):
    """The range and path of the mapping holding address ptr, from
    /proc/self/maps alone (not pinmem's own bookkeeping)."""
    for line in maps_lines():
        parts = line.split(None, 5)
        lo, hi = (int(v, 16) for v in parts[0].split("-"))
        if lo <= ptr < hi:
            return (lo, hi), (parts[5] if len(parts) > 5 else "")
    raise AssertionError("nothing is mapped at 0x%x" % ptr)


def test_view_is_zero_copy_and_exact(region):
    want = np.arange(-8, 8, dtype=np.float32).reshape(4, 4) / 4
    fill(region, BF16, want)
    fill(region, np.float32, want, offset=4096)
    region.seal()
    x = pj.view(region, jnp.bfloat16, (4, 4))
    y = pj.view(region, np.float32, (4, 4), offset=4096)
    assert x.dtype == jnp.bfloat16 and x.shape == (4, 4)
    assert y.dtype == jnp.float32
    # The arrays read the view mappings themselves, not copies.
    rx, _ = where(x)
    assert x.unsafe_buffer_pointer() == rx[0]
    assert y.unsafe_buffer_pointer() == where(y)[0][0]
    assert np.array_equal(np.asarray(x), want.astype(BF16))
    assert np.array_equal(np.asarray(y), want)
    # JAX computes on them.
    assert float(jnp.sum(x.astype(jnp.float32))) == float(want.sum())


def test_float8_exact(region):
    raw = np.arange(256, dtype=np.uint8)
    fill(region, np.uint8, raw)
    for dt in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2):
        x = pj.view(region, dt, (256,))
        assert x.dtype == dt
        assert x.unsafe_buffer_pointer() == where(x)[0][0]
        # Bit for bit the region's bytes (NaNs included).
        assert np.array_equal(np.asarray(x).view(np.uint8), raw)


def test_unaligned_offset_is_refused_not_copied(region):
    before = dl.live_exports()
    for off in (1, 2, 32, 4096 + 16):
        with pytest.raises(ValueError, match="not a multiple of 64"):
            pj.view(region, np.uint8, (16,), offset=off)
    assert dl.live_exports() == before
    x = pj.view(region, np.uint8, (16,), offset=64)     # aligned: fine
    assert x.unsafe_buffer_pointer() == where(x)[0][0] + 64


def test_mapping_lives_exactly_as_long_as_the_jax_buffer(region):
    fill(region, np.float32, np.ones(1024))
    x = pj.view(region, np.float32, (1024,))
    rng, path = where(x)
    assert mapped(rng, path)
    n = dl.live_exports()
    # Everything JAX shares the buffer with keeps it: a NumPy view of it,
    # an array that reuses it (a no-op reshape keeps a separate buffer).
    v = np.asarray(x)
    assert v.ctypes.data == rng[0] and not v.flags.writeable
    del x
    gc.collect()
    assert mapped(rng, path) and dl.live_exports() == n
    assert float(v.sum()) == 1024.0
    del v
    gc.collect()
    assert not mapped(rng, path)
    assert dl.live_exports() == n - 1


def test_views_are_read_only_in_every_state(region):
    x = pj.view(region, np.float32, (16,))
    assert region.state == "open"
    assert region.info().writable_view_mappings == 0
    with pytest.raises(ValueError):
        np.asarray(x)[0] = 1.0          # NumPy's view of it is read-only
    del x


def test_load_safetensors_zero_copy(scratch, dev):
    p = os.path.join(scratch, "m.safetensors")
    w = (np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 7)
    tensors = {"w": w.astype(BF16), "b": np.arange(16, dtype=np.float32),
               "e": np.linspace(-2, 2, 64).astype(ml_dtypes.float8_e4m3fn)}
    pinmem.save_safetensors(p, tensors)
    params = pj.load_safetensors(p, dev=dev)
    assert isinstance(params, dict) and sorted(params) == ["b", "e", "w"]
    assert params.formats == {"w": "BF16", "b": "F32", "e": "F8_E4M3"}
    assert [r.state for r in params.regions] == ["sealed"]
    rngs = set()
    for k, x in params.items():
        assert x.dtype == tensors[k].dtype and x.shape == tensors[k].shape
        assert np.array_equal(np.asarray(x).view(np.uint8),
                              tensors[k].view(np.uint8))
        rng = pj.mapping_range(x)
        assert rng[0] <= x.unsafe_buffer_pointer() < rng[1]
        rngs.add(rng)
    del x
    assert len(rngs) == 1           # one mapping of the file's region
    rng = rngs.pop()
    path = mapping_path(rng)
    region = params.regions[0]
    arrays = dict(params)
    params.clear()
    del arrays["w"], arrays["b"]
    gc.collect()
    assert mapped(rng, path)        # "e" still holds it
    del arrays
    gc.collect()
    assert not mapped(rng, path)
    region.close()


FIXTURES = os.environ.get("PINMEM_FIXTURES") or os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "shared", "fixtures",
    "safetensors-reference")


def zero_copy(params, path):
    """Each array of params reads its file's mapping in place, on 64 bytes,
    and holds what the safetensors package reads from path."""
    snp = pytest.importorskip("safetensors.numpy")
    want = snp.load_file(path)
    assert sorted(params) == sorted(want) and params.copied == []
    for k, x in params.items():
        assert x.dtype == want[k].dtype and x.shape == want[k].shape, k
        assert np.array_equal(np.asarray(x), want[k]), k
        if x.size:
            ptr = x.unsafe_buffer_pointer()
            lo, hi = pj.mapping_range(x)
            assert lo <= ptr < hi and ptr % 64 == 0, (k, hex(ptr))


def test_load_safetensors_places_every_tensor_on_64_bytes(scratch, dev):
    """A file the safetensors package wrote: a header padded to 8 bytes
    only, tensors back to back (odd sizes among them), so none of its
    tensors lies on 64 bytes of the file. Every one becomes a zero-copy
    jax.Array, moved inside the region before the seal."""
    snp = pytest.importorskip("safetensors.numpy")
    p = os.path.join(scratch, "packed.safetensors")
    tensors = {"a": np.arange(3, dtype=np.float32),
               "b": (np.arange(35, dtype=np.float32) / 3).reshape(5, 7)
               .astype(BF16),
               "c": np.arange(100, dtype=np.int8),
               "d": np.zeros((0, 4), np.float32),
               "e": np.arange(-8, 8, dtype=np.int16)}
    snp.save_file(tensors, p)
    with open(p, "rb") as f:
        data_start = 8 + int.from_bytes(f.read(8), "little")
    assert data_start % 64          # the package's layout, not ours
    params = pj.load_safetensors(p, dev=dev)
    zero_copy(params, p)
    assert [r.state for r in params.regions] == ["sealed"]
    # What the placing cost: every non-empty tensor moved (the first
    # starts at data_start, off 64), once.
    ck = pinmem.load_safetensors(p, dev=dev, align=True)
    assert ck.stats["align_bytes"] == sum(a.nbytes for a in tensors.values())
    assert ck.stats["align_seconds"] > 0
    ck.close()
    # pinmem's writer: the data on 4096, "a" 4 bytes, so "b" is off 64 in
    # the file and moved; "a" stays.
    p = os.path.join(scratch, "aligned.safetensors")
    pinmem.save_safetensors(p, {"a": np.zeros(1, np.float32),
                                "b": np.ones(4, np.float32)})
    zero_copy(pj.load_safetensors(p, dev=dev), p)
    ck = pinmem.load_safetensors(p, dev=dev, align=True)
    assert ck.stats["align_bytes"] == 16
    ck.close()


def test_reference_files_load_zero_copy(dev):
    """The safetensors library's own reference files (shared fixtures,
    read in place): every dtype zero-copy, F64 once 64-bit types are on;
    before that the error says how to turn them on."""
    files = sorted(f for f in os.listdir(FIXTURES)
                   if f.endswith(".safetensors")) \
        if os.path.isdir(FIXTURES) else []
    if not files:
        pytest.skip("no safetensors reference fixtures at %s" % FIXTURES)
    before = dl.live_exports()
    with pytest.raises(ValueError, match=r"tensor d is float64.*"
                       r"jax\.config\.update\(\"jax_enable_x64\", True\)"):
        pj.load_safetensors(os.path.join(FIXTURES, "overall.safetensors"),
                            dev=dev)
    gc.collect()
    assert dl.live_exports() == before      # refused before any import
    with jax.enable_x64(True):
        for f in files:
            path = os.path.join(FIXTURES, f)
            zero_copy(pj.load_safetensors(path, dev=dev), path)


def test_unaligned_tensors_without_align_name_the_fixes(scratch, dev):
    """align=False keeps the file's layout: a tensor off 64 bytes is
    refused naming both ways out, or copied (and named) when asked."""
    p = os.path.join(scratch, "aligned.safetensors")
    pinmem.save_safetensors(p, {"a": np.zeros(1, np.float32),
                                "b": np.ones(4, np.float32)})
    before = dl.live_exports()
    with pytest.raises(ValueError, match="tensor b .*not a multiple of 64.*"
                       "align=True.*copy_unaligned=True"):
        pj.load_safetensors(p, dev=dev, align=False)
    gc.collect()
    assert dl.live_exports() == before
    params = pj.load_safetensors(p, dev=dev, align=False,
                                 copy_unaligned=True)
    assert params.copied == ["b"]
    assert pj.mapping_range(params["b"]) is None
    rng = pj.mapping_range(params["a"])
    ptr = params["a"].unsafe_buffer_pointer()
    assert rng[0] <= ptr < rng[1] and ptr % 64 == 0
    assert np.asarray(params["b"]).tolist() == [1.0] * 4
    assert np.asarray(params["a"]).tolist() == [0.0]


# ---- donation --------------------------------------------------------------

def test_donating_an_imported_array_never_writes_the_region(region):
    """What JAX does with a donated array over pinned memory: XLA cannot
    write an imported buffer, so it allocates the output; the donated
    array is deleted, the mapping dropped, the region unchanged."""
    want = (np.arange(4096, dtype=np.float32) / 3).astype(BF16)
    fill(region, BF16, want)
    region.seal()
    x = pj.view(region, jnp.bfloat16, (4096,))
    rng, path = where(x)
    f = jax.jit(lambda a: a * 2 + 1, donate_argnums=0)
    y = f(x)
    y.block_until_ready()
    assert x.is_deleted()
    assert not (rng[0] <= y.unsafe_buffer_pointer() < rng[1])
    gc.collect()
    assert not mapped(rng, path)                # JAX dropped the buffer
    owner = region.owner_array(BF16, (4096,))
    assert np.array_equal(owner, want)          # never written
    assert np.array_equal(np.asarray(y),
                          (want.astype(np.float32) * 2 + 1).astype(BF16))
    del owner


def test_seed_loop_cached_views_and_donation(region, device_only):
    """Cached np.asarray views of a bf16 array and donation to a jitted
    function, with pinmem holding the memory: DONATE is refused while a
    view lives and names it, nothing under the live view is written, and
    the region is reusable the moment the last view dies."""
    want = (np.arange(8192, dtype=np.float32) - 4096).astype(BF16)
    fill(region, BF16, want)
    region.seal()
    step = jax.jit(lambda a: a * 2, donate_argnums=0)
    x = pj.view(region, jnp.bfloat16, (8192,))
    rng, path = mapping_at(x.unsafe_buffer_pointer())
    cache = [np.asarray(x) for _ in range(3)]     # the cached views
    assert all(c.ctypes.data == rng[0] for c in cache)
    out = step(x)                   # refused donation: JAX copies instead
    out.block_until_ready()
    del x                           # the array is gone; its views are not
    gc.collect()
    assert mapped(rng, path)
    with pytest.raises(pinmem.BusyError) as e:
        region.donate()
    assert e.value.errno == 16
    views = [h for h in e.value.holders if h.kind == "view"]
    assert [(h.pid, h.start, h.end) for h in views] == \
        [(os.getpid(), rng[0], rng[1])]
    assert "pid %d" % os.getpid() in e.value.strerror
    assert region.state == "sealed"
    # Nothing overwrote what the views read.
    assert all(np.array_equal(c, want) for c in cache)
    assert np.array_equal(np.asarray(out), (want.astype(np.float32) * 2)
                          .astype(BF16))
    del cache[:2]
    gc.collect()
    with pytest.raises(pinmem.BusyError):
        region.donate()             # one view still lives
    assert np.array_equal(cache[0], want)
    del cache[0]
    gc.collect()
    assert not mapped(rng, path)
    region.donate()                 # the moment the last view died
    assert region.state == "donated"
    owner = region.owner_array(BF16, (8192,))
    owner[:] = 0                    # reuse: the owner rewrites it
    region.publish()
    z = pj.view(region, jnp.bfloat16, (8192,))
    assert not bool(jnp.any(z))
    del z, owner
