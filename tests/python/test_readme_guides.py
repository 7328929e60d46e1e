# SPDX-License-Identifier: GPL-2.0
"""The README's guides run: each guide's code is tests/examples/*-guide.py
after its "# guide" line, shown in the README exactly as it is there, and
the file runs to its end."""
import importlib.util
import os
import re
import subprocess
import sys

import pytest

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GUIDES = {"jax": "Using pinmem with JAX", "torch": "Using pinmem with PyTorch"}


def readme_code(title):
    """The first python block of the README section titled title."""
    with open(os.path.join(TOP, "README.md")) as f:
        text = f.read()
    part = text.split("\n## %s\n" % title, 1)
    assert len(part) == 2, "README has no section %r" % title
    m = re.search(r"```python\n(.*?)```", part[1].split("\n## ", 1)[0],
                  re.S)
    assert m, "README section %r has no python block" % title
    return m.group(1)


def example(name):
    path = os.path.join(TOP, "tests", "examples", "%s-guide.py" % name)
    with open(path) as f:
        return path, f.read().split("# guide\n", 1)[1]


def run(path, where):
    env = dict(os.environ, PYTHONPATH=os.path.join(TOP, "libpin", "python"))
    return subprocess.run([sys.executable, path, str(where)], env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", sorted(GUIDES))
def test_readme_shows_the_example(name):
    assert readme_code(GUIDES[name]) == example(name)[1]


def needs(module):
    if importlib.util.find_spec(module) is None:
        pytest.skip("%s is not installed" % module)


@pytest.mark.torch
def test_torch_guide_runs(tmp_path):
    needs("torch")
    p = run(example("torch")[0], tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr


def test_jax_guide_runs(tmp_path):
    needs("jax")
    p = run(example("jax")[0], tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
