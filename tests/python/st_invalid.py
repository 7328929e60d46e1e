# SPDX-License-Identifier: GPL-2.0
"""The invalid half of the safetensors corpus (st_corpus.py has the valid
half and the file model both use): invalid(n) gives n Cases, each a file
that breaks one rule of the format (truncated, holes, overlaps, bad JSON,
wrong dtypes and sizes, non-UTF-8, numbers past u64, trailing bytes...),
or one that the real library takes though the format forbids it (LAX) or
that is past a limit of pinmem's own (LIMIT), with the reason.
"""
import random
import struct

from st_corpus import (BITS, DTYPES, MAX_HEADER, SEED, Case, Model, Ws,
                       jarr, jobj, le64, nbytes_of)


def _model_with_tensors(rng, least=1):
    while True:
        m = Model(rng)
        if len(m.tensors) >= least and any(t[3] for t in m.tensors):
            return m


def _nonempty(m):
    return [i for i, t in enumerate(m.tensors) if t[3]]


def bad_truncated(rng):
    m = _model_with_tensors(rng)
    img = m.image()
    hl = 8 + struct.unpack("<Q", img[:8])[0]
    cut = rng.choice([rng.randint(1, len(img) - hl),        # in the data
                      len(img) - rng.randint(0, 7),         # in the size
                      len(img) - hl + rng.randint(1, hl - 8)])  # header
    return img[:len(img) - cut] if cut < len(img) else img[:rng.randint(
        0, 7)]


def bad_trailing_garbage(rng):
    m = Model(rng)
    return m.image() + bytes(rng.getrandbits(8)
                             for _ in range(rng.randint(1, 9)))


def bad_header_size(rng):
    m = Model(rng)
    img = m.image()
    n = struct.unpack("<Q", img[:8])[0]
    choice = rng.randint(0, 5)
    if choice == 0:
        n = len(img) - 8 + rng.randint(1, 100)   # past the end of the file
    elif choice == 1:
        n = 2 ** 64 - rng.randint(1, 1000)
    elif choice == 2:
        n = MAX_HEADER + rng.randint(1, 10)
    elif choice == 3:
        n = max(n - rng.randint(1, 40), 0) if n > 2 else 1   # cuts JSON
    elif choice == 4:
        n = 0
    else:
        n += rng.randint(1, 3) + len(m.data())  # takes in the data
    return le64(n) + img[8:]


def bad_gap(rng):
    m = _model_with_tensors(rng)
    i = rng.choice(list(m.offsets))
    k = rng.randint(1, 16)
    shifted = False
    for j in m.data_order:
        if j == i:
            shifted = True
        if shifted:
            m.offsets[j] = [m.offsets[j][0] + k, m.offsets[j][1] + k]
    return m.image(data=m.data() + b"\0" * k)


def bad_overlap(rng):
    m = _model_with_tensors(rng, 2)
    ne = _nonempty(m)
    i = rng.choice(ne)
    b, e = m.offsets[i]
    j = rng.choice([x for x in m.offsets if x != i])
    size = m.offsets[j][1] - m.offsets[j][0]
    start = rng.randint(max(b - size + 1, 0), e - 1) if size else \
        rng.randint(b, e - 1)
    if size == 0:
        # a second nonempty tensor starting inside the first
        m.tensors[j][1] = "U8"
        m.tensors[j][2] = [e - start]
        size = e - start
        if start == b:
            start += 1
            m.tensors[j][2] = [e - start] if e - start else [1]
            size = m.tensors[j][2][0]
    m.offsets[j] = [start, start + size]
    return m.image()


def bad_end_before_begin(rng):
    m = _model_with_tensors(rng)
    i = rng.choice(_nonempty(m))
    b, e = m.offsets[i]
    m.offsets[i] = [e, b]
    return m.image()


def bad_shape_size(rng):
    m = _model_with_tensors(rng)
    i = rng.choice(list(m.offsets))
    t = m.tensors[i]
    if t[2] and rng.random() < 0.7:
        d = rng.randrange(len(t[2]))
        t[2][d] += rng.choice([1, 2]) if t[2][d] == 0 else rng.choice(
            [-1, 1, 2])
    else:
        t[2] = t[2] + [rng.choice([2, 3, 0])] if t[3] else [1]
    if nbytes_of(t[1], t[2]) == len(t[3]):      # the change made up for it
        t[2] = [len(t[3]) + 1, 8]
    return m.image()


def bad_dtype_size(rng):
    m = _model_with_tensors(rng)
    i = rng.choice(_nonempty(m))
    t = m.tensors[i]
    other = [d for d in DTYPES if BITS[d] != BITS[t[1]]]
    t[1] = rng.choice(other)
    return m.image()


