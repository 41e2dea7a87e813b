# SPDX-License-Identifier: BSD-3-Clause
"""IMMA (thesis Table 4.6, fixed base) and IMMAmb (Table 4.7, moving base): the inverse mass matrix
M^-1 in O(N^2) without forming M, on the articulated-body sweep (articulated.py)."""
from __future__ import annotations

import numpy as np
from typing import TYPE_CHECKING


if TYPE_CHECKING:
    from ..data import Data
    from ..model import Model
    from ..state import State

from .._lanes import any_lane
from .._jit import njit
from ..layout import kernel, views
from ..spatial_ops import axis_blocks, inv_spd6, xblocks, xm_axis6, xt6, xt_add_s, xt_axis6
from ..coupling import coupled_inverse, is_coupled
from ..state import input_error
from .crbamb import mass_matrix
from .articulated import articulated_step, init_articulated, pivot_tolerance
from .common import (BAD_INPUT, BASE_SINGULAR, KINEMATICS_STEPS, finite_result, setup,
                     singular_mass_matrix_error)
from .kinematics import prepare


@njit(inline="always")
def set_column(F, col, r):
    """F[:, col] = r for a 6 x N matrix F and a 6-tuple r."""
    F[0, col] = r[0]
    F[1, col] = r[1]
    F[2, col] = r[2]
    F[3, col] = r[3]
    F[4, col] = r[4]
    F[5, col] = r[5]


@njit(inline="always")
def f_columns(X, S, U, iD, Fk, Fp, Mrow, c0, c1, up, own):
    """IMMA(mb) backward pass for columns c0..c1-1 of body k's subtree (T4.6:10-12 / T4.7:10-11):
    m = Minv_row - Gamma^T F_k / D, then F_lam = X^T (F_k + U m). X, Gamma, U in locals.

    No F is zeroed first: body k's own column `own` (the first of its subtree) has F_k = 0, as no
    child's subtree holds k, so there m = Minv_kk = 1/D_k; every other column of F_k was set by the
    one child whose subtree holds it, and F_lam's columns in subtree(k) get k's term alone (the
    children's subtrees are disjoint), so it is stored, not added. Off the diagonal Minv_row
    starts at 0: m = -Gamma^T F_k / D."""
    blocks = xblocks(X)
    s0, s1, s2, s3, s4, s5 = S[0] * iD, S[1] * iD, S[2] * iD, S[3] * iD, S[4] * iD, S[5] * iD
    u0, u1, u2, u3, u4, u5 = U[0], U[1], U[2], U[3], U[4], U[5]
    if c0 == own:
        Mrow[own] = iD                                               # T4.6:9
        if up:
            set_column(Fp, own, xt6(blocks, u0 * iD, u1 * iD, u2 * iD, u3 * iD, u4 * iD, u5 * iD))
        c0 += 1
    for col in range(c0, c1):
        y0, y1, y2 = Fk[0, col], Fk[1, col], Fk[2, col]
        y3, y4, y5 = Fk[3, col], Fk[4, col], Fk[5, col]
        m = -(s0 * y0 + s1 * y1 + s2 * y2 + s3 * y3 + s4 * y4 + s5 * y5)
        Mrow[col] = m
        if up:
            y0 += u0 * m
            y1 += u1 * m
            y2 += u2 * m
            y3 += u3 * m
            y4 += u4 * m
            y5 += u5 * m
            set_column(Fp, col, xt6(blocks, y0, y1, y2, y3, y4, y5))


