"""Array kernels of the thesis's recursive algorithms (Bos 2019, seeds/004), JIT-compiled when numba
is installed (see _jit.py). One implementation of each algorithm; the Python layer in algorithms.py
prepares the arrays and calls these.

Indexing: body 0 is the base (the thesis's body 0), bodies k = 1..N are moved by joint k-1.
lam[k] is the parent body of body k (lam[0] = -1). Per-body arrays have N+1 rows; entry 0 of the
joint arrays (Xup, dXup, S) is unused. All quantities are in body coordinates, linear-angular order.
  Xup[k]  = ^kX_{lam(k)} = X_J(s) ^{lam(k)|k}X_{lam(k)}   (EIDAmb line 16)
  dXup[k] = d Xup[k] / d s_k                               (Table 4.3 line 3)
  S[k]    = Gamma_{Jk}, the joint's motion subspace
Gravity enters as a fictitious upward acceleration of the base (thesis line 7: a_0^r = ^0X_A a_grav,
a_grav = -g), so every body acceleration a[k] below includes it.
"""
import numpy as np

from ._jit import njit


@njit
def skew(a):
    out = np.zeros((3, 3))
    out[0, 1] = -a[2]
    out[0, 2] = a[1]
    out[1, 0] = a[2]
    out[1, 2] = -a[0]
    out[2, 0] = -a[1]
    out[2, 1] = a[0]
    return out


@njit
def crm(v):
    """v x (2.33): [[w^, v^], [0, w^]]."""
    out = np.zeros((6, 6))
    w = skew(v[3:6])
    out[0:3, 0:3] = w
    out[0:3, 3:6] = skew(v[0:3])
    out[3:6, 3:6] = w
    return out


@njit
def crf(v):
    """v x* = -(v x)^T (2.42): [[w^, 0], [v^, w^]]."""
    out = np.zeros((6, 6))
    w = skew(v[3:6])
    out[0:3, 0:3] = w
    out[3:6, 0:3] = skew(v[0:3])
    out[3:6, 3:6] = w
    return out


@njit
def fbar(h):
    """The matrix B(h) with B(h) v = v x* h, i.e. d(v x* h)/dv (the thesis's  (.) x-bar* h)."""
    out = np.zeros((6, 6))
    P = skew(h[0:3])
    out[0:3, 3:6] = -P
    out[3:6, 0:3] = -P
    out[3:6, 3:6] = -skew(h[3:6])
    return out


@njit
def cross_m(v, u):
    """v x u for motion vectors."""
    return crm(v) @ u


@njit
def cross_f(v, f):
    """v x* f for a motion v and a force f."""
    return crf(v) @ f


@njit
def rotation(axis, angle):
    """Active rotation exp(angle axis^)."""
    k = skew(axis)
    return np.eye(3) + np.sin(angle) * k + (1.0 - np.cos(angle)) * (k @ k)


@njit
def jcalc_builtin(jtype, jaxis, jpitch, s, XJ, dXJ, S):
    """jcalc / jcalcderiv (Appendix B.2, B.3) for revolute (0), prismatic (1), helical (2) joints
    about arbitrary unit axes, writing rows 1..N of XJ, dXJ, S. Custom joints (3) are skipped.
    X_J = [[E, o^ E], [0, E]] with E = R(e, s)^T and o = -(translation along e), so the child moves
    the way Gamma says; dX_J/ds = -(Gamma x) X_J."""
    n = jtype.shape[0]
    for j in range(n):
        t = jtype[j]
        if t == 3:
            continue
        k = j + 1
        e = jaxis[j]
        S[k, :] = 0.0
        if t == 0:
            S[k, 3:6] = e
            E = np.ascontiguousarray(rotation(e, s[j]).T)
            o = np.zeros(3)
        elif t == 1:
            S[k, 0:3] = e
            E = np.eye(3)
            o = -s[j] * e
        else:
            S[k, 0:3] = jpitch[j] * e
            S[k, 3:6] = e
            E = np.ascontiguousarray(rotation(e, s[j]).T)
            o = -jpitch[j] * s[j] * e
        XJ[k, :, :] = 0.0
        XJ[k, 0:3, 0:3] = E
        XJ[k, 0:3, 3:6] = skew(o) @ E
        XJ[k, 3:6, 3:6] = E
        dXJ[k] = -crm(S[k]) @ XJ[k]


