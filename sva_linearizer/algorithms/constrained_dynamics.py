# SPDX-License-Identifier: BSD-3-Clause
"""Constrained dynamics: the forward dynamics of a robot with rigid contacts (the KKT system,
Pinocchio's constraintDynamics) and/or contact forces as given inputs. contact_rows.py defines the
contacts, their rows Jc, drifts r0 and wrenches; the equations:

    nu_free = Minv (S tau - h)              free_acceleration (EIDAmb at nu_dot = 0, then IMMAmb)
    K = Jc Minv Jc^T (the Delassus matrix), K lambda = -(Jc nu_free + r0)
    nu_dot = nu_free + Minv Jc^T lambda     constrained_acceleration (Cholesky of K)

What a call with given contacts and forces needs on a Data (the checked sets, the scratch, the
outputs of the linearization that builds on this: linearization/with_contacts.py) is one
ContactPlan: two flat buffers that plan_views carves into named views.
"""
from __future__ import annotations

from collections import namedtuple
from typing import TYPE_CHECKING

import numpy as np

from .._jit import njit
from .._arrays import real_array
from .._intrinsics import carve_view
from .._lanes import all_lanes, any_lane, matmul, zero_like
from ..data import get_data
from ..layout import kernel, views
from ..state import input_error
from .common import ABAMB_STEPS, finite_result, singular_mass_matrix_error
from .contact_rows import (NI, NP, ContactSet, check_contacts, check_forces, delassus_inverse, set_gather, set_rows,
                           set_wrench)
from .eidamb import eidamb, eidamb_entry, set_base_acceleration
from .immamb import immamb
from .kinematics import fill_custom, prepare
from .status import BAD_INPUT, CONTACTS_SINGULAR, NOT_FINITE

if TYPE_CHECKING:
    from ..model import Model
    from ..state import State

COMPILE_GROUP = "contacts"  # the compile group of this module's kernels (_jit)

# a ContactSet's arrays (contact_rows.ContactSet): per contact its ints (frame, body, reference,
# kind) and floats, its offset in buf, buf (its rows and terms), the columns its rows can touch
SetViews = namedtuple("SetViews", "ipar par offs buf cols")
# what a plan's linearization writes: A, B, the forces lambda, dlambda/dz, dlambda/dtau
Outputs = namedtuple("Outputs", "A B lam dz dtau")


@njit(inline="always", group="core")
def free_acceleration(m, d, vel, tau):
    """After prepare (and any external forces in d.fext): the bias S tau - h(q, nu) (+ the external
    forces' generalized force) from EIDAmb at nu_dot = 0, Minv (IMMAmb) and the consistent
    acceleration nu_dot = Minv bias. Returns 0 or immamb's status (M singular)."""
    nv, n, nu_dot, bias = m.nv, m.n, d.nu_dot, d.bias
    off = nv - n
    for i in range(nv):
        nu_dot[i] = 0.0
    set_base_acceleration(m, d, nu_dot)
    eidamb(m, d, vel, nu_dot, m.nb > 0)  # velocities too (a run-time bool: literals compile twice)
    for i in range(off):
        bias[i] = -d.f[0, i]
    for k in range(1, m.nb):
        bias[m.vidx[k]] = tau[k - 1] - d.tau_id[m.vidx[k]]
    status = immamb(m, d)
    if status != 0:
        return status
    for i in range(nv):
        nu_dot[i] = 0.0
    # nu_dot = Minv bias by columns: each nu_dot[i] sums in the order of a row dot product, but the
    # i loop vectorises (a row dot product is one serial chain of additions). Column c is read as
    # row c where IMMAmb mirrored it exactly (all but the base block (M^A_0)^-1, computed whole)
    Minv = d.Minv
    for c in range(off):
        b = bias[c]
        for i in range(nv):
            nu_dot[i] += Minv[i, c] * b
    for c in range(off, nv):
        b, Mc = bias[c], Minv[c]
        for i in range(nv):
            nu_dot[i] += Mc[i] * b
    return 0


