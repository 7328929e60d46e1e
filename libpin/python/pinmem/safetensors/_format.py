# SPDX-License-Identifier: MIT
"""The safetensors file layout as the safetensors library (0.7) writes and
checks it, for pinmem.safetensors.numpy/.torch.

Writing (byte for byte what safetensors 0.7 writes): an 8-byte
little-endian header length, a compact JSON header (no spaces) holding
"__metadata__" first when metadata is given, then every tensor sorted by
dtype, larger/later dtypes first in safetensors' Dtype order, and by name
within a dtype, their data back to back in that order; the header padded
with spaces to a multiple of 8 bytes.

Reading: the rules and messages of safetensors' read_metadata/validate,
raised as SafetensorError("Error while deserializing header: ...") (by
safe_open) or ("Error while deserializing: ...") (by load(bytes)).

Checked against huggingface/safetensors' source (safetensors/src/tensor.rs:
SafeTensorError's Display, read_metadata, Metadata::validate, prepare, the
Dtype enum; bindings/python/src/lib.rs: Open::new, deserialize): see
tests/python/test_st_compat.py for the lines each rule comes from.
"""
import errno
import json
import math
import os
import struct

from .._errors import PinError

MAX_HEADER_SIZE = 100_000_000
MAX_RANK = 4096         # libpin's limit (the format sets none)

# safetensors' Dtype enum in declaration order (tensor.rs, "They MUST be in
# increasing alignment order"; C64 between F32 and F64; the FNUZ float8s
# since 0.8): the writer's prepare() sorts by dtype descending, then by
# name.
DTYPE_ORDER = ["BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2",
               "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16",
               "U16", "F16", "BF16", "I32", "U32", "F32", "C64", "F64", "I64",
               "U64"]
BITS = {"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8,
        "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8,
        "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
        "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64,
        "U64": 64}
_RANK = {name: i for i, name in enumerate(DTYPE_ORDER)}

# Framework dtype names safetensors' serializer accepts (numpy's
# dtype.name, torch's str(dtype) after the dot) -> file dtype.
FROM_FRAMEWORK = {
    "bool": "BOOL", "int8": "I8", "uint8": "U8", "int16": "I16",
    "uint16": "U16", "int32": "I32", "uint32": "U32", "int64": "I64",
    "uint64": "U64", "float16": "F16", "float32": "F32", "float64": "F64",
    "bfloat16": "BF16", "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2",
    "float8_e8m0fnu": "F8_E8M0", "float8_e4m3fnuz": "F8_E4M3FNUZ",
    "float8_e5m2fnuz": "F8_E5M2FNUZ", "float4_e2m1fn_x2": "F4",
    "complex64": "C64",
}


class SafetensorError(Exception):
    """safetensors' error type (safetensors_rust.SafetensorError there)."""


SafetensorError.__module__ = "pinmem.safetensors"


class SafetensorPinError(SafetensorError, PinError):
    """libpin failed a load after the header passed: a SafetensorError, as
    safetensors' loaders raise for any load that fails, and a PinError
    (an OSError: .errno, libpin's words), since the cause is pinning
    (RLIMIT_MEMLOCK, memory) or libpin's reader, not the file's format as
    safetensors words it."""


SafetensorPinError.__module__ = "pinmem.safetensors"


HEADER_PREFIX = "Error while deserializing header: "   # safe_open
BYTES_PREFIX = "Error while deserializing: "            # load(bytes)


def _header_error(text):
    return SafetensorError(text)


# lib.rs parse_dtype_str (TensorSpec's constructor): the names it takes,
# in its order, for its error text.
_SUPPORTED = ("bool, int8, uint8, int16, uint16, int32, uint32, int64, "
              "uint64, float16, float32, float64, bfloat16, float8_e4m3fn, "
              "float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, "
              "float8_e8m0fnu, float4_e2m1fn_x2, complex64")


def file_dtype(framework_name):
    try:
        return FROM_FRAMEWORK[framework_name]
    except KeyError:
        raise SafetensorError("Unknown dtype %s. Supported dtypes: %s" %
                              (json.dumps(framework_name), _SUPPORTED)) \
            from None


def _jstr(s):
    # serde_json and json.dumps(ensure_ascii=False) escape alike: \" \\
    # \b \f \n \r \t, other control characters as \u00xx.
    return json.dumps(s, ensure_ascii=False)


