# SPDX-License-Identifier: GPL-2.0
"""One rank of test_dcp_storage's multi-rank runs (gloo, CPU).

    RANK=r WORLD_SIZE=n MASTER_ADDR=127.0.0.1 MASTER_PORT=p \
        python dcp_ranks.py DIR [RESHARD_FROM]

or run_rank() in a process forked from one that imported this module
(test_dcp_storage's fork server: torch imported once, not once a rank,
which under an emulator is a minute a process).

Each rank trains a small Transformer layer one Adam step (the same on
every rank), saves model and optimizer state (get_state_dict) with
PinStorageWriter to DIR/pin and with torch's FileSystemWriter to
DIR/torch, then loads each with the other side's reader into a fresh
model and optimizer (set_state_dict) and compares every tensor bit for
bit. It also saves a tensor sharded across the ranks (a DTensor,
Shard(0)) to DIR/shard with PinStorageWriter; with RESHARD_FROM (a
DIR/shard written at another world size) it loads that into a DTensor
sharded across this run's ranks and checks its rows; and it loads its
own DIR/shard into a DTensor sharded by columns (Shard(1)). Then async
saves staged by PinStager (DIR/async-K), of a DTensor and a plain
tensor changed as soon as each save returns: every checkpoint holds its
own step's values, each rank's saves reuse one region; and, over more
than one rank and unless told not to, the same in DCP's checkpoint
processes (DIR/async-process-K: the storage writer
pickled to each, two regions a rank). Last, DCP's Hugging Face layout
over the ranks (save_distributed, consolidated) by pinmem's writer and
torch's, DIR/hf-pin and DIR/hf-torch. Rank r writes DIR/rank-r.json:
what it checked.
"""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint.state_dict import (get_state_dict,
                                                     set_state_dict)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "libpin", "python"))
import dcp_probe  # noqa: E402
from pinmem.dcp import (PinHuggingFaceStorageReader,  # noqa: E402
                        PinHuggingFaceStorageWriter, PinStager,
                        PinStorageReader, PinStorageWriter)

FULL_ROWS, FULL_COLS = 24, 40


def trained():
    torch.manual_seed(1234)
    model = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4,
                                             dim_feedforward=64,
                                             dropout=0.0, batch_first=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(2, 5, 32)).square().mean().backward()
    opt.step()
    return model, opt


def fresh():
    torch.manual_seed(99)
    model = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4,
                                             dim_feedforward=64,
                                             dropout=0.0, batch_first=True)
    return model, torch.optim.Adam(model.parameters(), lr=1e-3)


def flat(x, path=""):
    """path -> tensor or value, every leaf of a nested state dict."""
    if isinstance(x, dict):
        out = {}
        for k, v in x.items():
            out.update(flat(v, "%s/%s" % (path, k)))
        return out
    if isinstance(x, (list, tuple)):
        out = {}
        for i, v in enumerate(x):
            out.update(flat(v, "%s/%d" % (path, i)))
        return out
    return {path: x}


def same(a, b):
    """The leaves that differ (tensors bit for bit: dtype, shape, bytes)."""
    fa, fb = flat(a), flat(b)
    bad = sorted(set(fa) ^ set(fb))
    for k in set(fa) & set(fb):
        x, y = fa[k], fb[k]
        if isinstance(x, torch.Tensor):
            if not (isinstance(y, torch.Tensor) and x.dtype == y.dtype and
                    x.shape == y.shape and
                    torch.equal(x.reshape(-1).view(torch.uint8),
                                y.reshape(-1).view(torch.uint8))):
                bad.append(k)
        elif x != y:
            bad.append(k)
    return bad


