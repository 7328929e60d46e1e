# SPDX-License-Identifier: MIT
"""torch.distributed.checkpoint's Hugging Face layout through libpin.

PinHuggingFaceStorageWriter and PinHuggingFaceStorageReader are torch's
HuggingFaceStorageWriter and HuggingFaceStorageReader with the data path
replaced; torch plans and names the files: model-0000I-of-0000N
.safetensors shards (shard-0000R-model-... with save_distributed) and a
model.safetensors.index.json, so torch's reader, the safetensors package
and transformers load what the writer wrote, and the reader loads what
torch's writer wrote.

Writing: each shard is written by libpin's safetensors writer
(pin_st_save): the tensors' bytes from their own memory, O_DIRECT where
the filesystem allows it, to a temporary name, synced and renamed into
place; the index is replaced the same way, after the shards. The shards
hold what torch's hold (names, dtypes, shapes, bytes, torch's
__metadata__ with the DCP sharding offsets, the data section byte for
byte); the header differs in its padding (libpin starts the data on a
4096-byte boundary) and its __metadata__ key order (libpin's is sorted,
torch's varies from file to file).
Reading: each shard the plan needs is loaded whole with pinmem's
safetensors loader into pinned memory and the planner's tensors copied
from it. The headers are read by pinmem too: errors name the file.
"""
import json
import os

import torch
from torch.distributed.checkpoint import (HuggingFaceStorageReader,
                                          HuggingFaceStorageWriter)
from torch.distributed.checkpoint import _hf_utils as _hf
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.metadata import (ChunkStorageMetadata,
                                                   Metadata, MetadataIndex,
                                                   StorageMeta,
                                                   TensorProperties,
                                                   TensorStorageMetadata)
from torch.distributed.checkpoint.planner import WriteItemType
from torch.distributed.checkpoint.storage import WriteResult
from torch.futures import Future

from ..safetensors import SafetensorError, safe_open
from ..safetensors import _format, native
from ..safetensors._atomic import replace_file
from ..safetensors._open import torch_dtype

# Integers of each element size: a tensor's bytes, shaped as the tensor,
# for pin_st_save (the file's dtype is named apart).
_CARRIER = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _done(value):
    fut = Future()
    fut.set_result(value)
    return fut


def _array(tensor):
    """tensor's bytes as a C-contiguous NumPy array of its shape."""
    t = tensor.detach().cpu().contiguous()
    flat = t.reshape(-1).view(_CARRIER[t.element_size()])
    return flat.numpy().reshape(tuple(t.shape))


class PinHuggingFaceStorageWriter(HuggingFaceStorageWriter):
    """torch's HuggingFaceStorageWriter (same arguments, same files),
    each shard written by pin_st_save; queue_depth, request_size, direct:
    libpin's I/O options (direct=False: never O_DIRECT). Shards are
    written one after the other, whatever thread_count says. A state
    dict of tensors only: the layout has no place for other
    objects (torch's writer would put their bytes ahead of the shard's
    header), so they are refused, by name."""

    def __init__(self, path, fqn_to_index_mapping=None, thread_count=1,
                 save_distributed=False, enable_consolidation=False,
                 thread_count_consolidation=1, queue_depth=None,
                 request_size=None, direct=True):
        native._need("pin_st_save")
        super().__init__(path, fqn_to_index_mapping=fqn_to_index_mapping,
                         thread_count=thread_count,
                         save_distributed=save_distributed,
                         enable_consolidation=enable_consolidation,
                         thread_count_consolidation=thread_count_consolidation)
        self.io = dict(queue_depth=queue_depth, request_size=request_size,
                       direct=direct)

    def write_data(self, plan, planner):
        if not plan.items:
            return _done([])
        mapping = plan.storage_data.get("fqn_to_index_mapping")
        shard_index = plan.storage_data.get("shard_index")
        buckets = self._split_by_storage_plan(mapping, plan.items)
        highest = max(mapping.values()) if mapping is not None else 1
        os.makedirs(self.path, exist_ok=True)
        results = []
        for index, items in buckets.items():
            name = _hf._gen_file_name(index, highest, shard_index)
            results += self._write_shard(name, items, planner)
        return _done(results)

    def _write_shard(self, name, items, planner):
        """One shard as torch's writer makes it: every item at offset 0
        of its file (torch records the stream's position before the
        safetensors image is written), its length its tensor's bytes."""
        arrays, formats, offsets, results = {}, {}, {}, []
        for item in items:
            fqn = item.index.fqn
            if item.type == WriteItemType.BYTE_IO:
                raise ValueError("%s: %s is not a tensor: the Hugging Face "
                                 "layout holds tensors only" % (name, fqn))
            tensor = planner.resolve_data(item)
            arrays[fqn] = _array(tensor)
            formats[fqn] = _format.FROM_FRAMEWORK[str(tensor.dtype)[6:]]
            offsets[fqn] = {_hf.SAVED_OFFSETS_KEY:
                            list(item.tensor_data.chunk.offsets)}
            nbytes = tensor.numel() * tensor.element_size()
            results.append(WriteResult(
                index=item.index, size_in_bytes=nbytes,
                storage_data=_StorageInfo(name, 0, nbytes)))
        # pin_st_save lays the data out in the order given: safetensors'
        # (torch's writer's, through it) is by dtype, then name.
        order = sorted(arrays, key=lambda k: (-_format._RANK[formats[k]], k))
        metadata = {_hf.CUSTOM_METADATA_KEY: json.dumps(offsets),
                    _hf.DCP_VERSION_KEY: str(_hf.HF_DCP_VERSION),
                    _hf.FORMAT_KEY: _hf.FORMAT_VALUE}
        native.save_safetensors(os.path.join(self.path, name),
                                [(k, arrays[k]) for k in order],
                                metadata=metadata, formats=formats,
                                **self.io)
        return results

    def finish(self, metadata, results):
        """torch's finish; the rank-0 layout's index replaced atomically
        (temporary name, sync, rename), its text torch's."""
        if self.save_distributed:
            return super().finish(metadata, results)
        weight_map, total = {}, 0
        for wr_list in results:
            for wr in wr_list:
                weight_map[wr.index.fqn] = wr.storage_data.relative_path
                total += wr.storage_data.length
        text = json.dumps({"metadata": {"total_size": total},
                           "weight_map": weight_map}, indent=2)
        replace_file(os.path.join(self.path, _hf._metadata_fn),
                     [text.encode()])