DEPENDENT = 1e-10   # a row whose pivot is below this times K's largest diagonal entry is dependent


@njit(inline="always")
def _cholesky_ok(K, L, keep):
    """L L^T = K (lower L) over the independent rows, in their order: row c is dependent when its
    pivot K[c, c] - sum_k L[c, k]^2 (over the rows kept before it) is at most DEPENDENT times K's
    largest diagonal entry; it is then dropped (keep[c] = 0; an identity row and column in L, its
    entries in the kept columns computed before its pivot zeroed too, so that L L^T is K on the
    kept rows and the identity on the dropped ones). False if a pivot is
    not a number or cond(K) on the kept rows ~ (max/min pivot)^2 > 1e10. On lanes (_lanes.py) a
    row dependent in some lanes only also gives False: the group is then computed state by state."""
    n = K.shape[0]
    if n == 0:
        return True
    big = zero_like(K[0, 0])                                 # (K's number type: Lanes on lanes)
    for i in range(n):
        big = max(big, K[i, i])
        for c in range(n):
            L[i, c] = 0.0
    lo, hi = zero_like(big) + np.inf, zero_like(big)
    for c in range(n):
        acc = K[c, c]
        for k in range(c):
            acc -= L[c, k] * L[c, k]
        independent = acc > DEPENDENT * big
        if not all_lanes(independent):
            if any_lane(independent):                            # dependent in some lanes only
                return False
            if not all_lanes(acc == acc):
                return False
            if not all_lanes(big > 0.0):
                return False
            keep[c, 0] = 0.0
            for k in range(c):                               # (its entries in the kept columns: 0,
                L[c, k] = 0.0                                #  so that L^-T L^-1 is K^-1 on the kept rows)
            L[c, c] = 1.0
            continue
        keep[c, 0] = 1.0
        L[c, c] = np.sqrt(acc)
        lo, hi = min(lo, L[c, c]), max(hi, L[c, c])
        for i in range(c + 1, n):
            acc = K[i, c]
            for k in range(c):
                acc -= L[i, k] * L[c, k]
            L[i, c] = acc / L[c, c]
    return all_lanes(lo > 1e-5 * hi)


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


@njit(inline="always")
def kkt_solve(Minv, Jc, r0, nu, V1, YT, Y, K, L, Kinv, rhs, keep, lam):
    """The Delassus solve that the contact dynamics and the impacts share: for the rows Jc (m x nv)
    with the terms r0 (m x 1) and the velocity or acceleration nu that Minv maps the constraint
    forces into (in: without them, nu_free or v-; out: with them),
        Y = Minv Jc^T,  K = Jc Minv Jc^T (Cholesky: _cholesky_ok),  lambda = -K^-1 (Jc nu + r0),
        nu += Y lambda,
    the rows that _cholesky_ok drops (dependent on those before them) carrying no force and checked
    to hold: Jc nu + r0 = 0 there too. Leaves Y^T, Y, K^-1 (zero on the dropped rows' rows and
    columns) and keep (1 / 0 per row) for the derivatives; V1 (nv x 1): a copy of nu on entry; K,
    L, rhs: scratch. m = 0 leaves nu as it is. Returns 0 or CONTACTS_SINGULAR."""
    nv, mc = nu.shape[0], lam.shape[0]
    if mc == 0:
        return 0
    for i in range(nv):
        V1[i, 0] = nu[i]
    matmul(Jc, Minv, YT)                                        # Y^T = Jc Minv (Minv symmetric)
    for i in range(nv):
        for r in range(mc):
            Y[i, r] = YT[r, i]
    matmul(Jc, Y, K)                                            # K = Jc Minv Jc^T
    for i in range(mc):
        for c in range(i + 1, mc):
            K[i, c] = K[c, i] = 0.5 * (K[i, c] + K[c, i])
    if not _cholesky_ok(K, L, keep):
        return CONTACTS_SINGULAR
    _chol_inverse(L, Kinv, K)                                    # (K: scratch from here on)
    for r in range(mc):                                          # dependent rows: no force
        if any_lane(keep[r, 0] == 0.0):                           # (the same rows in every lane)
            for c in range(mc):
                Kinv[r, c] = 0.0
                Kinv[c, r] = 0.0
    matmul(Jc, V1, rhs)                                         # Jc nu
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
    for r in range(mc):                                          # the dropped rows hold as well
        if any_lane(keep[r, 0] == 0.0):
            acc, size = r0[r, 0], abs(r0[r, 0])
            for c in range(nv):
                acc += Jc[r, c] * nu[c]
                size += abs(Jc[r, c] * nu[c])
            if not all_lanes(abs(acc) <= 1e-7 * (1.0 + size)):
                return CONTACTS_SINGULAR
    return 0


