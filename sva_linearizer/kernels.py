"""Array kernels of the thesis's recursive algorithms (Bos 2019, seeds/004), JIT-compiled when numba
is installed (see _jit.py). One implementation of each algorithm; the Python layer (algorithms.py,
linearize.py) prepares the arrays and calls these.

Indexing: body 0 is the base (the thesis's body 0), bodies k = 1..N are moved by joint j = k-1.
lam[k] is the parent body of body k (lam[0] = -1); bodies are numbered parents first. Per-body
arrays have N+1 rows (row 0 of the joint arrays is unused). All quantities are in body
coordinates, linear-angular order.
  Xup[k]  = ^kX_{lam(k)} = X_J(s) ^{lam(k)|k}X_{lam(k)}   (EIDAmb line 16)
  S[k]    = Gamma_{Jk}, the joint's motion subspace
  Sig[k]  = sigma_k, with d Xup[k] / d s_k = -(sigma_k x) Xup[k] (jcalcderiv; = Gamma_k except for
            custom joints such as the thesis's Table B.1 ones)
Gravity enters as a fictitious upward acceleration of the base (thesis line 7: a_0^r = ^0X_A a_grav,
a_grav = -g), so every body acceleration a[k] below includes it.

Speed: the kernels allocate nothing; 6-vector and 6x6 products are written out as loops in small
helpers that numba inlines (passing array views to a non-inlined call costs more than the
arithmetic). The derivatives of EIDAmb (Tables 4.2-4.5) are computed with the arithmetic of Singh
et al.'s IDSVA (seeds/000-001): O(N d) dot products of 6-vectors instead of a 6x6 product per
(body, tangent column) pair; in body coordinates to keep the forward-mode tables' rounding.
IMMAmb computes the upper triangle only. `linearize_packed` runs the whole linearization in one
compiled call on two flat buffers (model + workspace, see `views`), and `linearize_batch_packed`
does so for many states, in parallel over chunks of the batch.
"""
import numpy as np

from ._jit import HAVE_NUMBA, njit, prange
from .state import QUATERNION_TOLERANCE, check_vectors

REVOLUTE, PRISMATIC, HELICAL, CUSTOM = 0, 1, 2, 3
BAD_INPUT = -2  # status: an input is not finite, or the base quaternion not of unit norm


# --------------------------------------------------------------------------------------------
# 6-vector / 6x6 helpers (no allocation; outputs may alias inputs where noted)
# --------------------------------------------------------------------------------------------
@njit(inline="always")
def mv(X, x, out):
    """out = X x (6x6 times 6); out must not alias x."""
    x0, x1, x2, x3, x4, x5 = x[0], x[1], x[2], x[3], x[4], x[5]
    for i in range(6):
        out[i] = (X[i, 0] * x0 + X[i, 1] * x1 + X[i, 2] * x2 + X[i, 3] * x3 + X[i, 4] * x4
                  + X[i, 5] * x5)


@njit(inline="always")
def mv_add(X, x, out):
    """out += X x."""
    x0, x1, x2, x3, x4, x5 = x[0], x[1], x[2], x[3], x[4], x[5]
    for i in range(6):
        out[i] += (X[i, 0] * x0 + X[i, 1] * x1 + X[i, 2] * x2 + X[i, 3] * x3 + X[i, 4] * x4
                   + X[i, 5] * x5)


@njit(inline="always")
def _add6(out, o0, o1, o2, o3, o4, o5):
    """out += (o0, ..., o5) for a 6-vector out."""
    out[0] += o0
    out[1] += o1
    out[2] += o2
    out[3] += o3
    out[4] += o4
    out[5] += o5


@njit(inline="always")
def dot6(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4] + a[5] * b[5]


@njit(inline="always")
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
    _add6(out, sign * o0, sign * o1, sign * o2, sign * o3, sign * o4, sign * o5)


@njit(inline="always")
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
    _add6(out, o0, o1, o2, o3, o4, o5)


@njit(inline="always")
def _blocks(X):
    """The 3x3 blocks E, F of a spatial transform X = [[E, F], [0, E]], row by row, as 18 scalars
    (held in locals by the callers: the compiler cannot tell that their stores leave X unchanged)."""
    return (X[0, 0], X[0, 1], X[0, 2], X[1, 0], X[1, 1], X[1, 2], X[2, 0], X[2, 1], X[2, 2],
            X[0, 3], X[0, 4], X[0, 5], X[1, 3], X[1, 4], X[1, 5], X[2, 3], X[2, 4], X[2, 5])


@njit(inline="always")
def _xt6(blocks, y0, y1, y2, y3, y4, y5):
    """X^T y for X = [[E, F], [0, E]] given as _blocks(X): [E^T y_f; F^T y_f + E^T y_n]."""
    (e00, e01, e02, e10, e11, e12, e20, e21, e22,
     f00, f01, f02, f10, f11, f12, f20, f21, f22) = blocks
    return (e00 * y0 + e10 * y1 + e20 * y2,
            e01 * y0 + e11 * y1 + e21 * y2,
            e02 * y0 + e12 * y1 + e22 * y2,
            f00 * y0 + f10 * y1 + f20 * y2 + e00 * y3 + e10 * y4 + e20 * y5,
            f01 * y0 + f11 * y1 + f21 * y2 + e01 * y3 + e11 * y4 + e21 * y5,
            f02 * y0 + f12 * y1 + f22 * y2 + e02 * y3 + e12 * y4 + e22 * y5)


@njit(inline="always")
def xt_add(X, x, out):
    """out += X^T x for a spatial transform X = [[E, F], [0, E]] (a force taken from the child's
    to the parent's frame); out must not alias x."""
    r0, r1, r2, r3, r4, r5 = _xt6(_blocks(X), x[0], x[1], x[2], x[3], x[4], x[5])
    _add6(out, r0, r1, r2, r3, r4, r5)