@njit(inline="always")
def f_columns_axis(X, o, a, S, U, iD, Fk, Fp, Mrow, c0, c1, up, own):
    """f_columns for a body whose Xup = [[E, E o^], [0, E]] with E a rotation about e_a and whose
    Gamma = +-e_(3+a) (topology.axis_structure): m reads one row of F_k, and X^T takes E's 2x2
    block (spatial_ops.xt_axis6; rows relabelled a, b, c)."""
    b, c, ebb, ebc, ecb, ecc = axis_blocks(X, a)
    oa, ob, oc = o[a], o[b], o[c]
    sg = S[3 + a] * iD
    ua, ub, uc, va, vb, vc = U[a], U[b], U[c], U[3 + a], U[3 + b], U[3 + c]
    Ya, Yb, Yc, Za, Zb, Zc = Fk[a], Fk[b], Fk[c], Fk[3 + a], Fk[3 + b], Fk[3 + c]
    Pa, Pb, Pc, Qa, Qb, Qc = Fp[a], Fp[b], Fp[c], Fp[3 + a], Fp[3 + b], Fp[3 + c]
    for col in range(c0, c1):
        if col == own:                           # F_k's own column is 0 and m = 1/D (f_columns)
            m = iD
            ya, yb, yc, za, zb, zc = 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
        else:
            ya, yb, yc, za, zb, zc = Ya[col], Yb[col], Yc[col], Za[col], Zb[col], Zc[col]
            m = -(sg * za)
        Mrow[col] = m
        if up:
            Pa[col], Pb[col], Pc[col], Qa[col], Qb[col], Qc[col] = xt_axis6(
                ebb, ebc, ecb, ecc, oa, ob, oc, ya + ua * m, yb + ub * m, yc + uc * m,
                za + va * m, zb + vb * m, zc + vc * m)


@njit(inline="always")
def p_columns_axis(X, o, a, S, w, Dk, Pp, Pk, Mrow, c0, c1, fresh):
    """p_columns for a body whose Xup = [[E, E o^], [0, E]] with E a rotation about e_a and whose
    Gamma = +-e_(3+a) (topology.axis_structure): P_k = X P_lam + Gamma m with X on E's 2x2 block
    (spatial_ops.xm_axis6) and Gamma m one entry (rows relabelled a, b, c); w = X^T U, not yet
    divided by D_k."""
    b, c, ebb, ebc, ecb, ecc = axis_blocks(X, a)
    oa, ob, oc = o[a], o[b], o[c]
    sg = S[3 + a]
    wa, wb, wc, za, zb, zc = w[a] / Dk, w[b] / Dk, w[c] / Dk, w[3 + a] / Dk, w[3 + b] / Dk, w[3 + c] / Dk
    Pa, Pb, Pc, Ra, Rb, Rc = Pp[a], Pp[b], Pp[c], Pp[3 + a], Pp[3 + b], Pp[3 + c]
    Qa, Qb, Qc, Sa, Sb, Sc = Pk[a], Pk[b], Pk[c], Pk[3 + a], Pk[3 + b], Pk[3 + c]
    for col in range(c0, c1):
        pa, pb, pc, qa, qb, qc = Pa[col], Pb[col], Pc[col], Ra[col], Rb[col], Rc[col]
        m = -(wa * pa + wb * pb + wc * pc + za * qa + zb * qb + zc * qc)
        if not fresh:
            m += Mrow[col]
        Mrow[col] = m
        Qa[col], Qb[col], Qc[col], r3, Sb[col], Sc[col] = xm_axis6(
            ebb, ebc, ecb, ecc, oa, ob, oc, pa, pb, pc, qa, qb, qc)
        Sa[col] = r3 + sg * m


@njit(inline="always")
def p_columns(X, S, w0, w1, w2, w3, w4, w5, Pp, Pk, Mrow, c0, c1, fresh):
    """IMMA(mb) forward pass for columns c0..c1-1 (T4.6:19-23 / T4.7:17-18):
    m = Minv_row - w^T P_lam, P_k = X P_lam + Gamma m; with `fresh` the columns lie outside body
    k's subtree, where the backward pass left nothing (Minv_row = 0): m = -w^T P_lam. X and Gamma
    are held in locals so that the column loop is straight-line code."""
    (e00, e01, e02, e10, e11, e12, e20, e21, e22,
     f00, f01, f02, f10, f11, f12, f20, f21, f22) = xblocks(X)
    s0, s1, s2, s3, s4, s5 = S[0], S[1], S[2], S[3], S[4], S[5]
    P0, P1, P2, P3, P4, P5 = Pp[0], Pp[1], Pp[2], Pp[3], Pp[4], Pp[5]
    Q0, Q1, Q2, Q3, Q4, Q5 = Pk[0], Pk[1], Pk[2], Pk[3], Pk[4], Pk[5]
    for col in range(c0, c1):
        p0, p1, p2, p3, p4, p5 = P0[col], P1[col], P2[col], P3[col], P4[col], P5[col]
        if fresh:
            m = -(w0 * p0 + w1 * p1 + w2 * p2 + w3 * p3 + w4 * p4 + w5 * p5)
        else:
            m = Mrow[col] - (w0 * p0 + w1 * p1 + w2 * p2 + w3 * p3 + w4 * p4 + w5 * p5)
        Mrow[col] = m
        Q0[col] = s0 * m + e00 * p0 + e01 * p1 + e02 * p2 + f00 * p3 + f01 * p4 + f02 * p5
        Q1[col] = s1 * m + e10 * p0 + e11 * p1 + e12 * p2 + f10 * p3 + f11 * p4 + f12 * p5
        Q2[col] = s2 * m + e20 * p0 + e21 * p1 + e22 * p2 + f20 * p3 + f21 * p4 + f22 * p5
        Q3[col] = s3 * m + e00 * p3 + e01 * p4 + e02 * p5
        Q4[col] = s4 * m + e10 * p3 + e11 * p4 + e12 * p5
        Q5[col] = s5 * m + e20 * p3 + e21 * p4 + e22 * p5


