#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Clients of pinmem-cached that try to stall it: each passes, as its
checkpoint, an fd whose close (or fstat) blocks for as long as it likes.

    hostile.py linger SOCK HOLD_S    a TCP socket lingering on a zero window
    hostile.py pipe SOCK             a pipe's read end
    hostile.py send SOCK PATH        any file (a FUSE or CUSE one below)
    hostile.py fuse MNT FILE_BYTES SERVICE_PID
        serve MNT/ck.safetensors over FUSE (root), never answering a FLUSH
        from a thread of SERVICE_PID, until SIGTERM
    hostile.py serve MNT SRC
        serve MNT/ck.safetensors over FUSE (root, allow_other): SRC's bytes
        as they are at each read, under one stat that never changes (inode,
        size, times), until SIGTERM: a file that can change its bytes
        behind the same identity
    hostile.py cuse NAME SERVICE_PID
        a character device /dev/NAME over CUSE whose RELEASE is never
        answered (a device slow to close), until SIGTERM

A client prints the service's reply ("error N TEXT", "load ...",
"no reply") and the seconds it took. The file systems are minimal servers
of the FUSE protocol (include/uapi/linux/fuse.h), written for this test.
"""
import array
import ctypes
import errno
import os
import signal
import socket
import struct
import sys
import time

MAGIC = 0x53434D50
LOAD, REP_WAIT, REP_ERROR = 1, 0x83, 0xFF


def load_packet(flags=0):
    return struct.pack("=IHHII", MAGIC, 1, LOAD, 8, 0) + struct.pack(
        "=II", flags, 0)


def send_and_exit(s, fd):
    """Send fd from a child that then exits, this process's copy closed
    first, so that the service's close is the last one, the one that can
    block. A child preempted between its send and its close closes last
    instead: then the service's close does not block (the caller sees
    that and tries again), and the child, not this process, is the one
    that waits. (Left to its exit, the child's close would come only
    after its address space is torn down, which loses the race often.)"""
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(go_w)
        os.read(go_r, 1)
        s.sendmsg([load_packet()], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                     array.array("i", [fd]).tobytes())])
        os.close(fd)    # now: at exit it would wait for the mm's teardown
        os._exit(0)
    os.close(go_r)
    os.close(fd)
    os.write(go_w, b"x")
    os.close(go_w)
    return pid


def ask(sock_path, fd, timeout=10.0):
    """Send a LOAD with fd; the first reply that is not a WAIT, as text."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(timeout)
    t0 = time.monotonic()
    s.connect(sock_path)
    child = send_and_exit(s, fd)
    try:
        while True:
            data, _, _, _ = s.recvmsg(1 << 16, socket.CMSG_SPACE(16))
            if len(data) >= 16 and struct.unpack_from("=H", data, 6)[0] \
                    == REP_WAIT:
                continue
            break
    except socket.timeout:
        return "no reply", time.monotonic() - t0
    finally:
        os.waitpid(child, os.WNOHANG)   # one stuck closing is left to init
    if len(data) >= 24 and struct.unpack_from("=H", data, 6)[0] == REP_ERROR:
        err = struct.unpack_from("=i", data, 16)[0]
        return ("error %d %s" % (err, data[24:].decode(errors="replace")),
                time.monotonic() - t0)
    return "reply of %d bytes" % len(data), time.monotonic() - t0


def lingering_tcp():
    """A connected TCP socket with unsent data queued to a peer that never
    reads (zero window), SO_LINGER at the maximum: its last close waits."""
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    c = socket.socket()
    c.connect(lst.getsockname())
    peer, _ = lst.accept()
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c.setblocking(False)
    try:
        while True:
            c.send(b"x" * 65536)
    except BlockingIOError:
        pass
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                 struct.pack("ii", 1, 0x7FFFFFFF))
    return c, peer, lst


