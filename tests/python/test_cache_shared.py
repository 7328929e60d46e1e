# SPDX-License-Identifier: GPL-2.0
"""load_file(path, shared=True): tensors over pinmem-cached's one copy.

Each test starts its own service (build/sbin/pinmem-cached) on a socket of
its own, on the backend the suite runs on.
"""
import os
import pathlib
import shutil
import subprocess
import tempfile
import time
import warnings

import numpy as np
import pytest

from pinmem.safetensors import SafetensorError
from pinmem.safetensors import numpy as stnp
from pinmem.safetensors import shared
from helpers import cached_service

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CACHED = os.path.join(TOP, "build", "sbin", "pinmem-cached")
MKST = os.path.join(TOP, "tests", "cache", "mkst.py")


@pytest.fixture
def tmp_path(tmp_path):
    """Checkpoints on a disk: the service does not cache files on tmpfs
    (their identity does not follow their content), and the guest's /tmp
    is tmpfs. Its scratch disk when there is one."""
    base = os.environ.get("PINMEM_SCRATCH")
    if not base or not os.path.isdir(base):
        yield tmp_path
        return
    d = tempfile.mkdtemp(prefix="pytest-cache-", dir=base)
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def service(tmp_path):
    if not os.path.exists(CACHED):
        pytest.skip("pinmem-cached is not built")
    with cached_service(tmp_path) as sock:
        yield sock


def _file(tmp_path, name="m.safetensors", seed=3, kib=64):
    path = str(tmp_path / name)
    subprocess.run(["python3", MKST, path, str(kib), str(seed)], check=True)
    return path


def _entries(sock):
    out = subprocess.run([CACHED, "--list", "--socket", sock], check=True,
                         capture_output=True, text=True).stdout
    return out


def test_numpy_shared_equals_private_and_is_read_only(service, tmp_path,
                                                      monkeypatch):
    path = _file(tmp_path)
    monkeypatch.setenv("PIN_CACHE_SOCKET", service)
    a = stnp.load_file(path, shared=True)
    b = stnp.load_file(path, shared=True)
    priv = stnp.load_file(path)
    assert list(a) == list(priv) == ["big", "small"]
    for k in priv:
        assert np.array_equal(a[k], priv[k]) and np.array_equal(b[k], priv[k])
    assert not a["small"].flags.writeable
    with pytest.raises(ValueError):
        a["small"][0] = 5
    assert ", 1 entries," in _entries(service)


def test_no_service_loads_privately_and_warns_once(tmp_path, monkeypatch):
    path = _file(tmp_path)
    monkeypatch.setenv("PIN_CACHE_SOCKET", str(tmp_path / "none"))
    monkeypatch.setattr(shared, "_warned", [])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        a = stnp.load_file(path, shared=True)
        stnp.load_file(path, shared=True)
    said = [x for x in w if issubclass(x.category, RuntimeWarning)]
    assert len(said) == 1 and "no service at" in str(said[0].message)
    assert a["small"].tolist() == [1.0, 2.0, 3.0, 3.0]


def test_file_errors_raise(service, tmp_path, monkeypatch):
    path = str(tmp_path / "bad.safetensors")
    with open(path, "wb") as f:
        f.write(b"\x10" + b"\0" * 7 + b'{"a":nonsense!!}')
    monkeypatch.setenv("PIN_CACHE_SOCKET", service)
    with pytest.raises(SafetensorError, match="pinmem-cached"):
        stnp.load_file(path, shared=True)


def _between_reply_and_map(monkeypatch, act):
    """Run act() once, after the service's reply and before the view is
    mapped (the loads act makes map theirs at once)."""
    real = shared._map_view
    acts = [act]

    def late_map(vfd, entry, vlen):
        if acts:
            acts.pop()()
        return real(vfd, entry, vlen)
    monkeypatch.setattr(shared, "_map_view", late_map)


def test_the_entry_is_held_until_its_view_is_mapped(tmp_path, monkeypatch):
    """Until the client has mapped the view it keeps its connection, and
    the service does not evict the entry: a load that needs its room is
    refused, and the view is the file's bytes."""
    b, d = _file(tmp_path, "b.st", 2, 3072), _file(tmp_path, "d.st", 4, 5000)
    refused = []

    def other_load():
        with pytest.raises(shared.Unavailable) as e:
            shared.request(d, sock, 30)
        refused.append(str(e.value))
    with cached_service(tmp_path, "8M", ("--user-share", "100")) as sock:
        _between_reply_and_map(monkeypatch, other_load)
        image, entry, size, aligned = shared.request(b, sock, 30)
        got = {n: bytes(u8) for n, _, _, u8 in
               shared.tensors(image, size, aligned)}
        want = stnp.load_file(b)
        assert got == {k: v.tobytes() for k, v in want.items()}
    assert len(refused) == 1 and "being handed to a client" in refused[0], \
        refused


