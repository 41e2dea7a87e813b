"""Optional JIT compilation: numba when installed (on-disk cache), plain Python otherwise.

The kernels are written once in a numba-compatible subset of numpy; without numba they run as
ordinary Python and give the same numbers, only slower. Set SVA_LINEARIZER_NO_JIT=1 to force the
pure-Python path (the test suite does this once to check both paths agree).

First run. numba compiles each kernel the first time it is called and caches the machine code on
disk (``__pycache__`` next to the sources, or under ``NUMBA_CACHE_DIR``); a cold cache costs about a
minute. :func:`ensure_compiled` makes that visible and does it once, up front: the first time a
process meets a cold cache it compiles everything by running the public pipeline on two tiny
models built in code (floating and fixed base), in named stages, and says so on stderr with one
progress line per stage, then records a marker next to numba's cache. Later processes find the
marker and return at once, silently. The messages start only when numba really compiles one of
the package's kernels (its "numba:compile" event fires on cache misses only), so a cache that is
warm without a marker stays silent too. Safe to call from any number of threads (one warms up, the
others wait) and processes (a file lock: one compiles, the others wait, then load the cache);
calls made from inside the warm-up return at once; ~0.1 us after the first call. Groups: "core"
(one state: linearize, dynamics, Minv, ID derivatives, discrete time) and "batch"
(linearize_batch's parallel kernel). ``SVA_LINEARIZER_QUIET=1`` turns it off (numba then
compiles silently on first use); without numba it does nothing. ``sva-linearizer compile`` runs
it explicitly (Dockerfiles, post-install). A kernel compiled outside any warm-up (a path the
stages do not cover) is announced by the same event listener, with its time.
"""
import hashlib
import json
import os
import sys
import threading
import time
import types

import numpy as np

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

# every dispatcher made by njit (in definition order): the cache locations and the sources whose
# changes invalidate numba's cache are read from them
_DISPATCHERS = []


# floating-point contraction only: a * b + c may become one fused multiply-add (one rounding
# instead of two). No reassociation, and never 'nnan'/'ninf': the finiteness checks rely on NaN.
FASTMATH = {"contract"}


