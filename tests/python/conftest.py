# SPDX-License-Identifier: GPL-2.0
"""pytest setup for the pinmem binding's tests.

TAP: when $PINMEM_TAP_FD names an open file descriptor, one TAP line per
test ("ok N - nodeid", "not ok N - nodeid", "ok N - nodeid # SKIP why") and
a closing plan go there, each written whole at column 0, apart from
pytest's own output (which tests/*.d/50-python turns into TAP comments).
A module that fails to import is a "not ok" line of its own.

The venv run ($PINMEM_PY_VENV=1, tests/*.d/52-python-venv): the venv has
every package the tests use, torch 2 (tests/python-requirements.lock)
among them, so a test that skips for a missing package fails there
instead. The torch tests run under both ends of the supported range:
torch 1.13 in Debian's python3 (50-python), the lock's torch 2 here.
A venv without torch 2 (an older lock), and the guests' venv run
($PINMEM_PY_NO_TORCH=1), run none of them, saying so: the modules that
import torch at the top (test_torch.py, test_st_compat.py,
test_torch_pool.py, test_transformers.py) are not collected and the
tests marked "torch" skip.
"""
import gc
import os
import sys

import pytest

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(TOP, "libpin", "python"))

import pinmem  # noqa: E402


class _Tap:
    def __init__(self, fd):
        self.fd = fd
        self.n = 0
        self.failed = {}

    def line(self, text):
        text = text.replace("\n", " ")
        os.write(self.fd, (text + "\n").encode("utf-8", "replace"))

    def result(self, ok, name, directive=""):
        self.n += 1
        self.line("%s %d - %s%s" % ("ok" if ok else "not ok", self.n, name,
                                    directive))


_tap = None

VENV = os.environ.get("PINMEM_PY_VENV") == "1"


def _torch_major():
    """The major version of the torch this Python would import, 0 if
    none (asked of its metadata: importing torch takes seconds)."""
    try:
        from importlib import metadata
        return int(metadata.version("torch").split(".")[0])
    except Exception:
        return 0


# The venv lacks torch 2 only when made from a lock before it had one;
# the guests' venv run leaves torch out ($PINMEM_PY_NO_TORCH=1: importing
# torch 2 under the emulator costs minutes a process).
NO_TORCH2 = VENV and (os.environ.get("PINMEM_PY_NO_TORCH") == "1" or
                      _torch_major() < 2)
NO_TORCH2_WHY = ("torch 2 is left out here ($PINMEM_PY_NO_TORCH=1: the "
                 "host's venv run tests it)"
                 if os.environ.get("PINMEM_PY_NO_TORCH") == "1" else
                 "this venv has no torch 2 (made from an older "
                 "tests/python-requirements.lock; rerun tests/deps.sh); "
                 "50-python tests torch 1.13")
# Modules that import torch at the top.
collect_ignore = ["test_torch.py", "test_st_compat.py",
                  "test_torch_pool.py", "test_transformers.py"] \
    if NO_TORCH2 else []
# How pytest.importorskip and the tests' own checks say a package is absent.
_MISSING = ("is not installed", "No module named", "could not import")


def pytest_configure(config):
    global _tap
    config.addinivalue_line("markers", "torch: needs PyTorch (Debian's "
                            "python3's 1.13, or the venv's torch 2)")
    fd = os.environ.get("PINMEM_TAP_FD")
    if fd:
        _tap = _Tap(int(fd))


def pytest_collection_modifyitems(config, items):
    if not NO_TORCH2:
        return
    if collect_ignore:
        sys.stderr.write("conftest: %s: not collected: %s\n" %
                         (NO_TORCH2_WHY, " ".join(collect_ignore)))
    for i in items:
        if i.get_closest_marker("torch"):
            i.add_marker(pytest.mark.skip(reason=NO_TORCH2_WHY))


def _missing_package(report):
    if not (VENV and report.skipped):
        return False
    text = report.longrepr[2] if isinstance(report.longrepr, tuple) \
        else str(report.longrepr)
    return any(m in text for m in _MISSING)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if _missing_package(report):
        report.outcome = "failed"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if _missing_package(report):
        report.outcome = "failed"


def pytest_collectreport(report):
    if _tap and report.failed:
        _tap.result(False, "collect %s" % report.nodeid)


def pytest_runtest_logreport(report):
    """One TAP line per test, written at its teardown (a failure in any
    phase fails the test; a skip in setup or call skips it)."""
    if _tap is None:
        return
    key = report.nodeid
    if report.when in ("setup", "call"):
        if report.failed:
            _tap.failed.setdefault(key, "%s failed" % report.when)
        elif report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) \
                else str(report.longrepr)
            if reason.startswith("Skipped: "):
                reason = reason[len("Skipped: "):]
            _tap.failed.setdefault(key, "# SKIP " + reason)
        return
    # teardown
    verdict = _tap.failed.pop(key, None)
    if report.failed and (verdict is None or verdict.startswith("# SKIP")):
        verdict = "teardown failed"
    if verdict is None:
        _tap.result(True, key)
    elif verdict.startswith("# SKIP"):
        _tap.result(True, key, " " + verdict)
    else:
        _tap.result(False, key, " (%s)" % verdict)


def pytest_sessionfinish(session, exitstatus):
    if _tap is None:
        return
    if _tap.n == 0:
        _tap.result(False, "pytest collected no tests (exit %d)" %
                    int(exitstatus))
    _tap.line("1..%d" % _tap.n)


# ---- fixtures --------------------------------------------------------------

@pytest.fixture(scope="session")
def dev():
    d = pinmem.open()
    yield d
    d.close()


@pytest.fixture
def region(dev):
    r = dev.alloc(4 << 20)
    yield r
    # A test's frame can outlive it in a cycle (pytest.raises keeps the
    # traceback), holding arrays over the owner mapping: collect first.
    gc.collect()
    r.close()


@pytest.fixture
def device_only(dev):
    if dev.backend != "device":
        pytest.skip("needs the pinmem module (portable backend: no "
                    "kernel-counted views, holders or donation)")


@pytest.fixture
def scratch(tmp_path):
    """A folder for files: the guest's ext4 scratch disk (O_DIRECT works)
    when there is one, else pytest's tmp_path."""
    base = os.environ.get("PINMEM_SCRATCH")
    if base and os.path.isdir(base):
        import tempfile
        import shutil
        d = tempfile.mkdtemp(prefix="pytest-", dir=base)
        yield d
        shutil.rmtree(d, ignore_errors=True)
    else:
        yield str(tmp_path)
