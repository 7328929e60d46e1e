# SPDX-License-Identifier: MIT
"""PyTorch distributed checkpoints (torch.distributed.checkpoint) through
pinmem: the storage layer writes and reads torch's own .distcp layout with
libpin's io_uring I/O.

    import torch.distributed.checkpoint as dcp
    from pinmem.dcp import PinStorageWriter, PinStorageReader
    dcp.save(state_dict, storage_writer=PinStorageWriter("ckpt/step-100"))
    dcp.load(state_dict, storage_reader=PinStorageReader("ckpt/step-100"))
"""
from .storage import PinStorageWriter, PinStorageReader
