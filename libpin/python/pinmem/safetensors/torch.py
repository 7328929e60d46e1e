# SPDX-License-Identifier: MIT
"""safetensors.torch's API, over pinned memory.

    from pinmem.safetensors.torch import load_file, save_file
    sd = load_file("model.safetensors")      # tensors in pinned memory
    model.load_state_dict(sd)
    save_file(sd, "copy.safetensors")          # byte-identical to safetensors

Same names, signatures, defaults, exception types and messages as
safetensors 0.7's safetensors.torch (load_file, save_file, load, save,
save_model, load_model). What a loaded tensor is (the rule README.md,
Documentation/python.md and libpin/python/README.md state too):

Every tensor pinmem.safetensors.torch returns (load_file, load,
safe_open(..., "pt")), private or shared=True, on either backend, lies
in pinned memory for as long as it lives: page-locked (the pinmem module
pins its pages; on the portable backend its mapping is mlocked, within
RLIMIT_MEMLOCK, else PinError names the limit) and, where a CUDA driver
is present, registered with it for the range it covers, so that copies
to a GPU are direct and non_blocking=True overlaps;
pinmem.torch.is_pinned(t) answers from what libpin knows. A private load
(the default) gives plain, writable tensors over the process's own
region, left open: a write by any route (in-place ops, t[i] = x, copy_,
out=, .numpy(), DLPack) goes into that pinned memory, which no other
process maps, so the GPU copies what the CPU sees. A forked child
never writes into them: its copy is copy-on-write (portable backend) or
read-only (device backend; Documentation/python.md, *Private loads and
fork*). shared=True gives read-only tensors (pinmem.torch.ReadOnlyTensor) whether pinmem-cached
serves the file or the load falls back to a private one: torch writes
and DLPack exports raise pinmem.ReadOnlyError and .numpy() is read-only;
t.clone() gives a writable copy. Not covered: raw pointers and
torch.utils.dlpack.to_dlpack, which meet the kernel's PROT_READ
(SIGSEGV).

device="cpu" returns the pinned tensors; another device gets .to(device)
copies of them (the pinned memory is the copy's source).
"""
import torch

from . import _atomic, _format, _iter, _sharded
from ._format import SafetensorError
from ._open import load_all, load_bytes, safe_open
from ._shared_torch import load_shared as _load_shared
from .. import torch as _pt

__all__ = ["save", "save_file", "save_sharded", "load", "load_file", "save_model",
           "load_model", "iter_weights"]


def _size(t):
    return t.element_size()


def _storage_ptr(t):
    try:
        return t.untyped_storage().data_ptr()
    except AttributeError:
        return t.storage().data_ptr()


def _storage_size(t):
    try:
        return t.untyped_storage().nbytes()
    except AttributeError:
        return t.storage().size() * _size(t)


def _end_ptr(t):
    if t.nelement():
        return t.view(-1)[-1].data_ptr() + _size(t)
    return t.data_ptr()


def _find_shared_tensors(state_dict):
    """Groups of names whose tensors share (overlapping) storage."""
    groups = {}
    for k, v in state_dict.items():
        if v.device != torch.device("meta") and _storage_ptr(v) != 0 and \
                _storage_size(v) != 0:
            key = (str(v.device), _storage_ptr(v), _storage_size(v))
            groups.setdefault(key, set()).add(k)
    out = []
    # sorted() of the sets themselves, as safetensors.torch does: sets
    # order by inclusion, so disjoint groups keep their first-seen order.
    for names in sorted(groups.values()):
        if len(names) < 2:
            out.append(names)
            continue
        # Names over one storage but disjoint areas are not shared.
        areas = sorted((state_dict[n].data_ptr(), _end_ptr(state_dict[n]), n)
                       for n in names)
        _, last_stop, first = areas[0]
        out.append({first})
        for start, stop, n in areas[1:]:
            if start >= last_stop:
                out.append({n})
            else:
                out[-1].add(n)
            last_stop = stop
    return out


def _is_complete(t):
    return t.data_ptr() == _storage_ptr(t) and \
        t.nelement() * _size(t) == _storage_size(t)


