# SPDX-License-Identifier: MIT
"""Replacing a file so that a crash leaves the old one or the new one.

The bytes go to a hidden temporary file beside the target (the name
libpin's pin_st_save uses: .NAME.tmp-PID-NS), which is flushed to disk,
renamed over the target, and the folder synced: after a power cut at any
point the target is whole, old or new, and once the call returns it is
the new one. A cut before the rename can leave the temporary file; the
next save uses a name of its own and is not bothered by it. The file gets
the mode open() would give a new one (0666 less the umask), as libpin's.
"""
import os
import time


def write_new(path, parts):
    """Create path (it must not exist: FileExistsError), write the byte
    strings parts in order and sync it; on failure the file is removed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            for p in parts:
                f.write(p)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        try:
            os.unlink(path)
        except OSError:
            pass
        raise


def replace_file(filename, parts):
    """Write the byte strings parts, in order, as the file filename."""
    filename = os.fspath(filename)
    folder, base = os.path.split(filename)
    tmp = os.path.join(folder, ".%s.tmp-%d-%d" % (
        base, os.getpid(), time.monotonic_ns() % 1000000000))
    write_new(tmp, parts)
    try:
        os.replace(tmp, filename)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    sync_folder(folder or ".")


def sync_folder(path):
    """fsync the folder path: a rename in it on disk."""
    dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
