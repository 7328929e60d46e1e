# SPDX-License-Identifier: MIT
"""JAX arrays over pinned regions, zero-copy (importable only where jax is).

    import jax, pinmem, pinmem.jax as pj
    r = pinmem.open().alloc(64 << 20)
    ...                                         # fill it while OPEN
    r.seal()
    w = pj.view(r, jax.numpy.bfloat16, (4096, 4096))   # no copy
    r.donate()                                  # BusyError naming w's mapping
    del w                                       # JAX frees its buffer: unmapped
    r.donate()                                  # succeeds

    params = pj.load_safetensors("model.safetensors")  # name -> jax.Array

How: each array is imported with jax.dlpack.from_dlpack(..., copy=False)
from a read-only view mapping of the region (pinmem.dlpack exports it).
JAX keeps the export until its buffer dies, and then calls the export's
deleter, which drops the mapping: the mapping lives exactly as long as
the JAX buffer, i.e. as long as the jax.Array and everything JAX lets
share that buffer (np.asarray(a) views, exports of it). While it lives
the kernel counts it, so donating the region is refused (BusyError names
the mapping: pid, command, address range).

Zero-copy or an error: JAX copies a buffer it cannot use in place (on the
CPU: one not aligned to 64 bytes). load_safetensors() places every tensor
of a file on 64 bytes of its region (libpin's PIN_ST_LOAD_ALIGN: the
tensors the file has elsewhere, e.g. all of them in a file the safetensors
package wrote, are moved inside the region before it is sealed), so any
valid file gives zero-copy arrays. view() refuses an offset that is not a
multiple of 64 with ValueError before mapping anything; both check that
the array JAX made reads the mapping (unsafe_buffer_pointer()); nothing
here copies unless copy_unaligned=True asks for it.

Read-only: JAX arrays are immutable and XLA never writes an imported
buffer: donating one to a jitted function makes XLA allocate the output
(the region is not written); JAX then drops the donated array and with it
the mapping. The mappings made here are read-only in every region state.

dtypes: any NumPy dtype JAX has, bfloat16 and float8_e4m3fn/float8_e5m2
(ml_dtypes, which JAX requires) included, viewing the bytes as they are.
"""
import ctypes

import jax
import jax.numpy  # noqa: F401 - jax.numpy.array
import numpy as np

from . import core
from . import dtypes as _dtypes
from .safetensors import native as _native
from .safetensors import shared as _shared

__all__ = ["view", "load_safetensors", "ALIGNMENT", "mapping_range"]

#: the alignment JAX's CPU client needs to use a buffer in place
ALIGNMENT = 64


def _check_aligned(offset, what, fix):
    # A view mapping starts on a page, so the array's address is aligned
    # as its offset into the region is.
    if offset % ALIGNMENT:
        raise ValueError(
            "pinmem.jax: %s starts at offset %d, not a multiple of %d "
            "bytes: JAX would copy it, and this is a zero-copy view (%s)"
            % (what, offset, ALIGNMENT, fix))


def _check_type(dtype, what):
    """ValueError where JAX would convert dtype (a copy): 64-bit types
    while jax_enable_x64 is off."""
    if jax.dtypes.canonicalize_dtype(dtype) != dtype:
        raise ValueError(
            "pinmem.jax: %s is %s, which JAX converts to %s (a copy) while "
            "64-bit types are off: turn them on first with "
            "jax.config.update(\"jax_enable_x64\", True)"
            % (what, dtype, jax.dtypes.canonicalize_dtype(dtype)))


def _import(a, what):
    """A jax.Array over PinnedArray a's memory; a's mapping lives until
    JAX's buffer dies."""
    addr = a.__array_interface__["data"][0]
    _check_type(a.dtype, what)
    if addr % ALIGNMENT:
        raise ValueError("pinmem.jax: %s at 0x%x is not %d-byte aligned: "
                         "JAX would copy it" % (what, addr, ALIGNMENT))
    # copy=False: JAX raises rather than copy. a.__dlpack__ hands JAX a
    # capsule whose deleter holds a (and so the mapping) until JAX's
    # buffer is freed.
    x = jax.dlpack.from_dlpack(a, copy=False)
    if a.size and x.unsafe_buffer_pointer() != addr:
        raise RuntimeError("pinmem.jax: JAX copied %s (0x%x, not the "
                           "mapping's 0x%x)" %
                           (what, x.unsafe_buffer_pointer(), addr))
    return x


def view(region, dtype, shape, offset=0):
    """A jax.Array of dtype and shape over bytes [offset, offset + nbytes)
    of region, on JAX's CPU device, with no copy. Backed by a read-only
    view mapping of its own (counted by the kernel), unmapped when JAX
    frees the array's buffer. offset must be a multiple of ALIGNMENT
    (ValueError otherwise: JAX would copy)."""
    dtype = np.dtype(dtype)
    shape = core._shape_tuple(shape)
    _check_aligned(offset, "the view", "view at an offset that is a "
                   "multiple of %d, or copy explicitly: "
                   "jax.numpy.array(region.view(...))" % ALIGNMENT)
    a = region.view(dtype, shape, offset=offset)
    return _import(a, "the view of region %d" % region.id)