def _ws_shapes(nv, n, mc, mf):
    """The shapes of the contact pipeline's scratch arrays, in the order _carve_ws returns them:
    Jc, Y^T, Y, K, L, K^-1, r0, rhs, G (D + E, then Y dlambda/dz), Jc G - Ar, Ar, B0, a vector, Jf,
    Jf Minv, B_f, Jc B_f, K^-1 Jc B_f, Y dlambda/dtau, K^-1 Y^T, the kept rows (1/0), with loops E
    and Minv E (m = mc contact rows, mf input force rows)."""
    nx = 2 * nv
    return ((mc, nv), (mc, nv), (nv, mc), (mc, mc), (mc, mc), (mc, mc), (mc, 1), (mc, 1), (nv, nx),
            (mc, nx), (mc, nx), (nx, n), (nv, 1), (mf, nv), (mf, nv), (nv, mf), (mc, mf), (mc, mf),
            (nv, n), (mc, nv), (mc, 1), (nv, nv), (nv, nv))


_ws_shapes_c = njit(inline="always")(_ws_shapes)


def workspace_size(nv: int, n: int, mc: int, mf: int) -> int:
    """Floats of the contact pipeline's workspace, allocated once per contact plan (per Data and
    contact set: ContactPlan)."""
    return sum(r * c for r, c in _ws_shapes(nv, n, mc, mf))


@njit(inline="ir")
def _take(ws, o, shape):
    return carve_view(ws, o, shape), o + shape[0] * shape[1]


@njit(inline="ir")
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
    keep, o = _take(ws, o, sh[20])
    El, o = _take(ws, o, sh[21])
    MEl, o = _take(ws, o, sh[22])
    return Jc, YT, Y, K, L, Kinv, r0, rhs, G, R2, Ar, B0, V1, Jf, BfT, Bf, T1, T2, TB, KYT, keep, El, MEl