@njit
def tree_transforms(Xtree, XJ, dXJ, Xup, dXup):
    """EIDAmb line 16 and Table 4.3 line 3: ^kX_lam = X_J Xtree and its s_k-derivative."""
    for k in range(1, Xup.shape[0]):
        Xup[k] = XJ[k] @ Xtree[k]
        dXup[k] = dXJ[k] @ Xtree[k]


@njit
def eidamb(lam, Xup, S, I, r, rdot, v, a, f, tau):
    """EIDAmb (Table 4.1), with the base acceleration folded into the body accelerations.

    On entry v[0] is the base twist v_0 and a[0] = ^0a_{A,0} + a_0^r (base acceleration plus the
    gravity term of line 7); for a fixed base v[0] = 0 and a[0] = a_0^r. Then
      a[k] = a_k^r + ^k a_{A,0}   (lines 18 and 31 in one recursion)
      f[k] = M_k a[k] + v_k x* M_k v_k, accumulated over the subtree (lines 22, 27)
    so that f[k] = M^c_k ^k a_{A,0} + b^c_k, tau_k = Gamma^T f[k] (line 32), and
    f[0] = M^c_0 a_0 + 0F r_dot + b^vp_0 = ID_b (line 41): the r_dot terms that line 41 adds
    through 0F are already inside a[k]."""
    nb = lam.shape[0]
    f[0] = I[0] @ a[0] + cross_f(v[0], I[0] @ v[0])            # lines 10-11
    for k in range(1, nb):                                       # line 13
        p = lam[k]
        vJ = S[k] * r[k - 1]                                     # line 15
        v[k] = Xup[k] @ v[p] + vJ                                # line 17
        a[k] = Xup[k] @ a[p] + S[k] * rdot[k - 1] + cross_m(v[k], vJ)   # lines 18, 31
        f[k] = I[k] @ a[k] + cross_f(v[k], I[k] @ v[k])          # lines 21-22
    for k in range(nb - 1, 0, -1):                               # line 25
        tau[k - 1] = S[k] @ f[k]                                 # line 32 (subtree of k complete)
        f[lam[k]] += Xup[k].T @ f[k]                             # line 27


