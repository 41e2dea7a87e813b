"""Array kernels of the thesis's recursive algorithms (Bos 2019, seeds/004), JIT-compiled when numba
is installed (see _jit.py). One implementation of each algorithm; the Python layer (algorithms.py,
linearize.py) prepares the arrays and calls these.

Indexing: body 0 is the base (the thesis's body 0), bodies k = 1..N are moved by joint j = k-1.
lam[k] is the parent body of body k (lam[0] = -1). Per-body arrays have N+1 rows (row 0 of the
joint arrays is unused). All quantities are in body coordinates, linear-angular order.
  Xup[k]  = ^kX_{lam(k)} = X_J(s) ^{lam(k)|k}X_{lam(k)}   (EIDAmb line 16)
  dXup[k] = d Xup[k] / d s_k                               (Table 4.3 line 3)
  S[k]    = Gamma_{Jk}, the joint's motion subspace
Gravity enters as a fictitious upward acceleration of the base (thesis line 7: a_0^r = ^0X_A a_grav,
a_grav = -g), so every body acceleration a[k] below includes it.

Speed: the kernels allocate nothing; 6-vector and 6x6 products are written out as loops, which numba
compiles to straight-line code. The derivative pass (Tables 4.2-4.5) touches only the columns a body
depends on (the base, its ancestors' joints, and on the way back its subtree's), which makes it
O(N d) instead of O(N^2) (d = depth of the tree). `linearize_packed` runs the whole linearization
in one compiled call on two flat buffers (model + workspace, see `views`), and `linearize_batch_packed`
does so for many states, in parallel over chunks of the batch.
"""
import numpy as np

from ._jit import HAVE_NUMBA, njit, prange

REVOLUTE, PRISMATIC, HELICAL, CUSTOM = 0, 1, 2, 3


# --------------------------------------------------------------------------------------------
# 6-vector / 6x6 helpers (no allocation; outputs may alias inputs where noted)
# --------------------------------------------------------------------------------------------
@njit
def mv(X, x, out):
    """out = X x (6x6 times 6); out must not alias x."""
    for i in range(6):
        acc = 0.0
        for m in range(6):
            acc += X[i, m] * x[m]
        out[i] = acc


@njit
def mv_add(X, x, out):
    """out += X x."""
    for i in range(6):
        acc = 0.0
        for m in range(6):
            acc += X[i, m] * x[m]
        out[i] += acc


@njit
def mtv_add(X, x, out):
    """out += X^T x."""
    for m in range(6):
        acc = 0.0
        for i in range(6):
            acc += X[i, m] * x[i]
        out[m] += acc


@njit
def dot6(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4] + a[5] * b[5]


@njit
def cross_m(v, u, out, sign):
    """out (+)= sign * (v x u) for motions, v x = [[w^, v^], [0, w^]] (2.33). Alias-safe."""
    l0, l1, l2, w0, w1, w2 = v[0], v[1], v[2], v[3], v[4], v[5]
    u0, u1, u2, u3, u4, u5 = u[0], u[1], u[2], u[3], u[4], u[5]
    o0 = w1 * u2 - w2 * u1 + l1 * u5 - l2 * u4
    o1 = w2 * u0 - w0 * u2 + l2 * u3 - l0 * u5
    o2 = w0 * u1 - w1 * u0 + l0 * u4 - l1 * u3
    o3 = w1 * u5 - w2 * u4
    o4 = w2 * u3 - w0 * u5
    o5 = w0 * u4 - w1 * u3
    out[0] += sign * o0
    out[1] += sign * o1
    out[2] += sign * o2
    out[3] += sign * o3
    out[4] += sign * o4
    out[5] += sign * o5


@njit
def cross_f(v, h, out):
    """out += v x* h for a motion v and a force h, v x* = -(v x)^T = [[w^, 0], [v^, w^]] (2.42).
    As a function of v this is the thesis's B(h) v = v x-bar* h. Alias-safe."""
    l0, l1, l2, w0, w1, w2 = v[0], v[1], v[2], v[3], v[4], v[5]
    f0, f1, f2, n0, n1, n2 = h[0], h[1], h[2], h[3], h[4], h[5]
    o0 = w1 * f2 - w2 * f1
    o1 = w2 * f0 - w0 * f2
    o2 = w0 * f1 - w1 * f0
    o3 = w1 * n2 - w2 * n1 + l1 * f2 - l2 * f1
    o4 = w2 * n0 - w0 * n2 + l2 * f0 - l0 * f2
    o5 = w0 * n1 - w1 * n0 + l0 * f1 - l1 * f0
    out[0] += o0
    out[1] += o1
    out[2] += o2
    out[3] += o3
    out[4] += o4
    out[5] += o5


@njit
def congruence_add(X, M, T, out):
    """out += X^T M X (6x6); T is 6x6 scratch."""
    for i in range(6):
        for c in range(6):
            acc = 0.0
            for m in range(6):
                acc += M[i, m] * X[m, c]
            T[i, c] = acc
    for r in range(6):
        for c in range(6):
            acc = 0.0
            for i in range(6):
                acc += X[i, r] * T[i, c]
            out[r, c] += acc


@njit
def inv_spd6(A, out, T):
    """out = A^-1 for a symmetric positive-definite 6x6 A (Cholesky); T is 6x6 scratch.
    Returns False if A is not numerically positive definite."""
    scale = 0.0
    for i in range(6):
        scale = max(scale, abs(A[i, i]))
    for i in range(6):                      # A = L L^T, L in the lower triangle of T
        for c in range(i + 1):
            acc = A[i, c]
            for m in range(c):
                acc -= T[i, m] * T[c, m]
            if i == c:
                if not acc > 1e-12 * scale:
                    return False
                T[i, i] = np.sqrt(acc)
            else:
                T[i, c] = acc / T[c, c]
    for c in range(6):                      # solve L L^T x = e_c, column by column
        for i in range(6):                  # L y = e_c
            acc = 1.0 if i == c else 0.0
            for m in range(i):
                acc -= T[i, m] * out[m, c]
            out[i, c] = acc / T[i, i]
        for i in range(5, -1, -1):          # L^T x = y
            acc = out[i, c]
            for m in range(i + 1, 6):
                acc -= T[m, i] * out[m, c]
            out[i, c] = acc / T[i, i]
    return True