def client(argv):
    mode, sock = argv[0], argv[1]
    keep = []
    if mode == "linger":
        c, peer, lst = lingering_tcp()
        keep = [peer, lst]
        fd = c.detach()
    elif mode == "pipe":
        fd, w = os.pipe()
        keep = [w]
    else:
        fd = os.open(argv[2], os.O_RDONLY)
    text, secs = ask(sock, fd)
    print("%s (%.2f s)" % (text, secs), flush=True)
    if mode == "linger":
        time.sleep(float(argv[2]))


# FUSE: the kernel's requests and the answers this server gives.
IN_HDR = struct.Struct("=IIQQIIIHH")       # fuse_in_header, 40 bytes
OUT_HDR = struct.Struct("=IiQ")            # fuse_out_header, 16 bytes
ATTR = struct.Struct("=QQQQQQIIIIIIIIII")  # fuse_attr, 88 bytes
OP = dict(LOOKUP=1, FORGET=2, GETATTR=3, OPEN=14, READ=15, STATFS=17,
          RELEASE=18, FLUSH=25, INIT=26, INTERRUPT=36, DESTROY=38,
          BATCH_FORGET=42, CUSE_INIT=4096)
NO_REPLY = (OP["FORGET"], OP["BATCH_FORGET"], OP["INTERRUPT"])


def reply(dev, unique, payload=b"", err=0):
    try:
        os.write(dev, OUT_HDR.pack(OUT_HDR.size + len(payload), err, unique)
                 + payload)
    except OSError:
        pass


def tgid_of(tid):
    try:
        with open("/proc/%d/status" % tid) as f:
            for line in f:
                if line.startswith("Tgid:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def attr(ino, mode, size):
    now = int(time.time())
    return ATTR.pack(ino, size, (size + 511) // 512, now, now, now, 0, 0, 0,
                     mode, 1, 0, 0, 0, 4096, 0)


def init_reply(body):
    major, minor, readahead, _ = struct.unpack_from("=IIII", body)
    return struct.pack("=IIIIHHIIHHI7I", 7, 31, readahead, 0, 16, 12, 65536,
                       1, 0, 0, 0, *([0] * 7))


def fuse_answer(dev, op, nodeid, body, data):
    """The answer to one FUSE request (None: the default ENOSYS)."""
    if op == OP["INIT"]:
        return init_reply(body)
    if op == OP["LOOKUP"]:
        if body.rstrip(b"\0") != b"ck.safetensors":
            return -errno.ENOENT
        return struct.pack("=QQQQII", 2, 0, 1, 1, 0, 0) + attr(
            2, 0o100644, len(data))
    if op == OP["GETATTR"]:
        a = attr(1, 0o40755, 0) if nodeid == 1 else attr(2, 0o100644,
                                                         len(data))
        return struct.pack("=QII", 1, 0, 0) + a
    if op == OP["OPEN"]:
        return struct.pack("=QII", 1, 0, 0)
    if op == OP["READ"]:
        _fh, off, size = struct.unpack_from("=QQI", body)
        return data[off:off + size]
    if op == OP["STATFS"]:
        return struct.pack("=QQQQQIIII6I", 1, 0, 0, 1, 0, 4096, 255, 4096,
                           0, *([0] * 6))
    if op in (OP["RELEASE"], OP["FLUSH"]):
        return b""
    return None


def serve(dev, answer):
    while True:
        try:
            req = os.read(dev, (1 << 20) + 65536)
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.EINTR):
                continue
            return
        _, op, unique, nodeid, _, _, pid, _, _ = IN_HDR.unpack_from(req)
        if op in NO_REPLY:
            continue
        if op == OP["DESTROY"]:
            return
        out = answer(op, nodeid, req[IN_HDR.size:], pid)
        if out == "hang":
            continue
        if out is None:
            reply(dev, unique, err=-errno.ENOSYS)
        elif isinstance(out, int):
            reply(dev, unique, err=out)
        else:
            reply(dev, unique, out)


