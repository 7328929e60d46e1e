# SPDX-License-Identifier: MIT
"""Hugging Face transformers models whose parameters are pinmem's tensors.

    import pinmem.transformers
    model = pinmem.transformers.from_pretrained(LlamaForCausalLM, "DIR")

DIR is what save_pretrained wrote: config.json and model.safetensors, or
model.safetensors.index.json and its shards. The checkpoint is loaded
by pinmem.safetensors.torch.load_file (shared=False: the process's own
pinned, writable memory; shared=True: pinmem-cached's one read-only copy
for the host, else a private read-only load and a warning), and that
dict goes to transformers' own from_pretrained(None, config=...,
state_dict=...): its loader renames keys, ties weights, makes the
non-persistent buffers (rotary inv_freq) and puts the model in eval
mode as for a plain load, and it makes each parameter an nn.Parameter
over the tensor it is given, no copy, when the dtype and the device are
those of the file. So every parameter lies in pinned memory; one that
does not (a dtype= or device_map= that converts, a parameter the
checkpoint lacks) is an error naming it, as are keys the model lacks.

shared=True's parameters are read-only (pinmem.torch.ReadOnlyTensor):
inference works; an in-place op on them (an optimizer's step,
param.add_(), copy_) raises pinmem.ReadOnlyError. Train a private load.
"""
import bisect
import os

import transformers

from .safetensors.torch import load_file

__all__ = ["from_pretrained", "checkpoint_of"]

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"


def checkpoint_of(path):
    """The file load_file reads for save_pretrained's folder path: its
    index, else its one model.safetensors."""
    for name in (INDEX, SINGLE):
        f = os.path.join(os.fspath(path), name)
        if os.path.isfile(f):
            return f
    raise FileNotFoundError("pinmem.transformers: no %s or %s in %s" %
                            (INDEX, SINGLE, os.fspath(path)))


def _model_class(cls, config):
    """cls itself, or the class an Auto class maps config to (Auto
    classes need a name or path, not the state_dict route)."""
    mapping = getattr(cls, "_model_mapping", None)
    if mapping is None:
        return cls
    try:
        return mapping[type(config)]
    except KeyError:
        raise ValueError("pinmem.transformers: %s has no model for %s" %
                         (cls.__name__, type(config).__name__)) from None


def _refuse(info, strict):
    """A missing, unexpected or mismatched key, as a KeyError naming it."""
    why = []
    for what in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        keys = sorted(str(k) for k in info.get(what) or ())
        if keys and (strict or what == "mismatched_keys"):
            why.append("%s: %s" % (what.replace("_", " "), ", ".join(keys)))
    if why:
        raise KeyError("pinmem.transformers: the checkpoint does not fit "
                       "the model (%s)" % "; ".join(why))


def _not_loaded(model, sd):
    """Names of the parameters that do not lie in sd's tensors' memory
    (copies made by a conversion, or initialized for lack of a tensor)."""
    spans = sorted((t.data_ptr(), t.data_ptr() + t.numel() *
                    t.element_size()) for t in sd.values())
    starts = [lo for lo, _ in spans]
    out = []
    for name, p in model.named_parameters(remove_duplicate=False):
        if p.numel() == 0:
            continue            # no memory to be pinned
        ptr = p.data_ptr()
        # A checkpoint's tensors do not overlap (the format refuses
        # it): only the last span starting at or below ptr can cover it.
        i = bisect.bisect_right(starts, ptr) - 1
        if i < 0 or ptr >= spans[i][1]:
            out.append(name)
    return out


def _generation_config(model, path):
    """generation_config.json, which a plain from_pretrained reads."""
    if not getattr(model, "can_generate", lambda: False)():
        return
    try:
        model.generation_config = \
            transformers.GenerationConfig.from_pretrained(path)
    except OSError:
        pass                    # none saved: keep the one from config


def from_pretrained(cls, path, shared=False, strict=True, **kwargs):
    """cls (a model class, or an Auto class) from save_pretrained's folder
    path, its parameters over pinned memory (see the module's notes).
    kwargs go to cls.from_pretrained (config= replaces path's config.json);
    strict=False lets unexpected keys pass, and missing ones as far as
    transformers goes (it initializes them: not pinned, so an error all
    the same); a shape that differs is always an error."""
    path = os.fspath(path)
    checkpoint = checkpoint_of(path)
    config = kwargs.pop("config", None) or \
        transformers.AutoConfig.from_pretrained(path)
    sd = load_file(checkpoint, shared=shared)
    model, info = _model_class(cls, config).from_pretrained(
        None, config=config, state_dict=sd, output_loading_info=True,
        **kwargs)
    _refuse(info, strict)
    copied = _not_loaded(model, sd)
    if copied:
        raise ValueError("pinmem.transformers: parameters not in the "
                         "loaded checkpoint's pinned memory (converted to "
                         "another dtype or device, or not in it): %s" %
                         ", ".join(copied))
    _generation_config(model, path)
    return model
