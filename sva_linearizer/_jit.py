"""Compiled kernels with numba when it is installed, plain Python otherwise, and the switch between
the two while the compiled ones are not ready.

The kernels are written once in a numba-compatible subset of numpy. Without numba (or with
SVA_LINEARIZER_NO_JIT=1 or NUMBA_DISABLE_JIT=1) `njit` returns the function itself and they run
as ordinary Python: the same numbers, only slower.

With numba, each kernel belongs to a compile group ("core": one state; "batch": linearize_batch's
parallel kernel; "contacts": frames and contacts; "contacts_batch": linearize_batch with contacts;
"second_order": the second-order derivatives of inverse dynamics;
a module sets COMPILE_GROUP, njit's `group=` overrides it). The first time a process calls a
kernel of a group from Python, the group's state is decided (`compile_policy`):
  * its compiled code is in numba's cache (is_warm): it is loaded and used;
  * otherwise, by default ("background"), the group compiles in a background process that fills
    the cache, and until it is done every call of the group's kernels runs their plain-Python
    form (_plain.py): the first answer comes at once, at the speed of Python. When the background
    compile is done, a thread of this process loads the compiled kernels (the loader given to
    `set_compiler`), and from then on the calls run compiled; `on_ready` callbacks are told;
  * SVA_LINEARIZER_COMPILE=wait compiles the group in the calling process before the call
    (`set_compiler`: the warm-up, with progress); =never keeps the plain forms.
How the call is routed: numba's dispatcher, called from Python with argument types it has no
machine code for, asks its `_compile_for_args`; each of the package's dispatchers has that
replaced by `_route`, which returns the compiled code or the plain form.
"""
from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np

from ._cache import DISPATCHERS, compile_running, is_warm, log_path, start_background_compile
from ._plain import plain_form, set_plain_form

HAVE_NUMBA = False
if os.environ.get("SVA_LINEARIZER_NO_JIT", "") in ("", "0"):
    try:
        import numba as _numba

        HAVE_NUMBA = not _numba.config.DISABLE_JIT   # NUMBA_DISABLE_JIT=1: plain Python, as without numba
    except ImportError:  # pragma: no cover - exercised where numba is absent
        pass

if HAVE_NUMBA:
    prange = _numba.prange
else:
    prange = range

# floating-point contraction only: a * b + c may become one fused multiply-add (one rounding
# instead of two). No reassociation, and never 'nnan'/'ninf': the finiteness checks rely on NaN.
FASTMATH = {"contract"}


def njit(fn=None, *, parallel=False, inline="never", group=None):
    """Compile in nopython mode with numba's on-disk cache (``@njit``, ``@njit(parallel=True)``,
    ``@njit(inline="always")`` for small helpers of the hot loops: numba inlines their IR), or
    return `fn` unchanged. group: the compile group (default: the module's COMPILE_GROUP, else
    "core")."""
    def wrap(f):
        if HAVE_NUMBA:
            d = _numba.njit(cache=True, nogil=True, parallel=parallel, inline=inline,
                            error_model="numpy", fastmath=FASTMATH)(f)
            d.compile_group = group or f.__globals__.get("COMPILE_GROUP", "core")
            _route(d)
            DISPATCHERS.append(d)
            return d
        return f
    return wrap(fn) if fn is not None else wrap


# ------------------------------------------------------------------------------------------------
# input arrays

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


def direct(fn, *example):
    """fn's compiled code for exactly the argument types of `example`, called without numba's
    dispatch: the dispatcher types every argument and looks the signature up on each call,
    ~0.2-0.3 us, a twentieth of an arm's linearization (fn itself without numba, and while fn's
    compile group is not ready: calls then take the plain form; `is_direct` tells the two apart,
    so that a caller caches only the compiled code).

    The caller's promise: every call passes arguments of exactly these types. An array must
    have the example's dtype, ndim, layout and flags (`kernel_array`'s C-contiguous, aligned,
    writeable float64 vectors and the Data's buffers are what the hot paths pass); the compiled
    code reads an array of any other type as if it were this one, silently. Where a caller
    cannot promise it, it calls fn."""
    if not HAVE_NUMBA or not _compiled(fn.compile_group):
        return fn
    return fn.compile(tuple(_numba.typeof(x) for x in example))