_UNKNOWN_DTYPES = ["f32", "F8", "FLOAT32", "", "F8_E4M3FN", "Q4_0", "I128",
                   "U4", "F32 ", " F32", "bf16", "F6", "c64", "BOOL8",
                   "F8_E4M3FNUZ\u0000", "string", "F16\n"]


def bad_dtype_name(rng):
    m = _model_with_tensors(rng)
    i = rng.choice(list(m.offsets))
    m.tensors[i][1] = rng.choice(_UNKNOWN_DTYPES)
    BITS.setdefault(m.tensors[i][1], 8)
    try:
        return m.image()
    finally:
        for d in _UNKNOWN_DTYPES:
            if d not in DTYPES:
                BITS.pop(d, None)


def bad_json(rng):
    m = _model_with_tensors(rng)
    h = m.header()
    c = rng.randint(0, 11)
    if c == 0:      # a structural character dropped
        pos = [k for k, ch in enumerate(h) if ch in b'{}[]:,"'][1:]
        k = rng.choice(pos)
        h = h[:k] + h[k + 1:]
    elif c == 1:    # a trailing comma
        h = h[:-1] + b",}"
    elif c == 2:    # single quotes
        h = h.replace(b'"dtype"', b"'dtype'", 1)
    elif c == 3:    # an unquoted key
        h = h.replace(b'"shape"', b"shape", 1)
    elif c == 4:    # a comment
        h = b"{/* c */" + h[1:]
    elif c == 5:    # two objects
        h = h + h
    elif c == 6:    # NaN or Infinity for a number
        h = h.replace(b'"shape":[', b'"shape":[%s,' % rng.choice(
            [b"NaN", b"Infinity", b"-Infinity"]), 1)
    elif c == 7:    # a bad escape
        h = h[:1] + b'"\\x41":{},' + h[1:] if len(h) > 2 else b'{"\\q":1}'
    elif c == 8:    # a raw control character in a string
        h = h[:2] + bytes([rng.randint(0, 0x1f)]) + h[2:]
    elif c == 9:    # unterminated
        h = h[:rng.randint(1, len(h) - 1)]
    elif c == 10:   # not an object
        h = rng.choice([b"[]", b'"x"', b"1", b"null", b"true", b"[{}]"])
    else:           # a truncated \u escape
        h = h[:1] + b'"\\u12' + b'":{},' + h[1:]
    return le64(len(h)) + h + m.data()


def bad_non_utf8(rng):
    m = _model_with_tensors(rng)
    seq = rng.choice([b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xe2\x82",
                      b"\xf5\x80\x80\x80", b"\x80", b"\xf0\x82\x82\xac",
                      b"\xc3"])
    # inside the first tensor name, or before the closing brace, or after
    # the JSON
    h, k = _first_name_at(m)
    if rng.random() < 0.2:
        k = len(h) - 1
    if rng.random() < 0.15:
        return le64(len(h) + len(seq)) + h + seq + m.data()
    h = h[:k] + seq + h[k:]
    return le64(len(h)) + h + m.data()


def bad_numbers(rng):
    m = _model_with_tensors(rng)
    i = rng.choice(list(m.offsets))
    t = m.tensors[i]
    c = rng.randint(0, 7)
    h = m.header()
    shape_txt = jarr(t[2], lambda: "").encode()
    off_txt = jarr(m.offsets[i], lambda: "").encode()
    key = b'"shape":' if rng.random() < 0.5 else b'"data_offsets":'
    old = shape_txt if key == b'"shape":' else off_txt
    new = [b"[18446744073709551616,0]", b"[-1]", b"[2.0]", b"[1e400]",
           b"[4294967296,4294967296,0]", b"[-0]", b"[1E1]",
           b"[99999999999999999999999999]"][c]
    if key == b'"data_offsets":':
        new = [b"[18446744073709551616,18446744073709551616]",
               b"[-1,0]", b"[0.0,%d]" % m.offsets[i][1],
               b"[0,1e400]", b"[0,18446744073709551615]", b"[-0,-0]",
               b"[0E0,0]", b"[0]"][c]
    if key + old not in h:
        return m.image(header=h.replace(b'"shape":[', b'"shape":[-1,', 1))
    h = h.replace(key + old, key + new, 1)
    return m.image(header=h)


