# SPDX-License-Identifier: GPL-2.0
"""One load of one checkpoint by one loader, in a process of its own,
for tests/python/bench_peers.py: the time from the call to every tensor
in hand (imports before), the CPU time, how much of the memory behind
the tensors is locked (/proc/self/smaps Locked) and registered with CUDA
(the driver test double's record, where PIN_CUDA_LIBRARY names it), then
every tensor compared with safetensors' own load of the file. One JSON
object on stdout.

    bench_peers_loader.py LOADER CHECKPOINT SITE

CHECKPOINT: a .safetensors file or a *.safetensors.index.json. SITE: the
test venv's site-packages, put after the interpreter's own packages (so
that Debian's python3 keeps its torch and NumPy); the JAX loaders run
under the venv's python, where it is the first. The torch loaders:

  pinmem         pinmem.safetensors.torch.load_file
  fst            fastsafetensors, CPU, no GDS: tensors over its buffer
  fst+lock       fastsafetensors, then each tensor copied into locked memory
  runai          Run:ai's SafetensorsStreamer, each tensor cloned (the
                 streamer reuses its buffers)
  runai+lock     Run:ai's streamer, each tensor copied into locked memory
  st+lock        safetensors.torch.load_file, then copied into locked memory

Locked memory is what pin_memory() makes (cudaHostAlloc's memory) with no
GPU driver to ask: one anonymous mapping for all tensors, mlock()ed, then
filled. The JAX loaders:

  pinmem-jax     pinmem.jax.load_safetensors
  st-jax+pinned  safetensors.flax.load_file, then jax.device_put of each
                 array to the device's pinned_host memory
"""
import ctypes
import json
import mmap
import os
import resource
import sys
import time

import cuda_double

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def shards(path):
    """The files of a checkpoint, in the index's order for an index."""
    if not path.endswith(".index.json"):
        return [path]
    with open(path) as f:
        wm = json.load(f)["weight_map"]
    d = os.path.dirname(path)
    return [os.path.join(d, n) for n in sorted(set(wm.values()))]


def header(path):
    """name -> (offset in the file, nbytes) of one safetensors file."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        h = json.loads(f.read(n))
    h.pop("__metadata__", None)
    return {k: (8 + n + v["data_offsets"][0],
                v["data_offsets"][1] - v["data_offsets"][0])
            for k, v in h.items()}


def pad64(n):
    return -(-n // 64) * 64


class Locked:
    """One anonymous mapping, mlock()ed (faulted in and zeroed first),
    room for every tensor of the files on 64 bytes: pin_memory()."""

    def __init__(self, files):
        total = sum(pad64(n) for f in files for _, n in header(f).values())
        self.buf = mmap.mmap(-1, max(total, 1))
        addr = ctypes.addressof(ctypes.c_char.from_buffer(self.buf))
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.mlock(ctypes.c_void_p(addr), ctypes.c_size_t(total)):
            raise OSError(ctypes.get_errno(), "mlock")
        self.off = 0

    def put(self, t):
        import torch
        n = t.numel() * t.element_size()
        d = torch.frombuffer(self.buf, dtype=torch.uint8, count=n,
                             offset=self.off) if n else \
            torch.empty(0, dtype=torch.uint8)
        d.copy_(t.reshape(-1).view(torch.uint8))
        self.off += pad64(n)
        return d.view(t.dtype).view(t.shape)


def load_pinmem(files):
    from pinmem.safetensors.torch import load_file
    sd = {}
    for f in files:
        sd.update(load_file(f))
    return sd, None


def load_fst(files, lock=False):
    from fastsafetensors import SafeTensorsFileLoader, SingleGroup
    loader = SafeTensorsFileLoader(SingleGroup(), "cpu", nogds=True,
                                   framework="pytorch")
    loader.add_filenames({0: files})
    fb = loader.copy_files_to_device()
    if not lock:
        return {k: fb.get_tensor(k) for k in loader.get_keys()}, (loader, fb)
    dst = Locked(files)
    sd = {k: dst.put(fb.get_tensor(k)) for k in loader.get_keys()}
    fb.close()
    loader.close()
    return sd, dst


def load_runai(files, lock=False):
    from runai_model_streamer import SafetensorsStreamer
    dst = Locked(files) if lock else None
    sd = {}
    with SafetensorsStreamer() as s:
        s.stream_files(files)
        for k, t in s.get_tensors():
            sd[k] = dst.put(t) if lock else t.clone()
    return sd, dst


def load_st_lock(files):
    from safetensors.torch import load_file
    dst = Locked(files)
    sd = {}
    for f in files:
        sd.update({k: dst.put(t) for k, t in load_file(f).items()})
    return sd, dst


def load_pinmem_jax(path):
    import pinmem.jax
    return dict(pinmem.jax.load_safetensors(path, copy_unaligned=True)), None


def load_st_jax_pinned(files):
    import jax
    from safetensors.flax import load_file
    s = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0],
                                          memory_kind="pinned_host")
    out = {}
    for f in files:
        out.update({k: jax.device_put(a, s) for k, a in load_file(f).items()})
    jax.block_until_ready(list(out.values()))
    return out, None


TORCH = {
    "pinmem": load_pinmem,
    "fst": load_fst,
    "fst+lock": lambda f: load_fst(f, lock=True),
    "runai": load_runai,
    "runai+lock": lambda f: load_runai(f, lock=True),
    "st+lock": load_st_lock,
}
JAX = {
    "pinmem-jax": lambda f, path: load_pinmem_jax(path),
    "st-jax+pinned": lambda f, path: load_st_jax_pinned(f),
}


def ranges(sd, jax):
    """(address, nbytes) of every tensor's data."""
    if jax:
        return [(a.unsafe_buffer_pointer(), a.nbytes) for a in sd.values()]
    return [(t.data_ptr(), t.numel() * t.element_size()) for t in sd.values()]