@njit(inline="always")
def _rot_sym_add(blocks, s00, s01, s02, s11, s12, s22, out, r):
    """out[r:r+3, r:r+3] += E^T S E for a symmetric 3x3 S (E from _blocks)."""
    (e00, e01, e02, e10, e11, e12, e20, e21, e22) = blocks[0:9]
    p00 = s00 * e00 + s01 * e10 + s02 * e20       # P = S E
    p01 = s00 * e01 + s01 * e11 + s02 * e21
    p02 = s00 * e02 + s01 * e12 + s02 * e22
    p10 = s01 * e00 + s11 * e10 + s12 * e20
    p11 = s01 * e01 + s11 * e11 + s12 * e21
    p12 = s01 * e02 + s11 * e12 + s12 * e22
    p20 = s02 * e00 + s12 * e10 + s22 * e20
    p21 = s02 * e01 + s12 * e11 + s22 * e21
    p22 = s02 * e02 + s12 * e12 + s22 * e22
    q01 = e00 * p01 + e10 * p11 + e20 * p21       # E^T P, upper triangle
    q02 = e00 * p02 + e10 * p12 + e20 * p22
    q12 = e01 * p02 + e11 * p12 + e21 * p22
    out[r, r] += e00 * p00 + e10 * p10 + e20 * p20
    out[r + 1, r + 1] += e01 * p01 + e11 * p11 + e21 * p21
    out[r + 2, r + 2] += e02 * p02 + e12 * p12 + e22 * p22
    out[r, r + 1] += q01
    out[r + 1, r] += q01
    out[r, r + 2] += q02
    out[r + 2, r] += q02
    out[r + 1, r + 2] += q12
    out[r + 2, r + 1] += q12


@njit(inline="always")
def congruence_add(X, M, out):
    """out += X^T M X for a spatial transform X and a symmetric M (out stays exactly symmetric).
    X = [[E, o^ E], [0, E]] = [[1, o^], [0, 1]] blkdiag(E, E): a shift by o, then a rotation of the
    three distinct 3x3 blocks: about 60% of the arithmetic of the plain product."""
    blocks = _blocks(X)
    (e00, e01, e02, e10, e11, e12, e20, e21, e22) = blocks[0:9]
    o0 = X[2, 3] * e10 + X[2, 4] * e11 + X[2, 5] * e12          # o^ = F E^T
    o1 = X[0, 3] * e20 + X[0, 4] * e21 + X[0, 5] * e22
    o2 = X[1, 3] * e00 + X[1, 4] * e01 + X[1, 5] * e02
    a00, a01, a02, a11, a12, a22 = M[0, 0], M[0, 1], M[0, 2], M[1, 1], M[1, 2], M[2, 2]
    c00, c01, c02, c11, c12, c22 = M[3, 3], M[3, 4], M[3, 5], M[4, 4], M[4, 5], M[5, 5]
    m00, m01, m02 = M[0, 3], M[0, 4], M[0, 5]                  # the off-diagonal block
    m10, m11, m12 = M[1, 3], M[1, 4], M[1, 5]
    m20, m21, m22 = M[2, 3], M[2, 4], M[2, 5]
    # shift: [[A, B], [B^T, C]] -> [[A, B'], [B'^T, C']], B' = B + A o^, C' = C + B^T o^ - o^ B'
    b00, b01, b02 = m00 + a01 * o2 - a02 * o1, m01 + a02 * o0 - a00 * o2, m02 + a00 * o1 - a01 * o0
    b10, b11, b12 = m10 + a11 * o2 - a12 * o1, m11 + a12 * o0 - a01 * o2, m12 + a01 * o1 - a11 * o0
    b20, b21, b22 = m20 + a12 * o2 - a22 * o1, m21 + a22 * o0 - a02 * o2, m22 + a02 * o1 - a12 * o0
    c00 += m10 * o2 - m20 * o1 + o2 * b10 - o1 * b20
    c01 += m20 * o0 - m00 * o2 + o2 * b11 - o1 * b21
    c02 += m00 * o1 - m10 * o0 + o2 * b12 - o1 * b22
    c11 += m21 * o0 - m01 * o2 + o0 * b21 - o2 * b01
    c12 += m01 * o1 - m11 * o0 + o0 * b22 - o2 * b02
    c22 += m02 * o1 - m12 * o0 + o1 * b02 - o0 * b12
    # rotation by blkdiag(E, E)
    _rot_sym_add(blocks, a00, a01, a02, a11, a12, a22, out, 0)
    _rot_sym_add(blocks, c00, c01, c02, c11, c12, c22, out, 3)
    p00, p01, p02 = b00 * e00 + b01 * e10 + b02 * e20, b00 * e01 + b01 * e11 + b02 * e21, \
        b00 * e02 + b01 * e12 + b02 * e22                       # P = B' E
    p10, p11, p12 = b10 * e00 + b11 * e10 + b12 * e20, b10 * e01 + b11 * e11 + b12 * e21, \
        b10 * e02 + b11 * e12 + b12 * e22
    p20, p21, p22 = b20 * e00 + b21 * e10 + b22 * e20, b20 * e01 + b21 * e11 + b22 * e21, \
        b20 * e02 + b21 * e12 + b22 * e22
    for i in range(3):                                          # E^T P, and its transpose
        x0, x1, x2 = X[0, i], X[1, i], X[2, i]
        q0 = x0 * p00 + x1 * p10 + x2 * p20
        q1 = x0 * p01 + x1 * p11 + x2 * p21
        q2 = x0 * p02 + x1 * p12 + x2 * p22
        out[i, 3] += q0
        out[i, 4] += q1
        out[i, 5] += q2
        out[3, i] += q0
        out[4, i] += q1
        out[5, i] += q2


