# SPDX-License-Identifier: GPL-2.0
"""pinmem.dcp.PinStager(process=True) under DCP's checkpoint process
(async_save with AsyncCheckpointerType.PROCESS, a one-rank gloo group):
the staged tensors reach that process as the staging region's fd, never
as torch's shared-memory copy, and its writer reads the region itself
(the probe writer, dcp_probe.py, records where each tensor lies there);
every checkpoint holds its own step's values while the model changes
under a slow writer; the two regions alternate; on the device backend
the kernel names the checkpoint process among the region's holders
while it writes. The pickling alone (multiprocessing's ForkingPickler,
as DCP's pipe uses it, within one process) is tested without a
checkpoint process.

Needs torch 2.9 or later (DCP's AsyncStager); Debian's torch 1.13
skips, saying so. One checkpoint process for the module: it imports
torch (minutes under the emulator)."""
import gc
import json
import os
import time

import pytest

pytestmark = [pytest.mark.torch,
              pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning")]

SAVES = 5


def _version(text):
    return tuple(int(x) for x in text.split("+")[0].split(".")[:2])


@pytest.fixture(scope="module")
def dcp():
    """(torch, torch.distributed.checkpoint, pinmem.dcp), or a skip that
    says what this torch lacks."""
    torch = pytest.importorskip("torch")
    if _version(torch.__version__) < (2, 9):
        pytest.skip("torch %s predates DCP's async staging as pinmem.dcp "
                    "uses it (AsyncStager: torch 2.9 and later)" %
                    torch.__version__)
    try:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint import staging  # noqa: F401
    except ImportError as e:
        pytest.skip("this torch %s has no DCP staging (%s)" %
                    (torch.__version__, type(e).__name__))
    import pinmem.dcp
    return torch, dcp, pinmem.dcp


@pytest.fixture(scope="module")
def group(dcp, tmp_path_factory):
    """A one-rank gloo group (a FileStore); at the end, DCP's checkpoint
    process, if one was started, is told to stop."""
    import torch.distributed as dist
    from multiprocessing import resource_tracker
    tracker = resource_tracker._resource_tracker
    tracker_was_running = tracker._fd is not None
    saved = os.environ.get("MASTER_ADDR")
    # DCP's checkpoint process rendezvouses at MASTER_ADDR (default: this
    # host's name, which need not resolve here).
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    store = tmp_path_factory.mktemp("group") / "store"
    dist.init_process_group("gloo", init_method="file://%s" % store,
                            rank=0, world_size=1)
    yield
    import dcp_probe
    dcp_probe.stop_checkpoint_process()
    dist.destroy_process_group()
    if not tracker_was_running:
        # Starting the checkpoint process (spawn) started multiprocessing's
        # resource tracker, which would outlive this process by a moment.
        tracker._stop()
    if saved is None:
        del os.environ["MASTER_ADDR"]
    else:
        os.environ["MASTER_ADDR"] = saved


def _checkpoint_pid():
    from torch.distributed.checkpoint import _async_process_executor as ape
    p = ape._CHECKPOINT_PROCESS
    return p._save_process.pid if p is not None else None


def _holder_pids(region, future):
    """The pids holding region's views, polled until future is done."""
    pids = set()
    while not future.done():
        pids.update(h.pid for h in region.holders() if h.kind != "owner")
        time.sleep(0.05)
    return pids


def test_checkpoint_process_writes_from_the_region(dcp, group, dev, tmp_path):
    torch, d, pd = dcp
    from torch.distributed.checkpoint.state_dict_saver import \
        AsyncCheckpointerType
    import dcp_probe
    # Long enough to see the writer hold the region (the device backend's
    # check), and for the model to change under it.
    delay = 3.0 if dev.backend == "device" else 0.3
    model = torch.nn.Linear(64, 32)
    sd = {"model": model.state_dict(), "step": 0,
          "extra": [torch.zeros(3, dtype=torch.int64), "tag"]}
    stager = pd.PinStager(dev=dev, cuda=None, process=True)
    used, holders = [], []
    try:
        for step in range(SAVES):
            with torch.no_grad():
                for p in model.parameters():
                    p.fill_(step)
            sd["extra"][0].fill_(step)
            sd["step"] = step
            path = str(tmp_path / str(step))
            f = d.async_save(
                sd, storage_writer=dcp_probe.ProbeWriter(path, delay),
                async_stager=stager,
                async_checkpointer_type=AsyncCheckpointerType.PROCESS)
            with torch.no_grad():               # training goes on at once
                for p in model.parameters():
                    p.fill_(-1)
            sd["extra"][0].fill_(-1)
            st = os.fstat(stager.region.fd())
            used.append((stager.region.id, st.st_ino))
            if dev.backend == "device":
                holders.append(_holder_pids(stager.region, f))
            # DCP's checkpoint process serves one request at a time.
            f.result()
        assert len(stager.regions) == 2
        ids = [u[0] for u in used]
        assert ids[0] != ids[1] and ids[::2] == [ids[0]] * len(ids[::2]) \
            and ids[1::2] == [ids[1]] * len(ids[1::2])
        pid = _checkpoint_pid()
        for step in range(SAVES):
            with open(tmp_path / str(step) / "probe.json") as fp:
                probe = json.load(fp)
            assert probe["pid"] == pid != os.getpid()
            assert len(probe["tensors"]) == 3
            for t in probe["tensors"]:
                # Not torch's shared-memory copy: the region's own pages.
                assert not t["shared"], t
                assert "/dev/shm" not in t["mapping"][0], t
                if dev.backend == "portable":
                    assert t["mapping"][1] == used[step][1], (t, used[step])
            got = {"model": torch.nn.Linear(64, 32).state_dict(), "step": -2,
                   "extra": [torch.zeros(3, dtype=torch.int64), ""]}
            d.load(got, checkpoint_id=str(tmp_path / str(step)))
            assert got["step"] == step and got["extra"][1] == "tag"
            assert all(bool((v == step).all())
                       for v in got["model"].values())
            assert got["extra"][0].tolist() == [step] * 3
        if dev.backend == "device":
            # The kernel counts the checkpoint process's view while it
            # writes (and this process's own, until the save is done).
            assert all(pid in h for h in holders), (pid, holders)
    finally:
        stager.close()


def test_staged_tensors_pickle_as_the_region_fd(dcp, dev):
    """ForkingPickler (torch's reductions registered) sends a staged
    tensor as the region's fd, once for the dict, and rebuilds plain
    tensors over one view of the region, not torch's shared memory."""
    torch, _, pd = dcp
    import torch.multiprocessing  # noqa: F401 - registers the reductions
    from multiprocessing.reduction import ForkingPickler
    stager = pd.PinStager(dev=dev, cuda=None, process=True)
    try:
        staged = stager.stage({"a": torch.arange(1000, dtype=torch.float32),
                               "b": torch.ones(3, 5, dtype=torch.bfloat16),
                               "e": torch.empty(0, 2), "n": 7})
        # Closed before DCP's upload thread pickles the dict: the staged
        # tensors keep what they need of the region.
        stager.close()
        data = ForkingPickler.dumps(staged)
        assert len(data) < 2000            # no tensor bytes inside
        got = ForkingPickler.loads(data)
        assert got["n"] == 7 and got["e"].shape == (0, 2)
        assert type(got["a"]) is torch.Tensor
        assert torch.equal(got["a"], torch.arange(1000,
                                                  dtype=torch.float32))
        assert torch.equal(got["b"], torch.ones(3, 5, dtype=torch.bfloat16))
        assert not got["a"].untyped_storage().is_shared()
        if dev.backend == "device":
            other = dev.import_region(staged["a"]._pin_region_fd.fd)
            views = [h for h in other.holders() if h.kind != "owner"]
            other.close()
            # The stage's view, and the one the rebuilt tensors share.
            assert len(views) == 2, views
        del got, staged
        gc.collect()
    finally:
        stager.close()


def test_process_mode_alternates_two_regions(dcp, dev):
    torch, _, pd = dcp
    stager = pd.PinStager(dev=dev, cuda=None, process=True, timeout=0.2)
    try:
        a = stager.stage({"w": torch.full((64,), 1.0)})
        first = stager.region
        b = stager.stage({"w": torch.full((64,), 2.0)})
        second = stager.region
        assert first.id != second.id
        assert [r.id for r in stager.regions] == [first.id, second.id]
        # Save 3 reuses the first region: it waits for save 1's tensors.
        import pinmem
        with pytest.raises(pinmem.BusyError, match="save 1 still holds"):
            stager.stage({"w": torch.full((64,), 3.0)})
        del a
        gc.collect()
        c = stager.stage({"w": torch.full((64,), 3.0)})
        assert stager.region.id == first.id
        assert b["w"].tolist() == [2.0] * 64
        assert c["w"].tolist() == [3.0] * 64
    finally:
        stager.close()
