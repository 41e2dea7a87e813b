"""The linearization with contacts: rigid contacts (KKT) and/or contact forces as given inputs
(algorithms/contacts.py has the definitions and the equations). The same kernels as linearize:
stage 1 (kinematics, EIDAmb with the input forces in d.fext, IMMAmb, the free acceleration) and
stage 2 (EIDAmb at the constrained acceleration with every contact wrench applied, its IDSVA
derivatives, the assembly of A, B) are continuous.free_acceleration, derivatives_at and assemble;
with the contacts' rows and wrenches (algorithms/contacts.py) and the Delassus solve they form one
compiled call, contacts_pipeline.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._jit import borrow, carve_view, njit, real_array

COMPILE_GROUP = "contacts"  # the compile group of this module's kernels (_jit)
from ..algorithms.common import (ABAMB_STEPS, BAD_INPUT, NOT_FINITE, finite_result, not_finite,
                                 singular_mass_matrix_error)
from ..algorithms.contacts import (Contact, ContactSet, check_contacts, check_forces, delassus_inverse,
                                   set_gather, set_rows, set_wrench)
from ..algorithms.eidamb import eidamb_entry
from ..algorithms.kinematics import fill_custom, prepare
from ..data import get_data, kernel, views
from ..state import input_error
from .continuous import Linearization, assemble, derivatives_at, free_acceleration
from .discrete import check_dt, discretize
from .overflow import overflow_error

if TYPE_CHECKING:
    from ..model import Model
    from ..state import State


CONTACTS_SINGULAR = -4     # the Delassus matrix is not (numerically) positive definite


@njit(inline="always")
def _cholesky_ok(K, L):
    """L L^T = K (lower L); False if a pivot is not positive or cond(K) ~ (max/min pivot)^2 > 1e10."""
    n = K.shape[0]
    for i in range(n):
        for c in range(n):
            L[i, c] = 0.0
    lo, hi = np.inf, 0.0
    for c in range(n):
        acc = K[c, c]
        for k in range(c):
            acc -= L[c, k] * L[c, k]
        if not acc > 0.0:
            return False
        L[c, c] = np.sqrt(acc)
        lo, hi = min(lo, L[c, c]), max(hi, L[c, c])
        for i in range(c + 1, n):
            acc = K[i, c]
            for k in range(c):
                acc -= L[i, k] * L[c, k]
            L[i, c] = acc / L[c, c]
    return lo > 1e-5 * hi


@njit(inline="always")
def _chol_inverse(L, Kinv, W):
    """K^-1 = L^-T L^-1 from K's Cholesky factor L: W := L^-1 row by row (forward substitution on
    all columns at once), then K^-1 = W^T W; both loops run along rows (vectorised)."""
    n = L.shape[0]
    for i in range(n):
        for j in range(n):
            W[i, j] = 0.0
        W[i, i] = 1.0
        for k in range(i):
            a = L[i, k]
            for j in range(k + 1):                   # W is lower triangular
                W[i, j] -= a * W[k, j]
        dinv = 1.0 / L[i, i]
        for j in range(i + 1):
            W[i, j] *= dinv
    for i in range(n):
        for j in range(n):
            Kinv[i, j] = 0.0
    for k in range(n):                               # K^-1[i, j] = sum_k W[k, i] W[k, j], k >= i, j
        for i in range(k + 1):
            a = W[k, i]
            for j in range(k + 1):
                Kinv[i, j] += a * W[k, j]


def _ws_shapes(nv, n, mc, mf):
    """The shapes of contacts_pipeline's scratch arrays, in the order _carve_ws returns them:
    Jc, Y^T, Y, K, L, K^-1, r0, rhs, G (D + E, then Y dlambda/dz), Jc G - Ar, Ar, B0, a vector, Jf,
    Jf Minv, B_f, Jc B_f, K^-1 Jc B_f, Y dlambda/dtau, K^-1 Y^T (m = mc contact rows, mf input
    force rows)."""
    nx = 2 * nv
    return ((mc, nv), (mc, nv), (nv, mc), (mc, mc), (mc, mc), (mc, mc), (mc, 1), (mc, 1), (nv, nx),
            (mc, nx), (mc, nx), (nx, n), (nv, 1), (mf, nv), (mf, nv), (nv, mf), (mc, mf), (mc, mf),
            (nv, n), (mc, nv))


_ws_shapes_c = njit(inline="always")(_ws_shapes)


def workspace_size(nv: int, n: int, mc: int, mf: int) -> int:
    """Floats of contacts_pipeline's workspace, allocated once per contact plan (per Data and
    contact set: ContactPlan)."""
    return sum(r * c for r, c in _ws_shapes(nv, n, mc, mf))


@njit(inline="always")
def _take(ws, o, shape):
    return carve_view(ws, o, shape), o + shape[0] * shape[1]


@njit(inline="always")
def _carve_ws(nv, n, mc, mf, ws):
    """The pipeline's scratch arrays (_ws_shapes), views of one flat buffer."""
    sh = _ws_shapes_c(nv, n, mc, mf)
    o = 0
    Jc, o = _take(ws, o, sh[0])
    YT, o = _take(ws, o, sh[1])
    Y, o = _take(ws, o, sh[2])
    K, o = _take(ws, o, sh[3])
    L, o = _take(ws, o, sh[4])
    Kinv, o = _take(ws, o, sh[5])
    r0, o = _take(ws, o, sh[6])
    rhs, o = _take(ws, o, sh[7])
    G, o = _take(ws, o, sh[8])
    R2, o = _take(ws, o, sh[9])
    Ar, o = _take(ws, o, sh[10])
    B0, o = _take(ws, o, sh[11])
    V1, o = _take(ws, o, sh[12])
    Jf, o = _take(ws, o, sh[13])
    BfT, o = _take(ws, o, sh[14])
    Bf, o = _take(ws, o, sh[15])
    T1, o = _take(ws, o, sh[16])
    T2, o = _take(ws, o, sh[17])
    TB, o = _take(ws, o, sh[18])
    KYT, o = _take(ws, o, sh[19])
    return Jc, YT, Y, K, L, Kinv, r0, rhs, G, R2, Ar, B0, V1, Jf, BfT, Bf, T1, T2, TB, KYT


