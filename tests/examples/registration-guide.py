# SPDX-License-Identifier: MIT
# Documentation/python.md's "Checking registration without a GPU",
# runnable: tests/python/test_readme_guides.py runs it (argument: a folder
# to work in) with PIN_CUDA_LIBRARY naming the driver test double, and
# checks that python.md shows the code after the "# guide" line as it is
# here.
import os
import sys

import torch
from pinmem.safetensors.torch import save_file

os.chdir(sys.argv[1])
save_file({"w": torch.ones(4, 4), "b": torch.zeros(4)}, "model.safetensors")
# guide
import ctypes, os
import pinmem.torch as pt
from pinmem.safetensors.torch import load_file

sd = load_file("model.safetensors")
w = sd["w"]
print(pt.pin_state(w))                   # libpin's word: locked=True, registered=True

# The driver's word: the double says whether a live registration covers
# w's bytes, and with which cuMemHostRegister flags.
double = ctypes.CDLL(os.environ["PIN_CUDA_LIBRARY"])
double.cuda_double_covers.argtypes = [ctypes.c_size_t, ctypes.c_size_t,
                                      ctypes.POINTER(ctypes.c_uint)]
flags = ctypes.c_uint()
lo = w.data_ptr()
covered = double.cuda_double_covers(lo, lo + w.numel() * w.element_size(),
                                    ctypes.byref(flags))
print("registered" if covered else "not registered", hex(flags.value))
assert covered and pt.pin_state(w).registered
