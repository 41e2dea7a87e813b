# SPDX-License-Identifier: BSD-3-Clause
"""A planner's horizon in one call: `linearize_horizon`.

An SQP, iLQR or DDP planner linearizes along its own predicted trajectory: N knots (q, v, tau), a
contact schedule (which contacts are active at each knot) and a step dt. `linearize_horizon`
returns, stacked over the knots, every section of the node's linearization record: the drift
nu_dot, A and B, with dt the discrete Ad, Bd and the predicted next state (q_next, v_next), and
the constraint forces with their derivatives. Knot i equals ``linearize`` at knot i with the
contacts active there (and ``next_state`` with its nu_dot).

Fixed layout over the knots: every configured constraint keeps its rows in ``forces`` (and its
columns in B with forces as inputs) at every knot; the rows (columns) of a contact inactive at a
knot are zeros there. ``Horizon.rows`` says where each constraint's rows are.
"""
from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from .._arrays import kernel_array, real_array
from .._jit import DirectEntry, compiled, decide_groups
from .._lanes import LaneExtras, chunk_size, lane_width
from ..algorithms.common import all_finite
from ..algorithms.constrained_dynamics import contact_plan
from ..algorithms.contact_rows import Contact, Loop
from ..algorithms.impacts import check_restitution
from ..coupling import is_coupled
from ..data import get_data
from ..state import State
from .batch import THREAD_WORK, FreeLanes, _run_workers, nu_offset, num_threads
from .continuous import linearize
from .discrete import check_dt, next_state, next_states
from .reset_map import linearize_impact
from .with_contacts import ContactLanes, lanes_can_run, stacked_forces

if TYPE_CHECKING:
    from ..model import Model


class KnotError(ValueError):
    """A knot of a horizon that cannot be linearized: ``knot`` its index; the message names it."""

    def __init__(self, knot: int, reason: str):
        super().__init__(f"linearize_horizon: knot {knot}: {reason}")
        self.knot = knot


@dataclass
class Horizon:
    """The record's sections at the N knots of a horizon (module docstring). m: the rows of every
    configured constraint, the contacts' (rigid) in the order given, then the loops'; nw = nj + the
    dims of the contacts whose forces are inputs; C: the contacts that can switch (the rigid ones,
    then those of ``forces``).

    nu_dot (N, nv): the acceleration at each knot (constrained where contacts are active), the rate
    of [body twist; r]. A (N, 2nv, 2nv), B (N, 2nv, nw). With dt: Ad, Bd (N, 2nv, 2nv | nw), q_next
    (N, nq), v_next (N, nv): the semi-implicit Euler step from each knot (its quaternion in the
    knot's hemisphere); without dt these are None. forces (N, m): the constraint forces on the robot
    at each knot, each in its reference frame (zeros for an inactive contact); dforces_dz
    (N, m, 2nv), dforces_dtau (N, m, nj). active (N, C) bool: the schedule. rows: per rigid contact
    and loop, in order, the slice of its rows in ``forces``; columns: per contact of ``forces``,
    the slice of its columns in B.

    With dt, rigid contacts and ``touchdowns`` (else None), the touchdowns (module docstring): touchdown (N,)
    bool; reset (N, 2nv, 2nv): the reset map's Jacobian at the state the step from knot k - 1
    lands in (the identity where knot k is no touchdown, and at knot 0); v_plus (N, nv): the
    velocity after the impact (v_next[k - 1] where knot k is no touchdown, v[0] at knot 0);
    impulses (N, m), dimpulses_dz (N, m, 2nv): the impulses on the robot at a touchdown in the
    rows of ``forces`` (zeros on the rows of contacts inactive at k, and at every other knot);
    restitution: e of the impacts.
    The float arrays are C-contiguous views of one buffer of their own."""
    nu_dot: np.ndarray
    A: np.ndarray
    B: np.ndarray
    Ad: np.ndarray | None
    Bd: np.ndarray | None
    q_next: np.ndarray | None
    v_next: np.ndarray | None
    forces: np.ndarray
    dforces_dz: np.ndarray
    dforces_dtau: np.ndarray
    active: np.ndarray
    rows: tuple
    columns: tuple
    touchdown: np.ndarray | None = None
    reset: np.ndarray | None = None
    v_plus: np.ndarray | None = None
    impulses: np.ndarray | None = None
    dimpulses_dz: np.ndarray | None = None
    restitution: float = 0.0

    def __len__(self) -> int:
        return self.A.shape[0]


