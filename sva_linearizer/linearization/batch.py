# SPDX-License-Identifier: BSD-3-Clause
"""Many states in parallel: `linearize_batch`.

The states are computed in lockstep groups of L (the machine's vector width in doubles: 8 with
AVX-512, 4 with AVX2; _lanes.py): `batch_lanes` runs the one-state pipeline `linearize_state`
compiled on Lanes, the states of a group interleaved in a workspace of L lanes, so that each
instruction of the pipeline computes L states. The last group is filled up with copies of its
last state. A group in which some state fails (a bad input, a singular mass matrix, an overflow)
is computed again state by state with the one-state kernels (from Python:
_lanes.redo_failed_groups), which give each state its own status and result. With contacts the
contact pipeline runs in lanes the same way (with_contacts.contacts_lanes). The lane kernels take
the states by their positions in an index (0..N-1 here; linearize_horizon's knots sorted by contact
set) and write what a caller asks for beside A, B (_lanes.LaneExtras: nothing more here; a
horizon's continuous A, B with dt, nu_dot, forces): FreeLanes and with_contacts.ContactLanes run
them for linearize_batch and linearize_horizon alike.

The groups are handed out from a shared counter to worker threads (the calling thread among
them), each on a workspace of its own, with the GIL released (numba's nogil). A thread slowed
down by other work on its core simply takes fewer groups: a busy core costs its share, not the
whole batch (a static split across numba's OpenMP
threads made a batch 4-7x slower than the same states one by one on a loaded machine). The same
mechanism serves any number of concurrent batches from several Python threads.

Threads: SVA_LINEARIZER_NUM_THREADS, else the CPUs this process may run on, at most one per
THREAD_WORK of work; 1 without numba (the pure-Python kernels hold the GIL). While the batch
kernels are not compiled (numba absent, or their background compile still running) `_one_by_one`
computes the states one at a time from Python, each by the compiled one-state pipeline (its plain
form while that is not compiled either)."""
from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from typing import TYPE_CHECKING

from numpy.typing import ArrayLike

if TYPE_CHECKING:
    from ..model import Model

from .._jit import HAVE_NUMBA, compiled, decide_groups, direct_cached, env, njit
from .._arrays import _FLOAT64, kernel_array, real_array
from .._intrinsics import borrow
from ..algorithms.status import LANES_FAILED
from .._lanes import (LaneExtras, aligned_empty, as_lanes, chunk_size, copy_out, interleave, lane_width,
                      redo_failed_groups)

COMPILE_GROUP = "batch"     # the compile group of this module's kernels (_jit)
from ..coupling import is_coupled
from ..data import check_fits, get_data
from ..layout import views
from .continuous import _out_arrays, linearize, linearize_entry, linearize_state, status_error
from .discrete import check_dt
from .with_contacts import batch_contacts

_ndarray = np.ndarray

_pool = None
_pool_lock = threading.Lock()
# nv^2 x states per worker thread, when SVA_LINEARIZER_NUM_THREADS does not set the count: about
# 0.3 ms of one thread's work on lanes (64 ur5 or solo12 states ran slower on two threads than on one,
# 64 g1_29dof states 1.3x faster: `sva-linearizer bench --horizon 64`, 2-core Xeon)
THREAD_WORK = 30000