class PinHuggingFaceStorageReader(HuggingFaceStorageReader):
    """torch's HuggingFaceStorageReader reading through pinned memory:
    headers parsed by pinmem, each shard the plan needs loaded whole by
    pinmem's safetensors loader (pinned, O_DIRECT where allowed) and the
    planner's tensors copied from it, one shard after the other.
    A shard the index names that is missing, or a shard whose header or
    data is cut short, is an error naming the file."""

    def read_data(self, plan, planner):
        per_file = {}
        for item in plan.items:
            info = self.storage_data[item.storage_index]
            per_file.setdefault(info.relative_path, []).append(item)
        for path, reqs in per_file.items():
            try:
                with safe_open(path, framework="pt") as f:
                    for req in reqs:
                        self._process_read_request(f, req, planner)
            except (SafetensorError, OSError) as e:
                if path in str(e):
                    raise
                raise _named(path, e) from e
        return _done(None)

    def _shards(self):
        """The folder's .safetensors files; FileNotFoundError naming the
        first shard the index names that is not there."""
        names = sorted(n for n in os.listdir(self.path)
                       if n.endswith(_hf.SUFFIX))
        index = os.path.join(self.path, _hf._metadata_fn)
        if os.path.exists(index):
            with open(index) as f:
                wanted = set(json.load(f).get("weight_map", {}).values())
            for name in sorted(wanted - set(names)):
                raise FileNotFoundError(
                    "%s: missing: %s names it" % (
                        os.path.join(self.path, name), index))
        return [os.path.join(self.path, n) for n in names]

    def read_metadata(self):
        """torch's read_metadata, with pinmem reading the headers."""
        sd_md, storage = {}, {}
        for path in self._shards():
            try:
                with safe_open(path, framework="pt") as f:
                    entries = [(k, f.get_slice(k).get_dtype(),
                                f.get_slice(k).get_shape())
                               for k in f.keys()]
                    extra = f.metadata() or {}
            except (SafetensorError, OSError) as e:
                if path in str(e):
                    raise
                raise _named(path, e) from e
            sharding = extra.get(_hf.CUSTOM_METADATA_KEY)
            sharding = json.loads(sharding) if sharding else None
            for key, dt, shape in entries:
                offset = sharding[key][_hf.SAVED_OFFSETS_KEY] \
                    if sharding is not None else [0] * len(shape)
                dtype = torch_dtype(dt, shape, key)[0]
                _add_chunk(sd_md, key, dtype, shape, offset)
                storage[MetadataIndex(fqn=key, offset=offset)] = \
                    _hf._HFStorageInfo(relative_path=path,
                                       shape=torch.Size(shape), dtype=dtype)
        metadata = Metadata(state_dict_metadata=sd_md, storage_data=storage)
        metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


def _add_chunk(sd_md, key, dtype, shape, offset):
    """Record a stored chunk of key, growing the tensor's size to hold it."""
    chunk = ChunkStorageMetadata(offsets=torch.Size(offset),
                                 sizes=torch.Size(shape))
    end = [s + o for s, o in zip(shape, offset)]
    md = sd_md.get(key)
    if md is None:
        sd_md[key] = TensorStorageMetadata(
            properties=TensorProperties(dtype=dtype), size=torch.Size(end),
            chunks=[chunk])
        return
    md.chunks.append(chunk)
    md.size = torch.Size(max(a, b) for a, b in zip(md.size, end))


def _named(path, e):
    """e's kind, its message prefixed with path."""
    text = str(e)
    if isinstance(e, FileNotFoundError):
        return FileNotFoundError("%s: %s" % (path, text))
    return SafetensorError("%s: not a whole safetensors shard: %s" % (
        path, text))