@njit
def quat_to_rot(quat, R):
    """Rotation matrix of a unit quaternion (x, y, z, w)."""
    x, y, z, w = quat[0], quat[1], quat[2], quat[3]
    R[0, 0] = 1 - 2 * (y * y + z * z)
    R[0, 1] = 2 * (x * y - z * w)
    R[0, 2] = 2 * (x * z + y * w)
    R[1, 0] = 2 * (x * y + z * w)
    R[1, 1] = 1 - 2 * (x * x + z * z)
    R[1, 2] = 2 * (y * z - x * w)
    R[2, 0] = 2 * (x * z - y * w)
    R[2, 1] = 2 * (y * z + x * w)
    R[2, 2] = 1 - 2 * (x * x + y * y)


# --------------------------------------------------------------------------------------------
# Kinematics: jcalc (Appendix B) and the tree transforms
# --------------------------------------------------------------------------------------------
@njit
def kinematics(jtype, jaxis, jpitch, Xtree, s, XJ, dXJ, S, Xup, dXup):
    """jcalc / jcalcderiv (Appendix B.2, B.3) and ^kX_lam = X_J Xtree (EIDAmb line 16), with its
    s_k-derivative (Table 4.3 line 3), for every body k = 1..N.

    Built-in joints about a unit axis e: revolute (0), prismatic (1), helical (2, pitch):
    X_J = [[E, o^ E], [0, E]] with E = R(e, s)^T and o = -(translation along e), so the child moves
    the way Gamma says, and dX_J/ds = -(Gamma x) X_J. Custom joints (3): the caller has filled
    XJ[k], dXJ[k], S[k] from the user's jcalc / jcalcderiv."""
    nb = jtype.shape[0]
    for k in range(1, nb):
        t = jtype[k]
        X = XJ[k]
        if t != CUSTOM:
            e0, e1, e2 = jaxis[k, 0], jaxis[k, 1], jaxis[k, 2]
            q = s[k - 1]
            for i in range(6):
                S[k, i] = 0.0
            for i in range(6):
                for c in range(6):
                    X[i, c] = 0.0
            if t == PRISMATIC:
                S[k, 0], S[k, 1], S[k, 2] = e0, e1, e2
                for i in range(3):
                    X[i, i] = 1.0
                    X[i + 3, i + 3] = 1.0
                o0, o1, o2 = -q * e0, -q * e1, -q * e2
            else:
                pitch = jpitch[k] if t == HELICAL else 0.0
                S[k, 0], S[k, 1], S[k, 2] = pitch * e0, pitch * e1, pitch * e2
                S[k, 3], S[k, 4], S[k, 5] = e0, e1, e2
                sn, cs = np.sin(q), 1.0 - np.cos(q)
                # E = R^T, R = I + sin K + (1 - cos) K^2, K = e^ ; K^2 = e e^T - I
                X[0, 0] = 1.0 + cs * (e0 * e0 - 1.0)
                X[1, 1] = 1.0 + cs * (e1 * e1 - 1.0)
                X[2, 2] = 1.0 + cs * (e2 * e2 - 1.0)
                X[1, 0] = -sn * e2 + cs * e0 * e1   # E[1,0] = R[0,1]
                X[0, 1] = sn * e2 + cs * e0 * e1
                X[2, 0] = sn * e1 + cs * e0 * e2    # E[2,0] = R[0,2]
                X[0, 2] = -sn * e1 + cs * e0 * e2
                X[2, 1] = -sn * e0 + cs * e1 * e2   # E[2,1] = R[1,2]
                X[1, 2] = sn * e0 + cs * e1 * e2
                for i in range(3):
                    for c in range(3):
                        X[i + 3, c + 3] = X[i, c]
                o0, o1, o2 = -pitch * q * e0, -pitch * q * e1, -pitch * q * e2
            if o0 != 0.0 or o1 != 0.0 or o2 != 0.0:    # upper-right block o^ E
                for c in range(3):
                    E0, E1, E2 = X[0, c], X[1, c], X[2, c]
                    X[0, c + 3] = o1 * E2 - o2 * E1
                    X[1, c + 3] = o2 * E0 - o0 * E2
                    X[2, c + 3] = o0 * E1 - o1 * E0
        Y = Xup[k]
        T = Xtree[k]
        for i in range(6):
            for c in range(6):
                acc = 0.0
                for m in range(6):
                    acc += X[i, m] * T[m, c]
                Y[i, c] = acc
        dY = dXup[k]
        if t == CUSTOM:
            dX = dXJ[k]
            for i in range(6):
                for c in range(6):
                    acc = 0.0
                    for m in range(6):
                        acc += dX[i, m] * T[m, c]
                    dY[i, c] = acc
        else:                                   # d(X_J Xtree)/ds = -(Gamma x) Xup
            for c in range(6):
                for i in range(6):
                    dY[i, c] = 0.0
                cross_m(S[k], Y[:, c], dY[:, c], -1.0)


@njit
def gravity_in_base(R, a_grav, g0):
    """a_0^r = ^0X_A a_grav (EIDAmb line 7): the gravity term seen from the base frame."""
    for i in range(3):
        g0[i] = R[0, i] * a_grav[0] + R[1, i] * a_grav[1] + R[2, i] * a_grav[2]
        g0[i + 3] = 0.0