@njit(inline="always")
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


@njit(inline="always")
def quat_to_rot(quat, R):
    """Rotation matrix of the quaternion (x, y, z, w) normalised (exact for a unit quaternion)."""
    x, y, z, w = quat[0], quat[1], quat[2], quat[3]
    t = 2.0 / (x * x + y * y + z * z + w * w)
    R[0, 0] = 1 - t * (y * y + z * z)
    R[0, 1] = t * (x * y - z * w)
    R[0, 2] = t * (x * z + y * w)
    R[1, 0] = t * (x * y + z * w)
    R[1, 1] = 1 - t * (x * x + z * z)
    R[1, 2] = t * (y * z - x * w)
    R[2, 0] = t * (x * z - y * w)
    R[2, 1] = t * (y * z + x * w)
    R[2, 2] = 1 - t * (x * x + y * y)


# --------------------------------------------------------------------------------------------
# Kinematics: jcalc (Appendix B) and the tree transforms
# --------------------------------------------------------------------------------------------
@njit
def kinematics(jtype, jaxis, jpitch, Xtree, s, XJ, S, Sig, Xup):
    """jcalc (Appendix B.2) and ^kX_lam = X_J Xtree (EIDAmb line 16) for every body k = 1..N, with
    the joint's motion subspace Gamma_k (S) and its position twist sigma_k (Sig), defined by
    d ^kX_lam / ds_k = -(sigma_k x) ^kX_lam (jcalcderiv, Appendix B.3, in Lie-algebra form).

    Built-in joints about a unit axis e: revolute (0), prismatic (1), helical (2, pitch):
    X_J = [[E, o^ E], [0, E]] with E = R(e, s)^T and o = -(translation along e), so the child moves
    the way Gamma says and sigma = Gamma. Custom joints (3): the caller has filled XJ[k], S[k] and
    Sig[k] from the user's jcalc / jcalcderiv (sigma may differ from Gamma there, as in the
    thesis's Table B.1 joints, thesis_notes section 4)."""
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
            for i in range(6):
                Sig[k, i] = S[k, i]
        # Xup = X_J Xtree with both [[E, F], [0, E]]: [[E_J E_t, E_J F_t + F_J E_t], [0, E_J E_t]]
        Y = Xup[k]
        T = Xtree[k]
        for i in range(3):
            for c in range(3):
                e = X[i, 0] * T[0, c] + X[i, 1] * T[1, c] + X[i, 2] * T[2, c]
                Y[i, c] = e
                Y[i + 3, c + 3] = e
                Y[i + 3, c] = 0.0
                Y[i, c + 3] = (X[i, 0] * T[0, c + 3] + X[i, 1] * T[1, c + 3] + X[i, 2] * T[2, c + 3]
                               + X[i, 3] * T[3, c + 3] + X[i, 4] * T[4, c + 3] + X[i, 5] * T[5, c + 3])


@njit(inline="always")
def gravity_in_base(R, a_grav, g0):
    """a_0^r = ^0X_A a_grav (EIDAmb line 7): the gravity term seen from the base frame."""
    for i in range(3):
        g0[i] = R[0, i] * a_grav[0] + R[1, i] * a_grav[1] + R[2, i] * a_grav[2]
        g0[i + 3] = 0.0


# --------------------------------------------------------------------------------------------
# EIDAmb (Table 4.1)
# --------------------------------------------------------------------------------------------
@njit
def eidamb(lam, Xup, S, I, r, rdot, v, a, f, tau, vp, ap, hv, velocities):
    """EIDAmb (Table 4.1), with the base acceleration folded into the body accelerations.

    On entry v[0] is the base twist v_0 and a[0] = ^0a_{A,0} + a_0^r (base acceleration plus the
    gravity term of line 7); for a fixed base v[0] = 0 and a[0] = a_0^r. Then
      a[k] = a_k^r + ^k a_{A,0}   (lines 18 and 31 in one recursion)
      f[k] = M_k a[k] + v_k x* M_k v_k, accumulated over the subtree (lines 22, 27)
    so that f[k] = M^c_k ^k a_{A,0} + b^c_k, tau_k = Gamma^T f[k] (line 32), and
    f[0] = M^c_0 a_0 + 0F r_dot + b^vp_0 = ID_b (line 41): the r_dot terms that line 41 adds
    through 0F are already inside a[k].
    Also kept for the derivatives: vp[k], ap[k] = the parent's twist and acceleration in k's frame
    (^kX_lam v_lam, ^kX_lam a_lam) and hv[k] = M_k v_k. velocities=False reuses v, vp and hv
    from an earlier call at the same state (only the accelerations changed)."""
    nb = lam.shape[0]
    if velocities:
        mv(I[0], v[0], hv[0])                                    # lines 10-11
    mv(I[0], a[0], f[0])
    cross_f(v[0], hv[0], f[0])
    for k in range(1, nb):                                       # line 13
        p = lam[k]
        rk = r[k - 1]
        if velocities:
            mv(Xup[k], v[p], vp[k])                              # line 17
            for i in range(6):
                v[k, i] = vp[k, i] + S[k, i] * rk                # line 15: v_J = Gamma r
            mv(I[k], v[k], hv[k])
        mv(Xup[k], a[p], ap[k])                                  # lines 18, 31
        for i in range(6):
            a[k, i] = ap[k, i] + S[k, i] * rdot[k - 1]
        cross_m(v[k], S[k], a[k], rk)                            # v_k x v_J
        mv(I[k], a[k], f[k])                                     # lines 21-22
        cross_f(v[k], hv[k], f[k])
    for k in range(nb - 1, 0, -1):                               # line 25
        tau[k - 1] = dot6(S[k], f[k])                            # line 32 (subtree of k complete)
        xt_add(Xup[k], f[k], f[lam[k]])                          # line 27


