# SPDX-License-Identifier: GPL-2.0
"""save_sharded writes a sharded checkpoint that a crash cannot mix: new
shards under names of their own, the index replaced last, the shards it no
longer names deleted after. (tests/powercut cuts the power during it, in a
guest.)"""
import json
import multiprocessing
import os
import re

import numpy as np
import pytest

from pinmem.safetensors import _sharded
from pinmem.safetensors.numpy import load_file, save_sharded

MIB = 1 << 20
SHARD = re.compile(r"model-(\d{5})-of-(\d{5})-[0-9a-f]{8}\.safetensors")


def _tensors(value, n=6):
    # n tensors of 512 KiB each
    return {"t%d" % i: np.full((128, 1024), value + i, dtype=np.float32)
            for i in range(n)}


def _index(folder):
    with open(os.path.join(folder, "model.safetensors.index.json")) as f:
        return json.load(f)


def _assert_loads(folder, value, n=6):
    got = load_file(os.path.join(folder, "model.safetensors.index.json"))
    assert sorted(got) == sorted(_tensors(value, n))
    for k, v in _tensors(value, n).items():
        assert np.array_equal(got[k], v), k


def _files(folder):
    return sorted(os.listdir(folder))


def test_shards_hold_at_most_the_size_asked(tmp_path):
    names = save_sharded(_tensors(1.0), tmp_path /
                         "model.safetensors.index.json", max_shard_size=MIB)
    assert len(names) == 3
    for i, name in enumerate(names):
        m = SHARD.fullmatch(name)
        assert m and int(m.group(1)) == i + 1 and int(m.group(2)) == 3
        assert os.path.getsize(tmp_path / name) <= MIB + 4096
    index = _index(tmp_path)
    assert index["metadata"]["total_size"] == 6 * 512 * 1024
    assert sorted(set(index["weight_map"].values())) == sorted(names)
    assert _files(tmp_path) == sorted(names +
                                      ["model.safetensors.index.json"])
    _assert_loads(tmp_path, 1.0)


def test_a_tensor_larger_than_a_shard_gets_one_alone(tmp_path):
    t = {"big": np.zeros(3 * MIB, dtype=np.uint8),
         "small": np.ones(16, dtype=np.uint8)}
    names = save_sharded(t, tmp_path / "model.safetensors.index.json",
                         max_shard_size="1MiB")
    wm = _index(tmp_path)["weight_map"]
    assert len(names) == 2 and wm["big"] != wm["small"]


def test_the_real_safetensors_reads_every_shard(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    save_sharded(_tensors(2.0), tmp_path / "model.safetensors.index.json",
                 max_shard_size=MIB, metadata={"format": "np"})
    wm = _index(tmp_path)["weight_map"]
    want = _tensors(2.0)
    for name, shard in wm.items():
        got = st.load_file(str(tmp_path / shard))
        assert np.array_equal(got[name], want[name])


def test_resave_never_writes_a_shard_in_place(tmp_path):
    index = tmp_path / "model.safetensors.index.json"
    old = save_sharded(_tensors(1.0), index, max_shard_size=MIB)
    # A second name for each old shard: a save that wrote into one would
    # change what its link reads.
    for name in old:
        os.link(tmp_path / name, tmp_path / ("link-" + name))
    before = {n: (tmp_path / n).read_bytes() for n in old}
    new = save_sharded(_tensors(5.0), index, max_shard_size=MIB)
    assert not set(old) & set(new)
    for n in old:
        assert (tmp_path / ("link-" + n)).read_bytes() == before[n]
        assert not (tmp_path / n).exists()      # deleted once replaced
    _assert_loads(tmp_path, 5.0)


def test_resave_deletes_leftovers_and_only_them(tmp_path):
    index = tmp_path / "model.safetensors.index.json"
    # An old checkpoint with Hugging Face's own shard names...
    save_sharded(_tensors(1.0), index, max_shard_size=MIB)
    wm = _index(tmp_path)["weight_map"]
    for old in sorted(set(wm.values())):
        m = SHARD.fullmatch(old)
        hf = "model-%s-of-%s.safetensors" % (m.group(1), m.group(2))
        os.rename(tmp_path / old, tmp_path / hf)
        wm = {k: (hf if v == old else v) for k, v in wm.items()}
    index.write_text(json.dumps({"weight_map": wm}))
    # ...a shard a cut save left, and files that are not ours.
    (tmp_path / "model-00001-of-00009-0badc0de.safetensors").write_bytes(b"x")
    keep = ["other-00001-of-00002.safetensors", "notes.txt",
            "model.safetensors"]
    for k in keep:
        (tmp_path / k).write_bytes(b"keep")
    names = save_sharded(_tensors(3.0), index, max_shard_size=MIB)
    assert _files(tmp_path) == sorted(
        names + keep + ["model.safetensors.index.json"])
    _assert_loads(tmp_path, 3.0)


def test_an_index_naming_files_elsewhere_deletes_nothing_there(tmp_path):
    folder = tmp_path / "ck"
    folder.mkdir()
    (tmp_path / "precious.safetensors").write_bytes(b"keep")
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"a": "../precious.safetensors"}}))
    save_sharded(_tensors(1.0), folder / "model.safetensors.index.json")
    assert (tmp_path / "precious.safetensors").read_bytes() == b"keep"


