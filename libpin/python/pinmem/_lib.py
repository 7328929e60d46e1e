# SPDX-License-Identifier: MIT
"""ctypes declarations for libpin (include/pin.h and the headers it includes).
Internal to pinmem.

The library is found, in this order: the file named by $PINMEM_LIBPIN
(that file alone); the checkout's build (build/lib/libpin.so.1, three
folders above this file, when this package runs from a checkout); the
installed libpin.so.1 through the dynamic loader; libpin.so.1 in the
folders `make install` puts it in (PREFIX /usr/local or /usr, lib/MULTIARCH,
lib, lib64), which the loader skips until ldconfig has run.
"""
import ctypes
import os
import sysconfig
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_int,
                    c_size_t, c_uint, c_uint32, c_uint64, c_void_p)

PIN_BACKEND_AUTO = 0
PIN_BACKEND_DEVICE = 1
PIN_BACKEND_PORTABLE = 2

PIN_REGION_FALLBACK = 1 << 0
PIN_REGION_ANY_NODE = 1 << 1
PIN_REGION_NODE = 1 << 2

PIN_STATE_OPEN = 1
PIN_STATE_SEALED = 2
PIN_STATE_DONATED = 3

PIN_HOLDER_OWNER = 1
PIN_HOLDER_VIEW = 2

PIN_VIEW_WRITE = 1 << 0

PROT_READ = 0x1
PROT_WRITE = 0x2
PROT_EXEC = 0x4

pid_t = ctypes.c_int
uid_t = ctypes.c_uint


class PinDevInfo(Structure):
    _fields_ = [
        ("size", c_uint32),
        ("backend", c_int),
        ("abi_version", c_uint32),
        ("abi_min_compat", c_uint32),
        ("chunk_size", c_uint64),
        ("max_total_bytes", c_uint64),
        ("max_region_bytes", c_uint64),
        ("total_bytes", c_uint64),
        ("nr_regions", c_uint64),
        ("nr_mappings", c_uint64),
        ("nr_view_fds", c_uint64),
    ]


class PinRegionInfo(Structure):
    _fields_ = [
        ("size", c_uint32),
        ("id", c_uint64),
        ("region_size", c_uint64),
        ("state", c_int),
        ("donate_pending", c_int),
        ("chunk_order", c_uint),
        ("min_order", c_uint),
        ("nr_chunks", c_uint64),
        ("nr_fallback_chunks", c_uint64),
        ("owner_mappings", c_uint64),
        ("view_mappings", c_uint64),
        ("writable_view_mappings", c_uint64),
        ("view_fds", c_uint64),
        ("owner_uid", uid_t),
        ("owner_pid", pid_t),
    ]


class PinHolder(Structure):
    _fields_ = [
        ("size", c_uint32),
        ("pid", pid_t),
        ("kind", c_int),
        ("start", c_uint64),
        ("length", c_uint64),
        ("offset", c_uint64),
        ("prot", c_int),
        ("maywrite", c_int),
        ("comm", c_char * 16),
    ]


class PinRefRange(Structure):
    _fields_ = [
        ("size", c_uint32),
        ("offset", c_uint64),
        ("length", c_uint64),
        ("refs", c_uint64),
        ("pinned", c_uint64),
        ("expected", c_uint64),
    ]


class PinDevOpts(Structure):
    _fields_ = [
        ("size", c_uint32),
        ("flags", c_uint32),
        ("why", c_void_p),
        ("why_len", c_size_t),
    ]


class PinRegionOpts(Structure):
    _fields_ = [
        ("size", c_uint32),
        ("flags", c_uint32),
        ("node", ctypes.c_int32),
    ]


PinIoProgress = CFUNCTYPE(None, c_void_p, c_uint64, c_uint64)


class PinIoOpts(Structure):
    _fields_ = [
        ("size", c_uint32),
        ("queue_depth", c_uint),
        ("request_size", c_uint32),
        ("flags", c_uint),
        ("progress", PinIoProgress),
        ("progress_arg", c_void_p),
        ("why", c_void_p),
        ("why_len", c_size_t),
    ]


class PinIoStats(Structure):
    _fields_ = [
        ("size", c_uint32),
        ("bytes", c_uint64),
        ("ns", c_uint64),
        ("io_ns", c_uint64),
        ("requests", c_uint64),
        ("short_ios", c_uint64),
        ("retries", c_uint64),
        ("queue_depth", c_uint32),
        ("request_size", c_uint32),
        ("direct", c_int),
        ("fixed_buffers", c_int),
        ("fallback_reason", c_char * 192),
    ]


class PinStLoadOpts(Structure):
    _fields_ = [
        ("size", c_uint32),
        ("flags", c_uint32),
        ("region", POINTER(PinRegionOpts)),
        ("io", POINTER(PinIoOpts)),
    ]


def init(cls, **fields):
    """An extensible struct of libpin with its size set (PIN_INIT)."""
    s = cls(**fields)
    s.size = ctypes.sizeof(cls)
    return s


