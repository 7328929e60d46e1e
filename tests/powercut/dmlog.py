# SPDX-License-Identifier: GPL-2.0
"""Reading and replaying a dm-log-writes log.

dm-log-writes (Documentation/admin-guide/device-mapper/log-writes.rst)
records every write that reached its device, in the order the device made
it durable (writes are logged at the flush that covers them), and marks
that userspace inserts with `dmsetup message DEV 0 mark NAME`. Replaying a
prefix of the log onto a zeroed device gives what the disk held had the
power been cut at that point.

The format: a super block at byte 0 (magic, version, entry count, sector
size), then, from byte sectorsize on, per entry one sector of header (a
struct of four little-endian u64: sector, nr_sectors, flags, data_len,
followed by a mark's name) and, unless it is a discard or a mark,
nr_sectors sectors of data.
"""
import os
import struct

MAGIC = 0x6a736677736872
FLUSH, FUA, DISCARD, MARK, METADATA = 1, 2, 4, 8, 16

_SUPER = struct.Struct("<QQQI")
_ENTRY = struct.Struct("<QQQQ")


class Entry:
    """One logged write (or discard, or mark); data is read on demand."""

    __slots__ = ("index", "sector", "nr_sectors", "flags", "mark",
                 "data_at")

    def __init__(self, index, sector, nr_sectors, flags, mark, data_at):
        self.index = index
        self.sector = sector
        self.nr_sectors = nr_sectors
        self.flags = flags
        self.mark = mark
        self.data_at = data_at

    def writes(self):
        return not self.flags & MARK and self.nr_sectors > 0


class Log:
    """The entries of the log in the file or device at path."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_RDONLY)
        head = os.pread(self.fd, _SUPER.size, 0)
        magic, version, count, self.sectorsize = _SUPER.unpack(head)
        if magic != MAGIC or version != 1:
            raise ValueError("%s: not a dm-log-writes log (magic %#x, "
                             "version %d)" % (path, magic, version))
        self.entries = []
        at = self.sectorsize
        for i in range(count):
            sector, nr, flags, dlen = _ENTRY.unpack(
                os.pread(self.fd, _ENTRY.size, at))
            mark = None
            if flags & MARK:
                raw = os.pread(self.fd, dlen, at + _ENTRY.size)
                mark = raw.decode("ascii", "replace")
            at += self.sectorsize
            self.entries.append(Entry(i, sector, nr, flags, mark, at))
            if not flags & (DISCARD | MARK):
                at += nr * self.sectorsize

    def close(self):
        os.close(self.fd)

    def mark(self, name):
        """The index of the entry that is the mark name."""
        for e in self.entries:
            if e.flags & MARK and e.mark == name:
                return e.index
        raise KeyError("no mark %r in the log" % name)

    def apply(self, entry, dev_fd, sectors=None):
        """Write entry (its first `sectors` sectors) to dev_fd.

        A discard is replayed as zeros: what a discarded range reads back
        as is the device's choice, and zeros are the harsher one for a
        file system that forgot to write what it later reads.
        """
        if not entry.writes():
            return
        n = entry.nr_sectors if sectors is None else sectors
        off = entry.sector * self.sectorsize
        if entry.flags & DISCARD:
            os.pwrite(dev_fd, bytes(n * self.sectorsize), off)
            return
        left, src = n * self.sectorsize, entry.data_at
        while left:
            chunk = os.pread(self.fd, min(left, 1 << 20), src)
            os.pwrite(dev_fd, chunk, off)
            left -= len(chunk)
            src += len(chunk)
            off += len(chunk)
