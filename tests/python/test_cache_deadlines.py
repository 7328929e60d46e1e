# SPDX-License-Identifier: GPL-2.0
"""load_file(path, shared=True) and pinmem.safetensors.shared against
services that do not answer (tests/cache/fakeservice.py): each gives up
within the deadline and 1 s and loads privately, saying why; heartbeats
carry a request past its deadline. tests/cache/client-deadlines does the
same for the C client and pinload.
"""
import os
import subprocess
import time
import warnings

import pytest

from pinmem.safetensors import numpy as stnp
from pinmem.safetensors import shared

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FAKE = os.path.join(TOP, "tests", "cache", "fakeservice.py")
MKST = os.path.join(TOP, "tests", "cache", "mkst.py")
# Seconds past a deadline that a load may take on a loaded host (make
# check runs guests beside the host suites; the guests emulate): a client
# that misses its deadline waits on until the fake service's end instead.
SLACK = 2.5


@pytest.fixture
def fake(tmp_path):
    """fake(mode): the socket of a fake service in that mode, ready."""
    procs = []

    def start(mode):
        sock = str(tmp_path / (mode + ".sock"))
        p = subprocess.Popen(["python3", FAKE, sock, mode],
                             stdout=subprocess.PIPE, text=True)
        procs.append(p)
        assert p.stdout.readline().strip() == "ready"
        return sock
    yield start
    for p in procs:
        p.kill()
        p.wait()
        p.stdout.close()


@pytest.fixture
def st_file(tmp_path, monkeypatch):
    path = str(tmp_path / "m.safetensors")
    subprocess.run(["python3", MKST, path, "64", "3"], check=True)
    monkeypatch.delenv("PIN_CACHE_TIMEOUT", raising=False)
    monkeypatch.setattr(shared, "_warned", [])
    return path


def _private_load(path, monkeypatch, sock, timeout):
    """load_file(shared=True) with PIN_CACHE_TIMEOUT=timeout: (seconds,
    the RuntimeWarning's text)."""
    monkeypatch.setenv("PIN_CACHE_SOCKET", sock)
    monkeypatch.setenv("PIN_CACHE_TIMEOUT", timeout)
    t0 = time.monotonic()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        a = stnp.load_file(path, shared=True)
    took = time.monotonic() - t0
    assert a["small"].tolist() == [1.0, 2.0, 3.0, 3.0]
    said = [str(x.message) for x in w if issubclass(x.category,
                                                     RuntimeWarning)]
    assert len(said) == 1
    return took, said[0]


def test_silent_service_private_within_deadline(fake, st_file, monkeypatch):
    sock = fake("silent")
    took, said = _private_load(st_file, monkeypatch, sock, "1")
    assert 0.9 < took < SLACK + 1.0
    assert "the service at %s did not answer within 1.0 s" % sock in said
    assert "loading privately" in said


def test_full_backlog_private_within_deadline(fake, st_file, monkeypatch):
    sock = fake("full")
    took, said = _private_load(st_file, monkeypatch, sock, "0.5")
    assert 0.4 < took < SLACK + 0.5
    assert "did not accept the connection within 0.5 s" in said


def test_heartbeats_carry_past_the_deadline(fake, st_file, monkeypatch):
    sock = fake("heartbeat")
    took, said = _private_load(st_file, monkeypatch, sock, "1")
    assert 2.9 < took < SLACK + 3.0
    assert "the service has no room: over budget (a fake service that " \
        "waited 3 s)" in said


def test_old_service_asked_again_without_the_flag(fake, st_file,
                                                  monkeypatch):
    sock = fake("old")
    _took, said = _private_load(st_file, monkeypatch, sock, "1")
    assert "flagged requests refused: 1)" in said


def test_refused_request_loads_privately(fake, st_file, monkeypatch):
    """A refusal of a well-formed request (EPROTO, as a service whose fd
    table was full answered) is a private load with a warning."""
    sock = fake("refusing")
    _took, said = _private_load(st_file, monkeypatch, sock, "1")
    assert "the service refused the request: more than one fd" in said
    assert "loading privately" in said


def test_request_timeout_keyword_wins_and_raises(fake, st_file,
                                                 monkeypatch):
    """request() is the call without a fallback: Unavailable, with why."""
    sock = fake("silent")
    monkeypatch.setenv("PIN_CACHE_TIMEOUT", "30")
    t0 = time.monotonic()
    with pytest.raises(shared.Unavailable, match="did not answer within "
                       "0.5 s"):
        shared.request(st_file, sock, timeout=0.5)
    assert time.monotonic() - t0 < 1.5
    t0 = time.monotonic()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert shared.load(st_file, sock, timeout=0.5) is None
    assert time.monotonic() - t0 < 1.5


def test_timeout_of(monkeypatch):
    monkeypatch.delenv("PIN_CACHE_TIMEOUT", raising=False)
    assert shared.timeout_of() == shared.TIMEOUT == 5.0
    monkeypatch.setenv("PIN_CACHE_TIMEOUT", "2.5")
    assert shared.timeout_of() == 2.5
    assert shared.timeout_of(0.25) == 0.25
    for bad in ("0", "-1", "x", "", "inf"):
        monkeypatch.setenv("PIN_CACHE_TIMEOUT", bad)
        assert shared.timeout_of() == 5.0
    with pytest.raises(ValueError):
        shared.timeout_of(0)
