# SPDX-License-Identifier: MIT
# The README's "Using pinmem with JAX", runnable: tests/python/
# test_readme_guides.py runs it (argument: a folder to work in) and checks
# that the README shows the code after the "# guide" line as it is here.
import os
import sys

import numpy as np
import pinmem

os.chdir(sys.argv[1])
# Any writer will do: load_safetensors puts every tensor on the 64 bytes
# JAX needs to take it without a copy. bf16, as LLM weights are.
import ml_dtypes
pinmem.save_safetensors("model.safetensors", {
    "w": np.ones((4, 4), np.float32),
    "emb": np.arange(8, dtype=np.float32).astype(ml_dtypes.bfloat16)})
# guide
import gc, jax, jax.numpy as jnp, numpy as np, pinmem, pinmem.jax as pj

params = pj.load_safetensors("model.safetensors")   # name -> jax.Array over a sealed region
w = params["w"]                                  # zero-copy: pj.mapping_range(w) is its mapping
y = jax.jit(lambda a: a * 2, donate_argnums=0)(w)   # XLA writes a new buffer, never the region
r = pinmem.open().alloc(1 << 20)
r.owner_array(np.float32, (1024,))[:] = 1.0     # fill it while OPEN
r.seal()
a = pj.view(r, jnp.float32, (1024,))            # read-only, counted by the kernel
cached = np.asarray(a)                          # a NumPy view: it holds the mapping too
if r.backend == "device":                       # the portable backend cannot donate
    try:
        r.donate()
    except pinmem.BusyError as e:
        print(e)                                # names the process and range of a's mapping
    del a, cached
    gc.collect()                                # JAX's buffer goes with its last reference
    r.donate()                                  # the last view is gone: reuse is safe
params = pj.load_safetensors("model.safetensors", shared=True)  # one copy per host