def njit(fn=None, *, parallel=False, inline="never"):
    """Compile in nopython mode with numba's on-disk cache (``@njit``, ``@njit(parallel=True)``,
    ``@njit(inline="always")`` for small helpers of the hot loops), or return `fn` unchanged."""
    def wrap(f):
        if HAVE_NUMBA:
            d = _numba.njit(cache=True, nogil=True, parallel=parallel, inline=inline,
                            error_model="numpy", fastmath=FASTMATH)(f)
            _DISPATCHERS.append(d)
            return d
        return f
    return wrap(fn) if fn is not None else wrap


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
    ~0.2-0.3 us, a twentieth of an arm's linearization (fn itself without numba).

    The caller's promise: every call passes arguments of exactly these types. An array must
    have the example's dtype, ndim, layout and flags (`kernel_array`'s C-contiguous, aligned,
    writeable float64 vectors and the Data's buffers are what the hot paths pass); the compiled
    code reads an array of any other type as if it were this one, silently. Where a caller
    cannot promise it, it calls fn. Compiles fn (or loads numba's cache) for that signature
    on first use."""
    if not HAVE_NUMBA:
        return fn
    return fn.compile(tuple(_numba.typeof(x) for x in example))


def _carve_view_py(buf, offset, shape):
    """The C-contiguous array of `shape` that starts at buf[offset] (a view, no copy)."""
    size = 1
    for k in shape:
        size *= k
    return buf[offset:offset + size].reshape(shape)


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
else:
    carve_view = _carve_view_py

    def borrow(arr):
        return arr

    def flat_view(arr):
        out = arr.view()
        out.shape = (arr.size,)        # raises where reshape would copy (a non-contiguous array)
        return out


# ------------------------------------------------------------------------------------------------
# first run: compile once, visibly

QUIET_ENV = "SVA_LINEARIZER_QUIET"
MARKER_NAME = "sva_linearizer.compiled-{group}.json"
LOCK_NAME = "sva_linearizer.compile.lock"
# the message's estimates (seconds, fastest-slowest): cold compiles measured on shared 2-core
# machines with numba 0.68 (an AMD EPYC at 2.6 GHz; a first-generation AMD EPYC at 2.0 GHz)
ESTIMATE_S = {"core": (180, 410), "batch": (25, 60), "contacts": (150, 290), "contacts_batch": (40, 70)}
WHAT = {"core": "the numba kernels", "batch": "the parallel kernel of linearize_batch",
        "contacts": "the contact kernels (frames, rigid contacts, contact forces)",
        "contacts_batch": "the parallel kernel of linearize_batch with contacts"}

_lock = threading.RLock()
_done = {}  # group -> the status later calls report: "warm" (compiled or found) or "skipped"
_warming_thread = None
_event = None
if HAVE_NUMBA:
    try:
        from numba.core import event as _event
    except ImportError:  # pragma: no cover - numba without the event API
        _event = None
_HAVE_EVENTS = _event is not None
_DONE_RESULTS = {st: types.MappingProxyType({"status": st, "seconds": 0.0, "cache_dirs": [], "failures": []})
                 for st in ("warm", "skipped")}


def _quiet():
    return os.environ.get(QUIET_ENV, "") not in ("", "0")


def _say(text, end="\n"):
    try:
        sys.stderr.write(text + end)
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed: compiling still has to happen
        pass


def _sources():
    """The source files holding kernels, in order (numba invalidates a file's cache entries when its
    modification time or size changes): every module of the package's kernel folders, whether
    imported yet or not (some are imported on first use: the key must not depend on that), then
    those of any other module that made a kernel with this njit."""
    here = os.path.dirname(os.path.abspath(__file__))
    seen = []
    for sub in ("", "algorithms", "linearization"):
        folder = os.path.join(here, sub)
        try:
            seen += sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".py"))
        except OSError:  # pragma: no cover - a zipped or stripped install
            pass
    for d in _DISPATCHERS:
        path = getattr(getattr(d, "py_func", None), "__code__", None)
        path = path.co_filename if path is not None else None
        if path and path not in seen:
            seen.append(path)
    return seen


def cache_dirs():
    """The folders numba caches this package's kernels in (one per source folder), in order."""
    dirs = []
    for d in _DISPATCHERS:
        try:
            path = d._cache._cache_path  # numba's locator: __pycache__, NUMBA_CACHE_DIR, user cache
        except AttributeError:  # pragma: no cover - another numba version: fall back to the source
            path = os.path.join(os.path.dirname(d.py_func.__code__.co_filename), "__pycache__")
        if path not in dirs:
            dirs.append(path)
    return dirs


def cache_key():
    """What a warm cache must match: numba and Python versions, this machine's CPU as numba targets
    it, and every kernel source file's path, modification time and size (numba's own stamp)."""
    h = hashlib.sha256()
    parts = [getattr(_numba, "__version__", "?") if HAVE_NUMBA else "-", sys.version,
             sys.implementation.cache_tag or ""]
    try:
        import llvmlite.binding as llvm
        parts.append(llvm.get_host_cpu_name())
    except Exception:  # pragma: no cover - a missing/older llvmlite: the key just omits the CPU
        pass
    for path in _sources():
        try:
            st = os.stat(path)
            parts.append(f"{path}|{st.st_mtime}|{st.st_size}")
        except OSError:
            parts.append(f"{path}|missing")
    for p in parts:
        h.update(p.encode("utf-8", "replace"))
        h.update(b"\0")
    return h.hexdigest()


def _groups(group):
    return list(ESTIMATE_S) if group == "all" else [group]


def is_warm(group="core"):
    """True when every cache folder carries the group's marker for the current cache key (its
    warm-up ran and nothing has changed since); group "all": every group. Cheap: a few stat()s."""
    if not HAVE_NUMBA:
        return True
    key = cache_key()
    for g in _groups(group):
        for folder in cache_dirs():
            try:
                with open(os.path.join(folder, MARKER_NAME.format(group=g))) as fh:
                    if json.load(fh).get("key") != key:
                        return False
            except (OSError, ValueError):
                return False
    return True


KEY_MARKER = "sva_linearizer.cache-key.json"


def _cache_matches():
    """True when every cache folder was claimed for the current sources (see _claim_cache)."""
    key = cache_key()
    for folder in cache_dirs():
        try:
            with open(os.path.join(folder, KEY_MARKER)) as fh:
                if json.load(fh).get("key") != key:
                    return False
        except (OSError, ValueError):
            return False
    return True


def _claim_cache(dirs):
    """Drop the package's cached kernels (compiled from other sources) and mark the folders as
    holding this cache key's kernels from now on (compiled by a warm-up or lazily)."""
    _drop_cache(dirs)
    _write_markers(None, 0.0)


def _write_markers(group, seconds):
    """The group's warm-up marker (group None: the cache-key marker) in every cache folder."""
    key = cache_key()
    for folder in cache_dirs():
        try:
            os.makedirs(folder, exist_ok=True)
            name = os.path.join(folder, KEY_MARKER if group is None else MARKER_NAME.format(group=group))
            tmp = f"{name}.{os.getpid()}.tmp"
            with open(tmp, "w") as fh:
                json.dump({"key": key, "seconds": round(seconds, 1), "time": time.time()}, fh)
            os.replace(tmp, name)
        except OSError:  # a read-only cache: numba could not cache either; say nothing more
            pass


class _FileLock:
    """An exclusive lock across processes (fcntl; a no-op where it is missing)."""

    def __init__(self, folder):
        self.path = os.path.join(folder, LOCK_NAME)
        self.fh = None

    def acquire(self, on_wait=None):
        try:
            import fcntl
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self.fh = open(self.path, "a")
        except (ImportError, OSError):
            self.fh = None
            return
        try:
            fcntl.flock(self.fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(self.fh, fcntl.LOCK_EX)

    def release(self):
        if self.fh is not None:
            try:
                import fcntl
                fcntl.flock(self.fh, fcntl.LOCK_UN)
            finally:
                self.fh.close()
                self.fh = None


def _tiny_model(floating):
    """A 3-joint tree (revolute, prismatic, a branch at the base) built in code: every kernel has
    the same argument types for it as for any URDF robot, so compiling for it compiles for all."""
    import numpy as np

    import sva_linearizer as sl

    m = sl.Model(floating_base=floating, name="warmup")
    m.set_base_inertia(sl.Inertia(2.0, (0.0, 0.0, 0.01), np.diag([0.02, 0.03, 0.04])).matrix())
    link = sl.Inertia(0.5, (0.0, 0.0, -0.1), np.diag([0.003, 0.004, 0.002]))
    a = m.add_body("a", None, sl.Joint.revolute((0.0, 1.0, 0.0)), placement=(np.eye(3), (0.1, 0.0, 0.0)),
                   inertia=link)
    m.add_body("b", a, sl.Joint.prismatic((0.0, 0.0, 1.0)), placement=(np.eye(3), (0.0, 0.0, -0.2)),
               inertia=link)
    m.add_body("c", None, sl.Joint.revolute((1.0, 0.0, 0.0)), placement=(np.eye(3), (-0.1, 0.0, 0.0)),
               inertia=link)
    return m


def _tiny_state(m, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    q = np.zeros(m.nq)
    if m.floating_base:
        quat = rng.normal(size=4)
        q[3:7] = quat / np.linalg.norm(quat)
    q[m.nq - m.nj:] = rng.uniform(-0.5, 0.5, m.nj)
    return q, rng.normal(size=m.nv) * 0.1, rng.normal(size=m.nj) * 0.1


def _stage_linearize(floating):
    def run():
        import sva_linearizer as sl

        m = _tiny_model(floating)
        q, v, tau = _tiny_state(m)
        state = sl.State.from_vectors(m, q, v)
        sl.linearize(m, state, tau)
        sl.linearize(m, state, tau, data=sl.Data(m))
    return run


def _stage_dynamics(floating):
    def run():
        import numpy as np

        import sva_linearizer as sl

        m = _tiny_model(floating)
        q, v, tau = _tiny_state(m)
        state = sl.State.from_vectors(m, q, v)
        nu_dot = sl.forward_dynamics(m, state, tau)
        sl.inverse_mass_matrix(m, state)
        sl.mass_matrix(m, state)
        sl.extended_inverse_dynamics(m, state, nu_dot)
        sl.extended_inverse_dynamics_derivatives(m, state, nu_dot)
        sl.rneamb(m, state, np.zeros(m.nj))
        from sva_linearizer.algorithms import articulated_pivots

        articulated_pivots(m, np.zeros(m.nj))      # the check of every URDF model at load time
    return run


def _tiny_batch(m):
    """Three states of the tiny model as the rows of (Q, V, T)."""
    import numpy as np

    rows = [_tiny_state(m, seed) for seed in range(3)]
    return tuple(np.array([r[i] for r in rows]) for i in range(3))


def _tiny_contacts():
    """A point contact on "b" and a world-aligned 6d contact on "c" (for forces)."""
    import sva_linearizer as sl

    return (sl.Contact("b", kind="point", baumgarte=(1.0, 1.0)),
            sl.Contact("c", kind="6d", reference="world_aligned"))


def _stage_batch():
    import sva_linearizer as sl

    for floating in (True, False):
        m = _tiny_model(floating)
        Q, V, T = _tiny_batch(m)
        sl.linearize_batch(m, Q, V, T)
        sl.linearize_batch(m, Q, V, T, dt=0.01)


def _stage_discrete():
    import sva_linearizer as sl

    for floating in (True, False):
        m = _tiny_model(floating)
        q, v, tau = _tiny_state(m)
        sl.linearize(m, sl.State.from_vectors(m, q, v), tau, dt=0.01)


def _stage_contacts():
    import numpy as np

    import sva_linearizer as sl

    for floating in (True,):   # the kernels' argument types do not depend on the base; a point
        m = _tiny_model(floating)   # contact on "b" would over-constrain the fixed-base tree
        q, v, tau = _tiny_state(m)
        state = sl.State.from_vectors(m, q, v)
        point, six = _tiny_contacts()
        sl.linearize(m, state, tau, contacts=[point], forces=[(six, np.zeros(6))])
        sl.linearize(m, state, tau, contacts=[point], dt=0.01)
        sl.forward_dynamics(m, state, tau, contacts=[point])
        sl.frame_jacobian(m, state, "b", reference="world_aligned")
        sl.frame_velocity(m, state, "b")
        sl.frame_placement(m, state, "b")


def _stage_contacts_batch():
    import numpy as np

    import sva_linearizer as sl

    m = _tiny_model(True)
    Q, V, T = _tiny_batch(m)
    point, six = _tiny_contacts()
    sl.linearize_batch(m, Q, V, T, contacts=[point], forces=[(six, np.zeros(6))])


# (group, name, function): what the warm-up runs, in order. "core": everything one state needs
# (ensure_compiled() before the first kernel call); "batch": linearize_batch's parallel kernel
# (ensure_compiled("batch") in linearize_batch); "contacts": one state with contacts (frames.py,
# linearization/contacts.py); "contacts_batch": linearize_batch(contacts=)'s parallel kernel
# (contacts_chunk: ensure_compiled("contacts_batch") in contacts.batch_contacts). The core may
# add stages for new kernels.
WARMUP_STAGES = [
    ("core", "floating base: linearize", _stage_linearize(True)),
    ("core", "floating base: dynamics, Minv, ID derivatives", _stage_dynamics(True)),
    ("core", "fixed base: linearize", _stage_linearize(False)),
    ("core", "fixed base: dynamics, Minv, ID derivatives", _stage_dynamics(False)),
    ("core", "discrete time", _stage_discrete),
    ("batch", "linearize_batch (parallel), floating and fixed base, with and without dt", _stage_batch),
    ("contacts", "frames, rigid contacts and contact forces", _stage_contacts),
    ("contacts_batch", "linearize_batch with contacts (parallel)", _stage_contacts_batch),
]


class _Progress:
    """The warm-up's messages, said only once numba really compiles one of this package's kernels
    (a cache that is warm but has no marker, e.g. filled by quiet or earlier runs, stays silent).
    Without numba's event API the messages are said from the start."""

    def __init__(self, group, verbose):
        self.group, self.verbose = group, verbose
        self.announced = verbose and not _HAVE_EVENTS
        self.stage = None        # the stage's "[k/n] name" while it runs
        self.stage_said = False
        if self.announced:
            self._header()

    def _header(self):
        g = self.group
        lo, hi = ESTIMATE_S[g]
        _say(f"sva_linearizer: compiling {WHAT[g]} (once per machine, {lo}-{hi} s on 2 cores; "
             "SVA_LINEARIZER_QUIET=1 hides this) ...")

    def begin(self, label):
        self.stage, self.stage_said = label, False
        if self.announced:
            _say(f"sva_linearizer:   {label} ...", end="")
            self.stage_said = True

    def compiling(self):
        """Called (by the event listener) when numba starts compiling one of our kernels."""
        if not self.verbose:
            return
        if not self.announced:
            self.announced = True
            self._header()
        if self.stage is not None and not self.stage_said:
            _say(f"sva_linearizer:   {self.stage} ...", end="")
            self.stage_said = True

    def end(self, text):
        if self.stage_said:
            _say(f" {text}")
        self.stage, self.stage_said = None, False


_progress = None  # the running warm-up's _Progress (set while _warming_thread is)


def _warm_up(group, progress):
    """Run the group's stages; returns (seconds, failures as 'stage: error' strings)."""
    t0 = time.perf_counter()
    failures = []
    stages = [(name, fn) for g, name, fn in WARMUP_STAGES if g == group]
    n = len(stages)
    for k, (name, fn) in enumerate(stages, 1):
        progress.begin(f"[{k}/{n}] {name}")
        t = time.perf_counter()
        try:
            fn()
        except Exception as e:  # a stage that fails must not stop the user's own call
            failures.append(f"{name}: {type(e).__name__}: {e}")
            progress.compiling()  # a failure is always said
            progress.end(f"failed ({type(e).__name__}: {e})")
            continue
        progress.end(f"({time.perf_counter() - t:.1f} s)")
    return time.perf_counter() - t0, failures


def ensure_compiled(group="core", verbose=None, force=False):
    """Compile the group's kernels now if numba's on-disk cache is cold for them, saying so on stderr.

    group: "core" (what one state needs: linearize, dynamics, Minv, ID and its derivatives, both
    bases, discrete time), "batch" (linearize_batch's parallel kernel) or "all". Returns a dict:
    ``status`` ("warm": nothing to do; "compiled": this call warmed the cache up; "waited": another
    process did; "skipped": no numba, SVA_LINEARIZER_QUIET set, or a call from inside the warm-up),
    ``seconds``, ``cache_dirs``, ``failures`` (stages that raised; their kernels compile on first
    use instead; a read-only mapping on the fast path). The first call per process and group does
    the work; later calls return at once.
    verbose: None = print unless SVA_LINEARIZER_QUIET=1. force: run the stages even if the marker
    says warm (``sva-linearizer compile``; cached kernels just load).
    """
    if not force:  # the fast path: every call after the first in a process (~0.1 us)
        done = _DONE_RESULTS.get(_done.get(group))
        if done is not None:
            return done
    if group == "all":
        results = [ensure_compiled(g, verbose, force) for g in _groups("all")]
        order = ("compiled", "waited", "warm", "skipped")
        return {"status": min((r["status"] for r in results), key=order.index),
                "seconds": sum(r["seconds"] for r in results),
                "cache_dirs": cache_dirs() if HAVE_NUMBA else [],
                "failures": [f for r in results for f in r["failures"]]}
    if group not in ESTIMATE_S:
        raise ValueError(f"ensure_compiled: unknown group {group!r} (one of {', '.join(ESTIMATE_S)}, all)")
    global _warming_thread, _progress
    result = {"status": "skipped", "seconds": 0.0, "cache_dirs": [], "failures": []}
    if not HAVE_NUMBA:
        return result
    if group in _done and not force:
        result["status"] = _done[group]
        return result
    if _warming_thread == threading.get_ident():  # the warm-up's own calls into the core
        return result
    if verbose is None:
        if _quiet() and not force:
            # numba compiles on first use, silently, as it does by itself; but never from machine
            # code cached for other sources (see _drop_cache)
            with _lock:
                if group not in _done:
                    dirs = cache_dirs()
                    if dirs and not _cache_matches():
                        flock = _FileLock(dirs[0])
                        flock.acquire()
                        try:
                            if not _cache_matches():
                                _claim_cache(dirs)
                        finally:
                            flock.release()
                    _done[group] = "skipped"
            return result
        verbose = True
    with _lock:  # other threads wait here until the warm-up is over
        if group in _done and not force:
            result["status"] = _done[group]
            return result
        dirs = cache_dirs()
        result["cache_dirs"] = dirs
        if not force and is_warm(group):
            _done[group] = "warm"
            result["status"] = "warm"
            return result
        flock = _FileLock(dirs[0]) if dirs else None
        waited = []
        t0 = time.perf_counter()
        if flock is not None:
            flock.acquire(on_wait=lambda: (waited.append(1), verbose and _say(
                "sva_linearizer: another process is compiling the kernels; waiting for it ...")))
        try:
            if waited and not force and is_warm(group):
                _done[group] = "warm"
                result.update(status="waited", seconds=time.perf_counter() - t0)
                if verbose:
                    _say(f"sva_linearizer: compiled kernels ready after {result['seconds']:.1f} s")
                return result
            global _progress
            if not _cache_matches():      # the cache holds machine code of other sources
                _claim_cache(dirs)
            progress = _Progress(group, verbose)
            _warming_thread, _progress = threading.get_ident(), progress
            try:
                seconds, failures = _warm_up(group, progress)
            finally:
                _warming_thread, _progress = None, None
            if not failures:
                _write_markers(group, seconds)
            _done[group] = "warm"
            result.update(status="compiled", seconds=seconds, failures=failures)
            if progress.announced:
                where = ", ".join(dirs)
                if failures:
                    _say(f"sva_linearizer: warm-up done in {seconds:.1f} s with {len(failures)} failed "
                         f"stage(s); their kernels compile on first use. Cache: {where}")
                else:
                    _say(f"sva_linearizer: done in {seconds:.1f} s, cached in {where}")
            return result
        finally:
            if flock is not None:
                flock.release()


def _drop_cache(dirs):
    """Delete this package's compiled kernels from numba's cache before a cold warm-up. numba
    invalidates a kernel's cache entry only when the kernel's own source file changes, but a
    pipeline's machine code contains the kernels it calls from other files (linearize_state holds
    eidamb.py's EIDAmb): after an edit to eidamb.py the cached pipeline would still run the old
    code. The marker's key covers every kernel file, so a cold key means: compile everything."""
    for folder in dirs:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if name.endswith((".nbi", ".nbc")):
                try:
                    os.remove(os.path.join(folder, name))
                except OSError:
                    pass


def reset_for_tests():
    """Forget this process's 'done' state (tests only)."""
    _done.clear()


# ------------------------------------------------------------------------------------------------
# a compile nobody announced: say so too

if _event is not None:
    class _ColdCompileListener(_event.Listener):
        """Reports a compile of one of this package's kernels that happens outside the warm-up
        (numba emits "numba:compile" on cache misses only): a kernel the warm-up does not
        cover, or a core path that does not call ensure_compiled. One line per outermost
        kernel, with its time."""

        def __init__(self):
            self.local = threading.local()

        def _ours(self, event):
            d = (event.data or {}).get("dispatcher")
            return d is not None and any(d is x for x in _DISPATCHERS)

        def on_start(self, event):
            if not self._ours(event):
                return
            depth = getattr(self.local, "depth", 0)
            self.local.depth = depth + 1
            progress = _progress
            if progress is not None and _warming_thread == threading.get_ident():
                progress.compiling()
                return
            if depth == 0 and _warming_thread is None and not _quiet():
                self.local.t0 = time.perf_counter()
                name = getattr(event.data["dispatcher"], "__name__", "?")
                _say(f"sva_linearizer: compiling kernel {name} (not in numba's cache yet; once per "
                     "machine) ...", end="")
                self.local.announced = True

        def on_end(self, event):
            if not self._ours(event):
                return
            self.local.depth = getattr(self.local, "depth", 1) - 1
            if self.local.depth == 0 and getattr(self.local, "announced", False):
                self.local.announced = False
                _say(f" ({time.perf_counter() - self.local.t0:.1f} s)")

    _event.register("numba:compile", _ColdCompileListener())