@njit(inline="always")
def m_columns(w0, w1, w2, w3, w4, w5, Pp, Mrow, c0, c1):
    """p_columns for a leaf body, whose subtree is its own column alone (all columns fresh):
    m = -w^T P_lam only (T4.6:19 / T4.7:17); no child reads a leaf's P_k, so T4.6:20-23 /
    T4.7:18 are skipped."""
    P0, P1, P2, P3, P4, P5 = Pp[0], Pp[1], Pp[2], Pp[3], Pp[4], Pp[5]
    for col in range(c0, c1):
        Mrow[col] = -(w0 * P0[col] + w1 * P1[col] + w2 * P2[col] + w3 * P3[col] + w4 * P4[col]
                      + w5 * P5[col])


@kernel
def immamb(m, d):
    """IMMA (Table 4.6, fixed base) and IMMAmb (Table 4.7, moving base): d.Minv = M^-1 without
    forming M.

    subtree(k) (joint indices, k's own included) is the ranges sub_rng[sub_ptr[k]:sub_ptr[k+1]].
    d.Fc[k] is the thesis's 6 x N matrix F_k, d.P[k] likewise P_k (rows are the 6 components, so
    the loops over columns run along contiguous memory). Minv is nv x nv with the base block first
    for a moving base. Only the upper triangle is computed (T4.6:26-30 / T4.7:20-24 mirror it): row
    j of the forward pass needs columns >= j, and so P_k only columns > j.
    Returns 0, or k > 0 if the pivot D_k vanishes (M singular), or BASE_SINGULAR if M^A_0 does."""
    lam, vidx, sub_ptr, sub_rng, S, Xup = m.lam, m.vidx, m.sub_ptr, m.sub_rng, d.S, d.Xup
    xax, xw = m.xax, m.xw
    U, Dd, Fc, P, Minv, IA, T, T2 = d.U, d.Dd, d.Fc, d.P, d.Minv, d.IA, d.T, d.T2
    n, nb, floating = m.n, m.nb, m.floating
    off = m.nv - n                                                   # joint columns of Minv
    init_articulated(m, d)                                           # T4.6:1-5
    tol = pivot_tolerance(m)
    for k in range(n, 0, -1):                                        # T4.6:6
        iD = articulated_step(m, d, k, tol)                          # T4.6:7-8, 13-14
        if any_lane(iD == 0.0):
            return k
        up = lam[k] > 0 or floating                                  # T4.6:11; always (T4.7)
        Mrow = Minv[vidx[k], off:]
        ax = xax[k]
        for t in range(sub_ptr[k], sub_ptr[k + 1]):                  # T4.6:9-10, 12 / T4.7:11
            if ax >= 0:
                f_columns_axis(Xup[k], xw[k], ax, S[k], U[k], iD, Fc[k], Fc[lam[k]], Mrow,
                               sub_rng[t, 0], sub_rng[t, 1], up, k - 1)
            else:
                f_columns(Xup[k], S[k], U[k], iD, Fc[k], Fc[lam[k]], Mrow, sub_rng[t, 0],
                          sub_rng[t, 1], up, k - 1)
    P0 = P[0]
    if floating:
        if not inv_spd6(IA[0], T2, T):                               # T4.7:25: (M^A_0)^-1
            return BASE_SINGULAR
        for i in range(6):                                           # T4.7:15
            x = -T2[i, 0]
            for col in range(n):
                P0[i, col] = x * Fc[0, 0, col]
            for c in range(1, 6):
                x = -T2[i, c]
                for col in range(n):
                    P0[i, col] += x * Fc[0, c, col]
    else:
        for i in range(6):
            for col in range(n):
                P0[i, col] = 0.0
    w = d.t6[0]
    for k in range(1, nb):                                           # T4.6:17 / T4.7:16
        j = k - 1
        Sk, Xk, Pk, Pp = S[k], Xup[k], P[k], P[lam[k]]
        Mrow = Minv[vidx[k], off:]
        for i in range(6):                                           # w = X^T U / D
            w[i] = 0.0
        ax = xax[k]
        xt_add_s(Xk, xw[k], ax, U[k], w)
        Dk = Dd[k]
        w0, w1, w2, w3, w4, w5 = w[0] / Dk, w[1] / Dk, w[2] / Dk, w[3] / Dk, w[4] / Dk, w[5] / Dk
        Mrow[j] -= (w0 * Pp[0, j] + w1 * Pp[1, j] + w2 * Pp[2, j] + w3 * Pp[3, j]
                    + w4 * Pp[4, j] + w5 * Pp[5, j])                 # T4.6:19 / T4.7:17, column j
        if sub_ptr[k + 1] - sub_ptr[k] == 1 and sub_rng[sub_ptr[k], 1] == k:    # a leaf
            m_columns(w0, w1, w2, w3, w4, w5, Pp, Mrow, j + 1, n)
            continue
        c = j + 1                  # columns j+1..n-1: subtree(k)'s ranges (the first starts at
        for t in range(sub_ptr[k], sub_ptr[k + 1]):                  # j) and the gaps between
            a, b = sub_rng[t, 0], sub_rng[t, 1]
            if ax >= 0:
                if a > c:
                    p_columns_axis(Xk, xw[k], ax, Sk, w, Dk, Pp, Pk, Mrow, c, a, True)
                p_columns_axis(Xk, xw[k], ax, Sk, w, Dk, Pp, Pk, Mrow, max(a, c), b, False)
            else:
                if a > c:
                    p_columns(Xk, Sk, w0, w1, w2, w3, w4, w5, Pp, Pk, Mrow, c, a, True)
                p_columns(Xk, Sk, w0, w1, w2, w3, w4, w5, Pp, Pk, Mrow, max(a, c), b, False)
            c = b
        if ax >= 0:
            p_columns_axis(Xk, xw[k], ax, Sk, w, Dk, Pp, Pk, Mrow, c, n, True)
        else:
            p_columns(Xk, Sk, w0, w1, w2, w3, w4, w5, Pp, Pk, Mrow, c, n, True)
    for i in range(n):                                               # T4.6:26-30 / T4.7:20-24
        for jj in range(i + 1, n):
            Minv[off + jj, off + i] = Minv[off + i, off + jj]
    if floating:
        for i in range(6):
            for c in range(6):
                Minv[i, c] = T2[i, c]                                # T4.7:25
            for col in range(n):
                Minv[i, 6 + col] = P0[i, col]
                Minv[6 + col, i] = P0[i, col]
    return 0