@kernel
def contacts_pipeline(m, d, q, vel, tau, fi, fp, fo, fbuf, fcols, fvec, ci, cp, co, cbuf, ccols, ws,
                      linearize, A, B, lam, dz, dtau):
    """The whole contact linearization (algorithms/contacts.py module docstring), one compiled call:
    kinematics; the input forces' rows and wrenches into d.fext; stage 1 (EIDAmb, IMMAmb, the free
    acceleration); the contacts' rows at nu_dot = 0 (Jc, drift r0); the Delassus matrix K = Jc Minv
    Jc^T (Cholesky), lambda = -K^-1 (Jc nu_free + r0), nu_dot = nu_free + Minv Jc^T lambda (in
    d.nu_dot), the contact wrenches into d.fext; with linearize: stage 2 (EIDAmb's derivatives D
    with the wrenches applied: derivatives_at), the world-aligned rotation term E added to D's z_q
    columns, A's upper blocks, -Minv (D + E) and B's Minv S (assemble), the rows' derivatives Ar
    at nu_dot, and with G = Minv (D + E) (= -assemble's lower A block) and Y = Minv Jc^T:
        dlambda/dz = K^-1 (Jc G - Ar), A_low = -G + Y dlambda/dz
        dlambda/dtau = -K^-1 Y^T S (= -K^-1 Jc Minv S), B = [Minv S + Y dlambda/dtau | B_f],
        B_f = (1 - Y K^-1 Jc) Minv Jf^T.
    The products are BLAS calls: at these sizes (m, nv <= a few dozen) a dense BLAS product is
    about twice as fast as a loop over Jc's nonzero columns, or any compiled loop. ws: the scratch
    (workspace_size); nothing is allocated. Returns 0, BAD_INPUT, immamb's status (M singular),
    CONTACTS_SINGULAR or NOT_FINITE."""
    if prepare(m, d, q, vel, tau) != 0:                         # also fext = 0
        return BAD_INPUT
    nv, n = m.nv, m.n
    off = nv - n
    nx = 2 * nv
    mf, mc = fvec.shape[0], lam.shape[0]
    Jc, YT, Y, K, L, Kinv, r0, rhs, G, R2, Ar, B0, V1, Jf, BfT, Bf, T1, T2, TB, KYT = _carve_ws(
        nv, n, mc, mf, ws)
    zero = V1.reshape((nv,))                                     # nu_dot = 0 for the rows' drift
    noE = G[0:0, 0:0]
    for i in range(nv):
        zero[i] = 0.0
    if mf > 0:
        set_rows(m, d, q, vel, zero, False, fi, fp, fo, fbuf, fcols)   # poses and Jacobians only
        set_wrench(nv, d.fext, d.t6[3], fi, fp, fo, fbuf, fcols, fvec, True, noE)
    status = free_acceleration(m, d, vel, tau)
    if status != 0:
        return status
    Minv, nu = d.Minv, d.nu_dot
    if mc > 0:
        set_rows(m, d, q, vel, zero, False, ci, cp, co, cbuf, ccols)
        set_gather(nv, ci, co, cbuf, 0, Jc)
        set_gather(nv, ci, co, cbuf, 1, r0)
        for i in range(nv):
            zero[i] = nu[i]                                      # V1 := nu_free (done with zero)
        np.dot(Jc, Minv, YT)                                    # Y^T = Jc Minv (Minv symmetric)
        for i in range(nv):
            for r in range(mc):
                Y[i, r] = YT[r, i]
        np.dot(Jc, Y, K)                                        # K = Jc Minv Jc^T
        for i in range(mc):
            for c in range(i + 1, mc):
                K[i, c] = K[c, i] = 0.5 * (K[i, c] + K[c, i])
        if not _cholesky_ok(K, L):
            return CONTACTS_SINGULAR
        _chol_inverse(L, Kinv, K)                                # (K: scratch from here on)
        np.dot(Jc, V1, rhs)                                     # Jc nu_free
        for r in range(mc):
            rhs[r, 0] += r0[r, 0]
        for r in range(mc):
            acc = 0.0
            for s in range(mc):
                acc += Kinv[r, s] * rhs[s, 0]
            lam[r] = -acc
        for i in range(nv):
            acc = 0.0
            for r in range(mc):
                acc += Y[i, r] * lam[r]
            nu[i] += acc
        set_wrench(nv, d.fext, d.t6[3], ci, cp, co, cbuf, ccols, lam, True, noE)
    if not linearize:
        return 0
    derivatives_at(m, d, vel)                                    # D with the wrenches applied
    D = d.D
    for i in range(nv):                                          # G := D (+ E)
        for c in range(nx):
            G[i, c] = D[i, c]
    wa = False                                                   # world-aligned forces turn with the links
    for i in range(fi.shape[0]):
        wa = wa or fi[i, 2] != 0
    for i in range(ci.shape[0]):
        wa = wa or ci[i, 2] != 0
    if wa:                                                       # E into G's z_q columns
        Eq = G[:, 0:nv]
        if mf > 0:
            set_wrench(nv, d.fext, d.t6[3], fi, fp, fo, fbuf, fcols, fvec, False, Eq)
        if mc > 0:
            set_wrench(nv, d.fext, d.t6[3], ci, cp, co, cbuf, ccols, lam, False, Eq)
    status = assemble(m, d, vel, G, A, B0, 0.0, A, B0)           # A_low = -Minv (D + E)
    if status != 0:
        return status
    AL = A[nv:]
    if mf > 0:                                                   # B_f = Minv Jf^T
        set_gather(nv, fi, fo, fbuf, 0, Jf)
        np.dot(Jf, Minv, BfT)
        for i in range(nv):
            for j in range(mf):
                Bf[i, j] = BfT[j, i]
    if mc > 0:
        set_rows(m, d, q, vel, nu, True, ci, cp, co, cbuf, ccols)
        set_gather(nv, ci, co, cbuf, 2, Ar)
        np.dot(Jc, AL, R2)                                      # Jc Minv (D + E) - Ar = -(Jc A_low + Ar)
        for r in range(mc):
            for c in range(nx):
                R2[r, c] = -R2[r, c] - Ar[r, c]
        np.dot(Kinv, R2, dz)
        np.dot(Kinv, YT, KYT)                                   # dlambda/dtau = -K^-1 Y^T S
        for r in range(mc):
            for j in range(n):
                dtau[r, j] = -KYT[r, off + j]
        np.dot(Y, dz, G)                                        # A_low += Y dlambda/dz
        for i in range(nv):
            for c in range(nx):
                AL[i, c] += G[i, c]
        np.dot(Y, dtau, TB)
        if mf > 0:                                               # B_f -= Y K^-1 Jc B_f
            np.dot(Jc, Bf, T1)
            np.dot(Kinv, T1, T2)
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


