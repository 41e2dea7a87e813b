"""Compiling the kernels: the warm-up that runs the public pipeline on tiny models, group by group.

Above the public API (it calls it), so the layers below never import it: it registers itself with
_jit (`set_compiler`) as the way to compile a group in this process and to load a group's cached
kernels. Used by `sva-linearizer compile`, by the background compile that the first call of a
cold group starts (`python -m sva_linearizer.warmup GROUP...`: see _jit), and by
SVA_LINEARIZER_COMPILE=wait.

ensure_compiled(group) compiles what the group's calls need by running its stages (WARMUP_STAGES)
on two tiny models built in code (floating and fixed base): every kernel has the same argument
types for them as for any URDF robot, so compiling for them compiles for all. It says so on stderr,
one line per stage, only when numba really compiles (its "numba:compile" event fires on cache
misses only), then leaves a marker beside numba's cache (_cache.is_warm). One process at a time
compiles a cache folder (a file lock: the others wait, then load it). SVA_LINEARIZER_QUIET=1
silences it.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import types

from ._cache import (DISPATCHERS, GROUPS, FileLock, cache_dirs, cache_matches, claim_cache, is_warm,
                     write_markers)
from .algorithms import (articulated_pivots, extended_inverse_dynamics, extended_inverse_dynamics_derivatives,
                         extended_inverse_dynamics_second_derivatives, forward_dynamics,
                         inverse_mass_matrix, mass_matrix, rneamb)
from .algorithms.contact_rows import Contact
from .algorithms.frames import frame_jacobian, frame_placement, frame_velocity
from .data import Data
from .joints import Joint
from .linearization import linearize, linearize_batch
from .model import Inertia, Model
from .state import State
from ._jit import COMPILE_ENV, HAVE_NUMBA, QUIET_ENV, mark_ready, set_compiler, set_loading

# the progress message's estimates (seconds, fastest-slowest) of a cold compile on a shared 2-core
# machine with numba 0.68
ESTIMATE_S = {"core": (180, 410), "batch": (25, 60), "contacts": (150, 290), "contacts_batch": (40, 70),
              "second_order": (30, 90)}
WHAT = {"core": "the numba kernels", "batch": "the parallel kernel of linearize_batch",
        "contacts": "the contact kernels (frames, rigid contacts, contact forces)",
        "contacts_batch": "the parallel kernel of linearize_batch with contacts",
        "second_order": "the second-order derivatives of inverse dynamics"}

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


def _tiny_model(floating):
    """A 3-joint tree (revolute, prismatic, a branch at the base) built in code: every kernel has
    the same argument types for it as for any URDF robot, so compiling for it compiles for all."""
    import numpy as np


    m = Model(floating_base=floating, name="warmup")
    m.set_base_inertia(Inertia(2.0, (0.0, 0.0, 0.01), np.diag([0.02, 0.03, 0.04])).matrix())
    link = Inertia(0.5, (0.0, 0.0, -0.1), np.diag([0.003, 0.004, 0.002]))
    a = m.add_body("a", None, Joint.revolute((0.0, 1.0, 0.0)), placement=(np.eye(3), (0.1, 0.0, 0.0)),
                   inertia=link)
    m.add_body("b", a, Joint.prismatic((0.0, 0.0, 1.0)), placement=(np.eye(3), (0.0, 0.0, -0.2)),
               inertia=link)
    m.add_body("c", None, Joint.revolute((1.0, 0.0, 0.0)), placement=(np.eye(3), (-0.1, 0.0, 0.0)),
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

        m = _tiny_model(floating)
        q, v, tau = _tiny_state(m)
        state = State.from_vectors(m, q, v)
        linearize(m, state, tau)
        linearize(m, state, tau, data=Data(m))
    return run


def _stage_dynamics(floating):
    def run():
        import numpy as np


        m = _tiny_model(floating)
        q, v, tau = _tiny_state(m)
        state = State.from_vectors(m, q, v)
        nu_dot = forward_dynamics(m, state, tau)
        inverse_mass_matrix(m, state)
        mass_matrix(m, state)
        extended_inverse_dynamics(m, state, nu_dot)
        extended_inverse_dynamics_derivatives(m, state, nu_dot)
        rneamb(m, state, np.zeros(m.nj))
        articulated_pivots(m, np.zeros(m.nj))      # the check of every URDF model at load time
    return run


def _tiny_batch(m):
    """Three states of the tiny model as the rows of (Q, V, T)."""
    import numpy as np

    rows = [_tiny_state(m, seed) for seed in range(3)]
    return tuple(np.array([r[i] for r in rows]) for i in range(3))


def _tiny_contacts():
    """A point contact on "b" and a world-aligned 6d contact on "c" (for forces)."""

    return (Contact("b", kind="point", baumgarte=(1.0, 1.0)),
            Contact("c", kind="6d", reference="world_aligned"))


def _stage_batch():

    for floating in (True, False):
        m = _tiny_model(floating)
        Q, V, T = _tiny_batch(m)
        linearize_batch(m, Q, V, T)
        linearize_batch(m, Q, V, T, dt=0.01)


def _stage_discrete():

    for floating in (True, False):
        m = _tiny_model(floating)
        q, v, tau = _tiny_state(m)
        linearize(m, State.from_vectors(m, q, v), tau, dt=0.01)


def _stage_contacts():
    import numpy as np


    for floating in (True,):   # the kernels' argument types do not depend on the base; a point
        m = _tiny_model(floating)   # contact on "b" would over-constrain the fixed-base tree
        q, v, tau = _tiny_state(m)
        state = State.from_vectors(m, q, v)
        point, six = _tiny_contacts()
        linearize(m, state, tau, contacts=[point], forces=[(six, np.zeros(6))])
        linearize(m, state, tau, contacts=[point], dt=0.01)
        forward_dynamics(m, state, tau, contacts=[point])
        frame_jacobian(m, state, "b", reference="world_aligned")
        frame_velocity(m, state, "b")
        frame_placement(m, state, "b")


def _stage_second_order():
    import numpy as np

    for floating in (True, False):
        m = _tiny_model(floating)
        q, v, _ = _tiny_state(m)
        state = State.from_vectors(m, q, v)
        nu_dot = np.zeros(m.nv)
        extended_inverse_dynamics_second_derivatives(m, state, nu_dot)
        extended_inverse_dynamics_second_derivatives(m, state, nu_dot, data=Data(m))


def _stage_contacts_batch():
    import numpy as np


    m = _tiny_model(True)
    Q, V, T = _tiny_batch(m)
    point, six = _tiny_contacts()
    linearize_batch(m, Q, V, T, contacts=[point], forces=[(six, np.zeros(6))])


# (group, name, function): what the warm-up runs, in order. "core": everything one state needs
# (ensure_compiled() before the first kernel call); "batch": linearize_batch's parallel kernel
# (ensure_compiled("batch") in linearize_batch); "contacts": one state with contacts (frames.py,
# linearization/with_contacts.py); "contacts_batch": linearize_batch(contacts=)'s parallel kernel
# (contacts_chunk: ensure_compiled("contacts_batch") in with_contacts.batch_contacts);
# "second_order": extended_inverse_dynamics_second_derivatives (its first call). The core may
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
    ("second_order", "second-order derivatives of inverse dynamics", _stage_second_order),
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
    the work; later calls return at once. The group's kernels run compiled in this process from
    then on.
    verbose: None = print unless SVA_LINEARIZER_QUIET=1. force: run the stages even if the marker
    says warm (``sva-linearizer compile``; cached kernels just load).
    """
    if not force:  # the fast path: every call after the first in a process (~0.1 us)
        done = _DONE_RESULTS.get(_done.get(group))
        if done is not None:
            return done
    if group == "all":
        results = [ensure_compiled(g, verbose, force) for g in GROUPS]
        order = ("compiled", "waited", "warm", "skipped")
        return {"status": min((r["status"] for r in results), key=order.index),
                "seconds": sum(r["seconds"] for r in results),
                "cache_dirs": cache_dirs() if HAVE_NUMBA else [],
                "failures": [f for r in results for f in r["failures"]]}
    if group not in GROUPS:
        raise ValueError(f"ensure_compiled: unknown group {group!r} (one of {', '.join(GROUPS)}, all)")
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
        verbose = not _quiet()
    with _lock:  # other threads wait here until the warm-up is over
        if group in _done and not force:
            result["status"] = _done[group]
            return result
        dirs = cache_dirs()
        result["cache_dirs"] = dirs
        if not force and is_warm(group):
            _done[group] = "warm"
            mark_ready(group)
            result["status"] = "warm"
            return result
        flock = FileLock(dirs[0]) if dirs else None
        waited = []
        t0 = time.perf_counter()
        if flock is not None:
            flock.acquire(on_wait=lambda: (waited.append(1), verbose and _say(
                "sva_linearizer: another process is compiling the kernels; waiting for it ...")))
        try:
            if waited and not force and is_warm(group):
                _done[group] = "warm"
                mark_ready(group)
                result.update(status="waited", seconds=time.perf_counter() - t0)
                if verbose:
                    _say(f"sva_linearizer: compiled kernels ready after {result['seconds']:.1f} s")
                return result
            global _progress
            if not cache_matches():      # the cache holds machine code of other sources
                claim_cache(dirs)
            progress = _Progress(group, verbose)
            _warming_thread, _progress = threading.get_ident(), progress
            set_loading(group)           # the stages' calls compile
            try:
                seconds, failures = _warm_up(group, progress)
            finally:
                _warming_thread, _progress = None, None
                mark_ready(group)
            if not failures:
                write_markers(group, seconds)
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