def covered(spans, rs):
    """Bytes of the ranges rs that the spans [(start, end, weight)] cover,
    where weight (0..1) is the share of a span that counts."""
    out = 0.0
    spans = sorted(spans)
    for a, n in rs:
        for s, e, w in spans:
            if s >= a + n:
                break
            lo, hi = max(a, s), min(a + n, e)
            if hi > lo:
                out += (hi - lo) * w
    return int(out)


def locked_spans():
    """Every mapping of the process with the share of it that is locked."""
    spans, cur = [], None
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(None, 1)[0]
            if "-" in head and not head.endswith(":"):
                s, e = (int(x, 16) for x in head.split("-"))
                cur = (s, e)
            elif head == "Locked:" and cur:
                kb = int(line.split()[1])
                if kb:
                    spans.append((cur[0], cur[1],
                                  min(1.0, kb * 1024 / (cur[1] - cur[0]))))
    return spans


def vm_lck():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmLck:"):
                return int(line.split()[1]) * 1024
    return 0


def pinmem_spans():
    """The ranges pinmem's automatic CUDA registration holds, by its own
    record; None where pinmem was not imported."""
    auto = sys.modules.get("pinmem._cuda_auto")
    if auto is None:
        return None
    return [(s, e, 1.0) for s, e in list(auto.AUTO.ranges.values())]


def registered_spans():
    """The registrations in force in the CUDA driver test double
    (PIN_CUDA_LIBRARY), from its log of calls; where the log is full (more
    calls than it keeps), what pinmem says it registered; None without
    the double."""
    path = os.environ.get("PIN_CUDA_LIBRARY", "")
    if not path.endswith("libcuda-double.so"):
        return None
    st = cuda_double.stats(path)
    if st.nr_calls > len(st.log):
        return pinmem_spans()
    live = {}
    for c in st.log[:st.nr_calls]:
        if c.result:
            continue
        if c.op == b"R":
            live[c.base] = c.base + c.size
        elif c.op == b"U":
            live.pop(c.base, None)
    return [(s, e, 1.0) for s, e in live.items()]


def as_bytes(x, jax):
    """The raw bytes of a tensor or array, for comparison."""
    if jax:
        import numpy as np
        return np.asarray(x).reshape(-1).view(np.uint8).tobytes()
    return x.contiguous().reshape(-1).view(__import__("torch").uint8) \
        .numpy().tobytes()


def check(sd, files, jax):
    """"ok", or what differs from safetensors' own load of the files."""
    if jax:
        from safetensors.flax import load_file
    else:
        from safetensors.torch import load_file
    seen = 0
    for f in files:
        for k, ref in load_file(f).items():
            if k not in sd:
                return "missing %s" % k
            if tuple(sd[k].shape) != tuple(ref.shape) or \
                    str(sd[k].dtype) != str(ref.dtype):
                return "%s: %s %s, not %s %s" % (k, sd[k].dtype,
                                                 tuple(sd[k].shape),
                                                 ref.dtype, tuple(ref.shape))
            if as_bytes(sd[k], jax) != as_bytes(ref, jax):
                return "%s: data differ" % k
            seen += 1
    return "ok" if seen == len(sd) else "%d extra tensors" % (len(sd) - seen)


def main():
    name, path, site = sys.argv[1:4]
    jax = name in JAX
    sys.path.insert(0, os.path.join(TOP, "libpin", "python"))
    if jax:
        sys.path.insert(1, site)
        import jax as jx
        jx.devices()            # the runtime up before the clock starts
    else:
        import torch  # noqa: F401
        if name != "pinmem":    # the venv's ml_dtypes wants NumPy 2
            sys.path.append(site)
    files = shards(path)
    fn = JAX[name] if jax else TORCH[name]
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    sd, keep = fn(files, path) if jax else fn(files)
    secs = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    rs = ranges(sd, jax)
    nbytes = sum(n for _, n in rs)
    reg = registered_spans()
    out = {
        "loader": name, "checkpoint": path, "seconds": secs,
        "cpu_seconds": ru.ru_utime + ru.ru_stime - ru0.ru_utime -
        ru0.ru_stime,
        "file_bytes": sum(os.path.getsize(f) for f in files),
        "tensors": len(sd), "tensor_bytes": nbytes,
        "locked_bytes": covered(locked_spans(), rs), "vm_lck": vm_lck(),
        "registered_bytes": None if reg is None else covered(reg, rs),
    }
    if site not in sys.path:
        sys.path.append(site)
    out["check"] = check(sd, files, jax)
    del keep
    print(json.dumps(out))


if __name__ == "__main__":
    main()