# --------------------------------------------------------------------------------------------
# Derivatives of EIDAmb (Tables 4.2-4.5), restructured as IDSVA (Singh et al. Alg. 1)
# --------------------------------------------------------------------------------------------
@njit(inline="always")
def _xtf_rows(X, Y):
    """Each row y of Y becomes X^T y (forces taken from the child's to the parent's frame), for a
    spatial transform X = [[E, F], [0, E]]."""
    blocks = _blocks(X)
    for r in range(Y.shape[0]):
        Y[r, 0], Y[r, 1], Y[r, 2], Y[r, 3], Y[r, 4], Y[r, 5] = _xt6(
            blocks, Y[r, 0], Y[r, 1], Y[r, 2], Y[r, 3], Y[r, 4], Y[r, 5])


@njit(inline="always")
def two_b_sym(M, v, T, K):
    """The symmetric part of 2 B = v x* M - M v x + (M v) x-bar*  (Singh eq. 28) for a symmetric
    inertia M: K = C + C^T with C = v x* M. The rest, (M v) x-bar*, is antisymmetric and
    determined by the momentum h = M v: 2B x = K x + x x* h, (2B)^T x = K x - x x* h.
    T: 6x6 scratch."""
    for c in range(6):                  # T[c] = v x* M[:, c] (row c of C^T)
        for i in range(6):
            T[c, i] = 0.0
        cross_f(v, M[c], T[c])
    for i in range(6):
        for c in range(6):
            K[i, c] = T[c, i] + T[i, c]


