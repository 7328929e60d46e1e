#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A client of pinmem-cached that tries to fill the service's fd table
through its own member thread, then to make the event loop run a blocking
close (Documentation/security.md, "What one member can make it hold").

    flood.py SOCK FDS HOLD_S

1. Opens a few idle connections.
2. Sends 60 LOADs, each on a connection of its own, each carrying 253
   copies of /dev/null.
3. Wedges its member thread: passes a TCP socket lingering on a zero
   window (hostile.py's), its own copy closed at once, so that the
   service's close is the last one and waits.
4. Floods: LOADs of 253 fds, one connection each, until FDS + 2000 fds
   are sent or 5 s have passed (pausing while the kernel says too many
   of its fds are in flight).
5. On an idle connection, after keeping the loop busy with the others,
   passes 252 copies of /dev/null and a second lingering socket: a
   service that takes them into a full table drops them in the loop.

Each step prints one line starting with its number; then it holds its
sockets (which keeps the lingering closes waiting) for HOLD_S seconds.
"""
import array
import errno
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile import lingering_tcp, load_packet  # noqa: E402

PER_PACKET = 253        # SCM_MAX_FD: the most fds one packet carries


def rights(fds):
    return [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
             array.array("i", fds).tobytes())]


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path)
    return s


def short_load(path, null):
    """One connection, one LOAD of PER_PACKET fds, closed: fds sent (0
    when the service refused the connection before it was sent)."""
    s = connect(path)
    try:
        s.sendmsg([load_packet()], rights([null] * PER_PACKET))
    except (BrokenPipeError, ConnectionResetError):
        return 0
    finally:
        s.close()
    return PER_PACKET


def pass_last(s, fd, null, pad=0, busy=()):
    """Send [pad x null, fd] on s from a child that closes its copy right
    after (this process's copy closed first), so that the service holds
    the last reference. The child first sends a full packet on each of
    busy. None when the send failed (the service refused s); else True
    when the child's close returned (the service holds the last one)."""
    go_r, go_w = os.pipe()
    said_r, said_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(go_w)
        os.read(go_r, 1)
        for b in busy:
            try:
                b.sendmsg([load_packet()], rights([null] * PER_PACKET))
            except OSError:
                pass
        try:
            s.sendmsg([load_packet()], rights([null] * pad + [fd]))
            os.write(said_w, b"1")
        except OSError:
            os.write(said_w, b"0")
        os.close(fd)
        os._exit(0)
    os.close(go_r)
    os.close(said_w)
    os.close(fd)
    os.write(go_w, b"x")
    os.close(go_w)
    sent = os.read(said_r, 1) == b"1"
    os.close(said_r)
    if not sent:
        return None     # its close may wait: the caller lets the peer go
    for _ in range(100):
        if os.waitpid(pid, os.WNOHANG)[0]:
            return True
        time.sleep(0.02)
    return False        # the child waits in its close; left to init


def wedge(path, null):
    """Step 3, on a connection the service takes (it refuses a member
    over its bound until its thread has caught up): (held, peers)."""
    for _ in range(50):
        c, peer, lst = lingering_tcp()
        held = pass_last(connect(path), c.detach(), null)
        if held is not None:
            return held, [peer, lst]
        peer.close()
        lst.close()
        time.sleep(0.1)
    return False, []


def flood(path, null, want):
    """Step 4: (fds sent, seconds, pauses for the in-flight limit)."""
    t0 = time.monotonic()
    sent = pauses = 0
    while sent < want and time.monotonic() - t0 < 5:
        try:
            sent += short_load(path, null)
        except OSError as e:
            if e.errno not in (errno.ETOOMANYREFS, errno.EAGAIN):
                print("   stopped: %s" % e, flush=True)
                break
            pauses += 1
            time.sleep(0.02)
    return sent, time.monotonic() - t0, pauses


def main():
    path, fds, hold = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    null = os.open("/dev/null", os.O_RDONLY)
    t0 = time.monotonic()
    idle = [connect(path) for _ in range(24)]
    print("1. %d idle connections" % len(idle), flush=True)
    time.sleep(0.3)
    sent = sum(short_load(path, null) for _ in range(60))
    print("2. %d fds on 60 connections" % sent, flush=True)
    held, keep = wedge(path, null)
    print("3. wedge: the service holds the lingering socket's last "
          "reference: %s" % held, flush=True)
    sent, secs, pauses = flood(path, null, fds + 2000)
    print("4. flood: %d fds in %.2f s (%d pauses for the in-flight limit)"
          % (sent, secs, pauses), flush=True)
    time.sleep(0.5)
    c, peer, lst = lingering_tcp()
    keep += [peer, lst]
    last = pass_last(idle[-1], c.detach(), null, PER_PACKET - 1, idle[:-1])
    print("5. last, %.1f s after the idle connections: a lingering socket "
          "behind 252 fds on one of them; the service holds it: %s"
          % (time.monotonic() - t0, "not sent (ours in flight, or refused)"
             if last is None else last), flush=True)
    time.sleep(hold)


if __name__ == "__main__":
    main()
