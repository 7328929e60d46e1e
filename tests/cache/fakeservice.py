#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A socket that looks like pinmem-cached to a client and is not one, for
the tests of the clients' deadlines (tests/cache/client-deadlines,
tests/python/test_cache_deadlines.py) and of what pinctl reads from a LIST
(tests/host.d/20-libpin-pinctl).

  fakeservice.py SOCK MODE [--interval MS] [--for S] [--table FILE]

  silent     accepts every connection, reads its request, never answers
  heartbeat  answers a LOAD that asks for heartbeats with WAIT every
             --interval ms (200) for --for s (3), then ERROR ENOSPC;
             one that does not ask gets ERROR EPROTO "no heartbeat flag"
  full       listens with a backlog of 0, fills it itself, never accepts:
             a client's connect would block
  old        a service from before the heartbeat: ERROR EPROTO "load
             request: unknown flags" for a flagged LOAD, ERROR ENOSPC for
             one without flags, saying how many flagged ones it refused
  list       answers a LIST with the text of --table FILE
  refusing   refuses every well-formed LOAD as one whose fds it could not
             take: ERROR EPROTO "more than one fd" (what a service whose
             fd table was full said)

Prints "ready" once a client may come; runs until killed. The packets
are Documentation/cache.md's: a 16-byte header (magic "PMCS", version 1,
type, payload length, 0), then the payload.
"""
import argparse
import socket
import struct
import threading
import time

MAGIC = 0x53434D50
REQ_LOAD, REQ_LIST, REP_LIST, REP_WAIT, REP_ERROR = 1, 2, 0x82, 0x83, 0xFF
HEARTBEAT = 1
EPROTO, ENOSPC = 71, 28
HDR = struct.Struct("=IHHII")


def packet(typ, payload):
    return HDR.pack(MAGIC, 1, typ, len(payload), 0) + payload


def error(err, text):
    return packet(REP_ERROR, struct.pack("=iI", err, 0) + text.encode())


def request_flags(data):
    """The LOAD request's flags, or None for another request."""
    if len(data) < HDR.size + 8 or HDR.unpack_from(data)[2] != REQ_LOAD:
        return None
    return struct.unpack_from("=I", data, HDR.size)[0]


def serve(conn, args, held):
    try:
        answer(conn, args, held)
    except OSError:
        conn.close()                    # the client left: so be it


def answer(conn, args, held):
    data, _anc, _, _ = conn.recvmsg(256, socket.CMSG_SPACE(64))
    flags = request_flags(data)
    if args.mode == "list" and HDR.unpack_from(data)[2] == REQ_LIST:
        with open(args.table, "rb") as f:
            conn.send(packet(REP_LIST, f.read()))
        conn.close()
        return
    if args.mode == "silent" or flags is None:
        held.append(conn)               # open, and never a word
        return
    if args.mode == "old" and flags:
        args.refused += 1
        conn.send(error(EPROTO, "load request: unknown flags"))
    elif args.mode == "old":
        conn.send(error(ENOSPC, "over budget (a fake old service; flagged "
                        "requests refused: %d)" % args.refused))
    elif args.mode == "refusing":
        conn.send(error(EPROTO, "more than one fd"))
    elif not flags & HEARTBEAT:
        conn.send(error(EPROTO, "fake service: no heartbeat flag"))
    else:
        end = time.monotonic() + args.for_s
        while time.monotonic() < end:
            conn.send(packet(REP_WAIT, struct.pack("=II", args.interval, 0)))
            time.sleep(args.interval / 1000)
        conn.send(error(ENOSPC, "over budget (a fake service that waited "
                        "%g s)" % args.for_s))
    conn.close()


def fill(path, held):
    """Connections queued until the backlog is full; never accepted."""
    while True:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        c.setblocking(False)
        try:
            c.connect(path)
        except BlockingIOError:
            c.close()
            return
        held.append(c)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sock")
    ap.add_argument("mode", choices=["silent", "heartbeat", "full", "old",
                                     "list", "refusing"])
    ap.add_argument("--interval", type=int, default=200)
    ap.add_argument("--for", dest="for_s", type=float, default=3.0)
    ap.add_argument("--table")
    args = ap.parse_args()
    args.refused = 0
    held = []
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.bind(args.sock)
    s.listen(0 if args.mode == "full" else 64)
    if args.mode == "full":
        fill(args.sock, held)
        print("ready", flush=True)
        while True:
            time.sleep(3600)
    print("ready", flush=True)
    while True:
        conn, _ = s.accept()
        threading.Thread(target=serve, args=(conn, args, held),
                         daemon=True).start()


if __name__ == "__main__":
    main()