def serialize(entries, metadata):
    """entries: list of (name, file dtype, shape, bytes-like). Returns the
    list of buffers making the file, in order (header first)."""
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise TypeError("argument 'metadata': '%s' object cannot be "
                            "converted to 'PyDict'" % type(metadata).__name__)
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                bad = k if not isinstance(k, str) else v
                raise TypeError("argument 'metadata': '%s' object cannot be "
                                "converted to 'PyString'" %
                                type(bad).__name__)
    order = sorted(entries, key=lambda e: (-_RANK[e[1]], e[0]))
    parts = []
    if metadata is not None:
        parts.append('"__metadata__":{%s}' % ",".join(
            "%s:%s" % (_jstr(k), _jstr(v)) for k, v in metadata.items()))
    off = 0
    datas = []
    for name, dt, shape, data in order:
        n = memoryview(data).nbytes
        nbits = math.prod(shape) * BITS[dt]
        if nbits % 8 or nbits // 8 != n:
            raise SafetensorError("tensor of type %s and shape %s can't be "
                                  "created from %d bytes" %
                                  (dt, list(shape), n))
        parts.append('%s:{"dtype":"%s","shape":[%s],"data_offsets":[%d,%d]}'
                     % (_jstr(name), dt, ",".join(str(int(s)) for s in shape),
                        off, off + n))
        off += n
        datas.append(data)
    head = ("{" + ",".join(parts) + "}").encode("utf-8")
    head += b" " * ((8 - len(head) % 8) % 8)
    return [struct.pack("<Q", len(head)), head] + datas


def _utf8_error(e, n):
    # Rust's Utf8Error: a sequence cut off by the end of the header has no
    # error length and is worded apart.
    if e.reason == "unexpected end of data" and e.end == n:
        return "invalid UTF-8 in header: incomplete utf-8 byte sequence " \
               "from index %d" % e.start
    return "invalid UTF-8 in header: invalid utf-8 sequence of %d bytes " \
           "from index %d" % (e.end - e.start, e.start)


def parse_header(head8, read, total):
    """Check a file's header the way safetensors does. head8: its first
    (up to) 8 bytes; read(n): the next n bytes; total: the file's size.
    Returns (metadata or None, [(name, dtype, shape, begin, end)] in offset
    order, data start). Errors are SafetensorError(reason), without the
    prefix the caller adds."""
    if total < 8 or len(head8) < 8:
        raise _header_error("header too small")
    (n,) = struct.unpack("<Q", head8[:8])
    if n > MAX_HEADER_SIZE:
        raise _header_error("header too large")
    if n + 8 > total:
        raise _header_error("invalid header length")
    raw = read(n)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _header_error(_utf8_error(e, len(raw))) from None
    # The format says the header MUST begin with "{", and libpin's reader
    # holds to that. safetensors' Rust reader has this check commented out
    # (it lets serde_json skip leading whitespace); pinmem raises
    # safetensors' own InvalidHeaderStart text instead of loading.
    if not text.startswith("{"):
        raise _header_error("invalid start character in header, must be `{`")
    obj = _json_header(text)
    meta = None
    tensors = []
    for name, e in obj:
        if name == "__metadata__":
            if e is None:       # no metadata (MLX writes null)
                continue
            if isinstance(e, _Pairs):
                e = dict(e)
            if not isinstance(e, dict) or not all(
                    isinstance(v, str) for v in e.values()):
                raise _header_error("invalid JSON in header: __metadata__ "
                                    "is not a map of strings")
            meta = e
            continue
        tensors.append((name, _entry(name, e)))
    tensors.sort(key=lambda t: (t[1][2], t[1][3]))
    start = 0
    out = []
    for name, (dt, shape, b, e) in tensors:
        if b != start or e < b:
            raise _header_error("invalid offset for tensor `%s`" % name)
        start = e
        nbits = _nbits(shape, dt)
        if nbits % 8:
            raise _header_error("The slice is slicing for subbytes dtypes, "
                                "and the slice does not end up at a byte "
                                "boundary, this is invalid.")
        if nbits // 8 != e - b:
            raise _header_error("invalid shape, data type, or offset for "
                                "tensor")
        out.append((name, dt, shape, b, e))
    if start + 8 + n != total:
        raise _header_error("incomplete metadata, file not fully covered" +
                            _truncated(out, total - 8 - n))
    return meta, out, 8 + n


def _truncated(out, data_len):
    """What is missing of a file cut short, in libpin's words (pinload and
    pinmem.load_safetensors say the same), after safetensors' text."""
    for name, _dt, _shape, _b, e in out:
        if e > data_len:
            return ": tensor %s: data_offsets end %d past the end of the " \
                   "data section (%d bytes; file truncated?)" % \
                   (json.dumps(name, ensure_ascii=False), e, data_len)
    return ""


def _json_header(text):
    """The header's JSON as [(key, value)] (objects inside as dicts), held
    to what libpin's reader takes: after the value only spaces (the
    format's padding), no key twice in an object (the format disallows
    duplicates), no lone surrogate or NUL in a string, numbers as written
    (-0 is no unsigned integer)."""
    dec = json.JSONDecoder(object_pairs_hook=_pairs,
                           parse_int=lambda t: -1 if t[0] == "-" else int(t))
    try:
        obj, end = dec.raw_decode(text)
    except _Refused as e:
        raise _header_error("invalid JSON in header: %s" % e) from None
    except ValueError as e:
        raise _header_error("invalid JSON in header: %s" % e) from None
    except RecursionError:
        # Python's decoder recurses per level; libpin's stops at 64, and
        # no valid header nests deeper than 3.
        raise _header_error("invalid JSON in header: nesting too deep "
                            "(recursion limit exceeded)") from None
    if text[end:].strip(" "):
        raise _header_error("invalid JSON in header: trailing characters "
                            "(the header is padded with spaces only)")
    if not isinstance(obj, _Pairs):
        raise _header_error("invalid JSON in header: not an object")
    return obj