def reset_for_tests():
    """Forget this process's 'done' state (tests only)."""
    _done.clear()


def load_group(group: str) -> None:
    """Load the group's compiled kernels from numba's cache by running its stages quietly (a
    kernel missing from the cache compiles, also quietly): what a process does when a background
    compile it waited for is done, before its own calls switch to compiled code."""
    global _warming_thread, _progress
    with _lock:
        progress = _Progress(group, False)
        _warming_thread, _progress = threading.get_ident(), progress
        try:
            _warm_up(group, progress)
        finally:
            _warming_thread, _progress = None, None


def _compile_in_process(group: str) -> None:
    ensure_compiled(group)


def main(argv=None) -> int:
    """The background compile: `python -c "...warmup import main..." GROUP...` (see
    start_background_compile). Every group it touches compiles in this process."""
    os.environ[COMPILE_ENV] = "wait"
    failures = []
    for g in (argv if argv else ["core"]):
        _say(f"sva_linearizer: background compile of the {g} kernels, pid {os.getpid()}, "
             f"{time.strftime('%Y-%m-%d %H:%M:%S')}")
        failures += ensure_compiled(g, verbose=True)["failures"]
    return 1 if failures else 0


set_compiler(_compile_in_process, load_group)


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
            return d is not None and any(d is x for x in DISPATCHERS)

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