def _knot_arrays(model, q, v, tau):
    """q, v, tau as (N, nq), (N, nv), (N, nj) float arrays: every input's numbers checked before any
    shape, so that the error names the argument that is not a real number."""
    named = (("q", q, model.nq), ("v", v, model.nv), ("tau", tau, model.nj))
    reals = []
    for name, X, _ in named:
        try:
            reals.append(real_array(X, f"linearize_horizon: {name}"))
        except (TypeError, ValueError) as e:
            raise ValueError(f"linearize_horizon: {name} must be an array of real numbers ({e})") from None
    arrs = []
    for (name, _, size), X in zip(named, reals):
        X = kernel_array(X)
        if X.ndim != 2 or X.shape[1] != size:
            raise ValueError(f"linearize_horizon: {name} must be an (N, {size}) array, got shape {X.shape}")
        arrs.append(X)
    if not arrs[0].shape[0] == arrs[1].shape[0] == arrs[2].shape[0]:
        raise ValueError(f"linearize_horizon: q, v, tau have {arrs[0].shape[0]}, {arrs[1].shape[0]}, "
                         f"{arrs[2].shape[0]} knots")
    return arrs


def _schedule(active, N, C):
    if active is None:
        return np.ones((N, C), dtype=bool)
    A = np.asarray(active)
    if A.shape != (N, C):
        raise ValueError(f"linearize_horizon: active must be an (N, C) = ({N}, {C}) array of booleans (one "
                         f"column per contact that can switch), got shape {A.shape}")
    if A.dtype != bool:
        if not np.all((A == 0) | (A == 1)):
            raise ValueError("linearize_horizon: active holds values other than true/false (1/0)")
        A = A.astype(bool)
    return A


def _input_forces(forces, N):
    """forces=[(contact, F)] -> [(contact, (N, dim) array)]."""
    out = []
    for c, F in forces or ():
        if not isinstance(c, Contact):
            raise ValueError(f"linearize_horizon: forces: {c!r} is not an sl.Contact")
        F = real_array(F, f"linearize_horizon: the force on {c.frame!r}")
        if F.ndim == 1:
            F = np.broadcast_to(F, (N, F.shape[0]))
        if F.shape != (N, c.dim):
            raise ValueError(f"linearize_horizon: the force on {c.frame!r} must be ({c.dim},) or ({N}, {c.dim}), "
                             f"got shape {F.shape}")
        out.append((c, F))
    return out


