# SPDX-License-Identifier: GPL-2.0
"""pinmem.dcp.PinStager under torch.distributed.checkpoint's async_save,
in one process without a process group: every checkpoint holds its own
step's values while the model changes under a slow writer (and torch's
DefaultStager, reused the same way, does not), one region and one CUDA
registration for 50 saves with flat RSS, the deadline's error leaving
the staged memory as it was, a changed structure's new region, close().

The slow writer is the tests' own (SlowWriter): torch's FileSystemWriter
sleeping $PINMEM_DCP_WRITE_DELAY_S seconds before it reads the staged
tensors. Needs torch 2.9 or later (DCP's AsyncStager); Debian's torch
1.13 skips, saying so. Runs on either backend: the device backend's
case of the wait (Region.donate) in the guests' venv run
(PINMEM_GUEST_TORCH2=1), the portable one's on the host."""
import errno
import gc
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

import pinmem

import cuda_double

pytestmark = [pytest.mark.torch,
              pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning")]

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOUBLE = os.path.join(TOP, "build", "tests", "cuda", "libcuda-double.so")
DELAY = "PINMEM_DCP_WRITE_DELAY_S"


def _version(text):
    return tuple(int(x) for x in text.split("+")[0].split(".")[:2])


@pytest.fixture(scope="module")
def dcp():
    """(torch, torch.distributed.checkpoint, pinmem.dcp), or a skip that
    says what this torch lacks."""
    torch = pytest.importorskip("torch")
    if _version(torch.__version__) < (2, 9):
        pytest.skip("torch %s predates DCP's async staging as pinmem.dcp "
                    "uses it (AsyncStager, StagingOptions: torch 2.9 and "
                    "later)" % torch.__version__)
    try:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint import staging  # noqa: F401
    except ImportError as e:
        pytest.skip("this torch %s has no DCP staging (%s)" %
                    (torch.__version__, type(e).__name__))
    import pinmem.dcp
    return torch, dcp, pinmem.dcp


def _slow_writer(dcp, path):
    """torch's FileSystemWriter, sleeping $PINMEM_DCP_WRITE_DELAY_S
    before it reads the staged tensors (the fault the dirty-data test
    injects: a save still writing when the next one stages)."""
    class SlowWriter(dcp.FileSystemWriter):
        def write_data(self, plan, planner):
            time.sleep(float(os.environ.get(DELAY, "0")))
            return super().write_data(plan, planner)
    return SlowWriter(path)


def _state(torch, model, step):
    return {"model": model.state_dict(), "step": step,
            "extra": [torch.full((3,), step, dtype=torch.int64), "tag"]}


def _fill(torch, model, sd, value):
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(value)
    sd["extra"][0].fill_(value)
    sd["step"] = value


def _mutating_loop(dcp, stager, root, saves=12):
    """async_save per step, the model changed right after each returns;
    how many checkpoints hold exactly their own step, and how many saves
    were started while the previous one was still writing."""
    torch, d, _ = dcp
    model = torch.nn.Linear(32, 16)
    sd = _state(torch, model, 0)
    futures, overlapped = [], 0
    for step in range(saves):
        _fill(torch, model, sd, step)
        if futures and not futures[-1].done():
            overlapped += 1
        futures.append(d.async_save(
            sd, storage_writer=_slow_writer(d, os.path.join(root, str(step))),
            async_stager=stager))
        _fill(torch, model, sd, -1)         # training goes on at once
    for f in futures:
        f.result()
    right = 0
    for step in range(saves):
        got = _state(torch, torch.nn.Linear(32, 16), -2)
        d.load(got, checkpoint_id=os.path.join(root, str(step)))
        right += all(bool((v == step).all()) for v in got["model"].values()) \
            and bool((got["extra"][0] == step).all()) and got["step"] == step
    return right, overlapped


def test_each_checkpoint_holds_its_own_step(dcp, tmp_path, monkeypatch):
    _, _, pd = dcp
    monkeypatch.setenv(DELAY, "0.1")
    stager = pd.PinStager(cuda=None)
    try:
        right, overlapped = _mutating_loop(dcp, stager, str(tmp_path))
    finally:
        stager.close()
    assert overlapped >= 6, "the loop never staged under a running write"
    assert right == 12


def test_torch_default_stager_shows_the_hazard(dcp, tmp_path, monkeypatch):
    """Documents the hazard PinStager is for, and that the loop above
    detects it: not a verdict on pinmem."""
    torch, _, _ = dcp
    from torch.distributed.checkpoint.staging import (DefaultStager,
                                                      StagingOptions)
    monkeypatch.setenv(DELAY, "0.1")
    stager = DefaultStager(StagingOptions(False, False, False, False))
    try:
        right, overlapped = _mutating_loop(dcp, stager, str(tmp_path))
    finally:
        stager.close()
    if right == 12:
        pytest.skip("torch %s's DefaultStager kept every checkpoint right "
                    "(%d saves overlapped): the hazard this loop detects "
                    "is gone" % (torch.__version__, overlapped))
    assert right < 12


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_fifty_saves_one_region_one_registration(dcp, tmp_path, monkeypatch,
                                                 dev):
    torch, d, pd = dcp
    cuda, stats = None, None
    if os.path.exists(DOUBLE):
        from pinmem.cuda import Cuda
        monkeypatch.setenv("PIN_CUDA_LIBRARY", DOUBLE)
        stats = cuda_double.stats(DOUBLE)
        cuda = Cuda(0)
        before = stats.register_calls
    sd = {"w": torch.randn(512, 1024), "b": torch.zeros(1024,
                                                        dtype=torch.bfloat16)}
    nbytes = 512 * 1024 * 4 + 1024 * 2
    stager = pd.PinStager(dev=dev, cuda=cuda)
    ids, sizes, totals, rss = set(), set(), set(), []
    try:
        for k in range(50):
            sd["w"].fill_(k)
            path = os.path.join(str(tmp_path), str(k))
            d.async_save(sd, checkpoint_id=path, async_stager=stager) \
                .result()
            shutil.rmtree(path)
            ids.add(stager.region.id)
            sizes.add(stager.region.size)
            totals.add(dev.info().total_bytes)
            rss.append(_rss())
        assert len(ids) == 1 and len(sizes) == 1 and len(totals) == 1
        assert nbytes <= sizes.pop() < nbytes + os.sysconf("SC_PAGE_SIZE") \
            + (2 << 20 if dev.backend == "device" else 0)
        # A region (4 MiB) kept per save would add 196 MiB.
        assert rss[-1] - rss[1] < 16 << 20, rss
        if stats is not None:
            assert stager.registered
            assert stats.register_calls == before + 1
            assert stats.live >= 1
    finally:
        stager.close()
        if cuda is not None:
            assert stats.live == 0 and stats.violations == 0, \
                stats.last_violation
            cuda.close()


def test_staged_dict_mirrors_the_state_dict(dcp, dev):
    torch, _, pd = dcp
    marker = object()
    src = {"a": torch.arange(6, dtype=torch.float64).reshape(2, 3).t(),
           "n": {"b": torch.tensor([True, False]),
                 "c": [torch.ones(3, dtype=torch.int8), 7, marker],
                 "e": torch.empty(0, 4)},
           "h": torch.full((5,), 1.5, dtype=torch.bfloat16)}
    stager = pd.PinStager(dev=dev, cuda=None)
    try:
        out = stager.stage(src)
        assert out["n"]["c"][1] == 7 and out["n"]["c"][2] is marker
        for got, want in ((out["a"], src["a"]), (out["n"]["b"], src["n"]["b"]),
                          (out["n"]["c"][0], src["n"]["c"][0]),
                          (out["h"], src["h"]), (out["n"]["e"], src["n"]["e"])):
            assert got.dtype == want.dtype and got.shape == want.shape
            assert torch.equal(got, want)
        src["a"].mul_(0)                       # the source changes, not these
        assert out["a"][1, 0] == 1.0
        # One region of exactly the tensors' bytes (up to its granularity).
        assert stager.region.size - (48 + 2 + 3 + 10) < 2 << 20
    finally:
        stager.close()


def test_other_tensor_subclasses_are_refused_by_name(dcp, dev):
    torch, _, pd = dcp

    class Odd(torch.Tensor):
        pass
    stager = pd.PinStager(dev=dev, cuda=None)
    try:
        with pytest.raises(TypeError, match=r"state_dict\['opt'\]\[1\] "
                           r"is a Odd; only plain tensors and DTensors"):
            stager.stage({"w": torch.ones(4),
                          "opt": [torch.ones(2), torch.ones(3).as_subclass(
                              Odd)]})
        assert stager.region is None        # nothing was staged
    finally:
        stager.close()


def test_changed_structure_makes_a_new_region(dcp, dev):
    torch, _, pd = dcp
    stager = pd.PinStager(dev=dev, cuda=None)
    try:
        stager.stage({"w": torch.ones(8)})
        old = stager.region
        out = stager.stage({"w": torch.ones(8), "v": torch.full((4,), 2.0)})
        assert stager.region.id != old.id
        with pytest.raises(ValueError):
            old.info()                         # the old handle is closed
        assert out["v"].tolist() == [2.0] * 4
        assert out["w"].tolist() == [1.0] * 8
    finally:
        stager.close()


def test_close_releases_the_region(dcp, dev):
    torch, _, pd = dcp
    stager = pd.PinStager(dev=dev, cuda=None)
    out = stager.stage({"w": torch.full((16,), 3.0)})
    r = stager.region
    stager.close()
    assert stager.region is None
    with pytest.raises(ValueError):
        r.info()
    assert out["w"].tolist() == [3.0] * 16     # the view holds the memory
    with pytest.raises(ValueError, match="closed"):
        stager.stage({"w": torch.ones(16)})


def test_deadline_leaves_the_staged_memory_unchanged(dcp, dev):
    torch, _, pd = dcp
    stager = pd.PinStager(dev=dev, timeout=0.2, cuda=None)
    try:
        held = stager.stage({"w": torch.full((1024,), 1.0)})
        region = stager.region
        start = time.monotonic()
        with pytest.raises(pinmem.BusyError) as e:
            stager.stage({"w": torch.full((1024,), 2.0)})
        assert time.monotonic() - start >= 0.2
        assert e.value.errno == errno.ETIMEDOUT
        text = str(e.value)
        assert "region %d" % region.id in text and "unchanged" in text
        if dev.backend == "device":
            # The kernel names the holder: this process's view.
            assert [h.pid for h in e.value.holders] == [os.getpid()]
            assert str(e.value.holders[0]) in text
            assert region.state == "sealed"
        else:
            assert "still referenced" in text
        assert held["w"].tolist() == [1.0] * 1024
        del held
        gc.collect()
        out = stager.stage({"w": torch.full((1024,), 4.0)})
        assert out["w"].tolist() == [4.0] * 1024
        assert stager.region.id == region.id
    finally:
        stager.close()


def test_device_backend_seals_what_the_writer_reads(dcp, dev, device_only):
    torch, _, pd = dcp
    stager = pd.PinStager(dev=dev, cuda=None)
    try:
        out = stager.stage({"w": torch.ones(4096)})
        info = stager.region.info()
        assert info.state == "sealed" and info.view_mappings == 1
        assert info.writable_view_mappings == 0
        del out
        out = stager.stage({"w": torch.zeros(4096)})
        assert stager.region.info().view_mappings == 1
        assert out["w"].sum().item() == 0
    finally:
        stager.close()


CHILD = r"""
import sys, socket
sys.path.insert(0, %r)
import numpy as np, pinmem
s = socket.socket(fileno=int(sys.argv[1]))
r = pinmem.open().import_region(pinmem.recv_fd(s))
a = r.view(np.float32, (1024,))
print(float(a[0]), flush=True)
sys.stdin.readline()
""" % os.path.join(TOP, "libpin", "python")


def test_a_writer_in_another_process_holds_the_stage(dcp, dev):
    """The region fd passed to another process (a checkpoint writer
    there), which maps a view: on the device backend the kernel counts
    it and the next save waits for it; the portable backend cannot see
    it (its guarantee is this process's only)."""
    torch, _, pd = dcp
    stager = pd.PinStager(dev=dev, timeout=0.3, cuda=None)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(b.fileno())],
                             pass_fds=[b.fileno()], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    b.close()
    try:
        stager.stage({"w": torch.full((1024,), 5.0)})   # dropped at once
        pinmem.send_fd(a, stager.region.fd())
        assert child.stdout.readline().split() == ["5.0"]
        if dev.backend == "device":
            with pytest.raises(pinmem.BusyError) as e:
                stager.stage({"w": torch.full((1024,), 6.0)})
            assert [h.pid for h in e.value.holders] == [child.pid]
            child.stdin.write("\n")
            child.stdin.flush()
            assert child.wait(timeout=120) == 0
        out = stager.stage({"w": torch.full((1024,), 6.0)})
        assert out["w"].tolist() == [6.0] * 1024
    finally:
        if child.poll() is None:
            child.stdin.write("\n")
            child.stdin.flush()
            child.wait(timeout=120)
        a.close()
        stager.close()