# --------------------------------------------------------------------------------------------
# EIDAmb (Table 4.1)
# --------------------------------------------------------------------------------------------
@njit
def eidamb(lam, Xup, S, I, r, rdot, v, a, f, tau, h):
    """EIDAmb (Table 4.1), with the base acceleration folded into the body accelerations.

    On entry v[0] is the base twist v_0 and a[0] = ^0a_{A,0} + a_0^r (base acceleration plus the
    gravity term of line 7); for a fixed base v[0] = 0 and a[0] = a_0^r. Then
      a[k] = a_k^r + ^k a_{A,0}   (lines 18 and 31 in one recursion)
      f[k] = M_k a[k] + v_k x* M_k v_k, accumulated over the subtree (lines 22, 27)
    so that f[k] = M^c_k ^k a_{A,0} + b^c_k, tau_k = Gamma^T f[k] (line 32), and
    f[0] = M^c_0 a_0 + 0F r_dot + b^vp_0 = ID_b (line 41): the r_dot terms that line 41 adds
    through 0F are already inside a[k]. h is 6-vector scratch."""
    nb = lam.shape[0]
    mv(I[0], v[0], h)                                            # lines 10-11
    mv(I[0], a[0], f[0])
    cross_f(v[0], h, f[0])
    for k in range(1, nb):                                       # line 13
        p = lam[k]
        rk = r[k - 1]
        mv(Xup[k], v[p], v[k])                                   # line 17
        for i in range(6):
            v[k, i] += S[k, i] * rk                              # line 15: v_J = Gamma r
        mv(Xup[k], a[p], a[k])                                   # lines 18, 31
        for i in range(6):
            a[k, i] += S[k, i] * rdot[k - 1]
        cross_m(v[k], S[k], a[k], rk)                            # v_k x v_J
        mv(I[k], v[k], h)                                        # lines 21-22
        mv(I[k], a[k], f[k])
        cross_f(v[k], h, f[k])
    for k in range(nb - 1, 0, -1):                               # line 25
        tau[k - 1] = dot6(S[k], f[k])                            # line 32 (subtree of k complete)
        mtv_add(Xup[k], f[k], f[lam[k]])                         # line 27


# --------------------------------------------------------------------------------------------
# Derivatives of EIDAmb (Tables 4.2-4.5), forward mode over the columns a body depends on
# --------------------------------------------------------------------------------------------
@njit(inline="always")
def _col_df(Ik, vk, hk, Sk, rk, dvk, dak, dfk, c, tmp):
    """Column c: da_k -= v_J x dv_k (v_J = r_k Gamma), then
    df_k = M_k da_k + dv_k x* h_k + v_k x* (M_k dv_k)   (Tables 4.2-4.5, lines 6-11)."""
    d0, d1, d2, d3, d4, d5 = dvk[c, 0], dvk[c, 1], dvk[c, 2], dvk[c, 3], dvk[c, 4], dvk[c, 5]
    if rk != 0.0:
        l0, l1, l2 = rk * Sk[0], rk * Sk[1], rk * Sk[2]
        w0, w1, w2 = rk * Sk[3], rk * Sk[4], rk * Sk[5]
        dak[c, 0] -= w1 * d2 - w2 * d1 + l1 * d5 - l2 * d4
        dak[c, 1] -= w2 * d0 - w0 * d2 + l2 * d3 - l0 * d5
        dak[c, 2] -= w0 * d1 - w1 * d0 + l0 * d4 - l1 * d3
        dak[c, 3] -= w1 * d5 - w2 * d4
        dak[c, 4] -= w2 * d3 - w0 * d5
        dak[c, 5] -= w0 * d4 - w1 * d3
    for i in range(6):
        acc = 0.0
        acc2 = 0.0
        for m in range(6):
            acc += Ik[i, m] * dak[c, m]
            acc2 += Ik[i, m] * dvk[c, m]
        dfk[c, i] = acc
        tmp[i] = acc2
    # + dv x* h  (B(h) dv, the thesis's x-bar*)
    f0, f1, f2, n0, n1, n2 = hk[0], hk[1], hk[2], hk[3], hk[4], hk[5]
    dfk[c, 0] += d4 * f2 - d5 * f1
    dfk[c, 1] += d5 * f0 - d3 * f2
    dfk[c, 2] += d3 * f1 - d4 * f0
    dfk[c, 3] += d4 * n2 - d5 * n1 + d1 * f2 - d2 * f1
    dfk[c, 4] += d5 * n0 - d3 * n2 + d2 * f0 - d0 * f2
    dfk[c, 5] += d3 * n1 - d4 * n0 + d0 * f1 - d1 * f0
    # + v x* (M dv)
    l0, l1, l2, w0, w1, w2 = vk[0], vk[1], vk[2], vk[3], vk[4], vk[5]
    f0, f1, f2, n0, n1, n2 = tmp[0], tmp[1], tmp[2], tmp[3], tmp[4], tmp[5]
    dfk[c, 0] += w1 * f2 - w2 * f1
    dfk[c, 1] += w2 * f0 - w0 * f2
    dfk[c, 2] += w0 * f1 - w1 * f0
    dfk[c, 3] += w1 * n2 - w2 * n1 + l1 * f2 - l2 * f1
    dfk[c, 4] += w2 * n0 - w0 * n2 + l2 * f0 - l0 * f2
    dfk[c, 5] += w0 * n1 - w1 * n0 + l0 * f1 - l1 * f0


@njit(inline="always")
def _mv_pair(X, x, rx, y, ry, dvk, dak, c):
    """dv_k[c] = X x[rx], da_k[c] = X y[ry] (two 6x6 products sharing the loads of X)."""
    for i in range(6):
        acc = 0.0
        acc2 = 0.0
        for m in range(6):
            acc += X[i, m] * x[rx, m]
            acc2 += X[i, m] * y[ry, m]
        dvk[c, i] = acc
        dak[c, i] = acc2


@njit(inline="always")
def _fwd_cols(X, Ik, vk, hk, Sk, rk, dvp, dap, dvk, dak, dfk, c0, c1, tmp):
    """Columns c0..c1-1 that body k inherits from its parent p (4.2 l6-7, 4.3 l4-6, 4.4 l5-6,
    4.5 l3-5): dv_k = X dv_p, da_k = X da_p - v_J x dv_k, then df_k."""
    for c in range(c0, c1):
        _mv_pair(X, dvp, c, dap, c, dvk, dak, c)
        _col_df(Ik, vk, hk, Sk, rk, dvk, dak, dfk, c, tmp)