def is_direct(entry, fn) -> bool:
    """entry (from `direct(fn, ...)`) is compiled code that can be kept for later calls."""
    return entry is not fn


# ------------------------------------------------------------------------------------------------
# intrinsics: code numba emits directly, each with its plain-Python form

def _carve_view_py(buf, offset, shape):
    """The C-contiguous array of `shape` that starts at buf[offset] (a view, no copy)."""
    size = 1
    for k in shape:
        size *= k
    return buf[offset:offset + size].reshape(shape)


def _borrow_py(arr):
    return arr


def _flat_view_py(arr):
    out = arr.view()
    out.shape = (arr.size,)        # raises where reshape would copy (a non-contiguous array)
    return out


if HAVE_NUMBA:
    from numba.core import cgutils as _cgutils
    from numba.core import types as _types
    from numba.core.imputils import impl_ret_borrowed as _borrowed
    from numba.extending import intrinsic as _intrinsic
    from numba.np.arrayobj import make_array as _make_array
    from numba.np.arrayobj import populate_array as _populate_array

    @_intrinsic
    def carve_view(typingctx, buf, offset, shape):
        """Compiled `_carve_view_py`: the view's shape, strides and data pointer are written
        directly (numba's reshape calls a C helper per array; the workspace views are carved at
        every entry point). The caller guarantees offset + prod(shape) <= buf.size (data.views
        checks the total).

        The view borrows buf's memory without a reference (a null meminfo, as numba.carray
        gives): numba keeps every array's reference count up to date, an atomic increment and
        decrement for each view and each slice of one (Xup[k], Fc[k], ...), hundreds per call;
        these were ~12% of solo12's kernel and a quarter of ur5's. With a null meminfo they are
        a pointer test. This is safe because buf is always an argument of the compiled entry
        point (ib, fb, a contact plan's buffers), which its caller holds for the whole call, and
        no view is returned to Python. Never carve from an array allocated in compiled code (it
        may be freed while a view is in use), nor return a carved view."""
        if not isinstance(buf, _types.Array) or buf.ndim != 1 or buf.layout != "C":
            return None
        ndim = len(shape)
        retty = _types.Array(buf.dtype, ndim, "C")

        def codegen(context, builder, sig, args):
            bufty, offty, shapety = sig.args
            src = _make_array(bufty)(context, builder, args[0])
            off = context.cast(builder, args[1], offty, _types.intp)
            dims = [context.cast(builder, v, t, _types.intp)
                    for v, t in zip(_cgutils.unpack_tuple(builder, args[2], ndim), shapety)]
            itemsize = context.get_constant(_types.intp,
                                            context.get_abi_sizeof(context.get_data_type(bufty.dtype)))
            strides, acc = [], itemsize
            for k in reversed(dims):
                strides.insert(0, acc)
                acc = builder.mul(acc, k)
            out = _make_array(retty)(context, builder)
            _populate_array(out, data=builder.gep(src.data, [off], inbounds=True), shape=dims,
                            strides=strides, itemsize=itemsize,
                            meminfo=_cgutils.get_null_value(src.meminfo.type),
                            parent=_cgutils.get_null_value(out.parent.type))
            return _borrowed(context, builder, retty, out._getvalue())

        return retty(buf, offset, shape), codegen

    @_intrinsic
    def borrow(typingctx, arr):
        """arr itself, as a view that holds no reference (a null meminfo: see carve_view), for the
        arrays a compiled entry point is given and its caller holds for the call: slicing it
        (Q[i], OA[i] per state of a batch) then costs no atomic operation on a reference count
        that the batch's threads share."""
        if not isinstance(arr, _types.Array):
            return None

        def codegen(context, builder, sig, args):
            aty = sig.args[0]
            src = _make_array(aty)(context, builder, args[0])
            out = _make_array(aty)(context, builder)
            _populate_array(out, data=src.data,
                            shape=_cgutils.unpack_tuple(builder, src.shape, aty.ndim),
                            strides=_cgutils.unpack_tuple(builder, src.strides, aty.ndim),
                            itemsize=src.itemsize,
                            meminfo=_cgutils.get_null_value(src.meminfo.type),
                            parent=_cgutils.get_null_value(out.parent.type))
            return _borrowed(context, builder, aty, out._getvalue())

        return arr(arr), codegen
    @_intrinsic
    def flat_view(typingctx, arr):
        """A C-contiguous array as one vector (its elements in memory order), holding no reference
        (see borrow): for loops over a whole matrix that the compiler vectorises in one piece
        rather than row by row (a row of 36 to 100 elements leaves a scalar remainder each time)."""
        if not isinstance(arr, _types.Array) or arr.layout != "C":
            return None
        retty = _types.Array(arr.dtype, 1, "C")

        def codegen(context, builder, sig, args):
            aty = sig.args[0]
            src = _make_array(aty)(context, builder, args[0])
            size = context.get_constant(_types.intp, 1)
            for k in _cgutils.unpack_tuple(builder, src.shape, aty.ndim):
                size = builder.mul(size, k)
            out = _make_array(retty)(context, builder)
            _populate_array(out, data=src.data, shape=[size], strides=[src.itemsize],
                            itemsize=src.itemsize,
                            meminfo=_cgutils.get_null_value(src.meminfo.type),
                            parent=_cgutils.get_null_value(out.parent.type))
            return _borrowed(context, builder, retty, out._getvalue())

        return retty(arr), codegen

    set_plain_form(carve_view, _carve_view_py)
    set_plain_form(borrow, _borrow_py)
    set_plain_form(flat_view, _flat_view_py)
