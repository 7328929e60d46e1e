#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Power cuts during a checkpoint save, on ext4 and xfs (run as root, in a
guest: it loads dm-log-writes and dm-snapshot and uses loop devices).

For each file system and each saver: make the file system on a
dm-log-writes device, save an old checkpoint, sync, mark; save a new one
over it, mark. Then replay the log onto a zeroed device up to each cut
point -- after a whole logged write, or with only the first half of its
4 KiB blocks on disk (a torn write) -- and mount that state through a throwaway
snapshot, as the machine would find it after the cut. At every cut point
the checkpoint must be byte for byte the old or the new one (the new one
once the save has returned), anything else in the folder must be a save's
hidden temporary file, and a save made then must succeed.

A sharded checkpoint (an index and its shards) is judged by what a
loader reads through its index: every tensor the index names, from the
shard it names, must be the old checkpoint's or the new one's, all of one
of them; files the index does not name may be left only if they are a
save's hidden temporary files or shards of the save's own naming, which
the next save must clear.

A PyTorch distributed checkpoint (a folder: .metadata and the .distcp
files it names) is judged by what torch's FileSystemReader loads from it,
in one process of the test venv's torch that makes the saves too
(tests/powercut/dcp_server.py): the old step's tensors or the new one's.
Files .metadata does not name may be left only if they are a save's hidden
temporary files or .distcp files, which the next save must clear.

  powercut.py [--fs ext4,xfs] [--saver c,python,sharded] [--points N | --all] WORK