@njit(inline="always")
def _fwd_cols_H(X, Ik, dap, dak, dfk, tmp):
    """The z_H columns 0..5 (Table 4.2 lines 6-9): v_k does not depend on H at fixed body twist
    (dv = 0), so da_k = X da_p and df_k = M_k da_k."""
    for c in range(6):
        for i in range(6):
            acc = 0.0
            for m in range(6):
                acc += X[i, m] * dap[c, m]
            tmp[i] = acc
        for i in range(6):
            dak[c, i] = tmp[i]
        for i in range(6):
            acc = 0.0
            for m in range(6):
                acc += Ik[i, m] * tmp[m]
            dfk[c, i] = acc


@njit(inline="always")
def _bwd_cols(X, Sk, dfk, dfp, Drow, perm, c0, c1, up):
    """Columns c0..c1-1 of body k on the way back: the row of joint k, Gamma^T df_k (4.2 l15,
    4.3 l34, 4.4-4.5 l14), and df_lam += X^T df_k (4.2 l12, 4.3 l19, 4.4-4.5 l11)."""
    for c in range(c0, c1):
        Drow[perm[c]] = (Sk[0] * dfk[c, 0] + Sk[1] * dfk[c, 1] + Sk[2] * dfk[c, 2]
                         + Sk[3] * dfk[c, 3] + Sk[4] * dfk[c, 4] + Sk[5] * dfk[c, 5])
        if up:
            for m in range(6):
                acc = 0.0
                for i in range(6):
                    acc += X[i, m] * dfk[c, i]
                dfp[c, m] += acc


@njit
def eidamb_derivatives(lam, anc_ptr, anc_rng, sub_ptr, sub_rng, perm, Xup, dXup, S, I, r, v, a, f,
                       floating, g0, dv, da, df, D, t6):
    """Derivatives of EIDAmb w.r.t. H, s, v, r (Tables 4.2-4.5) in one forward-mode pass.

    D (nv x 2nv) has the columns [z_H (6) | s (N) | v (6, body twist) | r (N)] (floating) or
    [s (N) | r (N)] (fixed). Inside, tangent column c of body k is dv[k, c] (a 6-vector; likewise
    da, df) in the order [z_H (6), v (6)] then (s_j, r_j) for each joint j; perm[c] is its column
    in D. Needs v, a, f from eidamb (f[k] as subtree sums) at the same state and acceleration.
    g0 = a_0^r = ^0R_A a_grav. With the body twist held fixed (thesis_notes section 3) v_0 does not
    depend on H (Table 4.2 line 1 is zero) and only gravity does (line 2).

    Sparsity: body k's velocity and acceleration depend only on the base columns and on the joints
    of its path to the base (anc_rng[anc_ptr[k]:anc_ptr[k+1]]: ranges [a, b) of joint indices,
    the strict ancestors'); its subtree force f[k] also on its subtree's joints (sub_rng, likewise;
    k's own joint is the first). Only those columns are touched: O(N d) work.
    Table 4.3's dM^c/ds_k propagation (lines 14-18, 24-26, 30-46) is not needed: M^c ^k a_{A,0} is
    carried inside f[k] (see eidamb), whose s-derivative is propagated directly (lines 19-20)."""
    nb = lam.shape[0]
    n = nb - 1
    nbase = 12 if floating else 0
    row0 = 6 if floating else 0
    nx = D.shape[1]
    for i in range(D.shape[0]):                                   # joint rows are sparse
        for c in range(nx):
            D[i, c] = 0.0
    tmp = t6[7]
    if floating:                                                  # base body: z_H and v columns
        mv(I[0], v[0], t6[0])
        for c in range(12):
            for i in range(6):
                dv[0, c, i] = 0.0
                da[0, c, i] = 0.0
            if c >= 6:
                dv[0, c, c - 6] = 1.0                             # Table 4.4 line 1
            elif c >= 3:                                          # Table 4.2 line 2: g0 x e_m
                e0 = 1.0 if c == 3 else 0.0
                e1 = 1.0 if c == 4 else 0.0
                e2 = 1.0 if c == 5 else 0.0
                da[0, c, 0] = g0[1] * e2 - g0[2] * e1
                da[0, c, 1] = g0[2] * e0 - g0[0] * e2
                da[0, c, 2] = g0[0] * e1 - g0[1] * e0
            _col_df(I[0], v[0], t6[0], S[0], 0.0, dv[0], da[0], df[0], c, tmp)   # lines 3-4
        for c in range(12, nx):                                   # joint columns of f[0]: from
            for i in range(6):                                    # the backward pass only
                df[0, c, i] = 0.0
    for k in range(1, nb):
        p = lam[k]
        j = k - 1
        rk = r[j]
        Xk, Ik, Sk, vk = Xup[k], I[k], S[k], v[k]
        dvk, dak, dfk, dvp, dap = dv[k], da[k], df[k], dv[p], da[p]
        hk = t6[0]
        mv(Ik, vk, hk)                                            # h_k = M_k v_k
        if floating:
            _fwd_cols_H(Xk, Ik, dap, dak, dfk, tmp)
            _fwd_cols(Xk, Ik, vk, hk, Sk, rk, dvp, dap, dvk, dak, dfk, 6, 12, tmp)
        for t in range(anc_ptr[k], anc_ptr[k + 1]):
            _fwd_cols(Xk, Ik, vk, hk, Sk, rk, dvp, dap, dvk, dak, dfk,
                      nbase + 2 * anc_rng[t, 0], nbase + 2 * anc_rng[t, 1], tmp)
        # own s column (4.3 l5, l7 + l29): dv_k = dXup v_p, da_k = dXup a_p - v_J x dv_k
        c = nbase + 2 * j
        _mv_pair(dXup[k], v, p, a, p, dvk, dak, c)
        _col_df(Ik, vk, hk, Sk, rk, dvk, dak, dfk, c, tmp)
        # own r column (4.5 l4, l6): dv_k = Gamma, da_k = v_k x Gamma (v_J x Gamma = 0)
        c += 1
        for i in range(6):
            dvk[c, i] = Sk[i]
            dak[c, i] = 0.0
        cross_m(vk, Sk, dak[c], 1.0)
        _col_df(Ik, vk, hk, Sk, 0.0, dvk, dak, dfk, c, tmp)
        # the subtree's columns of f[k] are filled by the backward pass
        for t in range(sub_ptr[k], sub_ptr[k + 1]):
            c0 = nbase + 2 * (j + 1) if t == sub_ptr[k] else nbase + 2 * sub_rng[t, 0]
            for c in range(c0, nbase + 2 * sub_rng[t, 1]):
                for i in range(6):
                    dfk[c, i] = 0.0
    for k in range(n, 0, -1):
        j = k - 1
        p = lam[k]
        up = p > 0 or floating
        Xk, Sk, dfk, dfp, Drow = Xup[k], S[k], df[k], df[p], D[row0 + j]
        _bwd_cols(Xk, Sk, dfk, dfp, Drow, perm, 0, nbase, up)
        for t in range(anc_ptr[k], anc_ptr[k + 1]):
            _bwd_cols(Xk, Sk, dfk, dfp, Drow, perm, nbase + 2 * anc_rng[t, 0],
                      nbase + 2 * anc_rng[t, 1], up)
        for t in range(sub_ptr[k], sub_ptr[k + 1]):
            _bwd_cols(Xk, Sk, dfk, dfp, Drow, perm, nbase + 2 * sub_rng[t, 0],
                      nbase + 2 * sub_rng[t, 1], up)
        if up:
            mtv_add(dXup[k], f[k], dfp[nbase + 2 * j])            # 4.3 l20
    if floating:
        for c in range(nx):                                       # 4.2 l17, 4.3 l49, 4.4-4.5 l16
            pc = perm[c]
            for i in range(6):
                D[i, pc] = df[0, c, i]