class _Refused(ValueError):
    pass


class _Pairs(list):
    """The top-level object's pairs, in order (objects below are dicts)."""


def _text_ok(s):
    if "\0" in s:
        raise _Refused("NUL (\\u0000) in string %r" % s)
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise _Refused("lone surrogate in string %r" % s) from None


def _pairs(pairs):
    seen = set()
    for k, v in pairs:
        if k in seen:
            raise _Refused("duplicate key `%s`" % k)
        seen.add(k)
        _text_ok(k)
        if isinstance(v, str):
            _text_ok(v)
    return _Pairs(pairs)


def _nbits(shape, dt):
    """Bits of a tensor, the element count checked for u64 overflow in
    the order safetensors (and libpin) multiply."""
    n = 1
    for d in shape:
        n *= d
        if n >= 1 << 64:
            raise _header_error("overflow computing buffer size from shape "
                                "and/or element type")
    if n * BITS[dt] >= 1 << 64:
        raise _header_error("overflow computing buffer size from shape "
                            "and/or element type")
    return n * BITS[dt]


def _u64(x):
    return isinstance(x, int) and not isinstance(x, bool) and \
        0 <= x < 1 << 64


def _entry(name, e):
    if isinstance(e, _Pairs):
        e = dict(e)
    ok = isinstance(e, dict) and set(e) == {"dtype", "shape", "data_offsets"}
    if ok:
        dt, shape, offs = e["dtype"], e["shape"], e["data_offsets"]
        ok = isinstance(dt, str) and isinstance(shape, list) and \
            isinstance(offs, list) and len(offs) == 2 and \
            all(_u64(x) for x in shape + offs)
    if not ok:
        raise _header_error("invalid JSON in header: tensor `%s` is not "
                            "{dtype, shape, data_offsets}" % name)
    if len(shape) > MAX_RANK:
        raise _header_error("tensor `%s` has %d dimensions (pinmem takes "
                            "at most %d)" % (name, len(shape), MAX_RANK))
    if dt not in BITS:
        raise _header_error("invalid JSON in header: unknown variant `%s`, "
                            "expected one of %s" %
                            (dt, ", ".join("`%s`" % d for d in DTYPE_ORDER)))
    return dt, tuple(shape), offs[0], offs[1]


def prefixed(prefix, fn, *args):
    """fn(*args), its SafetensorError's text prefixed as safetensors does."""
    try:
        return fn(*args)
    except SafetensorError as e:
        raise SafetensorError(prefix + str(e)) from None


def parse_bytes(data):
    """parse_header over a whole file image in memory (load(bytes)'s
    wording: "Error while deserializing: ...")."""
    return prefixed(BYTES_PREFIX, _parse_bytes, data)


def _parse_bytes(data):
    data = memoryview(data)
    pos = [8]

    def read(k):
        b = bytes(data[pos[0]:pos[0] + k])
        pos[0] += k
        return b
    return parse_header(bytes(data[:8]), read, data.nbytes)


def open_file(filename):
    """filename opened for reading, or path_error()'s error."""
    try:
        return open(filename, "rb")
    except OSError as e:
        raise path_error(e, filename) from None


def path_error(e, filename):
    """The error every pinmem loader raises for a file it cannot open (e:
    the OSError of opening it): safetensors' FileNotFoundError("No such
    file or directory: PATH"), the path as Rust's Path::display() prints
    it (unquoted), with .errno ENOENT, for a file that is missing or
    cannot be opened for another reason; but Python's own OSError, naming
    errno and path, where saying "missing" would mislead:
    IsADirectoryError for a directory (safetensors' is an OSError too,
    ENODEV from mapping it), PermissionError (EACCES, EPERM) for a file
    this user may not read."""
    if isinstance(e, (IsADirectoryError, PermissionError)):
        return type(e)(e.errno, e.strerror, os.fsdecode(filename))
    return not_found(filename)


def parse_file(filename):
    """parse_header of a file, safe_open's wording; open_file's errors."""
    f = open_file(filename)
    with f:
        total = os.fstat(f.fileno()).st_size
        return prefixed(HEADER_PREFIX, parse_header, f.read(8), f.read,
                        total)


def not_found(filename):
    """safetensors' FileNotFoundError, with .errno ENOENT (its text stays
    safetensors': Python words an OSError given a filename otherwise)."""
    e = FileNotFoundError("No such file or directory: %s" %
                          os.fsdecode(filename))
    e.errno = errno.ENOENT
    return e
