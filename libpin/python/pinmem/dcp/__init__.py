# SPDX-License-Identifier: MIT
"""torch.distributed.checkpoint (DCP) over pinmem regions (importable
only where torch has DCP's async staging: torch 2.9 and later).

    import torch.distributed.checkpoint as dcp
    from pinmem.dcp import PinStager
    stager = PinStager()
    f = dcp.async_save(sd, checkpoint_id=path, async_stager=stager)
    stager.close()                  # after the last save

Documentation/training.md says what is staged where and what the kernel
guarantees about reusing the staging memory.
"""
from .stager import PinStager

__all__ = ["PinStager"]