# --------------------------------------------------------------------------------------------
# ABAmb (E.6) / ABA (E.5), pivots, CRBAmb (E.4) / CRBA (E.3)
# --------------------------------------------------------------------------------------------
@njit
def abamb(lam, Xup, S, I, r, tau, floating, v, c, IA, pA, U, Dd, u, a, rdd, T, T2, t6):
    """ABAmb (Appendix E.6) / ABA (E.5): forward dynamics.

    On entry v[0] is the base twist and a[0] = a_0^r (gravity); for a floating base a[0] is
    overwritten with the apparent base acceleration ^0a_{A,0} + a_0^r (the caller subtracts a_0^r).
    Zero external wrenches (Assumption 2.3). T, T2: 6x6 scratch; t6: (>=2, 6) scratch.
    Returns 0, or k > 0 if the pivot D_k vanishes, or -1 if the base's M^A_0 is singular."""
    nb = lam.shape[0]
    IA[0] = I[0]
    pA[0] = 0.0
    mv(I[0], v[0], t6[0])
    cross_f(v[0], t6[0], pA[0])
    for k in range(1, nb):
        p = lam[k]
        rk = r[k - 1]
        mv(Xup[k], v[p], v[k])
        for i in range(6):
            v[k, i] += S[k, i] * rk
            c[k, i] = 0.0
        cross_m(v[k], S[k], c[k], rk)
        IA[k] = I[k]
        pA[k] = 0.0
        mv(I[k], v[k], t6[0])
        cross_f(v[k], t6[0], pA[k])
    status = _articulated_sweep(lam, Xup, S, IA, U, Dd, T, T2, pA, tau, c, u)
    if status != 0:
        return status
    if floating:
        if not inv_spd6(IA[0], T, T2):
            return -1
        for i in range(6):
            acc = 0.0
            for m in range(6):
                acc -= T[i, m] * pA[0, m]
            a[0, i] = acc
    for k in range(1, nb):
        mv(Xup[k], a[lam[k]], a[k])
        for i in range(6):
            a[k, i] += c[k, i]
        rdd[k - 1] = (u[k] - dot6(U[k], a[k])) / Dd[k]
        for i in range(6):
            a[k, i] += S[k, i] * rdd[k - 1]
    return 0


@njit
def _articulated_sweep(lam, Xup, S, IA, U, Dd, T, T2, pA, tau, c, u):
    """ABA's backward sweep (E.5-E.6): U_k = M^A_k Gamma, D_k = Gamma^T U_k,
    M^a_k = M^A_k - U U^T / D_k, M^A_lam += X^T M^a_k X, and the bias forces p^A.
    IA[k] = M_k on entry. Returns 0, or k if D_k is not positive (M singular or indefinite)."""
    nb = lam.shape[0]
    scale = 0.0
    for k in range(nb):
        scale = max(scale, abs(IA[k, 0, 0]) + abs(IA[k, 3, 3]))
    for k in range(nb - 1, 0, -1):
        p = lam[k]
        mv(IA[k], S[k], U[k])
        Dd[k] = dot6(S[k], U[k])
        if not Dd[k] > 1e-12 * scale:
            return k
        for i in range(6):
            for m in range(6):
                T2[i, m] = IA[k, i, m] - U[k, i] * U[k, m] / Dd[k]
        congruence_add(Xup[k], T2, T, IA[p])
        u[k] = tau[k - 1] - dot6(S[k], pA[k])
        mv_add(T2, c[k], pA[k])
        for i in range(6):
            pA[k, i] += U[k, i] * (u[k] / Dd[k])
        mtv_add(Xup[k], pA[k], pA[p])
    return 0


