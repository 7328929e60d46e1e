# SPDX-License-Identifier: MIT
"""torch.distributed.checkpoint (DCP) over pinmem (importable only where
torch has DCP: torch 2; the stager needs DCP's async staging, 2.9 and
later): the stager stages async_save's state dict in one reused region,
the storage layer writes and reads torch's own .distcp layout with
libpin's io_uring I/O; PinHuggingFaceStorageWriter and
PinHuggingFaceStorageReader the same for torch's Hugging Face layout
(safetensors shards written by libpin's writer, read into pinned memory).

    import torch.distributed.checkpoint as dcp
    from pinmem.dcp import PinStager, PinStorageWriter, PinStorageReader
    stager = PinStager()
    f = dcp.async_save(sd, storage_writer=PinStorageWriter(path),
                       async_stager=stager)
    stager.close()                  # after the last save
    dcp.load(sd, storage_reader=PinStorageReader(path))

Documentation/training.md says what is staged where, what the kernel
guarantees about reusing the staging memory, and how a save commits.
"""
from .stager import PinStager
from .storage import PinStorageWriter, PinStorageReader
from .hf import PinHuggingFaceStorageWriter, PinHuggingFaceStorageReader

__all__ = ["PinStager", "PinStorageWriter", "PinStorageReader",
           "PinHuggingFaceStorageWriter", "PinHuggingFaceStorageReader"]
