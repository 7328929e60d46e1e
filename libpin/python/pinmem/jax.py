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

dtypes: any NumPy dtype JAX has, bfloat16 and the float8s (float8_e4m3fn,
float8_e5m2, float8_e8m0fnu, float8_e4m3fnuz, float8_e5m2fnuz: ml_dtypes,
which JAX requires) included, viewing the bytes as they are. 64-bit types
while jax_enable_x64 is off: load_safetensors(x64=...) says what to do.

Devices: memory registered with CUDA is kDLCUDAHost to DLPack (JAX's
pinned_host); a JAX without a CUDA platform gets it as CPU memory.
"""
import jax
import jax.numpy  # noqa: F401 - jax.numpy.array
import numpy as np

from . import core
from . import dlpack as _dlpack
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


def _jax_dtype(fmt, what):
    """The NumPy dtype JAX holds safetensors format fmt in; ValueError
    where JAX has none (F4, F6_*: sub-byte formats JAX cannot view in
    place; a float8 this ml_dtypes lacks)."""
    dt = _dtypes.ml_dtype(fmt)
    if dt is None:
        try:
            dt = _dtypes.from_name(fmt)
        except KeyError:        # raw bytes: no NumPy (so no JAX) type
            raise ValueError("pinmem.jax: %s is %s, which JAX has no type "
                             "for" % (what, fmt)) from None
    return dt


#: load_safetensors(x64=...): what to do with 64-bit tensors while
#: jax_enable_x64 is off
X64_CHOICES = ("error", "numpy", "convert")


def _x64_of(dtype, what, x64):
    """None where JAX takes dtype as it is; else x64's choice for a
    64-bit tensor while jax_enable_x64 is off ("numpy", "convert"), or
    ValueError naming the choices ("error")."""
    if jax.dtypes.canonicalize_dtype(dtype) == dtype:
        return None
    if x64 != "error":
        return x64
    raise ValueError(
        "pinmem.jax: %s is %s, which JAX converts to %s (a copy) while "
        "64-bit types are off: pass x64=\"numpy\" (such tensors as "
        "pinned read-only NumPy arrays, no copy) or x64=\"convert\" (JAX "
        "copies, named in .converted) to load_safetensors, or turn 64-bit "
        "types on first with jax.config.update(\"jax_enable_x64\", True)"
        % (what, dtype, jax.dtypes.canonicalize_dtype(dtype)))


def _check_type(dtype, what):
    """ValueError where JAX would convert dtype (a copy): 64-bit types
    while jax_enable_x64 is off."""
    if jax.dtypes.canonicalize_dtype(dtype) != dtype:
        raise ValueError(
            "pinmem.jax: %s is %s, which JAX converts to %s (a copy) while "
            "64-bit types are off: turn them on first with "
            "jax.config.update(\"jax_enable_x64\", True)"
            % (what, dtype, jax.dtypes.canonicalize_dtype(dtype)))


def _jax_has_cuda():
    """Whether this JAX has a CUDA platform (a CPU-only jaxlib has not)."""
    try:
        return bool(jax.devices("cuda"))
    except RuntimeError:
        return False


class _Export:
    """What from_dlpack reads: a's DLPack export, on a device this JAX
    has. Memory registered with CUDA is kDLCUDAHost (JAX's pinned_host);
    a JAX without CUDA knows no such device, so there it is exported as
    the plain host memory it is. read_only_map: a lies in a read-only
    mmap of the caller's (see pinmem.dlpack.to_dlpack)."""

    __slots__ = ("a", "dev", "read_only_map")

    def __init__(self, a, read_only_map=False):
        self.a = a
        self.read_only_map = read_only_map
        self.dev = _dlpack.device(a)
        if self.dev[0] == _dlpack.kDLCUDAHost and not _jax_has_cuda():
            self.dev = (_dlpack.kDLCPU, 0)

    def __dlpack_device__(self):
        return self.dev

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None,
                   copy=None):
        return _dlpack.to_dlpack(self.a, max_version, self.dev,
                                 self.read_only_map)