else:
    carve_view, borrow, flat_view = _carve_view_py, _borrow_py, _flat_view_py


# ------------------------------------------------------------------------------------------------
# compile groups: compiled, or plain while they compile

COMPILE_ENV = "SVA_LINEARIZER_COMPILE"
QUIET_ENV = "SVA_LINEARIZER_QUIET"
POLICIES = ("background", "wait", "never")

_lock = threading.RLock()
_state: dict = {}          # group -> "ready" | "loading" | "compiling" | "plain"
_ready_callbacks: list = []
_compiler = None           # (group) -> None: compiles the group in this process (the warm-up)
_loader = None             # (group) -> None: loads the group's compiled kernels (the warm-up, cached)
_watchers: dict = {}       # group -> the thread waiting for its background compile


def compile_policy() -> str:
    """SVA_LINEARIZER_COMPILE: "background" (default), "wait" or "never" (module docstring)."""
    p = os.environ.get(COMPILE_ENV, "").strip().lower() or "background"
    if p not in POLICIES:
        raise ValueError(f"{COMPILE_ENV} must be one of {', '.join(POLICIES)}, got {p!r}")
    return p


def set_compiler(compile_group, load_group) -> None:
    """The functions that compile a group in this process and that load its cached kernels: the
    warm-up (warmup.py, above the algorithms), registered from there."""
    global _compiler, _loader
    _compiler, _loader = compile_group, load_group


def on_ready(callback) -> None:
    """callback(group, seconds) when a group that ran in plain form switches to compiled code."""
    _ready_callbacks.append(callback)


def group_state(group: str) -> str | None:
    """"ready", "loading", "compiling", "plain", or None when no kernel of it was called yet."""
    return _state.get(group)


def mark_ready(group: str) -> None:
    """The group's compiled kernels are in use from now on (the warm-up calls this)."""
    _state[group] = "ready"


def set_loading(group: str) -> None:
    """Calls of the group's kernels compile (or load) their machine code now: the warm-up's."""
    _state[group] = "loading"


def _say(text: str) -> None:
    if os.environ.get(QUIET_ENV, "") not in ("", "0"):
        return
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):   # stderr closed
        pass


def _compiled(group: str) -> bool:
    """Whether calls of the group's kernels take compiled code now (deciding it on first use)."""
    st = _state.get(group)
    if st is None:
        st = _decide(group)
    return st == "ready" or st == "loading"


