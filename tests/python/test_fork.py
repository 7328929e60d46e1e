# SPDX-License-Identifier: GPL-2.0
"""A forked child never writes into its parent's private load.

A private load's tensors (torch's load_file, load(bytes) and safe_open,
NumPy's load_safetensors(writable=True)) lie in a shared mapping of the
process's own region, so without care a forked worker's write would land
in the parent's weights and its siblings'. In the child the binding makes
them copy-on-write (portable backend: the child sees its own write, the
parent keeps its bytes) or read-only (device backend: the write faults
in the child alone). Either way the parent still reads the original."""
import faulthandler
import os
import signal

import numpy as np
import pytest

import pinmem
from pinmem.safetensors import numpy as stnp

ORIGINAL, WRITTEN = 1.0, 171.0


def _checkpoint(scratch):
    path = os.path.join(scratch, "fork.safetensors")
    stnp.save_file({"w": np.full(1 << 16, ORIGINAL, np.float32),
                    "b": np.full(8, ORIGINAL, np.float32)}, path)
    return path


def _child_writes(arr):
    """Fork; the child writes arr[0] and reports what it reads back
    (exit 0: its own write; 1: anything else); the parent gets the wait
    status."""
    pid = os.fork()
    if pid == 0:
        try:
            faulthandler.disable()      # a fault here is the expected end
            arr[0] = WRITTEN
            os._exit(0 if arr[0] == WRITTEN and arr[1] == ORIGINAL else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    return status


def _check(status, dev, arr):
    assert float(arr[0]) == ORIGINAL, "the child's write reached the parent"
    assert float(arr[-1]) == ORIGINAL
    if dev.backend == "portable":
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    else:
        assert os.WIFSIGNALED(status) and \
            os.WTERMSIG(status) in (signal.SIGSEGV, signal.SIGBUS), status
    arr[0] = 5.0                  # the parent's own writes still go in
    assert float(arr[0]) == 5.0


def test_numpy_writable_load(scratch, dev):
    ck = pinmem.load_safetensors(_checkpoint(scratch), dev=dev,
                                 writable=True)
    w = ck["w"]
    _check(_child_writes(w), dev, w)


@pytest.mark.torch
@pytest.mark.parametrize("how", ["load_file", "load", "safe_open"])
def test_torch_private_load(scratch, dev, how):
    pytest.importorskip("torch", reason="PyTorch is not installed")
    from pinmem.safetensors import safe_open
    from pinmem.safetensors import torch as stpt
    path = _checkpoint(scratch)
    if how == "load_file":
        w = stpt.load_file(path)["w"]
    elif how == "load":
        with open(path, "rb") as f:
            w = stpt.load(f.read())["w"]
    else:
        with safe_open(path, "pt") as f:
            w = f.get_tensor("w")
    _check(_child_writes(w), dev, w)


def test_a_second_fork_sees_the_parents_bytes(scratch, dev):
    """Siblings: one child's write reaches neither the parent nor the
    next child."""
    if dev.backend != "portable":
        pytest.skip("device backend: a child's write faults")
    ck = pinmem.load_safetensors(_checkpoint(scratch), dev=dev,
                                 writable=True)
    w = ck["w"]
    assert os.WEXITSTATUS(_child_writes(w)) == 0
    pid = os.fork()
    if pid == 0:
        os._exit(0 if w[0] == ORIGINAL else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
