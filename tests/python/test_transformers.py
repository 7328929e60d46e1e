# SPDX-License-Identifier: GPL-2.0
"""pinmem.transformers.from_pretrained: a Hugging Face model whose every
parameter is a pinmem tensor, judged against transformers' own
from_pretrained on the same folder.

The models are tiny Llama and Qwen2 (the layouts people serve), random
weights, written by save_pretrained as sharded safetensors with their
index; nothing is downloaded (offline, built from a config). The venv
run (52-python-venv) has transformers; Debian's python3 skips, saying so.
"""
import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

for _k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
           "HF_HUB_DISABLE_PROGRESS_BARS"):
    os.environ[_k] = "1"
os.environ["TRANSFORMERS_VERBOSITY"] = "error"

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import pinmem  # noqa: E402
import pinmem.torch as pt  # noqa: E402
import pinmem.transformers as ptf  # noqa: E402
from pinmem.safetensors import shared  # noqa: E402
from pinmem.safetensors.torch import load_file, save_file  # noqa: E402
from helpers import cached_service  # noqa: E402

pytestmark = pytest.mark.torch

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PINCTL = os.path.join(TOP, "build", "bin", "pinctl")
INPUT = [[1, 7, 42, 255, 3, 99, 0, 18]]
SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
             max_position_embeddings=64)


def _save(folder, config_class, model_class, dtype, **extra):
    torch.manual_seed(7)
    config = config_class(**SMALL, **extra)
    model = model_class(config).to(dtype)
    # 100 KB shards: an index and several shards.
    model.save_pretrained(folder, max_shard_size="100KB")
    return model_class


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """Untied Llama in float32."""
    d = str(tmp_path_factory.mktemp("llama"))
    cls = _save(d, transformers.LlamaConfig, transformers.LlamaForCausalLM,
                torch.float32, tie_word_embeddings=False)
    return cls, d


@pytest.fixture(scope="module")
def qwen2(tmp_path_factory):
    """Qwen2 with its output tied to its embedding, in bfloat16."""
    d = str(tmp_path_factory.mktemp("qwen2"))
    cls = _save(d, transformers.Qwen2Config, transformers.Qwen2ForCausalLM,
                torch.bfloat16, tie_word_embeddings=True)
    return cls, d


def _logits(model):
    with torch.no_grad():
        return model(torch.tensor(INPUT)).logits


def _shards(folder):
    with open(os.path.join(folder, ptf.INDEX)) as f:
        return sorted(set(json.load(f)["weight_map"].values()))


@pytest.mark.parametrize("which", ["llama", "qwen2"])
def test_logits_equal_and_every_parameter_pinned(which, request):
    cls, d = request.getfixturevalue(which)
    assert len(_shards(d)) > 1
    plain = cls.from_pretrained(d)
    mine = ptf.from_pretrained(cls, d)
    assert torch.equal(_logits(mine), _logits(plain))
    params = dict(mine.named_parameters())
    assert params.keys() == dict(plain.named_parameters()).keys()
    for name, p in params.items():
        assert pt.is_pinned(p), name
        assert p.dtype == plain.get_parameter(name).dtype, name
        assert not isinstance(p, pt.ReadOnlyTensor), name
    assert not mine.training
    # Private: writable, in place, into the pinned memory.
    w = mine.model.norm.weight
    with torch.no_grad():
        w.mul_(2)
    assert pt.is_pinned(w)
    assert not torch.equal(_logits(mine), _logits(plain))


def test_tied_embedding_is_one_pinned_tensor(qwen2):
    cls, d = qwen2
    with open(os.path.join(d, ptf.INDEX)) as f:
        assert "lm_head.weight" not in json.load(f)["weight_map"]
    mine = ptf.from_pretrained(cls, d)
    assert mine.lm_head.weight is mine.model.embed_tokens.weight
    assert mine.lm_head.weight.dtype == torch.bfloat16
    assert pt.is_pinned(mine.lm_head.weight)
    # The rotary buffer is made as a plain load makes it (not saved).
    plain = cls.from_pretrained(d)
    assert torch.equal(mine.model.rotary_emb.inv_freq,
                       plain.model.rotary_emb.inv_freq)


def test_auto_class_and_single_file(llama, tmp_path):
    cls, d = llama
    one = str(tmp_path / "one")
    cls.from_pretrained(d).save_pretrained(one)
    assert os.listdir(one).count(ptf.SINGLE) == 1
    mine = ptf.from_pretrained(transformers.AutoModelForCausalLM, one)
    assert type(mine) is cls
    assert torch.equal(_logits(mine), _logits(cls.from_pretrained(d)))
    assert all(pt.is_pinned(p) for p in mine.parameters())


def test_a_converting_dtype_is_refused(llama):
    cls, d = llama
    with pytest.raises(ValueError, match="not in the loaded checkpoint's "
                       "pinned memory.*model.embed_tokens.weight"):
        ptf.from_pretrained(cls, d, dtype=torch.float64)


def _copy(src, dst):
    os.makedirs(dst)
    for n in os.listdir(src):
        with open(os.path.join(src, n), "rb") as f, \
                open(os.path.join(dst, n), "wb") as g:
            g.write(f.read())
    return dst


