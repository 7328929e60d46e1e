# SPDX-License-Identifier: GPL-2.0
"""One error vocabulary across pinmem's loaders (Documentation/python.md,
*Errors*): every loader of error_loaders.py (torch, NumPy, native, JAX;
private and shared=True) against each condition, asserting the type and
the words that say what is wrong.

- missing file: FileNotFoundError, errno ENOENT, safetensors' text
  "No such file or directory: PATH";
- a directory: IsADirectoryError naming the path;
- a file this user may not read: PermissionError, errno EACCES, the path
  named (not "No such file or directory");
- a truncated file: SafetensorError naming the tensor cut off and
  "file truncated?";
- a header nested too deep: SafetensorError, not RecursionError;
- RLIMIT_MEMLOCK too small for an unprivileged user: a PinError that is a
  SafetensorError too, naming the limit and how to raise it."""
import errno
import importlib.util
import json
import os
import shutil
import struct
import tempfile

import numpy as np
import pytest

import pinmem
from pinmem.safetensors import SafetensorError, SafetensorPinError
from pinmem.safetensors import numpy as stnp

import error_loaders
from forked import run_python

FRAMEWORKS = [
    pytest.param("torch", marks=pytest.mark.torch),
    "numpy", "native",
    pytest.param("jax", marks=pytest.mark.skipif(
        not os.environ.get("PINMEM_PY_VENV") and
        importlib.util.find_spec("jax") is None,
        reason="jax is not installed")),
]


def good(path):
    stnp.save_file({"emb": np.arange(1 << 12, dtype=np.float32),
                    "w": np.ones(8, np.float32)}, path)
    return path


def truncated(path):
    good(path)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 1024)
    return path


def deep(path, depth=100_000):
    head = ('{"emb":' + "[" * depth + "]" * depth + "}").encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
    return path


def _loaders(fw):
    got = error_loaders.loaders((fw,))
    if not got:
        pytest.skip("%s is not installed" % fw)
    return got


def check_missing(res, path):
    name, err, text, _st, _pin = res
    assert error_loaders.is_a(name, "FileNotFoundError"), res
    assert err == errno.ENOENT, res
    assert text == "No such file or directory: %s" % path, res


def check_directory(res, path):
    name, err, text, _st, _pin = res
    assert error_loaders.is_a(name, "IsADirectoryError"), res
    assert err == errno.EISDIR and path in text, res


def check_truncated(res, path):
    name, _err, text, st, _pin = res
    assert st, res
    assert '"emb"' in text and "file truncated?" in text, res


def check_deep(res, path):
    name, _err, text, st, _pin = res
    assert st and name != "RecursionError", res
    assert "nesting" in text, res


CONDITIONS = {
    "missing": (lambda p: p, check_missing),
    "directory": (lambda p: os.mkdir(p) or p, check_directory),
    "truncated": (truncated, check_truncated),
    "deep": (deep, check_deep),
}


@pytest.mark.parametrize("condition", sorted(CONDITIONS))
@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_error_table(scratch, fw, condition):
    make, check = CONDITIONS[condition]
    for name, load in _loaders(fw).items():
        path = make(os.path.join(scratch, "%s-%s.safetensors" %
                                 (condition, name.replace(" ", "-"))))
        res = error_loaders.outcome(load, path)
        assert res is not None, (name, "loaded")
        check(res, path)


@pytest.mark.parametrize("condition", ["truncated", "deep"])
def test_load_bytes_says_the_same(scratch, condition):
    make, check = CONDITIONS[condition]
    path = make(os.path.join(scratch, condition + ".safetensors"))
    with open(path, "rb") as f:
        data = f.read()
    loads = [stnp.load]
    try:
        import torch  # noqa: F401
        from pinmem.safetensors import torch as stpt
        loads.append(stpt.load)
    except ImportError:
        pass
    for load in loads:
        res = error_loaders.outcome(load, data)
        assert res is not None and res[2].startswith(
            "Error while deserializing: "), res
        check(res, path)