def _import(a, what, read_only_map=False):
    """A jax.Array over PinnedArray a's memory (or, read_only_map, over a
    read-only mmap's); a's mapping lives until JAX's buffer dies."""
    addr = a.__array_interface__["data"][0]
    _check_type(a.dtype, what)
    if addr % ALIGNMENT:
        raise ValueError("pinmem.jax: %s at 0x%x is not %d-byte aligned: "
                         "JAX would copy it" % (what, addr, ALIGNMENT))
    # copy=False: JAX raises rather than copy. The export hands JAX a
    # capsule whose deleter holds a (and so the mapping) until JAX's
    # buffer is freed.
    x = jax.dlpack.from_dlpack(_Export(a, read_only_map), copy=False)
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
    copied rather than viewed (copy_unaligned=True); with 64-bit types
    off, .as_numpy: the names held as NumPy arrays (x64="numpy"),
    .converted: the names JAX converted to 32 bits (x64="convert")."""

    regions = ()
    formats = {}
    metadata = {}
    files = ()
    copied = ()
    as_numpy = ()
    converted = ()


def _check(name, dt, off, copy_unaligned, x64, unaligned):
    """How tensor name (JAX dtype dt, off bytes past a multiple of
    ALIGNMENT) is to be placed: "view", "copy" (copy_unaligned), "numpy"
    or "convert" (x64); ValueError for one JAX cannot take."""
    how = _x64_of(dt, "tensor %s" % name, x64)
    if how is not None:
        return how
    if off % ALIGNMENT:
        if copy_unaligned:
            return "copy"
        unaligned()
    return "view"


def _place(out, name, a, how, read_only_map=False):
    """out[name] from array a (already of JAX's dtype) as _check said."""
    if how == "view":
        out[name] = _import(a, "tensor %s" % name, read_only_map)
        return
    if how == "numpy":
        out[name] = a           # pinned, read-only, no copy
    else:
        out[name] = jax.numpy.array(a, copy=True)
    {"copy": out.copied, "numpy": out.as_numpy,
     "convert": out.converted}[how].append(name)


def _new_arrays():
    out = Arrays()
    out.formats, out.files, out.metadata, out.regions = {}, [], {}, []
    out.copied, out.as_numpy, out.converted = [], [], []
    return out


def _unaligned_shared(name, f, off):
    raise ValueError(
        "pinmem.jax: tensor %s of %s starts %d bytes past a multiple of %d "
        "in pinmem-cached's copy, which has the file's own layout (a "
        "service older than aligned copies, one that could not reopen the "
        "file itself, or no room for the padding): JAX would copy it. Load "
        "it with shared=False (a private load places every tensor on %d "
        "bytes), or pass copy_unaligned=True to copy such tensors into "
        "JAX's memory" % (name, f, off, ALIGNMENT, ALIGNMENT))


def _load_shared(path, copy_unaligned, x64):
    """load_safetensors(shared=True): Arrays over pinmem-cached's views
    (each file's one copy for the whole host), or None: load privately."""
    files = _shared.shards(path) if str(path).endswith(".index.json") \
        else [path]
    out, todo = _new_arrays(), []
    for f in files:
        got = _shared.open_image(f)
        if got is None:
            return None
        for name, fmt, shape, raw in _shared.tensors(got[0], got[2],
                                                     got[3]):
            addr = raw.__array_interface__["data"][0]
            # An array of JAX's dtype over the service's read-only view,
            # exported by pinmem.dlpack (NumPy's own export knows no
            # bfloat16 or float8); it holds the image, so the mapping
            # lives until JAX frees its buffer. A view the process's
            # libpin could not import is a read-only mmap (shared.request).
            a = raw.view(type=core.PinnedArray).view(
                _jax_dtype(fmt, "tensor %s" % name)).reshape(shape)
            how = _check(name, a.dtype, addr, copy_unaligned, x64,
                         lambda: _unaligned_shared(name, f,
                                                   addr % ALIGNMENT))
            todo.append((name, a, how, core._mapping_of(a) is None))
            out.formats[name] = fmt
        out.files.append(str(f))
    for name, a, how, plain in todo:
        _place(out, name, a, how, read_only_map=plain)
    return out


def load_safetensors(path, dev=None, copy_unaligned=False, shared=False,
                     x64="error", **kw):
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
    has no type for (F4, F6). 64-bit tensors (I64, U64, F64) while
    jax_enable_x64 is off, as x64 says: "error" (the default) a
    ValueError before any import; "numpy" those tensors as the pinned
    read-only NumPy arrays they are (no copy; named in .as_numpy);
    "convert" JAX's 32-bit copies (named in .converted). shared=True: the
    one copy pinmem-cached holds for the host (pinmem.safetensors.shared;
    .regions is empty), whose tensors the service places on 64 bytes as
    well; where it could not (a service from before that, one that could
    not reopen the file itself, no room for the padding), a tensor off 64
    bytes is refused with ValueError naming the fixes (shared=False, or
    copy_unaligned=True, which copies such tensors into JAX's own memory
    and names them in .copied); without a service, a private load and a
    warning."""
    if x64 not in X64_CHOICES:
        raise ValueError("pinmem.jax: x64=%r: one of %s" %
                         (x64, ", ".join(map(repr, X64_CHOICES))))
    if shared:
        out = _load_shared(path, copy_unaligned, x64)
        if out is not None:
            return out
    kw.setdefault("align", True)
    ck = _native.load_safetensors(path, dev=dev, **kw)
    out, todo = _new_arrays(), []
    try:
        for name, a in ck.items():
            fmt = ck.formats[name]
            a = a.view(_jax_dtype(fmt, "tensor %s" % name))
            # The mapping starts on a page: the address is aligned as the
            # tensor's offset in the region is.
            m = core._mapping_of(a)
            off = a.__array_interface__["data"][0] - m.addr + m.offset
            how = _check(name, a.dtype, off, copy_unaligned, x64,
                         lambda: _check_aligned(
                             off, "tensor %s" % name,
                             "load with align=True, the default, or pass "
                             "copy_unaligned=True to copy such tensors"))
            todo.append((name, a, how))
        for name, a, how in todo:
            _place(out, name, a, how)
    finally:
        ck.close()
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

