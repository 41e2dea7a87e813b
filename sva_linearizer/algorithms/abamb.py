# SPDX-License-Identifier: BSD-3-Clause
"""ABAmb (thesis Appendix E.6) / ABA (E.5): forward dynamics nu_dot = FD(q, nu, tau) by the
articulated-body algorithm, with zero external wrenches (Assumption 2.3)."""
from __future__ import annotations

import numpy as np
from typing import TYPE_CHECKING

from numpy.typing import ArrayLike

if TYPE_CHECKING:
    from ..data import Data
    from ..model import Model
    from ..state import State

from .._jit import njit
from ..layout import kernel, views
from ..spatial_ops import cross_f, cross_m, dot6, inv_spd6, mv, mv_add, s_dot, xmv, xt_add
from ..coupling import coupled_inverse, is_coupled
from ..state import as_vector, input_error
from .crbamb import mass_matrix
from .eidamb import extended_inverse_dynamics
from .articulated import articulated_step, init_articulated, pivot_tolerance
from .common import (ABAMB_STEPS, BAD_INPUT, BASE_SINGULAR, check_state, finite_result, setup,
                     singular_mass_matrix_error)
from .constrained_dynamics import forward_dynamics_contacts
from .kinematics import prepare


@kernel
def abamb(m, d, vel, tau):
    """ABAmb / ABA. On entry d.v[0] is the base twist and d.a[0] = a_0^r (gravity); for a floating
    base d.a[0] becomes the apparent base acceleration ^0a_{A,0} + a_0^r, and d.rdd the joint
    accelerations. Returns 0, or k > 0 if the pivot D_k vanishes, or BASE_SINGULAR."""
    lam, vidx, S, I, Xup = m.lam, m.vidx, d.S, m.I, d.Xup
    v, c, pA, u, a, U, Dd, t6 = d.v, d.c, d.pA, d.u, d.a, d.U, d.Dd, d.t6
    init_articulated(m, d)
    pA[0] = 0.0
    mv(I[0], v[0], t6[0])
    cross_f(v[0], t6[0], pA[0])                                  # p^A_0 = v_0 x* M_0 v_0
    for k in range(1, m.nb):                                     # velocities, c_k, p^A_k
        p = lam[k]
        rk = vel[vidx[k]]
        xmv(Xup[k], v[p], v[k])
        for i in range(6):
            v[k, i] += S[k, i] * rk
            c[k, i] = 0.0
        cross_m(v[k], S[k], c[k], rk)
        pA[k] = 0.0
        mv(I[k], v[k], t6[0])
        cross_f(v[k], t6[0], pA[k])
    tol = pivot_tolerance(m)
    for k in range(m.nb - 1, 0, -1):                             # articulated inertias and biases
        iD = articulated_step(m, d, k, tol)
        if iD == 0.0:
            return k
        u[k] = tau[k - 1] - s_dot(S[k], m.sax[k], pA[k])
        mv_add(d.T2, c[k], pA[k])                                # p^a = p^A + M^a c + U u / D
        for i in range(6):
            pA[k, i] += U[k, i] * (u[k] * iD)
        xt_add(Xup[k], pA[k], pA[lam[k]])
    if m.floating:
        if not inv_spd6(d.IA[0], d.T, d.T2):
            return BASE_SINGULAR
        for i in range(6):
            acc = 0.0
            for c_ in range(6):
                acc -= d.T[i, c_] * pA[0, c_]
            a[0, i] = acc
    for k in range(1, m.nb):                                     # accelerations
        xmv(Xup[k], a[lam[k]], a[k])
        for i in range(6):
            a[k, i] += c[k, i]
        rdd = (u[k] - dot6(U[k], a[k])) / Dd[k]
        d.rdd[k - 1] = rdd
        for i in range(6):
            a[k, i] += S[k, i] * rdd
    return 0


@njit
def abamb_entry(ib, fb, q, vel, tau):
    m, d, _ = views(ib, fb)
    if prepare(m, d, q, vel, tau) != 0:
        return BAD_INPUT
    for i in range(6):
        d.a[0, i] = d.g0[i]
    return abamb(m, d, vel, tau)


def forward_dynamics(model: Model, state: State, tau: ArrayLike, data: Data | None = None,
                     contacts=None, forces=None):
    """ABAmb / ABA: nu_dot = [v_dot (body frame, 6); r_ddot] (floating) or r_ddot (fixed).

    contacts=[sl.Contact, ...]: the constrained dynamics (KKT, constrained_dynamics.py); returns
    (nu_dot, forces) with the contact forces on the robot, stacked, each in its reference frame.
    forces=[(sl.Contact, f), ...]: contact forces applied as given inputs."""
    tau = as_vector("tau", tau, model.nj)
    if is_coupled(model):                    # mimic joints: M_r^-1 (S tau - G^T h) (coupling.py)
        if contacts or forces:
            raise ValueError("forward_dynamics: contacts and forces on a model with mimic joints are "
                             "not supported; load it with mimic=False")
        return coupled_acceleration(model, state, tau, data)
    if contacts or forces:
        check_state(model, state)
        return forward_dynamics_contacts(model, state, tau, contacts, forces, data)
    d = setup(model, state, data)
    status = abamb_entry(d.ib, d.fb, state.q, state.v, tau)
    if status == BAD_INPUT:
        raise input_error(model, state.q, state.v, tau)
    if status != 0:
        raise singular_mass_matrix_error(model, status, d)
    if model.floating_base:
        nu_dot = np.concatenate([d.a[0] - d.g0, d.rdd])  # remove the gravity term a_0^r
    else:
        nu_dot = d.rdd.copy()
    return finite_result(model, d, "forward_dynamics", ABAMB_STEPS, "the acceleration nu_dot", nu_dot,
                         q=state.q, v=state.v, tau=tau)


def coupled_acceleration(model, state: State, tau: np.ndarray, data: Data | None = None,
                         Minv: np.ndarray | None = None) -> np.ndarray:
    """nu_dot = M_r^-1 (S tau - h_r) of a model with mimic joints (coupling.py): M_r = G^T M G
    (CRBAmb), h_r = G^T h with h from EIDAmb at nu_dot = 0. Minv: M_r^-1 when already known."""
    if Minv is None:
        Minv = coupled_inverse(model, mass_matrix(model, state, data))
    rhs = -extended_inverse_dynamics(model, state, np.zeros(model.nv), data)
    rhs[model.nv - model.nj:] += tau
    return finite_result(model, None, "forward_dynamics", (), "the acceleration nu_dot", Minv @ rhs,
                         q=state.q, v=state.v, tau=tau)