Savers: c (pinload --save-to: libpin's pin_st_save), python
(pinmem.safetensors.numpy.save_file), sharded
(pinmem.safetensors.numpy.save_sharded, 1 MiB shards); and the two the
test exists to catch: inplace (a save that overwrites the file where it
lies) and sharded-inplace (each shard replaced atomically under a fixed
name, then the index). --points N: N cut points per file system and
saver, spread evenly over its save (default 50); --all: every one.
dcp (pinmem.dcp.PinStorageWriter) and the one its test exists to catch,
dcp-torch (torch's FileSystemWriter, which rewrites a folder's .distcp
files in place), need the test venv (tests/python-venv).
Prints TAP.
"""
import argparse
import fnmatch
import hashlib
import json
import os
import re
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dmlog  # noqa: E402

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NAME = "model.safetensors"
INDEX = "model.safetensors.index.json"
SHARD_PATTERN = re.compile(r"model-\d{5}-of-\d{5}-[0-9a-f]{8}\.safetensors")
DEV_MB = 320			# xfs wants at least 300 MiB
LW, SNAP = "pinmem-pc-log", "pinmem-pc-snap"

PY_ENV = dict(os.environ, DM_DISABLE_UDEV="1", PYTHONPATH=os.path.join(TOP, "libpin", "python"),
              PYTHONDONTWRITEBYTECODE="1")

SAVERS = {
    "c": lambda src, dst: [os.path.join(TOP, "build", "bin", "pinload"),
                           "--no-progress", src, "--save-to", dst],
    "python": lambda src, dst: [
        "/usr/bin/python3", "-c",
        "import sys\n"
        "from pinmem.safetensors.numpy import load_file, save_file\n"
        "save_file(load_file(sys.argv[1]), sys.argv[2])", src, dst],
    # Over the file where it lies, a MiB at a time, each made durable
    # (as a writer that bounds its dirty memory does).
    "inplace": lambda src, dst: [
        "/usr/bin/python3", "-c",
        "import os, sys\n"
        "data = open(sys.argv[1], 'rb').read()\n"
        "fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT, 0o644)\n"
        "with os.fdopen(fd, 'wb') as f:\n"
        "    for at in range(0, len(data), 1 << 20):\n"
        "        f.write(data[at:at + (1 << 20)]); f.flush()\n"
        "        os.fsync(f.fileno())\n"
        "    f.truncate()", src, dst],
    "sharded": lambda src, dst: [
        "/usr/bin/python3", "-c",
        "import sys\n"
        "from pinmem.safetensors.numpy import load_file, save_sharded\n"
        "save_sharded(load_file(sys.argv[1]), sys.argv[2], 1 << 20)",
        src, dst],
    # Each shard made whole under a fixed name, then the index: a cut
    # between two renames leaves an index over two checkpoints' shards.
    "sharded-inplace": lambda src, dst: [
        "/usr/bin/python3", "-c",
        "import json, os, sys\n"
        "from pinmem.safetensors.numpy import load_file, save_file\n"
        "from pinmem.safetensors import _atomic\n"
        "t = load_file(sys.argv[1]); names = sorted(t); wm = {}\n"
        "for i in range(0, len(names), 4):\n"
        "    shard = 'model-%05d.safetensors' % (i // 4 + 1)\n"
        "    save_file({n: t[n] for n in names[i:i + 4]},\n"
        "              os.path.join(os.path.dirname(sys.argv[2]), shard))\n"
        "    wm.update((n, shard) for n in names[i:i + 4])\n"
        "_atomic.replace_file(sys.argv[2], [json.dumps(\n"
        "    {'weight_map': wm}).encode()])", src, dst],
}
SHARDED = {"sharded", "sharded-inplace"}
DCP = {"dcp": "pinmem", "dcp-torch": "torch"}	# saver -> its writer
DCP_DIR = "ckpt"
DCP_FILE = re.compile(r"__\d+_\d+(-[0-9a-f]+)?\.distcp")


def target(saver):
    """What a saver is given: the checkpoint, its index, or its folder."""
    if saver in DCP:
        return DCP_DIR
    return INDEX if saver in SHARDED else NAME


class DcpServer:
    """tests/powercut/dcp_server.py under the test venv's python, asked
    one line at a time."""

    def __init__(self):
        venv = subprocess.run([os.path.join(TOP, "tests", "python-venv"),
                               "path"], stdout=subprocess.PIPE,
                              text=True).stdout.strip()
        self.p = subprocess.Popen(
            [os.path.join(venv, "bin", "python"),
             os.path.join(TOP, "tests", "powercut", "dcp_server.py")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env=PY_ENV)
        if self.p.stdout.readline().strip() != "ready":
            raise RuntimeError("dcp_server.py did not start")

    def ask(self, *words):
        self.p.stdin.write(" ".join(words) + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip() or "unreadable: no answer"

    def save(self, src, folder, saver):
        out = self.ask("save", src, folder, DCP[saver])
        if out != "ok":
            raise RuntimeError("dcp save: " + out)

    def close(self):
        self.p.stdin.close()
        self.p.wait()


SERVER = []		# the DcpServer, once a dcp saver has asked for it


def dcp_server():
    if not SERVER:
        SERVER.append(DcpServer())
    return SERVER[0]


def save(saver, src, dst):
    """One save of src to dst by saver."""
    if saver in DCP:
        dcp_server().save(src, dst, saver)
    else:
        run(*SAVERS[saver](src, dst), env=PY_ENV)


# The guest has no udev: device-mapper makes its /dev/mapper nodes itself.
os.environ["DM_DISABLE_UDEV"] = "1"


def run(*argv, **kw):
    out = subprocess.run(argv, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, **kw)
    if out.returncode:
        raise RuntimeError("%s: exit %d: %s" % (
            " ".join(argv[:2]), out.returncode,
            out.stdout.decode(errors="replace").strip()))
    return out.stdout


def checkpoint(path, seed, mib):
    """Write a safetensors file of mib MiB of U8 tensors, seeded bytes."""
    tensors, blobs, off = {}, [], 0
    for i in range(mib * 4):
        blob = hashlib.sha256(b"%d/%d" % (seed, i)).digest() * 8192
        tensors["t%03d" % i] = {"dtype": "U8", "shape": [len(blob)],
                                "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    head = repr(tensors).replace("'", '"').encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), 8 + n


def tensors_digest(weight_map, folder):
    """What a loader reads through weight_map (tensor -> file in folder):
    a digest of every tensor's name, dtype, shape and bytes; or why it
    cannot be read."""
    h, heads = hashlib.sha256(), {}
    try:
        for name in sorted(weight_map):
            path = os.path.join(folder, weight_map[name])
            if path not in heads:
                heads[path] = header(path)
            head, at = heads[path]
            t = head[name]
            with open(path, "rb") as f:
                f.seek(at + t["data_offsets"][0])
                n = t["data_offsets"][1] - t["data_offsets"][0]
                data = f.read(n)
            if len(data) != n:
                return "unreadable: %s is short" % weight_map[name]
            h.update(repr((name, t["dtype"], t["shape"])).encode() + data)
    except (OSError, ValueError, KeyError, TypeError) as e:
        return "unreadable: %s" % e
    return h.hexdigest()


def file_tensors_digest(path):
    head, _ = header(path)
    return tensors_digest({n: os.path.basename(path) for n in head
                           if n != "__metadata__"}, os.path.dirname(path))


def index_names(folder):
    """The index's weight_map, or None when it cannot be read."""
    try:
        with open(os.path.join(folder, INDEX), "rb") as f:
            wm = json.load(f)["weight_map"]
        return wm if isinstance(wm, dict) else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def dcp_load(folder):
    """(digest, files .metadata names) of the DCP checkpoint in folder, or
    (why it cannot be read, None)."""
    out = dcp_server().ask("load", os.path.join(folder, DCP_DIR))
    if out.startswith("unreadable"):
        return out, None
    words = out.split()
    return words[0], set(words[1:])


def checkpoint_digest(folder, saver):
    """What the checkpoint in folder reads as (a digest), or why not."""
    if saver in DCP:
        return dcp_load(folder)[0]
    if saver not in SHARDED:
        return digest(os.path.join(folder, NAME))
    wm = index_names(folder)
    if wm is None:
        return "unreadable: the index"
    return tensors_digest(wm, folder)


def dcp_leftovers(folder):
    """Files in folder's checkpoint folder that its .metadata does not
    name: (hidden temporary files and .distcp files, which the next save
    clears; the others)."""
    names = set(os.listdir(os.path.join(folder, DCP_DIR))) - {".metadata"}
    names -= dcp_load(folder)[1] or set()
    allowed = {n for n in names if n.startswith(".") or
               DCP_FILE.fullmatch(n)}
    stray = names - allowed
    stray |= set(os.listdir(folder)) - {"lost+found", DCP_DIR}
    return allowed, stray


def leftovers(folder, saver):
    """Files in folder that are not the checkpoint's: (those a save may
    leave, the others)."""
    if saver in DCP:
        return dcp_leftovers(folder)
    names = set(os.listdir(folder)) - {"lost+found", target(saver)}
    if saver in SHARDED:
        names -= set((index_names(folder) or {}).values())
    temp = ".model*.tmp-*" if saver in SHARDED else "." + NAME + ".tmp-*"
    allowed = {n for n in names if fnmatch.fnmatch(n, temp) or
               (saver == "sharded" and SHARD_PATTERN.fullmatch(n))}
    return allowed, names - allowed


class Loop:
    """A loop device over a sparse file of size_mb MiB."""

    def __init__(self, path, size_mb):
        with open(path, "wb") as f:
            f.truncate(size_mb << 20)
        self.path = path
        self.dev = run("losetup", "--find", "--show", path).decode().strip()

    def close(self):
        run("losetup", "-d", self.dev)


def sectors(dev):
    return int(run("blockdev", "--getsz", dev))


def mkfs(fs, dev):
    if fs == "ext4":
        run("mkfs.ext4", "-q", "-F", "-E",
            "nodiscard,lazy_itable_init=0,lazy_journal_init=0", dev)
    else:
        run("mkfs.xfs", "-q", "-f", "-K", dev)


def first_saver(saver):
    """Who saves the old checkpoint that saver's save replaces."""
    return saver if saver in SHARDED or saver in DCP else "c"


def record(fs, saver, work, old, new):
    """Log a save of new over old; returns the log's path."""
    data = Loop(os.path.join(work, "data.img"), DEV_MB)
    log = Loop(os.path.join(work, "log.img"), 1024)
    mnt = os.path.join(work, "mnt")
    os.makedirs(mnt, exist_ok=True)
    try:
        run("dmsetup", "create", LW, "--table", "0 %d log-writes %s %s" %
            (sectors(data.dev), data.dev, log.dev))
        mkfs(fs, "/dev/mapper/" + LW)
        run("mount", "/dev/mapper/" + LW, mnt)
        save(first_saver(saver), old, os.path.join(mnt, target(saver)))
        run("sync")
        run("dmsetup", "message", LW, "0", "mark", "base")
        save(saver, new, os.path.join(mnt, target(saver)))
        run("dmsetup", "message", LW, "0", "mark", "saved")
        run("umount", mnt)
        run("dmsetup", "remove", LW)
    finally:
        subprocess.run(["umount", mnt], stderr=subprocess.DEVNULL)
        subprocess.run(["dmsetup", "remove", LW], stderr=subprocess.DEVNULL)
        data.close()
        log.close()
        os.unlink(data.path)
    return log.path


BLOCK = 4096		# what a power cut cannot tear: a page, a 4Kn sector


INSIDE = 24		# cuts inside one write, at most


def cut_points(log, base, saved):
    """(entries applied whole, sectors of the next one) for every cut in
    the save: after each write, and inside each write of two blocks or
    more, with its first whole blocks on disk (up to INSIDE places)."""
    per_block = BLOCK // log.sectorsize
    points = []
    for e in log.entries[base + 1:saved + 1]:
        blocks = e.nr_sectors // per_block if e.writes() else 0
        inside = min(blocks - 1, INSIDE)
        for k in range(1, inside + 1):
            points.append((e.index, blocks * k // (inside + 1) * per_block))
        points.append((e.index + 1, 0))
    return points


def spread(points, n):
    if n <= 0 or n >= len(points):
        return points
    step = (len(points) - 1) / (n - 1)
    return [points[round(i * step)] for i in range(n)]


class Replayer:
    """A device that the log is replayed onto, forwards only."""

    def __init__(self, log, work):
        self.log = log
        self.img = Loop(os.path.join(work, "replay.img"), DEV_MB)
        self.cow = Loop(os.path.join(work, "cow.img"), 256)
        self.fd = os.open(self.img.path, os.O_RDWR)
        self.done = 0

    def to(self, whole, partial):
        for e in self.log.entries[self.done:whole]:
            self.log.apply(e, self.fd)
        self.done = whole
        if partial:
            self.log.apply(self.log.entries[whole], self.fd, partial)
            self.done = whole	# the rest of it comes with the next cut
        os.fsync(self.fd)

    def snapshot(self):
        run("dmsetup", "create", SNAP, "--table",
            "0 %d snapshot %s %s N 8" % (sectors(self.img.dev),
                                          self.img.dev, self.cow.dev))
        return "/dev/mapper/" + SNAP

    def close(self):
        os.close(self.fd)
        self.img.close()
        self.cow.close()
        os.unlink(self.img.path)
        os.unlink(self.cow.path)


def check_cut(rep, point, saver, work, hashes, must_be_new, resave):
    """Mount the state at point; return the problem in words, or None."""
    rep.to(*point)
    mnt = os.path.join(work, "cut")
    os.makedirs(mnt, exist_ok=True)
    dev = rep.snapshot()
    try:
        out = subprocess.run(["mount", dev, mnt], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        if out.returncode:
            return "mount failed: " + out.stdout.decode().strip()
        try:
            return inspect(mnt, saver, hashes, must_be_new, resave)
        finally:
            run("umount", mnt)
    finally:
        run("dmsetup", "remove", SNAP)


def inspect(mnt, saver, hashes, must_be_new, resave):
    old, new = hashes
    if not os.path.exists(os.path.join(mnt, target(saver))):
        return "the checkpoint is gone"
    got = checkpoint_digest(mnt, saver)
    if got not in (old, new):
        return "the checkpoint is torn (%s)" % (
            got if got.startswith("unreadable") else "neither old nor new")
    if must_be_new and got != new:
        return "the save returned but the old checkpoint is back"
    stray = leftovers(mnt, saver)[1]
    if stray:
        return "unexpected files: %s" % ", ".join(sorted(stray))
    if resave:
        try:
            save(saver, resave, os.path.join(mnt, target(saver)))
            why = None
        except RuntimeError as e:
            why = str(e)
        if why or checkpoint_digest(mnt, saver) != new:
            return "the next save failed: %s" % (why or "not the new one")
        kept = [n for n in leftovers(mnt, saver)[0]
                if SHARD_PATTERN.fullmatch(n) or DCP_FILE.fullmatch(n)]
        if kept:
            return "the next save left a cut save's shards: %s" % (
                ", ".join(sorted(kept)))
    return None


def reference(saver, src, work):
    """What saver writes for src (libpin pads the header, say): its digest;
    for a sharded saver, the tensors of src."""
    if saver in SHARDED or saver in DCP:
        return file_tensors_digest(src)
    out = os.path.join(work, "reference.st")
    run(*SAVERS[saver](src, out), env=PY_ENV)
    h = digest(out)
    os.unlink(out)
    return h


def one(fs, saver, work, old, new, npoints):
    t0 = time.monotonic()
    hashes = (reference(first_saver(saver), old, work),
              reference(saver, new, work))
    log = dmlog.Log(record(fs, saver, work, old, new))
    try:
        base, saved = log.mark("base"), log.mark("saved")
        points = cut_points(log, base, saved)
        chosen = spread(points, npoints)
        rep = Replayer(log, work)
        try:
            rep.to(base, 0)
            for i, point in enumerate(chosen):
                last = point == points[-1]
                why = check_cut(rep, point, saver, work, hashes, last,
                                new if i % 10 == 0 or last else None)
                if why:
                    return False, "cut %d of %d (entry %d%s): %s" % (
                        i + 1, len(chosen), point[0],
                        ", half of the next" if point[1] else "", why)
        finally:
            rep.close()
    finally:
        log.close()
        os.unlink(os.path.join(work, "log.img"))
    return True, "%d of %d cut points, %d logged writes in the save, " \
        "%.0f s" % (len(chosen), len(points),
                    sum(e.writes() for e in log.entries[base:saved]),
                    time.monotonic() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fs", default="ext4,xfs")
    ap.add_argument("--saver", default="c,python,sharded")
    ap.add_argument("--points", type=int, default=50)
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--mib", type=int, default=3,
                    help="size of the old checkpoint (default 3 MiB; "
                    "the new one is a MiB larger)")
    ap.add_argument("work")
    a = ap.parse_args()
    if a.points < 2:
        ap.error("--points: at least 2")
    fss, savers = a.fs.split(","), a.saver.split(",")
    for s in savers:
        if s not in SAVERS and s not in DCP:
            ap.error("--saver: unknown saver %r" % s)
    run("modprobe", "-a", "dm-log-writes", "dm-snapshot", "loop")
    os.makedirs(a.work, exist_ok=True)
    old, new = os.path.join(a.work, "old.st"), os.path.join(a.work, "new.st")
    checkpoint(old, 1, a.mib)
    checkpoint(new, 2, a.mib + 1)
    print("1..%d" % (len(fss) * len(savers)), flush=True)
    n, failed = 0, 0
    for fs in fss:
        for saver in savers:
            n += 1
            ok, what = one(fs, saver, a.work, old, new,
                           0 if a.all else a.points)
            failed += not ok
            print("%s %d - power cut during a save (%s, %s): %s" % (
                "ok" if ok else "not ok", n, fs, saver, what), flush=True)
    for server in SERVER:
        server.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