@njit
def eidamb_derivatives(lam, floating, S, Sig, Xup, I, v, vp, ap, hv, f, g0, IC, KC, hC, Ps, tt, cur,
                       D, T, t6):
    """The derivatives of EIDAmb w.r.t. H, s, v, r (Tables 4.2-4.5), computed by IDSVA (Singh et al.
    Alg. 1, notes/singh_kim_digest.md section 2.4) in body coordinates: the same derivatives with
    the arithmetic restructured to O(N d), a few 6-vector products per (ancestor, descendant) pair.

    D (nv x 2nv) gets the columns [z_H (6) | s (N) | v (6, body twist) | r (N)] (floating) or
    [s (N) | r (N)] (fixed). Needs eidamb at the same state and acceleration (v, f as subtree
    sums, vp, ap, hv). g0 = a_0^r = ^0R_A a_grav. With the body twist held fixed (thesis_notes
    section 3) only gravity depends on H: the base acts as a 6-DoF joint with Gamma_0 = sigma_0 = 1,
    Psi-dot_0 = 0, Psi-ddot_0 = a_0^r x 1 and S-dot_0 = v_0 x 1.

    Body coordinates rather than the paper's ground frame: a body's t1..t4 (lines 13-16) are taken
    to each ancestor's frame on the way up (X^T), which costs more than ground-frame dot products
    but keeps the accuracy of the forward-mode tables (a ground-frame version lost about a digit on
    icub's ill-conditioned states; README, Performance).
    IC: composite M^C_k (lines 8, 22). 2 B^C_k (lines 9, 22) is kept as its symmetric part KC[k]
    and the composite momentum hC[k] (two_b_sym): 2B^C x = KC x + x x* hC, by equivariance of the
    cross products, and KC's congruence is the cheap symmetric one. Ps[k] = [Psi-dot_k, Psi-ddot_k,
    S-dot_k + Psi-dot_k (for Gamma)] (lines 5-7, eq. 31). tt[k]: t1..t4; cur: 4x6; T: 6x6 and t6:
    3x6 scratch.

    Joints whose position twist sigma differs from Gamma (custom joints, see kinematics) keep the
    two apart: sigma in the position derivatives (Psi-dot, Psi-ddot, the f x-bar* sigma term),
    Gamma in the velocity derivatives and in tau = Gamma^T f. Line 15's third term is kept (digest
    section 2.9: dropping it is an erratum of the paper)."""
    nb = lam.shape[0]
    off = 6 if floating else 0
    nv = nb - 1 + off
    for i in range(D.shape[0]):
        for c in range(D.shape[1]):
            D[i, c] = 0.0
    for k in range(nb):                                          # forward: lines 2-11
        if k > 0:
            P, vpk = Ps[k], vp[k]                                # v_lam, a_lam in k's frame
            for i in range(3):
                for m in range(6):
                    P[i, m] = 0.0
            cross_m(vpk, Sig[k], P[0], 1.0)                      # line 6: Psi-dot = v_lam x sigma
            cross_m(ap[k], Sig[k], P[1], 1.0)                    # line 7: Psi-ddot = a_lam x sigma
            cross_m(vpk, P[0], P[1], 1.0)                        #   + v_lam x Psi-dot
            cross_m(vpk, S[k], P[2], 2.0)                        # line 5: S-dot + Psi-dot (Gamma)
        if k > 0 or floating:
            for i in range(6):
                for m in range(6):
                    IC[k, i, m] = I[k, i, m]                     # line 8
            two_b_sym(I[k], v[k], T, KC[k])                      # line 9
            for i in range(6):
                hC[k, i] = hv[k, i]
    v0 = v[0]
    for k in range(nb - 1, 0, -1):                               # backward: line 12
        j = k - 1
        p = lam[k]
        ICk, KCk, G, P, t = IC[k], KC[k], S[k], Ps[k], tt[k]
        psd, psdd, sdp = P[0], P[1], P[2]
        t1, t2, t3, t4 = t[0], t[1], t[2], t[3]
        x = t6[0]                                                # x = Gamma x* h^C
        for i in range(6):
            x[i] = 0.0
        cross_f(G, hC[k], x)
        g0_, g1_, g2_, g3_, g4_, g5_ = G[0], G[1], G[2], G[3], G[4], G[5]
        for i in range(6):
            t1[i] = (ICk[i, 0] * g0_ + ICk[i, 1] * g1_ + ICk[i, 2] * g2_ + ICk[i, 3] * g3_
                     + ICk[i, 4] * g4_ + ICk[i, 5] * g5_)           # line 13: t1 = M^C Gamma
            kg = (KCk[i, 0] * g0_ + KCk[i, 1] * g1_ + KCk[i, 2] * g2_ + KCk[i, 3] * g3_
                  + KCk[i, 4] * g4_ + KCk[i, 5] * g5_)
            t4[i] = kg - x[i]                                    # line 16: t4 = (2B^C)^T Gamma
            t2[i] = kg + x[i]                                    # line 14: t2 = 2B^C Gamma
        mv_add(ICk, sdp, t2)                                     #   + M^C (S-dot + Psi-dot)
        mv(KCk, psd, t3)                                         # line 15: t3 = 2B^C Psi-dot
        cross_f(psd, hC[k], t3)
        mv_add(ICk, psdd, t3)                                    #   + M^C Psi-ddot
        cross_f(Sig[k], f[k], t3)                                #   + f^C x-bar* sigma
        # lines 19-20 for the pair (k, k): the diagonal
        rq, rv = off + j, nv + off + j
        D[rq, rq] = dot6(t4, psd) + dot6(t1, psdd)
        D[rq, rv] = dot6(t4, G) + dot6(t1, sdp)
        # k's t1..t4 in each ancestor i's frame: lines 17-18 (row i, column k) and 19-20 (row k,
        # column i)
        for c in range(4):
            for m in range(6):
                cur[c, m] = t[c, m]
        ch, i = k, p
        while i > 0:
            _xtf_rows(Xup[ch], cur)
            Gi, Pi = S[i], Ps[i]
            ri = off + i - 1
            D[ri, rq] = dot6(Gi, cur[2])
            D[ri, rv] = dot6(Gi, cur[1])
            D[rq, ri] = dot6(cur[3], Pi[0]) + dot6(cur[0], Pi[1])
            D[rq, nv + ri] = dot6(cur[3], Gi) + dot6(cur[0], Pi[2])
            ch, i = i, lam[i]
        if floating:
            # the base (lines 17-20 with Gamma_0 = 1): its rows get t3, t2; row k's H and v
            # columns t1^T (g0 x e) = -(g0 x* t1)^T and t4 + t1^T (v0 x e)
            _xtf_rows(Xup[ch], cur)
            Dr = D[rq]
            for m in range(6):
                D[m, rq] = cur[2, m]
                D[m, rv] = cur[1, m]
            cross_f(g0, cur[0], Dr[0:6])
            cross_f(v0, cur[0], Dr[nv:nv + 6])
            for m in range(6):
                Dr[m] = -Dr[m]
                Dr[nv + m] = cur[3, m] - Dr[nv + m]
        if p > 0 or floating:                                    # line 22
            congruence_add(Xup[k], ICk, IC[p])
            congruence_add(Xup[k], KCk, KC[p])
            xt_add(Xup[k], hC[k], hC[p])
    if floating:                                                 # base-base block (lines 19-20)
        e, col, w = t6[0], t6[1], t6[2]
        for c in range(6):
            for i in range(6):
                e[i] = 1.0 if i == c else 0.0
                col[i] = 0.0
            cross_m(g0, e, col, 1.0)                             # Psi-ddot_0 e_c = g0 x e_c
            mv(IC[0], col, w)
            for i in range(6):
                D[i, c] = w[i]
                col[i] = 0.0
            cross_m(v0, e, col, 1.0)                             # S-dot_0 e_c = v0 x e_c
            mv(IC[0], col, w)
            cross_f(e, hC[0], w)                                 # 2B^C_0 e_c = KC e_c + e_c x* hC
            for i in range(6):
                D[i, nv + c] = KC[0, i, c] + w[i]


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
    status = _articulated_sweep(lam, Xup, S, IA, U, Dd, T2, pA, tau, c, u)
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
def _articulated_sweep(lam, Xup, S, IA, U, Dd, T2, pA, tau, c, u):
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
        congruence_add(Xup[k], T2, IA[p])
        u[k] = tau[k - 1] - dot6(S[k], pA[k])
        mv_add(T2, c[k], pA[k])
        for i in range(6):
            pA[k, i] += U[k, i] * (u[k] / Dd[k])
        xt_add(Xup[k], pA[k], pA[p])
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
        congruence_add(Xup[k], T2, IA[lam[k]])