@njit
def eidamb_derivatives(lam, Xup, dXup, S, I, r, v, a, f, floating, g0, dv, da, df, D):
    """Derivatives of EIDAmb w.r.t. H, s, v, r (Tables 4.2-4.5) in one forward-mode pass.

    Columns of the 6 x nx tangents dv[k], da[k], df[k] and of D (nv x nx):
      floating: [z_H (6) | s (N) | v (6, body twist) | r (N)];  fixed: [s (N) | r (N)].
    Needs v, a, f from eidamb (f[k] as subtree sums) at the same state and acceleration.
    g0 = a_0^r[0:3] = ^0R_A a_grav. With the body twist held fixed (thesis_notes section 3) v_0 does
    not depend on H (Table 4.2 line 1 is zero) and only gravity does (line 2).
    Table 4.3's dM^c/ds_k propagation (lines 14-18, 24-26, 30-46) is not needed: M^c ^k a_{A,0} is
    carried inside f[k] (see eidamb), whose s-derivative is propagated directly (lines 19-20)."""
    nb = lam.shape[0]
    n = nb - 1
    nx = D.shape[1]
    if floating:
        oH, os_, ov, orr, row0 = 0, 6, 6 + n, 12 + n, 6
    else:
        oH, os_, ov, orr, row0 = -1, 0, -1, n, 0
    dv[0] = 0.0
    da[0] = 0.0
    if floating:
        for c in range(6):
            dv[0, c, ov + c] = 1.0                               # Table 4.4 line 1
        da[0, 0:3, oH + 3:oH + 6] = skew(g0)                     # Table 4.2 line 2
    h = I[0] @ v[0]
    df[0] = I[0] @ da[0] + fbar(h) @ dv[0] + crf(v[0]) @ (I[0] @ dv[0])   # lines 3-4 (Tables 4.2, 4.4)
    for k in range(1, nb):
        p = lam[k]
        j = k - 1
        vJ = S[k] * r[j]
        dv[k] = Xup[k] @ dv[p]                                   # 4.2 l6, 4.3 l4, 4.4 l5, 4.5 l3
        dv[k, :, os_ + j] += dXup[k] @ v[p]                      # 4.3 l5
        dv[k, :, orr + j] += S[k]                                # 4.5 l4
        da[k] = Xup[k] @ da[p] - crm(vJ) @ dv[k]                 # 4.2 l7, 4.3 l6, 4.4 l6, 4.5 l5
        da[k, :, os_ + j] += dXup[k] @ a[p]                      # 4.3 l7 (+ l29)
        da[k, :, orr + j] += cross_m(v[k], S[k])                 # 4.5 l6
        h = I[k] @ v[k]
        df[k] = I[k] @ da[k] + fbar(h) @ dv[k] + crf(v[k]) @ (I[k] @ dv[k])   # 4.x l8-11
    for k in range(n, 0, -1):
        j = k - 1
        D[row0 + j, :] = S[k] @ df[k]                            # 4.2 l15, 4.3 l34, 4.4-4.5 l14
        p = lam[k]
        df[p] += Xup[k].T @ df[k]                                # 4.3 l19, 4.2 l12, 4.4-4.5 l11
        df[p, :, os_ + j] += dXup[k].T @ f[k]                    # 4.3 l20
    if floating:
        D[0:6, :] = df[0]                                        # 4.2 l17, 4.3 l49, 4.4-4.5 l16
    _ = nx, ov


@njit
def abamb(lam, Xup, S, I, r, tau, floating, v, c, IA, pA, U, Dd, u, a, rdd):
    """ABAmb (Appendix E.6) / ABA (E.5): forward dynamics.

    On entry v[0] is the base twist and a[0] = a_0^r (gravity); for a floating base a[0] is
    overwritten with the apparent base acceleration ^0a_{A,0} + a_0^r (the caller subtracts a_0^r).
    Zero external wrenches (Assumption 2.3)."""
    nb = lam.shape[0]
    IA[0] = I[0]
    pA[0] = cross_f(v[0], I[0] @ v[0])
    for k in range(1, nb):
        p = lam[k]
        vJ = S[k] * r[k - 1]
        v[k] = Xup[k] @ v[p] + vJ
        c[k] = cross_m(v[k], vJ)
        IA[k] = I[k]
        pA[k] = cross_f(v[k], I[k] @ v[k])
    for k in range(nb - 1, 0, -1):
        p = lam[k]
        U[k] = IA[k] @ S[k]
        Dd[k] = S[k] @ U[k]
        u[k] = tau[k - 1] - S[k] @ pA[k]
        Ia = IA[k] - np.outer(U[k], U[k]) / Dd[k]
        pa = pA[k] + Ia @ c[k] + U[k] * (u[k] / Dd[k])
        IA[p] += Xup[k].T @ Ia @ Xup[k]
        pA[p] += Xup[k].T @ pa
    if floating:
        a[0] = -np.linalg.solve(IA[0], pA[0])
    for k in range(1, nb):
        a[k] = Xup[k] @ a[lam[k]] + c[k]
        rdd[k - 1] = (u[k] - U[k] @ a[k]) / Dd[k]
        a[k] += S[k] * rdd[k - 1]


@njit
def articulated_pivots(lam, Xup, S, I, IA, Dd):
    """The ABA pivots D_k = Gamma^T M^A_k Gamma (and M^A_0): M is positive definite iff all D_k > 0
    (and M^A_0 > 0 for a floating base). Used to reject models whose mass matrix is singular."""
    nb = lam.shape[0]
    for k in range(nb):
        IA[k] = I[k]
    for k in range(nb - 1, 0, -1):
        U = IA[k] @ S[k]
        Dd[k] = S[k] @ U
        if Dd[k] > 0.0:
            Ia = IA[k] - np.outer(U, U) / Dd[k]
        else:
            Ia = IA[k]
        IA[lam[k]] += Xup[k].T @ Ia @ Xup[k]


