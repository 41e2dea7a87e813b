"""The linearization with contacts: rigid contacts (KKT) and/or contact forces as given inputs
(algorithms/contacts.py has the definitions and the equations). The same kernels as linearize:
stage 1 (kinematics, EIDAmb with the input forces in d.fext, IMMAmb, the free acceleration) and
stage 2 (EIDAmb at the constrained acceleration with every contact wrench applied, its IDSVA
derivatives, A's upper blocks) are continuous.free_acceleration / linearize_at; with the contacts'
rows and wrenches (algorithms/contacts.py), the Delassus solve and the assembly of A, B they form
one compiled call, contacts_pipeline.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .._jit import ensure_compiled, njit
from ..algorithms.common import BAD_INPUT, NOT_FINITE, singular_mass_matrix_error
from ..algorithms.contacts import (check_contacts, check_forces, contact_set, delassus_inverse,
                                   set_gather, set_rows, set_wrench)
from ..algorithms.eidamb import eidamb_entry
from ..algorithms.kinematics import fill_custom, prepare
from ..data import get_data, views
from ..state import input_error
from .continuous import Linearization, free_acceleration, linearize_at
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
def _chol_inverse(L, Kinv):
    """K^-1 from K's Cholesky factor L (column by column: L y = e_c, L^T x = y)."""
    n = L.shape[0]
    for c in range(n):
        for i in range(n):
            acc = 1.0 if i == c else 0.0
            for k in range(i):
                acc -= L[i, k] * Kinv[k, c]
            Kinv[i, c] = acc / L[i, i]
        for i in range(n - 1, -1, -1):
            acc = Kinv[i, c]
            for k in range(i + 1, n):
                acc -= L[k, i] * Kinv[k, c]
            Kinv[i, c] = acc / L[i, i]


@njit
def contacts_pipeline(m, d, q, vel, tau, fi, fp, fo, fbuf, fcols, fvec, ci, cp, co, cbuf, ccols,
                      linearize, A, B, lam, dz, dtau):
    """The whole contact linearization (algorithms/contacts.py module docstring), one compiled call:
    kinematics; the input forces' rows and wrenches into d.fext; stage 1 (EIDAmb, IMMAmb, the free
    acceleration); the contacts' rows at nu_dot = 0 (Jc, drift r0); the Delassus matrix K = Jc Minv
    Jc^T (Cholesky), lambda = -K^-1 (Jc nu_free + r0), nu_dot = nu_free + Minv Jc^T lambda (in
    d.nu_dot), the contact wrenches into d.fext; with linearize: stage 2 (EIDAmb's derivatives D
    with the wrenches applied, A's upper blocks), the world-aligned rotation term, the rows'
    derivatives Ar at nu_dot, and
        dlambda/dz = K^-1 (Y^T D - Ar), A_low = -Minv D + Y dlambda/dz, Y = Minv Jc^T
        dlambda/dtau = -K^-1 Jc Minv S, B = [Minv S + Y dlambda/dtau | B_f], B_f = (1 - Y K^-1 Jc) Minv Jf^T.
    Returns 0, BAD_INPUT, immamb's status (M singular), CONTACTS_SINGULAR or NOT_FINITE."""
    if prepare(m, d, q, vel, tau) != 0:                         # also fext = 0
        return BAD_INPUT
    nv, n = m.nv, m.n
    off = nv - n
    mf, mc = fvec.shape[0], lam.shape[0]
    zero = np.zeros(nv)
    noE = np.zeros((0, 0))
    if mf > 0:
        set_rows(m, d, q, vel, zero, False, fi, fp, fo, fbuf, fcols)   # poses and Jacobians only
        set_wrench(m, d, fi, fp, fo, fbuf, fvec, True, noE)
    status = free_acceleration(m, d, vel, tau)
    if status != 0:
        return status
    Minv, nu = d.Minv, d.nu_dot
    Jc = np.empty((mc, nv))
    Y = np.empty((nv, mc))
    Kinv = np.empty((mc, mc))
    if mc > 0:
        set_rows(m, d, q, vel, zero, False, ci, cp, co, cbuf, ccols)
        set_gather(m, ci, co, cbuf, 0, Jc)
        r0 = np.empty((mc, 1))
        set_gather(m, ci, co, cbuf, 1, r0)
        JcT = np.ascontiguousarray(Jc.T)
        Y[:, :] = np.dot(Minv, JcT)
        K = np.dot(Jc, Y)
        K = 0.5 * (K + K.T)
        L = np.empty((mc, mc))
        if not _cholesky_ok(K, L):
            return CONTACTS_SINGULAR
        _chol_inverse(L, Kinv)
        rhs = np.dot(Jc, nu)
        for i in range(mc):
            rhs[i] += r0[i, 0]
        lv = np.dot(Kinv, rhs)
        for i in range(mc):
            lam[i] = -lv[i]
        dn = np.dot(Y, lam)
        for i in range(nv):
            nu[i] += dn[i]
        set_wrench(m, d, ci, cp, co, cbuf, lam, True, noE)
    if not linearize:
        return 0
    B0 = np.empty((2 * nv, n))
    status = linearize_at(m, d, vel, A, B0, 0.0, A, B0)
    if status != 0:
        return status
    D = d.D.copy()
    E = np.zeros((nv, nv))                                       # world-aligned forces turn with the links
    if mf > 0:
        set_wrench(m, d, fi, fp, fo, fbuf, fvec, False, E)
    if mc > 0:
        set_wrench(m, d, ci, cp, co, cbuf, lam, False, E)
    for i in range(nv):
        for c in range(nv):
            D[i, c] += E[i, c]
    A_low = -np.dot(Minv, D)
    S = np.ascontiguousarray(Minv[:, off:])
    B_tau = S.copy()
    B_f = np.zeros((nv, mf))
    if mf > 0:
        Jf = np.empty((mf, nv))
        set_gather(m, fi, fo, fbuf, 0, Jf)
        B_f = np.dot(Minv, np.ascontiguousarray(Jf.T))
    if mc > 0:
        set_rows(m, d, q, vel, nu, True, ci, cp, co, cbuf, ccols)
        Ar = np.empty((mc, 2 * nv))
        set_gather(m, ci, co, cbuf, 2, Ar)
        YT = np.ascontiguousarray(Y.T)
        dz[:, :] = np.dot(Kinv, np.dot(YT, D) - Ar)
        dtau[:, :] = -np.dot(Kinv, np.dot(Jc, S))
        A_low += np.dot(Y, dz)
        B_tau += np.dot(Y, dtau)
        if mf > 0:
            B_f -= np.dot(Y, np.dot(Kinv, np.dot(Jc, B_f)))
    total = 0.0
    for i in range(nv):
        for c in range(2 * nv):
            A[nv + i, c] = A_low[i, c]
            total += A_low[i, c]
        for c in range(n + mf):
            B[i, c] = 0.0
            B[nv + i, c] = B_tau[i, c] if c < n else B_f[i, c - n]
            total += B[nv + i, c]
    if not math.isfinite(total):
        return NOT_FINITE
    return 0


