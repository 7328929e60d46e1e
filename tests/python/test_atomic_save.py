# SPDX-License-Identifier: GPL-2.0
"""save_file replaces a file whole: never overwritten where it lies, no
temporary file left behind, the mode of a new file. (tests/powercut shows
the same under power cuts, in a guest.)"""
import os
import stat

import numpy as np
import pytest

from pinmem.safetensors import _atomic
from pinmem.safetensors.numpy import load_file, save_file


def _tensors(value):
    return {"a": np.full((64, 64), value, dtype=np.float32)}


def test_save_file_replaces_not_overwrites(tmp_path):
    path = tmp_path / "m.safetensors"
    save_file(_tensors(1.0), path)
    # A second name for the old file: a save that wrote in place would
    # change what it reads.
    os.link(path, tmp_path / "old-link")
    save_file(_tensors(2.0), path)
    assert load_file(str(path))["a"][0, 0] == 2.0
    assert load_file(str(tmp_path / "old-link"))["a"][0, 0] == 1.0
    assert sorted(os.listdir(tmp_path)) == ["m.safetensors", "old-link"]


def test_failed_save_leaves_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "m.safetensors"
    save_file(_tensors(1.0), path)
    before = path.read_bytes()

    def parts():
        yield b"x" * 4096
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        _atomic.replace_file(path, parts())
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["m.safetensors"]


def test_new_file_mode_follows_umask(tmp_path):
    old = os.umask(0o027)
    try:
        save_file(_tensors(1.0), tmp_path / "m.safetensors")
    finally:
        os.umask(old)
    mode = stat.S_IMODE(os.stat(tmp_path / "m.safetensors").st_mode)
    assert mode == 0o640


def test_save_into_missing_folder_fails_cleanly(tmp_path):
    with pytest.raises(FileNotFoundError):
        save_file(_tensors(1.0), tmp_path / "no" / "m.safetensors")
