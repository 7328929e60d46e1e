# SPDX-License-Identifier: GPL-2.0
"""pinmem.dcp's PinHuggingFaceStorageWriter and PinHuggingFaceStorageReader
against torch's HuggingFaceStorageWriter and HuggingFaceStorageReader, one
process (no_dist): the same files (names, index, tensors and their bytes,
torch's __metadata__), read both ways bit for bit, loadable by the
safetensors package and by transformers, and clear errors for a cut or
missing shard."""
import json
import os
import struct

import pytest


from dcp_torch import require_torch2  # noqa: E402

require_torch2()

import torch  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402
from torch.distributed.checkpoint import (  # noqa: E402
    HuggingFaceStorageReader, HuggingFaceStorageWriter)

from pinmem.dcp import (PinHuggingFaceStorageReader,  # noqa: E402
                        PinHuggingFaceStorageWriter)

pytestmark = [pytest.mark.torch,
              pytest.mark.filterwarnings("ignore::UserWarning")]

# Two shards, each with tensors of more than one dtype.
SHARDS = {"embed.weight": 1, "norm.weight": 1, "layer.w": 2, "layer.b": 2,
          "steps": 2, "mask": 1}


def state():
    """A small model's state dict: bf16, f32, int64 and bool tensors,
    a scalar."""
    g = torch.Generator().manual_seed(11)
    return {
        "embed.weight": torch.randn(64, 24, generator=g).to(torch.bfloat16),
        "norm.weight": torch.randn(24, generator=g),
        "layer.w": torch.randn(24, 48, generator=g),
        "layer.b": torch.randn(48, generator=g).to(torch.bfloat16),
        "steps": torch.randint(-2**40, 2**40, (5,), generator=g),
        "mask": torch.rand(9, generator=g) > 0.5,
    }


