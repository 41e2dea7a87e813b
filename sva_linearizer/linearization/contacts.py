"""The linearization with contacts: rigid contacts (KKT) and/or contact forces as given inputs
(algorithms/contacts.py has the definitions and the equations). The same kernels as linearize:
stage 1 (kinematics, EIDAmb with the input forces in d.fext, IMMAmb, the free acceleration) and
stage 2 (EIDAmb at the constrained acceleration with every contact wrench applied, its IDSVA
derivatives, A's upper blocks) are continuous.free_acceleration / linearize_at; the contacts' rows
(pose, Jc, residual and its derivatives) and wrenches are one compiled call per contact set
(algorithms/contacts.py ContactSet); the m x m Delassus algebra and the assembly are numpy products.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._jit import njit
from ..algorithms.common import BAD_INPUT, singular_mass_matrix_error
from ..algorithms.contacts import check_contacts, check_forces, contact_set, delassus_inverse
from ..algorithms.eidamb import eidamb_entry
from ..algorithms.kinematics import fill_custom, prepare
from ..data import get_data, views
from ..state import QUATERNION_TOLERANCE, check_vectors, input_error
from .continuous import Linearization, free_acceleration, linearize_at
from .discrete import check_dt, discretize
from .overflow import overflow_error

if TYPE_CHECKING:
    from ..model import Model
    from ..state import State


@njit
def stage1_entry(ib, fb, q, vel, tau, fext):
    """Kinematics, the external wrenches fext (nb x 6, body frames), then the free acceleration."""
    m, d, _ = views(ib, fb)
    if check_vectors(q, vel, tau, m.floating, QUATERNION_TOLERANCE) == 1:
        return BAD_INPUT
    prepare(m, d, q, vel)
    for k in range(m.nb):
        for i in range(6):
            d.fext[k, i] = fext[k, i]
    return free_acceleration(m, d, vel, tau)


@njit
def stage2_entry(ib, fb, vel, A, B):
    """EIDAmb at d.nu_dot with d.fext, its derivatives, A = [[-ad v, I], [-Minv D]], B."""
    m, d, _ = views(ib, fb)
    return linearize_at(m, d, vel, A, B, 0.0, A, B)


class _Solved:
    __slots__ = ("d", "nu_dot", "Minv", "fset", "fvec", "cset", "lam", "K", "Kinv", "Y", "Jc")


def solve_contacts(model: Model, state: State, tau: np.ndarray, contacts, forces, data=None) -> _Solved:
    """Stage 1 and the contact solve: the constrained acceleration and the forces, every contact
    wrench left in d.fext (the Data d is returned in the result, busy-flag to be released by the
    caller)."""
    cs = check_contacts(model, contacts)
    fs, fvec = check_forces(model, forces)
    d = get_data(model, data)
    if d.custom:
        fill_custom(d, state.s)
    q, v = state.q, state.v
    nv = model.nv
    fext = np.zeros((model.nj + 1, 6))
    fset = contact_set(d, fs) if fs else None
    if fs:
        if eidamb_entry(d.ib, d.fb, q, v, np.zeros(nv)) != 0:      # the kinematics the frames need
            raise input_error(model, q, v, tau)
        fset.rows(d, state)
        d.fext[:] = 0.0
        fset.apply_forces(d, fvec)
        fext = d.fext.copy()
    status = stage1_entry(d.ib, d.fb, q, v, tau, fext)
    if status == BAD_INPUT:
        raise input_error(model, q, v, tau)
    if status != 0:
        raise singular_mass_matrix_error(model, status)
    r = _Solved()
    r.d, r.fset, r.fvec = d, fset, fvec
    r.Minv = d.Minv.copy()
    nu = d.nu_dot.copy()
    r.cset = contact_set(d, cs) if cs else None
    if cs:
        r.cset.rows(d, state)                                   # Jc and the drift r0 (nu_dot = 0)
        Jc = r.cset.stacked("Jc")
        r0 = r.cset.stacked("r")
        Y = r.Minv @ Jc.T
        K = Jc @ Y
        K = 0.5 * (K + K.T)
        r.Kinv = delassus_inverse(model, r.cset.terms, K)
        lam = -r.Kinv @ (Jc @ nu + r0)
        nu = nu + Y @ lam
        r.cset.apply_forces(d, lam)
        r.lam, r.K, r.Y, r.Jc = lam, K, Y, Jc
    else:
        r.lam = np.zeros(0)
    r.nu_dot = nu
    return r


def linearize_contacts(model: Model, state: State, tau: np.ndarray, contacts, forces,
                       data=None, dt: float | None = None) -> Linearization:
    """sl.linearize(..., contacts=, forces=, dt=): see algorithms/contacts.py; with dt also Ad, Bd
    of the semi-implicit Euler step (discrete.py) of the constrained / forced dynamics."""
    if dt is not None:
        dt = check_dt(dt)
    d = get_data(model, data)
    d._busy = True
    try:
        s = solve_contacts(model, state, tau, contacts, forces, d)
        nv, nj = model.nv, model.nj
        off = nv - nj
        v = state.v
        d.nu_dot[:] = s.nu_dot
        A = np.empty((2 * nv, 2 * nv))
        B0 = np.empty((2 * nv, nj))
        if stage2_entry(d.ib, d.fb, v, A, B0) != 0:
            raise overflow_error(model, d, state.q, v, tau, A, B0)
        Minv = s.Minv
        D = d.D.copy()
        E = np.zeros((nv, nv))                              # world-aligned forces turn with the links
        if s.fset is not None:
            s.fset.add_rotation_term(d, s.fvec, E)
        if s.cset is not None:
            s.cset.add_rotation_term(d, s.lam, E)
        D[:, :nv] += E
        S = Minv[:, off:]
        A_low = -Minv @ D
        B_tau = S.copy()
        Jf = s.fset.stacked("Jc") if s.fset is not None else np.zeros((0, nv))
        B_f = Minv @ Jf.T
        forces_out = dz = dtau = None
        if s.cset is not None:
            s.cset.rows(d, state, s.nu_dot, True)
            Ar = s.cset.stacked("dr")
            Y = s.Y
            dz = s.Kinv @ (Y.T @ D - Ar)            # dlambda/dz
            dtau = -s.Kinv @ (s.Jc @ S)             # dlambda/dtau
            A_low += Y @ dz
            B_tau += Y @ dtau
            if s.fset is not None:
                B_f += Y @ (-s.Kinv @ (s.Jc @ B_f))
            forces_out = s.lam.copy()
        A[nv:] = A_low
        B = np.zeros((2 * nv, nj + Jf.shape[0]))
        B[nv:, :nj] = B_tau
        B[nv:, nj:] = B_f
        if not (np.all(np.isfinite(A)) and np.all(np.isfinite(B))):
            raise overflow_error(model, d, state.q, v, tau, A, B0)
        lin = Linearization(A, B, s.nu_dot.copy(), Minv, D, forces=forces_out, dforces_dz=dz,
                            dforces_dtau=dtau)
    finally:
        d._busy = False
    if dt is not None:
        v_plus = state.v[0:6] + dt * lin.nu_dot[0:6] if model.floating_base else None
        lin.dt = dt
        lin.Ad, lin.Bd = discretize(lin.A, lin.B, dt, v_plus)
    return lin


def forward_dynamics_contacts(model: Model, state: State, tau: np.ndarray, contacts=None, forces=None,
                              data=None):
    """nu_dot with rigid contacts and/or input forces; with contacts (nu_dot, forces)."""
    d = get_data(model, data)
    d._busy = True
    try:
        s = solve_contacts(model, state, tau, contacts, forces, d)
    finally:
        d._busy = False
    if contacts:
        return s.nu_dot, s.lam.copy()
    return s.nu_dot
