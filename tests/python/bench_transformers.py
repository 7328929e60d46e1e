#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Time and peak RSS of pinmem.transformers.from_pretrained against
transformers' own from_pretrained, on one sharded checkpoint that
save_pretrained wrote (a random Llama, bfloat16, about 340 MB in 100 MB
shards, made in DIR on the first run). Each load is a fresh process of
the test venv (tests/python-venv: transformers, torch 2.15), the two
alternating run by run, page cache dropped before each (root). Timed,
not the imports: the from_pretrained call, and it with a first forward
pass of 8 tokens (a plain load maps the shards and reads a page when it
is first touched: the forward reads them all). Peak RSS: the process's
VmHWM after both, and its growth over the imports (VmHWM before).
Not a test: benchmarks.md's numbers come from it.

    tests/python/bench_transformers.py DIR [RUNS]
"""
import os
import statistics
import subprocess
import sys

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VENV = subprocess.run([os.path.join(TOP, "tests", "python-venv"), "path"],
                      check=True, capture_output=True, text=True).stdout.strip()
PY = os.path.join(VENV, "bin", "python")
ENV = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
           HF_HUB_DISABLE_PROGRESS_BARS="1", TRANSFORMERS_VERBOSITY="error",
           PYTHONPATH=os.path.join(TOP, "libpin", "python"))

MAKE = r"""
import sys, torch, transformers
torch.manual_seed(0)
cfg = transformers.LlamaConfig(hidden_size=1024, intermediate_size=2816,
    num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=16,
    vocab_size=32000, tie_word_embeddings=False)
with torch.device("cpu"):
    m = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
m.save_pretrained(sys.argv[1], max_shard_size="100MB")
"""

LOAD = r"""
import sys, time, torch, transformers
import pinmem.transformers as ptf, pinmem.torch as pt

def hwm():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024

cls = transformers.LlamaForCausalLM
before = hwm()
t0 = time.perf_counter()
if sys.argv[2] == "plain":
    m = cls.from_pretrained(sys.argv[1])
else:
    m = ptf.from_pretrained(cls, sys.argv[1])
t = time.perf_counter() - t0
with torch.no_grad():
    m(torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8]]))
t_fwd = time.perf_counter() - t0
pinned = all(pt.is_pinned(p) for p in m.parameters())
print(t, t_fwd, hwm(), hwm() - before, int(pinned))
"""


def drop_caches():
    if os.geteuid() == 0:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")


def run(folder, how):
    drop_caches()
    out = subprocess.run([PY, "-c", LOAD, folder, how], check=True,
                         capture_output=True, text=True, env=ENV).stdout
    t, t_fwd, peak, grew, pinned = out.split()
    return float(t), float(t_fwd), int(peak), int(grew), pinned == "1"


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    folder = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) == 3 else 3
    if not os.path.exists(os.path.join(folder, "config.json")):
        subprocess.run([PY, "-c", MAKE, folder], check=True, env=ENV)
    size = sum(os.path.getsize(os.path.join(folder, n))
               for n in os.listdir(folder) if n.endswith(".safetensors"))
    shards = sum(n.endswith(".safetensors") for n in os.listdir(folder))
    print("%s: %d MB in %d shards, %d runs each, %s" % (
        folder, size // 10**6, shards, runs,
        "cold cache" if os.geteuid() == 0 else "warm cache (not root)"))
    got = {"plain": [], "pinmem": []}
    for _ in range(runs):
        for how in got:
            got[how].append(run(folder, how))
    label = {"plain": "transformers from_pretrained",
             "pinmem": "pinmem.transformers.from_pretrained"}
    for how, rs in got.items():
        med = [statistics.median(r[i] for r in rs) for i in range(4)]
        print("  %-36s load %5.2f s, + forward %5.2f s, peak RSS %5d MiB "
              "(+%d over imports), pinned %s; loads %s" % (
                  label[how], med[0], med[1], med[2], med[3],
                  "all" if all(r[4] for r in rs) else "none",
                  " ".join("%.2f" % r[0] for r in rs)))


if __name__ == "__main__":
    main()