def _remove_duplicate_names(state_dict, *, preferred_names=None,
                            discard_names=None):
    preferred_names = set(preferred_names or [])
    discard_names = set(discard_names or [])
    to_remove = {}
    for shared in _find_shared_tensors(state_dict):
        complete = {n for n in shared if _is_complete(state_dict[n])}
        if not complete:
            raise RuntimeError(
                "Error while trying to find names to remove to save state "
                "dict, but found no suitable name to keep for saving amongst:"
                " %s. None is covering the entire storage.Refusing to "
                "save/load the model since you could be storing much more "
                "memory than needed. Please refer to "
                "https://huggingface.co/docs/safetensors/torch_shared_tensors"
                " for more information. Or open an issue." % (shared,))
        keep = sorted(complete)[0]
        preferred = complete - discard_names
        if preferred:
            keep = sorted(preferred)[0]
        if preferred_names:
            preferred = preferred_names & complete
            if preferred:
                keep = sorted(preferred)[0]
        for n in sorted(shared):
            if n != keep:
                to_remove.setdefault(keep, []).append(n)
    return to_remove


def _tobytes(t, name):
    if t.layout != torch.strided:
        raise ValueError(
            "You are trying to save a sparse tensor: `%s` which this library"
            " does not support. You can make it a dense tensor before saving"
            " with `.to_dense()` but be aware this might make a much larger "
            "file than needed." % name)
    if not t.is_contiguous():
        raise ValueError(
            "You are trying to save a non contiguous tensor: `%s` which is "
            "not allowed. It either means you are trying to save tensors "
            "which are reference of each other in which case it's "
            "recommended to save only the full tensors, and reslice at load "
            "time, or simply call `.contiguous()` on your tensor to pack it "
            "before saving." % name)
    _file_dtype(t)
    if t.device.type != "cpu":
        t = t.to("cpu")
    if t.nelement() == 0:
        return b""
    carrier = {1: torch.uint8, 2: torch.int16, 4: torch.int32,
               8: torch.int64}[_size(t)]
    return t.reshape(-1).view(carrier).numpy().view("u1")


def _flatten(tensors):
    if not isinstance(tensors, dict):
        raise ValueError("Expected a dict of [str, torch.Tensor] but "
                         "received %s" % type(tensors))
    sparse = []
    for k, v in tensors.items():
        if not isinstance(v, torch.Tensor):
            raise ValueError("Key `%s` is invalid, expected torch.Tensor but "
                             "received %s" % (k, type(v)))
        if v.layout != torch.strided:
            sparse.append(k)
    if sparse:
        raise ValueError(
            "You are trying to save a sparse tensors: `%s` which this library"
            " does not support. You can make it a dense tensor before saving"
            " with `.to_dense()` but be aware this might make a much larger "
            "file than needed." % sparse)
    failing = [names for names in _find_shared_tensors(tensors)
               if len(names) > 1]
    if failing:
        raise RuntimeError(
            "\n            Some tensors share memory, this will lead to "
            "duplicate memory on disk and potential differences when loading"
            " them again: %s.\n            A potential way to correctly save "
            "your model is to use `save_model`.\n            More information"
            " at https://huggingface.co/docs/safetensors/torch_shared_tensors"
            "\n            " % failing)
    return [(k, _file_dtype(v), _file_shape(v), _tobytes(v, k))
            for k, v in tensors.items()]


def _file_shape(t):
    """t's shape in the file: F4 counts elements, float4_e2m1fn_x2 bytes
    (pinmem.torch.file_shape); a 0-d one is half a byte, refused in
    safetensors' words."""
    if t.dim() == 0 and _file_dtype(t) == "F4":
        raise SafetensorError(
            "Error while serializing: The slice is slicing for subbytes "
            "dtypes, and the slice does not end up at a byte boundary, "
            "this is invalid.")
    return _pt.file_shape(t)


def _file_dtype(t):
    try:
        return _format.FROM_FRAMEWORK[str(t.dtype).split(".")[-1]]
    except KeyError:
        # safetensors.torch looks the size up in its _SIZE table before
        # the dtype is named: an unknown dtype is a KeyError of the dtype.
        raise KeyError(t.dtype) from None


