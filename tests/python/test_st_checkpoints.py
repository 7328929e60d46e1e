# SPDX-License-Identifier: GPL-2.0
"""Real checkpoints that other programs wrote, read by the real
safetensors library and by every pinmem reader alike (st_judge.py): the
weights shipped in the wheels of tests/python-data.lock (kept, not
installed, in the venv's data/ folder by tests/python-venv; read out of
the wheel here), and the safetensors library's own reference files among
the shared fixtures, read in place, when they are there.
"""
import glob
import os
import sys
import zipfile

import pytest

st = pytest.importorskip("safetensors", reason="safetensors is not "
                         "installed (the venv of tests/python-venv has it)")
from st_judge import PIN_READERS, real_read  # noqa: E402

DATA = os.environ.get("PINMEM_PY_DATA") or os.path.join(sys.prefix, "data")
# wheel -> (its .safetensors members, what its checkpoints hold)
WHEELS = {
    "chess_cv-0.7.2-py3-none-any.whl": (
        ["chess_cv/weights/arrows.safetensors",
         "chess_cv/weights/pieces.safetensors",
         "chess_cv/weights/snap.safetensors"],
        "MLX's writer: F32, unordered offsets, \"__metadata__\": null"),
    "fracast-0.1.0-py3-none-any.whl": (
        ["fracast/weights/model.int8.safetensors",
         "fracast/weights/model.safetensors"],
        "F32 and I8, five metadata keys"),
}
FIXTURES = os.environ.get("PINMEM_FIXTURES") or os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "shared", "fixtures",
    "safetensors-reference")


def agree(blob, path):
    """The real library's reading of one file, after checking that every
    pinmem reader gives the same."""
    ref = real_read(blob, path)
    assert ref[0] == "ok", ref
    for name, read in PIN_READERS.items():
        assert read(blob, path) == ref, "pinmem's %s reader differs on %s" \
            % (name, path)
    return ref


@pytest.mark.parametrize("wheel", sorted(WHEELS))
def test_packaged_checkpoints_read_alike(wheel, tmp_path):
    path = os.path.join(DATA, wheel)
    if not os.path.exists(path):
        pytest.skip("%s is not installed (tests/python-venv downloads it "
                    "into %s)" % (wheel, DATA))
    members = WHEELS[wheel][0]
    with zipfile.ZipFile(path) as z:
        assert sorted(n for n in z.namelist()
                      if n.endswith(".safetensors")) == members
        for member in members:
            blob = z.read(member)
            out = str(tmp_path / os.path.basename(member))
            with open(out, "wb") as f:
                f.write(blob)
            ref = agree(blob, out)
            assert ref[1], "%s holds no tensors" % member


def test_mlx_null_metadata_is_no_metadata():
    """chess-cv's files say "__metadata__": null; both read no metadata."""
    path = os.path.join(DATA, "chess_cv-0.7.2-py3-none-any.whl")
    if not os.path.exists(path):
        pytest.skip("chess-cv is not installed (tests/python-venv)")
    with zipfile.ZipFile(path) as z:
        blob = z.read(WHEELS[os.path.basename(path)][0][0])
    assert b'"__metadata__":null' in blob[:200]
    from pinmem.safetensors import _format
    assert _format.parse_bytes(blob)[0] is None


def test_reference_fixtures_read_alike():
    files = sorted(glob.glob(os.path.join(FIXTURES, "*.safetensors")))
    if not files:
        pytest.skip("no safetensors reference fixtures at %s" % FIXTURES)
    for path in files:
        with open(path, "rb") as f:
            blob = f.read()
        ref = agree(blob, path)
        assert ref[2] == {"test": "a"}