def bad_metadata(rng):
    m = Model(rng)
    h = m.header()
    v = rng.choice([b"1", b"[]", b'{"a":1}', b'"x"', b"true",
                    b'{"a":["b"]}', b'{"a":null}', b'{"a":{"b":"c"}}',
                    b'{"a":1.5}'])
    body = h[1:-1]
    h = b'{"__metadata__":' + v + (b"," + body if body.strip() else b"") + \
        b"}"
    if b'"__metadata__":{' in body or b'"__metadata__"' in body:
        m.meta = None
        h = b'{"__metadata__":' + v + b"," + m.header()[1:]
        if h.endswith(b",}"):
            h = h[:-2] + b"}"
    return m.image(header=h)


def bad_fields(rng):
    """A tensor entry with a field missing or of the wrong type."""
    m = _model_with_tensors(rng)
    vals = ['{"shape":[1],"data_offsets":[0,1]}',          # no dtype
            '{"dtype":"U8","data_offsets":[0,1]}',         # no shape
            '{"dtype":"U8","shape":[1]}',                  # no offsets
            '{"dtype":"U8","shape":"1","data_offsets":[0,1]}',
            '{"dtype":"U8","shape":[1],"data_offsets":[0,1,1]}',
            '{"dtype":"U8","shape":[1],"data_offsets":[1]}',
            '{"dtype":["U8"],"shape":[1],"data_offsets":[0,1]}',
            '{"dtype":"U8","shape":[true],"data_offsets":[0,1]}',
            '{"dtype":"U8","shape":[1],"data_offsets":{"0":1}}',
            '[0,1]', '"U8"', "null"]
    ws = Ws(rng, False)
    pairs = m.entry_pairs(ws)
    k = rng.choice([j for j, p in enumerate(pairs)
                    if p[0] != '"__metadata__"'])
    pairs[k] = (pairs[k][0], rng.choice(vals))
    return m.image(header=jobj(pairs, ws).encode("utf-8"))


def bad_subbyte(rng):
    dt = rng.choice(["F4", "F6_E2M3", "F6_E3M2"])
    n = rng.choice([1, 3, 5, 7]) if dt == "F4" else rng.choice([1, 2, 3, 5])
    nb = (n * BITS[dt] + 7) // 8
    h = ('{"t":{"dtype":"%s","shape":[%d],"data_offsets":[0,%d]}}' %
         (dt, n, nb)).encode()
    return le64(len(h)) + h + b"\x11" * nb


def bad_lone_surrogate(rng):
    m = _model_with_tensors(rng)
    esc = rng.choice([b"\\ud800", b"\\udc00", b"\\udbff\\u0041",
                      b"\\ud83d", b"\\ude00\\ud83d"])
    h, k = _first_name_at(m)
    h = h[:k] + esc + h[k:]
    return le64(len(h)) + h + m.data()


def bad_padding(rng):
    m = Model(rng)
    h = m.header() + b" " * rng.randint(0, 3) + rng.choice(
        [b"\x00", b"x", b"}", b"\x00" * 4, b" 0", b"\xa0"])
    return le64(len(h)) + h + m.data()


def bad_data_without_tensors(rng):
    m = Model(rng, 0)
    return m.image(data=bytes(rng.randint(1, 32)))


def bad_tiny(rng):
    n = rng.randint(0, 7)
    return bytes(rng.getrandbits(8) for _ in range(n))


# The format forbids these, the real library accepts them (see Case.lax).
def lax_duplicate(rng):
    m = _model_with_tensors(rng)
    ws = Ws(rng, False)
    pairs = m.entry_pairs(ws)
    if rng.random() < 0.5:      # a tensor twice, the same entry
        pairs.append([p for p in pairs if p[0] != '"__metadata__"'][0])
    else:           # a key twice inside __metadata__
        pairs = [p for p in pairs if p[0] != '"__metadata__"']
        pairs.insert(0, ('"__metadata__"', '{"k":"1","k":"1"}'))
    return m.image(header=jobj(pairs, ws).encode("utf-8"))


def bad_duplicate_metadata(rng):
    """(The real library refuses a second "__metadata__", a field of its
    header struct, but not a second tensor.)"""
    m = Model(rng)
    m.meta = None
    m.meta_null = False
    ws = Ws(rng, False)
    pairs = m.entry_pairs(ws)
    pairs.insert(0, ('"__metadata__"', '{"a":"1"}'))
    pairs.append(('"__metadata__"', '{"a":"2"}'))
    return m.image(header=jobj(pairs, ws).encode("utf-8"))


def lax_leading_whitespace(rng):
    m = Model(rng)
    return m.image(header=rng.choice([b" ", b"\n", b"\t", b"  \r\n"]) +
                   m.header())


def lax_other_padding(rng):
    m = Model(rng)
    return m.image(header=m.header() + rng.choice(
        [b"\n", b"\t", b"\r\n", b" \n ", b"\t\t\t\t"]))


