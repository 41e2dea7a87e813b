# SPDX-License-Identifier: BSD-3-Clause
"""Derivatives of EIDAmb (thesis Tables 4.2-4.5), computed with the arithmetic of Singh et al.'s IDSVA
(Singh et al., "Efficient Analytical Derivatives of Rigid-Body Dynamics using Spatial Vector
Algebra", Alg. 1; docs/derivations.md) in body coordinates: O(N d), a few
6-vector products per (ancestor, descendant) pair instead of a 6x6 product per (body, column).

Where each thesis table's result comes from (D = [D_q | D_nu], nv x 2nv):

    thesis                      D's columns         IDSVA lines (comments: # IDSVA:n)
    Table 4.2  d ID / d H       z_H (6)             17, 19 with the base as a 6-DoF joint (i = 0),
                                                    Gamma_0 = 1, Psi-ddot_0 = a_0^r x 1; 19-20 base-base
    Table 4.3  d ID / d s       s (N)               5-7, 13-15, 17, 19, 22
    Table 4.4  d ID / d v       v (6, body twist)   18, 20 with i = 0, S-dot_0 = v_0 x 1
    Table 4.5  d ID / d r       r (N)               5, 14, 16, 18, 20

Comments tag IDSVA's line numbers; EIDAmb's own lines are tagged # T4.1:n in eidamb.py.
"""
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
from ..spatial import crm, xform
from ..spatial_ops import (congruence_add, cross_f, cross_f6, cross_m, dot6, m_s, mv_add_r, mv_r,
                           rigid_congruence_add_s, s_dot, two_b_sym_rigid, xt_add_s, xtf_rows_s)
from ..coupling import is_coupled
from .common import EIDAMB_STEPS, finite_result
from .eidamb import run_eidamb

BASE_VELOCITY_FRAMES = ("body", "inertial")


@njit(inline="always")
def two_b_sym(M, v, T, K):
    """The symmetric part of 2 B = v x* M - M v x + (M v) x-bar*  (Singh eq. 28) for a symmetric
    inertia M: K = C + C^T with C = v x* M. The rest, (M v) x-bar*, is antisymmetric and
    determined by the momentum h = M v: 2B x = K x + x x* h, (2B)^T x = K x - x x* h.
    T: 6x6 scratch. K's 21 distinct entries are computed once and mirrored."""
    for c in range(6):                  # T[c] = v x* M[:, c] (row c of C^T)
        T[c, 0], T[c, 1], T[c, 2], T[c, 3], T[c, 4], T[c, 5] = cross_f6(v, M[c])
    for i in range(6):
        for c in range(i, 6):
            x = T[c, i] + T[i, c]
            K[i, c] = x
            K[c, i] = x


@njit(inline="always")
def idsva_forward(m, d, k, composite):
    """IDSVA:5-11 for body k (after eidamb at the state): Ps[k] = [Psi-dot, Psi-ddot, S-dot + Psi-dot]
    (k > 0; line 7's a_lam is d.ap, gravity included as in EIDAmb's run) and, if `composite`, the
    composites' own terms: IC[k] = M_k, KC[k] = 2B_k's symmetric part (two_b_sym), hC[k] = M_k v_k."""
    S, Sig, I, v, vp, ap, hv = d.S, d.Sig, m.I, d.v, d.vp, d.ap, d.hv
    IC, KC, hC, Ps = d.IC, d.KC, d.hC, d.Ps
    if k > 0:
        P, vpk = Ps[k], vp[k]                                    # v_lam, a_lam in k's frame
        for i in range(3):
            for mm in range(6):
                P[i, mm] = 0.0
        cross_m(vpk, Sig[k], P[0], 1.0)                          # IDSVA:6: Psi-dot = v_lam x sigma
        cross_m(ap[k], Sig[k], P[1], 1.0)                        # IDSVA:7: Psi-ddot = a_lam x sigma
        cross_m(vpk, P[0], P[1], 1.0)                            #   + v_lam x Psi-dot
        cross_m(vpk, S[k], P[2], 2.0)                            # IDSVA:5: S-dot + Psi-dot (Gamma)
    if composite:
        for i in range(6):
            for mm in range(6):
                IC[k, i, mm] = I[k, i, mm]                       # IDSVA:8
        if m.rig[k]:                                             # IDSVA:9
            two_b_sym_rigid(I[k], v[k], KC[k])
        else:
            two_b_sym(I[k], v[k], d.T2, KC[k])
        for i in range(6):
            hC[k, i] = hv[k, i]


