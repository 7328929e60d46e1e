# SPDX-License-Identifier: GPL-2.0
"""A seeded corpus of safetensors file images for test_st_differential.py:
the real safetensors library and pinmem's readers must agree on every one.
This module makes the valid ones (valid(n)) and the file model that
st_invalid.py breaks for the invalid ones.

Every image is made here byte by byte (its JSON by this module's own
writer), not by either library under test. valid(n) and
st_invalid.invalid(n) give lists of Case; the same n and SEED always give
the same bytes.

A Case's `lax` names why the real library accepts a file the format
forbids (pinmem refuses it); `limit` names a limit of pinmem's own that
the format does not set (the real library accepts the file, pinmem
refuses it). The format's rules (huggingface/safetensors, README,
"Format"): an 8-byte little-endian header size N; N bytes of UTF-8 JSON
that MUST begin with "{" and MAY be padded at the end with spaces (0x20);
duplicate keys are disallowed; "__metadata__" is a map of strings; each
tensor is {"dtype", "shape", "data_offsets": [BEGIN, END]} relative to
the data section, which the tensors must index entirely, without holes.
"""
import os
import random
import struct
from collections import namedtuple

SEED = 20261202
MAX_HEADER = 100_000_000

# The real library's dtypes (safetensors 0.8's Dtype enum) and their bits.
BITS = {"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8,
        "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8,
        "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
        "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64,
        "U64": 64}
DTYPES = sorted(BITS)

Case = namedtuple("Case", "id blob lax limit")
Case.__new__.__defaults__ = (None, None)

# Name pieces: plain, dotted, unicode, and characters JSON must escape.
_NAME_PARTS = ["w", "weight", "model.layers.0.attn.q_proj", "bias", "x",
               "emb\u00e9", "\u4e2d\u6587", "\U0001f600", "tab\there",
               "quote\"d", "back\\slash", "new\nline", "ctl\x01\x1f",
               "slash/ed", "sp ace", "\u00ff\u0100", "\u2028sep",
               "\U0010ffff", "__meta", "0", "-", "\x7f"]


def le64(n):
    return struct.pack("<Q", n)


def jstr(s, rng):
    """s as a JSON string, escaped in one of several valid ways."""
    out = ['"']
    for ch in s:
        c = ord(ch)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch == "/" and rng.random() < 0.5:
            out.append("\\/")
        elif ch in "\b\f\n\r\t" and rng.random() < 0.7:
            out.append({"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
                        "\t": "\\t"}[ch])
        elif c < 0x20:
            out.append("\\u%04x" % c)
        elif c > 0x7e and rng.random() < 0.4:
            if c > 0xffff:
                c -= 0x10000
                out.append("\\u%04X\\u%04x" % (0xd800 + (c >> 10),
                                                0xdc00 + (c & 0x3ff)))
            else:
                out.append("\\u%04x" % c)
        elif ch.isalpha() and c < 0x7f and rng.random() < 0.05:
            out.append("\\u%04x" % c)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


class Ws:
    """Whitespace between JSON tokens: none, or a little of RFC 8259's."""

    def __init__(self, rng, spaced):
        self.rng = rng
        self.spaced = spaced

    def __call__(self):
        if not self.spaced or self.rng.random() < 0.5:
            return ""
        return "".join(self.rng.choice(" \n\t\r")
                       for _ in range(self.rng.randint(1, 3)))


def jobj(pairs, ws):
    """pairs: [(key JSON text, value JSON text)] -> object text."""
    items = ["%s%s:%s%s" % (ws(), k, ws(), v) for k, v in pairs]
    return "{" + ",".join(items) + ws() + "}"


def jarr(nums, ws):
    return "[" + ",".join(ws() + str(n) + ws() for n in nums) + "]"


def nbytes_of(dtype, shape):
    n = 1
    for d in shape:
        n *= d
    return n * BITS[dtype] // 8


def random_shape(rng, dtype):
    r = rng.random()
    if r < 0.1:
        shape = []
    elif r < 0.15:
        shape = [1] * rng.randint(7, 64) + [rng.randint(0, 3)]
    else:
        shape = [rng.choice([0, 1, 1, 2, 3, 4, 5, 8])
                 for _ in range(rng.randint(1, 5))]
    if BITS[dtype] % 8:
        need = 8 // (BITS[dtype] & -BITS[dtype])   # elements per byte run
        if not shape:
            shape = [need]
        n = 1
        for d in shape:
            n *= d
        if n % need:
            shape[-1] = need * rng.randint(1, 3)
            if 0 in shape:
                shape[shape.index(0)] = 1
    return shape