@njit
def crbamb(lam, Xup, S, I, floating, Ic, M, t6):
    """CRBAmb (Appendix E.4) / CRBA (E.3): the joint-space mass matrix M (nv x nv)."""
    nb = lam.shape[0]
    off = 6 if floating else 0
    for k in range(nb):
        Ic[k] = I[k]
    for k in range(nb - 1, 0, -1):
        congruence_add(Xup[k], Ic[k], Ic[lam[k]])
    for k in range(1, nb):
        F = t6[0]
        mv(Ic[k], S[k], F)
        M[off + k - 1, off + k - 1] = dot6(S[k], F)
        m = k
        while lam[m] > 0:
            t6[1] = 0.0
            xt_add(Xup[m], F, t6[1])
            F[:] = t6[1]
            m = lam[m]
            M[off + k - 1, off + m - 1] = dot6(S[m], F)
            M[off + m - 1, off + k - 1] = M[off + k - 1, off + m - 1]
        if floating:
            t6[1] = 0.0
            xt_add(Xup[m], F, t6[1])
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
@njit(inline="always")
def _f_columns(X, S, U, iD, Fk, Fp, Mrow, c0, c1, up):
    """IMMA(mb) backward pass for columns c0..c1-1 of body k's subtree (Table 4.6 lines 10-12 /
    4.7 lines 10-11): m = Minv_row - Gamma^T F_k / D, then F_lam += X^T (F_k + U m). X, Gamma, U in
    locals."""
    blocks = _blocks(X)
    s0, s1, s2, s3, s4, s5 = S[0] * iD, S[1] * iD, S[2] * iD, S[3] * iD, S[4] * iD, S[5] * iD
    u0, u1, u2, u3, u4, u5 = U[0], U[1], U[2], U[3], U[4], U[5]
    for col in range(c0, c1):
        y0, y1, y2 = Fk[0, col], Fk[1, col], Fk[2, col]
        y3, y4, y5 = Fk[3, col], Fk[4, col], Fk[5, col]
        m = Mrow[col] - (s0 * y0 + s1 * y1 + s2 * y2 + s3 * y3 + s4 * y4 + s5 * y5)
        Mrow[col] = m
        if up:
            y0 += u0 * m
            y1 += u1 * m
            y2 += u2 * m
            y3 += u3 * m
            y4 += u4 * m
            y5 += u5 * m
            r0, r1, r2, r3, r4, r5 = _xt6(blocks, y0, y1, y2, y3, y4, y5)
            Fp[0, col] += r0
            Fp[1, col] += r1
            Fp[2, col] += r2
            Fp[3, col] += r3
            Fp[4, col] += r4
            Fp[5, col] += r5


@njit(inline="always")
def _p_columns(X, S, w0, w1, w2, w3, w4, w5, Pp, Pk, Mrow, c0, c1):
    """IMMA(mb) forward pass for columns c0..c1-1 (Table 4.6 lines 19-23 / 4.7 lines 17-18):
    m = Minv_row - w^T P_lam, P_k = X P_lam + Gamma m. X and Gamma are held in locals so that the
    column loop is straight-line code."""
    (e00, e01, e02, e10, e11, e12, e20, e21, e22,
     f00, f01, f02, f10, f11, f12, f20, f21, f22) = _blocks(X)
    s0, s1, s2, s3, s4, s5 = S[0], S[1], S[2], S[3], S[4], S[5]
    P0, P1, P2, P3, P4, P5 = Pp[0], Pp[1], Pp[2], Pp[3], Pp[4], Pp[5]
    Q0, Q1, Q2, Q3, Q4, Q5 = Pk[0], Pk[1], Pk[2], Pk[3], Pk[4], Pk[5]
    for col in range(c0, c1):
        p0, p1, p2, p3, p4, p5 = P0[col], P1[col], P2[col], P3[col], P4[col], P5[col]
        m = Mrow[col] - (w0 * p0 + w1 * p1 + w2 * p2 + w3 * p3 + w4 * p4 + w5 * p5)
        Mrow[col] = m
        Q0[col] = s0 * m + e00 * p0 + e01 * p1 + e02 * p2 + f00 * p3 + f01 * p4 + f02 * p5
        Q1[col] = s1 * m + e10 * p0 + e11 * p1 + e12 * p2 + f10 * p3 + f11 * p4 + f12 * p5
        Q2[col] = s2 * m + e20 * p0 + e21 * p1 + e22 * p2 + f20 * p3 + f21 * p4 + f22 * p5
        Q3[col] = s3 * m + e00 * p3 + e01 * p4 + e02 * p5
        Q4[col] = s4 * m + e10 * p3 + e11 * p4 + e12 * p5
        Q5[col] = s5 * m + e20 * p3 + e21 * p4 + e22 * p5


