# SPDX-License-Identifier: BSD-3-Clause
"""EIDAmb, the Extended Inverse Dynamics Algorithm for moving-base systems (thesis Table 4.1): the
base wrench and joint torques [tau_b; tau] = M nu_dot + h(q, nu), by the recursive Newton-Euler
scheme with the base as a 6-DoF 'joint'. EIDA (fixed base) is the same with v_0 = a_0 = 0."""
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
from ..spatial_ops import cross_f, cross_m, mv_r, s_dot, xmv_s, xt_add_s
from ..coupling import is_coupled
from ..state import as_vector
from .common import BAD_INPUT, EIDAMB_STEPS, finite_result, setup
from .kinematics import prepare


@kernel
def eidamb(m, d, vel, nu_dot, velocities):
    """EIDAmb (Table 4.1), with the base acceleration folded into the body accelerations.

    Joint k's rate and acceleration are vel[vidx[k]], nu_dot[vidx[k]]. On entry d.v[0] is the base
    twist v_0 and d.a[0] = ^0a_{A,0} + a_0^r (base acceleration plus the gravity term of line 7);
    for a fixed base v[0] = 0 and a[0] = a_0^r. Then
      a[k] = a_k^r + ^k a_{A,0}   (lines 18 and 31 in one recursion)
      f[k] = M_k a[k] + v_k x* M_k v_k - fext[k], accumulated over the subtree (lines 22, 27;
             fext[k] the external wrench on body k in its frame, zero unless contacts set it)
    so that f[k] = M^c_k ^k a_{A,0} + b^c_k, tau_id[vidx[k]] = Gamma^T f[k] (line 32), and
    f[0] = M^c_0 a_0 + 0F r_dot + b^vp_0 = ID_b (line 41): the r_dot terms that line 41 adds
    through 0F are already inside a[k].
    Also kept for the derivatives: vp[k], ap[k] = the parent's twist and acceleration in k's frame
    (^kX_lam v_lam, ^kX_lam a_lam) and hv[k] = M_k v_k. velocities=False reuses v, vp and hv
    from an earlier call at the same state (only the accelerations changed)."""
    lam, vidx, sax, Xup, S, I, xax, xw, rig = m.lam, m.vidx, m.sax, d.Xup, d.S, m.I, m.xax, m.xw, m.rig
    v, a, f, vp, ap, hv, tau = d.v, d.a, d.f, d.vp, d.ap, d.hv, d.tau_id
    if velocities:
        mv_r(I[0], rig[0], v[0], hv[0])                          # T4.1:10-11
    mv_r(I[0], rig[0], a[0], f[0])
    cross_f(v[0], hv[0], f[0])
    fx = d.fext
    for i in range(6):
        f[0, i] -= fx[0, i]                                      # external wrench (contacts)
    for k in range(1, m.nb):                                     # T4.1:13
        p = lam[k]
        rk = vel[vidx[k]]
        if velocities:
            xmv_s(Xup[k], xw[k], xax[k], v[p], vp[k])            # T4.1:17
            for i in range(6):
                v[k, i] = vp[k, i] + S[k, i] * rk                # T4.1:15: v_J = Gamma r
            mv_r(I[k], rig[k], v[k], hv[k])      # (on M_k's parameters where it is of rigid form)
        xmv_s(Xup[k], xw[k], xax[k], a[p], ap[k])                # T4.1:18, 31
        rdk = nu_dot[vidx[k]]
        for i in range(6):
            a[k, i] = ap[k, i] + S[k, i] * rdk
        cross_m(v[k], S[k], a[k], rk)                            # v_k x v_J
        mv_r(I[k], rig[k], a[k], f[k])                           # T4.1:21-22
        cross_f(v[k], hv[k], f[k])
        for i in range(6):
            f[k, i] -= fx[k, i]                                  # external wrench (contacts)
    for k in range(m.nb - 1, 0, -1):                             # T4.1:25
        tau[vidx[k]] = s_dot(S[k], sax[k], f[k])                 # T4.1:32 (subtree of k complete)
        xt_add_s(Xup[k], xw[k], xax[k], f[k], f[lam[k]])         # T4.1:27


@njit(inline="always")
def set_base_acceleration(m, d, nu_dot):
    """d.a[0] = ^0a_{A,0} + a_0^r: the base's acceleration (nu_dot[0:6], floating) plus gravity."""
    for i in range(6):
        d.a[0, i] = d.g0[i] + (nu_dot[i] if m.floating else 0.0)


@njit
def eidamb_entry(ib, fb, q, vel, nu_dot):
    """Kinematics, then EIDAmb at nu_dot (the Python wrappers' compiled call). Returns a status."""
    m, d, _ = views(ib, fb)
    if prepare(m, d, q, vel, nu_dot) != 0:
        return BAD_INPUT
    set_base_acceleration(m, d, nu_dot)
    eidamb(m, d, vel, nu_dot, m.nb > 0)     # velocities too (a run-time bool, see linearize_state)
    return 0


def run_eidamb(model: Model, state: State, nu_dot: ArrayLike, data: Data | None = None) -> Data:
    """The Data after kinematics and EIDAmb at (state, nu_dot)."""
    nu_dot = as_vector("nu_dot", nu_dot, model.nv)
    d = setup(model, state, data)
    if eidamb_entry(d.ib, d.fb, state.q, state.v, nu_dot) != 0:
        from ..state import input_error
        raise input_error(model, state.q, state.v)
    return d


def extended_inverse_dynamics(model: Model, state: State, nu_dot: ArrayLike,
                              data: Data | None = None) -> np.ndarray:
    """EIDAmb (Table 4.1): [tau_b (6); tau] = M nu_dot + h (floating base), tau (fixed base).

    tau_b is the wrench the base would need (zero when nu_dot is consistent with tau). With mimic
    joints: G^T ID(tree state, G nu_dot) (coupling.py)."""
    if is_coupled(model):
        return model.reduce_rows(extended_inverse_dynamics(
            model.tree, model.tree_state(state), model.tree_vector(nu_dot, "nu_dot"), data))
    return eidamb_forces(model, state, nu_dot, data, "extended_inverse_dynamics")


def eidamb_forces(model: Model, state: State, nu_dot: ArrayLike, data: Data | None,
                  algorithm: str) -> np.ndarray:
    """extended_inverse_dynamics for the public function named `algorithm` (its errors name it)."""
    d = run_eidamb(model, state, nu_dot, data)
    if model.floating_base:
        out = np.concatenate([d.f[0], d.tau_id[6:]])
    else:
        out = d.tau_id.copy()
    return finite_result(model, d, algorithm, EIDAMB_STEPS, "the generalised forces", out,
                         q=state.q, v=state.v, nu_dot=nu_dot)
