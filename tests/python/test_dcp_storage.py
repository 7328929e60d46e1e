# SPDX-License-Identifier: GPL-2.0
"""pinmem.dcp's PinStorageWriter and PinStorageReader against torch's
FileSystemWriter and FileSystemReader: the same files, read both ways
bit for bit, at 1, 2 and 4 ranks over gloo, resharded from 4 ranks to 2,
committed atomically, and clear errors for broken checkpoints."""
import errno
import filecmp
import json
import os
import pickle
import re
import socket
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


from dcp_torch import require_torch2  # noqa: E402

require_torch2()

import torch  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402
from torch.distributed.checkpoint import (FileSystemReader,  # noqa: E402
                                          FileSystemWriter)

from pinmem.dcp import PinStorageReader, PinStorageWriter  # noqa: E402
from pinmem.dcp import storage as pin_storage  # noqa: E402

pytestmark = [pytest.mark.torch,
              pytest.mark.filterwarnings("ignore::UserWarning")]


def state():
    """Tensors of many kinds (dtypes, a transposed one, an empty one, a
    scalar, one over 1 MiB) and plain objects (byte items)."""
    g = torch.Generator().manual_seed(7)
    return {
        "big": torch.randn(700, 600, generator=g),
        "bf16": torch.randn(33, 17, generator=g).to(torch.bfloat16),
        "i8": torch.randint(-128, 127, (1000,), generator=g,
                            dtype=torch.int8),
        "mask": torch.rand(5, 7, generator=g) > 0.5,
        "f64": torch.randn(3, generator=g, dtype=torch.float64),
        "t": torch.randn(90, 40, generator=g).t(),
        "empty": torch.zeros(0, 3),
        "scalar": torch.tensor(3.25),
        "extra": {"step": 12, "name": "run-a", "lr": [1e-3, 2e-4]},
    }


def zeros_like(sd):
    return {k: (torch.zeros_like(v) if isinstance(v, torch.Tensor) else
                {"step": 0, "name": "", "lr": [0.0]})
            for k, v in sd.items()}


