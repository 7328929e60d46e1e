# SPDX-License-Identifier: GPL-2.0
"""Pinned means pinned for the GPU: every tensor or array a loader returns
lies in memory that is page-locked while it lives and, where a CUDA driver
is present, registered with it for the range it covers; none is left
registered once they die. And the write rule of pinmem.safetensors.torch
(Documentation/python.md, "What a loaded torch tensor is"), route by
route: a private load's write lands in the registered pages (another
mapping of the region sees it), a shared load's is refused, with the
service or without it.

Seen through the CUDA driver test double (tests/cuda/cuda-double.c:
cuda_double_covers says which live registration holds a range, with its
flags) and /proc/self/smaps (Locked:, VmFlags lo). JAX's arrays are the
native loader's views through DLPack, which a CPU jaxlib cannot import
from registered memory (kDLCUDAHost): the native loader stands for them
here, tests/gpu/check.sh checks them on a GPU. One child process does
every loader and every route (torch's import is slow under the emulator);
the tests below each assert one part of what it saw."""
import json
import os
import pathlib
import shutil
import tempfile

import pytest
from forked import run_python
from helpers import cached_service

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOUBLE = os.path.join(TOP, "build", "tests", "cuda", "libcuda-double.so")
PORTABLE, READ_ONLY = 0x01, 0x08

