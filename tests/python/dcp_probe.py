# SPDX-License-Identifier: GPL-2.0
"""A DCP storage writer for the checkpoint-process tests, importable by
DCP's checkpoint process (pickled by reference): torch's FileSystemWriter
that first sleeps (a save still writing while the test looks at the
region's holders), then records in probe.json, next to the checkpoint,
where the tensors it is about to write lie: its pid, whether torch's
shared memory holds them, and the file (path, inode) of the mapping
each one's bytes are in (/proc/self/maps)."""
import json
import os
import time

from torch.distributed.checkpoint import FileSystemWriter
from torch.distributed.checkpoint.planner import WriteItemType


def stop_checkpoint_process():
    """Tell DCP's checkpoint process of this process, if it started one,
    to stop, and wait for it (torch keeps it for the process's life)."""
    from torch.distributed.checkpoint import _async_process_executor as ape
    p = ape._CHECKPOINT_PROCESS
    if p is None:
        return
    ape._CHECKPOINT_PROCESS = None
    p._send(ape._CheckpointSaveProcessControlOpts.TERMINATE)
    p._save_process.join(timeout=60)
    if p._save_process.is_alive():
        p._save_process.terminate()


def _mapping_of(addr):
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if lo <= addr < hi:
                path = parts[5].strip() if len(parts) > 5 else ""
                return [path, int(parts[4])]
    return ["", 0]


class ProbeWriter(FileSystemWriter):
    def __init__(self, path, delay=0.0):
        super().__init__(path)
        self.delay = delay

    def write_data(self, plan, planner):
        time.sleep(self.delay)
        seen = []
        for item in plan.items:
            if item.type != WriteItemType.TENSOR:
                continue
            t = planner.resolve_data(item)
            seen.append({"shared": t.untyped_storage().is_shared(),
                         "mapping": _mapping_of(t.data_ptr())})
        with open(os.path.join(str(self.path), "probe.json"), "w") as f:
            json.dump({"pid": os.getpid(), "tensors": seen}, f)
        return super().write_data(plan, planner)