@njit(inline="always")
def idsva_terms(m, d, k):
    """IDSVA:13-16 for body k, its composites complete (subtree(k) accumulated): d.tt[k] = [t1, t2,
    t3, t4] = [M^C Gamma, 2B^C Gamma + M^C (S-dot + Psi-dot), 2B^C Psi-dot + M^C Psi-ddot + f^C
    x-bar* sigma, (2B^C)^T Gamma] (2B^C x = KC x + x x* hC; f^C = d.f[k], EIDAmb's subtree force)."""
    ICk, KCk, hCk, G, P, t, ax = d.IC[k], d.KC[k], d.hC[k], d.S[k], d.Ps[k], d.tt[k], m.sax[k]
    psd, psdd, sdp = P[0], P[1], P[2]
    t1, t2, t3, t4 = t[0], t[1], t[2], t[3]
    x = d.t6[0]                                                  # x = Gamma x* h^C
    for i in range(6):
        x[i] = 0.0
    cross_f(G, hCk, x)
    m_s(ICk, G, ax, t1)                                          # IDSVA:13: t1 = M^C Gamma
    m_s(KCk, G, ax, t3)                                          # (t3 as scratch: KC Gamma)
    for i in range(6):
        kg = t3[i]
        t4[i] = kg - x[i]                                        # IDSVA:16: t4 = (2B^C)^T Gamma
        t2[i] = kg + x[i]                                        # IDSVA:14: t2 = 2B^C Gamma
    rk = m.rig[k]                            # M^C_k, KC_k of rigid-body form: products on (m, h, C)
    mv_add_r(ICk, rk, sdp, t2)                                   #   + M^C (S-dot + Psi-dot)
    mv_r(KCk, rk, psd, t3)                                       # IDSVA:15: t3 = 2B^C Psi-dot
    cross_f(psd, hCk, t3)
    mv_add_r(ICk, rk, psdd, t3)                                  #   + M^C Psi-ddot
    cross_f(d.Sig[k], d.f[k], t3)                                #   + f^C x-bar* sigma


@njit(inline="always")
def idsva_accumulate(m, d, k, p):
    """IDSVA:22: body k's composites IC, KC, hC into its parent p's (^kX_p^T C ^kX_p)."""
    IC, KC, hC, Xup, xw, ax = d.IC, d.KC, d.hC, d.Xup, m.xw, m.xax[k]
    if m.rig[k]:                             # rigid-body form kept: on its parameters (spatial_ops)
        for C in (IC, KC):                   # (a loop: one copy of the code, which is long)
            rigid_congruence_add_s(Xup[k], xw[k], ax, C[k], C[p])
    else:                                    # (raw 6x6 inertias, rare: the general product)
        congruence_add(Xup[k], IC[k], IC[p])
        congruence_add(Xup[k], KC[k], KC[p])
    xt_add_s(Xup[k], xw[k], ax, hC[k], hC[p])


