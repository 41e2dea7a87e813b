# SPDX-License-Identifier: BSD-3-Clause
"""Compiling the kernels: the warm-up that runs the public pipeline on tiny models, group by group.

Above the public API (it calls it), so the layers below never import it: it registers itself with
_jit (`set_compiler`) as the way to compile a group in this process and to load a group's cached
kernels. Used by `sva-linearizer compile`, by the background compile that the first call of a
cold group starts (`python -m sva_linearizer.warmup GROUP...`: see _jit), and by
SVA_LINEARIZER_COMPILE=wait.

ensure_compiled(group) compiles what the group's calls need by running its stages (WARMUP_STAGES)
on two tiny models built in code (floating and fixed base): every kernel has the same argument
types for them as for any URDF robot, so compiling for them compiles for all. On a cold cache the
stages first run in worker processes (compile_jobs() at once, each stage once the stages it comes
`after` are in the cache: _compile_in_workers), then in this process, which loads what they
compiled. It says so on stderr, one line per stage, only when something really compiles (numba's
"numba:compile" event fires on cache misses only), then leaves a marker beside numba's cache
(_cache.is_warm). One process at a time compiles a cache folder (a file lock: the others wait,
then load it). SVA_LINEARIZER_QUIET=1 silences it.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import types
from typing import Callable, NamedTuple

from ._cache import (DISPATCHERS, GROUPS, FileLock, cache_dirs, cache_matches, claim_cache, clear_failure,
                     is_warm, write_failure, write_markers)
from ._child import python_command
from .algorithms import (extended_inverse_dynamics, extended_inverse_dynamics_derivatives,
                         extended_inverse_dynamics_second_derivatives, forward_dynamics,
                         inverse_mass_matrix, mass_matrix, rneamb)
from .algorithms.centroidal import centroidal_derivatives, centroidal_momentum
from .algorithms.contact_rows import Contact
from .algorithms.frames import frame_jacobian, frame_placement, frame_velocity
from .data import Data
from .joints import Joint
from .linearization import impact, linearize, linearize_batch, linearize_impact
from .model import Inertia, Model
from .state import State
from ._jit import COMPILE_ENV, HAVE_NUMBA, QUIET_ENV, mark_plain, mark_ready, set_compiler, set_loading

# the progress message's estimates (seconds of CPU time, fastest-slowest) of a cold compile on a
# shared 2-core machine with numba 0.68 (`sva-linearizer compile --report`); `compile` spreads them
# over compile_jobs() processes
ESTIMATE_S = {"core": (55, 120), "batch": (40, 90), "contacts": (40, 100), "contacts_batch": (35, 80),
              "second_order": (5, 20), "impacts": (10, 30), "centroidal": (5, 15)}
WHAT = {"core": "the numba kernels", "batch": "the lockstep kernel of linearize_batch (the pipeline on lanes)",
        "contacts": "the contact kernels (frames, rigid contacts, contact forces)",
        "contacts_batch": "the lockstep kernel of linearize_batch with contacts (the contact pipeline on lanes)",
        "second_order": "the second-order derivatives of inverse dynamics",
        "impacts": "the impact kernels (the velocity jump at a touchdown and its reset map)",
        "centroidal": "the centroidal momentum kernels (h_G, its rate, A_G and their derivatives)"}

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
                 for st in ("warm", "skipped", "failed")}
_STATUS_ORDER = ("failed", "warm", "skipped")   # the status of several groups: the first that applies


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
    the same argument types for it as for any URDF robot, so compiling for it compiles for all.
    (Its model check, at first use, runs as plain Python: articulated.pivots_entry.)"""
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


def _tiny_states():
    """(model, State, tau) of the floating- and the fixed-base tiny model."""
    out = []
    for floating in (True, False):
        m = _tiny_model(floating)
        q, v, tau = _tiny_state(m)
        out.append((m, State.from_vectors(m, q, v), tau))
    return out


def _stage_inverse_dynamics():
    import numpy as np

    for m, state, _ in _tiny_states():
        extended_inverse_dynamics(m, state, np.zeros(m.nv))
        rneamb(m, state, np.zeros(m.nj))


def _stage_derivatives():
    import numpy as np

    for m, state, _ in _tiny_states():
        extended_inverse_dynamics_derivatives(m, state, np.zeros(m.nv))


