# SPDX-License-Identifier: GPL-2.0
"""PyTorch distributed checkpoint saves and loads for the power-cut rig
(tests/powercut/powercut.py), one request a line on stdin, one answer a
line on stdout, so that torch is imported once (minutes under the
emulator) for every save and every cut point. Runs under the test venv's
torch (DCP needs torch 2.x), one process, no process group.

  save SRC DIR WRITER   SRC's U8 tensors as a DCP checkpoint in DIR, with
                        WRITER: pinmem (pinmem.dcp.PinStorageWriter) or
                        torch (torch's FileSystemWriter, which writes a
                        folder that holds a checkpoint in place)
                        -> "ok" or "error: ..."
  load DIR              what torch's FileSystemReader loads from DIR:
                        "DIGEST FILE..." (the digest as the rig computes
                        one for a safetensors file's tensors, then the
                        files its .metadata names) or "unreadable: ..."
"""
import hashlib
import json
import struct
import sys
import warnings

import torch
import torch.distributed.checkpoint as dcp

warnings.simplefilter("ignore")		# no process group: DCP says so


def tensors(src):
    with open(src, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    return {name: torch.frombuffer(bytearray(
        data[t["data_offsets"][0]:t["data_offsets"][1]]), dtype=torch.uint8)
        for name, t in head.items() if name != "__metadata__"}


def save(src, folder, writer):
    from pinmem.dcp import PinStorageWriter
    w = PinStorageWriter(folder) if writer == "pinmem" else \
        dcp.FileSystemWriter(folder)
    dcp.save(tensors(src), storage_writer=w, no_dist=True)
    return "ok"


def load(folder):
    reader = dcp.FileSystemReader(folder)
    md = reader.read_metadata()
    sd = {k: torch.empty(v.size, dtype=torch.uint8)
          for k, v in md.state_dict_metadata.items()}
    dcp.load(sd, storage_reader=dcp.FileSystemReader(folder), no_dist=True)
    h = hashlib.sha256()
    for name in sorted(sd):
        h.update(repr((name, "U8", list(sd[name].shape))).encode() +
                 sd[name].numpy().tobytes())
    files = sorted({s.relative_path for s in md.storage_data.values()})
    return " ".join([h.hexdigest()] + files)


def answer(words):
    try:
        if words[0] == "save" and len(words) == 4:
            return save(*words[1:])
        if words[0] == "load" and len(words) == 2:
            return load(words[1])
        return "error: unknown request %r" % " ".join(words)
    except Exception as e:  # noqa: BLE001 - every failure is an answer
        what = "%s: %s" % (type(e).__name__, e)
        return ("unreadable: " if words[0] == "load" else "error: ") + \
            " ".join(what.split())


def main():
    print("ready", flush=True)
    for line in sys.stdin:
        print(answer(line.split()), flush=True)


if __name__ == "__main__":
    main()