def num_threads() -> int:
    """Threads a batch uses: SVA_LINEARIZER_NUM_THREADS, else the CPUs available (1 without numba)."""
    if not HAVE_NUMBA:
        return 1
    env = os.environ.get("SVA_LINEARIZER_NUM_THREADS", "")
    if env.strip():
        try:
            return max(1, int(env))
        except ValueError:
            raise ValueError(f"SVA_LINEARIZER_NUM_THREADS must be a whole number, got {env!r}") from None
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _batch_threads(n: int, width: int, nv: int) -> int:
    """Worker threads for n states in groups of `width`: SVA_LINEARIZER_NUM_THREADS, else one per
    THREAD_WORK of work (nv^2 per state, as the pipeline's cost grows; at least one: a horizon of
    small robots is done before a second thread would have taken its share) and at most the CPUs
    available; never more than the groups."""
    groups = -(-n // width)
    setting = env("SVA_LINEARIZER_NUM_THREADS")
    if setting and setting.strip() or not HAVE_NUMBA:
        return min(num_threads(), groups)
    by_work = max(1, n * nv * nv // THREAD_WORK)
    return 1 if by_work == 1 else min(num_threads(), groups, by_work)


def _executor(workers):
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers < workers:
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sva_linearizer")
        return _pool


def _run_workers(work, nthreads, groups):
    """work(t) on threads t = 1..nthreads-1 of the pool and t = 0 on the calling thread; waits for
    all, re-raising the first error. groups: the compile groups of the kernels work calls, decided
    here first (_jit.decide_groups)."""
    decide_groups(*groups)
    if nthreads <= 1:
        work(0)
        return
    futures = [_executor(nthreads - 1).submit(work, t) for t in range(1, nthreads)]
    work(0)
    for f in futures:
        f.result()


def _one_by_one(ib, fb, Q, V, T, idx, OA, OB, status, dt, SA, SB, lo, hi, extra=None):
    """linearize_entry, the compiled one-state pipeline, called from Python for positions lo..hi-1
    (the states idx[p] of Q, V, T) on the workspace fb: A, B into OA[i], OB[i]; with dt > 0, Ad,
    Bd (A, B in the scratch SA, SB); the status into status[p]. extra: a LaneExtras for more of
    each state's results. The batch while batch_lanes is not compiled, and a lockstep group that
    failed (_lanes.redo_failed_groups)."""
    for p in range(lo, hi):
        i = idx[p]
        if dt > 0.0:
            status[p] = linearize_entry(ib, fb, Q[i], V[i], T[i], SA, SB, dt, OA[i], OB[i])
        else:
            status[p] = linearize_entry(ib, fb, Q[i], V[i], T[i], OA[i], OB[i], 0.0, OA[i], OB[i])
        if extra is not None and status[p] == 0:
            extra.one(i, fb, SA, SB, dt)


@njit
def batch_lanes(ib, fbl, tag, Q, V, TAU, idx, OA, OB, OAc, OBc, ONU, nuo, status, dt, lo, hi, QL, VL, TL,
                AL, BL, SAL, SBL):
    """Positions lo..hi-1 (the states idx[p] of Q, V, TAU and of the outputs) in lockstep groups
    of L = len(tag) (`lane_group`). Returns the number of groups that failed (their positions'
    status LANES_FAILED: _lanes.redo_failed_groups computes them one by one)."""
    Q, V, TAU, idx, status = borrow(Q), borrow(V), borrow(TAU), borrow(idx), borrow(status)
    OA, OB, OAc, OBc, ONU = borrow(OA), borrow(OB), borrow(OAc), borrow(OBc), borrow(ONU)
    ml, dl, _ = views(ib, as_lanes(fbl, tag))
    q, v, tau = as_lanes(QL, tag), as_lanes(VL, tag), as_lanes(TL, tag)
    A, B, SAl, SBl = as_lanes(AL, tag), as_lanes(BL, tag), as_lanes(SAL, tag), as_lanes(SBL, tag)
    NUL = fbl[nuo:nuo + ml.nv].reshape((1, ml.nv, len(tag)))     # nu_dot, as floats and as Lanes
    nu = as_lanes(NUL, tag)
    failed = 0
    for g in range(lo, hi, len(tag)):
        failed += lane_group(ml, dl, Q, V, TAU, idx, OA, OB, OAc, OBc, ONU, status, dt, g, min(hi, g + len(tag)),
                             QL, VL, TL, AL, BL, SAL, SBL, NUL, q, v, tau, A, B, SAl, SBl, nu)
    return failed


@njit(inline="always")
def lane_group(ml, dl, Q, V, TAU, idx, OA, OB, OAc, OBc, ONU, status, dt, lo, hi, QL, VL, TL, AL, BL, SAL, SBL,
               NUL, q, v, tau, A, B, SAl, SBl, nu):
    """Positions lo..hi-1 (at most L) as one lockstep group: their states' q, v, tau interleaved
    into QL, VL, TL (..., L) (the last state repeated to fill the group; q, v, tau: the same
    memory as Lanes), linearize_state on the lane workspace (ml, dl), and each lane's A, B (Ad,
    Bd with dt > 0; A, B then in SAl, SBl) copied out of AL, BL to OA[i], OB[i], i = idx[p]; with
    dt, A and B also to OAc[i], OBc[i] where asked for (OAc not empty), and nu_dot to ONU[i, 0].
    Returns 0, or 1 if the group failed (its positions' status LANES_FAILED)."""
    interleave(Q, QL, idx, lo, hi)
    interleave(V, VL, idx, lo, hi)
    interleave(TAU, TL, idx, lo, hi)
    if dt > 0.0:
        st = linearize_state(ml, dl, q, v, tau, SAl, SBl, dt, A, B)
    else:
        st = linearize_state(ml, dl, q, v, tau, A, B, 0.0, A, B)
    if st != 0:
        for p in range(lo, hi):
            status[p] = LANES_FAILED
        return 1
    for lane in range(hi - lo):
        status[lo + lane] = 0
    copy_out(AL, A, OA, idx, lo, hi)
    copy_out(BL, B, OB, idx, lo, hi)
    if dt > 0.0 and OAc.shape[0] > 0:
        copy_out(SAL, SAl, OAc, idx, lo, hi)
        copy_out(SBL, SBl, OBc, idx, lo, hi)
    if ONU.shape[0] > 0:
        copy_out(NUL, nu, ONU, idx, lo, hi)
    return 0


_LANES_ENTRY: dict = {}     # lane width -> batch_lanes's compiled code without dispatch (_jit.direct)


def _lanes_entry(width, args):
    """batch_lanes for its one signature at this width (the arrays FreeLanes passes: kernel_array's
    and _out_arrays' C-contiguous float64, int64 positions, the workspaces' aligned ones), called
    without numba's type dispatch (~0.1 us for each of its 24 arguments)."""
    return direct_cached(_LANES_ENTRY, width, batch_lanes, *args)


def _batch_arrays(model, q_batch, v_batch, tau_batch):
    """(N, nq), (N, nv), (N, nj) contiguous float arrays of the right shapes (no copy when they
    already are). Their values are checked in the compiled call."""
    nj = len(model.bodies)
    nv = nj + 6 if model.floating_base else nj
    nq = nv + 1 if model.floating_base else nv
    if (type(q_batch) is _ndarray and type(v_batch) is _ndarray and type(tau_batch) is _ndarray
            and q_batch.dtype is _FLOAT64 and v_batch.dtype is _FLOAT64 and tau_batch.dtype is _FLOAT64
            and q_batch.ndim == 2 and v_batch.ndim == 2 and tau_batch.ndim == 2
            and q_batch.shape[1] == nq and v_batch.shape[1] == nv and tau_batch.shape[1] == nj
            and q_batch.shape[0] == v_batch.shape[0] == tau_batch.shape[0]
            and q_batch.flags.carray and v_batch.flags.carray and tau_batch.flags.carray):
        return q_batch, v_batch, tau_batch      # (what the checks below accept as they are)
    arrs = []
    for name, X in (("q", q_batch), ("v", v_batch), ("tau", tau_batch)):
        try:
            arrs.append(kernel_array(X, f"linearize_batch: {name}"))
        except (TypeError, ValueError) as e:
            if str(e).startswith("linearize_batch:"):
                raise
            raise ValueError(f"linearize_batch: {name} must be an (N, size) array of numbers") from None
    Q, V, T = arrs
    if Q.ndim != 2 or V.ndim != 2 or T.ndim != 2:
        raise ValueError(f"linearize_batch: q, v, tau must be 2-D (N, size) arrays, got shapes "
                         f"{Q.shape}, {V.shape}, {T.shape}")
    N = Q.shape[0]
    if V.shape[0] != N or T.shape[0] != N:
        raise ValueError(f"linearize_batch: q, v, tau have different batch sizes {Q.shape[0]}, "
                         f"{V.shape[0]}, {T.shape[0]}")
    for name, X, size in (("q", Q, nq), ("v", V, nv), ("tau", T, nj)):
        if X.shape[1] != size:
            raise ValueError(f"linearize_batch: {name} rows must have size {size}, got {X.shape[1]}")
    return Q, V, T


def linearize_batch(model: Model, q_batch: ArrayLike, v_batch: ArrayLike, tau_batch: ArrayLike, *,
                    dt: float | None = None,
                    out: tuple[np.ndarray, np.ndarray] | None = None,
                    contacts=None, forces=None) -> tuple[np.ndarray, np.ndarray]:
    """A (N, 2nv, 2nv) and B (N, 2nv, nj) for N states given as flat vectors (rows), computed in
    compiled calls, in parallel over worker threads (module docstring). dt: return the discrete-time (Ad, Bd)
    instead (semi-implicit Euler, see linearize). out: the (A, B) (or (Ad, Bd)) to write into.
    A bad state raises a ValueError naming the first one (by index). Threads: num_threads().

    contacts=[sl.Contact, ...] (the same for every state; anchor None: each state's own frame
    pose) and/or forces=[(sl.Contact, F), ...] with F (dim,) for every state or (N, dim) per
    state: what linearize(..., contacts=, forces=, dt=) gives on each state, in lockstep groups
    too (B then has nj + m columns with forces; the contact forces and their derivatives: call
    linearize per state)."""
    Q, V, T = _batch_arrays(model, q_batch, v_batch, tau_batch)
    if dt is not None:
        dt = check_dt(dt)
    if contacts or forces:
        return _batch_contacts(model, Q, V, T, dt, out, contacts, forces)
    N, nv, nj = V.shape[0], V.shape[1], T.shape[1]
    nx = 2 * nv
    if out is None and N * nx * (nx + nj) > 2 ** 23:     # (reading the free memory costs ~20 us)
        check_fits(model, 8 * N * nx * (nx + nj), "output")
    OA, OB = _out_arrays(out, (N, nx, nx), (N, nx, nj))
    if N == 0:
        return OA, OB
    coupled = is_coupled(model)
    d = None if coupled else get_data(model)
    if coupled or d.custom:  # mimic joints, user jcalc callbacks: one state at a time
        from ..state import State

        for i in range(N):
            try:
                st = State.from_vectors(model, Q[i], V[i])
                lin = linearize(model, st, T[i], dt=dt,
                                out=None if dt is not None or coupled else (OA[i], OB[i]))
            except ValueError as e:
                raise ValueError(f"linearize_batch: state {i}: {e}") from None
            if dt is not None:
                OA[i], OB[i] = lin.Ad, lin.Bd
            elif coupled:
                OA[i], OB[i] = lin.A, lin.B
        return OA, OB
    width = lane_width() if compiled("batch") else 1      # (decides the group: _jit.decide_groups)
    nthreads = _batch_threads(N, width, nv)
    status = np.zeros(N, dtype=np.int64)
    run = FreeLanes(d, width, dt or 0.0, Q, V, T, _positions(N), OA, OB, _NO_EXTRAS, status, nthreads)
    if nthreads == 1:
        run(0, 0, N)
    else:
        counter = itertools.count()
        chunk = chunk_size(N, width, nthreads)

        def work(t):
            while True:
                lo = next(counter) * chunk
                if lo >= N:
                    return
                run(t, lo, min(N, lo + chunk))

        _run_workers(work, nthreads, ("batch",))
    bad = np.flatnonzero(status) if run.failed else ()
    if len(bad):    # the first bad state again, on a workspace of its own, for the message
        i = int(bad[0])
        d1 = d.copy()
        A1, B1 = np.empty((nx, nx)), np.empty((nx, nj))
        s1 = linearize_entry(d1.ib, d1.fb, Q[i], V[i], T[i], A1, B1, dt or 0.0, np.empty_like(A1),
                             np.empty_like(B1))
        err = status_error(model, d1, s1, Q[i], V[i], T[i], A1, B1)
        raise ValueError(f"linearize_batch: state {i}: {err}")
    return OA, OB


_POSITIONS = np.arange(0, dtype=np.int64)
_TAGS = {L: (0.0,) * L for L in (2, 4, 8)}     # the lane kernels' width, as a tuple's length (as_lanes)
_NO_EXTRAS = LaneExtras.none()                  # nothing beside A, B (never written to)


def _positions(n: int) -> np.ndarray:
    """0..n-1 as int64, the positions of a batch's states: one array shared by every batch (the
    lane kernels only read it; writeable, since that is the type their one signature takes)."""
    global _POSITIONS
    p = _POSITIONS
    if p.shape[0] < n:
        p = _POSITIONS = np.arange(max(n, 2 * p.shape[0]), dtype=np.int64)
    return p[:n]


def nu_offset(d) -> int:
    """The offset of nu_dot in the Data's float buffer (and in a lane workspace's rows)."""
    o = d.__dict__.get("_nu_offset")
    if o is None:
        o = d.__dict__["_nu_offset"] = (d.nu_dot.ctypes.data - d.fb.ctypes.data) // 8
    return o


class FreeLanes:
    """linearize_state for the positions p of idx (the states idx[p] of Q, V, T and of the outputs
    OA, OB and `extra`, a LaneExtras) at lane width L (1: one state at a time, while batch_lanes is
    not compiled), on the worker threads 0..nthreads-1: run(t, lo, hi) computes positions lo..hi-1
    on thread t's workspace of the Data d (the calling thread's, get_data), status[p] set; a
    failed lockstep group again state by state (_lanes.redo_failed_groups); `failed`: whether some
    state may have a non-zero status."""

    def __init__(self, d, width, dt, Q, V, T, idx, OA, OB, extra, status, nthreads):
        self.d, self.width, self.dt = d, width, dt
        self.failed = False
        self.Q, self.V, self.T, self.idx, self.OA, self.OB, self.extra = Q, V, T, idx, OA, OB, extra
        self.status = status
        if width > 1:
            self.ws = [_lane_workspace(d, t, width, dt > 0.0) for t in range(nthreads)]
            self.tag = _TAGS[width]
            self.entry = _LANES_ENTRY.get(width) or _lanes_entry(width, self._args(self.ws[0], 0, 0))
        else:
            nx, nj = 2 * d.nv, d.nj
            self.fbs = np.tile(d.fb, (nthreads, 1))           # a workspace per thread, for this call only
            self.SA = np.empty((nthreads, nx, nx) if dt else (nthreads, 0, 0))    # A, B scratch with dt
            self.SB = np.empty((nthreads, nx, nj) if dt else (nthreads, 0, 0))

    def _args(self, w, lo, hi):
        e = self.extra
        return ((self.d.ib, w.fb, self.tag, self.Q, self.V, self.T, self.idx, self.OA, self.OB, e.OAc, e.OBc,
                 e.ONU, e.nuo, self.status, self.dt, lo, hi) + w.arrays)

    def __call__(self, t, lo, hi):
        if self.width == 1:
            _one_by_one(self.d.ib, self.fbs[t], self.Q, self.V, self.T, self.idx, self.OA, self.OB, self.status,
                        self.dt, self.SA[t], self.SB[t], lo, hi, self.extra)
            self.failed = True      # (the statuses tell)
            return
        w = self.ws[t]
        if self.entry(*self._args(w, lo, hi)):
            self.failed = True
            redo_failed_groups(self.status, lo, hi, self.width, lambda a, b: _one_by_one(
                self.d.ib, w.fb1, self.Q, self.V, self.T, self.idx, self.OA, self.OB, self.status, self.dt, w.SA,
                w.SB, a, b, self.extra))


class _LaneWorkspace:
    """One thread's buffers for batch_lanes at lane width L: fb, the lane workspace (the model's
    floats in every lane); arrays, the interleaved q, v, tau and A, B (with dt: also the A, B
    scratch); fb1, SA, SB, a one-state workspace and the A, B scratch for a failed group."""

    def __init__(self, d, width, with_dt):
        nx, nj, nq = 2 * d.nv, d.nj, d.nv + (1 if d.floating_base else 0)
        self.fb = aligned_empty((d.fb.shape[0], width), width)
        self.fb[:] = d.fb[:, None]
        shapes = [(nq, width), (d.nv, width), (nj, width), (nx, nx, width), (nx, nj, width)]
        shapes += [(nx, nx, width), (nx, nj, width)] if with_dt else [(0, 0, width), (0, 0, width)]
        self.arrays = tuple(aligned_empty(s, width) for s in shapes)
        self.fb1 = d.fb.copy()
        self.SA = np.empty((nx, nx) if with_dt else (0, 0))
        self.SB = np.empty((nx, nj) if with_dt else (0, 0))


def _lane_workspace(d, t, width, with_dt):
    """Thread t's _LaneWorkspace of the Data d, kept on d for its next batches (d is the calling
    thread's own: get_data)."""
    cache = d.__dict__.setdefault("_lane_workspaces", {})
    key = (t, width, with_dt)
    ws = cache.get(key)
    if ws is None:
        ws = cache[key] = _LaneWorkspace(d, width, with_dt)
    return ws


def _batch_contacts(model, Q, V, T, dt, out, contacts, forces):
    """linearize_batch with contacts / forces: with_contacts.batch_contacts (compiled chunks on the
    worker threads, in lockstep lanes as the plain batch); where it cannot run (custom joints,
    anchored contacts, loops with Baumgarte stiffness), linearize state by state, the states handed
    out from a shared counter to the worker threads (each on its own Data; the compiled call
    releases the GIL). A bad state raises a ValueError naming the first one."""
    from ..state import State

    N = Q.shape[0]
    nv, nj = model.nv, model.nj
    per_state = []
    for c, F in (forces or []):
        F = real_array(F, f"linearize_batch: the force on {getattr(c, 'frame', c)!r}")
        if F.ndim == 2 and F.shape[0] != N:
            raise ValueError(f"linearize_batch: the force on {getattr(c, 'frame', c)!r} has {F.shape[0]} "
                             f"rows for {N} states")
        per_state.append((c, F))
    m = sum(getattr(c, "dim", 0) for c, _ in per_state)
    nx = 2 * nv
    OA, OB = _out_arrays(out, (N, nx, nx), (N, nx, nj + m))
    if N == 0:
        return OA, OB
    contacts = list(contacts or ())
    if batch_contacts(model, Q, V, T, OA, OB, contacts, per_state, min(num_threads(), N), _run_workers,
                      dt or 0.0):     # compiled chunks on the worker threads
        return OA, OB
    counter = itertools.count()
    errors = {}

    def work(_):
        while True:
            i = next(counter)
            if i >= N:
                return
            fs = [(c, F[i] if F.ndim == 2 else F) for c, F in per_state] or None
            try:
                st = State.from_vectors(model, Q[i], V[i])
                lin = linearize(model, st, T[i], dt=dt, contacts=contacts, forces=fs)
            except ValueError as e:
                errors[i] = e
                continue
            OA[i], OB[i] = (lin.Ad, lin.Bd) if dt is not None else (lin.A, lin.B)

    _run_workers(work, min(num_threads(), N), ("core", "contacts"))
    if errors:
        i = min(errors)
        raise ValueError(f"linearize_batch: state {i}: {errors[i]}")
    return OA, OB
