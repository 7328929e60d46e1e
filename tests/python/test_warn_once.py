# SPDX-License-Identifier: GPL-2.0
"""PortableBackendWarning is issued once per process: by the first open()
that falls back, not by every call, even under warnings.simplefilter
("always") and from different call sites. A fresh interpreter, as the
tests before may have issued it already."""
import os
import subprocess
import sys

import pytest

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

SCRIPT = r"""
import sys, warnings
sys.path.insert(0, %r)
import pinmem
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    a = pinmem.open()
    b = pinmem.open()
    for _ in range(2):
        pinmem.open()
said = [x for x in w if issubclass(x.category, pinmem.PortableBackendWarning)]
print(a.backend, b.backend, len(said), said[0].filename if said else "-")
""" % os.path.join(TOP, "libpin", "python")


@pytest.mark.skipif(os.path.exists("/dev/pinmem"),
                    reason="open() uses the device here: no fallback to warn of")
def test_portable_warning_once_per_process():
    env = {k: v for k, v in os.environ.items() if k != "PIN_BACKEND"}
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    backends_a, backend_b, count, where = out.stdout.split()
    assert (backends_a, backend_b) == ("portable", "portable"), out.stdout
    assert count == "1", out.stdout
    assert where == "<string>", out.stdout   # the caller's line, not pinmem's


CALLER = r"""
import sys, warnings
sys.path.insert(0, %r)
import numpy as np
import pinmem
from pinmem.safetensors import numpy as stnp
path = sys.argv[1]
stnp.save_file({"w": np.ones(4, np.float32)}, path)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    stnp.load_file(path, shared=True)           # line 11
for x in w:
    print(x.category.__name__, x.filename, x.lineno)
""" % os.path.join(TOP, "libpin", "python")


@pytest.mark.skipif(os.path.exists("/dev/pinmem"),
                    reason="open() uses the device here: no fallback to warn of")
def test_warnings_point_at_the_callers_line(tmp_path):
    """PortableBackendWarning (found deep in the loader) and the no-service
    RuntimeWarning both name the line that called pinmem."""
    script = tmp_path / "caller.py"
    script.write_text(CALLER)
    env = {k: v for k, v in os.environ.items() if k != "PIN_BACKEND"}
    env["PIN_CACHE_SOCKET"] = str(tmp_path / "none.sock")
    out = subprocess.run([sys.executable, str(script),
                          str(tmp_path / "w.safetensors")], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    said = dict((line.split()[0], line.split()[1:])
                for line in out.stdout.splitlines())
    assert set(said) == {"PortableBackendWarning", "RuntimeWarning"}, said
    for where in said.values():
        assert where == [str(script), "11"], said