@njit
def immamb(lam, Xup, S, I, floating, sub_ptr, sub_rng, IA, U, Dd, Fc, P, Minv, T, T2, t6):
    """IMMA (Table 4.6, fixed base) and IMMAmb (Table 4.7, moving base): M^-1 without forming M.

    subtree(k) (joint indices, k's own included) is the ranges sub_rng[sub_ptr[k]:sub_ptr[k+1]].
    Fc[k] is the thesis's 6 x N matrix F_k, P[k] likewise P_k (rows are the 6 components, so the
    loops over columns run along contiguous memory). Minv is nv x nv with the base block first for
    a moving base. T, T2: 6x6 scratch. Only the upper triangle is computed (lines 26-30 / 20-24
    mirror it): row j of the forward pass needs columns >= j, and so P_k only columns > j.
    Returns 0, or k > 0 if the pivot D_k vanishes (M singular), or -1 if M^A_0 does."""
    nb = lam.shape[0]
    n = nb - 1
    off = 6 if floating else 0
    for i in range(n):                                               # the upper triangle
        for c in range(i, n):
            Minv[off + i, off + c] = 0.0
    scale = 0.0
    for k in range(nb):                                              # lines 1-5
        for i in range(6):
            for c in range(6):
                IA[k, i, c] = I[k, i, c]
        scale = max(scale, abs(I[k, 0, 0]) + abs(I[k, 3, 3]))
        Fck = Fc[k]
        for t in range(sub_ptr[k], sub_ptr[k + 1]):
            for i in range(6):
                for col in range(sub_rng[t, 0], sub_rng[t, 1]):
                    Fck[i, col] = 0.0
    for k in range(n, 0, -1):                                        # line 6
        j = k - 1
        p = lam[k]
        Sk, Uk, Xk, Fck, Fcp = S[k], U[k], Xup[k], Fc[k], Fc[p]
        mv(IA[k], Sk, Uk)                                            # line 7
        Dk = dot6(Sk, Uk)                                            # line 8
        Dd[k] = Dk
        if not Dk > 1e-12 * scale:
            return k
        iD = 1.0 / Dk
        Minv[off + j, off + j] = iD                                  # line 9
        up = p > 0 or floating                                       # line 11 (4.6); always (4.7)
        Mrow = Minv[off + j, off:]
        for t in range(sub_ptr[k], sub_ptr[k + 1]):                  # lines 10, 12 / 11
            _f_columns(Xk, Sk, Uk, iD, Fck, Fcp, Mrow, sub_rng[t, 0], sub_rng[t, 1], up)
        for i in range(6):                                           # line 13 / 12
            ui = Uk[i] * iD
            for m in range(6):
                T2[i, m] = IA[k, i, m] - ui * Uk[m]
        congruence_add(Xk, T2, IA[p])                                # line 14 / 13
    P0 = P[0]
    if floating:
        if not inv_spd6(IA[0], T2, T):                               # 4.7 line 25: (M^A_0)^-1
            return -1
        for i in range(6):                                           # 4.7 line 15
            for col in range(n):
                P0[i, col] = 0.0
            for m in range(6):
                x = -T2[i, m]
                for col in range(n):
                    P0[i, col] += x * Fc[0, m, col]
    else:
        for i in range(6):
            for col in range(n):
                P0[i, col] = 0.0
    w = t6[0]
    for k in range(1, nb):                                           # line 17 / 16
        j = k - 1
        Sk, Xk, Pk, Pp = S[k], Xup[k], P[k], P[lam[k]]
        Mrow = Minv[off + j, off:]
        for i in range(6):                                           # w = X^T U / D
            w[i] = 0.0
        xt_add(Xk, U[k], w)
        Dk = Dd[k]
        w0, w1, w2, w3, w4, w5 = w[0] / Dk, w[1] / Dk, w[2] / Dk, w[3] / Dk, w[4] / Dk, w[5] / Dk
        Mrow[j] -= (w0 * Pp[0, j] + w1 * Pp[1, j] + w2 * Pp[2, j] + w3 * Pp[3, j]
                    + w4 * Pp[4, j] + w5 * Pp[5, j])                 # line 19 / 17, column j
        _p_columns(Xk, Sk, w0, w1, w2, w3, w4, w5, Pp, Pk, Mrow, j + 1, n)
    for i in range(n):                                               # lines 26-30 / 20-24
        for jj in range(i + 1, n):
            Minv[off + jj, off + i] = Minv[off + i, off + jj]
    if floating:
        for i in range(6):
            for c in range(6):
                Minv[i, c] = T2[i, c]                                # 4.7 line 25
            for col in range(n):
                Minv[i, 6 + col] = P0[i, col]
                Minv[6 + col, i] = P0[i, col]
    return 0


# --------------------------------------------------------------------------------------------
# The whole linearization in one call, on flat buffers
# --------------------------------------------------------------------------------------------
# Int buffer: header [N, floating, number of subtree ranges], then lam (N+1), jtype (N+1),
# sub_ptr (N+2), sub_rng (ranges x 2).
# Float buffer: the model (Xtree, I, jaxis, jpitch, a_grav), then the workspace; `views` carves
# both into named arrays (the order of FLOAT_FIELDS).
INT_HEADER = 3
FLOAT_FIELDS = ("Xtree", "I", "jaxis", "jpitch", "a_grav", "XJ", "Xup", "S", "Sig", "v", "a", "f",
                "vp", "ap", "hv",
                "IA", "U", "Dd", "Fc", "P", "IC", "KC", "hC", "Ps", "tt", "cur", "D", "Minv",
                "nu_dot", "bias", "tau_id", "R", "g0", "T", "T2", "t6")
MODEL_FIELDS = 5  # the first five are the model; the rest is overwritten by every call
NU_DOT = FLOAT_FIELDS.index("nu_dot")


@njit
def float_size(n, nx):
    nb = n + 1
    nv = nx // 2
    return (nb * 36 * 2 + nb * 3 + nb + 3                  # model
            + nb * 36 * 2 + nb * 6 * 8                      # XJ, Xup, S, Sig, v, a, f, vp, ap, hv
            + nb * 36 + nb * 6 + nb + nb * 6 * n * 2        # IA, U, Dd, Fc, P
            + nb * 36 * 2 + nb * 6 + nb * 18 + nb * 24 + 24  # IC, KC, hC, Ps, tt, cur
            + nv * nx + nv * nv + nv * 3 + 9 + 6 + 36 * 2 + 8 * 6)


@njit(inline="always")
def _f1(fb, o, a):
    return fb[o:o + a], o + a


@njit(inline="always")
def _f2(fb, o, a, b):
    return fb[o:o + a * b].reshape((a, b)), o + a * b


@njit(inline="always")
def _f3(fb, o, a, b, c):
    return fb[o:o + a * b * c].reshape((a, b, c)), o + a * b * c