@kernel
def constrained_acceleration(m, d, q, vel, tau, fset, fvec, cset, ws, lam):
    """The forward dynamics with contacts, one compiled call: kinematics; the input forces' rows
    and wrenches into d.fext (forces: fset, fvec); the free acceleration (free_acceleration); the
    contacts' rows at nu_dot = 0 (Jc, drift r0); the Delassus matrix K = Jc Minv Jc^T (Cholesky),
    lambda = -K^-1 (Jc nu_free + r0) into lam, nu_dot = nu_free + Minv Jc^T lambda into d.nu_dot,
    and the contact wrenches into d.fext. fset, cset: the force and contact sets' views (SetViews);
    ws: the scratch (workspace_size; its Jc, Y^T, Y, K^-1 stay there for the linearization).
    Returns 0, BAD_INPUT, immamb's status (M singular) or CONTACTS_SINGULAR."""
    if prepare(m, d, q, vel, tau) != 0:                         # also fext = 0
        return BAD_INPUT
    nv, n = m.nv, m.n
    fi, fp, fo, fbuf, fcols = fset
    ci, cp, co, cbuf, ccols = cset
    mf, mc = fvec.shape[0], lam.shape[0]
    Jc, YT, Y, K, L, Kinv, r0, rhs, G, R2, Ar, B0, V1, Jf, BfT, Bf, T1, T2, TB, KYT, keep, El, MEl = _carve_ws(
        nv, n, mc, mf, ws)
    zero = V1.reshape((nv,))                                     # nu_dot = 0 for the rows' drift
    noE = G[0:0, 0:0]
    for i in range(nv):
        zero[i] = 0.0
    if mf > 0:
        set_rows(m, d, q, vel, zero, bool(False), fi, fp, fo, fbuf, fcols)   # poses and Jacobians only
        set_wrench(nv, d.fext, d.t6[3], fi, fp, fo, fbuf, fcols, fvec, True, noE)
    status = free_acceleration(m, d, vel, tau)
    if status != 0:
        return status
    Minv, nu = d.Minv, d.nu_dot
    if mc > 0:
        set_rows(m, d, q, vel, zero, bool(False), ci, cp, co, cbuf, ccols)
        set_gather(nv, ci, co, cbuf, 0, Jc)
        set_gather(nv, ci, co, cbuf, 1, r0)
        status = kkt_solve(Minv, Jc, r0, nu, V1, YT, Y, K, L, Kinv, rhs, keep, lam)
        if status != 0:
            return status
        set_wrench(nv, d.fext, d.t6[3], ci, cp, co, cbuf, ccols, lam, True, noE)
    return 0


@njit(inline="ir")
def plan_views(nv, nj, pi, pf):
    """A ContactPlan's arrays as views of its two flat buffers (header: ContactPlan.__init__):
    (the input forces' set (SetViews), the input forces, the contacts' set, the workspace, the
    outputs (Outputs))."""
    nf, nc, mf, mc = pi[0], pi[1], pi[2], pi[3]
    o = pi[4]
    fi = carve_view(pi, o, (nf, NI))
    fo = carve_view(pi, o + NI * nf, (nf,))
    fcols = carve_view(pi, o + (NI + 1) * nf, (nf, 2 * nv))
    o = pi[5]
    ci = carve_view(pi, o, (nc, NI))
    co = carve_view(pi, o + NI * nc, (nc,))
    ccols = carve_view(pi, o + (NI + 1) * nc, (nc, 2 * nv))
    fp = carve_view(pf, pi[6], (nf, NP))
    fbuf = carve_view(pf, pi[6] + NP * nf, (pi[7],))
    cp = carve_view(pf, pi[8], (nc, NP))
    cbuf = carve_view(pf, pi[8] + NP * nc, (pi[9],))
    fvec = carve_view(pf, pi[10], (mf,))
    ws = carve_view(pf, pi[11], (pi[12],))
    A = carve_view(pf, pi[13], (2 * nv, 2 * nv))
    B = carve_view(pf, pi[14], (2 * nv, nj + mf))
    lam = carve_view(pf, pi[15], (mc,))
    dz = carve_view(pf, pi[16], (mc, 2 * nv))
    dtau = carve_view(pf, pi[17], (mc, nj))
    return (SetViews(fi, fp, fo, fbuf, fcols), fvec, SetViews(ci, cp, co, cbuf, ccols), ws,
            Outputs(A, B, lam, dz, dtau))


