# SPDX-License-Identifier: GPL-2.0
"""The CUDA driver test double's record (tests/cuda/cuda-double.h:
struct cuda_double_call and struct cuda_double_stats), read through
ctypes by the Python tests (test_cuda_auto's children too) and
bench_peers_loader.py."""
import ctypes


class Call(ctypes.Structure):       # struct cuda_double_call
    _fields_ = [("op", ctypes.c_char), ("base", ctypes.c_size_t),
                ("size", ctypes.c_uint64), ("flags", ctypes.c_uint),
                ("result", ctypes.c_int)]


class Stats(ctypes.Structure):      # struct cuda_double_stats
    _fields_ = [("init_calls", ctypes.c_ulong),
                ("register_calls", ctypes.c_ulong),
                ("unregister_calls", ctypes.c_ulong),
                ("live", ctypes.c_ulong),
                ("primary_refs", ctypes.c_int),
                ("ctx_depth", ctypes.c_int),
                ("violations", ctypes.c_ulong),
                ("last_violation", ctypes.c_char * 256),
                ("nr_calls", ctypes.c_size_t),
                ("log", Call * 64)]


def stats(path):
    """The live record of the double loaded from path."""
    fn = ctypes.CDLL(path).cuda_double_stats
    fn.restype = ctypes.POINTER(Stats)
    return fn().contents