class Model:
    """A file before it is written: tensors, metadata and how to write
    them. Mutators of invalid() change it or its bytes."""

    def __init__(self, rng, ntensors=None):
        self.rng = rng
        n = rng.randint(0, 6) if ntensors is None else ntensors
        names = set()
        self.tensors = []       # [name, dtype, shape, data]
        while len(self.tensors) < n:
            name = "".join(rng.choice(_NAME_PARTS)
                           for _ in range(rng.randint(1, 3)))
            if rng.random() < 0.3:
                name += ".%d" % rng.randint(0, 99)
            if name in names or name == "__metadata__":
                continue
            names.add(name)
            dt = rng.choice(DTYPES)
            shape = random_shape(rng, dt)
            data = bytes(rng.getrandbits(8)
                         for _ in range(nbytes_of(dt, shape)))
            self.tensors.append([name, dt, shape, data])
        r = rng.random()
        self.meta_null = r < 0.1
        if r < 0.35:
            self.meta = None
        elif r < 0.45:
            self.meta = {}
        else:
            self.meta = {}
            for i in range(rng.randint(1, 5)):
                k = rng.choice(["format", "k%d" % i, "\u00e9t\u00e9",
                                "q\"x", "", "nl\n"]) + str(i)
                self.meta[k] = rng.choice(["pt", "", "\U0001f680 rocket",
                                           "a\\b", "x" * rng.randint(0, 40),
                                           "{\"json\": 1}"])
        # Where each tensor's data lies: a random order, not header order.
        self.data_order = list(range(n))
        rng.shuffle(self.data_order)
        self.header_order = list(range(n))
        rng.shuffle(self.header_order)
        self.meta_at = rng.randint(0, n)
        self.spaced = rng.random() < 0.3
        self.pad = rng.choice([0, 0, 1, 3, 5, 7, 8, 13, 64,
                               rng.randint(0, 300)])
        self.offsets = {}
        at = 0
        for i in self.data_order:
            size = len(self.tensors[i][3])
            self.offsets[i] = [at, at + size]
            at += size

    def entry_pairs(self, ws):
        """[(key text, value text)] of the header, in header order."""
        rng = self.rng
        pairs = []
        for i in self.header_order:
            name, dt, shape, _ = self.tensors[i]
            fields = [('"dtype"', jstr(dt, rng)),
                      ('"shape"', jarr(shape, ws)),
                      ('"data_offsets"', jarr(self.offsets[i], ws))]
            rng.shuffle(fields)
            pairs.append((jstr(name, rng), jobj(fields, ws)))
        if self.meta is not None:
            mobj = jobj([(jstr(k, rng), jstr(v, rng))
                         for k, v in self.meta.items()], ws)
            pairs.insert(self.meta_at, ('"__metadata__"', mobj))
        elif self.meta_null:
            # null: no metadata, as MLX writes it and safetensors reads it
            pairs.insert(self.meta_at, ('"__metadata__"', "null"))
        return pairs

    def header(self):
        ws = Ws(self.rng, self.spaced)
        return jobj(self.entry_pairs(ws), ws).encode("utf-8")

    def data(self):
        out = bytearray()
        for i in self.data_order:
            out += self.tensors[i][3]
        return bytes(out)

    def image(self, header=None, pad=None, data=None):
        h = self.header() if header is None else header
        h += b" " * (self.pad if pad is None else pad)
        return le64(len(h)) + h + (self.data() if data is None else data)


def _special_valid():
    """Edges the random models rarely reach."""
    rng = random.Random(SEED + 1)
    def img(h, data=b""):
        return le64(len(h)) + h + data
    out = [Case("valid-empty-object", img(b"{}")),
           Case("valid-empty-padded-8", img(b"{}      ")),
           Case("valid-empty-metadata", img(b'{"__metadata__":{}}')),
           Case("valid-spaces-inside", img(b"{ \n\t}")),
           Case("valid-0d", img(b'{"s":{"dtype":"F64","shape":[],'
                                b'"data_offsets":[0,8]}}' + b" " * 7,
                                b"\x00" * 7 + b"\x3f"))]
    # Zero-size tensors at one offset, between and after others.
    h = (b'{"a":{"dtype":"F32","shape":[0,3],"data_offsets":[4,4]},'
         b'"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},'
         b'"c":{"dtype":"BF16","shape":[2,0],"data_offsets":[4,4]},'
         b'"d":{"dtype":"I64","shape":[0],"data_offsets":[0,0]}}')
    out.append(Case("valid-empty-tensors-share-offsets",
                    le64(len(h)) + h + b"abcd"))
    # Rank 64 and a rank the format allows up to pinmem's 4096.
    for rank in (64, 4096):
        h = ('{"r":{"dtype":"U8","shape":[%s],"data_offsets":[0,2]}}' %
             ",".join(["1"] * (rank - 1) + ["2"])).encode()
        out.append(Case("valid-rank-%d" % rank, le64(len(h)) + h + b"xy"))
    # Big shapes whose product is small (a zero dimension).
    h = (b'{"z":{"dtype":"U64","shape":[4294967295,0,4294967295],'
         b'"data_offsets":[0,0]}}')
    out.append(Case("valid-huge-dims-zero-product", le64(len(h)) + h))
    # A large header, and with $PINMEM_ST_CORPUS_FULL=1 one exactly at
    # the limit (100 MB: seconds on a host, minutes in an emulated guest).
    sizes = [1 << 20]
    if os.environ.get("PINMEM_ST_CORPUS_FULL") == "1":
        sizes.append(MAX_HEADER)
    for n in sizes:
        h = b'{"__metadata__":{"k":"v"}}'
        out.append(Case("valid-header-%d" % n,
                        le64(n) + h + b" " * (n - len(h))))
    # A large metadata map.
    m = Model(rng, 2)
    m.meta = {"k%05d" % i: "v" * (i % 50) for i in range(5000)}
    out.append(Case("valid-metadata-5000", m.image()))
    return out


def valid(n=520):
    rng = random.Random(SEED)
    out = _special_valid()
    while len(out) < n:
        m = Model(rng)
        out.append(Case("valid-%03d" % len(out), m.image()))
    return out