@njit
def constrained_entry(ib, fb, q, vel, tau, pi, pf):
    """constrained_acceleration with a plan's arrays (two buffers: few arguments to pass)."""
    m, d, _ = views(ib, fb)
    fset, fvec, cset, ws, out = plan_views(m.nv, m.n, pi, pf)
    return constrained_acceleration(m, d, q, vel, tau, fset, fvec, cset, ws, out.lam)


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
        pi[0:H] = (len(fs), len(cs), mf, mc, H, H + fni, at["fset"], fnf - NP * len(fs), at["cset"],
                   cnf - NP * len(cs), at["fvec"], at["ws"], at["A"] - at["ws"], at["A"], at["B"],
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


def contact_plan(model: Model, d, contacts, forces, impact: bool = False):
    """(ContactPlan, stacked input forces) for these contacts and forces on d. Plans are kept in d
    (at most 33, then the cache starts over) and found by the Contacts' identities (safe keys: a
    plan holds its Contacts alive); a new plan checks everything (check_contacts, check_forces
    name unknown frames and bad forces). impact=True: a plan of its own for an impact (impacts.py),
    whose rows are the constraints' without Baumgarte terms (gains and anchor errors zero)."""
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
        key = (tuple(map(id, contacts)), tuple([id(c) for c, _ in fpairs]) if fpairs else (), impact)
        plan = cache.get(key)
        if plan is not None:
            fvec = plan.force_vector(fpairs)
            if fvec is not None:
                return plan, fvec
    cs = check_contacts(model, contacts)
    fs, fvec = check_forces(model, fpairs if fpairs is not None else forces)
    plan = ContactPlan(d, cs, fs)
    if impact and plan.cset is not None:     # velocity rows: no Kp, Kd terms, no anchor
        plan.cset.par[:, 90:92] = 0.0
        plan.anchored = False
    if key is not None:
        if len(cache) > 32:
            cache.clear()
        cache[key] = plan
    return plan, fvec


def run_plan(model: Model, state: State, tau: np.ndarray, contacts, forces, data, entry, collect,
             impact: bool = False):
    """entry(ib, fb, q, v, tau, pi, pf) (constrained_entry, or the linearization's) on the Data's
    ContactPlan for these contacts and forces (impact: an impact's plan, contact_plan); errors for
    the statuses it can return but NOT_FINITE; then collect(d, plan, status) (status 0 or
    NOT_FINITE), on the Data still held for this call, gives the result."""
    d = get_data(model, data)
    plan, fvec = contact_plan(model, d, contacts, forces, impact)
    busy, d._busy = d._busy, True
    try:
        if d.custom:
            fill_custom(d, state.s)
        q, v = state.q, state.v
        cset = plan.cset
        if plan.anchored:
            if eidamb_entry(d.ib, d.fb, q, v, np.zeros(model.nv)) != 0:   # the kinematics for the poses
                raise input_error(model, q, v, tau)
            cset.anchor_errors(d, state)
        if plan.mf:
            plan.fvec[:] = fvec
        status = entry(d.ib, d.fb, q, v, tau, plan.pi, plan.pf)
        if status == BAD_INPUT:
            raise input_error(model, q, v, tau)
        if status == CONTACTS_SINGULAR:         # name the contacts (delassus_inverse raises)
            Jc = cset.stacked("Jc")
            delassus_inverse(model, cset.terms, Jc @ d.Minv @ Jc.T)
            raise ValueError("the contact constraints are too ill-conditioned to solve")
        if status != 0 and status != NOT_FINITE:
            raise singular_mass_matrix_error(model, status, d)
        return collect(d, plan, status)
    finally:
        d._busy = busy


def forward_dynamics_contacts(model: Model, state: State, tau: np.ndarray, contacts=None, forces=None,
                              data=None):
    """nu_dot with rigid contacts and/or input forces; with contacts (nu_dot, forces)."""
    def collect(d, plan, status):
        out = (d.nu_dot, plan.lam)
        return out if data is not None else tuple(x.copy() for x in out)

    nu, lam = run_plan(model, state, tau, contacts, forces, data, constrained_entry, collect)
    finite_result(model, get_data(model, data) if data is not None else None, "forward_dynamics",
                  ABAMB_STEPS, "the result (nu_dot and the contact forces)", (nu, lam),
                  q=state.q, v=state.v, tau=tau)
    nu = nu.copy() if data is not None else nu
    if contacts:
        return nu, (lam.copy() if data is not None else lam)
    return nu
