# SPDX-License-Identifier: GPL-2.0
"""Whether --socket-dir may be mounted into containers (main.py refuses it
otherwise): every container given a device gets the folder whole, and a
read-only mount does not stop connect(), so every socket in it is open to
them. It must be pinmem's own, as pinctl cdi generate asks of the socket's
directory (tools/lib/sockdir.c):

- absolute, UTF-8 without control characters, canonical (no empty, "." or
  ".." component), with room for "/cache.sock" in a socket address;
- none of the folders other programs share (/, /run, /var/run, /tmp, /home,
  /etc, /usr, /var ...) nor below /dev, /proc or /sys;
- where this process sees it (run on the host, or with the folder mounted):
  reached without a symbolic link, a folder owned by root or pinmem-cached,
  writable by its owner alone, holding nothing but the socket cache.sock.

A folder it does not see is judged by its path alone.
"""
import os
import pwd
import stat

DEFAULT = "/run/pinmem"
SOCKET = "cache.sock"
SHARED = frozenset((
    "/", "/bin", "/boot", "/etc", "/home", "/lib", "/lib64", "/media",
    "/mnt", "/opt", "/root", "/run", "/run/lock", "/run/user", "/sbin",
    "/srv", "/tmp", "/usr", "/usr/lib", "/usr/local", "/var", "/var/lib",
    "/var/lock", "/var/run", "/var/tmp"))
KERNEL_TREES = ("/dev", "/proc", "/sys")


def _text_ok(path):
    return not any(ord(c) < 0x20 or ord(c) == 0x7f or 0xdc80 <= ord(c) <= 0xdcff
                   for c in path)


def _path_problem(d):
    if not d.startswith("/"):
        return "not an absolute path"
    if not _text_ok(d):
        return "not UTF-8 text without control characters"
    if d != "/" and any(p in ("", ".", "..") for p in d[1:].split("/")):
        return 'not canonical (an empty, "." or ".." component)'
    if len(os.fsencode(d)) + 1 + len(SOCKET) > 107:
        return "too long for %s in it to fit a socket address (107 bytes)" % SOCKET
    if d in SHARED or any(d == t or d.startswith(t + "/") for t in KERNEL_TREES):
        return "shared with other programs"
    return None


def _service_uid():
    try:
        return pwd.getpwnam("pinmem-cached").pw_uid
    except KeyError:
        return None


def _existing_problem(d):
    try:
        st = os.lstat(d)
    except FileNotFoundError:
        return None
    except OSError:
        return "cannot be looked at"
    if os.path.realpath(d) != d:
        return "reached through a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "not a folder"
    if st.st_uid not in (0, _service_uid()):
        return "owned by another user than root or pinmem-cached"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "writable by others than its owner"
    try:
        names = os.listdir(d)
    except OSError:
        return "cannot be read"
    if any(n != SOCKET for n in names):
        return "holds other files than %s" % SOCKET
    if names and not stat.S_ISSOCK(os.lstat(os.path.join(d, SOCKET)).st_mode):
        return "its %s is not a socket" % SOCKET
    return None


def problem(d):
    """None when folder D may be mounted into containers, else why not."""
    return _path_problem(d) or _existing_problem(d)


def refusal(d):
    """The whole message for a refused D (for argparse's error)."""
    return ("--socket-dir %r: %s; containers get it mounted whole, so use a "
            "folder of pinmem's own, as the default %s" % (d, problem(d), DEFAULT))