def _stage_inverse_mass_matrix():
    for m, state, _ in _tiny_states():
        inverse_mass_matrix(m, state)


def _stage_forward_dynamics():
    for m, state, tau in _tiny_states():
        forward_dynamics(m, state, tau)


def _stage_mass_matrix():
    for m, state, _ in _tiny_states():
        mass_matrix(m, state)


def _stage_linearize():
    for m, state, tau in _tiny_states():
        linearize(m, state, tau)
        linearize(m, state, tau, data=Data(m))


def _stage_discrete():
    for m, state, tau in _tiny_states():
        linearize(m, state, tau, dt=0.01)


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


# the contact stages run on the floating base only: the kernels' argument types do not depend on
# the base, and a point contact on "b" would over-constrain the fixed-base tree

def _stage_frames():
    m, state, _ = _tiny_states()[0]
    frame_jacobian(m, state, "b", reference="world_aligned")
    frame_velocity(m, state, "b")
    frame_placement(m, state, "b")


def _stage_constrained_dynamics():
    m, state, tau = _tiny_states()[0]
    forward_dynamics(m, state, tau, contacts=[_tiny_contacts()[0]])


def _stage_contacts():
    import numpy as np

    m, state, tau = _tiny_states()[0]
    point, six = _tiny_contacts()
    linearize(m, state, tau, contacts=[point], forces=[(six, np.zeros(6))])
    linearize(m, state, tau, contacts=[point], dt=0.01)


def _stage_second_order():
    import numpy as np

    for m, state, _ in _tiny_states():
        nu_dot = np.zeros(m.nv)
        extended_inverse_dynamics_second_derivatives(m, state, nu_dot)
        extended_inverse_dynamics_second_derivatives(m, state, nu_dot, data=Data(m))


def _stage_impacts():
    m, state, _ = _tiny_states()[0]
    point = _tiny_contacts()[0]
    impact(m, state, [point], restitution=0.5)
    linearize_impact(m, state, [point], restitution=0.5)
    linearize_impact(m, state, [point], restitution=0.5, data=Data(m))


def _stage_centroidal():
    import numpy as np

    for m, state, _ in _tiny_states():
        nu_dot = np.zeros(m.nv)
        centroidal_momentum(m, state)
        centroidal_derivatives(m, state, nu_dot)
        centroidal_derivatives(m, state, nu_dot, data=Data(m))


def _stage_contacts_batch():
    import numpy as np

    m = _tiny_model(True)
    Q, V, T = _tiny_batch(m)
    point, six = _tiny_contacts()
    linearize_batch(m, Q, V, T, contacts=[point], forces=[(six, np.zeros(6))])
    linearize_batch(m, Q, V, T, contacts=[point], forces=[(six, np.zeros(6))], dt=0.01)


class Stage(NamedTuple):
    """One step of the warm-up: `run` calls the public functions whose kernels it compiles.
    `after`: the stages whose kernels `run` calls too (directly or inside its own kernels); in a
    compile spread over several processes it starts once they are in numba's cache, so that no
    kernel compiles twice."""
    group: str
    name: str
    run: Callable[[], None]
    after: tuple = ()


ID, ID_DERIVATIVES = "inverse dynamics (EIDAmb, RNEAmb)", "ID derivatives"
MINV, FD, LINEARIZE = "inverse mass matrix (IMMAmb)", "forward dynamics (ABAmb)", "linearize"
DISCRETE, CONSTRAINED = "discrete time", "forward dynamics with contacts"
CONTACTS = "linearize with contacts and contact forces"

