"""Optional JIT compilation: numba when installed (on-disk cache), plain Python otherwise.

The kernels are written once in a numba-compatible subset of numpy; without numba they run as
ordinary Python and give the same numbers, only slower. Set SVA_LINEARIZER_NO_JIT=1 to force the
pure-Python path (the test suite does this once to check both paths agree).
"""
import os

HAVE_NUMBA = False
if os.environ.get("SVA_LINEARIZER_NO_JIT", "") in ("", "0"):
    try:
        import numba as _numba

        HAVE_NUMBA = True
    except ImportError:  # pragma: no cover - exercised where numba is absent
        pass

if HAVE_NUMBA:
    prange = _numba.prange
else:
    prange = range


def njit(fn=None, *, parallel=False, inline="never"):
    """Compile in nopython mode with numba's on-disk cache (``@njit``, ``@njit(parallel=True)``,
    ``@njit(inline="always")`` for small helpers of the hot loops), or return `fn` unchanged."""
    def wrap(f):
        if HAVE_NUMBA:
            return _numba.njit(cache=True, nogil=True, parallel=parallel, inline=inline,
                               error_model="numpy")(f)
        return f
    return wrap(fn) if fn is not None else wrap