@njit(inline="always")
def plan_views(nv, nj, pi, pf):
    """A ContactPlan's arrays as views of its two flat buffers (header: ContactPlan.__init__): the
    input forces' set (ipar, par, offs, buf, cols), the input forces, the contacts' set, the
    workspace and the outputs A, B, lambda, dlambda/dz, dlambda/dtau."""
    nf, nc, mf, mc = pi[0], pi[1], pi[2], pi[3]
    o = pi[4]
    fi = carve_view(pi, o, (nf, 4))
    fo = carve_view(pi, o + 4 * nf, (nf,))
    fcols = carve_view(pi, o + 5 * nf, (nf, nv))
    o = pi[5]
    ci = carve_view(pi, o, (nc, 4))
    co = carve_view(pi, o + 4 * nc, (nc,))
    ccols = carve_view(pi, o + 5 * nc, (nc, nv))
    fp = carve_view(pf, pi[6], (nf, 92))
    fbuf = carve_view(pf, pi[6] + 92 * nf, (pi[7],))
    cp = carve_view(pf, pi[8], (nc, 92))
    cbuf = carve_view(pf, pi[8] + 92 * nc, (pi[9],))
    fvec = carve_view(pf, pi[10], (mf,))
    ws = carve_view(pf, pi[11], (pi[12],))
    A = carve_view(pf, pi[13], (2 * nv, 2 * nv))
    B = carve_view(pf, pi[14], (2 * nv, nj + mf))
    lam = carve_view(pf, pi[15], (mc,))
    dz = carve_view(pf, pi[16], (mc, 2 * nv))
    dtau = carve_view(pf, pi[17], (mc, nj))
    return fi, fp, fo, fbuf, fcols, fvec, ci, cp, co, cbuf, ccols, ws, A, B, lam, dz, dtau