# What the warm-up runs, in order (each stage after those it names in `after`; the longest chains
# first, so that a compile over several processes keeps them busy). "core": everything
# one state needs; "batch": linearize_batch's lockstep kernel, the pipeline compiled on lanes
# (linearization/batch.py); "contacts": one state with contacts (frames.py, linearization/with_contacts.py);
# "contacts_batch": linearize_batch(contacts=)'s lockstep kernel (contacts_lanes); "second_order":
# extended_inverse_dynamics_second_derivatives; "impacts": impact, linearize_impact; "centroidal":
# centroidal_momentum, centroidal_derivatives. A new kernel needs a stage that calls it.
WARMUP_STAGES = [
    Stage("core", ID, _stage_inverse_dynamics),
    Stage("core", MINV, _stage_inverse_mass_matrix),
    Stage("core", ID_DERIVATIVES, _stage_derivatives, (ID,)),
    Stage("core", FD, _stage_forward_dynamics),
    Stage("contacts", CONSTRAINED, _stage_constrained_dynamics, (ID, MINV, FD)),
    Stage("core", LINEARIZE, _stage_linearize, (ID, ID_DERIVATIVES, MINV, FD)),
    Stage("core", DISCRETE, _stage_discrete, (LINEARIZE,)),
    Stage("batch", "linearize_batch (lanes), with and without dt", _stage_batch, (LINEARIZE, DISCRETE)),
    Stage("contacts", CONTACTS, _stage_contacts, (LINEARIZE, DISCRETE, CONSTRAINED, ID_DERIVATIVES)),
    Stage("contacts_batch", "linearize_batch with contacts (lanes), with and without dt", _stage_contacts_batch,
          (CONTACTS,)),
    Stage("contacts", "frames", _stage_frames, (ID,)),
    Stage("second_order", "second-order derivatives of inverse dynamics", _stage_second_order, (ID,)),
    Stage("impacts", "impacts and their reset map", _stage_impacts, (CONTACTS, ID_DERIVATIVES)),
    Stage("centroidal", "centroidal momentum and its derivatives", _stage_centroidal, (ID, ID_DERIVATIVES)),
    Stage("core", "mass matrix (CRBAmb)", _stage_mass_matrix),
]


def _stages(group=None) -> list:
    """WARMUP_STAGES, or those of one group."""
    return list(WARMUP_STAGES) if group is None else [s for s in WARMUP_STAGES if s.group == group]


class _Progress:
    """The warm-up's messages, said only once numba really compiles one of this package's kernels
    (a cache that is warm but has no marker, e.g. filled by quiet or earlier runs, stays silent),
    or once worker processes compile for it. Without numba's event API the messages are said from
    the start."""

    def __init__(self, groups, verbose):
        self.groups = [groups] if isinstance(groups, str) else list(groups)
        self.verbose = verbose
        self.announced = verbose and not _HAVE_EVENTS
        self.jobs = 1            # processes compiling
        self.loading = False     # the workers compiled: this process's stages load, said only if they compile
        self.stage = None        # the stage's "[k/n] name" while it runs
        self.stage_said = False
        if self.announced:
            self._header()

    def _header(self):
        lo = sum(ESTIMATE_S[g][0] for g in self.groups)
        hi = sum(ESTIMATE_S[g][1] for g in self.groups)
        what = WHAT[self.groups[0]] if len(self.groups) == 1 else f"the kernels ({', '.join(self.groups)})"
        how = f"in {self.jobs} processes; " if self.jobs > 1 else ""
        _say(f"sva_linearizer: compiling {what} (once per machine; {how}{lo}-{hi} s of CPU time on a "
             "2-core machine; SVA_LINEARIZER_QUIET=1 hides this) ...")

    def workers(self, jobs):
        """The stages compile in `jobs` worker processes (whose compiles raise no event here)."""
        self.jobs, self.loading = jobs, True
        if self.verbose and not self.announced:
            self.announced = True
            self._header()

    def worker_done(self, k, n, name, seconds, note=""):
        if self.verbose:
            _say(f"sva_linearizer:   [{k}/{n}] {name} ({seconds:.1f} s{note})")

    def begin(self, label):
        self.stage, self.stage_said = label, False
        if self.announced and not self.loading:
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


def _last_line(e: BaseException) -> str:
    """'Type: the last line of the message' of an exception."""
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[-1].strip()}" if lines else type(e).__name__


def _warm_up(group, progress):
    """Run the group's stages; returns (seconds, failures as (stage, 'Type: last line') pairs)."""
    t0 = time.perf_counter()
    failures = []
    stages = [(s.name, s.run) for s in _stages(group)]
    n = len(stages)
    for k, (name, fn) in enumerate(stages, 1):
        progress.begin(f"[{k}/{n}] {name}")
        t = time.perf_counter()
        try:
            fn()
        except Exception as e:  # a stage that fails must not stop the user's own call
            failures.append((name, _last_line(e)))
            progress.compiling()  # a failure is always said
            progress.end(f"failed ({_last_line(e)})")
            continue
        progress.end(f"({time.perf_counter() - t:.1f} s)")
    return time.perf_counter() - t0, failures