def bits_equal(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


def save(writer_type, path, **kw):
    dcp.save(state(), storage_writer=writer_type(
        str(path), fqn_to_index_mapping=SHARDS, **kw), no_dist=True)


def load(reader_type, path):
    out = {k: torch.zeros_like(v) for k, v in state().items()}
    dcp.load(out, storage_reader=reader_type(str(path)), no_dist=True)
    return out


def split(path):
    """(header as JSON, header text without its padding, data section)."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    text = raw[8:8 + n].decode().rstrip(" ")
    return json.loads(text), text, raw[8 + n:]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """The state saved by torch's writer (torch/) and pinmem's (pin/)."""
    top = tmp_path_factory.mktemp("hf")
    save(HuggingFaceStorageWriter, top / "torch")
    save(PinHuggingFaceStorageWriter, top / "pin")
    return top


def test_same_files(saved):
    """Same names, the index byte for byte, each shard's header the same
    JSON with the tensors in the same order (torch's own __metadata__ key
    order varies) and the data sections byte for byte: only the header's
    padding differs (pinmem's data starts 4096-aligned)."""
    names = sorted(os.listdir(saved / "torch"))
    assert names == ["model-00001-of-00002.safetensors",
                     "model-00002-of-00002.safetensors",
                     "model.safetensors.index.json"]
    assert sorted(os.listdir(saved / "pin")) == names
    with open(saved / "torch" / names[2], "rb") as f, \
            open(saved / "pin" / names[2], "rb") as g:
        assert f.read() == g.read()
    for name in names[:2]:
        th, ttext, tdata = split(saved / "torch" / name)
        ph, ptext, pdata = split(saved / "pin" / name)
        assert ph == th
        assert [k for k in ph if k != "__metadata__"] == \
            [k for k in th if k != "__metadata__"]
        assert pdata == tdata
        with open(saved / "pin" / name, "rb") as f:
            assert (8 + struct.unpack("<Q", f.read(8))[0]) % 4096 == 0


@pytest.mark.parametrize("writer", ["torch", "pin"])
@pytest.mark.parametrize("reader", [HuggingFaceStorageReader,
                                    PinHuggingFaceStorageReader])
def test_cross_read(saved, writer, reader):
    """Each reader loads each writer's checkpoint bit for bit."""
    out = load(reader, saved / writer)
    want = state()
    assert sorted(out) == sorted(want)
    for k in want:
        assert bits_equal(out[k], want[k]), k


def test_safetensors_package_loads_pin_shards(saved):
    """safetensors.torch.load_file reads pinmem's shards as they are:
    every tensor of the state, bit for bit, torch's __metadata__ kept."""
    st = pytest.importorskip("safetensors.torch")
    from safetensors import safe_open
    want, seen = state(), set()
    for name in ("model-00001-of-00002.safetensors",
                 "model-00002-of-00002.safetensors"):
        path = str(saved / "pin" / name)
        for k, v in st.load_file(path).items():
            assert SHARDS[k] == int(name[6:11]), k
            assert bits_equal(v, want[k]), k
            seen.add(k)
        with safe_open(path, framework="pt") as f:
            info = json.loads(f.metadata()["DCP_SHARDING_INFO"])
            assert f.metadata()["format"] == "pt"
        assert sorted(info) == sorted(k for k in SHARDS
                                      if SHARDS[k] == int(name[6:11]))
    assert seen == set(want)


def test_pin_reader_loads_into_pinned_memory(saved, monkeypatch):
    """The pinmem reader reads its data through pinmem's loader (the
    safetensors package's safe_open is not used)."""
    import safetensors
    from pinmem.safetensors import _open

    def refuse(*a, **k):
        raise AssertionError("safetensors.safe_open used")
    monkeypatch.setattr(safetensors, "safe_open", refuse)
    loads = []
    real = _open._Image.load

    def counting(self, writable=False):
        loads.append(os.path.basename(self.path))
        return real(self, writable)
    monkeypatch.setattr(_open._Image, "load", counting)
    out = load(PinHuggingFaceStorageReader, saved / "torch")
    assert bits_equal(out["layer.w"], state()["layer.w"])
    assert sorted(set(loads)) == ["model-00001-of-00002.safetensors",
                                  "model-00002-of-00002.safetensors"]


def test_commit_leaves_no_temporary(saved):
    """Shards and index are renamed into place: no temporary is left."""
    assert [n for n in os.listdir(saved / "pin") if n.startswith(".")] == []


def test_byte_items_refused(tmp_path):
    """A non-tensor entry has no place in the layout: refused by name."""
    sd = dict(state(), extra={"step": 3})
    exc = failure(dcp.save, sd, storage_writer=PinHuggingFaceStorageWriter(
        str(tmp_path)), no_dist=True)
    assert isinstance(exc, ValueError)
    assert "extra.step is not a tensor" in str(exc)
    assert not [n for n in os.listdir(tmp_path) if "safetensors" in n]


def failure(call, *args, **kwargs):
    """The exception rank 0 raised in call (dcp.save and dcp.load wrap it
    in a CheckpointException, a BaseException)."""
    from torch.distributed.checkpoint.api import CheckpointException
    with pytest.raises(CheckpointException) as info:
        call(*args, **kwargs)
    (exc, _), = info.value.failures.values()
    return exc


def copy_of(saved, tmp_path, writer):
    out = tmp_path / writer
    out.mkdir()
    for n in os.listdir(saved / writer):
        with open(saved / writer / n, "rb") as f, open(out / n, "wb") as g:
            g.write(f.read())
    return out


@pytest.mark.parametrize("writer", ["torch", "pin"])
@pytest.mark.parametrize("cut", ["data", "header"])
def test_truncated_shard(saved, tmp_path, writer, cut):
    """A shard cut short (in its data, or in its header) is an error
    naming the file, not a load of wrong or missing tensors."""
    folder = copy_of(saved, tmp_path, writer)
    shard = folder / "model-00002-of-00002.safetensors"
    size = os.path.getsize(shard)
    os.truncate(shard, size - 3 if cut == "data" else 100)
    from pinmem.safetensors import SafetensorError
    with pytest.raises(SafetensorError) as info:
        PinHuggingFaceStorageReader(str(folder)).read_metadata()
    assert str(info.value).startswith("%s: not a whole safetensors shard: "
                                      % shard)
    assert str(shard) in str(failure(load, PinHuggingFaceStorageReader,
                                     folder))


@pytest.mark.parametrize("writer", ["torch", "pin"])
def test_missing_shard(saved, tmp_path, writer):
    """A shard the index names that is not there: FileNotFoundError
    naming it (torch's reader would report only the keys it lacks)."""
    folder = copy_of(saved, tmp_path, writer)
    shard = folder / "model-00001-of-00002.safetensors"
    os.unlink(shard)
    with pytest.raises(FileNotFoundError) as info:
        PinHuggingFaceStorageReader(str(folder)).read_metadata()
    assert str(info.value).startswith("%s: missing" % shard)
    assert str(shard) in str(failure(load, PinHuggingFaceStorageReader,
                                     folder))


@pytest.mark.parametrize("damage", ["unlink", "truncate"])
def test_shard_damaged_after_planning(saved, tmp_path, monkeypatch, damage):
    """A shard removed or cut between the metadata and the data reads:
    the data read fails naming it."""
    folder = copy_of(saved, tmp_path, "pin")
    shard = folder / "model-00002-of-00002.safetensors"
    real = PinHuggingFaceStorageReader.read_metadata

    def then_damage(self):
        md = real(self)
        if damage == "unlink":
            os.unlink(shard)
        else:
            os.truncate(shard, os.path.getsize(shard) - 3)
        return md
    monkeypatch.setattr(PinHuggingFaceStorageReader, "read_metadata",
                        then_damage)
    exc = failure(load, PinHuggingFaceStorageReader, folder)
    from pinmem.safetensors import SafetensorError
    assert isinstance(exc, FileNotFoundError if damage == "unlink" else
                      SafetensorError)
    assert str(shard) in str(exc)


def test_consolidation(tmp_path):
    """save_distributed with enable_consolidation, one process: pinmem
    writes the shard (under sharded/), torch's consolidation joins it
    into the same files as from torch's own shard (floats only: torch's
    consolidation refuses integer tensors)."""
    sd = {k: v for k, v in state().items() if v.is_floating_point()}
    for name, writer in (("torch", HuggingFaceStorageWriter),
                         ("pin", PinHuggingFaceStorageWriter)):
        dcp.save(sd, storage_writer=writer(
            str(tmp_path / name), save_distributed=True,
            enable_consolidation=True), no_dist=True)
    shard = "sharded/shard-00001-model-00001-of-00001.safetensors"
    assert split(tmp_path / "pin" / shard)[2] == \
        split(tmp_path / "torch" / shard)[2]
    for name in ("model-00001-of-00001.safetensors",
                 "model.safetensors.index.json"):
        with open(tmp_path / "torch" / name, "rb") as f, \
                open(tmp_path / "pin" / name, "rb") as g:
            assert f.read() == g.read(), name
    out = {k: torch.zeros_like(v) for k, v in sd.items()}
    dcp.load(out, storage_reader=PinHuggingFaceStorageReader(
        str(tmp_path / "pin")), no_dist=True)
    for k in sd:
        assert bits_equal(out[k], sd[k]), k


def test_transformers_loads_pin_shards(tmp_path, monkeypatch):
    """transformers' from_pretrained loads a tiny bf16 Llama saved by
    pinmem's writer in two shards (its config beside them): every
    parameter bit for bit."""
    transformers = pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    torch.manual_seed(5)
    config = transformers.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
        max_position_embeddings=32, tie_word_embeddings=False)
    model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
    sd = {k: v.contiguous() for k, v in model.state_dict().items()}
    mapping = {k: 1 + ("layers.1." in k) for k in sd}
    dcp.save(sd, storage_writer=PinHuggingFaceStorageWriter(
        str(tmp_path), fqn_to_index_mapping=mapping), no_dist=True)
    config.save_pretrained(str(tmp_path))
    loaded = transformers.LlamaForCausalLM.from_pretrained(
        str(tmp_path), dtype=torch.bfloat16).state_dict()
    assert sorted(loaded) == sorted(sd)
    for k in sd:
        assert bits_equal(loaded[k], sd[k]), k
