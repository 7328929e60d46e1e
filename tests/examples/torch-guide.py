# SPDX-License-Identifier: MIT
# The README's "Using pinmem with PyTorch", runnable: tests/python/
# test_readme_guides.py runs it (argument: a folder to work in) and checks
# that the README shows the code after the "# guide" line as it is here.
import os
import sys

import torch
from pinmem.safetensors.torch import save_file

os.chdir(sys.argv[1])
save_file({"w": torch.ones(4, 4), "b": torch.zeros(4)}, "model.safetensors")
# guide
import torch, pinmem, pinmem.torch as pt
from pinmem.safetensors.torch import load_file  # was: from safetensors.torch

sd = load_file("model.safetensors")             # locked, registered, writable tensors
print(pt.mapping_range(sd["w"]))                # the mapping w reads: no copy
w = sd["w"].mul_(2)                             # in place, in the pinned pages

x = pt.empty((1024,), torch.float32)            # pin_memory=True analogue; small ones share a region
r = pinmem.open().alloc(1 << 20)
pt.view(r, torch.float32, (1024,), writable=True).fill_(1.0)
r.seal()
t = pt.view(r, torch.float32, (1024,))          # read-only; the kernel counts its mapping
if r.backend == "device":                       # the portable backend cannot donate
    try:
        r.donate()
    except pinmem.BusyError as e:
        print(e)                                # names the process and range of t's mapping
    del t
    r.donate()                                  # no view left: the owner may rewrite it
sd = load_file("model.safetensors", shared=True)  # one copy per host (pinmem-cached)