@njit
def articulated_pivots(lam, Xup, S, I, IA, Dd, T, T2):
    """The ABA pivots D_k = Gamma^T M^A_k Gamma (and M^A_0): M is positive definite iff all D_k > 0
    (and M^A_0 > 0 for a floating base). Used to reject models whose mass matrix is singular; a
    vanishing pivot is skipped so that the others are still computed."""
    nb = lam.shape[0]
    for k in range(nb):
        IA[k] = I[k]
    for k in range(nb - 1, 0, -1):
        U = T[0]
        mv(IA[k], S[k], U)
        D = dot6(S[k], U)
        Dd[k] = D
        w = 1.0 / D if D > 0.0 else 0.0
        for i in range(6):
            for m in range(6):
                T2[i, m] = IA[k, i, m] - U[i] * U[m] * w
        congruence_add(Xup[k], T2, T, IA[lam[k]])


@njit
def crbamb(lam, Xup, S, I, floating, Ic, M, t6):
    """CRBAmb (Appendix E.4) / CRBA (E.3): the joint-space mass matrix M (nv x nv)."""
    nb = lam.shape[0]
    off = 6 if floating else 0
    for k in range(nb):
        Ic[k] = I[k]
    for k in range(nb - 1, 0, -1):
        congruence_add(Xup[k], Ic[k], t6[2:8], Ic[lam[k]])
    for k in range(1, nb):
        F = t6[0]
        mv(Ic[k], S[k], F)
        M[off + k - 1, off + k - 1] = dot6(S[k], F)
        m = k
        while lam[m] > 0:
            t6[1] = 0.0
            mtv_add(Xup[m], F, t6[1])
            F[:] = t6[1]
            m = lam[m]
            M[off + k - 1, off + m - 1] = dot6(S[m], F)
            M[off + m - 1, off + k - 1] = M[off + k - 1, off + m - 1]
        if floating:
            t6[1] = 0.0
            mtv_add(Xup[m], F, t6[1])
            for i in range(6):
                M[i, off + k - 1] = t6[1, i]
                M[off + k - 1, i] = t6[1, i]
    if floating:
        for i in range(6):
            for c in range(6):
                M[i, c] = Ic[0, i, c]


# --------------------------------------------------------------------------------------------
# IMMA (Table 4.6) / IMMAmb (Table 4.7)
# --------------------------------------------------------------------------------------------
@njit
def immamb(lam, Xup, S, I, floating, sub_ptr, sub_rng, IA, U, Dd, Fc, P, Minv, T, T2, t6):
    """IMMA (Table 4.6, fixed base) and IMMAmb (Table 4.7, moving base): M^-1 without forming M.

    subtree(k) (joint indices, k's own included) is the ranges sub_rng[sub_ptr[k]:sub_ptr[k+1]].
    Fc[k, col] is column col of the thesis's 6 x N matrix F_k, P[k, col] column col of P_k.
    Minv is nv x nv with the base block first for a moving base. T, T2: 6x6 scratch.
    Returns 0, or k > 0 if the pivot D_k vanishes (M singular), or -1 if M^A_0 does."""
    nb = lam.shape[0]
    n = nb - 1
    off = 6 if floating else 0
    for i in range(Minv.shape[0]):
        for c in range(Minv.shape[1]):
            Minv[i, c] = 0.0
    scale = 0.0
    for k in range(nb):                                              # lines 1-5
        IA[k] = I[k]
        scale = max(scale, abs(I[k, 0, 0]) + abs(I[k, 3, 3]))
        for t in range(sub_ptr[k], sub_ptr[k + 1]):
            for col in range(sub_rng[t, 0], sub_rng[t, 1]):
                for i in range(6):
                    Fc[k, col, i] = 0.0
    for k in range(n, 0, -1):                                        # line 6
        j = k - 1
        p = lam[k]
        Sk, Uk, Xk, Fck, Fcp = S[k], U[k], Xup[k], Fc[k], Fc[p]
        mv(IA[k], Sk, Uk)                                            # line 7
        Dk = dot6(Sk, Uk)                                            # line 8
        Dd[k] = Dk
        if not Dk > 1e-12 * scale:
            return k
        Minv[off + j, off + j] = 1.0 / Dk                            # line 9
        up = p > 0 or floating                                       # line 11 (4.6); always (4.7)
        Mrow = Minv[off + j]
        for t in range(sub_ptr[k], sub_ptr[k + 1]):
            for col in range(sub_rng[t, 0], sub_rng[t, 1]):
                m = Mrow[off + col] - (Sk[0] * Fck[col, 0] + Sk[1] * Fck[col, 1]
                                       + Sk[2] * Fck[col, 2] + Sk[3] * Fck[col, 3]
                                       + Sk[4] * Fck[col, 4] + Sk[5] * Fck[col, 5]) / Dk  # line 10
                Mrow[off + col] = m
                if up:                                               # line 12 / 11
                    for c in range(6):
                        acc = 0.0
                        for i in range(6):
                            acc += Xk[i, c] * (Fck[col, i] + Uk[i] * m)
                        Fcp[col, c] += acc
        for i in range(6):                                           # line 13 / 12
            for m in range(6):
                T2[i, m] = IA[k, i, m] - Uk[i] * Uk[m] / Dk
        congruence_add(Xk, T2, T, IA[p])                             # line 14 / 13
    if floating:
        if not inv_spd6(IA[0], T2, T):                               # 4.7 line 25: (M^A_0)^-1
            return -1
        for col in range(n):                                         # 4.7 line 15
            for i in range(6):
                acc = 0.0
                for m in range(6):
                    acc -= T2[i, m] * Fc[0, col, m]
                P[0, col, i] = acc
    else:
        for col in range(n):
            for i in range(6):
                P[0, col, i] = 0.0
    w = t6[0]
    for k in range(1, nb):                                           # line 17 / 16
        j = k - 1
        Sk, Xk, Pk, Pp, Mrow = S[k], Xup[k], P[k], P[lam[k]], Minv[off + j]
        for i in range(6):                                           # w = X^T U / D
            w[i] = 0.0
        mtv_add(Xk, U[k], w)
        Dk = Dd[k]
        for col in range(n):
            m = Mrow[off + col] - (w[0] * Pp[col, 0] + w[1] * Pp[col, 1] + w[2] * Pp[col, 2]
                                   + w[3] * Pp[col, 3] + w[4] * Pp[col, 4]
                                   + w[5] * Pp[col, 5]) / Dk         # line 19 / 17
            Mrow[off + col] = m
            for i in range(6):                                       # lines 21-23 / 18
                acc = Sk[i] * m
                for c in range(6):
                    acc += Xk[i, c] * Pp[col, c]
                Pk[col, i] = acc
    for i in range(n):                                               # lines 26-30 / 20-24
        for jj in range(i + 1, n):
            Minv[off + jj, off + i] = Minv[off + i, off + jj]
    if floating:
        for i in range(6):
            for c in range(6):
                Minv[i, c] = T2[i, c]                                # 4.7 line 25
            for col in range(n):
                Minv[i, 6 + col] = P[0, col, i]
                Minv[6 + col, i] = P[0, col, i]
    return 0