@njit(inline="always")
def views(ib, fb):
    """Named arrays on the int buffer ib and float buffer fb (no copies), and the float buffer's
    used length (Data checks it against float_size)."""
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
    sub_ptr = ib[o:o + nb + 1]
    o += nb + 1
    sub_rng = ib[o:o + 2 * ib[2]].reshape((ib[2], 2))
    o = 0
    Xtree, o = _f3(fb, o, nb, 6, 6)
    I, o = _f3(fb, o, nb, 6, 6)  # noqa: E741
    jaxis, o = _f2(fb, o, nb, 3)
    jpitch, o = _f1(fb, o, nb)
    a_grav, o = _f1(fb, o, 3)
    XJ, o = _f3(fb, o, nb, 6, 6)
    Xup, o = _f3(fb, o, nb, 6, 6)
    S, o = _f2(fb, o, nb, 6)
    Sig, o = _f2(fb, o, nb, 6)
    v, o = _f2(fb, o, nb, 6)
    a, o = _f2(fb, o, nb, 6)
    f, o = _f2(fb, o, nb, 6)
    vp, o = _f2(fb, o, nb, 6)
    ap, o = _f2(fb, o, nb, 6)
    hv, o = _f2(fb, o, nb, 6)
    IA, o = _f3(fb, o, nb, 6, 6)
    U, o = _f2(fb, o, nb, 6)
    Dd, o = _f1(fb, o, nb)
    Fc, o = _f3(fb, o, nb, 6, n)
    P, o = _f3(fb, o, nb, 6, n)
    IC, o = _f3(fb, o, nb, 6, 6)
    KC, o = _f3(fb, o, nb, 6, 6)
    hC, o = _f2(fb, o, nb, 6)
    Ps, o = _f3(fb, o, nb, 3, 6)
    tt, o = _f3(fb, o, nb, 4, 6)
    cur, o = _f2(fb, o, 4, 6)
    D, o = _f2(fb, o, nv, nx)
    Minv, o = _f2(fb, o, nv, nv)
    nu_dot, o = _f1(fb, o, nv)
    bias, o = _f1(fb, o, nv)
    tau_id, o = _f1(fb, o, nv)
    R, o = _f2(fb, o, 3, 3)
    g0, o = _f1(fb, o, 6)
    T, o = _f2(fb, o, 6, 6)
    T2, o = _f2(fb, o, 6, 6)
    t6, o = _f2(fb, o, 8, 6)
    return ((lam, jtype, sub_ptr, sub_rng),
            (Xtree, I, jaxis, jpitch, a_grav, XJ, Xup, S, Sig, v, a, f, vp, ap, hv, IA, U, Dd, Fc, P,
             IC, KC, hC, Ps, tt, cur, D, Minv, nu_dot, bias, tau_id, R, g0, T, T2, t6), o)


@njit
def _linearize(ib, fb, q, vel, tau, A, B):
    """One linearization (thesis_notes section 2) on the buffers; see linearize_packed."""
    floating = ib[1] != 0
    if check_vectors(q, vel, tau, floating, QUATERNION_TOLERANCE) == 1:
        return BAD_INPUT
    if floating:
        quat, s, vb, r = q[3:7], q[7:], vel[0:6], vel[6:]
    else:
        quat, s, vb, r = q[0:0], q, vel[0:0], vel
    (lam, jtype, sub_ptr, sub_rng), (
        Xtree, I, jaxis, jpitch, a_grav, XJ, Xup, S, Sig, v, a, f, vp, ap, hv, IA, U, Dd, Fc, P, IC,
        KC, hC, Ps, tt, cur, D, Minv, nu_dot, bias, tau_id, R, g0, T, T2, t6), _ = views(ib, fb)
    n = ib[0]
    nv = n + 6 if floating else n
    off = nv - n
    kinematics(jtype, jaxis, jpitch, Xtree, s, XJ, S, Sig, Xup)
    if floating:
        quat_to_rot(quat, R)
    else:
        for i in range(3):
            for c in range(3):
                R[i, c] = 1.0 if i == c else 0.0
    gravity_in_base(R, a_grav, g0)
    for i in range(6):
        v[0, i] = vb[i] if floating else 0.0
        a[0, i] = g0[i]
    # bias h(q, nu) = EIDAmb at nu_dot = 0, then nu_dot = Minv (S tau - h) (consistent acceleration)
    for i in range(nv):
        nu_dot[i] = 0.0
    eidamb(lam, Xup, S, I, r, nu_dot[off:], v, a, f, tau_id[off:], vp, ap, hv, True)
    for i in range(off):
        bias[i] = -f[0, i]
    for i in range(off, nv):
        bias[i] = tau[i - off] - tau_id[i]
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
    eidamb(lam, Xup, S, I, r, nu_dot[off:], v, a, f, tau_id[off:], vp, ap, hv, False)
    eidamb_derivatives(lam, floating, S, Sig, Xup, I, v, vp, ap, hv, f, g0, IC, KC, hC, Ps, tt, cur,
                       D, T2, t6)
    # A = [[-ad(v) (+) 0, I], [-Minv D]], B = [[0], [Minv S]]  (3.53)
    nx = 2 * nv
    for i in range(nv):
        for c in range(nx):
            A[i, c] = 0.0
        A[i, nv + i] = 1.0
        for c in range(n):
            B[i, c] = 0.0
    if floating:
        e = t6[1]
        for c in range(6):
            for i in range(6):
                e[i] = 1.0 if i == c else 0.0
            cross_m(vb, e, A[0:6, c], -1.0)                          # d/dt z_H = -ad(v) z_H + z_v
    AL = A[nv:]
    np.dot(Minv, D, AL)                                              # BLAS: -Minv D, in place
    for i in range(nv):
        Ai = AL[i]
        for c in range(nx):
            Ai[c] = -Ai[c]
        for c in range(n):
            B[nv + i, c] = Minv[i, off + c]
    return 0


@njit
def linearize_packed(ib, fb, q, v, tau, A, B):
    """A (2nv x 2nv) and B (2nv x nj) at one state given as Pinocchio-style flat vectors q, v
    (State.q, State.v) and torques tau, written into A and B; nu_dot, Minv and the EIDAmb
    derivatives D stay in the workspace (fb). Returns 0; k > 0 if the pivot of body k (joint k-1)
    vanishes (M singular there); -1 if the base's articulated inertia is singular; BAD_INPUT if an
    input is not finite or the quaternion is not of unit norm (nothing is computed then)."""
    return _linearize(ib, fb, q, v, tau, A, B)


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
    for ch in prange(nchunk):
        fb = fbs[ch]
        nu_dot = views(ib, fb)[1][NU_DOT]
        lo = (N * ch) // nchunk
        hi = (N * (ch + 1)) // nchunk
        for i in range(lo, hi):
            status[i] = _linearize(ib, fb, Q[i], V[i], TAU[i], A[i], B[i])
            NU[i] = nu_dot
