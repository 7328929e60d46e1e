# SPDX-License-Identifier: MIT
"""Weights one file at a time, as serving engines read a checkpoint: a
generator of (name, tensor) over a list of safetensors files, each file
loaded only when the generator reaches it, its tensors handed on in
header order and not kept here, so a consumer that copies each one to a
GPU and drops it lets the file's region go before the next file is
loaded. The loader (a framework's load_file) decides what a tensor is
and which errors a file raises."""
import errno
import os
import sys

from .shared import shards

INDEX_SUFFIX = ".safetensors.index.json"
LABEL = "Loading safetensors checkpoint shards"


def _folder(path):
    """A folder's checkpoint: the shards of its one index, else each of
    its *.safetensors files in the order of their names."""
    names = sorted(os.listdir(path))
    indexes = [n for n in names if n.endswith(INDEX_SUFFIX)]
    if len(indexes) > 1:
        raise ValueError("%s: %d indexes (%s): name the one to load" %
                         (path, len(indexes), ", ".join(indexes)))
    if indexes:
        return shards(os.path.join(path, indexes[0]))
    files = [os.path.join(path, n) for n in names
             if n.endswith(".safetensors")]
    if not files:
        raise FileNotFoundError(errno.ENOENT, "No *.safetensors file in "
                                "the folder", path)
    return files


def paths_of(files):
    """The files to load, in order: a folder's (_folder), an index's
    shards (in the order of their names, as load_file reads an index),
    a single file, or each path of a list as it is."""
    if isinstance(files, (str, bytes, os.PathLike)):
        path = os.fsdecode(files)
        if os.path.isdir(path):
            return _folder(path)
        if path.endswith(".index.json"):
            return shards(path)
        return [path]
    return [os.fsdecode(f) for f in files]


class Progress:
    """A one-line counter of files on stderr, rewritten in place ("\\r");
    on when forced (progress=True) or, with progress=None, when stderr is
    a terminal."""

    def __init__(self, total, progress):
        self.total = total
        self.shown = False
        self.stream = sys.stderr if self._on(progress) else None

    @staticmethod
    def _on(progress):
        if progress is not None:
            return bool(progress)
        try:
            return sys.stderr is not None and sys.stderr.isatty()
        except (AttributeError, ValueError):
            return False

    def show(self, done):
        if self.stream is None:
            return
        self.stream.write("\r%s: %d/%d" % (LABEL, done, self.total))
        self.stream.flush()
        self.shown = True

    def close(self):
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = False


def iterate(load, files, progress):
    """(name, tensor) of each file in turn; load(path) -> name -> tensor.
    The dict is emptied as it goes: the consumer holds the only
    reference to each tensor it has been given."""
    paths = paths_of(files)
    bar = Progress(len(paths), progress)
    try:
        for done, path in enumerate(paths):
            bar.show(done)
            loaded = load(path)
            for name in list(loaded):
                yield name, loaded.pop(name)
        bar.show(len(paths))
    finally:
        bar.close()