CHILD = r'''
import ctypes, gc, json, os, sys, warnings
import numpy as np
warnings.simplefilter("ignore")
import pinmem
from pinmem.safetensors import numpy as stnp

tmp, sock = sys.argv[1], sys.argv[2]
drv = ctypes.CDLL(os.environ["PIN_CUDA_LIBRARY"])
drv.cuda_double_stats.restype = ctypes.c_void_p
drv.cuda_double_covers.argtypes = [ctypes.c_size_t, ctypes.c_size_t,
                                   ctypes.POINTER(ctypes.c_uint)]
NOWHERE = os.path.join(tmp, "no-service.sock")

def smaps(addr):
    """Size, Locked (kB) and VmFlags of the VMA holding addr."""
    out, cur = {}, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(None, 1)[0]
            if not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                cur = lo <= addr < hi
            elif cur and head in ("Size:", "Locked:"):
                out[head[:-1]] = int(line.split()[1])
            elif cur and head == "VmFlags:":
                out["flags"] = line.split()[1:]
    return out

def seen(ptr, n):
    fl = ctypes.c_uint()
    reg = drv.cuda_double_covers(ptr, ptr + max(n, 1), ctypes.byref(fl))
    s = smaps(ptr)
    return {"reg": bool(reg), "flags": fl.value if reg else None,
            "locked_kb": s.get("Locked", 0), "size_kb": s.get("Size", 0),
            "lo": "lo" in s.get("flags", [])}

def arrays(d):
    return [seen(a.ctypes.data, a.nbytes) for a in d.values()]

def tensors(d):
    return [seen(t.data_ptr(), t.numel() * t.element_size())
            for t in d.values()]

def service(on):
    os.environ["PIN_CACHE_SOCKET"] = sock if on else NOWHERE

path = os.path.join(tmp, "m.safetensors")
stnp.save_file({"a": np.arange(4096, dtype=np.float32),
                "b": np.ones(3, np.int8),
                "c": np.arange(300000, dtype=np.float32)}, path)
with open(path, "rb") as f:
    image = f.read()
out = {"backend": pinmem.open().backend, "loaders": {}, "routes": {}}
keep = []
L = out["loaders"]
service(False)
keep.append(stnp.load_file(path)); L["numpy"] = arrays(keep[-1])
keep.append(stnp.load_file(path, shared=True))
L["numpy shared fallback"] = arrays(keep[-1])
if sock:
    service(True)
    keep.append(stnp.load_file(path, shared=True))
    L["numpy shared service"] = arrays(keep[-1])
    service(False)
try:
    import torch, pinmem.torch as pt
    from pinmem.safetensors.torch import load_file, load
    from pinmem.safetensors import safe_open
except ImportError:
    torch = None
if torch is not None:
    keep.append(load_file(path)); L["torch"] = tensors(keep[-1])
    keep.append(load(image)); L["torch load"] = tensors(keep[-1])
    f = safe_open(path, "pt")
    keep.append({"a": f.get_tensor("a"), "s": f.get_slice("c")[10:20]})
    L["torch safe_open"] = tensors(keep[-1])
    # Which mapping a private load's tensors lie in: the owner mapping
    # (the one the load read into and locked), or another one.
    region, t = f.checkpoint.regions[0], keep[-1]["a"]
    own = region.owner_array()
    lo = own.ctypes.data
    out["in_owner"] = lo <= t.data_ptr() < lo + own.nbytes
    del own
    try:
        region.close()
        out["close"] = "closed"
    except ValueError as e:
        out["close"] = str(e)
    keep.append(load_file(path, shared=True))
    L["torch shared fallback"] = tensors(keep[-1])
    if sock:
        service(True)
        keep.append(load_file(path, shared=True))
        L["torch shared service"] = tensors(keep[-1])
        service(False)
    keep.append({"big": pt.empty((1 << 19,)), "pooled": pt.zeros((16,))})
    L["torch empty"] = tensors(keep[-1])
    ip = getattr(pt, "is_pinned", lambda t: None)
    out["is_pinned"] = [ip(t) for d in keep if
                        isinstance(d, dict) and d and
                        isinstance(next(iter(d.values())), torch.Tensor)
                        for t in d.values()]
    out["is_pinned_plain"] = ip(torch.ones(4))
# pinmem.jax's arrays are the NumPy loader's views imported through DLPack:
# under the double DLPack says kDLCUDAHost, which a CPU jaxlib refuses
# ("Unknown backend cuda"); tests/gpu/check.sh sees them as pinned_host.
# Its loader here: the native one pinmem.jax.load_safetensors calls.
keep.append(pinmem.load_safetensors(path))
L["native (pinmem.jax's)"] = arrays(keep[-1])

# The write routes, on a private load and a shared one.
ROUTES = {
    "inplace": lambda t: t.mul_(2),
    "setitem": lambda t: t.__setitem__(0, 5.0),
    "copy_": lambda t: t.copy_(torch.full((4096,), 7.0)),
    "out=": lambda t: torch.add(torch.ones(4096), 1, out=t),
    "numpy": lambda t: t.numpy().__setitem__(0, 9.0),
    "dlpack": lambda t: torch.from_dlpack(t).__setitem__(0, 11.0),
}

def write(t, fn, shared=False):
    try:
        if shared and fn is ROUTES["dlpack"]:
            # Only the export: a consumer writing read-only memory faults.
            torch.from_dlpack(t)
            return "exported"
        fn(t)
        return "wrote"
    except pinmem.ReadOnlyError:
        return "ReadOnlyError"
    except ValueError as e:          # NumPy: assignment destination is read-only
        return "ValueError" if "read-only" in str(e) else repr(e)

if torch is not None:
    for name, fn in ROUTES.items():
        f = safe_open(path, "pt")
        t = f.get_tensor("a")
        a = f.checkpoint["a"]
        off = a.ctypes.data - a.mapping_range[0]
        res = write(t, fn)
        other = f.checkpoint.regions[0].view(np.float32, (4,), offset=off)
        r = {"private": dict(seen(t.data_ptr(), 4 * t.numel()), outcome=res,
                             t=t[:4].tolist(), region=other.tolist())}
        del other
        for how in ("fallback", "service") if sock else ("fallback",):
            service(how == "service")
            s = load_file(path, shared=True)["a"]
            res = write(s, fn, shared=True)
            r[how] = dict(seen(s.data_ptr(), 4 * s.numel()), outcome=res,
                          t=s[:4].tolist())
            del s
        service(False)
        out["routes"][name] = r
        del t, a, f
keep.clear()
gc.collect()
st = ctypes.cast(drv.cuda_double_stats(), ctypes.POINTER(ctypes.c_ulong * 4))
out["live_after"] = st.contents[3]
print(json.dumps(out))
'''


