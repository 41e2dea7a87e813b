# SPDX-License-Identifier: BSD-3-Clause
"""Compiled kernels with numba when it is installed, plain Python otherwise, and the switch between
the two while the compiled ones are not ready.

The kernels are written once in a numba-compatible subset of numpy. Without numba (or with
SVA_LINEARIZER_NO_JIT=1 or NUMBA_DISABLE_JIT=1) `njit` returns the function itself and they run
as ordinary Python: the same numbers, only slower.

With numba, each kernel belongs to a compile group ("core": one state; "batch": linearize_batch's
lockstep kernel, the pipeline compiled on lanes; "contacts": frames and contacts;
"contacts_batch": linearize_batch with contacts; "second_order": the second-order derivatives of
inverse dynamics; PLAIN_ONLY: kernels never compiled; a module sets COMPILE_GROUP, njit's `group=`
overrides it). The first time a process calls a kernel of a group from Python, the group's state
is decided (`compile_policy`):
  * its compiled code is in numba's cache (is_warm): it is loaded and used;
  * otherwise, by default ("background"), the group compiles in a background process that fills
    the cache, and until it is done every call of the group's kernels runs their plain-Python
    form (_plain.py): the first answer comes at once, at the speed of Python. When the background
    compile is done, a thread of this process loads the compiled kernels (the loader given to
    `set_compiler`), and from then on the calls run compiled; `on_ready` callbacks are told;
  * SVA_LINEARIZER_COMPILE=wait compiles the group in the calling process before the call
    (`set_compiler`: the warm-up, with progress); =never keeps the plain forms;
  * a compile of the group that failed for the current sources (_cache.failure: a stage raised,
    or the compiling process ended without compiling it) is not started again: the plain forms
    answer, said once; `sva-linearizer compile` (or another version of the package) tries again.
How the call is routed: numba's dispatcher, called from Python with argument types it has no
machine code for, asks its `_compile_for_args`; each of the package's dispatchers has that
replaced by `_route`, which returns the compiled code or the plain form.
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
import time

import numpy as np

from ._cache import (DISPATCHERS, GROUPS, compile_running, failure, failure_reason, is_warm, log_path,
                     start_background_compile, write_failure)
from ._plain import plain_form

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

# The group of kernels that always run as plain Python: a process calls them once or twice (the
# model check at load time: milliseconds in plain Python), so compiling them would cost every
# machine seconds of CPU time for nothing.
PLAIN_ONLY = "plain_only"


# numba's options for a helper of the hot loops (njit's inline="always"): compiled once per signature
# and inlined by LLVM into its callers (LLVM's `alwaysinline`), not by numba. numba inlines a
# function's IR by copying it at every call site, which made most of a cold compile's front end;
# with LLVM's inlining the compiled code runs at the same speed (docs/performance.md, "Where a
# cold compile's time goes").
HELPER_OPTIONS = {"inline": "never", "forceinline": True}


_ENV_BYTES = getattr(os.environ, "_data", None)
if not (isinstance(_ENV_BYTES, dict) and all(type(k) is bytes for k in _ENV_BYTES)):
    _ENV_BYTES = None


def env(name: str) -> str | None:
    """os.environ.get(name) for the settings read on every call (the lane width, the threads):
    on POSIX a look-up in os.environ's own dict of encoded names, which its setters keep in step,
    where os.environ.get raises and catches a KeyError for a name that is not set (~0.7 us)."""
    if _ENV_BYTES is None:
        return os.environ.get(name)
    value = _ENV_BYTES.get(name.encode())
    return None if value is None else os.fsdecode(value)


def njit(fn=None, *, parallel=False, inline="never", group=None):
    """Compile in nopython mode with numba's on-disk cache, or return `fn` unchanged. group: the
    compile group (default: the module's COMPILE_GROUP, else "core"). inline:
      "never"   a function of its own (``@njit``, ``@njit(parallel=True)``);
      "always"  a small helper of the hot loops: compiled once per signature, LLVM inlines it
                into its callers (HELPER_OPTIONS);
      "ir"      numba inlines its IR into every caller. A helper that returns arrays must be:
                views carved from a buffer must not outlive the call that carved them, and the
                Python entry numba builds for each compiled signature cannot box an array of
                Lanes."""
    def wrap(f):
        if HAVE_NUMBA:
            how = HELPER_OPTIONS if inline == "always" else {"inline": "always" if inline == "ir" else inline}
            d = _numba.njit(cache=True, nogil=True, parallel=parallel, error_model="numpy",
                            fastmath=FASTMATH, **how)(f)
            d.compile_group = group or f.__globals__.get("COMPILE_GROUP", "core")
            _route(d)
            DISPATCHERS.append(d)
            return d
        return f
    return wrap(fn) if fn is not None else wrap


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


def direct_cached(cache: dict, key, fn, *example):
    """`direct(fn, *example)`, kept in cache[key] once it is compiled code (the same promise on
    the arguments' types, for every call with this key)."""
    entry = cache.get(key)
    if entry is None:
        entry = direct(fn, *example)
        if is_direct(entry, fn):
            cache[key] = entry
    return entry


class DirectEntry:
    """`direct(fn, *example)` found on first use and kept once it is compiled code: a caller calls
    `(e.code or e.get())(...)` (an attribute read on the hot path). While fn's compile group is
    not ready, get() returns fn itself, not kept, so that a later call finds the compiled code."""

    __slots__ = ("fn", "example", "code")

    def __init__(self, fn, *example):
        self.fn, self.example, self.code = fn, example, None

    def get(self):
        entry = direct(self.fn, *self.example)
        if is_direct(entry, self.fn):
            self.code = entry
        return entry

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


def mark_plain(group: str) -> None:
    """The group's calls take the plain forms from now on (its compile failed)."""
    _state[group] = "plain"


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


def compiled(group: str) -> bool:
    """Whether calls of the group's kernels take compiled code now (False without numba)."""
    return HAVE_NUMBA and _compiled(group)


def _compiled(group: str) -> bool:
    """Whether calls of the group's kernels take compiled code now (deciding it on first use)."""
    if group == PLAIN_ONLY:
        return False
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
        elif (failed := failure(group)) is not None:
            _say(f"sva_linearizer: the compile of the {group} kernels failed on this machine "
                 f"({failure_reason(failed)}); they run as plain Python. `sva-linearizer compile` "
                 "tries again")
            st = "plain"
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
            if _state.get(group) != "plain":   # a failed compile leaves the plain forms
                _state[group] = "ready"
        return _state[group]
    return st


def _start_background(group: str) -> str:
    """Have the group compiled by a background process, and a thread wait for it."""
    _say(f"sva_linearizer: the {group} kernels compile in the background (once per machine; log "
         f"{log_path()}); until then they run as plain Python")
    t = threading.Thread(target=_watch, args=(group, time.perf_counter()), daemon=True,
                         name=f"sva_linearizer-compile-{group}")
    _watchers[group] = t
    if len(_watchers) == 1:
        atexit.register(_launch_at_exit)
    t.start()
    return "compiling"


def _launch_at_exit() -> None:
    """A process that ends while its groups still wait to compile (a one-shot command ends within
    GATHER_S of its first call; a node stopped while another process compiles) leaves a background
    compile of them behind, for the next process: if another compile holds the cache's lock, it
    waits for it, then compiles what is still cold."""
    with _launch_lock:
        names = [g for g in GROUPS if _state.get(g) == "compiling" and not is_warm(g)
                 and (_launches.get(g) is None or _launches[g].poll() is not None)]
        if names:
            proc = start_background_compile(names)
            for g in names:
                _launches[g] = proc


POLL_S = 1.0     # how often a waiting process looks at another process's compile
GATHER_S = 0.3   # a watcher waits this long before it starts a compile: the groups a first call
                 # decides together (a call with contacts: core and contacts) compile together
_launch_lock = threading.Lock()
_launches: dict = {}   # group -> the background compile this process started for it


def _launch(group: str):
    """The background compile that compiles `group` for this process: the running one this process
    started for it, else a new one for every group this process decided to compile in the
    background and that is still cold (one process: its workers take the stages of all of them).
    None: another process compiles into the cache now (wait for it); False: no compile could start."""
    with _launch_lock:
        proc = _launches.get(group)
        if proc is not None and proc.poll() is None:
            return proc
        if compile_running():
            return None
        names = [g for g in GROUPS if g == group or (
            _state.get(g) == "compiling" and not is_warm(g)
            and (_launches.get(g) is None or _launches[g].poll() is not None))]
        proc = start_background_compile(names)
        for g in names:
            _launches[g] = proc
        return proc if proc is not None else False


def _watch(group: str, t0: float) -> None:
    """Wait until the group is in the cache: compiled by a background process this one starts, or
    by one that another process started (a compile already running: its lock is held). Then
    load it and switch the group's calls to it."""
    time.sleep(GATHER_S)
    while not is_warm(group):
        proc = _launch(group)
        if proc is None:           # another process compiles (this group or another): wait
            time.sleep(POLL_S)
            continue
        rc = proc.wait() if proc else None
        if not is_warm(group):
            # the compiling process says what failed (_cache.write_failure); a process that could
            # not start or ended without a word is remembered here, so that no later process starts
            # it again in a loop
            failed = failure(group)
            if failed is None:
                how = ("it could not start" if proc is False
                       else f"it ended with exit code {rc} without compiling the {group} kernels")
                write_failure(group, "the background compile", how)
                failed = failure(group) or {"stage": "the background compile", "error": how}
            _say(f"sva_linearizer: the background compile of the {group} kernels failed "
                 f"({failure_reason(failed)}; log {log_path()}); they stay plain Python. "
                 "`sva-linearizer compile` tries again")
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