@kernel
def eidamb_derivatives(m, d):
    """The derivatives of EIDAmb w.r.t. H, s, v, r (Tables 4.2-4.5), computed by IDSVA (Singh et al.
    Alg. 1; docs/derivations.md) in body coordinates: the same derivatives with
    the arithmetic restructured to O(N d), a few 6-vector products per (ancestor, descendant) pair.

    D (nv x 2nv) gets the columns [z_H (6) | s (N) | v (6, body twist) | r (N)] (floating) or
    [s (N) | r (N)] (fixed). Needs eidamb at the same state and acceleration (v, f as subtree
    sums, vp, ap, hv). g0 = a_0^r = ^0R_A a_grav. With the body twist held fixed (docs/derivations.md,
    "Which base velocity the thesis holds fixed") only gravity depends on H: the base acts as a 6-DoF joint
    with Gamma_0 = sigma_0 = 1,
    Psi-dot_0 = 0, Psi-ddot_0 = a_0^r x 1 and S-dot_0 = v_0 x 1.

    Body coordinates rather than the paper's ground frame: a body's t1..t4 (lines 13-16) are taken
    to each ancestor's frame on the way up (X^T), which costs more than ground-frame dot products
    but keeps the accuracy of the forward-mode tables (in the ground frame the derivatives lose about
    a digit on ill-conditioned states, e.g. icub's).
    IC: composite M^C_k (lines 8, 22). 2 B^C_k (lines 9, 22) is kept as its symmetric part KC[k]
    and the composite momentum hC[k] (two_b_sym): 2B^C x = KC x + x x* hC, by equivariance of the
    cross products, and KC's congruence is the cheap symmetric one. Where subtree(k)'s inertias are
    of rigid-body form (m.rig), so are M^C_k and KC[k] (KC = d/dt M^C, of mass 0): their
    congruences then run on the 10 parameters (rigid_congruence_add). Ps[k] = [Psi-dot_k, Psi-ddot_k,
    S-dot_k + Psi-dot_k (for Gamma)] (lines 5-7, eq. 31). tt[k]: t1..t4; cur: 4x6; T: 6x6 and t6:
    3x6 scratch.

    Joints whose position twist sigma differs from Gamma (custom joints, see kinematics) keep the
    two apart: sigma in the position derivatives (Psi-dot, Psi-ddot, the f x-bar* sigma term),
    Gamma in the velocity derivatives and in tau = Gamma^T f. Line 15's third term is kept (the paper's
    simplified form drops it, which is wrong: docs/derivations.md)."""
    lam, vidx, sax, rig, floating, nb, nv = m.lam, m.vidx, m.sax, m.rig, m.floating, m.nb, m.nv
    xax, xw = m.xax, m.xw
    S, Xup, v, g0 = d.S, d.Xup, d.v, d.g0
    IC, KC, hC, Ps, tt, cur, D, t6 = d.IC, d.KC, d.hC, d.Ps, d.tt, d.cur, d.D, d.t6
    for i in range(D.shape[0]):
        for c in range(D.shape[1]):
            D[i, c] = 0.0
    for k in range(nb):                                          # forward: IDSVA:2-11
        idsva_forward(m, d, k, k > 0 or floating)
    v0 = v[0]
    for k in range(nb - 1, 0, -1):                               # backward: IDSVA:12
        p = lam[k]
        G, P, t, ax = S[k], Ps[k], tt[k], sax[k]
        psd, psdd, sdp = P[0], P[1], P[2]
        t1, t4 = t[0], t[3]
        idsva_terms(m, d, k)                                     # IDSVA:13-16
        # IDSVA:19-20 for the pair (k, k): the diagonal
        rq = vidx[k]
        rv = nv + rq
        D[rq, rq] = dot6(t4, psd) + dot6(t1, psdd)
        D[rq, rv] = s_dot(G, ax, t4) + dot6(t1, sdp)
        # k's t1..t4 in each ancestor i's frame: lines 17-18 (row i, column k) and 19-20 (row k,
        # column i)
        for c in range(4):
            for mm in range(6):
                cur[c, mm] = t[c, mm]
        ch, i = k, p
        while i > 0:
            xtf_rows_s(Xup[ch], xw[ch], xax[ch], cur, cur)
            Gi, Pi, axi = S[i], Ps[i], sax[i]
            ri = vidx[i]
            D[ri, rq] = s_dot(Gi, axi, cur[2])
            D[ri, rv] = s_dot(Gi, axi, cur[1])
            D[rq, ri] = dot6(cur[3], Pi[0]) + dot6(cur[0], Pi[1])
            D[rq, nv + ri] = s_dot(Gi, axi, cur[3]) + dot6(cur[0], Pi[2])
            ch, i = i, lam[i]
        if floating:
            # the base (lines 17-20 with Gamma_0 = 1): its rows get t3, t2; row k's H and v
            # columns t1^T (g0 x e) = -(g0 x* t1)^T and t4 + t1^T (v0 x e)
            xtf_rows_s(Xup[ch], xw[ch], xax[ch], cur, cur)
            Dr = D[rq]
            for mm in range(6):
                D[mm, rq] = cur[2, mm]
                D[mm, rv] = cur[1, mm]
            cross_f(g0, cur[0], Dr[0:6])
            cross_f(v0, cur[0], Dr[nv:nv + 6])
            for mm in range(6):
                Dr[mm] = -Dr[mm]
                Dr[nv + mm] = cur[3, mm] - Dr[nv + mm]
        if p > 0 or floating:                                    # IDSVA:22
            idsva_accumulate(m, d, k, p)
    if floating:                                                 # base-base block (IDSVA:19-20)
        e, col, w = t6[0], t6[1], t6[2]
        for c in range(6):
            for i in range(6):
                e[i] = 1.0 if i == c else 0.0
                col[i] = 0.0
            cross_m(g0, e, col, 1.0)                             # Psi-ddot_0 e_c = g0 x e_c
            mv_r(IC[0], rig[0], col, w)
            for i in range(6):
                D[i, c] = w[i]
                col[i] = 0.0
            cross_m(v0, e, col, 1.0)                             # S-dot_0 e_c = v0 x e_c
            mv_r(IC[0], rig[0], col, w)
            cross_f(e, hC[0], w)                                 # 2B^C_0 e_c = KC e_c + e_c x* hC
            for i in range(6):
                D[i, nv + c] = KC[0, i, c] + w[i]


