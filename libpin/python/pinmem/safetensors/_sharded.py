# SPDX-License-Identifier: MIT
"""Saving a sharded checkpoint (an index and its shards) so that a crash
leaves the old checkpoint or the new one, whole.

Replacing each file atomically is not enough: a cut between two renames
leaves shards of two checkpoints under one index. So a save never touches
a file the current index names. Its shards get names of their own
(PREFIX-00001-of-00004-TAG.safetensors, TAG new for every save), each
written and synced; the folder is synced; then the index is replaced
atomically (_atomic.replace_file), which is the one step that switches
the checkpoint. Only then are the shards the new index does not name
deleted: the old index's, and any of this naming a cut save left behind.
The index is the one Hugging Face's sharded checkpoints use
({"metadata": {"total_size": ...}, "weight_map": {tensor: shard}}), and
their loaders read shards by the names it holds.

Saves into one folder are serialized by an exclusive flock on the folder,
so a save never deletes the shards another save is about to name.
"""
import fcntl
import json
import os
import re

from . import _atomic, _format

INDEX_SUFFIX = ".safetensors.index.json"
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}


def parse_size(size):
    """Bytes from an int or a string such as "5GB" or "512MiB" (as
    huggingface_hub reads max_shard_size: GB = 10**9, GiB = 2**30)."""
    if isinstance(size, int) and not isinstance(size, bool):
        n = size
    else:
        m = re.fullmatch(r"\s*(\d+)\s*([KMG]i?B|B)?\s*", str(size), re.I)
        if not m:
            raise ValueError("max_shard_size %r: a number of bytes, or "
                             "one with KB/MB/GB/KiB/MiB/GiB" % (size,))
        n = int(m.group(1)) * _UNITS[(m.group(2) or "").upper()]
    if n <= 0:
        raise ValueError("max_shard_size must be positive, not %r" % (size,))
    return n


def split(entries, max_bytes):
    """entries in shards of at most max_bytes of data each (a larger tensor
    alone in its own), in the order given, as huggingface_hub splits."""
    shards, cur, used = [], [], 0
    for e in entries:
        n = memoryview(e[3]).nbytes
        if cur and used + n > max_bytes:
            shards.append(cur)
            cur, used = [], 0
        cur.append(e)
        used += n
    if cur or not shards:
        shards.append(cur)
    return shards


def _prefix(index_filename):
    base = os.path.basename(index_filename)
    if not base.endswith(INDEX_SUFFIX) or base == INDEX_SUFFIX:
        raise ValueError("%s: a sharded checkpoint's index is named "
                         "PREFIX%s" % (index_filename, INDEX_SUFFIX))
    return base[:-len(INDEX_SUFFIX)]


def _shard_pattern(prefix):
    return re.compile(re.escape(prefix) +
                      r"-\d{5}-of-\d{5}(-[0-9a-f]{8})?\.safetensors")


def _named_shards(index_filename):
    """The plain file names the index names (none when it is missing or
    unreadable: then nothing of it is deleted)."""
    try:
        with open(index_filename, "rb") as f:
            wm = json.load(f).get("weight_map")
    except (OSError, ValueError, AttributeError):
        return set()
    if not isinstance(wm, dict):
        return set()
    return {v for v in wm.values() if isinstance(v, str) and v and
            os.path.basename(v) == v and v not in (".", "..")}


def _write_new(path, parts):
    """parts as the new file path, synced; False if path exists."""
    try:
        _atomic.write_new(path, parts)
    except FileExistsError:
        return False
    return True


def _unlink_all(folder, names):
    for name in names:
        os.unlink(os.path.join(folder, name))


def _write_shards(folder, prefix, shards, metadata):
    """The shards written under names no file has; their names."""
    while True:
        tag = os.urandom(4).hex()
        names = ["%s-%05d-of-%05d-%s.safetensors" % (
            prefix, i + 1, len(shards), tag) for i in range(len(shards))]
        done = []
        try:
            for name, shard in zip(names, shards):
                if not _write_new(os.path.join(folder, name),
                                  _format.serialize(shard, metadata)):
                    break       # taken: start again under another tag
                done.append(name)
        except BaseException:
            _unlink_all(folder, done)
            raise
        if len(done) == len(names):
            return names
        _unlink_all(folder, done)


def save(entries, index_filename, metadata, max_shard_size):
    """Write entries ((name, file dtype, shape, bytes) each) as a sharded
    checkpoint whose index is index_filename; returns the shards' names."""
    index_filename = os.fspath(index_filename)
    prefix = _prefix(index_filename)
    shards = split(entries, parse_size(max_shard_size))
    folder = os.path.dirname(index_filename) or "."
    dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(dfd, fcntl.LOCK_EX)
        old = _named_shards(index_filename)
        names = _write_shards(folder, prefix, shards, metadata)
        os.fsync(dfd)           # the shards' names, before the index's
        index = {"metadata": dict(metadata or {}, total_size=sum(
                     memoryview(e[3]).nbytes for e in entries)),
                 "weight_map": {e[0]: name for name, shard in
                                zip(names, shards) for e in shard}}
        _atomic.replace_file(index_filename,
                             [json.dumps(index, indent=2).encode() + b"\n"])
        _drop_unnamed(folder, prefix, old, set(names))
    finally:
        os.close(dfd)
    return names


def _drop_unnamed(folder, prefix, old, new):
    """Delete the old index's shards and leftovers of this naming."""
    pattern = _shard_pattern(prefix)
    stale = set(old)
    stale.update(n for n in os.listdir(folder) if pattern.fullmatch(n))
    for name in sorted(stale - new):
        try:
            os.unlink(os.path.join(folder, name))
        except FileNotFoundError:
            pass