@njit
def contacts_entry(ib, fb, q, vel, tau, pi, pf, linearize):
    """contacts_pipeline with a plan's arrays (two buffers: few arguments to pass)."""
    m, d, _ = views(ib, fb)
    fi, fp, fo, fbuf, fcols, fvec, ci, cp, co, cbuf, ccols, ws, A, B, lam, dz, dtau = plan_views(
        m.nv, m.n, pi, pf)
    return contacts_pipeline(m, d, q, vel, tau, fi, fp, fo, fbuf, fcols, fvec, ci, cp, co, cbuf, ccols,
                             ws, linearize, A, B, lam, dz, dtau)


_NO_FORCES = np.zeros(0)
_NO_FORCES.flags.writeable = False


class ContactPlan:
    """What a call with these contacts and input forces needs on one Data, built once and kept in
    the Data (found by the Contact objects' identities; Contacts are immutable): the checked
    (Contact, FrameRef) pairs packed as ContactSets, the pipeline's workspace (workspace_size) and
    its outputs, all in two flat buffers (pi: int64, pf: float64; plan_views carves them), so that
    the compiled call takes few arguments. A Data serves one call at a time (get_data), so a plan's
    buffers are never shared between threads.

    pi's header: [nf, nc (contacts in the force set / the contact set), mf, mc (their rows), the
    sets' int offsets (2), the force set's float offset and buf size, the contact set's (2),
    offsets of fvec, ws (and its size), A, B, lam, dz, dtau in pf]."""

    __slots__ = ("contacts", "force_contacts", "cset", "fset", "mc", "mf", "anchored", "dims", "pi",
                 "pf", "fvec", "A", "B", "lam", "dz", "dtau")
    HEADER = 18

    def __init__(self, d, cs, fs):
        nv, nj = d.nv, d.nj
        self.contacts = [c for c, _ in cs]          # held: their ids key the plan
        self.force_contacts = [c for c, _ in fs]
        self.dims = [c.dim for c in self.force_contacts]
        self.mc = sum(c.dim for c, _ in cs)
        self.mf = sum(self.dims)
        mc, mf = self.mc, self.mf
        (fni, fnf), (cni, cnf) = ContactSet.sizes(nv, fs), ContactSet.sizes(nv, cs)
        H = ContactPlan.HEADER
        floats = [("fset", fnf), ("cset", cnf), ("fvec", mf), ("ws", workspace_size(nv, nj, mc, mf)),
                  ("A", 4 * nv * nv), ("B", 2 * nv * (nj + mf)), ("lam", mc), ("dz", 2 * nv * mc),
                  ("dtau", mc * nj)]
        at, o = {}, 0
        for name, size in floats:
            at[name] = o
            o += size
        self.pi = pi = np.zeros(H + fni + cni, dtype=np.int64)
        self.pf = pf = np.zeros(o)
        pi[0:H] = (len(fs), len(cs), mf, mc, H, H + fni, at["fset"], fnf - 92 * len(fs), at["cset"],
                   cnf - 92 * len(cs), at["fvec"], at["ws"], at["A"] - at["ws"], at["A"], at["B"],
                   at["lam"], at["dz"], at["dtau"])
        self.fset = ContactSet(d, fs, pi[H:H + fni], pf[at["fset"]:at["fset"] + fnf]) if fs else None
        self.cset = ContactSet(d, cs, pi[H + fni:], pf[at["cset"]:at["cset"] + cnf]) if cs else None
        self.anchored = self.cset is not None and self.cset.anchored
        self.fvec = pf[at["fvec"]:at["fvec"] + mf]
        self.A = pf[at["A"]:at["B"]].reshape((2 * nv, 2 * nv))
        self.B = pf[at["B"]:at["lam"]].reshape((2 * nv, nj + mf))
        self.lam = pf[at["lam"]:at["dz"]]
        self.dz = pf[at["dz"]:at["dtau"]].reshape((mc, 2 * nv))
        self.dtau = pf[at["dtau"]:].reshape((mc, nj))

    def force_vector(self, fpairs):
        """The input forces stacked, or None when one is not `dim` finite numbers (check_forces
        then names it)."""
        if not fpairs:
            return _NO_FORCES
        parts = []
        for (_, f), dim in zip(fpairs, self.dims):
            try:
                f = real_array(f).reshape(-1)
            except (TypeError, ValueError):
                return None
            if f.shape[0] != dim:
                return None
            parts.append(f)
        fvec = np.concatenate(parts)
        return fvec if np.isfinite(fvec).all() else None


