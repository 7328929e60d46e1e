# SPDX-License-Identifier: GPL-2.0
"""The README's guides run: each guide's code is tests/examples/*-guide.py
after its "# guide" line, shown in the README exactly as it is there; the
file runs to its end, and the README's block runs on its own, as a reader
copies it, in the folder the file's set-up prepared (so it cannot lean on
a name the set-up imported). So does python.md's recipe for checking CUDA
registration against the driver test double."""
import builtins
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest
import symtable

from helpers import cached_service

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GUIDES = {"jax": "Using pinmem with JAX", "torch": "Using pinmem with PyTorch"}
RECIPE = ("Documentation/python.md", "#### Checking registration without a GPU")
DOUBLE = os.path.join(TOP, "build", "tests", "cuda", "libcuda-double.so")


# The guests run pinmem on the device backend under an emulator, where a
# process importing torch or JAX costs over a minute: the newer recipes
# (the served JAX guide, the registration check) run on the host alone; the
# guests' matrix tests cover the served loads on the device backend.
HOST_ONLY = pytest.mark.skipif(
    os.environ.get("PIN_BACKEND") == "device",
    reason="a document's recipe, run by the host's suites")


def readme_code(title, rel="README.md", level="##"):
    """The first python block of rel's section titled title."""
    with open(os.path.join(TOP, rel)) as f:
        text = f.read()
    part = text.split("\n%s %s\n" % (level, title), 1)
    assert len(part) == 2, "%s has no section %r" % (rel, title)
    section = part[1].split("\n%s " % level, 1)[0]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "%s section %r has no python block" % (rel, title)
    return m.group(1)


def example(name):
    path = os.path.join(TOP, "tests", "examples", "%s-guide.py" % name)
    with open(path) as f:
        return path, f.read().split("# guide\n", 1)[1]


def run(path, where, cwd=None, **extra):
    env = dict(os.environ, PYTHONPATH=os.path.join(TOP, "libpin", "python"),
               **extra)
    return subprocess.run([sys.executable, path, str(where)], env=env,
                          capture_output=True, text=True, timeout=300,
                          cwd=cwd)


def run_alone(name, where, code=None, **extra):
    """The file (its set-up writes the checkpoint into where), then the
    README's block (or code) alone, from where."""
    p = run(example(name)[0], where, **extra)
    if p.returncode != 0:
        return p
    block = os.path.join(str(where), "readme-%s.py" % name)
    with open(block, "w") as f:
        f.write(code if code is not None else readme_code(GUIDES[name]))
    return run(block, where, cwd=str(where), **extra)


@pytest.mark.parametrize("name", sorted(GUIDES))
def test_readme_shows_the_example(name):
    assert readme_code(GUIDES[name]) == example(name)[1]


def needs(module):
    if importlib.util.find_spec(module) is None:
        pytest.skip("%s is not installed" % module)


@pytest.mark.torch
def test_torch_guide_runs(tmp_path):
    needs("torch")
    p = run_alone("torch", tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr


def test_jax_guide_runs(tmp_path):
    needs("jax")
    p = run_alone("jax", tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr


@HOST_ONLY
def test_jax_guide_runs_served(tmp_path):
    """Its last line, shared=True, with pinmem-cached serving the bf16
    checkpoint: the service's copy, not a private load after a warning."""
    needs("jax")
    base = os.environ.get("PINMEM_SCRATCH")
    where = tempfile.mkdtemp(prefix="pytest-guide-", dir=base) \
        if base and os.path.isdir(base) else str(tmp_path)
    try:
        with cached_service(where) as sock:
            if sock is None:
                pytest.skip("pinmem-cached is not built")
            p = run_alone("jax", where, PIN_CACHE_SOCKET=sock)
    finally:
        if where != str(tmp_path):
            shutil.rmtree(where, ignore_errors=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "loading privately" not in p.stderr, p.stderr


def recipe_code():
    rel, heading = RECIPE
    level, title = heading.split(" ", 1)
    return readme_code(title, rel, level)


def test_python_md_shows_the_registration_recipe():
    assert recipe_code() == example("registration")[1]


@pytest.mark.torch
@HOST_ONLY
def test_registration_recipe_runs(tmp_path):
    """python.md's block, with PIN_CUDA_LIBRARY naming the double: libpin
    and the double agree that the loaded tensor is registered."""
    needs("torch")
    if not os.path.exists(DOUBLE):
        pytest.skip("%s is not built (make)" % DOUBLE)
    p = run_alone("registration", tmp_path, recipe_code(),
                  PIN_CUDA_LIBRARY=DOUBLE)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "registered=True" in p.stdout, p.stdout
    assert "registered 0x1" in p.stdout, p.stdout


# Names a block of python.md may use without defining them: the reader's
# own (a model to load a state dict into).
READERS_OWN = {"model"}


def python_blocks(rel):
    with open(os.path.join(TOP, rel)) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


def undefined(code):
    """Names the code reads at its top level but never binds or imports."""
    table = symtable.symtable(code, "<block>", "exec")
    tables, names = [table], set()
    while tables:
        t = tables.pop()
        tables.extend(t.get_children())
        for sym in t.get_symbols():
            if sym.is_referenced() and (sym.is_global() or t is table) \
                    and not sym.is_assigned() and not sym.is_imported():
                names.add(sym.get_name())
    bound = {s.get_name() for s in table.get_symbols()
             if s.is_assigned() or s.is_imported()}
    return names - bound - set(dir(builtins)) - READERS_OWN


@pytest.mark.parametrize("rel", ["README.md", "Documentation/python.md"])
def test_every_block_imports_what_it_uses(rel):
    """A block a reader copies runs without a NameError: each name it uses
    is imported or assigned in it (python.md's blocks also use the files of
    the reader's own checkpoint, which this cannot check)."""
    blocks = python_blocks(rel)
    assert blocks, "%s has no python block" % rel
    for code in blocks:
        assert not undefined(code), (undefined(code), code)