def test_failed_save_leaves_the_old_checkpoint_and_no_new_shard(
        tmp_path, monkeypatch):
    index = tmp_path / "model.safetensors.index.json"
    save_sharded(_tensors(1.0), index, max_shard_size=MIB)
    before = {n: (tmp_path / n).read_bytes() for n in _files(tmp_path)}
    real, calls = _sharded._write_new, []

    def second_fails(path, parts):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(path, parts)

    monkeypatch.setattr(_sharded, "_write_new", second_fails)
    with pytest.raises(OSError):
        save_sharded(_tensors(2.0), index, max_shard_size=MIB)
    assert {n: (tmp_path / n).read_bytes() for n in _files(tmp_path)} == \
        before
    _assert_loads(tmp_path, 1.0)


def _save_many(folder, value, rounds):
    for r in range(rounds):
        save_sharded(_tensors(value + r, 4), os.path.join(
            folder, "model.safetensors.index.json"), max_shard_size=MIB)


def test_concurrent_saves_never_leave_an_index_without_its_shards(tmp_path):
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_save_many, args=(str(tmp_path), v, 8))
             for v in (10.0, 100.0)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    names = set(_index(tmp_path)["weight_map"].values())
    assert _files(tmp_path) == sorted(names |
                                      {"model.safetensors.index.json"})
    load_file(str(tmp_path / "model.safetensors.index.json"))


@pytest.mark.parametrize("size, want", [
    (1000, 1000), ("5GB", 5 * 10**9), ("512MiB", 512 << 20),
    ("2kb", 2000), ("7", 7)])
def test_max_shard_size_reads_as_huggingface_hub_does(size, want):
    assert _sharded.parse_size(size) == want


@pytest.mark.parametrize("size", [0, -1, "", "5 parsecs", "1.5GB", True])
def test_max_shard_size_refuses_nonsense(size):
    with pytest.raises(ValueError):
        _sharded.parse_size(size)


@pytest.mark.parametrize("name", ["model.safetensors", "model.json",
                                  ".safetensors.index.json"])
def test_index_must_be_named_as_one(tmp_path, name):
    with pytest.raises(ValueError, match="PREFIX.safetensors.index.json"):
        save_sharded(_tensors(1.0), tmp_path / name)
    assert _files(tmp_path) == []


@pytest.mark.torch
def test_torch_tensors_too(tmp_path):
    torch = pytest.importorskip("torch")
    from pinmem.safetensors.torch import load_file as tload
    from pinmem.safetensors.torch import save_sharded as tsave
    t = {"w": torch.arange(300000, dtype=torch.float32),
         "b": torch.ones(7, dtype=torch.float16)}
    tsave(t, tmp_path / "model.safetensors.index.json", max_shard_size=MIB)
    got = tload(str(tmp_path / "model.safetensors.index.json"))
    assert torch.equal(got["w"], t["w"]) and torch.equal(got["b"], t["b"])
