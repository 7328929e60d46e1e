#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Speak pinmem-cached's protocol badly, on purpose, for its tests.

  rawclient.py SOCK CASE [FILE]   send one bad request, print the reply:
                                  "error ERRNO TEXT", "load ...", "list" or
                                  "closed" (the service hung up)
  rawclient.py SOCK crowd N       N connections that each misbehave a
                                  different way, then all leave
  rawclient.py SOCK cases FILE CASE...   each case in turn, "CASE: reply"

Written from Documentation/cache.md's description of the packets: a
16-byte header (magic "PMCS", version 1, type, payload length, 0), then
the payload.
"""
import array
import os
import socket
import struct
import sys

MAGIC = 0x53434D50
LOAD, LIST = 1, 2


def packet(typ, payload=b"", magic=MAGIC, version=1, length=None, res=0):
    if length is None:
        length = len(payload)
    return struct.pack("=IHHII", magic, version, typ, length, res) + payload


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(10)
    s.connect(path)
    return s


def reply(s):
    try:
        data, anc, _, _ = s.recvmsg(1 << 17, socket.CMSG_SPACE(16))
    except ConnectionResetError:
        return "closed"
    except socket.timeout:
        return "no reply in 10 s"
    for level, typ, cdata in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fds = array.array("i")
            fds.frombytes(cdata[: len(cdata) - len(cdata) % 4])
            for fd in fds:
                os.close(fd)
    if len(data) < 16:
        return "closed"
    _, _, typ, _, _ = struct.unpack("=IHHII", data[:16])
    if typ == 0xFF:
        err, _ = struct.unpack("=iI", data[16:24])
        return "error %d %s" % (err, data[24:].decode(errors="replace"))
    if typ == 0x81:
        eid, size, vlen, backend, flags = struct.unpack("=QQQII", data[16:48])
        return "load entry %d size %d" % (eid, size)
    return "list" if typ == 0x82 else "type %d" % typ


def send(s, data, fds=()):
    anc = []
    if fds:
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                array.array("i", fds).tobytes())]
    s.sendmsg([data], anc)


def one(path, case, fname):
    s = connect(path)
    ok_load = packet(LOAD, struct.pack("=II", 0, 0))
    fd = os.open(fname, os.O_RDONLY) if fname else -1
    if case == "magic":
        send(s, packet(LIST, magic=0x12345678))
    elif case == "version":
        send(s, packet(LIST, version=9))
    elif case == "length":
        send(s, packet(LIST, length=5))
    elif case == "type":
        send(s, packet(77))
    elif case == "reserved":
        send(s, packet(LIST, res=1))
    elif case == "flags":
        send(s, packet(LOAD, struct.pack("=II", 4, 0)), [fd])
    elif case == "short":
        send(s, b"PMC")
    elif case == "huge":
        send(s, packet(LIST, b"x" * (1 << 16)))
    elif case == "load-no-fd":
        send(s, ok_load)
    elif case == "list-with-fd":
        send(s, packet(LIST), [fd])
    elif case == "two-fds":
        send(s, ok_load, [fd, fd])
    elif case == "opath":
        send(s, ok_load, [os.open(fname, os.O_PATH)])
    elif case == "writeonly":
        send(s, ok_load, [os.open(fname, os.O_WRONLY)])
    elif case == "dir":
        send(s, ok_load, [os.open(os.path.dirname(fname) or ".", os.O_RDONLY)])
    elif case == "reply-type":
        send(s, packet(0x81, b"\0" * 32), [fd])
    elif case == "silent":
        pass
    elif case == "twice":
        send(s, ok_load, [fd])
        print(reply(s))
        send(s, packet(LIST))
    else:
        sys.exit("unknown case " + case)
    print(reply(s))


def crowd(path, n):
    """n connections at once, a quarter each garbage, a cut packet, gone at
    once, silent; those the service turns away (one user's connections
    are limited) are counted."""
    socks, refused = [], 0
    for i in range(n):
        s = connect(path)
        k = i % 4
        try:
            if k == 1:
                send(s, b"garbage!" * 3)
            elif k == 2:
                send(s, packet(LIST)[:10])
        except OSError:
            refused += 1
        if k == 3:
            s.close()
            continue
        socks.append(s)
    for s in socks:
        s.close()
    print("crowd of %d left (%d refused while sending)" % (n, refused))


def main():
    path, case = sys.argv[1], sys.argv[2]
    if case == "crowd":
        crowd(path, int(sys.argv[3]))
    elif case == "cases":
        for c in sys.argv[4:]:
            sys.stdout.write(c + ": ")
            sys.stdout.flush()
            one(path, c, sys.argv[3])
    else:
        one(path, case, sys.argv[3] if len(sys.argv) > 3 else None)


main()