def linearize_horizon(model: Model, q: ArrayLike, v: ArrayLike, tau: ArrayLike, dt: float | None = None, *,
                      contacts=(), active: ArrayLike | None = None, forces=None,
                      restitution: float = 0.0, touchdowns: bool = True) -> Horizon:
    """Every record section at the N knots of a horizon (module docstring).

    q (N, nq), v (N, nv), tau (N, nj): the knots as flat vectors (State.from_vectors's). dt: the
    step (s) of Ad, Bd and the next state; None: continuous time only. contacts: sl.Contact (rigid,
    switched by the schedule) and sl.Loop (always active), as in ``linearize``. forces:
    [(sl.Contact, F)] contacts whose forces are inputs, F (dim,) for every knot or (N, dim).
    active (N, C) of bool: per knot, which contacts act, one column per sl.Contact of ``contacts``
    then one per contact of ``forces``; None: all of them at every knot. restitution: e in [0, 1]
    of the impacts at the touchdowns (with dt; as ``linearize_impact``). touchdowns: False where the
    knots are not one trajectory (states linearized together): no impacts, touchdown and its
    sections None as without dt or without rigid contacts (where no knot can touch down).

    The knots run in lockstep lanes on the worker threads, as ``linearize_batch``'s states
    (_lanes_path); where those cannot run (mimic joints, custom joints, anchored contacts, loops
    with Baumgarte stiffness, input forces that are not finite) each knot is ``linearize`` on
    the worker threads (_knot_by_knot).

    Then, with dt, the impact at each touchdown (_touchdowns: ``linearize_impact``, few per horizon).

    Raises KnotError (a ValueError; ``.knot`` its index) naming the first bad knot (a bad input, a
    singular mass matrix or contact set, an overflow, an impact that fails), ValueError for bad
    arguments."""
    Q, V, T = _knot_arrays(model, q, v, tau)
    N = Q.shape[0]
    dt = None if dt is None else check_dt(dt)
    try:
        e = check_restitution(restitution)
    except ValueError as err:
        raise ValueError(f"linearize_horizon: {err}") from None
    rigid = [c for c in contacts or () if isinstance(c, Contact)]
    loops = [c for c in contacts or () if isinstance(c, Loop)]
    other = [c for c in contacts or () if not isinstance(c, (Contact, Loop))]
    if other:
        raise ValueError(f"linearize_horizon: contacts: {other[0]!r} is neither an sl.Contact nor an sl.Loop")
    inputs = _input_forces(forces, N)
    C = len(rigid) + len(inputs)
    schedule = _schedule(active, N, C)

    nv, nj = model.nv, model.nj
    nx = 2 * nv
    rows, o = [], 0
    for c in rigid + loops:
        rows.append(slice(o, o + c.dim))
        o += c.dim
    m = o
    columns, o = [], nj
    for c, _ in inputs:
        columns.append(slice(o, o + c.dim))
        o += c.dim
    nw = o
    nq = model.nq
    touchdowns = dt is not None and touchdowns and bool(rigid)      # a knot can gain a rigid contact
    out = _allocate(N, nv, nq, nj, nx, nw, m, dt is not None, touchdowns, schedule, tuple(rows), tuple(columns))
    out.restitution = e
    if touchdowns:
        on = schedule[:, :len(rigid)]
        out.touchdown = np.zeros(N, dtype=bool)
        out.touchdown[1:] = (on[1:] & ~on[:-1]).any(axis=1)
    if N == 0:
        return out
    setup = (model, Q, V, T, dt, rigid, loops, inputs, schedule, rows, columns, out)
    if not _lanes_path(*setup):
        _knot_by_knot(*setup)
    if out.touchdown is not None:
        _touchdowns(model, V, rigid, loops, schedule, rows, out)
    return out


def _touchdowns(model, V, rigid, loops, schedule, rows, out) -> None:
    """reset, v_plus, impulses, dimpulses_dz of `out` (Horizon's docstring): at a touchdown knot k
    ``linearize_impact`` at (q_next[k-1], v_next[k-1]) with the rigid contacts acting at k and the
    loops, its impulses in their rows of ``forces``; elsewhere the identity, v_next[k-1] (v[0] at
    knot 0) and zeros. An impact that fails raises KnotError naming its knot."""
    nv, nr = model.nv, len(rigid)
    out.reset[:] = 0.0
    out.reset[:, np.arange(2 * nv), np.arange(2 * nv)] = 1.0
    out.v_plus[0] = V[0]
    out.v_plus[1:] = out.v_next[:-1]
    out.impulses.fill(0.0)
    out.dimpulses_dz.fill(0.0)
    for k in np.flatnonzero(out.touchdown).tolist():
        on = list(schedule[k, :nr]) + [True] * len(loops)
        act = [c for c, a in zip(rigid + loops, on) if a]
        held = np.concatenate([np.arange(r.start, r.stop) for r, a in zip(rows, on) if a])
        try:
            st = State.from_vectors(model, out.q_next[k - 1], out.v_next[k - 1])
            imp = linearize_impact(model, st, act, out.restitution)
        except ValueError as err:
            raise KnotError(k, f"the impact at the touchdown: {err}") from None
        out.reset[k] = imp.jacobian
        out.v_plus[k] = imp.v_plus
        out.impulses[k, held] = imp.impulses
        out.dimpulses_dz[k, held] = imp.dimpulses_dz


