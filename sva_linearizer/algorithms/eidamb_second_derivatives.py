# SPDX-License-Identifier: BSD-3-Clause
"""Second-order partial derivatives of EIDAmb: d2 tau/dq2, d2 tau/dnu2, d2 tau/dq dnu and dM/dq,
by the closed forms of Singh, Russell and Wensing, "Details of Second-Order Partial Derivatives of
Rigid-Body Inverse Dynamics" (Singh, Russell, Wensing; tags `# S2:n` give its equation numbers, the per-DoF
matrix forms of its Section VIII).

Coordinates are those of `extended_inverse_dynamics_derivatives` with the body twist held fixed:
the base is a 6-DoF joint whose motion subspace is the identity in the base frame (position
perturbation H exp(z^), velocity the body twist), so Psi-dot_0 = 0, Psi-ddot_0 = a_0^r x 1 and
S-dot_0 = v_0 x 1. A derivative along a DoF of a multi-DoF joint is a Lie derivative, taken at the
point where it is evaluated: d2tau_dq2[i, j, k] = d/dx (D_q[i, j] at H exp(x E_k^)), which is not
symmetric in (j, k) inside the base block.

The closed forms are written in one frame; this file uses the base body's frame (body 0) at the
given state. The kinematics and EIDAmb passes are the package's own (run_eidamb); this file moves
their results (Xup, v, a, f) to body 0's frame, forms the composite quantities of S2 there and
evaluates, for every DoF ip = (i, p) and every pair of DoFs on the path from the root to body i,
the per-DoF forms. Cost: O(nv d^2) for depth d (in DoFs), a few 6-vector products per pair.

The printed forms are used with three corrections, each checked against finite differences:
the outer transposes printed in S2:267, 276, 284 and 286 are dropped (they do not even match in
shape for a revolute-base pair); the q-nu case 1B uses S2:233, not its 'simplified' form S2:234
(which merges two terms that differ); K16 for j > i is B^C_j[S_j] (S2:108), not B^C_i[S_j].
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

if TYPE_CHECKING:
    from ..data import Data
    from ..model import Model
    from ..state import State

from .._jit import njit
from ..data import _available_memory
from ..layout import views
from ..spatial_ops import cross_f, cross_m, dot6, mv
from .common import EIDAMB_STEPS, NOT_FINITE, largest_inputs, not_finite, overflow_error
from .eidamb import run_eidamb

COMPILE_GROUP = "second_order"   # the compile group of this module's kernels (_jit)


class SecondOrderDerivatives:
    """The second-order partial derivatives of EIDAmb's output tau = [tau_base (6); tau] (floating
    base) or tau (fixed base) at one state, each an (nv, nv, nv) array indexed [tau row, inner
    derivative, outer derivative], in the coordinates of `extended_inverse_dynamics_derivatives`
    (z_q = [z_H (6), s], H -> H exp(z_H^); nu = [v (6, body twist), r])."""

    __slots__ = ("d2tau_dq2", "d2tau_dnu2", "d2tau_dq_dnu", "dM_dq")

    d2tau_dq2: np.ndarray
    """[i, j, k] = d/dz_q[k] (d tau_i / d z_q[j]): column j of D_q differentiated along z_q[k]
    (with nu and nu_dot fixed). In the base block (j, k < 6) this is d2/(dx dy) of
    tau(H exp(x E_k^) exp(y E_j^)) at 0, E_k the k-th unit twist: not symmetric in (j, k); the
    two orders differ by the bracket of se(3): d2tau_dq2[:, j, k] - d2tau_dq2[:, k, j] =
    D_q[:, :6] (E_k x E_j), x the motion cross product. Every other pair is symmetric."""
    d2tau_dnu2: np.ndarray
    """[i, j, k] = d/dnu[k] (d tau_i / d nu[j]): symmetric in (j, k)."""
    d2tau_dq_dnu: np.ndarray
    """[i, j, k] = d/dnu[k] (d tau_i / d z_q[j]) = d/dz_q[j] (d tau_i / d nu[k])."""
    dM_dq: np.ndarray
    """[i, j, k] = d M[i, j] / d z_q[k] (M the mass matrix in these coordinates, as mass_matrix
    gives it): symmetric in (i, j)."""

    def __init__(self, d2tau_dq2, d2tau_dnu2, d2tau_dq_dnu, dM_dq):
        self.d2tau_dq2 = d2tau_dq2
        self.d2tau_dnu2 = d2tau_dnu2
        self.d2tau_dq_dnu = d2tau_dq_dnu
        self.dM_dq = dM_dq

    def contract(self, lam: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lam^T d2tau_dq2, lam^T d2tau_dnu2, lam^T d2tau_dq_dnu), each (nv, nv): the second
        derivatives of the scalar lam . tau (sum over the tau index), the blocks of a
        Lagrangian's Hessian. Computed from the tensors (nv^3 multiply-adds each, less than the
        tensors' own cost)."""
        lam = np.asarray(lam, dtype=float)
        return (np.tensordot(lam, self.d2tau_dq2, axes=1), np.tensordot(lam, self.d2tau_dnu2, axes=1),
                np.tensordot(lam, self.d2tau_dq_dnu, axes=1))

    def __repr__(self):
        return f"<SecondOrderDerivatives nv={self.d2tau_dq2.shape[0]}>"


