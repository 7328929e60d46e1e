# SPDX-License-Identifier: MIT
"""torch.distributed.checkpoint storage through libpin's I/O.

PinStorageWriter and PinStorageReader are torch's FileSystemWriter and
FileSystemReader with the data path replaced; the files are torch's:
one __RANK_N.distcp per rank (torch.save records, one per tensor, after
the rank's byte items) and a pickled .metadata, so torch's reader loads
what the writer wrote and the reader loads what torch's writer wrote.

Writing: each tensor's payload goes to disk from the tensor's own memory
(a staged, pinned copy, say) with pin_file_write, O_DIRECT where the
filesystem allows it; the framing torch.save puts around it is copied.
Reading: the bytes of a file that the plan needs are read with
pin_file_read into pinned memory (a pinmem region), the tensors are made
over them in place, and copied once, into the caller's tensors.

Commit: a save writes every file under a hidden temporary name, syncs
it, renames it to its name and syncs the folder, on every rank, before
the coordinator writes .metadata the same way (temporary name, sync,
rename, folder sync). After a crash at any point the folder holds the
previous checkpoint whole or the new one whole. A folder that already
holds a checkpoint is not changed in place: the new files get names of
their own (__RANK_N-TAG.distcp, TAG new for each save) which only the new
.metadata names; once it is committed, the .distcp files it does not
name (the previous checkpoint's, a crashed save's) are removed.
"""
import dataclasses
import io
import os
import pickle
import re
import uuid
from dataclasses import dataclass

import numpy as np
import torch
from torch.distributed.checkpoint import filesystem as _fs
from torch.distributed.checkpoint.planner import LoadItemType, WriteItemType
from torch.distributed.checkpoint.storage import WriteResult
from torch.futures import Future

from .. import core
from .. import _lib
from ..safetensors._atomic import replace_file, sync_folder
from . import _record, _stream

_DATA_FILE = re.compile(r"__\d+_\d+(-[0-9a-f]+)?\.distcp\Z")
_TMP_MARK = ".tmp-pin-"
_WRITE_QUEUE_DEPTH = 8
_WRITE_REQUEST_SIZE = 1 << 20


@dataclass
class _TaggedPrefix(_fs._StoragePrefix):
    """torch's per-rank file prefix, with the save's tag ("" in a folder
    that holds no checkpoint yet: torch's own names)."""
    tag: str = ""


def _need_io():
    for name in ("pin_file_write", "pin_file_read", "pin_file_span"):
        if not _lib.has(name):
            raise core.PinError(38, "this libpin (%s) has no %s: checkpoint "
                                "I/O is not built in" %
                                (_lib.lib.pinmem_path, name))


class PinStorageWriter(_fs.FileSystemWriter):
    """torch's FileSystemWriter (one file per rank, torch.save records),
    writing with libpin's io_uring writer and committing atomically (see
    the module's docstring). queue_depth, request_size, direct: libpin's
    I/O options (direct=False: never O_DIRECT); by default 8 requests of
    1 MiB: torch's records put a tensor's bytes at file offsets its
    memory is not aligned with, so the writes go through libpin's bounce
    buffers (queue_depth x request_size, made afresh by each write), and
    libpin's load defaults (16 x 4 MiB) cost twice the time in first
    touches of them. Files are always synced;
    with thread_count > 1 a rank's items are split into that many files
    as torch splits them, written one after the other."""

    def __init__(self, path, thread_count=1, overwrite=True,
                 queue_depth=None, request_size=None, direct=True):
        _need_io()
        super().__init__(path, single_file_per_rank=True, sync_files=True,
                         thread_count=thread_count, overwrite=overwrite)
        self.io = _stream.IoOpts(queue_depth or _WRITE_QUEUE_DEPTH,
                                 request_size or _WRITE_REQUEST_SIZE, direct)

    def _tag_for(self, metadata_name):
        """A new tag when the folder holds a committed checkpoint."""
        if os.path.exists(os.path.join(self.path, metadata_name)):
            return uuid.uuid4().hex[:12]
        return ""

    def prepare_local_plan(self, plan):
        plan = super().prepare_local_plan(plan)
        if plan.storage_data is not None:       # no collectives: rank's own
            plan = dataclasses.replace(plan, storage_data=_TaggedPrefix(
                plan.storage_data.prefix,
                self._tag_for("__%d%s" % (self.rank, _fs._metadata_fn))))
        return plan

    def prepare_global_plan(self, plans):
        tag = self._tag_for(_fs._metadata_fn)
        return [p if p.storage_data is not None else
                dataclasses.replace(p, storage_data=_TaggedPrefix(
                    "__%d_" % i, tag)) for i, p in enumerate(plans)]

    def write_data(self, plan, planner):
        prefix = plan.storage_data
        tag = "-" + prefix.tag if getattr(prefix, "tag", "") else ""
        results = []
        buckets = _fs._split_by_size_and_type(self.thread_count, plan.items)
        for n, items in enumerate(buckets):
            name = "%s%d%s%s" % (prefix.prefix, n, tag, _fs.DEFAULT_SUFFIX)
            results += self._write_file(name, items, planner)
        sync_folder(self.path)
        fut = Future()
        fut.set_result(results)
        return fut

    def _write_file(self, name, items, planner):
        """torch's _write_files_from_queue for one file: byte items first,
        then tensors in the plan's order, each as torch.save writes it."""
        out = _stream._Parts()
        results = []
        for item in items:
            if item.type == WriteItemType.BYTE_IO:
                results.append(self._record(out, name, item,
                                            planner.resolve_data(item)))
        loader = _fs._SerialCpuLoader(planner.resolve_data)
        for item in items:
            if item.type != WriteItemType.BYTE_IO:
                loader.add(_fs._item_size(item), item)
        for tensor, item in loader.values():
            out.keep(tensor)
            results.append(self._record(out, name, item, tensor))
        final = os.path.join(self.path, name)
        tmp = os.path.join(self.path, ".%s%s%s" % (
            name, _TMP_MARK, uuid.uuid4().hex[:8]))
        try:
            _stream.write_parts(tmp, out.parts, self.io)
            os.rename(tmp, final)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return results

    @staticmethod
    def _record(out, name, item, data):
        offset = out.tell()
        if item.type == WriteItemType.BYTE_IO:
            out.write(data.getbuffer())
        else:
            torch.save(data, out)
        length = out.tell() - offset
        return WriteResult(index=item.index, size_in_bytes=length,
                           storage_data=_fs._StorageInfo(name, offset,
                                                         length))

    def finish(self, metadata, results):
        """torch's finish, committed with one rename (no moment without a
        .metadata), then the files it does not name removed."""
        metadata.version = _fs.CURRENT_DCP_VERSION
        storage = {}
        for wr_list in results:
            storage.update({wr.index: wr.storage_data for wr in wr_list})
        metadata.storage_data = storage
        metadata.storage_meta = self.storage_meta()
        if not self.use_collectives and self.rank is not None:
            md_name, mine = "__%d%s" % (self.rank, _fs._metadata_fn), \
                "__%d_" % self.rank
        else:
            md_name, mine = _fs._metadata_fn, "__"
        replace_file(os.path.join(self.path, md_name),
                     [pickle.dumps(metadata)])
        # A folder this save made is durable only once its parent is.
        sync_folder(os.path.dirname(os.path.abspath(self.path)))
        self._remove_unnamed(storage, mine)

    def _remove_unnamed(self, storage, mine):
        named = {s.relative_path for s in storage.values()}
        for entry in os.listdir(self.path):
            if entry.startswith(mine) and _DATA_FILE.match(entry) and \
                    entry not in named:
                os.unlink(os.path.join(self.path, entry))