def test_a_view_evicted_before_it_is_mapped(tmp_path, monkeypatch):
    """A client slower than --client-timeout loses its hold; once a load
    evicted the entry the kernel refuses the mapping (device backend) and
    the load is private, said once; the portable backend's view outlives
    the eviction."""
    b, d = _file(tmp_path, "b.st", 2, 3072), _file(tmp_path, "d.st", 4, 5000)
    backend = []

    def evict_it():
        for _ in range(400):
            listed = _entries(sock)
            if "evict: yes" in listed:
                break
            time.sleep(0.05)
        backend.append("device" if "device backend" in listed else
                       "portable")
        shared.request(d, sock, 30)
    monkeypatch.setenv("PIN_CACHE_SOCKET", str(tmp_path / "cache.sock"))
    monkeypatch.setattr(shared, "_warned", [])
    with cached_service(tmp_path, "8M", ("--user-share", "100",
                                         "--client-timeout", "1")) as sock:
        _between_reply_and_map(monkeypatch, evict_it)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            got = stnp.load_file(b, shared=True)
        said = [str(x.message) for x in w
                if issubclass(x.category, RuntimeWarning)]
    want = stnp.load_file(b)
    assert all(np.array_equal(got[k], want[k]) for k in want)
    if backend == ["device"]:
        assert len(said) == 1 and "evicted entry 1 before this process " \
            "mapped it" in said[0], said
    else:
        assert backend == ["portable"] and said == [], (backend, said)


@pytest.mark.torch
def test_torch_shared_read_only(service, tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    import pinmem
    from pinmem.safetensors import torch as stt
    path = _file(tmp_path)
    monkeypatch.setenv("PIN_CACHE_SOCKET", service)
    sd = stt.load_file(path, shared=True)
    assert sd["small"].tolist() == [1.0, 2.0, 3.0, 3.0]
    assert sd["big"].dtype == torch.uint8
    with pytest.raises(pinmem.ReadOnlyError):
        sd["small"].mul_(2)
    assert (sd["small"] * 2).tolist() == [2.0, 4.0, 6.0, 6.0]


def test_sharded_index_each_shard_an_entry(service, tmp_path, monkeypatch):
    import json
    a = _file(tmp_path, "s-1.safetensors", 5)
    b = str(tmp_path / "s-2.safetensors")
    stnp.save_file({"other": np.arange(10, dtype=np.int32)}, b)
    index = str(tmp_path / "m.safetensors.index.json")
    with open(index, "w") as f:
        json.dump({"weight_map": {"big": os.path.basename(a),
                                  "small": os.path.basename(a),
                                  "other": os.path.basename(b)}}, f)
    monkeypatch.setenv("PIN_CACHE_SOCKET", service)
    sd = stnp.load_file(index, shared=True)
    assert sorted(sd) == ["big", "other", "small"]
    assert sd["other"].tolist() == list(range(10))
    assert ", 2 entries," in _entries(service)


def test_shared_copy_has_every_tensor_on_64_bytes(service, tmp_path,
                                                  monkeypatch):
    """A file laid out as the safetensors package writes it (data on 8
    bytes only, an odd-sized tensor): the service's one copy has every
    tensor on 64 bytes, so JAX takes each in place; NumPy's shared load
    reads the same bytes; a client that does not say it reads such copies
    is declined (EOPNOTSUPP: it loads privately), not handed a layout it
    would misread."""
    jax = pytest.importorskip("jax")
    import pinmem.jax as pj
    path = str(tmp_path / "packed.safetensors")
    want = {"a": np.arange(3, dtype=np.float32),
            "b": np.arange(35, dtype=np.int16).reshape(5, 7),
            "c": np.linspace(-1, 1, 100).astype(np.float32)}
    stnp.save_file(want, path)
    with open(path, "rb") as f:
        assert (8 + int.from_bytes(f.read(8), "little")) % 64
    monkeypatch.setenv("PIN_CACHE_SOCKET", service)
    p = pj.load_safetensors(path, shared=True)
    assert p.copied == [] and p.regions == []
    for k, x in p.items():
        assert isinstance(x, jax.Array) and x.unsafe_buffer_pointer() % 64 \
            == 0, k
        assert np.array_equal(np.asarray(x), want[k]), k
    sd = stnp.load_file(path, shared=True)
    for k in want:
        assert np.array_equal(sd[k], want[k]), k
    assert ", 1 entries," in _entries(service)
    fd = os.open(path, os.O_RDONLY)
    try:
        data, fds, s = shared._exchange(service, fd, shared._HEARTBEAT,
                                        5.0)
        s.close()
    finally:
        os.close(fd)
    assert not fds
    err, text = shared._error(data)
    assert err == 95 and "load privately" in text, (err, text)


def test_jax_shared_zero_copy(service, tmp_path, monkeypatch):
    jax = pytest.importorskip("jax")
    import pinmem.jax as pj
    from pinmem.safetensors import native
    path = str(tmp_path / "j.safetensors")
    native.save_safetensors(path, {"w": np.arange(1024, dtype=np.float32),
                                   "v": np.ones(64, np.float32)})
    monkeypatch.setenv("PIN_CACHE_SOCKET", service)
    p = pj.load_safetensors(path, shared=True)
    assert isinstance(p["w"], jax.Array) and p.copied == []
    assert float(p["w"].sum()) == 523776.0
    # load_safetensors checks JAX read the mapping in place; the entry is
    # the service's one copy.
    assert p.regions == [] and p.files == [path]
    assert ", 1 entries," in _entries(service)
    assert pj.Arrays.formats == {}      # the class defaults stay empty