_BITS = np.int64(1) << np.arange(63, dtype=np.int64)     # a contact set's bits
# discrete.next_states's compiled code for the arrays the horizon passes (C-contiguous float64
# rows), called without numba's type dispatch (_jit.DirectEntry)
_NEXT_STATES = DirectEntry(next_states, np.zeros((1, 1)), np.zeros((1, 1)), np.zeros((1, 1)), 0.0, True,
                           np.zeros((1, 1)), np.zeros((1, 1)))


def _allocate(N, nv, nq, nj, nx, nw, m, with_dt, with_touchdowns, schedule, rows, columns) -> Horizon:
    """A Horizon whose arrays are views of one new buffer (one allocation: a horizon's sections,
    15 MB for 64 knots of a 50-DoF humanoid, stay in the allocator's heap between calls rather than
    going back to the system and being faulted in again); zeros where the lanes may write nothing
    (the forces and their derivatives, B's and Bd's input-force columns)."""
    shapes = [("nu_dot", (N, nv)), ("A", (N, nx, nx)), ("B", (N, nx, nw)), ("forces", (N, m)),
              ("dforces_dz", (N, m, nx)), ("dforces_dtau", (N, m, nj))]
    if with_dt:
        shapes += [("Ad", (N, nx, nx)), ("Bd", (N, nx, nw)), ("q_next", (N, nq)), ("v_next", (N, nv))]
    if with_touchdowns:
        shapes += [("reset", (N, nx, nx)), ("v_plus", (N, nv)), ("impulses", (N, m)), ("dimpulses_dz", (N, m, nx))]
    sizes = [math.prod(shape) for _, shape in shapes]
    buf = np.empty(sum(sizes))
    arrays, o = {}, 0
    for (name, shape), size in zip(shapes, sizes):
        arrays[name] = np.ndarray(shape, np.float64, buf, 8 * o)
        o += size
    for name in ("forces", "dforces_dz", "dforces_dtau") + (("B", "Bd") if nw > nj else ()):
        if name in arrays:
            arrays[name].fill(0.0)
    return Horizon(nu_dot=arrays["nu_dot"], A=arrays["A"], B=arrays["B"], Ad=arrays.get("Ad"), Bd=arrays.get("Bd"),
                   q_next=arrays.get("q_next"), v_next=arrays.get("v_next"), forces=arrays["forces"],
                   dforces_dz=arrays["dforces_dz"], dforces_dtau=arrays["dforces_dtau"], active=schedule,
                   rows=rows, columns=columns, reset=arrays.get("reset"), v_plus=arrays.get("v_plus"),
                   impulses=arrays.get("impulses"), dimpulses_dz=arrays.get("dimpulses_dz"))


def _knot(model, Q, V, T, dt, rigid, loops, inputs, schedule, rows, columns, out, i):
    """Knot i by ``linearize`` (and ``next_state``) into the Horizon `out`: the reference path, and
    the message of a knot that failed in the lanes."""
    nj, m, nr = model.nj, out.forces.shape[1], len(rigid)
    on = schedule[i]
    act = [c for c, a in zip(rigid, on[:nr]) if a]
    fin = [(c, F[i]) for (c, F), a in zip(inputs, on[nr:]) if a]
    st = State.from_vectors(model, Q[i], V[i])
    lin = linearize(model, st, T[i], contacts=act + loops or None, forces=fin or None, dt=dt)
    out.nu_dot[i] = lin.nu_dot
    out.A[i] = lin.A
    taken = np.concatenate([np.arange(nj)] + [np.arange(s.start, s.stop) for s, a in zip(columns, on[nr:]) if a])
    out.B[i] = 0.0
    out.B[i][:, taken] = lin.B
    if dt:
        out.Ad[i] = lin.Ad
        out.Bd[i] = 0.0
        out.Bd[i][:, taken] = lin.Bd
        nxt = next_state(model, st, lin.nu_dot, dt)
        out.q_next[i], out.v_next[i] = nxt.q, nxt.v
    out.forces[i] = 0.0
    out.dforces_dz[i] = 0.0
    out.dforces_dtau[i] = 0.0
    if lin.forces is not None and m:
        acting = list(on[:nr]) + [True] * len(loops)
        held = np.concatenate([np.arange(s.start, s.stop) for s, a in zip(rows, acting) if a]
                              or [np.zeros(0, dtype=int)])
        out.forces[i, held] = lin.forces
        out.dforces_dz[i, held] = lin.dforces_dz
        out.dforces_dtau[i, held] = lin.dforces_dtau