def contact_plan(model: Model, d, contacts, forces):
    """(ContactPlan, stacked input forces) for these contacts and forces on d. Plans are kept in d
    (at most 33, then the cache starts over) and found by the Contacts' identities (safe keys: a
    plan holds its Contacts alive); a new plan checks everything (check_contacts, check_forces
    name unknown frames and bad forces)."""
    cache = d.__dict__.setdefault("_contact_sets", {})      # (Data.copy drops it: per Data)
    contacts = contacts if isinstance(contacts, (list, tuple)) else list(contacts or ())
    fpairs = []
    if forces:
        try:
            fpairs = [(c, f) for c, f in forces]
        except (TypeError, ValueError):
            fpairs = None                                    # check_forces names the bad item
    key = None
    if fpairs is not None:
        key = (tuple(map(id, contacts)), tuple([id(c) for c, _ in fpairs]) if fpairs else ())
        plan = cache.get(key)
        if plan is not None:
            fvec = plan.force_vector(fpairs)
            if fvec is not None:
                return plan, fvec
    cs = check_contacts(model, contacts)
    fs, fvec = check_forces(model, fpairs if fpairs is not None else forces)
    plan = ContactPlan(d, cs, fs)
    if key is not None:
        if len(cache) > 32:
            cache.clear()
        cache[key] = plan
    return plan, fvec