class PinStorageReader(_fs.FileSystemReader):
    """torch's FileSystemReader reading through pinned memory: the span
    of each file the plan needs is read with libpin's io_uring reader
    (O_DIRECT where allowed) into a pinmem region of dev (default: one
    opened on first use), the tensors made over it in place and copied
    into the planner's. Errors name the file and the item."""

    def __init__(self, path, dev=None, queue_depth=None, request_size=None,
                 direct=True):
        _need_io()
        super().__init__(path)
        self.dev = dev
        self.io = _stream.IoOpts(queue_depth, request_size, direct)

    def read_data(self, plan, planner):
        per_file = {}
        for item in plan.items:
            md = self.storage_data[item.storage_index]
            per_file.setdefault(md.relative_path, []).append(item)
        for relative_path, reqs in per_file.items():
            self._read_file(os.path.join(self.path, relative_path), reqs,
                            planner)
        fut = Future()
        fut.set_result(None)
        return fut

    def _span(self, path, reqs):
        """[lo, hi) of path that reqs need, checked against its size."""
        infos = [self.storage_data[r.storage_index] for r in reqs]
        lo = min(i.offset for i in infos)
        far = max(infos, key=lambda i: i.offset + i.length)
        hi = far.offset + far.length
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            raise FileNotFoundError(
                "%s: missing; .metadata puts %d items in it (%s first)" % (
                    path, len(reqs), reqs[0].storage_index.fqn)) from None
        if hi > size:
            raise ValueError(
                "%s: %d bytes, but .metadata puts %s at [%d, %d): the file "
                "is truncated or .metadata is not its checkpoint's" % (
                    path, size, _fqn_of(self.storage_data, far),
                    far.offset, hi))
        return lo, hi

    def _read_file(self, path, reqs, planner):
        if any(self.storage_data[r.storage_index].transform_descriptors
               for r in reqs):
            raise ValueError("%s: stream transforms (extensions) are not "
                             "supported by PinStorageReader" % path)
        lo, hi = self._span(path, reqs)
        if self.dev is None:
            self.dev = core.open()
        span = int(_lib.lib.pin_file_span(lo, hi - lo))
        region = self.dev.alloc(max(span, 1))
        try:
            arr = region.view(np.uint8, (max(span, 1),), writable=True)
        finally:
            region.close()      # the view holds the memory
        base = self.io.get(arr.__array_interface__["data"][0], arr.nbytes,
                           path, lo, hi - lo) - lo
        for req in reqs:
            self._load_item(path, arr, base, req, planner)

    def _load_item(self, path, arr, base, req, planner):
        md = self.storage_data[req.storage_index]
        start = base + md.offset
        if req.type == LoadItemType.BYTE_IO:
            planner.load_bytes(req, io.BytesIO(
                arr[start:start + md.length].tobytes()))
            return
        try:
            tensor = _record.load_tensor(arr, start, md.length)
        except Exception as e:
            raise ValueError("%s: %s at [%d, %d) is not a torch.save record "
                             "of a tensor: %s" % (
                                 path, req.storage_index.fqn, md.offset,
                                 md.offset + md.length, e)) from e
        tensor = _fs.narrow_tensor_by_index(tensor, req.storage_offsets,
                                            req.lengths)
        target = planner.resolve_tensor(req).detach()
        if target.size() != tensor.size():
            raise ValueError("%s: %s: the stored chunk gives %s, the "
                             "checkpoint's plan wants %s" % (
                                 path, req.storage_index.fqn,
                                 tuple(tensor.size()), tuple(target.size())))
        target.copy_(tensor)
        planner.commit_tensor(req, target)


def _fqn_of(storage_data, info):
    for index, i in storage_data.items():
        if i is info:
            return index.fqn
    return "an item"
