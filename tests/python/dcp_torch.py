# SPDX-License-Identifier: GPL-2.0
"""What the pinmem.dcp test files ask of this Python's torch before they
import it: torch 2's torch.distributed.checkpoint, checked from the
installed package's version without importing torch (seconds; minutes
under an emulator). The module skips otherwise, saying why."""
import os

import pytest


def _torch_version():
    try:
        from importlib import metadata
        return tuple(int(x) for x in
                     metadata.version("torch").split("+")[0].split(".")[:2])
    except Exception:
        return None


def require_torch2():
    """Skip the calling test module unless torch 2 is here and wanted."""
    tv = _torch_version()
    if tv is None:
        pytest.skip("torch is not installed", allow_module_level=True)
    left_out = os.environ.get("PINMEM_PY_NO_TORCH") == "1"
    if tv < (2, 0) or left_out:
        pytest.skip("pinmem.dcp needs torch 2's torch.distributed.checkpoint "
                    "(this Python's torch is %d.%d%s)" % (
                        tv + ((", left out: $PINMEM_PY_NO_TORCH=1",)
                              if left_out else ("",))),
                    allow_module_level=True)
