#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A service manager's file descriptor store, as systemd keeps one, for the
tests of pinmem-cached's restarts (tests/cache/run-restart).

  fakesystemd.py [--listen SOCK] DIR CMD [ARGS...]

Runs CMD with NOTIFY_SOCKET=DIR/notify and keeps the fds it sends with
FDSTORE=1 under their FDNAME (FDSTOREREMOVE=1 closes them); whenever CMD
exits it is started again (Restart=always) with the stored fds from fd 3
on, LISTEN_FDS, LISTEN_FDNAMES and LISTEN_PID, as systemd passes them.
With --listen, a listening SOCK_SEQPACKET socket bound at SOCK is passed
first, named "pinmem-cached.socket" as socket activation names it.
SIGTERM: CMD is stopped and the store closed, as by systemctl stop.

Files in DIR: pid (CMD's pid now), store (the stored names, one a line,
rewritten after each message), starts (one line a start), held (the
pid that exited while DIR/hold exists: the next start waits for its
removal). A file
DIR/tamper, present at a restart, changes what is handed back, once:
  unsealed  the first region replaced by an unsealed memfd of its size
  swap      the first two regions handed back under each other's names
  oldlayout the first record rewritten with the earlier layout's magic
"""
import os
import signal
import socket
import sys
import time

args = sys.argv[1:]
listen = None
if args[0] == "--listen":
    listen = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listen.bind(args[1])
    listen.listen(64)
    args = args[2:]
d, cmd = args[0], args[1:]
store = []          # (name, fd), in the order stored
stopping = False
sock_of = []        # the notify socket, for hold()


def write(name, text):
    with open(os.path.join(d, name + ".tmp"), "w") as f:
        f.write(text)
    os.rename(os.path.join(d, name + ".tmp"), os.path.join(d, name))


def message(data, fds):
    fields = dict(l.split("=", 1) for l in data.decode().split("\n") if "=" in l)
    name = fields.get("FDNAME", "stored")
    if fields.get("FDSTORE") == "1":
        store.extend((name, fd) for fd in fds)
        fds = []
    if fields.get("FDSTOREREMOVE") == "1":
        for n, fd in [e for e in store if e[0] == name]:
            os.close(fd)
            store.remove((n, fd))
    for fd in fds:
        os.close(fd)
    write("store", "".join(n + "\n" for n, _ in store))


def drain(sock):
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 4096, 16)
        except BlockingIOError:
            return
        message(data, fds)


def tamper(passed):
    """What is handed back, and the fds made here to close after."""
    path = os.path.join(d, "tamper")
    if not os.path.exists(path):
        return passed, []
    how = open(path).read().strip()
    os.unlink(path)
    regions = [i for i, (n, _) in enumerate(passed) if n.endswith(".region")]
    if how == "unsealed" and regions:
        i = regions[0]
        fd = os.memfd_create("tampered", os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, os.fstat(passed[i][1]).st_size)
        passed[i] = (passed[i][0], fd)
        return passed, [fd]
    metas = [i for i, (n, _) in enumerate(passed) if n.endswith(".meta")]
    if how == "oldlayout" and metas:
        # A record as the earlier layout wrote it: its magic (the
        # copy's checksum is left as it was; the magic is read first).
        i = metas[0]
        rec = bytearray(os.pread(passed[i][1], 1 << 20, 0))
        rec[0:8] = b"PMCFDS1\0"
        fd = os.memfd_create("oldlayout")
        os.write(fd, bytes(rec))
        passed[i] = (passed[i][0], fd)
        return passed, [fd]
    if how == "swap" and len(regions) >= 2:
        i, j = regions[:2]
        passed[i], passed[j] = (passed[i][0], passed[j][1]), (passed[j][0], passed[i][1])
    return passed, []


def start():
    passed, made = tamper(list(store))
    if listen:
        passed.insert(0, ("pinmem-cached.socket", listen.fileno()))
    env = dict(os.environ, NOTIFY_SOCKET=os.path.join(d, "notify"))
    if passed:
        env["LISTEN_FDS"] = str(len(passed))
        env["LISTEN_FDNAMES"] = ":".join(n for n, _ in passed)
    pid = os.fork()
    if pid == 0:
        high = [os.dup(fd) for _, fd in passed]
        for i, fd in enumerate(high):
            os.dup2(fd, 3 + i)          # inheritable
        os.closerange(3 + len(high), 65536)
        if passed:
            env["LISTEN_PID"] = str(os.getpid())
        os.execvpe(cmd[0], cmd, env)
    for fd in made:
        os.close(fd)
    with open(os.path.join(d, "starts"), "a") as f:
        f.write("%d %d\n" % (pid, len(passed)))
    write("pid", "%d\n" % pid)
    return pid


def hold():
    """While DIR/hold exists, the service stays down (held names the
    pid that exited): a test's client can then connect to the socket
    between two services, never to one that is stopping."""
    path = os.path.join(d, "hold")
    if not os.path.exists(path):
        return
    write("held", "%s\n" % open(os.path.join(d, "pid")).read().strip())
    while os.path.exists(path) and not stopping:
        drain(sock_of[0])
        time.sleep(0.02)


def stop(*_):
    global stopping
    stopping = True


def main():
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(os.path.join(d, "notify"))
    sock.setblocking(False)
    sock_of.append(sock)
    signal.signal(signal.SIGTERM, stop)
    write("store", "")
    pid = start()
    while True:
        drain(sock)
        if stopping:
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
            drain(sock)
            for _, fd in store:
                os.close(fd)
            return
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            drain(sock)
            hold()
            pid = start()
        time.sleep(0.02)


main()
