# SPDX-License-Identifier: MIT
"""Element types, and the formats NumPy does not have.

NumPy has no bfloat16 or float8. With ml_dtypes installed, pinmem.bfloat16,
pinmem.float8_e4m3fn and pinmem.float8_e5m2 are its dtypes, with real
arithmetic. Without it they do not exist (AttributeError, saying why):
a uint16 standing in for bfloat16 would let ``np.ones(n, pinmem.bfloat16)``
hold the integer 1 (bits 0x0001) and be saved as "BF16" -- a silently
wrong checkpoint. Use pinmem.torch (torch.bfloat16) for those formats.

Tensors of such a format that NumPy reads without ml_dtypes come back as
raw void dtypes ('V2' for BF16, 'V1' for F8, packed bytes for F4/F6):
they have no arithmetic and no safetensors name, so no save path can label
them; saving them back needs the format said explicitly
(save_safetensors(..., formats={name: "BF16"})).
"""
import numpy as np

try:
    import ml_dtypes as _ml
except ImportError:  # not installed: no NumPy form for BF16/F8
    _ml = None

HAVE_ML_DTYPES = _ml is not None

# Formats NumPy holds only through ml_dtypes: name -> (ml_dtypes type name,
# bytes per element).
_ML_FORMATS = {"BF16": ("bfloat16", 2), "F8_E4M3": ("float8_e4m3fn", 1),
               "F8_E5M2": ("float8_e5m2", 1)}

WHY_NOT = ("NumPy has no %s without ml_dtypes (not installed), and an "
           "integer stand-in would be saved as that format over integer "
           "values; use pinmem.torch (torch tensors) or install ml_dtypes")

# safetensors name -> NumPy dtype. Formats NumPy cannot hold are absent.
_BY_NAME = {
    "BOOL": np.dtype(np.bool_),
    "U8": np.dtype("u1"), "I8": np.dtype("i1"),
    "U16": np.dtype("<u2"), "I16": np.dtype("<i2"), "F16": np.dtype("<f2"),
    "U32": np.dtype("<u4"), "I32": np.dtype("<i4"), "F32": np.dtype("<f4"),
    "U64": np.dtype("<u8"), "I64": np.dtype("<i8"), "F64": np.dtype("<f8"),
    "C64": np.dtype("<c8"),
}
if _ml is not None:
    bfloat16 = np.dtype(_ml.bfloat16)
    float8_e4m3fn = np.dtype(_ml.float8_e4m3fn)
    float8_e5m2 = np.dtype(_ml.float8_e5m2)
    _BY_NAME.update({"BF16": bfloat16, "F8_E4M3": float8_e4m3fn,
                     "F8_E5M2": float8_e5m2})

_ATTR_FORMAT = {v[0]: k for k, v in _ML_FORMATS.items()}


def __getattr__(name):
    """pinmem.bfloat16 and the float8 names without ml_dtypes: refuse."""
    if name in _ATTR_FORMAT:
        raise AttributeError("pinmem.%s: " % name +
                             WHY_NOT % _ATTR_FORMAT[name])
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def from_name(name):
    """The NumPy dtype for a safetensors dtype name (KeyError if none)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        if name in _ML_FORMATS:
            raise KeyError("pinmem: safetensors dtype %s: " % name +
                           WHY_NOT % name) from None
        raise KeyError("pinmem: safetensors dtype %s has no NumPy form"
                       % name) from None


# Newer formats ml_dtypes has (in the versions that have them), which
# NumPy's loaders leave as raw bytes (safetensors' NumPy loader has no
# name for them either); JAX, which requires ml_dtypes, takes them.
_ML_NEWER = {"F8_E8M0": "float8_e8m0fnu", "F8_E4M3FNUZ": "float8_e4m3fnuz",
             "F8_E5M2FNUZ": "float8_e5m2fnuz"}


def ml_dtype(name):
    """The ml_dtypes dtype of a safetensors format (BF16, the float8s),
    None where ml_dtypes (absent, or this version) has none."""
    if _ml is None:
        return None
    attr = _ML_NEWER.get(name) or _ML_FORMATS.get(name, (None,))[0]
    t = getattr(_ml, attr, None) if attr else None
    return np.dtype(t) if t is not None else None


def raw_dtype(name, bits):
    """The raw stand-in for a format NumPy lacks: void bytes of the
    element's size (or single bytes for sub-byte formats), nameless."""
    return np.dtype("V%d" % (bits // 8 if bits % 8 == 0 else 1))


def format_of(x):
    """The safetensors name of an array's (or a dtype's) element format.
    ValueError for dtypes that have none (raw void bytes included)."""
    dt = x if isinstance(x, np.dtype) else getattr(x, "dtype", None)
    if dt is None:
        dt = np.dtype(x)
    # ml_dtypes' types first: newer ml_dtypes give them kind "V" too.
    if _ml is not None:
        for name in _ML_FORMATS:
            if dt == _BY_NAME[name]:
                return name
    if dt.kind == "V":
        raise ValueError("pinmem: %s is raw bytes of a format NumPy does not "
                         "have; say which (formats={name: 'BF16'}) to save "
                         "it" % dt)
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
    """A view of a with the NumPy dtype of format name (KeyError, saying
    why, where NumPy has none: BF16/F8 without ml_dtypes)."""
    return a.view(from_name(name))