def stop_on_term(cleanup):
    def handler(_sig, _frame):
        cleanup()
        os._exit(0)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def fuse_server(mnt, size, service_pid):
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    data = b"\0" * size
    dev = os.open("/dev/fuse", os.O_RDWR)
    # Owned by the attacker (nobody), without allow_other: the service may
    # not even fstat it (EACCES), and then closes it, as in the wild.
    opts = "fd=%d,rootmode=40000,user_id=65534,group_id=65534" % dev
    if libc.mount(b"hostile", mnt.encode(), b"fuse", 6, opts.encode()):
        sys.exit("mount: %s" % os.strerror(ctypes.get_errno()))
    # Closing /dev/fuse aborts the connection: a stuck FLUSH then fails.
    stop_on_term(lambda: (libc.umount2(mnt.encode(), 2), os.close(dev)))
    print("serving", flush=True)

    def answer(op, nodeid, body, pid):
        if op == OP["FLUSH"] and tgid_of(pid) == service_pid:
            return "hang"
        return fuse_answer(dev, op, nodeid, body, data)
    serve(dev, answer)


FIXED_TIME = 1700000000


def fixed_attr(ino, mode, size):
    return ATTR.pack(ino, size, (size + 511) // 512, FIXED_TIME, FIXED_TIME,
                     FIXED_TIME, 0, 0, 0, mode, 1, 0, 0, 0, 4096, 0)


def same_stat_server(mnt, src):
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    size = os.path.getsize(src)
    dev = os.open("/dev/fuse", os.O_RDWR)
    opts = "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other" % dev
    if libc.mount(b"samestat", mnt.encode(), b"fuse", 6, opts.encode()):
        sys.exit("mount: %s" % os.strerror(ctypes.get_errno()))
    stop_on_term(lambda: (libc.umount2(mnt.encode(), 2), os.close(dev)))
    print("serving", flush=True)

    def answer(op, nodeid, body, _pid):
        if op == OP["LOOKUP"] and body.rstrip(b"\0") == b"ck.safetensors":
            return struct.pack("=QQQQII", 2, 0, 1, 1, 0, 0) + fixed_attr(
                2, 0o100644, size)
        if op == OP["GETATTR"]:
            a = fixed_attr(1, 0o40755, 0) if nodeid == 1 else fixed_attr(
                2, 0o100644, size)
            return struct.pack("=QII", 1, 0, 0) + a
        if op == OP["READ"]:
            _fh, off, n = struct.unpack_from("=QQI", body)
            with open(src, "rb") as f:
                f.seek(off)
                return f.read(min(n, max(size - off, 0)))
        return fuse_answer(dev, op, nodeid, body, b"")
    serve(dev, answer)


def cuse_server(name, _service_pid):
    dev = os.open("/dev/cuse", os.O_RDWR)
    stop_on_term(lambda: os.close(dev))
    info = ("DEVNAME=%s" % name).encode() + b"\0"

    def answer(op, _nodeid, _body, _pid):
        if op == OP["CUSE_INIT"]:
            return struct.pack("=IIII4I10I", 7, 31, 0, 0, 65536, 65536, 0, 0,
                               *([0] * 10)) + info
        if op == OP["OPEN"]:
            print("opened", flush=True)
            return struct.pack("=QII", 1, 0, 0)
        if op == OP["RELEASE"]:
            return "hang"   # the last close waits for this, uninterruptibly
        return None
    print("serving", flush=True)
    serve(dev, answer)


def main():
    mode = sys.argv[1]
    if mode == "fuse":
        fuse_server(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif mode == "serve":
        same_stat_server(sys.argv[2], sys.argv[3])
    elif mode == "cuse":
        cuse_server(sys.argv[2], int(sys.argv[3]))
    else:
        client(sys.argv[1:])


if __name__ == "__main__":
    main()