class Arrays(dict):
    """name -> jax.Array of a loaded checkpoint (a dict). .regions: each
    file's Region (sealed; donate it once the arrays are gone), .formats:
    name -> safetensors dtype name, .metadata, .files, .copied: the names
    copied rather than viewed (copy_unaligned=True)."""

    regions = ()
    formats = {}
    metadata = {}
    files = ()
    copied = ()


def _load_shared(path, copy_unaligned):
    """load_safetensors(shared=True): Arrays over pinmem-cached's views
    (each file's one copy for the whole host), or None: load privately."""
    files = _shared.shards(path) if str(path).endswith(".index.json") \
        else [path]
    out, copied = Arrays(), []
    out.formats, out.files, out.metadata, out.regions = {}, [], {}, []
    for f in files:
        got = _shared.open_image(f)
        if got is None:
            return None
        for name, dt, shape, raw in _shared.tensors(got[0], got[2],
                                                    got[3]):
            addr = raw.__array_interface__["data"][0]
            # A plain array over the read-only mapping, handed to JAX only
            # (XLA never writes an imported buffer); it holds the image,
            # so the mapping lives until JAX frees its buffer.
            buf = (ctypes.c_uint8 * raw.nbytes).from_address(addr)
            buf.image = got[0]
            a = np.ctypeslib.as_array(buf).view(
                _dtypes.from_name(dt)).reshape(shape)
            if copy_unaligned and addr % ALIGNMENT:
                copied.append(name)
                out[name] = jax.numpy.array(a, copy=True)
            elif addr % ALIGNMENT:
                raise ValueError(
                    "pinmem.jax: tensor %s of %s starts %d bytes past a "
                    "multiple of %d in pinmem-cached's copy, which has the "
                    "file's own layout (a service older than aligned "
                    "copies, one that could not reopen the file itself, or "
                    "no room for the padding): JAX would copy it. Load it "
                    "with shared=False (a private load places every "
                    "tensor on %d bytes), or pass copy_unaligned=True to "
                    "copy such tensors into JAX's memory"
                    % (name, f, addr % ALIGNMENT, ALIGNMENT, ALIGNMENT))
            else:
                out[name] = _import(a, "tensor %s" % name)
            out.formats[name] = dt
        out.files.append(str(f))
    out.copied = copied
    return out


def load_safetensors(path, dev=None, copy_unaligned=False, shared=False,
                     **kw):
    """Load a .safetensors file (or the shards of an .index.json) into
    sealed pinned regions (pinmem.load_safetensors, same keywords) and
    return Arrays: name -> jax.Array over them, no copy. Every array of a
    file shares that file's one read-only view mapping, which lives until
    JAX has freed the last of them. Any valid file gives zero-copy arrays:
    each tensor is placed on ALIGNMENT bytes of its region as it is loaded
    (align=True; a file the safetensors package wrote has its data only
    8-byte aligned, so its tensors are moved inside the region before the
    seal, at memmove speed: .stats in pinmem.load_safetensors says how many
    bytes). ValueError (before any import) for a tensor whose format JAX
    has no type for (F4, F6, F8_E8M0). shared=True: the one copy
    pinmem-cached holds for the host (pinmem.safetensors.shared; .regions
    is empty), whose tensors the service places on 64 bytes as well; where
    it could not (a service from before that, one that could not reopen
    the file itself, no room for the padding), a tensor off 64 bytes is
    refused with ValueError naming the fixes (shared=False, or
    copy_unaligned=True, which copies such tensors into JAX's own memory
    and names them in .copied); without a service, a private load and a
    warning."""
    if shared:
        out = _load_shared(path, copy_unaligned)
        if out is not None:
            return out
    kw.setdefault("align", True)
    ck = _native.load_safetensors(path, dev=dev, **kw)
    copied = []
    try:
        for name, a in ck.items():
            try:
                _dtypes.from_name(ck.formats[name])
            except KeyError:    # raw bytes: no NumPy (so no JAX) type
                raise ValueError("pinmem.jax: tensor %s is %s, which JAX has "
                                 "no type for" % (name, ck.formats[name])) \
                    from None
            _check_type(a.dtype, "tensor %s" % name)
            # The mapping starts on a page: the address is aligned as the
            # tensor's offset in the region is.
            m = core._mapping_of(a)
            off = a.__array_interface__["data"][0] - m.addr + m.offset
            if copy_unaligned and off % ALIGNMENT:
                copied.append(name)
            else:
                _check_aligned(off, "tensor %s" % name,
                               "load with align=True, the default, or pass "
                               "copy_unaligned=True to copy such tensors")
        out = Arrays()
        for name, a in ck.items():
            out[name] = jax.numpy.array(a, copy=True) if name in copied \
                else _import(a, "tensor %s" % name)
    finally:
        ck.close()
    out.copied = copied
    out.regions = ck.regions or []
    out.formats = dict(ck.formats)
    out.metadata = dict(ck.metadata)
    out.files = list(ck.files)
    return out


def mapping_range(x):
    """(start, end) of the view mapping a jax.Array made here reads, or
    None (not such an array, or its buffer is gone)."""
    from . import dlpack
    try:
        ptr = x.unsafe_buffer_pointer()
    except Exception:           # deleted or donated: no buffer
        return None
    for a in dlpack.exported_arrays():
        m = core._mapping_of(a)
        if m is not None and m.mapped and m.addr <= ptr < m.addr + m.length:
            return (m.addr, m.addr + m.length)
    return None

