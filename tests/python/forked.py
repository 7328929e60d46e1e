# SPDX-License-Identifier: GPL-2.0
"""Run Python source as `python -c CODE ARGS...` would, in a fork of the
test process. Under the emulator a fresh interpreter pays a minute to
import torch and half of one for NumPy; a fork keeps what the test process
imported and imports pinmem anew, so the child starts with none of the
binding's per-process state (device handle, CUDA handle, pool, warnings
issued). What the tests need of a child is kept: a fault ends the child
alone (returncode -11), its stdout and stderr are its own. Where JAX is
imported (its threads make a fork unsafe) the child is a new interpreter
after all."""
import faulthandler
import os
import selectors
import signal
import subprocess
import sys
import time
import traceback

BINDING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                       "libpin", "python")


def _fresh_pinmem():
    for name in [n for n in sys.modules if n == "pinmem" or
                 n.startswith("pinmem.")]:
        del sys.modules[name]


def _child(code, args, env, out_fd, err_fd):
    try:
        faulthandler.disable()      # a fault is the parent's to report
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        sys.argv = ["-c"] + [str(a) for a in args]
        os.environ.update(env or {})
        _fresh_pinmem()
        exec(compile(code, "<string>", "exec"), {"__name__": "__main__"})
        status = 0
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (e.code is not None)
    except BaseException:       # noqa: B902 -- as the interpreter would
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _collect(pid, fds, timeout):
    """Both outputs until EOF; the child is killed at the deadline."""
    chunks = {fd: [] for fd in fds}
    sel = selectors.DefaultSelector()
    for fd in fds:
        sel.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while sel.get_map():
        left = deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise subprocess.TimeoutExpired("fork", timeout)
        for key, _ in sel.select(left):
            data = os.read(key.fd, 65536)
            if data:
                chunks[key.fd].append(data)
            else:
                sel.unregister(key.fd)
    return [b"".join(chunks[fd]).decode() for fd in fds]


def _spawn(code, args, env, timeout):
    # The binding, and this directory: a child imports the tests' own
    # helpers (cuda_double) as a forked one does.
    path = os.pathsep.join(p for p in (BINDING, os.path.dirname(
        os.path.abspath(__file__)), os.environ.get("PYTHONPATH")) if p)
    e = dict(os.environ, PYTHONPATH=path, **(env or {}))
    return subprocess.run([sys.executable, "-c", code] +
                          [str(a) for a in args], env=e, capture_output=True,
                          text=True, timeout=timeout)


def run_python(code, args=(), env=None, timeout=120, preload=()):
    """A subprocess.CompletedProcess of the child (text, captured).
    preload: modules to import here first, once for every child."""
    if "jax" in sys.modules:
        return _spawn(code, args, env, timeout)
    for name in preload:
        try:
            __import__(name)
        except ImportError:
            pass                # the child meets the same error itself
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(out_r)
        os.close(err_r)
        _child(code, args, env, out_w, err_w)
    os.close(out_w)
    os.close(err_w)
    try:
        out, err = _collect(pid, [out_r, err_r], timeout)
    finally:
        os.close(out_r)
        os.close(err_r)
    _, status = os.waitpid(pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    return subprocess.CompletedProcess(["fork"], rc, out, err)