JOBS_ENV = "SVA_LINEARIZER_COMPILE_JOBS"
_STAGE_MAIN = "import sys; from sva_linearizer.warmup import run_stage; sys.exit(run_stage(sys.argv[1]))"


def compile_jobs() -> int:
    """How many processes a cold compile spreads its stages over: SVA_LINEARIZER_COMPILE_JOBS, else
    the CPUs this process may run on (at most 8; each compiling process takes a few hundred MB)."""
    value = os.environ.get(JOBS_ENV, "").strip()
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            raise ValueError(f"{JOBS_ENV} must be a whole number, got {value!r}") from None
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):   # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 8))


def run_stage(name: str) -> int:
    """A worker of _compile_in_workers (its own process): run one stage, whose kernels compile
    into numba's cache, or load from it. The caller holds the cache's lock."""
    global _warming_thread
    stage = next((s for s in _stages() if s.name == name), None)
    if stage is None:
        _say(f"sva_linearizer: no warm-up stage named {name!r}")
        return 2
    _warming_thread = threading.get_ident()     # no warm-up of its own, no background compile
    for g in GROUPS:
        set_loading(g)
    stage.run()
    return 0


def _compile_in_workers(groups, jobs: int, progress: "_Progress") -> bool:
    """Run the groups' stages in `jobs` worker processes at once (run_stage), each once the stages
    it comes after are done, so that numba's cache holds every kernel of the groups when this
    process runs the stages itself (loading them: seconds). A stage that fails in its worker just
    compiles in this process. False (nothing done) with one job or fewer than two stages."""
    import subprocess
    import tempfile

    stages = [s for s in _stages() if s.group in groups]
    if jobs < 2 or len(stages) < 2:
        return False
    names = {s.name for s in stages}
    todo, running, done = list(stages), [], set()
    env = dict(os.environ, **{QUIET_ENV: "1"})
    progress.workers(jobs)
    try:
        while todo or running:
            for s in [s for s in todo if all(a in done or a not in names for a in s.after)]:
                if len(running) >= jobs:
                    break
                todo.remove(s)
                err = tempfile.TemporaryFile()
                proc = subprocess.Popen(python_command(_STAGE_MAIN, s.name), env=env,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
                running.append((proc, err, s, time.perf_counter()))
            if not running:         # `after` names a stage that never runs: this process does the rest
                break
            time.sleep(0.1)
            for item in [r for r in running if r[0].poll() is not None]:
                proc, err, s, t0 = item
                running.remove(item)
                done.add(s.name)
                note = ""
                if proc.returncode != 0:
                    err.seek(0)
                    lines = err.read().decode("utf-8", "replace").strip().splitlines()
                    note = f"; its worker failed ({lines[-1] if lines else f'exit code {proc.returncode}'})"
                err.close()
                progress.worker_done(len(done), len(stages), s.name, time.perf_counter() - t0, note)
    finally:
        for proc, err, _, _ in running:     # interrupted: stop the workers
            proc.kill()
            proc.wait()
            err.close()
    return True


def ensure_compiled(group="core", verbose=None, force=False):
    """Compile the group's kernels now if numba's on-disk cache is cold for them, saying so on stderr.

    group: "core" (what one state needs: linearize, dynamics, Minv, ID and its derivatives, both
    bases, discrete time), "batch" (linearize_batch's lockstep kernel) or "all". Returns a dict:
    ``status`` ("warm": nothing to do; "compiled": this call warmed the cache up; "waited": another
    process did; "failed": a stage raised, now or in an earlier process for the same sources;
    "skipped": no numba, SVA_LINEARIZER_QUIET set, or a call from inside the warm-up),
    ``seconds``, ``cache_dirs``, ``failures`` ('stage: error' of the stages that raised: the
    failure is remembered (_cache.write_failure) and the group's kernels run as plain Python; a
    read-only mapping on the fast path). The first call per process and group does the work; later
    calls return at once. The group's kernels run compiled in this process from then on.
    verbose: None = print unless SVA_LINEARIZER_QUIET=1. force: run the stages even if the marker
    says warm or a failure is remembered (``sva-linearizer compile``; cached kernels just load).
    """
    if not force:  # the fast path: every call after the first in a process (~0.1 us)
        done = _DONE_RESULTS.get(_done.get(group))
        if done is not None:
            return done
    names = [group]
    if group == "all":
        names = list(GROUPS)
    elif group not in GROUPS:
        raise ValueError(f"ensure_compiled: unknown group {group!r} (one of {', '.join(GROUPS)}, all)")
    return _compile(names, verbose, force)


def _compile(names, verbose=None, force=False) -> dict:
    """ensure_compiled for the groups `names`: one cache lock for all of them, and their stages
    spread over compile_jobs() worker processes."""
    global _warming_thread, _progress
    result = {"status": "skipped", "seconds": 0.0, "cache_dirs": [], "failures": []}
    if not HAVE_NUMBA:
        return result
    if _warming_thread == threading.get_ident():  # the warm-up's own calls into the core
        return result
    if verbose is None:
        verbose = not _quiet()

    def settle(status):   # the groups that are warm now need nothing more
        left = []
        for g in todo:
            if is_warm(g):
                _done[g] = "warm"
                mark_ready(g)
            else:
                left.append(g)
        if len(left) < len(todo):
            result["status"] = status
        return left

    with _lock:  # other threads wait here until the warm-up is over
        todo = [g for g in names if force or g not in _done]
        if not todo:
            result["status"] = min((_done[g] for g in names), key=_STATUS_ORDER.index)
            return result
        dirs = cache_dirs()
        result["cache_dirs"] = dirs
        if not force:
            todo = settle("warm")
            if not todo:
                return result
        flock = FileLock(dirs[0]) if dirs else None
        waited = []
        t0 = time.perf_counter()
        if flock is not None:
            flock.acquire(on_wait=lambda: (waited.append(1), verbose and _say(
                "sva_linearizer: another process is compiling the kernels; waiting for it ...")))
        try:
            if waited and not force:
                todo = settle("waited")
                if not todo:
                    result["seconds"] = time.perf_counter() - t0
                    if verbose:
                        _say(f"sva_linearizer: compiled kernels ready after {result['seconds']:.1f} s")
                    return result
            if not cache_matches():      # the cache holds machine code of other sources
                claim_cache(dirs)
            if force:                    # an explicit compile tries a remembered failure again
                for g in todo:
                    clear_failure(g)
            progress = _Progress(todo, verbose)
            _compile_in_workers([g for g in todo if not is_warm(g)], compile_jobs(), progress)
            failures = []
            _warming_thread, _progress = threading.get_ident(), progress
            try:
                for g in todo:
                    set_loading(g)           # the stages' calls compile (or load what the workers compiled)
                    seconds, failed = _warm_up(g, progress)
                    if failed:
                        stage, error = failed[0]
                        write_failure(g, stage, error)
                        _done[g] = "failed"
                        mark_plain(g)
                    else:
                        write_markers(g, seconds)
                        clear_failure(g)
                        _done[g] = "warm"
                        mark_ready(g)
                    failures += [f"{stage}: {error}" for stage, error in failed]
            finally:
                _warming_thread, _progress = None, None
                for g in todo:
                    if _done.get(g) != "failed":
                        mark_ready(g)
            seconds = time.perf_counter() - t0
            result.update(status="failed" if failures else "compiled", seconds=seconds, failures=failures)
            if progress.announced:
                where = ", ".join(dirs)
                if failures:
                    _say(f"sva_linearizer: warm-up done in {seconds:.1f} s with {len(failures)} failed "
                         f"stage(s); the kernels of {', '.join(g for g in todo if _done.get(g) == 'failed')} "
                         f"run as plain Python until `sva-linearizer compile` succeeds. Cache: {where}")
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
    start_background_compile). The groups compile in this process and its workers."""
    os.environ[COMPILE_ENV] = "wait"
    names = list(argv) if argv else ["core"]
    for g in names:
        if g not in GROUPS:
            _say(f"sva_linearizer: unknown compile group {g!r} (one of {', '.join(GROUPS)})")
            return 2
    _say(f"sva_linearizer: background compile of the {', '.join(names)} kernels, pid {os.getpid()}, "
         f"{time.strftime('%Y-%m-%d %H:%M:%S')}")
    return 1 if _compile(names, verbose=True)["failures"] else 0


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