def _rewrite(folder, change):
    """change(name -> tensor of model.norm.weight's shard, weight_map,
    that shard) in place."""
    index = os.path.join(folder, ptf.INDEX)
    with open(index) as f:
        data = json.load(f)
    shard = data["weight_map"]["model.norm.weight"]
    path = os.path.join(folder, shard)
    sd = {k: v.clone() for k, v in load_file(path).items()}
    change(sd, data["weight_map"], shard)
    save_file(sd, path, metadata={"format": "pt"})
    with open(index, "w") as f:
        json.dump(data, f)


def test_checkpoint_errors_name_what_is_wrong(llama, tmp_path):
    cls, d = llama
    with pytest.raises(FileNotFoundError, match="model.safetensors.index"
                       ".json or model.safetensors in " + str(tmp_path)):
        ptf.from_pretrained(cls, str(tmp_path))
    gone = _copy(d, str(tmp_path / "gone"))
    os.unlink(os.path.join(gone, _shards(gone)[1]))
    with pytest.raises(FileNotFoundError, match=_shards(gone)[1]):
        ptf.from_pretrained(cls, gone)

    def extra(sd, wm, shard):
        sd["model.extra.weight"] = torch.zeros(4)
        wm["model.extra.weight"] = shard
    more = _copy(d, str(tmp_path / "more"))
    _rewrite(more, extra)
    with pytest.raises(KeyError, match="unexpected keys: model.extra.weight"):
        ptf.from_pretrained(cls, more)

    def drop(sd, wm, shard):
        del sd["model.norm.weight"], wm["model.norm.weight"]
    less = _copy(d, str(tmp_path / "less"))
    _rewrite(less, drop)
    with pytest.raises(KeyError, match="missing keys: model.norm.weight"):
        ptf.from_pretrained(cls, less)
    # Let through, the initialized parameter is still not a pinned one.
    with pytest.raises(ValueError, match="pinned memory.*model.norm.weight"):
        ptf.from_pretrained(cls, less, strict=False)


CHILD = textwrap.dedent("""
    import sys, torch, transformers
    import pinmem.transformers as ptf, pinmem.torch as pt
    m = ptf.from_pretrained(transformers.%s, sys.argv[1], shared=True)
    assert all(pt.is_pinned(p) for p in m.parameters())
    with torch.no_grad():
        torch.save(m(torch.tensor(%r)).logits, sys.argv[2])
    print("ready", flush=True)
    sys.stdin.read()
""")


def _cache(sock):
    out = subprocess.run([PINCTL, "--json", "cache", sock], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def test_shared_two_processes_one_copy_same_logits(llama, tmp_path,
                                                   monkeypatch):
    """Two processes load shared=True while both live: the service holds
    one entry per shard, loaded once, and both compute the same logits as
    a plain load."""
    cls, d = llama
    with cached_service(tmp_path) as sock:
        if sock is None:
            pytest.skip("pinmem-cached is not built")
        monkeypatch.setenv("PIN_CACHE_SOCKET", sock)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [os.path.join(TOP, "libpin", "python")] + sys.path))
        out = str(tmp_path / "child.pt")
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD % (cls.__name__, INPUT), d, out],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
            text=True)
        try:
            mine = ptf.from_pretrained(cls, d, shared=True)
            assert child.stdout.readline() == "ready\n"
            cache = _cache(sock)
            n = len(_shards(d))
            assert cache["entry_count"] == n and cache["loads"] == n
            assert sorted(os.path.basename(e["file"])
                          for e in cache["entries"]) == _shards(d)
        finally:
            child.stdin.close()
            assert child.wait(120) == 0
    for p in mine.parameters():
        assert isinstance(p, pt.ReadOnlyTensor) and pt.is_pinned(p)
    expect = _logits(cls.from_pretrained(d))
    assert torch.equal(_logits(mine), expect)
    assert torch.equal(torch.load(out), expect)
    with pytest.raises(pinmem.ReadOnlyError):
        with torch.no_grad():
            mine.model.norm.weight.add_(1)


def test_shared_without_a_service_is_private_and_read_only(qwen2, tmp_path,
                                                           monkeypatch):
    cls, d = qwen2
    monkeypatch.setenv("PIN_CACHE_SOCKET", str(tmp_path / "none"))
    monkeypatch.setattr(shared, "_warned", [])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        mine = ptf.from_pretrained(cls, d, shared=True)
    assert any("no service at" in str(x.message) for x in w)
    for p in mine.parameters():
        assert isinstance(p, pt.ReadOnlyTensor) and pt.is_pinned(p)
    plain = cls.from_pretrained(d)
    assert torch.equal(_logits(mine), _logits(plain))
    # torch's load_state_dict gathers each copy_'s error in its own.
    with pytest.raises(RuntimeError, match="copy_ would write a tensor "
                       "over a read-only view"):
        mine.load_state_dict(plain.state_dict())
    w = mine.model.norm.weight
    w.grad = torch.ones_like(w)
    with pytest.raises(pinmem.ReadOnlyError):
        torch.optim.SGD([w], lr=0.1).step()
    assert torch.equal(w, plain.model.norm.weight)