# --------------------------------------------------------------------------------------------
# The whole linearization in one call, on flat buffers
# --------------------------------------------------------------------------------------------
# Int buffer: header [N, floating, number of ancestor ranges, number of subtree ranges], then
# lam (N+1), jtype (N+1), anc_ptr (N+2), anc_rng (ranges x 2), sub_ptr (N+2), sub_rng (ranges x 2),
# perm (2 nv); see eidamb_derivatives.
# Float buffer: the model (Xtree, I, jaxis, jpitch, a_grav), then the workspace; `views` carves
# both into named arrays (the order of FLOAT_FIELDS).
INT_HEADER = 4
FLOAT_FIELDS = ("Xtree", "I", "jaxis", "jpitch", "a_grav", "XJ", "dXJ", "Xup", "dXup", "S", "v",
                "a", "f", "IA", "U", "Dd", "Fc", "P", "dv", "da", "df", "D", "Minv", "nu_dot",
                "bias", "tau_id", "R", "g0", "T", "T2", "t6")
MODEL_FIELDS = 5  # the first five are the model; the rest is overwritten by every call
NU_DOT = FLOAT_FIELDS.index("nu_dot")


@njit
def float_size(n, nx):
    nb = n + 1
    nv = nx // 2
    return (nb * 36 * 2 + nb * 3 + nb + 3 + nb * 36 * 4 + nb * 6 * 4 + nb * 36 + nb * 6 + nb
            + nb * n * 6 * 2 + nb * nx * 6 * 3 + nv * nx + nv * nv + nv * 3 + 9 + 6 + 36 * 2 + 8 * 6)


@njit
def views(ib, fb):
    """Named arrays on the int buffer ib and float buffer fb (no copies)."""
    n = ib[0]
    floating = ib[1] != 0
    nb = n + 1
    nv = n + 6 if floating else n
    nx = 2 * nv
    o = INT_HEADER
    lam = ib[o:o + nb]
    o += nb
    jtype = ib[o:o + nb]
    o += nb
    anc_ptr = ib[o:o + nb + 1]
    o += nb + 1
    anc_rng = ib[o:o + 2 * ib[2]].reshape((ib[2], 2))
    o += 2 * ib[2]
    sub_ptr = ib[o:o + nb + 1]
    o += nb + 1
    sub_rng = ib[o:o + 2 * ib[3]].reshape((ib[3], 2))
    o += 2 * ib[3]
    perm = ib[o:o + nx]
    o = 0
    Xtree = fb[o:o + nb * 36].reshape((nb, 6, 6))
    o += nb * 36
    I = fb[o:o + nb * 36].reshape((nb, 6, 6))  # noqa: E741
    o += nb * 36
    jaxis = fb[o:o + nb * 3].reshape((nb, 3))
    o += nb * 3
    jpitch = fb[o:o + nb]
    o += nb
    a_grav = fb[o:o + 3]
    o += 3
    XJ = fb[o:o + nb * 36].reshape((nb, 6, 6))
    o += nb * 36
    dXJ = fb[o:o + nb * 36].reshape((nb, 6, 6))
    o += nb * 36
    Xup = fb[o:o + nb * 36].reshape((nb, 6, 6))
    o += nb * 36
    dXup = fb[o:o + nb * 36].reshape((nb, 6, 6))
    o += nb * 36
    S = fb[o:o + nb * 6].reshape((nb, 6))
    o += nb * 6
    v = fb[o:o + nb * 6].reshape((nb, 6))
    o += nb * 6
    a = fb[o:o + nb * 6].reshape((nb, 6))
    o += nb * 6
    f = fb[o:o + nb * 6].reshape((nb, 6))
    o += nb * 6
    IA = fb[o:o + nb * 36].reshape((nb, 6, 6))
    o += nb * 36
    U = fb[o:o + nb * 6].reshape((nb, 6))
    o += nb * 6
    Dd = fb[o:o + nb]
    o += nb
    Fc = fb[o:o + nb * n * 6].reshape((nb, n, 6))
    o += nb * n * 6
    P = fb[o:o + nb * n * 6].reshape((nb, n, 6))
    o += nb * n * 6
    dv = fb[o:o + nb * nx * 6].reshape((nb, nx, 6))
    o += nb * nx * 6
    da = fb[o:o + nb * nx * 6].reshape((nb, nx, 6))
    o += nb * nx * 6
    df = fb[o:o + nb * nx * 6].reshape((nb, nx, 6))
    o += nb * nx * 6
    D = fb[o:o + nv * nx].reshape((nv, nx))
    o += nv * nx
    Minv = fb[o:o + nv * nv].reshape((nv, nv))
    o += nv * nv
    nu_dot = fb[o:o + nv]
    o += nv
    bias = fb[o:o + nv]
    o += nv
    tau_id = fb[o:o + nv]
    o += nv
    R = fb[o:o + 9].reshape((3, 3))
    o += 9
    g0 = fb[o:o + 6]
    o += 6
    T = fb[o:o + 36].reshape((6, 6))
    o += 36
    T2 = fb[o:o + 36].reshape((6, 6))
    o += 36
    t6 = fb[o:o + 48].reshape((8, 6))
    return ((lam, jtype, anc_ptr, anc_rng, sub_ptr, sub_rng, perm),
            (Xtree, I, jaxis, jpitch, a_grav, XJ, dXJ, Xup, dXup, S, v, a, f, IA, U, Dd, Fc, P, dv,
             da, df, D, Minv, nu_dot, bias, tau_id, R, g0, T, T2, t6))