# ------------------------------------------------------------------------------------------------
# compiled kernels


@njit(inline="always")
def _mm(A, B, out):
    """out = A B (6x6); out aliases neither."""
    for i in range(6):
        for j in range(6):
            s = 0.0
            for k in range(6):
                s += A[i, k] * B[k, j]
            out[i, j] = s


@njit(inline="always")
def _mtm(A, B, out):
    """out = A^T B (6x6); out aliases neither."""
    for i in range(6):
        for j in range(6):
            s = 0.0
            for k in range(6):
                s += A[k, i] * B[k, j]
            out[i, j] = s


@njit(inline="always")
def _mtv(A, x, out):
    """out = A^T x (6x6 times 6)."""
    for i in range(6):
        s = 0.0
        for k in range(6):
            s += A[k, i] * x[k]
        out[i] = s


@njit(inline="always")
def _crf_left(v, M, out, sign):
    """out += sign (C + C^T), C = (v x*) M: for a symmetric M, C + C^T = v x* M - M v x (as
    -M (v x) = ((v x*) M)^T)."""
    for c in range(6):
        l0, l1, l2, w0, w1, w2 = v[0], v[1], v[2], v[3], v[4], v[5]
        f0, f1, f2, n0, n1, n2 = M[0, c], M[1, c], M[2, c], M[3, c], M[4, c], M[5, c]
        # (v x*) [f; n] = [w x f; l x f + w x n]
        o0 = w1 * f2 - w2 * f1
        o1 = w2 * f0 - w0 * f2
        o2 = w0 * f1 - w1 * f0
        o3 = l1 * f2 - l2 * f1 + w1 * n2 - w2 * n1
        o4 = l2 * f0 - l0 * f2 + w2 * n0 - w0 * n2
        o5 = l0 * f1 - l1 * f0 + w0 * n1 - w1 * n0
        out[0, c] += sign * o0
        out[1, c] += sign * o1
        out[2, c] += sign * o2
        out[3, c] += sign * o3
        out[4, c] += sign * o4
        out[5, c] += sign * o5
        out[c, 0] += sign * o0
        out[c, 1] += sign * o1
        out[c, 2] += sign * o2
        out[c, 3] += sign * o3
        out[c, 4] += sign * o4
        out[c, 5] += sign * o5


@njit(inline="always")
def _add_xbar(f, out, e):
    """out += f x-bar*, the matrix with column c = e_c x* f (e: a 6-vector of scratch)."""
    for c in range(6):
        for i in range(6):
            e[i] = 0.0
        e[c] = 1.0
        col = out[:, c]
        cross_f(e, f, col)


