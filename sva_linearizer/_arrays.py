# SPDX-License-Identifier: BSD-3-Clause
"""Inputs as the arrays the kernels take: float64, never narrowed silently (real_array), and
C-contiguous, aligned and writeable where a compiled call takes them (kernel_array)."""
from __future__ import annotations

import numpy as np


_FLOAT64 = np.dtype(np.float64)


def real_array(x, name: str = "input") -> np.ndarray:
    """x as a float64 array (x itself when it is one), never narrowed silently: integers and
    booleans convert exactly; complex values convert only when every imaginary part is zero
    (ValueError otherwise); strings, bytes, objects and other non-numeric dtypes raise TypeError.
    Both errors name the argument."""
    if type(x) is np.ndarray and x.dtype is _FLOAT64:
        return x
    arr = np.asarray(x)
    kind = arr.dtype.kind
    if kind == "f" or kind in "biu":
        return arr.astype(np.float64, copy=False)
    if kind == "c":
        bad = np.flatnonzero(arr.imag.reshape(-1))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"{name}: entry {i} is complex ({arr.reshape(-1)[i]}); only real numbers "
                             "are accepted")
        return arr.real.astype(np.float64)
    raise TypeError(f"{name}: expected real numbers, got an array of {arr.dtype} "
                    f"({'strings' if kind in 'US' else 'objects' if kind == 'O' else 'non-numbers'})")


def kernel_array(x, name: str = "input") -> np.ndarray:
    """x as the compiled kernels take it: a C-contiguous, aligned, writeable float64 array (no copy
    when it already is one; converted by `real_array`, so nothing is narrowed silently). numba
    compiles a kernel once per argument type, and a read-only or unaligned array is another type:
    passed as it is (a vector from np.frombuffer, a ROS message's array, a view of a read-only
    batch), it would make numba compile the whole pipeline again in the middle of a control loop."""
    arr = np.ascontiguousarray(real_array(x, name))
    return arr if arr.flags.carray else arr.copy()
