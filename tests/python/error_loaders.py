# SPDX-License-Identifier: GPL-2.0
"""The loaders the error table (test_errors.py) runs, by name, and what
each raised, in a form a child process can print and the test compare.

Every pinmem loader of a safetensors file: torch's and NumPy's
safetensors-compatible ones (load_file, safe_open, private and
shared=True with no service to answer), the native
pinmem.load_safetensors, and JAX's, private and shared. Those whose
framework is not installed are left out, and names() says which are in."""
import os
import warnings

NO_SERVICE = "/nonexistent/pinmem-error-table.sock"


def _torch():
    import torch  # noqa: F401
    from pinmem.safetensors import safe_open
    from pinmem.safetensors import torch as stpt
    return {
        "torch load_file": stpt.load_file,
        "torch load_file shared": lambda p: stpt.load_file(p, shared=True),
        "torch safe_open": lambda p: safe_open(p, "pt").get_tensor("emb"),
    }


def _numpy():
    from pinmem.safetensors import safe_open
    from pinmem.safetensors import numpy as stnp
    return {
        "numpy load_file": stnp.load_file,
        "numpy safe_open": lambda p: safe_open(p, "np").get_tensor("emb"),
    }


def _native():
    import pinmem
    return {"pinmem.load_safetensors": pinmem.load_safetensors}


def _jax():
    import jax  # noqa: F401
    import pinmem.jax as pj
    return {
        "jax load_safetensors": pj.load_safetensors,
        "jax load_safetensors shared":
            lambda p: pj.load_safetensors(p, shared=True),
    }


def loaders(frameworks=("torch", "numpy", "native", "jax")):
    """name -> load(path), for the frameworks installed."""
    out = {}
    for fw in frameworks:
        try:
            out.update({"torch": _torch, "numpy": _numpy,
                        "native": _native, "jax": _jax}[fw]())
        except ImportError:
            pass
    return out


def outcome(load, path):
    """What load(path) raised: (type name, errno, text, whether it is a
    SafetensorError, whether a PinError), or None when it loaded.
    shared=True has no service to ask: it warns, then loads privately."""
    import pinmem
    from pinmem.safetensors import SafetensorError
    os.environ["PIN_CACHE_SOCKET"] = NO_SERVICE
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            load(path)
    except Exception as e:     # noqa: B902 -- what it raised is the result
        return (type(e).__name__, getattr(e, "errno", None), str(e),
                isinstance(e, SafetensorError),
                isinstance(e, pinmem.PinError))
    return None


def is_a(name, cls_name):
    """Whether the built-in exception type named name is cls_name or one
    of its subclasses (pinmem's own subclass them)."""
    import builtins
    import pinmem
    import pinmem.safetensors as st
    cls = getattr(builtins, name, None) or getattr(pinmem, name, None) or \
        getattr(st, name)
    return issubclass(cls, getattr(builtins, cls_name))