@njit
def second_order_entry(ib, fb, path_ptr, path_dof, dof_body, X0, Xi, Sg, Pd, Pdd, PS, IC, KC, hC,
                       fC, v0, a0, mats, vecs, sc, T, V, X, Q):
    """S2's second-order derivatives and dM/dq after eidamb_entry at the same state.

    Writes T = d2tau_dq2, V = d2tau_dnu2, X = d2tau_dq_dnu, Q = dM_dq at the entries that can be
    nonzero (those of three DoFs on one root-to-leaf path); the others are left as they are
    (zero: the caller allocates the outputs zeroed, and the set written is the same at every
    call). Returns 0, or NOT_FINITE when a value written is NaN or infinite. Workspace
    (frame 0 = the base body's frame): X0[k] = ^0X_k, Xi[k] = ^kX_0; per DoF
    Sg (S), Pd (Psi-dot), Pdd (Psi-ddot), PS (Psi-dot + S-dot); per body the composites IC (M^C),
    KC (the symmetric part of 2B^C), hC (composite momentum: 2B^C x = KC x + x x* hC), fC
    (f^C), and v0, a0 (twist, acceleration incl. gravity); mats: 6x6 scratch; vecs: per path DoF
    11 6-vectors; sc: 6-vector scratch. path_dof[path_ptr[i]:path_ptr[i+1]]: the DoFs of the
    bodies root..i (root first); dof_body: the body of each DoF."""
    m, d, _ = views(ib, fb)
    lam, vidx, nb, floating = m.lam, m.vidx, m.nb, m.floating
    Xup, S, I, v, a, f, g0 = d.Xup, d.S, m.I, d.v, d.a, d.f, d.g0
    Tm = mats[0]
    # forward: the kinematic quantities in frame 0 (S2 Section II; Singh et al. eq. 31)
    for k in range(nb):
        if k == 0:
            for i in range(6):
                for j in range(6):
                    Xi[0, i, j] = 1.0 if i == j else 0.0
                    X0[0, i, j] = Xi[0, i, j]
        else:
            _mm(Xup[k], Xi[lam[k]], Xi[k])                       # ^kX_0 = ^kX_lam ^lamX_0
            E, F, Xk = Xi[k, 0:3, 0:3], Xi[k, 0:3, 3:6], X0[k]   # inverse of [[E, F], [0, E]]
            for i in range(3):
                for j in range(3):
                    Xk[i, j] = E[j, i]
                    Xk[i + 3, j + 3] = E[j, i]
                    Xk[i + 3, j] = 0.0
            for i in range(3):                                   # -E^T F E^T
                for j in range(3):
                    s = 0.0
                    for p in range(3):
                        for r in range(3):
                            s += E[p, i] * F[p, r] * E[j, r]
                    Xk[i, j + 3] = -s
        mv(X0[k], v[k], v0[k])
        mv(X0[k], a[k], a0[k])
        _mtv(Xi[k], f[k], fC[k])                                 # f^C (EIDAmb's subtree sums)
        if k > 0 or floating:
            _mtm(Xi[k], I[k], Tm)                                # M_k in frame 0
            _mm(Tm, Xi[k], IC[k])
            for i in range(6):
                for j in range(6):
                    KC[k, i, j] = 0.0
            _crf_left(v0[k], IC[k], KC[k], 1.0)                  # S2:15 with m = v_k: 2B sym. part
            mv(IC[k], v0[k], hC[k])
        if k > 0:
            r = vidx[k]
            mv(X0[k], S[k], Sg[r])
            for i in range(6):
                Pd[r, i] = 0.0
                Pdd[r, i] = 0.0
            vp, ap = v0[lam[k]], a0[lam[k]]
            cross_m(vp, Sg[r], Pd[r], 1.0)                       # Psi-dot = v_lam x S
            cross_m(ap, Sg[r], Pdd[r], 1.0)                      # Psi-ddot = a_lam x S
            cross_m(vp, Pd[r], Pdd[r], 1.0)                      #   + v_lam x Psi-dot
            for i in range(6):
                PS[r, i] = Pd[r, i]
            cross_m(v0[k], Sg[r], PS[r], 1.0)                    # + S-dot, S-dot = v_k x S
        elif floating:
            for c in range(6):                                   # the base: S_0 = 1
                for i in range(6):
                    Sg[c, i] = 1.0 if i == c else 0.0
                    Pd[c, i] = 0.0
                    Pdd[c, i] = 0.0
                    PS[c, i] = 0.0
                cross_m(g0, Sg[c], Pdd[c], 1.0)                  # Psi-ddot_0 = a_0^r x 1
                cross_m(v0[0], Sg[c], PS[c], 1.0)                # S-dot_0 = v_0 x 1
    for k in range(nb - 1, 0, -1):                               # composites (S2 eq. 119)
        p = lam[k]
        if p > 0 or floating:
            for i in range(6):
                hC[p, i] += hC[k, i]
                for j in range(6):
                    IC[p, i, j] += IC[k, i, j]
                    KC[p, i, j] += KC[k, i, j]
    bad = False                 # some written value is not finite (not_finite ORed over them)
    Z, K1, K2, DM = mats[1], mats[2], mats[3], mats[4]
    ICs, BTs2, t2, t3, e = sc[0], sc[1], sc[2], sc[3], sc[4]
    for i in range(nb):
        if i == 0 and not floating:
            continue
        a_, b_ = path_ptr[i], path_ptr[i + 1]
        L = b_ - a_
        ni = 6 if i == 0 else 1
        na = L - ni                                              # path DoFs strictly above body i
        ICi, KCi, hCi, fCi = IC[i], KC[i], hC[i], fC[i]
        for ip in range(vidx[i], vidx[i] + ni):
            s, psd, psdd, ps = Sg[ip], Pd[ip], Pdd[ip], PS[ip]
            # per-DoF matrices (S2 Section VIII): K1 = s x* M^C - M^C s x, Z = 2 B^C[s],
            # DM = s x* M^C + (M^C s) x-bar*, K2 = 2 (B^C[psd] + s x* B^C - B^C s x)
            mv(ICi, s, ICs)
            for r in range(6):
                for c in range(6):
                    K1[r, c] = 0.0
                    K2[r, c] = 0.0
            _crf_left(s, ICi, K1, 1.0)
            for r in range(6):
                for c in range(6):
                    Z[r, c] = K1[r, c]
                    DM[r, c] = 0.0
            _add_xbar(ICs, Z, e)
            for c in range(6):                                   # DM = C1 + ICs x-bar*, C1 = s x* M^C
                col = DM[:, c]
                cross_f(s, ICi[:, c], col)
            _add_xbar(ICs, DM, e)
            _crf_left(psd, ICi, K2, 1.0)                         # 2 B^C[psd] (sym. part)
            _crf_left(s, KCi, K2, 1.0)                           # s x* KC - KC s x
            mv(ICi, psd, t2)                                     # (t2 as scratch)
            cross_f(s, hCi, t2)                                  # (s x* hC: P3 on hC x-bar*)
            _add_xbar(t2, K2, e)
            mv(KCi, s, BTs2)                                     # 2 B^C^T s = KC s - s x* hC
            for r in range(6):
                t2[r] = 0.0
            cross_f(s, hCi, t2)
            for r in range(6):
                BTs2[r] -= t2[r]
            # t2 = 2B^C s + M^C (psd + sdot) (IDSVA line 14); t3 = 2B^C psd + M^C psdd + f^C x-bar* s
            mv(KCi, s, t2)
            cross_f(s, hCi, t2)
            for r in range(6):
                e[r] = ps[r]
            for r in range(6):
                t2[r] += ICi[r, 0] * e[0] + ICi[r, 1] * e[1] + ICi[r, 2] * e[2] + ICi[r, 3] * e[3] \
                    + ICi[r, 4] * e[4] + ICi[r, 5] * e[5]
            mv(KCi, psd, t3)
            cross_f(psd, hCi, t3)
            for r in range(6):
                t3[r] += ICi[r, 0] * psdd[0] + ICi[r, 1] * psdd[1] + ICi[r, 2] * psdd[2] \
                    + ICi[r, 3] * psdd[3] + ICi[r, 4] * psdd[4] + ICi[r, 5] * psdd[5]
            cross_f(s, fCi, t3)
            # per path DoF b: the vectors the pair products take
            for pb in range(L):
                B = path_dof[a_ + pb]
                Sb, Pb, Pbb, PSb = Sg[B], Pd[B], Pdd[B], PS[B]
                u1, u2, y, w, z, k1s, dm, x, g, h, eb = (
                    vecs[pb, 0], vecs[pb, 1], vecs[pb, 2], vecs[pb, 3], vecs[pb, 4], vecs[pb, 5],
                    vecs[pb, 6], vecs[pb, 7], vecs[pb, 8], vecs[pb, 9], vecs[pb, 10])
                mv(Z, Pb, u1)                                    # u1 = -2B^C[s] Psi-dot_b
                for r in range(6):
                    u1[r] = -u1[r]
                    u2[r] = 0.0
                    g[r] = 0.0
                cross_f(Pb, BTs2, u2)                            # u2 = -Psi-dot_b x* 2B^C^T s
                cross_f(Pbb, ICs, u2)                            #      - Psi-ddot_b x* M^C s
                for r in range(6):
                    u2[r] = -u2[r]
                mv(K2, Pb, y)                                    # y = K2 Psi-dot_b + K1 Psi-ddot_b
                mv(K1, Pbb, w)
                for r in range(6):
                    y[r] += w[r]
                    w[r] = y[r]
                cross_f(Sb, t3, w)                               # w = y + S_b x* t3
                mv(Z, Sb, z)                                     # z = 2B^C[s] S_b
                mv(K1, Sb, k1s)                                  # k1s = K1 S_b
                if pb >= na:
                    mv(DM, Sb, dm)
                mv(K2, Sb, x)                                    # x = K2 S_b + K1 (Psi-dot + S-dot)_b
                mv(K1, PSb, h)
                for r in range(6):
                    x[r] += h[r]
                cross_f(Sb, ICs, g)                              # g = S_b x* M^C s
                for r in range(6):
                    h[r] = -u1[r]
                cross_f(Sb, t2, h)                               # h = 2B^C[s] Psi-dot_b + S_b x* t2
                for r in range(6):                               # eb = u1 + 2 Psi-dot_b x* M^C s
                    eb[r] = u1[r]                                #      + S_b x* 2B^C^T s
                cross_f(Pb, ICs, eb)
                cross_f(Pb, ICs, eb)
                cross_f(Sb, BTs2, eb)
            for pa in range(L):
                A = path_dof[a_ + pa]
                SA, PA, PSA = Sg[A], Pd[A], PS[A]
                above = pa < na
                bA = dof_body[A]
                for pb in range(L):
                    B = path_dof[a_ + pb]
                    vb = vecs[pb]
                    same = dof_body[B] == bA
                    b_le_a = pb <= pa or same                    # body(B) on the path root..body(A)
                    # tau of ip, both derivatives on the path (cases 'A')
                    if b_le_a:
                        val = dot6(PA, vb[0]) + dot6(SA, vb[1])  # S2:267 (1A)
                        T[ip, A, B] = val
                        if not same:
                            T[ip, B, A] = val                    # S2:269
                            val2 = -dot6(SA, vb[4])              # S2:276-277 (A)
                            V[ip, A, B] = val2
                            V[ip, B, A] = val2
                        else:
                            val2 = -dot6(SA, vb[5])              # S2:278 (B)
                            V[ip, A, B] = val2
                        val3 = dot6(SA, vb[0])                   # S2:284 (1A)
                    else:                                        # S2:233 (1B)
                        val, val2 = 0.0, 0.0
                        val3 = dot6(SA, vb[10]) + dot6(PSA, vb[8])
                    X[ip, B, A] = val3
                    bad |= not_finite(val + val2 + val3)
                    if not above:
                        continue
                    # tau of A, strictly above body i (cases 'B', 'C')
                    if b_le_a:
                        val = dot6(SA, vb[2])                    # S2:273-275 (1C)
                        T[A, B, ip] = val
                        T[A, ip, B] = val
                        val2 = -dot6(SA, vb[0])                  # S2:285 (2A)
                        X[A, B, ip] = val2
                        val3 = 0.0
                    else:
                        val = dot6(SA, vb[3])                    # S2:270-272 (1B)
                        T[A, ip, B] = val
                        if pb < na:
                            T[A, B, ip] = val
                        val2 = dot6(SA, vb[9])                   # S2:287 (2B)
                        X[A, B, ip] = val2
                        val3 = dot6(SA, vb[8])                   # S2:292-293
                        Q[A, ip, B] = val3
                        Q[ip, A, B] = val3
                    bad |= not_finite(val + val2 + val3)
                    if pb < na:
                        val = dot6(SA, vb[4])                    # S2:279-280 (C), 282-283 (E)
                        V[A, B, ip] = val
                        V[A, ip, B] = val
                        val2 = dot6(SA, vb[7])                   # S2:288-289 (1C, 2C)
                        X[A, ip, B] = val2
                        val3 = dot6(SA, vb[5])                   # S2:294-295
                        Q[A, B, ip] = val3
                    else:
                        val = dot6(SA, vb[6])                    # S2:281 (D)
                        V[A, ip, B] = val
                        val2, val3 = 0.0, 0.0
                    bad |= not_finite(val + val2 + val3)
    return NOT_FINITE if bad else 0