@njit
def contacts_entry(ib, fb, q, vel, tau, fi, fp, fo, fbuf, fcols, fvec, ci, cp, co, cbuf, ccols,
                   linearize, A, B, lam, dz, dtau):
    m, d, _ = views(ib, fb)
    return contacts_pipeline(m, d, q, vel, tau, fi, fp, fo, fbuf, fcols, fvec, ci, cp, co, cbuf, ccols,
                             linearize, A, B, lam, dz, dtau)


_EMPTY = (np.zeros((0, 3), dtype=np.int64), np.zeros((0, 92)), np.zeros(0, dtype=np.int64), np.zeros(0),
          np.zeros((0, 1), dtype=np.int64))


def _set_arrays(cset):
    if cset is None:
        return _EMPTY
    return cset.ipar, cset.par, cset.offs, cset.buf, cset.cols


def run_contacts(model: Model, state: State, tau: np.ndarray, contacts, forces, data, linearize: bool):
    """contacts_pipeline on the Data; returns (d, A, B, lam, dz, dtau) (arrays fresh)."""
    ensure_compiled("contacts")
    cs = check_contacts(model, contacts)
    fs, fvec = check_forces(model, forces)
    d = get_data(model, data)
    busy, d._busy = d._busy, True
    try:
        if d.custom:
            fill_custom(d, state.s)
        q, v = state.q, state.v
        nv, nj = model.nv, model.nj
        fset = contact_set(d, fs) if fs else None
        cset = contact_set(d, cs) if cs else None
        if (fset is not None and fset.anchored) or (cset is not None and cset.anchored):
            if eidamb_entry(d.ib, d.fb, q, v, np.zeros(nv)) != 0:   # the kinematics for the poses
                raise input_error(model, q, v, tau)
            if cset is not None:
                cset.anchor_errors(d, state)
        mc, mf = (cset.m if cset else 0), fvec.size
        A = np.empty((2 * nv, 2 * nv))
        B = np.empty((2 * nv, nj + mf))
        lam, dz, dtau = np.empty(mc), np.empty((mc, 2 * nv)), np.empty((mc, nj))
        status = contacts_entry(d.ib, d.fb, q, v, tau, *_set_arrays(fset), fvec, *_set_arrays(cset),
                                linearize, A, B, lam, dz, dtau)
        if status == BAD_INPUT:
            raise input_error(model, q, v, tau)
        if status == CONTACTS_SINGULAR:         # name the contacts (delassus_inverse raises)
            Jc = cset.stacked("Jc")
            delassus_inverse(model, cset.terms, Jc @ d.Minv @ Jc.T)
            raise ValueError("the contact constraints are too ill-conditioned to solve")
        if status == NOT_FINITE:
            raise overflow_error(model, d, q, v, tau, A, B[:, :nj])
        if status != 0:
            raise singular_mass_matrix_error(model, status, d)
        return d.nu_dot.copy(), d.Minv.copy(), d.D.copy(), A, B, lam, dz, dtau
    finally:
        d._busy = busy


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
    if contacts:
        return nu, lam
    return nu