def model_round_trips(top):
    model, opt = trained()
    msd, osd = get_state_dict(model, opt)
    want = {"model": msd, "optim": osd}
    dcp.save(want, storage_writer=PinStorageWriter(os.path.join(top, "pin")))
    dcp.save(want, storage_writer=FileSystemWriter(os.path.join(top,
                                                                "torch")))
    dist.barrier()
    out = {}
    for name, reader in (("pin", FileSystemReader), ("torch",
                                                     PinStorageReader)):
        m2, o2 = fresh()
        msd2, osd2 = get_state_dict(m2, o2)
        sd = {"model": msd2, "optim": osd2}
        dcp.load(sd, storage_reader=reader(os.path.join(top, name)))
        set_state_dict(m2, o2, model_state_dict=sd["model"],
                       optim_state_dict=sd["optim"])
        msd3, osd3 = get_state_dict(m2, o2)
        out["%s read by %s" % (name, reader.__name__)] = same(
            want, {"model": msd3, "optim": osd3})
    out["tensors"] = len([v for v in flat(want).values()
                          if isinstance(v, torch.Tensor)])
    return out


def full():
    return torch.arange(FULL_ROWS * FULL_COLS,
                        dtype=torch.float64).reshape(FULL_ROWS, FULL_COLS)


def sharded(top, reshard_from):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    w = distribute_tensor(full(), mesh, [Shard(0)])
    dcp.save({"w": w}, storage_writer=PinStorageWriter(os.path.join(
        top, "shard")))
    # The saved row blocks cut into column blocks: each read narrowed.
    cols = distribute_tensor(torch.zeros(FULL_ROWS, FULL_COLS,
                                         dtype=torch.float64),
                             mesh, [Shard(1)])
    dcp.load({"w": cols}, storage_reader=PinStorageReader(os.path.join(
        top, "shard")))
    n = FULL_COLS // dist.get_world_size()
    r = dist.get_rank()
    out = {"columns equal": torch.equal(cols.to_local(),
                                        full()[:, r * n:(r + 1) * n])}
    if reshard_from:
        got = distribute_tensor(torch.zeros(FULL_ROWS, FULL_COLS,
                                            dtype=torch.float64),
                                mesh, [Shard(0)])
        dcp.load({"w": got}, storage_reader=PinStorageReader(reshard_from))
        local = got.to_local()
        rows = FULL_ROWS // dist.get_world_size()
        r = dist.get_rank()
        out["reshard rows"] = [r * rows, (r + 1) * rows]
        out["reshard equal"] = torch.equal(local,
                                           full()[r * rows:(r + 1) * rows])
    return out


def staged_async(top, process, saves=3):
    """async_save with PinStager of a DTensor (row shards) and a plain
    tensor, the training loop changing both as soon as each save
    returns; what each checkpoint holds, read back by torch's reader.
    process: in DCP's checkpoint process (the writer pickled to it, the
    region passed by fd), else in its thread."""
    from torch.distributed.checkpoint.state_dict_saver import \
        AsyncCheckpointerType
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    w = distribute_tensor(full(), mesh, [Shard(0)])
    sd = {"w": w, "b": torch.zeros(8), "step": 0}
    kind = AsyncCheckpointerType.PROCESS if process else \
        AsyncCheckpointerType.THREAD
    name = "async-process" if process else "async"
    # Its own group: the saves' collectives run in DCP's thread.
    pg = dist.new_group(backend="gloo")
    stager = PinStager(cuda=None, process=process)
    futures, regions = [], set()
    try:
        for k in range(saves):
            with torch.no_grad():
                w.to_local().copy_(full().chunk(dist.get_world_size())[
                    dist.get_rank()] + k)
                sd["b"].fill_(k)
            sd["step"] = k
            futures.append(dcp.async_save(
                sd, storage_writer=PinStorageWriter(
                    os.path.join(top, "%s-%d" % (name, k))),
                async_stager=stager, process_group=pg,
                async_checkpointer_type=kind))
            regions.add(stager.region.id)
            with torch.no_grad():               # the next step, at once
                w.to_local().fill_(-1)
                sd["b"].fill_(-1)
            futures[-1].result()
    finally:
        stager.close()
        if process:
            dcp_probe.stop_checkpoint_process()
    right = 0
    for k in range(saves):
        got = {"w": distribute_tensor(torch.zeros(FULL_ROWS, FULL_COLS,
                                                  dtype=torch.float64),
                                      mesh, [Shard(0)]),
               "b": torch.zeros(8), "step": -1}
        dcp.load(got, storage_reader=FileSystemReader(
            os.path.join(top, "%s-%d" % (name, k))))
        rows = FULL_ROWS // dist.get_world_size()
        r = dist.get_rank()
        right += torch.equal(got["w"].to_local(),
                             full()[r * rows:(r + 1) * rows] + k) and \
            bool((got["b"] == k).all()) and got["step"] == k
    return {"%s saves right" % name: right, "%s saves" % name: saves,
            "%s regions" % name: len(regions)}