def init_array(cls, n):
    """An array of n for libpin to fill: element 0 says the size."""
    arr = (cls * n)()
    arr[0].size = ctypes.sizeof(cls)
    return arr


def why_of(opts, buf):
    """Point opts' why at buf, a ctypes string buffer."""
    opts.why = ctypes.cast(buf, c_void_p)
    opts.why_len = len(buf)
    return opts


# One step of a load (pin_st_timeline); flags: PIN_ST_STEP_*.
PIN_ST_STEP_KERNEL_FILL = 1
# pin_st_load_opts.flags: PIN_ST_LOAD_OPEN leaves the region open;
# PIN_ST_LOAD_ALIGN puts every tensor at a multiple of PIN_ST_ALIGN.
PIN_ST_LOAD_OPEN = 1 << 1
PIN_ST_LOAD_ALIGN = 1 << 2
PIN_ST_ALIGN = 64


class PinStStep(Structure):
    _fields_ = [
        ("size", c_uint32),
        ("file", c_uint32),
        ("flags", c_uint32),
        ("offset", c_uint64),
        ("length", c_uint64),
        ("pin_begin_ns", c_uint64),
        ("pin_end_ns", c_uint64),
        ("read_begin_ns", c_uint64),
        ("read_end_ns", c_uint64),
    ]


class PinStPhases(Structure):
    _fields_ = [
        ("size", c_uint32),
        ("alloc_ns", c_uint64),
        ("pin_ns", c_uint64),
        ("transfer_ns", c_uint64),
        ("seal_ns", c_uint64),
        ("align_bytes", c_uint64),
        ("align_ns", c_uint64),
    ]


class PinStTensor(Structure):
    _fields_ = [
        ("size", c_uint32),
        ("name", c_char_p),
        ("dtype", c_int),
        ("ndim", c_uint),
        ("shape", POINTER(c_uint64)),
        ("nbytes", c_uint64),
        ("region", c_void_p),
        ("region_offset", c_uint64),
        ("data", c_void_p),
        ("file_offset", c_uint64),
        ("file_index", c_uint),
    ]


# Opaque handles are plain void pointers on the Python side.
_dev = c_void_p
_region = c_void_p
_view = c_void_p
_st = c_void_p

# name: (restype, argtypes). Every libpin function the binding calls.
_PROTOTYPES = {
    "pin_dev_open": (c_int, [POINTER(c_void_p), c_int, POINTER(PinDevOpts)]),
    "pin_dev_backend_why": (c_char_p, [_dev]),
    "pin_version": (c_char_p, []),
    "pin_dev_close": (None, [_dev]),
    "pin_dev_backend": (c_int, [_dev]),
    "pin_backend_name": (c_char_p, [c_int]),
    "pin_dev_error": (c_char_p, [_dev]),
    "pin_dev_info": (c_int, [_dev, POINTER(PinDevInfo)]),
    "pin_state_name": (c_char_p, [c_int]),
    "pin_region_create": (c_int, [_dev, c_uint64, POINTER(PinRegionOpts),
                                  POINTER(c_void_p)]),
    "pin_region_nodes": (c_int, [_region, POINTER(c_uint64), c_uint]),
    "pin_pci_numa_node": (c_int, [c_char_p]),
    "pin_region_import": (c_int, [_dev, c_int, POINTER(c_void_p)]),
    "pin_region_close": (c_int, [_region]),
    "pin_region_fd": (c_int, [_region]),
    "pin_region_size": (c_uint64, [_region]),
    "pin_region_id": (c_uint64, [_region]),
    "pin_region_error": (c_char_p, [_region]),
    "pin_region_map": (c_int, [_region, POINTER(c_void_p)]),
    "pin_region_unmap": (c_int, [_region]),
    "pin_region_info": (c_int, [_region, POINTER(PinRegionInfo)]),
    "pin_region_seal": (c_int, [_region]),
    "pin_region_donate": (c_int, [_region, c_int]),
    "pin_region_publish": (c_int, [_region]),
    "pin_region_reopen": (c_int, [_region]),
    "pin_region_holders": (c_int, [_region, POINTER(PinHolder), c_size_t]),
    "pin_holder_format": (c_int, [POINTER(PinHolder), c_char_p, c_size_t]),
    "pin_view_create": (c_int, [_region, c_uint64, c_uint64, c_uint,
                                POINTER(c_void_p)]),
    "pin_view_close": (None, [_view]),
    "pin_view_error": (c_char_p, [_view]),
    "pin_view_map": (c_int, [_view, c_int, POINTER(c_void_p)]),
    "pin_view_unmap": (c_int, [_view, c_void_p]),
    "pin_view_fd": (c_int, [_view]),
    "pin_view_import": (c_int, [_dev, c_int, POINTER(c_void_p)]),
    "pin_view_length": (c_uint64, [_view]),
    "pin_view_offset": (c_uint64, [_view]),
}