def bits_equal(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


def assert_same(want, got):
    for k, v in want.items():
        if isinstance(v, torch.Tensor):
            assert bits_equal(v, got[k]), k
        else:
            assert got[k] == v, k


def load(path, reader=PinStorageReader, sd=None):
    out = zeros_like(sd or state())
    dcp.load(out, storage_reader=reader(path))
    return out


def failure(call, *args, **kwargs):
    """The exception call(*args, **kwargs) raised inside dcp.save or
    dcp.load (which wrap it in a CheckpointException, a BaseException)."""
    from torch.distributed.checkpoint.api import CheckpointException
    with pytest.raises(CheckpointException) as info:
        call(*args, **kwargs)
    (exc, _), = info.value.failures.values()
    return exc


def names(path):
    return sorted(os.listdir(path))


# ---- one process, no process group ----------------------------------------

def test_files_are_torch_s_byte_for_byte(tmp_path):
    sd = state()
    dcp.save(sd, storage_writer=PinStorageWriter(tmp_path / "pin"))
    dcp.save(sd, storage_writer=FileSystemWriter(tmp_path / "torch"))
    assert names(tmp_path / "pin") == names(tmp_path / "torch") == \
        [".metadata", "__0_0.distcp"]
    assert filecmp.cmp(tmp_path / "pin" / "__0_0.distcp",
                       tmp_path / "torch" / "__0_0.distcp", shallow=False)
    mds = []
    for side in ("pin", "torch"):
        with open(tmp_path / side / ".metadata", "rb") as f:
            mds.append(pickle.load(f))
    assert mds[0].storage_data == mds[1].storage_data
    assert mds[0].state_dict_metadata == mds[1].state_dict_metadata


def test_a_pickled_writer_writes_the_same_files(tmp_path):
    """DCP's checkpoint process gets the storage writer pickled."""
    sd = state()
    w = pickle.loads(pickle.dumps(PinStorageWriter(tmp_path / "pin",
                                                   queue_depth=3)))
    assert w.io.c.queue_depth == 3
    dcp.save(sd, storage_writer=w)
    dcp.save(sd, storage_writer=FileSystemWriter(tmp_path / "torch"))
    assert filecmp.cmp(tmp_path / "pin" / "__0_0.distcp",
                       tmp_path / "torch" / "__0_0.distcp", shallow=False)
    reader = pickle.loads(pickle.dumps(PinStorageReader(tmp_path / "pin")))
    assert_same(sd, load(tmp_path / "pin", reader=lambda _: reader))


def test_parts_become_the_file_in_order(tmp_path):
    """Small parts past the 8 MiB gathered, large ones at offsets that are
    not 4096 multiples, a short tail: the file is their concatenation."""
    from pinmem.dcp import _stream
    g = torch.Generator().manual_seed(3)
    small = [torch.randint(0, 256, (3001,), generator=g,
                           dtype=torch.uint8).numpy().tobytes()
             for _ in range(3000)]
    large = torch.randint(0, 256, ((3 << 20) + 7,), generator=g,
                          dtype=torch.uint8)
    parts = [(p, None) for p in small[:5]] + \
        [(memoryview(large.numpy()), large)] + \
        [(p, None) for p in small[5:]] + [(b"tail!", None)]
    path = tmp_path / "f"
    _stream.write_parts(str(path), parts, _stream.IoOpts())
    assert path.read_bytes() == b"".join(bytes(p) for p, _ in parts)
    with pytest.raises(FileExistsError):
        _stream.write_parts(str(path), parts, _stream.IoOpts())


@pytest.mark.parametrize("writer,reader", [
    (PinStorageWriter, FileSystemReader),
    (FileSystemWriter, PinStorageReader),
    (PinStorageWriter, PinStorageReader)])
def test_cross_reading_is_bit_exact(tmp_path, writer, reader):
    sd = state()
    dcp.save(sd, storage_writer=writer(tmp_path))
    assert_same(sd, load(tmp_path, reader))


def test_a_reused_folder_gets_new_names_and_loses_the_old(tmp_path):
    first = state()
    dcp.save(first, storage_writer=PinStorageWriter(tmp_path))
    second = {k: (v + 1 if isinstance(v, torch.Tensor) and
                  v.dtype.is_floating_point else v)
              for k, v in first.items()}
    dcp.save(second, storage_writer=PinStorageWriter(tmp_path))
    files = names(tmp_path)
    assert files[0] == ".metadata" and len(files) == 2
    assert files[1].startswith("__0_0-") and files[1].endswith(".distcp")
    assert_same(second, load(tmp_path))
    assert_same(second, load(tmp_path, FileSystemReader))


def test_a_save_cut_before_its_commit_leaves_the_previous(tmp_path,
                                                          monkeypatch):
    first = state()
    dcp.save(first, storage_writer=PinStorageWriter(tmp_path))
    before = names(tmp_path)

    def crash(self, metadata, results):
        raise OSError("power cut before .metadata")
    monkeypatch.setattr(PinStorageWriter, "finish", crash)
    second = {k: (torch.full_like(v, 5) if isinstance(v, torch.Tensor)
                  else v) for k, v in first.items()}
    assert "power cut" in str(failure(
        dcp.save, second, storage_writer=PinStorageWriter(tmp_path)))
    monkeypatch.undo()
    assert set(before) < set(names(tmp_path))      # the new, uncommitted
    assert_same(first, load(tmp_path))
    assert_same(first, load(tmp_path, FileSystemReader))
    dcp.save(second, storage_writer=PinStorageWriter(tmp_path))
    assert len(names(tmp_path)) == 2               # the cut save's gone


def test_metadata_is_committed_after_the_data_is_in_place(tmp_path,
                                                          monkeypatch):
    seen = []
    real = pin_storage.replace_file

    def spy(filename, parts):
        seen.append((os.path.basename(filename), names(tmp_path)))
        return real(filename, parts)
    monkeypatch.setattr(pin_storage, "replace_file", spy)
    dcp.save(state(), storage_writer=PinStorageWriter(tmp_path))
    assert seen == [(".metadata", ["__0_0.distcp"])]


def test_a_truncated_file_is_named(tmp_path):
    dcp.save(state(), storage_writer=PinStorageWriter(tmp_path))
    f = tmp_path / "__0_0.distcp"
    os.truncate(f, f.stat().st_size - 100)
    e = failure(load, tmp_path)
    assert isinstance(e, ValueError) and re.search(
        r"__0_0\.distcp: \d+ bytes, but \.metadata puts \S+ at \[\d+, "
        r"\d+\): the file is truncated", str(e)), e


def test_a_missing_file_is_named(tmp_path):
    dcp.save(state(), storage_writer=PinStorageWriter(tmp_path))
    os.unlink(tmp_path / "__0_0.distcp")
    e = failure(load, tmp_path)
    assert isinstance(e, FileNotFoundError) and re.search(
        r"__0_0\.distcp: missing; \.metadata puts \d+ items in it", str(e))


def test_metadata_lying_about_a_length_is_named(tmp_path):
    dcp.save(state(), storage_writer=PinStorageWriter(tmp_path))
    with open(tmp_path / ".metadata", "rb") as f:
        md = pickle.load(f)
    (index, info), = [(i, s) for i, s in md.storage_data.items()
                      if i.fqn == "big"]
    info.length -= 4096
    with open(tmp_path / ".metadata", "wb") as f:
        pickle.dump(md, f)
    e = failure(load, tmp_path)
    assert isinstance(e, ValueError) and re.search(
        r"__0_0\.distcp: big at \[\d+, \d+\) is not a torch\.save record",
        str(e)), e


def test_a_flipped_payload_byte_is_seen_by_both_readers(tmp_path):
    sd = state()
    dcp.save(sd, storage_writer=PinStorageWriter(tmp_path))
    with open(tmp_path / ".metadata", "rb") as f:
        md = pickle.load(f)
    info, = [s for i, s in md.storage_data.items() if i.fqn == "i8"]
    with open(tmp_path / "__0_0.distcp", "r+b") as f:
        data = f.read()
        at = data.index(sd["i8"].numpy().tobytes(), info.offset)
        f.seek(at + 10)
        f.write(bytes([data[at + 10] ^ 1]))
    for reader in (PinStorageReader, FileSystemReader):
        assert not bits_equal(sd["i8"], load(tmp_path, reader)["i8"])


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    d = tmp_path / "small"
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs",
                        str(d)], capture_output=True, text=True)
    if r.returncode:
        pytest.skip("cannot mount a tmpfs here: " + r.stderr.strip())
    yield d / "ck"
    subprocess.run(["umount", str(d)], check=True)