# ------------------------------------------------------------------------------------------------
# Python wrapper

class _Workspace:
    """The second-order workspace of one Data (per Data, made on first use: Data.copy drops it)."""

    def __init__(self, d: Data):
        nb, nv = d.lam.shape[0], d.nv
        lam, vidx = d.lam, d.vidx
        dofs = [list(range(6)) if d.floating_base else []]
        for k in range(1, nb):
            dofs.append([int(vidx[k])])
        paths, ptr = [], [0]
        path_of = [None] * nb
        for k in range(nb):
            path_of[k] = (path_of[lam[k]] if k > 0 else []) + dofs[k]
            paths += path_of[k]
            ptr.append(len(paths))
        self.path_ptr = np.array(ptr, dtype=np.int64)
        self.path_dof = np.array(paths, dtype=np.int64)
        self.dof_body = np.zeros(nv, dtype=np.int64)
        for k in range(nb):
            for j in dofs[k]:
                self.dof_body[j] = k
        lmax = max((len(p) for p in path_of), default=0)
        self.X0, self.Xi = np.zeros((nb, 6, 6)), np.zeros((nb, 6, 6))
        self.Sg, self.Pd, self.Pdd, self.PS = (np.zeros((nv, 6)) for _ in range(4))
        self.IC, self.KC = np.zeros((nb, 6, 6)), np.zeros((nb, 6, 6))
        self.hC, self.fC, self.v0, self.a0 = (np.zeros((nb, 6)) for _ in range(4))
        self.mats = np.zeros((5, 6, 6))
        self.vecs = np.zeros((max(lmax, 1), 11, 6))
        self.sc = np.zeros((5, 6))
        self.out = None         # the result arrays of calls with data= (see second_order_outputs)

    def args(self):
        return (self.path_ptr, self.path_dof, self.dof_body, self.X0, self.Xi, self.Sg, self.Pd,
                self.Pdd, self.PS, self.IC, self.KC, self.hC, self.fC, self.v0, self.a0, self.mats,
                self.vecs, self.sc)