def run_contacts(model: Model, state: State, tau: np.ndarray, contacts, forces, data, linearize: bool):
    """contacts_pipeline on the Data; returns (nu_dot, Minv, D, A, B, lam, dz, dtau): views into the
    caller's data (and its contact plan), overwritten by its next use, as linearize's; fresh arrays
    without data."""
    d = get_data(model, data)
    plan, fvec = contact_plan(model, d, contacts, forces)
    busy, d._busy = d._busy, True
    try:
        if d.custom:
            fill_custom(d, state.s)
        q, v = state.q, state.v
        nj = model.nj
        cset = plan.cset
        if plan.anchored:
            if eidamb_entry(d.ib, d.fb, q, v, np.zeros(model.nv)) != 0:   # the kinematics for the poses
                raise input_error(model, q, v, tau)
            cset.anchor_errors(d, state)
        if plan.mf:
            plan.fvec[:] = fvec
        status = contacts_entry(d.ib, d.fb, q, v, tau, plan.pi, plan.pf, linearize)
        if status == BAD_INPUT:
            raise input_error(model, q, v, tau)
        if status == CONTACTS_SINGULAR:         # name the contacts (delassus_inverse raises)
            Jc = cset.stacked("Jc")
            delassus_inverse(model, cset.terms, Jc @ d.Minv @ Jc.T)
            raise ValueError("the contact constraints are too ill-conditioned to solve")
        if status == NOT_FINITE:
            raise overflow_error(model, d, q, v, tau, plan.A, plan.B[:, :nj])
        if status != 0:
            raise singular_mass_matrix_error(model, status, d)
        out = (d.nu_dot, d.Minv, d.D, plan.A, plan.B, plan.lam, plan.dz, plan.dtau)
        return out if data is not None else tuple(x.copy() for x in out)
    finally:
        d._busy = busy


@njit(group="contacts_batch")
def contacts_chunk(ib, fb, Q, V, TAU, pi, pf, FV, OA, OB, status, lo, hi):
    """contacts_pipeline (linearize) for rows lo..hi-1 of Q, V, TAU (input forces FV[i]) on one
    thread's Data and contact plan (pi, pf): A, B into OA[i], OB[i], the status into status[i]."""
    m, d, _ = views(ib, fb)
    fi, fp, fo, fbuf, fcols, fvec, ci, cp, co, cbuf, ccols, ws, A, B, lam, dz, dtau = plan_views(
        m.nv, m.n, pi, pf)
    Q, V, TAU, FV, OA, OB, status = (borrow(Q), borrow(V), borrow(TAU), borrow(FV), borrow(OA),
                                     borrow(OB), borrow(status))
    for i in range(lo, hi):
        status[i] = contacts_pipeline(m, d, Q[i], V[i], TAU[i], fi, fp, fo, fbuf, fcols, FV[i], ci, cp, co,
                                      cbuf, ccols, ws, True, OA[i], OB[i], lam, dz, dtau)


