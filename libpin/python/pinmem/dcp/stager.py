# SPDX-License-Identifier: MIT
"""PinStager: the staging half of torch.distributed.checkpoint's
async_save, in one pinmem region reused by every save.

    stager = PinStager()
    f = dcp.async_save(sd, storage_writer=writer, async_stager=stager)
    ...
    stager.close()

Each save copies the state dict's tensors into the region (the owner
mapping, while OPEN) and hands DCP's writer tensors over one read-only
view mapping of it, which lives as long as any of them. Before the next
save overwrites the region, the stager makes sure the last writer let go:
on the device backend the kernel says so (Region.donate with a deadline:
no view mapping and no page reference left, from this process or any
other one a region fd reached); on the portable backend there is no
kernel count, and the stager waits for the view mapping it handed out to
be unmapped (its Python objects collected), a guarantee of userland only.

With process=True (for DCP's checkpoint process, AsyncCheckpointerType.
PROCESS) the staged tensors reach that process as the region's fd (see
_ship.py), and the stager alternates between two regions: torch's
checkpoint process keeps the last request referenced until the next one
arrives, so the region a save used is free again only once the save after
it has been sent.
Documentation/training.md says what is guaranteed where.
"""
import copy
import errno
import gc
import threading
import time
import warnings
import weakref

import numpy as np
import torch
from torch.distributed.checkpoint.staging import AsyncStager

from .. import core
from . import _ship

__all__ = ["PinStager"]

# The portable backend's wait for the last view to go: polls this often.
_POLL_S = 0.002
# After this long a wait collects garbage once, in case the writer's
# tensors were left in a reference cycle (gc.collect costs ~0.4 s with
# torch loaded, so not before).
_COLLECT_AFTER_S = 1.0


class _Layout:
    """Where each tensor of a state dict lies in the region: the tensors
    in walk order, placed largest element first so that every offset is a
    multiple of its element size with no padding (element sizes are
    powers of two), and the bytes they take, exactly."""

    def __init__(self, tensors):
        self.key = tuple((t.dtype, tuple(t.shape)) for t in tensors)
        self.offsets = [0] * len(tensors)
        order = sorted(range(len(tensors)),
                       key=lambda i: -tensors[i].element_size())
        pos = 0
        for i in order:
            self.offsets[i] = pos
            pos += tensors[i].numel() * tensors[i].element_size()
        self.nbytes = pos

    def tensors_over(self, buf):
        """A tensor per slot over NumPy array buf (uint8, the region's
        bytes); empty ones own no memory."""
        out = []
        for (dtype, shape), off in zip(self.key, self.offsets):
            count = int(np.prod(shape, dtype=np.int64))
            if count == 0:
                out.append(torch.empty(shape, dtype=dtype))
                continue
            t = torch.frombuffer(buf, dtype=dtype, count=count, offset=off)
            out.append(t.view(shape))
        return out


def _is_distributed(x):
    """DTensor, ShardedTensor: a local copy would lose what they are."""
    return type(x).__module__.startswith("torch.distributed")


def _is_dtensor(x):
    return type(x).__name__ == "DTensor" and _is_distributed(x)


def _rewrap(dt, local):
    """A DTensor with dt's sharding (mesh, placements, global shape) over
    the staged local tensor, which stays where it is (DTensor.from_local
    would move it to the mesh's device: a GPU's, for a model trained
    there). What torch's own stagers do: the DTensor's spec kept, its
    local tensor replaced."""
    from torch.distributed.tensor import DTensor
    return DTensor(local, dt._spec, requires_grad=False)


def _walk(obj, leaf, path="state_dict"):
    """obj with every tensor replaced by leaf(tensor, path); a DTensor's
    local shard is the tensor, the DTensor rebuilt over what leaf gave;
    dicts, lists and tuples rebuilt, every other value kept as it is."""
    if isinstance(obj, torch.Tensor) and not _is_distributed(obj):
        if type(obj) not in (torch.Tensor, torch.nn.Parameter):
            raise TypeError("PinStager: %s is a %s; only plain tensors "
                            "and DTensors are staged" %
                            (path, type(obj).__name__))
        return leaf(obj, path)
    if _is_dtensor(obj):
        return _rewrap(obj, _walk(obj._local_tensor, leaf, path + ".local"))
    if _is_distributed(obj):
        raise TypeError("PinStager: %s is a %s, which the stager cannot "
                        "stage (DTensors and plain tensors only)" %
                        (path, type(obj).__name__))
    if isinstance(obj, dict):
        out = copy.copy(obj)
        for k, v in obj.items():
            out[k] = _walk(v, leaf, "%s[%r]" % (path, k))
        return out
    if type(obj) in (list, tuple):
        return type(obj)(_walk(v, leaf, "%s[%d]" % (path, i))
                         for i, v in enumerate(obj))
    return obj


def _collect(state_dict):
    tensors = []

    def take(t, path):
        tensors.append(t)
        return t
    _walk(state_dict, take)
    return tensors