def test_a_full_disk_fails_naming_the_file_and_keeps_the_previous(
        small_disk):
    first = {"w": torch.arange(1000.0)}
    dcp.save(first, storage_writer=PinStorageWriter(small_disk))
    big = {"w": torch.randn(1000, 1000)}          # 4 MB on a 2 MB disk
    kept = big["w"].clone()
    e = failure(dcp.save, big, storage_writer=PinStorageWriter(small_disk))
    assert e.errno == errno.ENOSPC and re.search(
        r"__0_0-[0-9a-f]+\.distcp\S*: .*No space left", str(e)), e
    assert bits_equal(big["w"], kept)             # what was staged is kept
    assert names(small_disk) == [".metadata", "__0_0.distcp"]
    got = {"w": torch.zeros(1000)}
    dcp.load(got, storage_reader=PinStorageReader(small_disk))
    assert bits_equal(got["w"], first["w"])


# ---- ranks over gloo -------------------------------------------------------

def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# What a rank would otherwise import itself, a second of the host's CPU
# and most of a rank's (torch._dynamo comes with Adam, ml_dtypes with
# pinmem); importing them starts no thread.
PRELOAD = ["torch", "torch._dynamo", "torch.distributed.checkpoint",
           "torch.distributed.checkpoint.state_dict",
           "torch.distributed.tensor", "ml_dtypes"]

# DCP spawns its checkpoint process (AsyncCheckpointerType.PROCESS) with
# a fresh interpreter, a torch import each: a minute a rank under the
# guest's emulator, where 52-python-venv leaves the multi-rank ones out
# (PINMEM_DCP_RANKS_PROCESS=0); test_dcp_process.py runs it there.
RANKS_PROCESS = os.environ.get("PINMEM_DCP_RANKS_PROCESS", "1") != "0"


@pytest.fixture(scope="module")
def rank_server():
    """Rank processes forked from one server that imported torch and
    DCP once: separate processes, each its own gloo rank, without a
    torch start-up each (a minute and 400 MB under the guest's
    emulator). The server forks from a process that has only imported,
    with no threads or OpenMP pool to inherit. Python 3.11's server
    does not take the caller's sys.path, so it preloads what the venv
    holds; each rank imports dcp_ranks and pinmem.dcp itself.
    Not forked.py's fork of the test process: in the guest's suite that
    process has imported JAX, whose threads make forking it unsafe, so
    forked.py would start a new interpreter after all."""
    import multiprocessing
    from multiprocessing import forkserver
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    yield ctx
    # Stopped and waited for here, not left to notice pytest's exit: its
    # interpreter, torch and all, takes seconds to go under the emulator,
    # after the suite's end. _stop is the one way the module offers (its
    # own tests use it); without it the server still ends with pytest.
    stop = getattr(forkserver._forkserver, "_stop", None)
    if stop is not None:
        stop()