def _decide(group: str) -> str:
    with _lock:
        st = _state.get(group)
        if st is not None:
            return st
        policy = compile_policy()
        if policy == "never":
            st = "plain"
        elif is_warm(group):
            st = "ready"
        elif policy == "wait" and _compiler is not None:
            st = "loading"                     # calls of the group's kernels compile themselves
        else:
            st = _start_background(group)
        _state[group] = st
    if st == "loading":
        # the warm-up runs outside the lock: its stages may hand work to other threads (a batch's
        # workers) that call kernels of any group, and so _decide, while this thread waits for them
        try:
            _compiler(group)
        finally:
            _state[group] = "ready"
        return "ready"
    return st


def _start_background(group: str) -> str:
    """Have the group compiled by a background process, and a thread wait for it."""
    _say(f"sva_linearizer: the {group} kernels compile in the background (once per machine; log "
         f"{log_path()}); until then they run as plain Python")
    t = threading.Thread(target=_watch, args=(group, time.perf_counter()), daemon=True,
                         name=f"sva_linearizer-compile-{group}")
    _watchers[group] = t
    t.start()
    return "compiling"


POLL_S = 1.0   # how often a waiting process looks at another process's compile


def _watch(group: str, t0: float) -> None:
    """Wait until the group is in the cache: compiled by a background process this one starts, or
    by one that another process started (a compile already running: its lock is held). Then
    load it and switch the group's calls to it."""
    while not is_warm(group):
        if compile_running():      # another process compiles (this group or another): wait
            time.sleep(POLL_S)
            continue
        proc = start_background_compile([group])
        rc = proc.wait() if proc is not None else None
        if not is_warm(group):
            _say(f"sva_linearizer: the background compile of the {group} kernels failed "
                 f"({'it could not start' if proc is None else f'exit code {rc}'}; see {log_path()}); "
                 "they stay plain Python in this process")
            _state[group] = "plain"
            return
    _state[group] = "loading"
    if _loader is not None:
        try:
            _loader(group)                 # machine code from the cache, before the user's calls
        except Exception as e:  # noqa: BLE001 - the user's calls load it themselves instead
            _say(f"sva_linearizer: loading the compiled {group} kernels: {type(e).__name__}: {e}")
    _state[group] = "ready"
    seconds = time.perf_counter() - t0
    _say(f"sva_linearizer: the compiled {group} kernels are in use ({seconds:.0f} s after the first call)")
    for cb in list(_ready_callbacks):
        try:
            cb(group, seconds)
        except Exception:  # noqa: BLE001 - a callback's failure is its own
            pass


def decide_groups(*groups: str) -> None:
    """Decide now, in the calling thread, how the groups' kernels run (compiled, or plain while
    they compile; with SVA_LINEARIZER_COMPILE=wait: compile them now). A caller that hands kernel
    calls to worker threads does this first: the warm-up, run from a pool's worker, would hand its
    own work to that pool and wait for itself."""
    if HAVE_NUMBA:
        for g in groups:
            _compiled(g)


def wait_until_compiled(group: str = "core", timeout: float | None = None) -> bool:
    """Block until the group's kernels run compiled (starting its compile if nothing called it
    yet); False after `timeout` seconds, or when they stay plain (no numba, a failed compile)."""
    if not HAVE_NUMBA:
        return False
    _compiled(group)
    t = _watchers.get(group)
    if t is not None:
        t.join(timeout)
    return _state.get(group) == "ready"


def _route(d) -> None:
    """Send the dispatcher's calls from Python that have no machine code yet to the compiled code
    (loaded or compiled by numba) when its group is ready, else to its plain form."""
    compile_for_args = d._compile_for_args
    group = d.compile_group

    def route(*args, **kws):
        if _compiled(group):
            return compile_for_args(*args, **kws)
        return _plain_call(d)

    d._compile_for_args = route


_plain_calls: dict = {}


def _plain_call(d):
    """d's plain form, with numpy's floating-point warnings off (as in compiled code)."""
    call = _plain_calls.get(id(d))
    if call is None:
        f = plain_form(d)

        def call(*args, **kws):
            with np.errstate(all="ignore"):
                return f(*args, **kws)

        _plain_calls[id(d)] = call
    return call