UNREADABLE = r'''
import ctypes, json, os, sys
import error_loaders

class Hdr(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

class Caps(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]

# Root without CAP_DAC_OVERRIDE (1) and CAP_DAC_READ_SEARCH (2) reads
# files as their mode says, as any other user.
libc = ctypes.CDLL(None, use_errno=True)
h, caps = Hdr(0x20080522, 0), (Caps * 2)()
assert libc.capget(ctypes.byref(h), caps) == 0
for c in caps:
    c.effective &= ~6
    c.permitted &= ~6
assert libc.capset(ctypes.byref(h), caps) == 0, ctypes.get_errno()
for name, load in error_loaders.loaders().items():
    print(json.dumps([name, error_loaders.outcome(load, sys.argv[1])]))
'''


def test_an_unreadable_file_is_a_permission_error(scratch):
    if os.geteuid() != 0:
        pytest.skip("drops root's file capabilities; runs as root")
    path = good(os.path.join(scratch, "private.safetensors"))
    os.chmod(path, 0)
    p = run_python(UNREADABLE, [path], timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert {"numpy load_file", "numpy safe_open",
            "pinmem.load_safetensors"} <= {r[0] for r in rows}, rows
    for name, res in rows:
        assert res is not None, (name, "loaded")
        kind, err, text, _st, _pin = res
        assert error_loaders.is_a(kind, "PermissionError"), (name, res)
        assert err == errno.EACCES, (name, res)
        assert path in text and "Permission denied" in text, (name, res)
        assert "No such file" not in text, (name, res)


MEMLOCK = r'''
import json, os, resource, sys
import error_loaders
import pinmem

path = sys.argv[1]
with open(path, "rb") as f:
    data = f.read()
cases = error_loaders.loaders(("torch", "numpy", "native"))
from pinmem.safetensors import numpy as stnp
cases["numpy load(bytes)"] = lambda _p: stnp.load(data)
hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
resource.setrlimit(resource.RLIMIT_MEMLOCK, (1 << 20, hard))
os.setgroups([])
os.setresgid(65534, 65534, 65534)
os.setresuid(65534, 65534, 65534)
for name, load in cases.items():
    print(json.dumps([name, error_loaders.outcome(load, path)]))
'''


def test_rlimit_memlock_names_the_fix_unprivileged(dev):
    if dev.backend != "portable":
        pytest.skip("the module pins its pages; RLIMIT_MEMLOCK is the "
                    "portable backend's")
    if os.geteuid() != 0:
        pytest.skip("becomes nobody; runs as root")
    where = tempfile.mkdtemp(prefix="pinmem-memlock-")   # nobody may enter
    try:
        os.chmod(where, 0o755)
        path = os.path.join(where, "big.safetensors")
        stnp.save_file({"emb": np.ones(1 << 20, np.float32)}, path)  # 4 MiB
        os.chmod(path, 0o644)
        p = run_python(MEMLOCK, [path], timeout=300)
    finally:
        shutil.rmtree(where, ignore_errors=True)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert len(rows) >= 4, rows
    for name, res in rows:
        assert res is not None, (name, "loaded")
        kind, err, text, st, pin = res
        assert st and pin and err == errno.ENOMEM, (name, res)
        for part in ("RLIMIT_MEMLOCK", "ulimit -l", "limits.conf",
                     "LimitMEMLOCK=", "pinmem module"):
            assert part in text, (name, part, res)


def test_the_types_relate_as_documented():
    """SafetensorPinError is both; a device or region this user may not
    use is a PinError that is also a PermissionError."""
    e = SafetensorPinError(errno.ENOMEM, "over RLIMIT_MEMLOCK")
    assert isinstance(e, SafetensorError) and isinstance(e, pinmem.PinError)
    assert e.errno == errno.ENOMEM and "RLIMIT_MEMLOCK" in str(e)
    e = pinmem.core.pin_error(errno.EACCES, "open /dev/pinmem: join group "
                              "pinmem")
    assert isinstance(e, PermissionError) and \
        isinstance(e, pinmem.PinPermissionError) and \
        isinstance(e, pinmem.PinError)
    assert "join group pinmem" in str(e)
    assert type(pinmem.core.pin_error(errno.EINVAL, "x")) is pinmem.PinError