def _run(tmp_path, sock):
    lib = shutil.copy(DOUBLE, tmp_path / "libcuda-double.so")
    p = run_python(CHILD, [tmp_path, sock or ""], timeout=600,
                   env={"PIN_CUDA_LIBRARY": str(lib)}, preload=("torch",))
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def seen(tmp_path_factory):
    if not os.path.exists(DOUBLE):
        pytest.skip("the CUDA driver double is not built (make all)")
    # On a disk: the service does not cache files on tmpfs (the guest's
    # /tmp); its scratch disk when there is one.
    base = os.environ.get("PINMEM_SCRATCH")
    if base and os.path.isdir(base):
        tmp = tempfile.mkdtemp(prefix="pytest-pinned-", dir=base)
    else:
        tmp = str(tmp_path_factory.mktemp("pinned"))
    try:
        with cached_service(tmp) as sock:
            return _run(pathlib.Path(tmp), sock)
    finally:
        if base and tmp.startswith(base):
            shutil.rmtree(tmp, ignore_errors=True)


def _ro(loader):
    return not loader.startswith("torch") or "shared" in loader


def test_every_loaded_range_is_registered_with_its_flags(seen):
    want = {"numpy", "numpy shared fallback"}
    assert want <= set(seen["loaders"]), seen["loaders"].keys()
    for loader, ranges in seen["loaders"].items():
        flags = PORTABLE | (READ_ONLY if _ro(loader) else 0)
        assert ranges and all(r["reg"] and r["flags"] == flags
                              for r in ranges), (loader, ranges)


def test_every_loaded_range_is_locked(seen):
    for loader, ranges in seen["loaders"].items():
        for r in ranges:
            if seen["backend"] == "portable":
                # mlocked: smaps says so (VmFlags lo) and counts it; a
                # mapping this process alone maps counts whole.
                assert r["lo"] and r["locked_kb"] > 0, (loader, r)
                if loader in ("torch", "torch load", "torch safe_open"):
                    assert r["locked_kb"] == r["size_kb"], (loader, r)
    if "is_pinned" in seen:
        assert all(x is True for x in seen["is_pinned"]), seen["is_pinned"]
        assert seen["is_pinned_plain"] is False


@pytest.mark.torch
def test_private_tensors_lie_in_the_loads_own_mapping(seen):
    """Portable backend: a private torch load's tensors use the mapping
    pin_st_load read into and locked (the region's owner mapping) instead
    of a second one faulted and locked again, and the region cannot be
    closed under them."""
    if "in_owner" not in seen:
        pytest.skip("PyTorch is not installed")
    if seen["backend"] != "portable":
        pytest.skip("the device backend's tensors lie in a view the "
                    "module counts")
    assert seen["in_owner"] is True
    assert "arrays over the owner mapping still exist" in seen["close"], \
        seen["close"]


def test_nothing_stays_registered_when_the_tensors_die(seen):
    assert seen["live_after"] == 0


@pytest.mark.torch
def test_service_and_fallback_tensors_alike(seen):
    """Writes must not depend on the service being up."""
    if not seen["routes"]:
        pytest.skip("PyTorch is not installed")
    for name, r in seen["routes"].items():
        if "service" in r:
            assert r["service"]["outcome"] == r["fallback"]["outcome"], name


ROUTES = ["inplace", "setitem", "copy_", "out=", "numpy", "dlpack"]
WROTE = {"inplace": [0.0, 2.0, 4.0, 6.0], "setitem": [5.0, 1.0, 2.0, 3.0],
         "copy_": [7.0] * 4, "out=": [2.0] * 4, "numpy": [9.0, 1.0, 2.0, 3.0],
         "dlpack": [11.0, 1.0, 2.0, 3.0]}