def _knot_by_knot(*setup):
    """Every knot by _knot, handed out from a shared counter to the worker threads (the compiled
    calls release the GIL). A bad knot raises, naming the first."""
    N = setup[1].shape[0]
    counter = itertools.count()
    errors = {}

    def work(_):
        while True:
            i = next(counter)
            if i >= N:
                return
            try:
                _knot(*setup, i)
            except ValueError as e:
                errors[i] = e

    contacts = setup[5] or setup[6] or setup[7]
    _run_workers(work, min(num_threads(), max(N, 1)), ("core", "contacts") if contacts else ("core",))
    if errors:
        i = min(errors)
        raise KnotError(i, str(errors[i]))


def _lanes_path(model, Q, V, T, dt, rigid, loops, inputs, schedule, rows, columns, out) -> bool:
    """The knots in lockstep lanes (batch.FreeLanes, with_contacts.ContactLanes), grouped by
    contact set: the knots with the same active rigid contacts share one contact plan (the loops
    and every input-force contact in it, an inactive input force held at zero and its columns of B,
    Bd zeroed after); without loops and input forces, the knots where no contact acts take the
    free pipeline. Each lane's A, B (Ad,
    Bd), nu_dot, forces and their derivatives go straight to the knot's place in `out`; then the
    next states of all knots in one compiled call (discrete.next_states). Returns False, with
    nothing done, where the lanes cannot run; raises naming the first bad knot."""
    N, nv, nr = Q.shape[0], model.nv, len(rigid)
    if is_coupled(model) or (rigid or loops or inputs) and not lanes_can_run(rigid + loops, inputs):
        return False
    d = get_data(model)
    if d.custom:
        return False
    on_r = schedule[:, :nr]
    if not (rigid or loops or inputs):                                 # free flight throughout
        order, starts, ends, kinds, sets = np.arange(N, dtype=np.int64), [0], [N], [-1], None
    else:                                                              # the knots, set by set
        if nr <= 62:        # a knot's set as the bits of one number; minus one: no contact is -1
            code = on_r @ _BITS[:nr]
        else:
            code = np.unique(on_r, axis=0, return_inverse=True)[1].reshape(-1)
        if not (loops or inputs):
            code = code - 1 if nr <= 62 else np.where(on_r.any(axis=1), code, -1)    # -1: free flight
        order = np.argsort(code, kind="stable")
        sorted_code = code[order]
        bounds = (np.flatnonzero(sorted_code[1:] != sorted_code[:-1]) + 1).tolist()
        starts, ends = [0] + bounds, bounds + [N]
        kinds = sorted_code[starts].tolist()
        sets = dict(zip(kinds, on_r[order[starts]]))
    free, constrained = kinds[0] < 0, kinds[-1] >= 0
    decide = (("batch",) if free else ()) + (("contacts_batch",) if constrained else ())
    decide_groups(*decide)
    width_f = lane_width() if free and compiled("batch") else 1
    width_c = lane_width() if constrained and compiled("contacts_batch") else 1
    groups = sum(-(-(e - s) // (width_c if k >= 0 else width_f)) for s, e, k in zip(starts, ends, kinds))
    nthreads = min(num_threads(), groups)
    if not constrained and not os.environ.get("SVA_LINEARIZER_NUM_THREADS", "").strip():
        nthreads = min(nthreads, max(1, N * nv * nv // THREAD_WORK))    # as linearize_batch
    fdt = dt or 0.0
    OA, OB = (out.Ad, out.Bd) if dt else (out.A, out.B)
    nuo = nu_offset(d)
    ONU = out.nu_dot.reshape((N, 1, nv))
    continuous = (out.A, out.B) if dt else (LaneExtras.NONE, LaneExtras.NONE)
    status = np.zeros(N, dtype=np.int64)                               # per position in `order`
    keys = [(c, np.zeros(c.dim)) for c, _ in inputs]
    FV = None
    if constrained:
        FV = stacked_forces(inputs, N)
        for (c, _), col, on in zip(inputs, columns, schedule[:, nr:].T):
            FV[~on, col.start - model.nj:col.stop - model.nj] = 0.0    # an inactive input force: zero
    chunks, first_bad = [], []
    for s, e, k in zip(starts, ends, kinds):
        if k < 0:
            run = FreeLanes(d, width_f, fdt, Q, V, T, order, OA, OB, LaneExtras(*continuous, ONU, nuo), status,
                            nthreads)
            width = width_f
        else:
            on = sets[k]
            act = [c for c, a in zip(rigid, on) if a] + loops
            held = [r for r, a in zip(rows, list(on) + [True] * len(loops)) if a]
            frows = np.array([j for r in held for j in range(r.start, r.stop)], dtype=np.int64)
            try:
                contact_plan(model, d, act, keys)                     # checks the contacts, names errors
            except ValueError as err:
                first_bad.append((int(order[s]), err))
                continue
            extra = LaneExtras(*continuous, ONU, nuo, out.forces.reshape((N, out.forces.shape[1], 1)),
                               out.dforces_dz, out.dforces_dtau, frows)
            run = ContactLanes(model, act, keys, width_c, fdt, Q, V, T, FV, order, OA, OB, extra, status)
            width = width_c
        step = chunk_size(e - s, width, nthreads)
        chunks += [(run, k < 0, lo, min(e, lo + step)) for lo in range(s, e, step)]
    if first_bad:
        i, err = min(first_bad, key=lambda x: x[0])
        raise KnotError(i, str(err))
    counter = itertools.count()

    def work(t):
        dd = get_data(model)                    # this thread's own Data (its contact plans)
        busy, dd._busy = dd._busy, True
        try:
            while True:
                j = next(counter)
                if j >= len(chunks):
                    return
                run, is_free, lo, hi = chunks[j]
                run(t if is_free else dd, lo, hi)
        finally:
            dd._busy = busy

    _run_workers(work, nthreads, decide)
    bad = sorted(order[np.flatnonzero(status)].tolist()) if status.any() else []
    if dt and not bad:
        try:
            (_NEXT_STATES.code or _NEXT_STATES.get())(Q, V, out.nu_dot, dt, model.floating_base, out.q_next,
                                                      out.v_next)
            if not (all_finite(out.q_next) and all_finite(out.v_next)):
                bad = np.flatnonzero(~(np.isfinite(out.q_next).all(axis=1) & np.isfinite(out.v_next).all(axis=1))
                                     ).tolist()
        except (ValueError, ArithmeticError):   # (the step's plain form on an overflowed state)
            bad = list(range(N))
    if inputs:                                  # the input-force columns of inactive contacts: zeros
        for col, on in zip(columns, schedule[:, nr:].T):
            out.B[~on, :, col] = 0.0
            if dt:
                out.Bd[~on, :, col] = 0.0
    for i in bad:                               # the first knot the reference path refuses, named
        try:
            _knot(model, Q, V, T, dt, rigid, loops, inputs, schedule, rows, columns, out, i)
        except ValueError as e:
            raise KnotError(i, str(e)) from None
    if bad:
        raise KnotError(bad[0], "the linearization failed in the lanes")
    return True