@njit
def eidamb_derivatives_entry(ib, fb):
    """eidamb_derivatives on the buffers, after eidamb_entry at the same state."""
    m, d, _ = views(ib, fb)
    eidamb_derivatives(m, d)
    return 0


def extended_inverse_dynamics_derivatives(model: Model, state: State, nu_dot: ArrayLike,
                                          base_velocity_frame: str = "body",
                                          data: Data | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Derivatives of EIDAmb (Tables 4.2-4.5) at (state, nu_dot): (D_q, D_nu), each nv x nv.

    D_q columns: [z_H (6, left-trivialized: H -> H exp(z^)), s]; D_nu columns: [v (6), r].
    base_velocity_frame="body" holds the body twist v fixed (what the linearization needs);
    "inertial" holds ^A v fixed, the thesis's convention in Tables 4.1-4.2 and Chapter 5
    (docs/derivations.md): D_v^A = D_v ^0X_A, D_H^A = D_H + D_v (v x)."""
    if base_velocity_frame not in BASE_VELOCITY_FRAMES:
        raise ValueError(f"base_velocity_frame must be one of {BASE_VELOCITY_FRAMES}, "
                         f"got {base_velocity_frame!r}")
    if is_coupled(model):                    # mimic joints: G^T D G (coupling.py)
        D_q, D_nu = extended_inverse_dynamics_derivatives(
            model.tree, model.tree_state(state), model.tree_vector(nu_dot, "nu_dot"), base_velocity_frame,
            data)
        return model.reduce(D_q), model.reduce(D_nu)
    d = run_eidamb(model, state, nu_dot, data)
    eidamb_derivatives_entry(d.ib, d.fb)
    nv = model.nv
    D_q, D_nu = d.D[:, :nv].copy(), d.D[:, nv:].copy()
    if model.floating_base and base_velocity_frame == "inertial":
        Dv = D_nu[:, 0:6].copy()
        X0A = xform(state.R.T, -state.R.T @ state.p)  # ^0X_A
        D_nu[:, 0:6] = Dv @ X0A
        D_q[:, 0:6] += Dv @ crm(state.v_base)         # Prop. 4.1 (4.21): d(^0X_A ^Av)/dH = v x
    return finite_result(model, d, "extended_inverse_dynamics_derivatives", EIDAMB_STEPS,
                         "the derivatives D_q, D_nu", (D_q, D_nu), q=state.q, v=state.v, nu_dot=nu_dot)