def _open_cuda(cuda):
    """The CUDA handle to register the region with: cuda itself, None
    for False/None, and for "auto" one of GPU 0 where a driver opens."""
    if cuda != "auto":
        return cuda or None
    try:
        from ..cuda import Cuda
        return Cuda(0)
    except core.PinError:
        return None


class _Slot:
    """One staging region and what the stager keeps of it."""

    def __init__(self, region, dst):
        self.region = region
        self.dst = dst              # tensors over the owner mapping
        self.last_view = None       # weakref to the view mapping handed out
        self.registered = False
        self.save = 0               # the save that last staged into it


class PinStager(AsyncStager):
    """A DCP AsyncStager over one pinmem region (see the module's notes).

    dev: a pinmem Device (default: pinmem.open() on first use). timeout:
    seconds a save waits for the last save's writer to let go of the
    region before it overwrites it (None: no limit); past it stage()
    raises pinmem.BusyError (errno ETIMEDOUT) naming the holders, and the
    region and what the last save staged are left as they were. cuda:
    "auto" registers the region's owner mapping, once, with GPU 0 where a
    CUDA driver is present (copies from GPU tensors land there); a
    pinmem.cuda.Cuda to use that one; None or False, never.
    process: True where the saves use DCP's checkpoint process
    (async_checkpointer_type=AsyncCheckpointerType.PROCESS): the staged
    tensors pickle as the region's fd instead of torch's shared-memory
    copy, and the stager alternates between two regions (twice the
    staging memory)."""

    # stage() returns the staged dict, complete: nothing to wait for.
    _synchronize_after_execute = False

    def __init__(self, dev=None, timeout=60.0, cuda="auto", process=False):
        if timeout is not None and timeout < 0:
            raise ValueError("PinStager: timeout must be >= 0 or None")
        self._dev = dev
        self._timeout = timeout
        self._cuda_arg = cuda
        self._cuda = None
        self._cuda_tried = False
        self._process = bool(process)
        self._lock = threading.Lock()
        self._closed = False
        self._slots = []        # one region, two with process=True
        self._turn = 0          # the slot the next save stages into
        self._current = None    # the slot the last save staged into
        self._layout = None
        self._saves = 0

    # -- the AsyncStager protocol

    def stage(self, state_dict):
        """A copy of state_dict whose tensors lie in the region, read-only
        to this process; the caller may change state_dict's tensors as
        soon as this returns."""
        with self._lock:
            if self._closed:
                raise ValueError("PinStager: closed")
            tensors = _collect(state_dict)
            layout = _Layout(tensors)
            if self._layout is None or layout.key != self._layout.key:
                self._release()
                self._layout = layout
            slot = self._slot() if layout.nbytes else None
            self._saves += 1
            if slot is None:                # no tensor bytes at all
                staged = layout.tensors_over(np.empty(0, np.uint8))
            else:
                staged = self._fill(slot, tensors)
            it = iter(staged)
            return _walk(state_dict, lambda t, path: next(it))

    def synchronize_staging(self):
        """Nothing to wait for: stage() returns once the copy is done."""

    def close(self):
        """Release the region (its registration, the owner mapping, the
        handle). Tensors a writer still holds stay valid: their view
        mapping holds the memory until they are gone."""
        with self._lock:
            self._closed = True
            self._release()
            if self._cuda is not None and self._cuda_arg == "auto":
                self._cuda.close()
            self._cuda = None

    # -- for tests and monitoring

    @property
    def region(self):
        """The region the last save staged into (None before the first
        save, after close)."""
        return self._current.region if self._current else None

    @property
    def regions(self):
        """The staging regions made so far: one, two with process=True."""
        return [s.region for s in self._slots]

    @property
    def registered(self):
        """Whether the regions are registered with CUDA."""
        return bool(self._slots) and all(s.registered for s in self._slots)

    # -- the steps

    def _device(self):
        if self._dev is None:
            self._dev = core.open()
        return self._dev

    def _slot(self):
        """The slot this save stages into, made on first use, else
        reclaimed from the save that last used it."""
        if len(self._slots) < (2 if self._process else 1):
            slot = self._make(self._layout)
            self._slots.append(slot)
        else:
            slot = self._slots[self._turn]
            self._reclaim(slot)
        self._turn = (self._turn + 1) % (2 if self._process else 1)
        self._current = slot
        return slot

    def _make(self, layout):
        """A slot for layout, its region registered with CUDA once."""
        region = self._device().alloc(layout.nbytes)
        if not self._cuda_tried:
            self._cuda_tried = True
            self._cuda = _open_cuda(self._cuda_arg)
        slot = _Slot(region, None)
        if self._cuda is not None:
            slot.registered = self._register(region)
        owner = region.owner_array(np.uint8, (layout.nbytes,))
        slot.dst = layout.tensors_over(owner)
        return slot

    def _release(self):
        """Let go of the regions; the last saves' views keep their memory
        until they are unmapped."""
        slots, self._slots = self._slots, []
        self._turn, self._current, self._layout = 0, None, None
        for slot in slots:
            slot.dst = None
            if slot.registered:
                self._cuda.unregister(slot.region)
            slot.region.close()

    def _register(self, region):
        """Register the owner mapping with CUDA, once per region. A refusal
        is an error where the caller gave the handle, a warning (and no
        registration) under "auto"."""
        try:
            self._cuda.register(region)
            return True
        except core.PinError as e:
            if self._cuda_arg != "auto":
                region.close()
                raise
            warnings.warn("PinStager: CUDA did not register staging region "
                          "%d (%s); copies from GPUs into it are staged as "
                          "into pageable memory" % (region.id, e.strerror),
                          RuntimeWarning, stacklevel=5)
            return False

    def _reclaim(self, slot):
        """Wait until the writer of the save that last used slot no longer
        holds its region, and make it writable again."""
        if slot.region.backend == "device":
            self._donate(slot)
            slot.region.reopen()
        else:
            self._wait_view_gone(slot)

    def _donate(self, slot):
        r = slot.region
        first = _COLLECT_AFTER_S if self._timeout is None else \
            min(self._timeout, _COLLECT_AFTER_S)
        start = time.monotonic()
        try:
            r.donate(first)
            return
        except core.PinError as e:
            if e.errno not in (errno.EBUSY, errno.ETIMEDOUT):
                raise
            if self._timeout is not None and first >= self._timeout:
                raise self._busy(slot, e, self._views(r), r.refs()) from None
        gc.collect()
        rest = None if self._timeout is None else \
            max(0.0, self._timeout - (time.monotonic() - start))
        try:
            r.donate(rest)
        except core.PinError as e:
            if e.errno not in (errno.EBUSY, errno.ETIMEDOUT):
                raise
            raise self._busy(slot, e, self._views(r), r.refs()) from None

    @staticmethod
    def _views(region):
        """The view mappings holding region (its owner mapping, which the
        stager keeps, holds nothing up)."""
        return [h for h in region.holders() if h.kind != "owner"]

    def _wait_view_gone(self, slot):
        """Portable backend: no kernel count; wait for the view mapping
        the save that last used slot handed out to be unmapped (its
        objects collected)."""
        ref = slot.last_view
        start = time.monotonic()
        collected = False
        while True:
            m = ref()
            if m is None or not m.mapped:
                return
            del m
            waited = time.monotonic() - start
            if self._timeout is not None and waited >= self._timeout:
                raise self._busy(slot, None, [], [])
            if not collected and waited >= _COLLECT_AFTER_S:
                collected = True
                gc.collect()
                continue
            time.sleep(_POLL_S)

    def _busy(self, slot, cause, holders, refs):
        r = slot.region
        if r.backend == "device":
            who = "; ".join(str(h) for h in holders) or "no view mapping"
        else:
            who = ("objects of this process: tensors of the last staged "
                   "dict are still referenced (the portable backend counts "
                   "no views)")
        text = ("PinStager: save %d: the writer of save %d still holds "
                "staging region %d after %s s (holders: %s%s%s); the region "
                "and what save %d staged are unchanged. Wait for the last "
                "save's future, or give the stager a longer timeout" %
                (self._saves + 1, slot.save, r.id, self._timeout, who,
                 "; referenced bytes: " if refs else "",
                 "; ".join(str(x) for x in refs), slot.save))
        if cause is not None:
            text += " (%s)" % cause.strerror
        return core.BusyError(errno.ETIMEDOUT, text, holders, refs)

    def _fill(self, slot, tensors):
        """Copy tensors into slot's region, seal it (device backend) and
        return tensors over a fresh read-only view of it (ShippedTensors
        with process=True)."""
        with torch.no_grad():
            for dst, src in zip(slot.dst, tensors):
                dst.copy_(src.detach())
        slot.save = self._saves
        r = slot.region
        if r.backend == "device":
            r.seal()
        nbytes = self._layout.nbytes
        page = r._view_align
        length = -(-nbytes // page) * page
        # Not mlocked (portable): the owner mapping keeps these pages
        # locked, and the writer's thread faults them in as it reads, not
        # the training loop here (0.036 s a GiB when locked up front).
        with r._lock:
            m = core._ViewMapping(r._ptr(), r.id, 0, length, False, r._err,
                                  r._busy_holders, backend=r.backend,
                                  register=False, lock=False)
        slot.last_view = weakref.ref(m)
        buf = np.asarray(m)[:nbytes]
        del m
        with warnings.catch_warnings():
            # Read-only memory: a write faults; DCP's writer only reads.
            warnings.simplefilter("ignore", UserWarning)
            staged = self._layout.tensors_over(buf)
        if self._process:
            staged = _ship.ship(staged, self._layout.offsets, r, nbytes)
        return staged
