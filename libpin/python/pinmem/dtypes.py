# SPDX-License-Identifier: MIT
"""Element types, and the formats NumPy does not have.

bfloat16 and the float8 formats are NumPy dtypes only through ml_dtypes.
When ml_dtypes is importable, pinmem.bfloat16, pinmem.float8_e4m3fn and
pinmem.float8_e5m2 are its dtypes. Otherwise they are raw storage dtypes
(uint16 for bfloat16, uint8 for the float8 formats) that carry the format's
name in the dtype's metadata: ``format_of(a)`` says 'BF16' for such an
array, and save_safetensors writes it as BF16. Arithmetic on the raw form
is arithmetic on bit patterns.
"""
import numpy as np

try:
    import ml_dtypes as _ml
except ImportError:  # not installed: raw storage with a format note
    _ml = None

HAVE_ML_DTYPES = _ml is not None

# Key of the dtype metadata entry that names a raw format.
FORMAT_KEY = "pinmem.format"


def _raw(storage, fmt):
    return np.dtype(storage, metadata={FORMAT_KEY: fmt})


if _ml is not None:
    bfloat16 = np.dtype(_ml.bfloat16)
    float8_e4m3fn = np.dtype(_ml.float8_e4m3fn)
    float8_e5m2 = np.dtype(_ml.float8_e5m2)
else:
    bfloat16 = _raw("<u2", "BF16")
    float8_e4m3fn = _raw("u1", "F8_E4M3")
    float8_e5m2 = _raw("u1", "F8_E5M2")

# safetensors name -> NumPy dtype. Formats NumPy cannot hold are absent.
_BY_NAME = {
    "BOOL": np.dtype(np.bool_),
    "U8": np.dtype("u1"), "I8": np.dtype("i1"),
    "U16": np.dtype("<u2"), "I16": np.dtype("<i2"), "F16": np.dtype("<f2"),
    "U32": np.dtype("<u4"), "I32": np.dtype("<i4"), "F32": np.dtype("<f4"),
    "U64": np.dtype("<u8"), "I64": np.dtype("<i8"), "F64": np.dtype("<f8"),
    "C64": np.dtype("<c8"),
    "BF16": bfloat16, "F8_E4M3": float8_e4m3fn, "F8_E5M2": float8_e5m2,
}


def from_name(name):
    """The NumPy dtype for a safetensors dtype name (KeyError if none)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError("pinmem: safetensors dtype %s has no NumPy form"
                       % name) from None


def format_of(x):
    """The safetensors name of an array's (or a dtype's) element format."""
    dt = x if isinstance(x, np.dtype) else getattr(x, "dtype", None)
    if dt is None:
        dt = np.dtype(x)
    meta = dt.metadata
    if meta and FORMAT_KEY in meta:
        return meta[FORMAT_KEY]
    if _ml is not None:
        for name in ("BF16", "F8_E4M3", "F8_E5M2"):
            if dt == _BY_NAME[name]:
                return name
    if dt.byteorder == ">" or (dt.byteorder == "=" and
                               np.little_endian is False):
        raise ValueError("pinmem: big-endian %s is not a safetensors type"
                         % dt)
    for name in ("BOOL", "U8", "I8", "U16", "I16", "F16", "U32", "I32",
                 "F32", "U64", "I64", "F64", "C64"):
        if dt == _BY_NAME[name]:
            return name
    raise ValueError("pinmem: %s is not a safetensors type" % dt)


def as_format(a, name):
    """A view of raw array a tagged with format name ('BF16', ...)."""
    dt = from_name(name)
    return a.view(dt)