@pytest.mark.torch
@pytest.mark.parametrize("route", ROUTES)
def test_private_write_lands_in_the_registered_pages(seen, route):
    if not seen["routes"]:
        pytest.skip("PyTorch is not installed")
    r = seen["routes"][route]["private"]
    assert r["outcome"] == "wrote" and r["t"] == WROTE[route], r
    # The region's other mapping sees it: the same pages, which stay
    # registered, writable; the GPU copies what the CPU sees.
    assert r["region"] == r["t"], r
    assert r["reg"] and r["flags"] == PORTABLE, r


@pytest.mark.torch
@pytest.mark.parametrize("route", ROUTES)
def test_shared_write_is_refused(seen, route):
    if not seen["routes"]:
        pytest.skip("PyTorch is not installed")
    for how in ("fallback", "service"):
        r = seen["routes"][route].get(how)
        if r is None:
            continue
        want = "ValueError" if route == "numpy" else "ReadOnlyError"
        assert r["outcome"] == want, (how, r)
        assert r["t"] == [0.0, 1.0, 2.0, 3.0], (how, r)
        assert r["reg"] and r["flags"] == PORTABLE | READ_ONLY, (how, r)


LIMIT_CHILD = r'''
import ctypes, os, resource, sys, warnings
import numpy as np
warnings.simplefilter("ignore")
from pinmem.safetensors import numpy as stnp, SafetensorError

class Hdr(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

class Caps(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]

# Root without CAP_IPC_LOCK (14): mlock then honours RLIMIT_MEMLOCK.
libc = ctypes.CDLL(None, use_errno=True)
h, caps = Hdr(0x20080522, 0), (Caps * 2)()
assert libc.capget(ctypes.byref(h), caps) == 0
for c in caps:
    c.effective &= ~(1 << 14)
    c.permitted &= ~(1 << 14)
assert libc.capset(ctypes.byref(h), caps) == 0, ctypes.get_errno()
path = os.path.join(sys.argv[1], "limit.safetensors")
stnp.save_file({"w": np.ones(1 << 20, np.float32)}, path)     # 4 MiB
hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
resource.setrlimit(resource.RLIMIT_MEMLOCK, (1 << 20, hard))
try:
    stnp.load_file(path)
    print("loaded under 1 MiB")
except SafetensorError as e:
    print("refused:", e)
try:
    import torch
    from pinmem.safetensors.torch import load_file
except ImportError:
    print("torch: not installed")
else:
    try:
        load_file(path)         # private: the load's own mapping, writable
        print("torch: loaded under 1 MiB")
    except Exception as e:
        print("torch: refused:", type(e).__name__, e)
resource.setrlimit(resource.RLIMIT_MEMLOCK, (hard, hard))    # >= 8 MiB
w = stnp.load_file(path)["w"]
with open("/proc/self/status") as f:
    lck = [int(l.split()[1]) for l in f if l.startswith("VmLck:")][0]
print("loaded under the hard limit, VmLck kB", lck, float(w.sum()))
'''


def test_lock_within_rlimit_memlock_or_a_clear_error(tmp_path, dev):
    if dev.backend != "portable":
        pytest.skip("the module pins its pages; mlock is the portable "
                    "backend's")
    import resource
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    if hard != resource.RLIM_INFINITY and hard < 8 << 20:
        pytest.skip("RLIMIT_MEMLOCK's hard limit is below 8 MiB")
    p = run_python(LIMIT_CHILD, [tmp_path], timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    refused, torch_refused, loaded = p.stdout.splitlines()[-3:]
    assert refused.startswith("refused:"), refused
    for part in ("cannot lock the", "RLIMIT_MEMLOCK is 1048576 bytes",
                 "ulimit -l", "pinmem module"):
        assert part in refused, (part, refused)
        if torch_refused != "torch: not installed":
            assert part in torch_refused, (part, torch_refused)
    lck = int(loaded.split()[-2])
    assert loaded.endswith(" 1048576.0") and lck >= 4096, loaded