@njit
def crbamb(lam, Xup, S, I, floating, Ic, M):
    """CRBAmb (Appendix E.4) / CRBA (E.3): the joint-space mass matrix M (nv x nv)."""
    nb = lam.shape[0]
    off = 6 if floating else 0
    for k in range(nb):
        Ic[k] = I[k]
    for k in range(nb - 1, 0, -1):
        Ic[lam[k]] += Xup[k].T @ Ic[k] @ Xup[k]
    for k in range(1, nb):
        F = Ic[k] @ S[k]
        M[off + k - 1, off + k - 1] = S[k] @ F
        m = k
        while lam[m] > 0:
            F = Xup[m].T @ F
            m = lam[m]
            M[off + k - 1, off + m - 1] = S[m] @ F
            M[off + m - 1, off + k - 1] = M[off + k - 1, off + m - 1]
        if floating:
            F = Xup[m].T @ F
            M[0:6, off + k - 1] = F
            M[off + k - 1, 0:6] = F
    if floating:
        M[0:6, 0:6] = Ic[0]


@njit
def immamb(lam, Xup, S, I, floating, sub_ptr, sub_idx, IA, U, Dd, Fc, P, Minv):
    """IMMA (Table 4.6, fixed base) and IMMAmb (Table 4.7, moving base): M^-1 without forming M.

    subtree(k) (as joint indices, k's own included) is sub_idx[sub_ptr[k]:sub_ptr[k+1]].
    Fc[k] is the thesis's 6 x N matrix F_k stored transposed (N x 6, a row per column), P[k] the 6 x N matrix P_k. Minv is nv x nv with the
    base block first for a moving base."""
    nb = lam.shape[0]
    n = nb - 1
    off = 6 if floating else 0
    Minv[:, :] = 0.0
    for k in range(nb):                                              # lines 1-5
        IA[k] = I[k]
        Fc[k] = 0.0
    for k in range(n, 0, -1):                                        # line 6
        j = k - 1
        p = lam[k]
        U[k] = IA[k] @ S[k]                                          # line 7
        Dd[k] = S[k] @ U[k]                                          # line 8
        Minv[off + j, off + j] = 1.0 / Dd[k]                         # line 9
        for t in range(sub_ptr[k], sub_ptr[k + 1]):
            col = sub_idx[t]
            Minv[off + j, off + col] -= (S[k] @ Fc[k, col]) / Dd[k]          # line 10
            if p > 0 or floating:                                    # line 11 (4.6); always (4.7)
                Fc[p, col] += Xup[k].T @ (Fc[k, col] + U[k] * Minv[off + j, off + col])  # 12 / 11
        Ia = IA[k] - np.outer(U[k], U[k]) / Dd[k]                    # line 13 / 12
        IA[p] += Xup[k].T @ Ia @ Xup[k]                              # line 14 / 13
    if floating:
        IA0inv = np.linalg.inv(IA[0])
        P[0] = -IA0inv @ np.ascontiguousarray(Fc[0].T)                                       # 4.7 line 15
    else:
        IA0inv = np.zeros((6, 6))
        P[0] = 0.0
    for k in range(1, nb):                                           # line 17 / 16
        j = k - 1
        p = lam[k]
        Minv[off + j, off:] -= (U[k] @ (Xup[k] @ P[p])) / Dd[k]      # line 19 / 17
        P[k] = np.outer(S[k], Minv[off + j, off:]) + Xup[k] @ P[p]   # lines 21-23 / 18
    for i in range(n):                                               # lines 26-30 / 20-24
        for jj in range(i + 1, n):
            Minv[off + jj, off + i] = Minv[off + i, off + jj]
    if floating:
        Minv[0:6, 0:6] = IA0inv                                      # 4.7 line 25
        Minv[0:6, 6:] = P[0]
        Minv[6:, 0:6] = P[0].T