def hf_over_ranks(top):
    """The Hugging Face layout over the ranks: a row-sharded DTensor and
    a replicated tensor saved with save_distributed and consolidation by
    pinmem's writer and by torch's; rank 0 compares the consolidated
    files; each rank loads pinmem's into a fresh DTensor with pinmem's
    reader and checks its rows."""
    from torch.distributed.checkpoint import HuggingFaceStorageWriter
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    sd = {"w": distribute_tensor(full(), mesh, [Shard(0)]),
          "b": torch.arange(8, dtype=torch.float32)}
    for name, writer in (("hf-torch", HuggingFaceStorageWriter),
                         ("hf-pin", PinHuggingFaceStorageWriter)):
        dcp.save(sd, storage_writer=writer(
            os.path.join(top, name), save_distributed=True,
            enable_consolidation=True))
    dist.barrier()
    out = {}
    if dist.get_rank() == 0:
        same_files = []
        for f in sorted(os.listdir(os.path.join(top, "hf-torch"))):
            a = os.path.join(top, "hf-torch", f)
            if os.path.isfile(a):
                with open(a, "rb") as x, \
                        open(os.path.join(top, "hf-pin", f), "rb") as y:
                    same_files.append([f, x.read() == y.read()])
        out["hf consolidated files"] = same_files
    got = {"w": distribute_tensor(torch.zeros(FULL_ROWS, FULL_COLS,
                                              dtype=torch.float64),
                                  mesh, [Shard(0)]),
           "b": torch.zeros(8)}
    dcp.load(got, storage_reader=PinHuggingFaceStorageReader(
        os.path.join(top, "hf-pin")))
    rows = FULL_ROWS // dist.get_world_size()
    r = dist.get_rank()
    out["hf rows equal"] = torch.equal(
        got["w"].to_local(), full()[r * rows:(r + 1) * rows]) and \
        torch.equal(got["b"], sd["b"])
    return out


def main(process_saves=True):
    top = sys.argv[1]
    if not dist.is_initialized():
        dist.init_process_group("gloo")
    rank = dist.get_rank()
    res = {"world": dist.get_world_size()}
    res.update(model_round_trips(top))
    res.update(sharded(top, sys.argv[2] if len(sys.argv) > 2 else None))
    res.update(staged_async(top, process=False))
    if process_saves and dist.get_world_size() > 1:
        # One rank in-process (test_one_rank) leaves DCP's checkpoint
        # process to test_dcp_process.py: its spawn imports torch again.
        res.update(staged_async(top, process=True))
    res.update(hf_over_ranks(top))
    dist.barrier()
    dist.destroy_process_group()
    with open(os.path.join(top, "rank-%d.json" % rank), "w") as f:
        json.dump(res, f)


def run_rank(env, argv, log, process_saves=True):
    """main() in a fresh process of a fork server: env (RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT) set, argv as the command line's, its
    output to the file log; process_saves: the async saves in DCP's
    checkpoint process too."""
    os.environ.update(env)
    sys.argv = ["dcp_ranks.py"] + argv
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    main(process_saves)


if __name__ == "__main__":
    main()