def batch_contacts(model: Model, Q, V, T, OA, OB, contacts, per_state, nthreads, run_workers):
    """linearize_batch's contact path in compiled chunks: each worker thread takes chunks of states
    from a shared counter and runs contacts_chunk on its own thread-local Data and contact plan
    (the GIL released). per_state: [(Contact, F)] with F (dim,) or (N, dim). Returns False (nothing
    done) where the per-state path must run: custom joints (Python jcalc), anchored contacts
    (their errors are set per state in Python), or forces that are not finite / of the wrong
    shape (that path names them); raises the first bad state's error."""
    import itertools

    from ..state import State

    N = Q.shape[0]
    if any(isinstance(c, Contact) and c.anchor is not None for c in contacts):
        return False
    mf = 0
    for c, F in per_state:
        if (not isinstance(c, Contact) or F.ndim not in (1, 2) or F.shape[-1] != c.dim
                or not np.isfinite(F).all()):
            return False
        mf += c.dim
    FV = np.empty((N, mf))
    o = 0
    for c, F in per_state:
        FV[:, o:o + c.dim] = F
        o += c.dim
    keys = [(c, np.zeros(c.dim)) for c, _ in per_state]     # the plans' keys (values: FV)
    d0 = get_data(model)
    if d0.custom:
        return False
    contact_plan(model, d0, contacts, keys)                 # checks the contacts, names errors
    status = np.zeros(N, dtype=np.int64)
    counter = itertools.count()
    chunk = max(1, min(16, N // (8 * nthreads)))

    def work(_):
        d = get_data(model)                 # this thread's own Data, and its plan
        plan, _ = contact_plan(model, d, contacts, keys)
        busy, d._busy = d._busy, True
        try:
            while True:
                lo = next(counter) * chunk
                if lo >= N:
                    return
                contacts_chunk(d.ib, d.fb, Q, V, T, plan.pi, plan.pf, FV, OA, OB, status, lo,
                               min(N, lo + chunk))
        finally:
            d._busy = busy

    run_workers(work, nthreads, ("contacts_batch",))
    bad = np.flatnonzero(status)
    if bad.size:                            # the first bad state again, one by one, for the message
        i = int(bad[0])
        try:
            st = State.from_vectors(model, Q[i], V[i])
            linearize_contacts(model, st, T[i], contacts, _forces_row(per_state, FV, i))
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
    """sl.linearize(..., contacts=, forces=, dt=): see algorithms/contacts.py; with dt also Ad, Bd
    of the semi-implicit Euler step (discrete.py) of the constrained / forced dynamics."""
    if dt is not None:
        dt = check_dt(dt)
    nu, Minv, D, A, B, lam, dz, dtau = run_contacts(model, state, tau, contacts, forces, data, True)
    if contacts:
        lin = Linearization(A, B, nu, Minv, D, forces=lam, dforces_dz=dz, dforces_dtau=dtau)
    else:
        lin = Linearization(A, B, nu, Minv, D)
    if dt is not None:
        v_plus = state.v[0:6] + dt * nu[0:6] if model.floating_base else None
        lin.dt = dt
        lin.Ad, lin.Bd = discretize(lin.A, lin.B, dt, v_plus)
    return lin


def forward_dynamics_contacts(model: Model, state: State, tau: np.ndarray, contacts=None, forces=None,
                              data=None):
    """nu_dot with rigid contacts and/or input forces; with contacts (nu_dot, forces)."""
    nu, _, _, _, _, lam, _, _ = run_contacts(model, state, tau, contacts, forces, data, False)
    finite_result(model, get_data(model, data) if data is not None else None, "forward_dynamics",
                  ABAMB_STEPS, "the result (nu_dot and the contact forces)", (nu, lam),
                  q=state.q, v=state.v, tau=tau)
    nu = nu.copy() if data is not None else nu
    if contacts:
        return nu, (lam.copy() if data is not None else lam)
    return nu
