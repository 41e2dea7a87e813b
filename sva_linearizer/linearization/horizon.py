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
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from .._arrays import real_array
from ..algorithms.contact_rows import Contact, Loop
from .discrete import check_dt, next_state

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
    the slice of its columns in B."""
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

    def __len__(self) -> int:
        return self.A.shape[0]


def _knot_arrays(model, q, v, tau):
    arrs = []
    for name, X, size in (("q", q, model.nq), ("v", v, model.nv), ("tau", tau, model.nj)):
        try:
            X = real_array(X, f"linearize_horizon: {name}")
        except (TypeError, ValueError) as e:
            raise ValueError(f"linearize_horizon: {name} must be an (N, {size}) array of numbers ({e})") from None
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
                      contacts=(), active: ArrayLike | None = None, forces=None) -> Horizon:
    """Every record section at the N knots of a horizon (module docstring).

    q (N, nq), v (N, nv), tau (N, nj): the knots as flat vectors (State.from_vectors's). dt: the
    step (s) of Ad, Bd and the next state; None: continuous time only. contacts: sl.Contact (rigid,
    switched by the schedule) and sl.Loop (always active), as in ``linearize``. forces:
    [(sl.Contact, F)] contacts whose forces are inputs, F (dim,) for every knot or (N, dim).
    active (N, C) of bool: per knot, which contacts act, one column per sl.Contact of ``contacts``
    then one per contact of ``forces``; None: all of them at every knot.

    Raises KnotError (a ValueError; ``.knot`` its index) naming the first bad knot (a bad input, a
    singular mass matrix or contact set, an overflow), ValueError for bad arguments."""
    from ..state import State
    from .batch import _run_workers, num_threads
    from .continuous import linearize

    Q, V, T = _knot_arrays(model, q, v, tau)
    N = Q.shape[0]
    dt = None if dt is None else check_dt(dt)
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
    out = Horizon(nu_dot=np.zeros((N, nv)), A=np.zeros((N, nx, nx)), B=np.zeros((N, nx, nw)),
                  Ad=np.zeros((N, nx, nx)) if dt else None, Bd=np.zeros((N, nx, nw)) if dt else None,
                  q_next=np.zeros((N, nq)) if dt else None, v_next=np.zeros((N, nv)) if dt else None,
                  forces=np.zeros((N, m)), dforces_dz=np.zeros((N, m, nx)), dforces_dtau=np.zeros((N, m, nj)),
                  active=schedule, rows=tuple(rows), columns=tuple(columns))
    counter = itertools.count()
    errors = {}

    def knot(i):
        on = schedule[i]
        act = [c for c, a in zip(rigid, on[:len(rigid)]) if a]
        fin = [(c, F[i]) for (c, F), a in zip(inputs, on[len(rigid):]) if a]
        st = State.from_vectors(model, Q[i], V[i])
        lin = linearize(model, st, T[i], contacts=act + loops or None, forces=fin or None, dt=dt)
        out.nu_dot[i] = lin.nu_dot
        out.A[i] = lin.A
        taken = np.concatenate([np.arange(nj)] + [np.arange(s.start, s.stop)
                                                  for s, a in zip(columns, on[len(rigid):]) if a])
        out.B[i][:, taken] = lin.B
        if dt:
            out.Ad[i] = lin.Ad
            out.Bd[i][:, taken] = lin.Bd
            nxt = next_state(model, st, lin.nu_dot, dt)
            out.q_next[i], out.v_next[i] = nxt.q, nxt.v
        if lin.forces is not None and m:
            acting = list(on[:len(rigid)]) + [True] * len(loops)
            held = np.concatenate([np.arange(s.start, s.stop) for s, a in zip(rows, acting) if a]
                                  or [np.zeros(0, dtype=int)])
            out.forces[i, held] = lin.forces
            out.dforces_dz[i, held] = lin.dforces_dz
            out.dforces_dtau[i, held] = lin.dforces_dtau

    def work(_):
        while True:
            i = next(counter)
            if i >= N:
                return
            try:
                knot(i)
            except ValueError as e:
                errors[i] = e

    _run_workers(work, min(num_threads(), max(N, 1)), ("core", "contacts") if C or loops else ("core",))
    if errors:
        i = min(errors)
        raise KnotError(i, str(errors[i]))
    return out