# Checkpoint I/O and references; optional so that an older libpin still
# serves views.
_OPTIONAL = {
    "pin_region_refs": (c_int, [_region, POINTER(PinRefRange), c_size_t]),
    "pin_ref_format": (c_int, [POINTER(PinRefRange), c_char_p, c_size_t]),
    "pin_dtype_name": (c_char_p, [c_int]),
    "pin_dtype_from_name": (c_int, [c_char_p]),
    "pin_dtype_bits": (c_uint, [c_int]),
    "pin_st_create": (_st, []),
    "pin_st_close": (None, [_st]),
    "pin_st_error": (c_char_p, [_st]),
    "pin_st_load": (c_int, [_st, _dev, c_char_p, POINTER(PinStLoadOpts)]),
    "pin_st_count": (c_size_t, [_st]),
    "pin_st_tensor": (c_int, [_st, c_size_t, POINTER(PinStTensor)]),
    "pin_st_metadata_count": (c_size_t, [_st]),
    "pin_st_metadata": (c_int, [_st, c_size_t, POINTER(c_char_p),
                                POINTER(c_char_p)]),
    "pin_st_file_count": (c_size_t, [_st]),
    "pin_st_file_path": (c_char_p, [_st, c_size_t]),
    "pin_st_region": (_region, [_st, c_size_t]),
    "pin_st_take_region": (_region, [_st, c_size_t]),
    "pin_st_load_into": (c_int, [_st, _region, c_uint64, c_char_p,
                                 POINTER(PinStLoadOpts)]),
    "pin_st_parse_file": (c_int, [_st, c_char_p]),
    "pin_file_read": (c_int, [c_void_p, c_uint64, c_char_p, c_uint64,
                            c_uint64, POINTER(PinIoOpts),
                            POINTER(PinIoStats)]),
    "pin_file_span": (c_uint64, [c_uint64, c_uint64]),
    "pin_file_write": (c_int, [c_void_p, c_uint64, c_char_p, c_uint64,
                               POINTER(PinIoOpts), POINTER(PinIoStats)]),
    "pin_fd_send": (c_int, [c_int, c_int]),
    "pin_fd_recv": (c_int, [c_int, POINTER(c_int)]),
    "pin_st_stats": (c_int, [_st, POINTER(PinIoStats)]),
    "pin_st_timeline": (c_int, [_st, POINTER(PinStStep), c_size_t]),
    "pin_st_phases": (c_int, [_st, POINTER(PinStPhases)]),
    "pin_st_save": (c_int, [_st, c_char_p, POINTER(PinStTensor), c_size_t,
                            POINTER(c_char_p), POINTER(c_char_p), c_size_t,
                            POINTER(PinIoOpts)]),
}


SONAME = "libpin.so.1"


def _install_dirs():
    """The library folders of `make install` PREFIX=/usr/local and /usr
    that exist here, most specific first."""
    arch = sysconfig.get_config_var("MULTIARCH")
    dirs = []
    for prefix in ("/usr/local", "/usr"):
        for sub in (["lib/" + arch] if arch else []) + ["lib", "lib64"]:
            d = os.path.join(prefix, sub)
            if os.path.isdir(d) and d not in dirs:
                dirs.append(d)
    return dirs


def _candidates():
    """(path, what it is) to try in order; a path with a slash is a file."""
    env = os.environ.get("PINMEM_LIBPIN")
    if env:
        return [(env, "$PINMEM_LIBPIN")]
    here = os.path.dirname(os.path.abspath(__file__))
    top = os.path.normpath(os.path.join(here, "..", "..", ".."))
    found = []
    if os.path.exists(os.path.join(top, "libpin", "libpin.mk")):
        found.append((os.path.join(top, "build", "lib", SONAME),
                      "the checkout's build"))
    found.append((SONAME, "the dynamic loader"))
    found += [(os.path.join(d, SONAME), "installed") for d in _install_dirs()]
    return found


def _open():
    """The first candidate that loads, and its path; ImportError naming
    what was tried (only files and folders that exist, and the loader)."""
    errors, missing = [], []
    for path, what in _candidates():
        if os.sep in path and not os.path.exists(path):
            if what == "installed":
                missing.append(os.path.dirname(path))
            else:
                errors.append("%s %s: no such file" % (what, path))
            continue
        try:
            return ctypes.CDLL(path, use_errno=False), path
        except OSError as e:
            errors.append("%s: %s" % (what if os.sep not in path else path, e))
    if missing:
        errors.append("no %s in %s" % (SONAME, ", ".join(missing)))
    raise ImportError("pinmem: cannot load libpin (" + "; ".join(errors) +
                      "); install it (make install, or the libpin1 package) "
                      "or set PINMEM_LIBPIN to its path")


def _load():
    lib, path = _open()
    for name, (res, args) in _PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    for name, (res, args) in _OPTIONAL.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = res
            fn.argtypes = args
    lib.pinmem_path = path
    return lib


lib = _load()


def has(name):
    """Whether this libpin exports name (checkpoint I/O is optional)."""
    return hasattr(lib, name)


def text(b):
    return b.decode("utf-8", "replace") if b else ""
