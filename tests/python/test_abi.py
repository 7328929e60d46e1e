# SPDX-License-Identifier: GPL-2.0
"""The binding's ctypes structs match libpin's headers: a C program built
against include/pin.h (which includes pin_io.h and pin_st.h) prints every
mirrored field's offset and size."""
import ctypes
import os
import shutil
import subprocess

import pytest

from pinmem import _lib
from pinmem.cuda import _CudaOpts

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

MIRRORS = {
    "pin_dev_info": _lib.PinDevInfo,
    "pin_region_info": _lib.PinRegionInfo,
    "pin_holder": _lib.PinHolder,
    "pin_io_opts": _lib.PinIoOpts,
    "pin_io_stats": _lib.PinIoStats,
    "pin_st_tensor": _lib.PinStTensor,
    "pin_st_step": _lib.PinStStep,
    "pin_ref_range": _lib.PinRefRange,
    "pin_dev_opts": _lib.PinDevOpts,
    "pin_region_opts": _lib.PinRegionOpts,
    "pin_st_load_opts": _lib.PinStLoadOpts,
    "pin_cuda_opts": _CudaOpts,
}


def c_layout(tmp):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to read pin.h's layout")
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include <pin.h>",
             "int main(void) {"]
    for cname, py in MIRRORS.items():
        lines.append('printf("%%s %%zu\\n", "%s", sizeof(struct %s));' %
                     (cname, cname))
        for field, _ in py._fields_:
            lines.append(
                'printf("%%s.%%s %%zu %%zu\\n", "%s", "%s", '
                'offsetof(struct %s, %s), sizeof(((struct %s *)0)->%s));' %
                (cname, field, cname, field, cname, field))
    lines.append("return 0; }")
    src = os.path.join(tmp, "layout.c")
    exe = os.path.join(tmp, "layout")
    with open(src, "w") as f:
        f.write("\n".join(lines) + "\n")
    subprocess.run([cc, "-std=c11", "-D_GNU_SOURCE", "-I",
                    os.path.join(TOP, "include"), "-I",
                    os.path.join(TOP, "build", "include"), "-o", exe, src],
                   check=True, capture_output=True)
    out = subprocess.run([exe], check=True, capture_output=True,
                         text=True).stdout
    return dict((k, tuple(int(x) for x in v.split()))
                for k, v in (line.split(" ", 1)
                             for line in out.splitlines()))


def test_structs_match_pin_h(tmp_path):
    c = c_layout(str(tmp_path))
    for cname, py in MIRRORS.items():
        assert c[cname] == (ctypes.sizeof(py),), cname
        for field, _ in py._fields_:
            desc = getattr(py, field)
            assert c["%s.%s" % (cname, field)] == (desc.offset, desc.size), \
                "%s.%s" % (cname, field)


def test_withheld_holder_address_is_none():
    """The kernel withholds another user's mapping address (start 0):
    the binding says None rather than a range starting at 0."""
    from pinmem import core
    h = _lib.init(_lib.PinHolder, pid=7, kind=_lib.PIN_HOLDER_VIEW, start=0,
                  length=2 << 20, offset=4096, prot=_lib.PROT_READ,
                  maywrite=0, comm=b"loader")
    got = core._holder(h)
    assert (got.pid, got.comm, got.kind) == (7, "loader", "view")
    assert got.start is None and got.end is None and got.offset == 4096
    assert "address withheld, 0x200000 bytes" in got.text
    h.start = 0x7f0000000000
    got = core._holder(h)
    assert (got.start, got.end) == (0x7f0000000000, 0x7f0000200000)