def save(tensors, metadata=None):
    """The safetensors file image of tensors (name -> tensor), as bytes."""
    return b"".join(bytes(p) for p in _format.serialize(_flatten(tensors),
                                                        metadata))


def save_file(tensors, filename, metadata=None):
    """Write tensors to filename as safetensors does (same bytes),
    replacing the file whole: a crash leaves the old file or the new one."""
    parts = _format.serialize(_flatten(tensors), metadata)
    _atomic.replace_file(filename, parts)


def save_sharded(tensors, index_filename, max_shard_size="5GB",
                 metadata=None):
    """Write tensors as a sharded checkpoint: shards of at most max_shard_size
    (an int, or "5GB", "512MiB") and the index index_filename
    (PREFIX.safetensors.index.json), as Hugging Face's loaders read it.
    A crash leaves the old checkpoint or the new one; the old shards are
    deleted once the new index is in place. Returns the shards' names."""
    return _sharded.save(_flatten(tensors), index_filename, metadata,
                         max_shard_size)


def load(data):
    """name -> tensor (pinned, read-only memory) from a file image."""
    return load_bytes(data, "pt")


def load_file(filename, device="cpu", shared=False):
    """name -> tensor over pinned memory (device="cpu"), in file order.
    shared=True: the one copy pinmem-cached holds for the whole host,
    read-only (pinmem.safetensors.shared); without a service, a private
    load and a warning."""
    if shared:
        out = _load_shared(filename, device)
        if out is not None:
            return out
    # Without the service, shared=True's tensors are what its are:
    # read-only (ReadOnlyTensor), over a sealed region.
    return load_all(filename, "pt", device, writable=not shared)


def iter_weights(files, shared=False, progress=None):
    """(name, tensor) of each file in turn, as serving engines' weights
    iterators give them: files is a list of .safetensors paths, one path,
    a *.safetensors.index.json (its shards) or a folder (its one index's
    shards, else its *.safetensors files by name). Each tensor is the
    one load_file(path, shared=shared) gives (pinned; shared=True's
    read-only); a file is loaded when the iterator reaches it, in header
    order, and its region lives only as long as the tensors handed out.
    progress: a one-line counter of files on stderr (None: when stderr is
    a terminal). Errors are load_file's, raised when the file is reached."""
    return _iter.iterate(lambda path: load_file(path, shared=shared), files,
                         progress)


def save_model(model, filename, metadata=None, force_contiguous=True):
    """Save model.state_dict(), keeping one name of each group of tensors
    that share memory (the others recorded in metadata: name -> kept)."""
    state_dict = model.state_dict()
    for kept, names in _remove_duplicate_names(state_dict).items():
        for name in names:
            if metadata is None:
                metadata = {}
            if name not in metadata:
                metadata[name] = kept
            del state_dict[name]
    if force_contiguous:
        state_dict = {k: v.contiguous() for k, v in state_dict.items()}
    try:
        save_file(state_dict, filename, metadata=metadata)
    except ValueError as e:
        raise ValueError(str(e) + " Or use save_model(..., "
                         "force_contiguous=True), read the docs for "
                         "potential caveats.") from None


def load_model(model, filename, strict=True, device="cpu"):
    """Load a file made by save_model into model; returns (missing,
    unexpected) names. Shared tensors the file left out count as loaded."""
    state_dict = load_file(filename, device=device)
    to_removes = _remove_duplicate_names(model.state_dict(),
                                         preferred_names=state_dict.keys())
    missing, unexpected = model.load_state_dict(state_dict, strict=False)
    missing = set(missing)
    for names in to_removes.values():
        for name in names:
            if name not in missing:
                unexpected.append(name)
            else:
                missing.remove(name)
    if strict and (missing or unexpected):
        error = "Error(s) in loading state_dict for %s:" % \
            model.__class__.__name__
        if missing:
            error += "\n    Missing key(s) in state_dict: " + ", ".join(
                '"%s"' % k for k in sorted(missing))
        if unexpected:
            error += "\n    Unexpected key(s) in state_dict: " + ", ".join(
                '"%s"' % k for k in sorted(unexpected))
        raise RuntimeError(error)
    return missing, unexpected


_ = _pt  # pinmem.torch must import (torch present) for load's tensors