@njit
def immamb_entry(ib, fb, q, vel):
    m, d, _ = views(ib, fb)
    if prepare(m, d, q, vel, q[0:0]) != 0:
        return BAD_INPUT
    return immamb(m, d)


def inverse_mass_matrix(model: Model, state: State, out: np.ndarray | None = None,
                        data: Data | None = None) -> np.ndarray:
    """IMMAmb (Table 4.7) / IMMA (Table 4.6): M^-1 (nv x nv) without forming M. With mimic joints
    (G^T M G)^-1, M from CRBAmb (coupling.py)."""
    if is_coupled(model):
        Minv = coupled_inverse(model, mass_matrix(model, state, data))
        if out is None:
            return Minv
        out[...] = Minv
        return out
    d = setup(model, state, data)
    status = immamb_entry(d.ib, d.fb, state.q, state.v)
    if status == BAD_INPUT:
        raise input_error(model, state.q, state.v)
    if status != 0:
        raise singular_mass_matrix_error(model, status, d)
    finite_result(model, d, "inverse_mass_matrix", KINEMATICS_STEPS[:1],
                  "M^-1 (the mass matrix is nearly singular at this state)", d.Minv, q=state.q)
    if out is None:
        return d.Minv.copy()
    out[...] = d.Minv
    return out
