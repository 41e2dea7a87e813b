# SPDX-License-Identifier: BSD-3-Clause
"""The linearization with contacts: rigid contacts (KKT) and/or contact forces as given inputs
(algorithms/contact_rows.py has the definitions and the equations). One compiled call,
contacts_pipeline: the constrained acceleration (algorithms/constrained_dynamics.py), then EIDAmb at
that acceleration with every contact wrench applied, its IDSVA derivatives and the assembly of A, B
(assembly.py), and the derivatives of the contact forces (the implicit-function theorem).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._jit import compiled, decide_groups, direct_cached, njit
from .._intrinsics import borrow
from .._lanes import (LaneExtras, aligned_empty, as_lanes, chunk_size, copy_out, copy_rows, interleave,
                      lane_width, matmul, redo_failed_groups)

COMPILE_GROUP = "contacts"  # the compile group of this module's kernels (_jit)
from ..algorithms.common import not_finite
from ..algorithms.constrained_dynamics import (_carve_ws, constrained_acceleration, contact_plan,
                                               plan_views, run_plan)
from ..algorithms.contact_rows import Contact, Loop, set_gather, set_rows, set_wrench
from ..algorithms.status import LANES_FAILED, NOT_FINITE
from ..data import get_data
from ..layout import kernel, views
from .assembly import Linearization, assemble, derivatives_at, discrete_at
from .discrete import check_dt
from .overflow import overflow_error

if TYPE_CHECKING:
    from ..model import Model
    from ..state import State


@njit(inline="always")
def with_rotation_terms(d, fset, fvec, cset, lam, G, El, MEl):
    """G := d.D plus E, the derivative of the wrenches of the input forces (fset, fvec) and of the
    constraint forces lam (cset) that EIDAmb's derivatives (forces fixed in the body) miss: forces
    held in world axes turn with their link, a loop's reaction with both its frames
    (contact_rows.set_wrench); E enters G's z_q columns. With loops the constraints' E is kept
    apart instead, El := E and MEl := Minv E: a loop's E couples its two branches, outside the
    support of D that assemble's sparse product -Minv G relies on. Returns whether there are
    loops (the caller subtracts MEl from -Minv G's z_q columns)."""
    fi, fp, fo, fbuf, fcols = fset
    ci, cp, co, cbuf, ccols = cset
    nv, nx, D = G.shape[0], G.shape[1], d.D
    mf, mc = fvec.shape[0], lam.shape[0]
    for i in range(nv):
        for c in range(nx):
            G[i, c] = D[i, c]
    wa = False                                                   # world-aligned forces turn with the links
    loops = False                                                # (a loop's reaction turns with both frames)
    for i in range(fi.shape[0]):
        wa = wa or fi[i, 2] != 0
    for i in range(ci.shape[0]):
        wa = wa or ci[i, 2] != 0 or ci[i, 4] != 0
        loops = loops or ci[i, 4] != 0
    if wa:                                                       # E into G's z_q columns
        Eq = G[:, 0:nv]
        if mf > 0:
            set_wrench(nv, d.fext, d.t6[3], fi, fp, fo, fbuf, fcols, fvec, False, Eq)
        if mc > 0 and not loops:
            set_wrench(nv, d.fext, d.t6[3], ci, cp, co, cbuf, ccols, lam, False, Eq)
    if loops:
        for i in range(nv):
            for c in range(nv):
                El[i, c] = 0.0
        set_wrench(nv, d.fext, d.t6[3], ci, cp, co, cbuf, ccols, lam, False, El)
        matmul(d.Minv, El, MEl)
    return loops


@kernel
def contacts_pipeline(m, d, q, vel, tau, fset, fvec, cset, ws, out):
    """The whole contact linearization (algorithms/contact_rows.py module docstring), one compiled
    call: the constrained acceleration (algorithms/constrained_dynamics.py: kinematics, the input
    forces, the free acceleration, the KKT solve, lambda into out.lam); then stage 2 (EIDAmb's derivatives D
    with the wrenches applied: derivatives_at), the world-aligned rotation term E added to D's z_q
    columns, A's upper blocks, -Minv (D + E) and B's Minv S (assemble), the rows' derivatives Ar
    at nu_dot, and with G = Minv (D + E) (= -assemble's lower A block) and Y = Minv Jc^T:
        dlambda/dz = K^-1 (Jc G - Ar), A_low = -G + Y dlambda/dz
        dlambda/dtau = -K^-1 Y^T S (= -K^-1 Jc Minv S), B = [Minv S + Y dlambda/dtau | B_f],
        B_f = (1 - Y K^-1 Jc) Minv Jf^T.
    The products are _lanes.matmul: BLAS calls for one state (at these sizes, m, nv <= a few
    dozen, a dense BLAS product is about twice as fast as a loop over Jc's nonzero columns, or
    any compiled loop), loops on lanes (contacts_lanes). ws: the scratch
    (workspace_size); out: A, B, lam, dz, dtau (Outputs); nothing is allocated. Returns 0, BAD_INPUT,
    immamb's status (M singular),
    CONTACTS_SINGULAR or NOT_FINITE."""
    status = constrained_acceleration(m, d, q, vel, tau, fset, fvec, cset, ws, out.lam)
    if status != 0:
        return status
    fi, fp, fo, fbuf, fcols = fset
    ci, cp, co, cbuf, ccols = cset
    A, B, lam, dz, dtau = out
    nv, n = m.nv, m.n
    off = nv - n
    nx = 2 * nv
    mf, mc = fvec.shape[0], lam.shape[0]
    Jc, YT, Y, K, L, Kinv, r0, rhs, G, R2, Ar, B0, V1, Jf, BfT, Bf, T1, T2, TB, KYT, keep, El, MEl = _carve_ws(
        nv, n, mc, mf, ws)
    Minv, nu = d.Minv, d.nu_dot
    derivatives_at(m, d, vel)                                    # D with the wrenches applied
    loops = with_rotation_terms(d, fset, fvec, cset, lam, G, El, MEl)   # G := D (+ E)
    status = assemble(m, d, vel, G, A, B0, 0.0, A, B0)           # A_low = -Minv (D + E)
    if status != 0:
        return status
    AL = A[nv:]
    if loops:
        for i in range(nv):
            for c in range(nv):
                AL[i, c] -= MEl[i, c]
    if mf > 0:                                                   # B_f = Minv Jf^T
        set_gather(nv, fi, fo, fbuf, 0, Jf)
        matmul(Jf, Minv, BfT)
        for i in range(nv):
            for j in range(mf):
                Bf[i, j] = BfT[j, i]
    if mc > 0:
        set_rows(m, d, q, vel, nu, bool(True), ci, cp, co, cbuf, ccols)   # bool(): a run-time flag (set_rows)
        set_gather(nv, ci, co, cbuf, 2, Ar)
        matmul(Jc, AL, R2)                                      # Jc Minv (D + E) - Ar = -(Jc A_low + Ar)
        for r in range(mc):
            for c in range(nx):
                R2[r, c] = -R2[r, c] - Ar[r, c]
        matmul(Kinv, R2, dz)
        matmul(Kinv, YT, KYT)                                   # dlambda/dtau = -K^-1 Y^T S
        for r in range(mc):
            for j in range(n):
                dtau[r, j] = -KYT[r, off + j]
        matmul(Y, dz, G)                                        # A_low += Y dlambda/dz
        for i in range(nv):
            for c in range(nx):
                AL[i, c] += G[i, c]
        matmul(Y, dtau, TB)
        if mf > 0:                                               # B_f -= Y K^-1 Jc B_f
            matmul(Jc, Bf, T1)
            matmul(Kinv, T1, T2)
            for i in range(nv):
                for j in range(mf):
                    acc = 0.0
                    for r in range(mc):
                        acc += Y[i, r] * T2[r, j]
                    Bf[i, j] -= acc
    else:
        for i in range(nv):
            for c in range(n):
                TB[i, c] = 0.0
    bad = False                                                 # some result overflowed
    for i in range(nv):
        for c in range(nx):
            bad |= not_finite(AL[i, c])
        for c in range(n + mf):
            B[i, c] = 0.0
        for c in range(n):
            x = B0[nv + i, c] + TB[i, c]
            B[nv + i, c] = x
            bad |= not_finite(x)
        for j in range(mf):
            B[nv + i, n + j] = Bf[i, j]
            bad |= not_finite(Bf[i, j])
    if bad:
        return NOT_FINITE
    return 0




@njit
def contacts_entry(ib, fb, q, vel, tau, pi, pf, dt, Ad, Bd):
    """contacts_pipeline with a plan's arrays (two buffers: few arguments to pass); with dt > 0
    also Ad, Bd of the discrete step from the plan's A, B (assembly.discrete_at)."""
    m, d, _ = views(ib, fb)
    fset, fvec, cset, ws, out = plan_views(m.nv, m.n, pi, pf)
    status = contacts_pipeline(m, d, q, vel, tau, fset, fvec, cset, ws, out)
    if status != 0 or dt <= 0.0:
        return status
    return discrete_at(m, d, vel, out.A, out.B, dt, Ad, Bd)


_NO_ARRAY = np.empty((0, 0))    # Ad, Bd of contacts_entry without dt


def run_contacts(model: Model, state: State, tau: np.ndarray, contacts, forces, data, dt: float = 0.0):
    """contacts_pipeline on the Data; returns (nu_dot, Minv, D, A, B, lam, dz, dtau, Ad, Bd): views
    into the caller's data (and its contact plan), overwritten by its next use, as linearize's;
    fresh arrays without data. Ad, Bd: new arrays with dt > 0, else None."""
    nx = 2 * model.nv
    discrete = []                           # Ad, Bd with dt

    def entry(ib, fb, q, v, tau, pi, pf):
        if dt <= 0.0:
            return contacts_entry(ib, fb, q, v, tau, pi, pf, 0.0, _NO_ARRAY, _NO_ARRAY)
        discrete[:] = np.empty((nx, nx)), np.empty((nx, model.nj + int(pi[2])))   # pi[2]: the input forces' rows
        return contacts_entry(ib, fb, q, v, tau, pi, pf, dt, *discrete)

    def collect(d, plan, status):
        if status == NOT_FINITE:
            raise overflow_error(model, d, state.q, state.v, tau, plan.A, plan.B[:, :model.nj])
        out = (d.nu_dot, d.Minv, d.D, plan.A, plan.B, plan.lam, plan.dz, plan.dtau)
        return (out if data is not None else tuple(x.copy() for x in out)) + (tuple(discrete) or (None, None))

    return run_plan(model, state, tau, contacts, forces, data, entry, collect)


def contacts_one_by_one(d, plan, Q, V, TAU, FV, idx, OA, OB, status, dt, lo, hi, extra=None):
    """contacts_entry, the compiled one-state contact pipeline, called from Python for positions
    lo..hi-1 (the states i = idx[p] of Q, V, TAU, input forces FV[i]) on a thread's own Data and
    contact plan: A, B (with dt > 0: Ad, Bd) into OA[i], OB[i], the status into status[p]; extra
    (_lanes.LaneExtras): more of each state's results. The batch while contacts_lanes is not
    compiled, and a lockstep group that failed (_lanes.redo_failed_groups)."""
    for p in range(lo, hi):
        i = idx[p]
        if plan.mf:
            plan.fvec[:] = FV[i]
        if dt > 0.0:
            status[p] = contacts_entry(d.ib, d.fb, Q[i], V[i], TAU[i], plan.pi, plan.pf, dt, OA[i], OB[i])
        else:
            status[p] = contacts_entry(d.ib, d.fb, Q[i], V[i], TAU[i], plan.pi, plan.pf, 0.0, _NO_ARRAY,
                                       _NO_ARRAY)
            if status[p] == 0:
                OA[i] = plan.A
                OB[i] = plan.B
        if extra is not None and status[p] == 0:
            extra.one(i, d.fb, plan.A, plan.B, dt, plan)


@njit(group="contacts_batch")
def contacts_lanes(ib, fbl, tag, pi, pfl, Q, V, TAU, FV, idx, OA, OB, OAc, OBc, ONU, nuo, OLAM, ODZ, ODTAU, rows,
                   status, dt, lo, hi, QL, VL, TL, FL, ADL, BDL):
    """contacts_pipeline for positions lo..hi-1 (the states i = idx[p] of Q, V, TAU, FV and of the
    outputs) in lockstep groups of L = len(tag) (_lanes.py; as batch.batch_lanes): each group's q,
    v, tau and input forces interleaved into QL, VL, TL, FL (..., L), the pipeline on the lane
    workspace fbl and the lane plan pfl (the Data's and the plan's floats in every lane), each
    lane's A, B (with dt > 0: Ad, Bd, in ADL, BDL) copied out to OA[i], OB[i]. Where asked for
    (not empty: _lanes.LaneExtras): with dt the continuous A, B to OAc[i], OBc[i], nu_dot to
    ONU[i, 0] (nuo: its offset in fbl), the forces and their derivatives to OLAM[i, rows, 0],
    ODZ[i, rows], ODTAU[i, rows]. Returns the number of groups that failed (a bad state,
    dependent rows in some lanes only, an overflow): their positions' status is LANES_FAILED,
    and ContactLanes computes them one by one (contacts_one_by_one)."""
    Q, V, TAU, FV, idx, OA, OB, status = (borrow(Q), borrow(V), borrow(TAU), borrow(FV), borrow(idx), borrow(OA),
                                          borrow(OB), borrow(status))
    OAc, OBc, ONU, OLAM, ODZ, ODTAU = borrow(OAc), borrow(OBc), borrow(ONU), borrow(OLAM), borrow(ODZ), borrow(ODTAU)
    width = len(tag)
    ml, dl, _ = views(ib, as_lanes(fbl, tag))
    fset, _, cset, ws, out = plan_views(ml.nv, ml.n, pi, as_lanes(pfl, tag))
    q, v, tau, fv = as_lanes(QL, tag), as_lanes(VL, tag), as_lanes(TL, tag), as_lanes(FL, tag)
    Ad, Bd = as_lanes(ADL, tag), as_lanes(BDL, tag)
    nx, nb = 2 * ml.nv, out.B.shape[1]
    mc, nj = out.dz.shape[0], out.dtau.shape[1]
    AL = pfl[pi[13]:pi[13] + nx * nx].reshape((nx, nx, width))     # out.A, out.B as floats
    BL = pfl[pi[14]:pi[14] + nx * nb].reshape((nx, nb, width))
    LL = pfl[pi[15]:pi[15] + mc].reshape((mc, 1, width))           # lam, dz, dtau as floats
    DZL = pfl[pi[16]:pi[16] + mc * nx].reshape((mc, nx, width))
    DTL = pfl[pi[17]:pi[17] + mc * nj].reshape((mc, nj, width))
    NUL = fbl[nuo:nuo + ml.nv].reshape((1, ml.nv, width))          # nu_dot, as floats and as Lanes
    nu = as_lanes(NUL, tag)
    failed = 0
    for g in range(lo, hi, width):
        gh = min(hi, g + width)
        interleave(Q, QL, idx, g, gh)
        interleave(V, VL, idx, g, gh)
        interleave(TAU, TL, idx, g, gh)
        interleave(FV, FL, idx, g, gh)
        st = contacts_pipeline(ml, dl, q, v, tau, fset, fv, cset, ws, out)
        if st == 0 and dt > 0.0:
            st = discrete_at(ml, dl, v, out.A, out.B, dt, Ad, Bd)
        if st != 0:
            for p in range(g, gh):
                status[p] = LANES_FAILED
            failed += 1
            continue
        for lane in range(gh - g):
            status[g + lane] = 0
        if dt > 0.0:
            copy_out(ADL, Ad, OA, idx, g, gh)
            copy_out(BDL, Bd, OB, idx, g, gh)
            if OAc.shape[0] > 0:
                copy_out(AL, out.A, OAc, idx, g, gh)
                copy_out(BL, out.B, OBc, idx, g, gh)
        else:
            copy_out(AL, out.A, OA, idx, g, gh)
            copy_out(BL, out.B, OB, idx, g, gh)
        if ONU.shape[0] > 0:
            copy_out(NUL, nu, ONU, idx, g, gh)
        if OLAM.shape[0] > 0:
            copy_rows(LL, OLAM, idx, rows, g, gh)
            copy_rows(DZL, ODZ, idx, rows, g, gh)
            copy_rows(DTL, ODTAU, idx, rows, g, gh)
    return failed


class _ContactLanes:
    """One thread's buffers for contacts_lanes at lane width L: fbl, pfl, the Data's and the
    plan's floats in every lane (the workspaces the pipeline overwrites, the model and the
    contacts' numbers it reads); arrays, the interleaved q, v, tau and input forces, and with dt
    the lanes' Ad, Bd."""

    def __init__(self, d, plan, width, with_dt):
        self.plan = plan                    # held: the cache below is keyed by its identity
        self.fbl = aligned_empty((d.fb.shape[0], width), width)
        self.fbl[:] = d.fb[:, None]
        self.pfl = aligned_empty((plan.pf.shape[0], width), width)
        self.pfl[:] = plan.pf[:, None]
        nq = d.nv + (1 if d.floating_base else 0)
        nx, nb = 2 * d.nv, d.nj + plan.mf
        shapes = [(nq, width), (d.nv, width), (d.nj, width), (plan.mf, width)]
        shapes += [(nx, nx, width), (nx, nb, width)] if with_dt else [(0, 0, width), (0, 0, width)]
        self.arrays = tuple(aligned_empty(s, width) for s in shapes)


def _contact_lanes(d, plan, width, with_dt):
    """The _ContactLanes of this Data and plan (kept on d, the calling thread's own Data)."""
    cache = d.__dict__.setdefault("_contact_lanes", {})
    key = (id(plan), width, with_dt)
    ws = cache.get(key)
    if ws is None or ws.plan is not plan:
        if len(cache) > 8:
            cache.clear()
        ws = cache[key] = _ContactLanes(d, plan, width, with_dt)
    return ws


def lanes_can_run(contacts, per_state) -> bool:
    """Whether the compiled contact path can take these contacts and input forces [(Contact, F)]:
    not with anchored contacts or loops with Baumgarte stiffness (their errors are set per state
    in Python), nor with input forces that are not finite or of the wrong shape (the per-state
    path names them). Custom joints are the Data's (d.custom)."""
    if any(isinstance(c, Contact) and c.anchor is not None or isinstance(c, Loop) and c.baumgarte[0] != 0.0
           for c in contacts):                              # errors set per state (anchor_errors)
        return False
    for c, F in per_state:
        if (not isinstance(c, Contact) or F.ndim not in (1, 2) or F.shape[-1] != c.dim
                or not np.isfinite(F).all()):
            return False
    return True


def stacked_forces(per_state, N):
    """The input forces [(Contact, F (dim,) or (N, dim))] as one (N, mf) array, in order."""
    FV = np.empty((N, sum(c.dim for c, _ in per_state)))
    o = 0
    for c, F in per_state:
        FV[:, o:o + c.dim] = F
        o += c.dim
    return FV


class ContactLanes:
    """contacts_pipeline with these contacts and input-force contacts (keys: [(Contact, zeros)], the
    plan's keys; the values FV (N, mf)) for the positions p of idx (the states idx[p] of Q, V, T,
    FV and of the outputs OA, OB and `extra`, a _lanes.LaneExtras) at lane width L (1: one state
    at a time, while contacts_lanes is not compiled): run(d, lo, hi) computes positions lo..hi-1 on
    a worker thread's own Data d (get_data) and its plan, status[p] set; a failed lockstep group
    again state by state."""

    def __init__(self, model, contacts, keys, width, dt, Q, V, T, FV, idx, OA, OB, extra, status):
        self.model, self.contacts, self.keys, self.width, self.dt = model, contacts, keys, width, dt
        self.Q, self.V, self.T, self.FV, self.idx, self.OA, self.OB = Q, V, T, FV, idx, OA, OB
        self.extra, self.status = extra, status
        self.tag = (0.0,) * width
        self._at = {}                       # id(Data) -> (Data, its plan, its lane buffers)

    def __call__(self, d, lo, hi):
        at = self._at.get(id(d))
        if at is None or at[0] is not d:
            plan, _ = contact_plan(self.model, d, self.contacts, self.keys)
            at = self._at[id(d)] = (d, plan, _contact_lanes(d, plan, self.width, self.dt > 0.0)
                                    if self.width > 1 else None)
        _, plan, lanes = at
        e, dt = self.extra, self.dt

        def one_by_one(a, b):
            contacts_one_by_one(d, plan, self.Q, self.V, self.T, self.FV, self.idx, self.OA, self.OB, self.status,
                                dt, a, b, e)

        if lanes is None:
            one_by_one(lo, hi)
            return
        args = (d.ib, lanes.fbl, self.tag, plan.pi, lanes.pfl, self.Q, self.V, self.T, self.FV, self.idx, self.OA,
                self.OB, e.OAc, e.OBc, e.ONU, e.nuo, e.OLAM, e.ODZ, e.ODTAU, e.rows, self.status, dt, lo,
                hi) + lanes.arrays
        if _lanes_entry(self.width, args)(*args):
            redo_failed_groups(self.status, lo, hi, self.width, one_by_one)


_LANES_ENTRY: dict = {}     # lane width -> contacts_lanes's compiled code without dispatch (_jit.direct)


def _lanes_entry(width, args):
    """contacts_lanes for its one signature at this width (what ContactLanes passes: kernel_array's
    and _out_arrays' C-contiguous float64, int64 positions and rows, the plan's and the lane
    buffers' arrays), called without numba's type dispatch (~0.1 us for each of its 30
    arguments)."""
    return direct_cached(_LANES_ENTRY, width, contacts_lanes, *args)


def batch_contacts(model: Model, Q, V, T, OA, OB, contacts, per_state, nthreads, run_workers, dt=0.0):
    """linearize_batch's contact path in compiled chunks: each worker thread takes chunks of states
    from a shared counter and runs them on its own thread-local Data and contact plan (the GIL
    released): contacts_lanes in lockstep groups of L, or while the contacts_batch group is not
    compiled, contacts_one_by_one state by state (ContactLanes). A, B into OA, OB; with dt > 0,
    Ad, Bd. per_state: [(Contact, F)] with F (dim,) or (N, dim). Returns False (nothing done)
    where the per-state path must run: custom joints (Python jcalc), anchored contacts (their
    errors are set per state in Python), or forces that are not finite / of the wrong shape
    (that path names them: lanes_can_run); raises the first bad state's error."""
    import itertools

    from ..state import State

    N = Q.shape[0]
    if not lanes_can_run(contacts, per_state):
        return False
    FV = stacked_forces(per_state, N)
    keys = [(c, np.zeros(c.dim)) for c, _ in per_state]     # the plans' keys (values: FV)
    d0 = get_data(model)
    if d0.custom:
        return False
    contact_plan(model, d0, contacts, keys)                 # checks the contacts, names errors
    status = np.zeros(N, dtype=np.int64)
    counter = itertools.count()
    decide_groups("contacts_batch")
    width = lane_width() if compiled("contacts_batch") else 1
    chunk = chunk_size(N, width, nthreads)
    run = ContactLanes(model, contacts, keys, width, dt, Q, V, T, FV, np.arange(N, dtype=np.int64), OA, OB,
                       LaneExtras.none(), status)

    def work(_):
        d = get_data(model)                 # this thread's own Data, and its plan
        busy, d._busy = d._busy, True
        try:
            while True:
                lo = next(counter) * chunk
                if lo >= N:
                    return
                run(d, lo, min(N, lo + chunk))
        finally:
            d._busy = busy

    run_workers(work, nthreads, ("contacts_batch",))
    bad = np.flatnonzero(status)
    if bad.size:                            # the first bad state again, one by one, for the message
        i = int(bad[0])
        try:
            st = State.from_vectors(model, Q[i], V[i])
            linearize_contacts(model, st, T[i], contacts, _forces_row(per_state, FV, i), dt=dt or None)
        except ValueError as e:
            raise ValueError(f"linearize_batch: state {i}: {e}") from None
        raise ValueError(f"linearize_batch: state {i}: the contact linearization failed (status "
                         f"{int(status[i])})")
    return True


def _forces_row(per_state, FV, i):
    out, o = [], 0
    for c, _ in per_state:
        out.append((c, FV[i, o:o + c.dim]))
        o += c.dim
    return out or None


def linearize_contacts(model: Model, state: State, tau: np.ndarray, contacts, forces,
                       data=None, dt: float | None = None) -> Linearization:
    """sl.linearize(..., contacts=, forces=, dt=): see algorithms/contact_rows.py; with dt also Ad, Bd
    of the semi-implicit Euler step (discrete.py) of the constrained / forced dynamics."""
    if dt is not None:
        dt = check_dt(dt)
    nu, Minv, D, A, B, lam, dz, dtau, Ad, Bd = run_contacts(model, state, tau, contacts, forces, data,
                                                          dt or 0.0)
    if contacts:
        lin = Linearization(A, B, nu, Minv, D, forces=lam, dforces_dz=dz, dforces_dtau=dtau)
    else:
        lin = Linearization(A, B, nu, Minv, D)
    if dt is not None:
        lin.dt, lin.Ad, lin.Bd = dt, Ad, Bd
    return lin