@njit
def _linearize(ib, fb, s, r, quat, vb, tau, A, B):
    """One linearization (thesis_notes section 2) on the buffers; see linearize_packed."""
    (lam, jtype, anc_ptr, anc_rng, sub_ptr, sub_rng, perm), (
        Xtree, I, jaxis, jpitch, a_grav, XJ, dXJ, Xup, dXup, S, v, a, f, IA, U, Dd, Fc, P, dv, da,
        df, D, Minv, nu_dot, bias, tau_id, R, g0, T, T2, t6) = views(ib, fb)
    n = ib[0]
    floating = ib[1] != 0
    nv = n + 6 if floating else n
    off = nv - n
    kinematics(jtype, jaxis, jpitch, Xtree, s, XJ, dXJ, S, Xup, dXup)
    if floating:
        quat_to_rot(quat, R)
        gravity_in_base(R, a_grav, g0)
        for i in range(6):
            v[0, i] = vb[i]
    else:
        for i in range(3):
            for c in range(3):
                R[i, c] = 1.0 if i == c else 0.0
        gravity_in_base(R, a_grav, g0)
        v[0] = 0.0
    # bias h(q, nu) = EIDAmb at nu_dot = 0, then nu_dot = Minv (S tau - h) (consistent acceleration)
    for i in range(nv):
        nu_dot[i] = 0.0
    a[0] = g0
    eidamb(lam, Xup, S, I, r, nu_dot[off:], v, a, f, tau_id[off:], t6[0])
    if floating:
        for i in range(6):
            tau_id[i] = f[0, i]
    for i in range(off, nv):
        bias[i] = tau[i - off] - tau_id[i]
    for i in range(off):
        bias[i] = -tau_id[i]
    status = immamb(lam, Xup, S, I, floating, sub_ptr, sub_rng, IA, U, Dd, Fc, P, Minv, T, T2, t6)
    if status != 0:
        return status
    for i in range(nv):
        acc = 0.0
        for c in range(nv):
            acc += Minv[i, c] * bias[c]
        nu_dot[i] = acc
    # EIDAmb at the consistent acceleration, then its derivatives (Tables 4.2-4.5)
    for i in range(6):
        a[0, i] = g0[i] + (nu_dot[i] if floating else 0.0)
    eidamb(lam, Xup, S, I, r, nu_dot[off:], v, a, f, tau_id[off:], t6[0])
    eidamb_derivatives(lam, anc_ptr, anc_rng, sub_ptr, sub_rng, perm, Xup, dXup, S, I, r, v, a, f,
                       floating, g0, dv, da, df, D, t6)
    # A = [[-ad(v) (+) 0, I], [-Minv D]], B = [[0], [Minv S]]  (3.53)
    nx = 2 * nv
    for i in range(nv):
        for c in range(nx):
            A[i, c] = 0.0
        A[i, nv + i] = 1.0
        for c in range(n):
            B[i, c] = 0.0
    if floating:
        for c in range(6):
            for i in range(6):
                A[i, c] = 0.0
            e = t6[1]
            for i in range(6):
                e[i] = 1.0 if i == c else 0.0
            cross_m(vb, e, A[0:6, c], -1.0)                          # d/dt z_H = -ad(v) z_H + z_v
    for i in range(nv):
        Ai = A[nv + i]
        for c in range(nx):
            Ai[c] = 0.0
        for m in range(nv):
            w = -Minv[i, m]
            if w != 0.0:
                Dm = D[m]
                for c in range(nx):
                    Ai[c] += w * Dm[c]
        for c in range(n):
            B[nv + i, c] = Minv[i, off + c]
    return 0


@njit
def linearize_packed(ib, fb, s, r, quat, vb, tau, A, B):
    """A (2nv x 2nv) and B (2nv x nj) at one state (joint positions s, rates r, base quaternion quat,
    base body twist vb; ignored for a fixed base), written into A and B; nu_dot, Minv and the
    EIDAmb derivatives D stay in the workspace (fb). Returns 0, k > 0 if the pivot of body k (joint
    k-1) vanishes (M singular there), -1 if the base's articulated inertia is singular."""
    return _linearize(ib, fb, s, r, quat, vb, tau, A, B)


def num_threads():
    """Threads the batch kernel can use (numba's thread pool; 1 without numba)."""
    if HAVE_NUMBA:
        import numba

        return numba.get_num_threads()
    return 1


@njit(parallel=True)
def linearize_batch_packed(ib, fbs, Q, V, TAU, A, B, NU, status):
    """linearize_packed for every row of the flat vectors Q, V, TAU (quaternions already unit), in
    parallel over chunks of the batch; fbs holds one float buffer per chunk (the model part copied
    into each). NU[i] receives nu_dot, status[i] as linearize_packed."""
    nchunk = fbs.shape[0]
    N = Q.shape[0]
    floating = ib[1] != 0
    for ch in prange(nchunk):
        fb = fbs[ch]
        nu_dot = views(ib, fb)[1][NU_DOT]
        lo = (N * ch) // nchunk
        hi = (N * (ch + 1)) // nchunk
        for i in range(lo, hi):
            if floating:
                status[i] = _linearize(ib, fb, Q[i, 7:], V[i, 6:], Q[i, 3:7], V[i, 0:6], TAU[i],
                                       A[i], B[i])
            else:
                status[i] = _linearize(ib, fb, Q[i], V[i], Q[i, 0:0], V[i, 0:0], TAU[i], A[i],
                                       B[i])
            NU[i] = nu_dot