def lax_extra_field(rng):
    m = _model_with_tensors(rng)
    h = m.header()
    extra = rng.choice([b'"extra":1,', b'"offsets":[0,0],', b'"DTYPE":"F32",',
                        b'"quantization":{"bits":4},'])
    k = h.index(b'"dtype"')
    h = h[:k] + extra + h[k:]
    return m.image(header=h)


# Limits of pinmem's own: the format sets none; pinmem refuses.
def _first_name_at(m):
    """The header with no metadata, and where its first name's text
    starts."""
    m.meta = None
    m.meta_null = False
    h = m.header()
    return h, h.index(b'"') + 1


def limit_nul_in_name(rng):
    m = _model_with_tensors(rng)
    h, k = _first_name_at(m)
    h = h[:k] + b"\\u0000" + h[k:]
    return m.image(header=h)


def limit_rank(rng):
    rank = rng.choice([4097, 5000, 10000])
    h = ('{"r":{"dtype":"U8","shape":[%s],"data_offsets":[0,1]}}' %
         ",".join(["1"] * rank)).encode()
    return le64(len(h)) + h + b"z"


INVALID = [bad_truncated, bad_trailing_garbage, bad_header_size, bad_gap,
           bad_overlap, bad_end_before_begin, bad_shape_size,
           bad_dtype_size, bad_dtype_name, bad_json, bad_non_utf8,
           bad_numbers, bad_metadata, bad_fields, bad_subbyte,
           bad_lone_surrogate, bad_padding, bad_data_without_tensors,
           bad_tiny, bad_duplicate_metadata]
LAX = {lax_duplicate: "duplicate keys: the format disallows them, the "
       "real library's JSON reader keeps the last",
       lax_leading_whitespace: "the header MUST begin with '{'; the real "
       "library has that check commented out",
       lax_other_padding: "the header MAY be padded with spaces (0x20); "
       "the real library takes any JSON whitespace",
       lax_extra_field: "a tensor is {dtype, shape, data_offsets}; the "
       "real library ignores other keys"}
LIMIT = {limit_nul_in_name: "pinmem's names are C strings: NUL (\\u0000) "
         "in a name or metadata is refused",
         limit_rank: "pinmem takes at most 4096 dimensions"}


def _special_invalid():
    """Numbers at the edges of u64 and of JSON."""
    def img(shape, offs="[0,0]", dt='"U8"', data=b""):
        h = ('{"t":{"dtype":%s,"shape":%s,"data_offsets":%s}}' %
             (dt, shape, offs)).encode()
        return le64(len(h)) + h + data
    cases = {
        "negative-zero-dim": img("[-0,2]", "[0,2]", data=b"ab"),
        "negative-zero-offset": img("[2]", "[-0,2]", data=b"ab"),
        "dims-overflow-before-zero": img("[4294967296,4294967296,0]"),
        "dims-overflow-u16-before-zero": img("[4611686018427387904,4,0]",
                                             dt='"U16"'),
        "dim-2-64-with-zero": img("[18446744073709551616,0]"),
        "offset-2-64": img("[0]", "[18446744073709551616,"
                           "18446744073709551616]"),
        "bytes-overflow": img("[4611686018427387904]", "[0,0]", dt='"F32"'),
        "dim-float": img("[2.0]", "[0,2]", data=b"ab"),
        "dim-exponent": img("[2e0]", "[0,2]", data=b"ab"),
        "dim-bool": img("[true]", "[0,1]", data=b"a"),
        "dtype-list": img("[1]", "[0,1]", dt='["U8"]', data=b"a"),
        "dtype-number": img("[1]", "[0,1]", dt="8", data=b"a"),
        "shape-number": img("1", "[0,1]", data=b"a"),
    }
    cases.update({
        "header-over-limit": le64(MAX_HEADER + 1) + b"{}" + b" " * 64,
        "header-at-limit-past-end": le64(MAX_HEADER) + b"{}" + b" " * 64,
        "header-length-u64-max": le64(2 ** 64 - 1) + b"{}",
        "header-length-0": le64(0),
        "header-length-0-with-data": le64(0) + b"{}",
        "header-length-7-past-end": le64(7) + b"{}    ",
    })
    return [Case("bad-special-" + k, v) for k, v in cases.items()]


def invalid(n=560):
    rng = random.Random(SEED + 2)
    out = _special_invalid()
    gens = INVALID + list(LAX) + list(LIMIT)
    k = 0
    while len(out) < n:
        g = gens[k % len(gens)]
        k += 1
        blob = g(rng)
        cid = "%s-%03d" % (g.__name__.replace("_", "-"), len(out))
        out.append(Case(cid, blob, LAX.get(g), LIMIT.get(g)))
    return out