def run_ranks(ctx, world, top, *args):
    """dcp_ranks.run_rank in world processes; each rank's JSON report."""
    import dcp_ranks
    port = _free_port()
    procs = []
    for rank in range(world):
        env = dict(RANK=str(rank), WORLD_SIZE=str(world),
                   LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        p = ctx.Process(target=dcp_ranks.run_rank,
                        args=(env, [str(top)] + [str(a) for a in args],
                              os.path.join(top, "rank-%d.log" % rank),
                              RANKS_PROCESS))
        p.start()
        procs.append(p)
    for p in procs:
        p.join(timeout=600)
    for rank, p in enumerate(procs):
        if p.exitcode is None:
            p.kill()
            p.join()
        with open(os.path.join(top, "rank-%d.log" % rank)) as f:
            out = f.read()
        assert p.exitcode == 0, "rank %d (exit %s):\n%s" % (
            rank, p.exitcode, out[-3000:])
    reports = []
    for rank in range(world):
        with open(os.path.join(top, "rank-%d.json" % rank)) as f:
            reports.append(json.load(f))
    return reports


def check_round_trips(top, world, reports):
    for r in reports:
        assert r["world"] == world and r["tensors"] > 30
        assert r["columns equal"] is True
        # PinStager, a DTensor among the staged: each save its own step,
        # in DCP's thread and in its checkpoint process.
        assert r["async saves right"] == r["async saves"] == 3
        assert r["async regions"] == 1
        # The Hugging Face layout, a shard per rank, consolidated.
        assert r["hf rows equal"] is True
        assert r["pin read by FileSystemReader"] == []
        assert r["torch read by PinStorageReader"] == []
    assert reports[0]["hf consolidated files"] == [
        ["model-00001-of-00001.safetensors", True],
        ["model.safetensors.index.json", True]]
    assert names(top / "hf-pin" / "sharded") == [
        "shard-%05d-model-00001-of-00001.safetensors" % (i + 1)
        for i in range(world)]
    want = [".metadata"] + ["__%d_0.distcp" % i for i in range(world)]
    assert names(top / "pin") == names(top / "torch") == want
    for name in want[1:]:
        assert filecmp.cmp(top / "pin" / name, top / "torch" / name,
                           shallow=False), name


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory, rank_server):
    top = tmp_path_factory.mktemp("dcp4")
    return top, run_ranks(rank_server, 4, top)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory, rank_server, four_ranks):
    top = tmp_path_factory.mktemp("dcp2")
    return top, run_ranks(rank_server, 2, top, four_ranks[0] / "shard")


def test_four_ranks_model_and_adam(four_ranks):
    top, reports = four_ranks
    check_round_trips(top, 4, reports)
    assert names(top / "shard") == [".metadata"] + \
        ["__%d_0.distcp" % i for i in range(4)]


def test_two_ranks_and_resharding_from_four(two_ranks):
    top, reports = two_ranks
    check_round_trips(top, 2, reports)
    assert [r["reshard rows"] for r in reports] == [[0, 12], [12, 24]]
    assert all(r["reshard equal"] for r in reports)


def test_ranks_save_in_dcp_s_checkpoint_processes(four_ranks, two_ranks):
    """The staged region of each rank passed to its own checkpoint
    process: every save its own step, two regions a rank (one a save in
    flight, the next staged)."""
    if not RANKS_PROCESS:
        pytest.skip("PINMEM_DCP_RANKS_PROCESS=0: a torch start-up a rank "
                    "(test_dcp_process.py tests DCP's checkpoint process "
                    "at one rank)")
    for _, reports in (four_ranks, two_ranks):
        for r in reports:
            assert r["async-process saves right"] == \
                r["async-process saves"] == 3
            assert r["async-process regions"] == 2


def test_one_rank(tmp_path, monkeypatch):
    """In this process (no torch start-up): a group of one over gloo."""
    import torch.distributed as dist
    monkeypatch.syspath_prepend(HERE)
    import dcp_ranks
    monkeypatch.setattr(sys, "argv", ["dcp_ranks.py", str(tmp_path)])
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0,
                            world_size=1)
    try:
        dcp_ranks.main()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    with open(tmp_path / "rank-0.json") as f:
        check_round_trips(tmp_path, 1, [json.load(f)])