def _outputs(model: Model, nv: int) -> tuple[np.ndarray, ...]:
    """Four zeroed (nv, nv, nv) arrays, after checking that they fit in memory."""
    nbytes = 4 * 8 * nv ** 3
    avail = _available_memory() if nbytes > 2**26 else None      # (64 MiB: nv > 127)
    if avail is not None and nbytes > avail:
        raise ValueError(f"model '{model.name}' (nv={nv}) needs {nbytes / 2**30:.1f} GiB for its "
                         f"second-order derivatives (4 arrays of nv^3); only {avail / 2**30:.1f} GiB "
                         "of memory is available")
    return tuple(np.zeros((4, nv, nv, nv)))         # one allocation, four C-contiguous views


def extended_inverse_dynamics_second_derivatives(model: Model, state: State, nu_dot: ArrayLike,
                                                 data: Data | None = None) -> SecondOrderDerivatives:
    """Second-order partial derivatives of EIDAmb at (state, nu_dot): d2tau_dq2, d2tau_dnu2,
    d2tau_dq_dnu and dM_dq, each (nv, nv, nv), [tau row, inner, outer derivative] (see
    SecondOrderDerivatives). They differentiate once more the D_q, D_nu of
    `extended_inverse_dynamics_derivatives(model, state, nu_dot)` (base velocity: the body twist):
    d2tau_dq2[:, j, k] = d D_q[:, j] / d z_q[k], d2tau_dq_dnu[:, j, k] = d D_q[:, j] / d nu[k],
    d2tau_dnu2[:, j, k] = d D_nu[:, j] / d nu[k], with z_q = [z_H (H -> H exp(z_H^)), s] and
    nu = [body twist v, r]. Base block of d2tau_dq2 (j, k < 6): D_q[:, j] at H exp(x E_k^)
    differentiated in x, i.e. d2/(dx dy) tau(H exp(x E_k^) exp(y E_j^)) at 0 (E_k the k-th
    unit twist); it is not symmetric: d2tau_dq2[:, j, k] - d2tau_dq2[:, k, j] = D_q[:, :6]
    (E_k x E_j), x the motion cross product. Every other pair of indices is symmetric.
    dM_dq[i, j, k] = d M[i, j] / d z_q[k] (it does not depend on nu or nu_dot).

    Built-in joints (revolute, prismatic, helical) only: a custom joint's jcalc / jcalcderiv do
    not give the second derivative of X_J that this needs (ValueError).

    With `data`, the result's arrays belong to it and the next call with that Data overwrites
    them; without, they are new arrays."""
    if model.arrays().custom:
        names = ", ".join(repr(model.joint_names[j]) for j in model.arrays().custom)
        raise ValueError(f"extended_inverse_dynamics_second_derivatives: joint(s) {names} are custom "
                         "joints (Joint.custom), whose jcalc and jcalcderiv do not give the second "
                         "derivative of X_J that second-order derivatives need; use built-in joints")
    d = run_eidamb(model, state, nu_dot, data)
    ws = d.__dict__.get("_second_order")
    if ws is None:
        ws = d.__dict__["_second_order"] = _Workspace(d)
    nv = model.nv
    if data is None:
        out = _outputs(model, nv)
    else:
        if ws.out is None:
            ws.out = _outputs(model, nv)
        out = ws.out
    if second_order_entry(d.ib, d.fb, *ws.args(), *out) != 0:
        raise overflow_error(model, d, "extended_inverse_dynamics_second_derivatives", EIDAMB_STEPS,
                             "the second derivatives",
                             largest_inputs(q=state.q, v=state.v, nu_dot=nu_dot))
    return SecondOrderDerivatives(*out)
