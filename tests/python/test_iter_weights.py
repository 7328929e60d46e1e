# SPDX-License-Identifier: GPL-2.0
"""pinmem.safetensors.torch.iter_weights, the weights iterator serving
engines call: (name, tensor) of each file in turn, in file order then
header order; each tensor load_file's (pinned, bit for bit what was
saved); a file loaded only when reached, its region let go once the
consumer drops its tensors; a progress line only when forced or on a
terminal; load_file's errors. Files are written by the safetensors
package where this Python has it (the venv), else by pinmem's save_file,
which writes the same bytes."""
import gc
import io
import json
import os
import struct
import warnings

import pytest

from helpers import mapped, mapping_path

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
pytestmark = pytest.mark.torch

import pinmem.torch as pt  # noqa: E402
from pinmem.safetensors import shared  # noqa: E402
from pinmem.safetensors import torch as stt  # noqa: E402

CARRIER = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _save(tensors, path):
    try:
        from safetensors.torch import save_file
    except ImportError:
        save_file = stt.save_file
    save_file(tensors, str(path))
    return str(path)


def _bits(t):
    return t.reshape(-1).view(CARRIER[t.element_size()]).tolist()


def _header_names(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        pairs = json.loads(f.read(n), object_pairs_hook=list)
    return [k for k, _ in pairs if k != "__metadata__"]


def _checkpoint(tmp_path):
    """Two files (tensors of several dtypes) and what each holds."""
    g = torch.Generator().manual_seed(7)
    one = {"layers.0.w": torch.randn(8, 16, generator=g),
           "layers.0.b": torch.randn(16, generator=g).to(torch.bfloat16),
           "embed": torch.randint(-2**40, 2**40, (5, 3), generator=g),
           "norm": torch.randn(3, 7, generator=g).half()}
    two = {"lm_head": torch.randn(4, 4, generator=g),
           "mask": torch.randint(0, 255, (33,), generator=g,
                                 dtype=torch.int64).to(torch.uint8),
           "scale": torch.randint(-128, 127, (2, 2), generator=g,
                                  dtype=torch.int64).to(torch.int8)}
    files = [_save(one, tmp_path / "model-00001-of-00002.safetensors"),
             _save(two, tmp_path / "model-00002-of-00002.safetensors")]
    return files, dict(one, **two)


def test_file_then_header_order_bit_for_bit_pinned(tmp_path):
    files, want = _checkpoint(tmp_path)
    got = list(stt.iter_weights(files, progress=False))
    names = [n for n, _ in got]
    assert names == _header_names(files[0]) + _header_names(files[1])
    assert names == list(stt.load_file(files[0])) + \
        list(stt.load_file(files[1]))
    for name, t in got:
        assert t.dtype == want[name].dtype and t.shape == want[name].shape
        assert _bits(t) == _bits(want[name]), name
        assert pt.is_pinned(t) and pt.pin_state(t).locked, name


def test_same_as_the_safetensors_iterator(tmp_path):
    """What an engine's safetensors iterator gives (safe_open, get_tensor
    per name), name for name and bit for bit."""
    st = pytest.importorskip("safetensors", reason="safetensors is not "
                             "installed")
    files, _ = _checkpoint(tmp_path)
    ref = {}
    for f in files:
        with st.safe_open(f, framework="pt") as sf:
            ref.update((k, sf.get_tensor(k)) for k in sf.keys())
    got = dict(stt.iter_weights(files, progress=False))
    assert sorted(got) == sorted(ref)
    for name, t in got.items():
        assert t.dtype == ref[name].dtype and _bits(t) == _bits(ref[name])


def test_one_path_an_index_and_a_folder(tmp_path):
    files, _ = _checkpoint(tmp_path)
    order = _header_names(files[0]) + _header_names(files[1])
    one = [n for n, _ in stt.iter_weights(files[1], progress=False)]
    assert one == _header_names(files[1])
    # A folder without an index: its *.safetensors files by name.
    folder = [n for n, _ in stt.iter_weights(str(tmp_path), progress=False)]
    assert folder == order
    index = tmp_path / "model.safetensors.index.json"
    wm = {n: os.path.basename(files[1]) for n in _header_names(files[1])}
    wm.update((n, os.path.basename(files[0])) for n in _header_names(files[0]))
    index.write_text(json.dumps({"weight_map": wm}))
    assert [n for n, _ in stt.iter_weights(str(index), progress=False)] \
        == order
    # With an index, a folder is the index's shards: a stray file is not.
    _save({"stray": torch.zeros(2)}, tmp_path / "a-stray.safetensors")
    assert [n for n, _ in stt.iter_weights(tmp_path, progress=False)] \
        == order


def test_a_folder_with_nothing_to_load(tmp_path):
    with pytest.raises(FileNotFoundError, match="No \\*.safetensors file"):
        next(stt.iter_weights(str(tmp_path), progress=False))
    for n in ("a", "b"):
        (tmp_path / ("%s.safetensors.index.json" % n)).write_text("{}")
    with pytest.raises(ValueError, match="2 indexes"):
        next(stt.iter_weights(str(tmp_path), progress=False))


def test_second_file_loaded_only_when_reached(tmp_path):
    """A missing second file raises only once the first is consumed, and
    as load_file raises it."""
    files, _ = _checkpoint(tmp_path)
    gone = str(tmp_path / "gone.safetensors")
    it = stt.iter_weights([files[0], gone], progress=False)
    first = [next(it) for _ in _header_names(files[0])]
    assert [n for n, _ in first] == _header_names(files[0])
    with pytest.raises(FileNotFoundError) as seen:
        next(it)
    with pytest.raises(FileNotFoundError) as direct:
        stt.load_file(gone)
    assert str(seen.value) == str(direct.value)
    assert seen.value.errno == direct.value.errno


def test_bad_file_raises_load_files_error(tmp_path):
    files, _ = _checkpoint(tmp_path)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10" + b"\0" * 7 + b'{"a":nonsense!!}')
    it = stt.iter_weights([files[1], str(bad)], progress=False)
    assert len([next(it) for _ in _header_names(files[1])]) == 3
    with pytest.raises(stt.SafetensorError) as seen:
        next(it)
    with pytest.raises(stt.SafetensorError) as direct:
        stt.load_file(str(bad))
    assert str(seen.value) == str(direct.value)


def test_region_goes_with_the_consumers_tensors(tmp_path):
    """A consumer that copies each tensor and drops it: the first file's
    region is unmapped before the second file is loaded; the iterator
    holds none of its tensors."""
    files, _ = _checkpoint(tmp_path)
    it = stt.iter_weights(files, progress=False)
    name, t = next(it)
    rng = (t.data_ptr(), t.data_ptr() + 1)
    path = mapping_path(rng)
    assert path is not None and mapped(rng, path)
    copies = {name: t.clone()}
    del t
    for _ in _header_names(files[0])[1:]:
        name, t = next(it)
        copies[name] = t.clone()
        del t
    gc.collect()
    assert not mapped(rng, path)
    rest = dict(it)
    assert sorted(copies) + sorted(rest) == \
        sorted(_header_names(files[0])) + sorted(_header_names(files[1]))


def test_shared_without_a_service_falls_back_with_a_warning(tmp_path,
                                                            monkeypatch):
    files, want = _checkpoint(tmp_path)
    monkeypatch.setenv("PIN_CACHE_SOCKET", str(tmp_path / "none.sock"))
    monkeypatch.setattr(shared, "_warned", [])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = list(stt.iter_weights(files, shared=True, progress=False))
    said = [x for x in w if issubclass(x.category, RuntimeWarning) and
            "loading privately" in str(x.message)]
    assert len(said) == 1 and said[0].filename == __file__
    assert [n for n, _ in got] == \
        _header_names(files[0]) + _header_names(files[1])
    for name, t in got:
        assert isinstance(t, pt.ReadOnlyTensor) and pt.is_pinned(t)
        assert _bits(t) == _bits(want[name])


def test_progress_line_when_forced(tmp_path, capsys):
    files, _ = _checkpoint(tmp_path)
    list(stt.iter_weights(files, progress=True))
    err = capsys.readouterr().err
    label = "Loading safetensors checkpoint shards"
    assert err == "".join("\r%s: %d/2" % (label, i) for i in range(3)) + \
        "\n"


def test_progress_off_unless_forced_or_a_terminal(tmp_path, monkeypatch,
                                                  capsys):
    files, _ = _checkpoint(tmp_path)
    list(stt.iter_weights(files))           # captured stderr: no terminal
    list(stt.iter_weights(files, progress=False))
    assert capsys.readouterr().err == ""

    class Tty(io.StringIO):
        def isatty(self):
            return True
    tty = Tty()
    monkeypatch.setattr("sys.stderr", tty)
    list(stt.iter_weights(files))
    assert tty.getvalue().endswith(": 2/2\n")
    tty = Tty()
    monkeypatch.setattr("sys.stderr", tty)
    list(stt.iter_weights(files, progress=False))
    assert tty.getvalue() == ""


def test_progress_line_ends_when_the_consumer_stops(tmp_path, capsys):
    files, _ = _checkpoint(tmp_path)
    it = stt.iter_weights(files, progress=True)
    next(it)
    it.close()
    assert capsys.readouterr().err.endswith(": 0/2\n")
