# SPDX-License-Identifier: BSD-3-Clause
"""Compiled spatial algebra: 6-vector and 6x6 products written out as straight-line code, for the
algorithms' inner loops (numba inlines them; passing array views to a non-inlined call costs more
than the arithmetic). Linear-angular order; the same operations as :mod:`sva_linearizer.spatial`
(which builds matrices, for model building and tests):

    mv, mv_add       X x, X x added                       (6x6 times 6-vector)
    xmv              X x for a spatial transform X = [[E, F], [0, E]] (its zero block skipped)
    cross_m          v x u   (motion cross product, thesis 2.33)
    cross_f          v x* h  (force cross product, 2.42); as a function of v, B(h) v = v x-bar* h
    cross_f6         v x* h as 6 scalars
    xt_add           X^T f   (a force from the child's frame to the parent's)
    congruence_add   X^T M X (an inertia from the child's frame to the parent's)
    rigid_congruence_add  the same for M of rigid-body form, on its parameters (m, h, C)
    inv_spd6         (M)^-1 of a symmetric positive-definite 6x6
    quat_to_rot      R of a quaternion (x, y, z, w)
    rigid_mv6, mv_r, mv_add_r   M x on the parameters (m, h, C) of a rigid-body-form M
    two_b_sym_rigid  the symmetric part of Singh's 2B (eq. 28) on those parameters

A joint's tree transform X = [[E, E w^], [0, E]] with E a rotation about a coordinate axis e_a
(topology.axis_structure: layout fields `xax`, `xw`) has structured forms: xmv_axis, xt_add_axis,
xt_rows_axis, congruence_add_axis, rigid_congruence_add_axis, on E's 2x2 block and a cross
product with w, indices relabelled 0, 1, 2 -> a, b, c (cyclic). The *_s functions choose: the
structured form for an axis code a >= 0 (each axis a literal branch: by_axis), the general one
for -1.

Products with a joint's motion subspace Gamma take its axis code ax (layout field `sax`, see
topology.axis_codes): ax >= 0 when Gamma = +-e_ax (a revolute or prismatic joint about x, y or z,
most URDF joints), and the product is then a column read or one scalar product, -1 for a general
Gamma (the full product). Both give the same numbers: only products with exact zeros are skipped.

    s_dot            Gamma^T x
    m_s              M Gamma

No allocation; outputs may alias inputs only where a docstring says so.
"""
import numpy as np

from ._lanes import all_lanes
from ._jit import njit

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
def rigid_mv6(M, x):
    """M x as 6 scalars for M of rigid-body form [[m 1, -h^], [h^, C]] (topology.rigid_form; m = 0 for
    KC): [m x_l - h x x_w; h x x_l + C x_w], 24 multiplies where the 6x6 product takes 36."""
    ms, h0, h1, h2 = M[0, 0], M[5, 1], M[3, 2], M[4, 0]
    l0, l1, l2, w0, w1, w2 = x[0], x[1], x[2], x[3], x[4], x[5]
    return (ms * l0 - (h1 * w2 - h2 * w1),
            ms * l1 - (h2 * w0 - h0 * w2),
            ms * l2 - (h0 * w1 - h1 * w0),
            h1 * l2 - h2 * l1 + M[3, 3] * w0 + M[3, 4] * w1 + M[3, 5] * w2,
            h2 * l0 - h0 * l2 + M[4, 3] * w0 + M[4, 4] * w1 + M[4, 5] * w2,
            h0 * l1 - h1 * l0 + M[5, 3] * w0 + M[5, 4] * w1 + M[5, 5] * w2)


@njit(inline="always")
def mv_r(M, rigid, x, out):
    """out = M x (mv), on M's rigid-body parameters where `rigid` says M has that form (rigid_mv6)."""
    if rigid:
        out[0], out[1], out[2], out[3], out[4], out[5] = rigid_mv6(M, x)
    else:
        mv(M, x, out)


@njit(inline="always")
def mv_add_r(M, rigid, x, out):
    """out += M x (mv_add), on M's rigid-body parameters where `rigid` says so (rigid_mv6)."""
    if rigid:
        r0, r1, r2, r3, r4, r5 = rigid_mv6(M, x)
        add6(out, r0, r1, r2, r3, r4, r5)
    else:
        mv_add(M, x, out)


@njit(inline="always")
def two_b_sym_rigid(M, v, K):
    """K = C + C^T with C = v x* M (the symmetric part of Singh's 2B, eq. 28; see
    eidamb_derivatives.two_b_sym) for M = [[m 1, -h^], [h^, C]] of rigid-body form, on its
    parameters: with v = [l; w], K = [[0, k^], [-k^, 2 (l.h) 1 - l h^T - h l^T + w^ C - C w^]],
    k = h x w - m l (a matrix of rigid-body form with mass 0, as composites' derivatives are)."""
    ms, h0, h1, h2 = M[0, 0], M[5, 1], M[3, 2], M[4, 0]
    l0, l1, l2, w0, w1, w2 = v[0], v[1], v[2], v[3], v[4], v[5]
    k0 = h1 * w2 - h2 * w1 - ms * l0
    k1 = h2 * w0 - h0 * w2 - ms * l1
    k2 = h0 * w1 - h1 * w0 - ms * l2
    c00, c01, c02, c11, c12, c22 = M[3, 3], M[3, 4], M[3, 5], M[4, 4], M[4, 5], M[5, 5]
    p00 = w1 * c02 - w2 * c01                     # P = w^ C (rows of w x C's columns)
    p01 = w1 * c12 - w2 * c11
    p02 = w1 * c22 - w2 * c12
    p10 = w2 * c00 - w0 * c02
    p11 = w2 * c01 - w0 * c12
    p12 = w2 * c02 - w0 * c22
    p20 = w0 * c01 - w1 * c00
    p21 = w0 * c11 - w1 * c01
    p22 = w0 * c12 - w1 * c02
    lh = 2.0 * (l0 * h0 + l1 * h1 + l2 * h2)      # w^ C - C w^ = P + P^T (C symmetric)
    for i in range(3):
        for c in range(3):
            K[i, c] = 0.0
    K[0, 4] = K[4, 0] = -k2                       # [[0, k^], [-k^, .]]: k^[0,1] = -k2
    K[0, 5] = K[5, 0] = k1
    K[1, 3] = K[3, 1] = k2
    K[1, 5] = K[5, 1] = -k0
    K[2, 3] = K[3, 2] = -k1
    K[2, 4] = K[4, 2] = k0
    K[0, 3] = K[3, 0] = K[1, 4] = K[4, 1] = K[2, 5] = K[5, 2] = 0.0
    K[3, 3] = lh - 2.0 * l0 * h0 + 2.0 * p00
    K[4, 4] = lh - 2.0 * l1 * h1 + 2.0 * p11
    K[5, 5] = lh - 2.0 * l2 * h2 + 2.0 * p22
    K[3, 4] = K[4, 3] = p01 + p10 - (l0 * h1 + h0 * l1)
    K[3, 5] = K[5, 3] = p02 + p20 - (l0 * h2 + h0 * l2)
    K[4, 5] = K[5, 4] = p12 + p21 - (l1 * h2 + h1 * l2)


@njit(inline="always")
def xmv(X, x, out):
    """out = X x for a spatial transform X = [[E, F], [0, E]] (a motion from the parent's frame to
    the child's): [E x_l + F x_w; E x_w], 27 multiplies instead of 36 (equal to mv(X, x, out));
    alias-safe (x is read first)."""
    (e00, e01, e02, e10, e11, e12, e20, e21, e22,
     f00, f01, f02, f10, f11, f12, f20, f21, f22) = xblocks(X)
    x0, x1, x2, x3, x4, x5 = x[0], x[1], x[2], x[3], x[4], x[5]
    out[0] = e00 * x0 + e01 * x1 + e02 * x2 + f00 * x3 + f01 * x4 + f02 * x5
    out[1] = e10 * x0 + e11 * x1 + e12 * x2 + f10 * x3 + f11 * x4 + f12 * x5
    out[2] = e20 * x0 + e21 * x1 + e22 * x2 + f20 * x3 + f21 * x4 + f22 * x5
    # 0.0 + : the sum of the skipped products (exact zeros) as mv's expression has it, so that
    # the compiler fuses multiply-adds the same way and the result is mv's, bit for bit
    out[3] = 0.0 + e00 * x3 + e01 * x4 + e02 * x5
    out[4] = 0.0 + e10 * x3 + e11 * x4 + e12 * x5
    out[5] = 0.0 + e20 * x3 + e21 * x4 + e22 * x5


@njit(inline="always")
def add6(out, o0, o1, o2, o3, o4, o5):
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
    add6(out, sign * o0, sign * o1, sign * o2, sign * o3, sign * o4, sign * o5)


@njit(inline="always")
def cross_f6(v, h):
    """v x* h for a motion v and a force h, as 6 scalars: v x* = -(v x)^T = [[w^, 0], [v^, w^]]
    (2.42). As a function of v this is the thesis's B(h) v = v x-bar* h."""
    l0, l1, l2, w0, w1, w2 = v[0], v[1], v[2], v[3], v[4], v[5]
    f0, f1, f2, n0, n1, n2 = h[0], h[1], h[2], h[3], h[4], h[5]
    return (w1 * f2 - w2 * f1,
            w2 * f0 - w0 * f2,
            w0 * f1 - w1 * f0,
            w1 * n2 - w2 * n1 + l1 * f2 - l2 * f1,
            w2 * n0 - w0 * n2 + l2 * f0 - l0 * f2,
            w0 * n1 - w1 * n0 + l0 * f1 - l1 * f0)


@njit(inline="always")
def cross_f(v, h, out):
    """out += v x* h (cross_f6). Alias-safe."""
    o0, o1, o2, o3, o4, o5 = cross_f6(v, h)
    add6(out, o0, o1, o2, o3, o4, o5)


@njit(inline="always")
def s_dot(S, ax, x):
    """Gamma^T x for Gamma = S (axis code ax: S[ax] x[ax] when Gamma = +-e_ax)."""
    if ax >= 0:
        return S[ax] * x[ax]
    return dot6(S, x)


@njit(inline="always")
def m_s(M, S, ax, out):
    """out = M Gamma (axis code ax: column ax of M, times S[ax] = +-1); out must not alias S."""
    if ax >= 0:
        s = S[ax]
        for i in range(6):
            out[i] = s * M[i, ax]
    else:
        mv(M, S, out)


@njit(inline="always")
def xblocks(X):
    """The 3x3 blocks E, F of a spatial transform X = [[E, F], [0, E]], row by row, as 18 scalars
    (held in locals by the callers: the compiler cannot tell that their stores leave X unchanged)."""
    return (X[0, 0], X[0, 1], X[0, 2], X[1, 0], X[1, 1], X[1, 2], X[2, 0], X[2, 1], X[2, 2],
            X[0, 3], X[0, 4], X[0, 5], X[1, 3], X[1, 4], X[1, 5], X[2, 3], X[2, 4], X[2, 5])


@njit(inline="always")
def xt6(blocks, y0, y1, y2, y3, y4, y5):
    """X^T y for X = [[E, F], [0, E]] given as xblocks(X): [E^T y_f; F^T y_f + E^T y_n]."""
    (e00, e01, e02, e10, e11, e12, e20, e21, e22,
     f00, f01, f02, f10, f11, f12, f20, f21, f22) = blocks
    return (e00 * y0 + e10 * y1 + e20 * y2,
            e01 * y0 + e11 * y1 + e21 * y2,
            e02 * y0 + e12 * y1 + e22 * y2,
            f00 * y0 + f10 * y1 + f20 * y2 + e00 * y3 + e10 * y4 + e20 * y5,
            f01 * y0 + f11 * y1 + f21 * y2 + e01 * y3 + e11 * y4 + e21 * y5,
            f02 * y0 + f12 * y1 + f22 * y2 + e02 * y3 + e12 * y4 + e22 * y5)


@njit(inline="always")
def axis_blocks(X, a):
    """For X = [[E, E w^], [0, E]] with E a rotation about e_a (topology.axis_structure): the
    other two axes b, c (a, b, c cyclic, so that cross products keep their form in that order) and
    E's 2x2 block E_bb, E_bc, E_cb, E_cc; the rest of E is 1 at (a, a) and 0."""
    b = a + 1 if a < 2 else 0
    c = b + 1 if b < 2 else 0
    return b, c, X[b, b], X[b, c], X[c, b], X[c, c]


@njit(inline="always")
def xt_axis6(ebb, ebc, ecb, ecc, oa, ob, oc, fa, fb, fc, na, nb, nc):
    """X^T [f; n] = [E^T f; E^T n - o x E^T f] for X = [[E, E o^], [0, E]] with E a rotation
    about e_a, everything in the relabelled order (a, b, c) (axis_blocks): 6 scalars."""
    gb = ebb * fb + ecb * fc                        # E^T f (its a component is fa)
    gc = ebc * fb + ecc * fc
    return (fa, gb, gc, na - (ob * gc - oc * gb), ebb * nb + ecb * nc - (oc * fa - oa * gc),
            ebc * nb + ecc * nc - (oa * gb - ob * fa))


@njit(inline="always")
def xm_axis6(ebb, ebc, ecb, ecc, oa, ob, oc, la, lb, lc, ra, rb, rc):
    """X [l; r] = [E (l + o x r); E r] for X = [[E, E o^], [0, E]] with E a rotation about e_a,
    in the relabelled order (a, b, c) (axis_blocks): 6 scalars."""
    ub = lb + (oc * ra - oa * rc)                   # l + o x r (its a component below)
    uc = lc + (oa * rb - ob * ra)
    return (la + (ob * rc - oc * rb), ebb * ub + ebc * uc, ecb * ub + ecc * uc,
            ra, ebb * rb + ebc * rc, ecb * rb + ecc * rc)


@njit(inline="always")
def xt_rows_axis(X, w, a, Y, out):
    """Each row y = [f; n] of Y becomes X^T y in the same row of out (out may be Y), for
    X = [[E, E w^], [0, E]] with E a rotation about e_a (about half the arithmetic of xt6)."""
    b, c, ebb, ebc, ecb, ecc = axis_blocks(X, a)
    wa, wb, wc = w[a], w[b], w[c]
    for r in range(Y.shape[0]):
        out[r, a], out[r, b], out[r, c], out[r, 3 + a], out[r, 3 + b], out[r, 3 + c] = xt_axis6(
            ebb, ebc, ecb, ecc, wa, wb, wc,
            Y[r, a], Y[r, b], Y[r, c], Y[r, 3 + a], Y[r, 3 + b], Y[r, 3 + c])


@njit(inline="always")
def xmv_axis(X, w, a, x, out):
    """out = X x = [E (x_l + w x x_w); E x_w] for X = [[E, E w^], [0, E]] with E a rotation about
    e_a (xmv's result); alias-safe (x is read first)."""
    b, c, ebb, ebc, ecb, ecc = axis_blocks(X, a)
    out[a], out[b], out[c], out[3 + a], out[3 + b], out[3 + c] = xm_axis6(
        ebb, ebc, ecb, ecc, w[a], w[b], w[c], x[a], x[b], x[c], x[3 + a], x[3 + b], x[3 + c])


@njit(inline="always")
def xt_add_axis(X, w, a, x, out):
    """out += X^T x = [E^T f; E^T n - w x E^T f] for X = [[E, E w^], [0, E]] with E a rotation
    about e_a (xt_add's result); out must not alias x."""
    b, c, ebb, ebc, ecb, ecc = axis_blocks(X, a)
    r0, r1, r2, r3, r4, r5 = xt_axis6(ebb, ebc, ecb, ecc, w[a], w[b], w[c],
                                      x[a], x[b], x[c], x[3 + a], x[3 + b], x[3 + c])
    out[a] += r0
    out[b] += r1
    out[c] += r2
    out[3 + a] += r3
    out[3 + b] += r4
    out[3 + c] += r5


@njit(inline="always")
def _rot_sym_axis(ebb, ebc, ecb, ecc, saa, sab, sac, sbb, sbc, scc):
    """E^T S E for a symmetric 3x3 S and E a rotation about the first of three cyclic axes (a, b,
    c), everything in that order: (S'_aa, S'_ab, S'_ac, S'_bb, S'_bc, S'_cc)."""
    pbb = sbb * ebb + sbc * ecb                     # P = S E, rows and columns b, c
    pbc = sbb * ebc + sbc * ecc
    pcb = sbc * ebb + scc * ecb
    pcc = sbc * ebc + scc * ecc
    return (saa, sab * ebb + sac * ecb, sab * ebc + sac * ecc,
            ebb * pbb + ecb * pcb, ebb * pbc + ecb * pcc, ebc * pbc + ecc * pcc)


@njit(inline="always")
def _shift_sym(o0, o1, o2, a00, a01, a02, a11, a12, a22, m00, m01, m02, m10, m11, m12, m20, m21,
               m22, c00, c01, c02, c11, c12, c22):
    """T^T [[A, B], [B^T, C]] T for T = [[1, o^], [0, 1]] and symmetric A, C (given by their upper
    triangles): A stays, B' = B + A o^, C' = C + B^T o^ - o^ B'. Returns B' (row by row) and C'
    (upper triangle)."""
    b00, b01, b02 = m00 + a01 * o2 - a02 * o1, m01 + a02 * o0 - a00 * o2, m02 + a00 * o1 - a01 * o0
    b10, b11, b12 = m10 + a11 * o2 - a12 * o1, m11 + a12 * o0 - a01 * o2, m12 + a01 * o1 - a11 * o0
    b20, b21, b22 = m20 + a12 * o2 - a22 * o1, m21 + a22 * o0 - a02 * o2, m22 + a02 * o1 - a12 * o0
    return (b00, b01, b02, b10, b11, b12, b20, b21, b22,
            c00 + (m10 * o2 - m20 * o1 + o2 * b10 - o1 * b20),
            c01 + (m20 * o0 - m00 * o2 + o2 * b11 - o1 * b21),
            c02 + (m00 * o1 - m10 * o0 + o2 * b12 - o1 * b22),
            c11 + (m21 * o0 - m01 * o2 + o0 * b21 - o2 * b01),
            c12 + (m01 * o1 - m11 * o0 + o0 * b22 - o2 * b02),
            c22 + (m02 * o1 - m12 * o0 + o1 * b02 - o0 * b12))


@njit(inline="always")
def congruence_add_axis(X, w, a, M, out):
    """out += X^T M X (congruence_add's result) for X = [[E, E w^], [0, E]] with E a rotation
    about e_a: X = blkdiag(E, E) [[1, w^], [0, 1]], so the three 3x3 blocks are rotated first (a
    2x2 block each), then shifted by w as congruence_add shifts by o. Indices relabelled
    0, 1, 2 -> a, b, c (cyclic: the shift's cross products keep their form); out stays exactly
    symmetric."""
    b, c, ebb, ebc, ecb, ecc = axis_blocks(X, a)
    a3, b3, c3 = 3 + a, 3 + b, 3 + c
    a00, a01, a02, a11, a12, a22 = _rot_sym_axis(ebb, ebc, ecb, ecc, M[a, a], M[a, b], M[a, c],
                                                 M[b, b], M[b, c], M[c, c])
    c00, c01, c02, c11, c12, c22 = _rot_sym_axis(ebb, ebc, ecb, ecc, M[a3, a3], M[a3, b3],
                                                 M[a3, c3], M[b3, b3], M[b3, c3], M[c3, c3])
    # the off-diagonal block B (rows a, b, c; columns a3, b3, c3): E^T B E
    m00, m01, m02 = M[a, a3], M[a, b3], M[a, c3]
    r10, r11, r12 = M[b, a3], M[b, b3], M[b, c3]
    r20, r21, r22 = M[c, a3], M[c, b3], M[c, c3]
    m10, m11, m12 = ebb * r10 + ecb * r20, ebb * r11 + ecb * r21, ebb * r12 + ecb * r22
    m20, m21, m22 = ebc * r10 + ecc * r20, ebc * r11 + ecc * r21, ebc * r12 + ecc * r22
    m01, m02 = m01 * ebb + m02 * ecb, m01 * ebc + m02 * ecc
    m11, m12 = m11 * ebb + m12 * ecb, m11 * ebc + m12 * ecc
    m21, m22 = m21 * ebb + m22 * ecb, m21 * ebc + m22 * ecc
    o0, o1, o2 = w[a], w[b], w[c]
    # shift (congruence_add's)
    (b00, b01, b02, b10, b11, b12, b20, b21, b22,
     c00, c01, c02, c11, c12, c22) = _shift_sym(o0, o1, o2, a00, a01, a02, a11, a12, a22,
                                                m00, m01, m02, m10, m11, m12, m20, m21, m22,
                                                c00, c01, c02, c11, c12, c22)
    _add_sym(out, a, b, c, a00, a01, a02, a11, a12, a22)
    _add_sym(out, a3, b3, c3, c00, c01, c02, c11, c12, c22)
    out[a, a3] += b00
    out[a3, a] += b00
    out[a, b3] += b01
    out[b3, a] += b01
    out[a, c3] += b02
    out[c3, a] += b02
    out[b, a3] += b10
    out[a3, b] += b10
    out[b, b3] += b11
    out[b3, b] += b11
    out[b, c3] += b12
    out[c3, b] += b12
    out[c, a3] += b20
    out[a3, c] += b20
    out[c, b3] += b21
    out[b3, c] += b21
    out[c, c3] += b22
    out[c3, c] += b22


@njit(inline="always")
def _add_sym(out, i, j, k, s00, s01, s02, s11, s12, s22):
    """out's symmetric 3x3 block on rows and columns (i, j, k) += S."""
    out[i, i] += s00
    out[j, j] += s11
    out[k, k] += s22
    out[i, j] += s01
    out[j, i] += s01
    out[i, k] += s02
    out[k, i] += s02
    out[j, k] += s12
    out[k, j] += s12


@njit(inline="always")
def rigid_congruence_add_axis(X, w, a, M, out):
    """rigid_congruence_add's result for X = [[E, E w^], [0, E]] with E a rotation about e_a:
    rotation first (h' = E^T h, C' = E^T C E: 2x2 blocks), then the shift by w on the parameters
    (h'' = h' - m w, C'' = C' + g w^T + w g^T - 2 (w.g) 1 with g = h' - m w / 2). Indices relabelled
    0, 1, 2 -> a, b, c (cyclic, so h^'s entries keep their signs)."""
    b, c, ebb, ebc, ecb, ecc = axis_blocks(X, a)
    a3, b3, c3 = 3 + a, 3 + b, 3 + c
    ms = M[0, 0]
    ha, hb, hc = M[c3, b], M[a3, c], M[b3, a]                   # h (natural: M[5,1], M[3,2], M[4,0])
    h0, h1, h2 = ha, ebb * hb + ecb * hc, ebc * hb + ecc * hc       # E^T h
    c00, c01, c02, c11, c12, c22 = _rot_sym_axis(ebb, ebc, ecb, ecc, M[a3, a3], M[a3, b3],
                                                 M[a3, c3], M[b3, b3], M[b3, c3], M[c3, c3])
    o0, o1, o2 = w[a], w[b], w[c]
    hm = 0.5 * ms
    g0, g1, g2 = h0 - hm * o0, h1 - hm * o1, h2 - hm * o2
    dd = -2.0 * (o0 * g0 + o1 * g1 + o2 * g2)
    c00 += 2.0 * g0 * o0 + dd
    c11 += 2.0 * g1 * o1 + dd
    c22 += 2.0 * g2 * o2 + dd
    c01 += g0 * o1 + o0 * g1
    c02 += g0 * o2 + o0 * g2
    c12 += g1 * o2 + o1 * g2
    _add_sym(out, a3, b3, c3, c00, c01, c02, c11, c12, c22)
    r0, r1, r2 = h0 - ms * o0, h1 - ms * o1, h2 - ms * o2         # h'' = h' - m w
    for i in range(3):
        out[i, i] += ms
    out[b3, a] += r2                                             # h^ below, -h^ above
    out[a, b3] += r2
    out[a3, b] -= r2
    out[b, a3] -= r2
    out[c3, b] += r0
    out[b, c3] += r0
    out[b3, c] -= r0
    out[c, b3] -= r0
    out[a3, c] += r1
    out[c, a3] += r1
    out[c3, a] -= r1
    out[a, c3] -= r1


@njit(inline="always")
def xt_add(X, x, out):
    """out += X^T x for a spatial transform X = [[E, F], [0, E]] (a force taken from the child's
    to the parent's frame); out must not alias x."""
    r0, r1, r2, r3, r4, r5 = xt6(xblocks(X), x[0], x[1], x[2], x[3], x[4], x[5])
    add6(out, r0, r1, r2, r3, r4, r5)


@njit(inline="always")
def xtf_rows(X, Y, out):
    """Each row y of Y becomes X^T y in the same row of out (out may be Y), for a spatial transform
    X = [[E, F], [0, E]] (forces taken from the child's to the parent's frame)."""
    blocks = xblocks(X)
    for r in range(Y.shape[0]):
        out[r, 0], out[r, 1], out[r, 2], out[r, 3], out[r, 4], out[r, 5] = xt6(
            blocks, Y[r, 0], Y[r, 1], Y[r, 2], Y[r, 3], Y[r, 4], Y[r, 5])


@njit(inline="always")
def _rot_sym_add(blocks, s00, s01, s02, s11, s12, s22, out, r):
    """out[r:r+3, r:r+3] += E^T S E for a symmetric 3x3 S (E from xblocks)."""
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
    blocks = xblocks(X)
    (e00, e01, e02, e10, e11, e12, e20, e21, e22) = blocks[0:9]
    o0 = X[2, 3] * e10 + X[2, 4] * e11 + X[2, 5] * e12          # o^ = F E^T
    o1 = X[0, 3] * e20 + X[0, 4] * e21 + X[0, 5] * e22
    o2 = X[1, 3] * e00 + X[1, 4] * e01 + X[1, 5] * e02
    a00, a01, a02, a11, a12, a22 = M[0, 0], M[0, 1], M[0, 2], M[1, 1], M[1, 2], M[2, 2]
    c00, c01, c02, c11, c12, c22 = M[3, 3], M[3, 4], M[3, 5], M[4, 4], M[4, 5], M[5, 5]
    m00, m01, m02 = M[0, 3], M[0, 4], M[0, 5]                  # the off-diagonal block
    m10, m11, m12 = M[1, 3], M[1, 4], M[1, 5]
    m20, m21, m22 = M[2, 3], M[2, 4], M[2, 5]
    # shift: [[A, B], [B^T, C]] -> [[A, B'], [B'^T, C']]
    (b00, b01, b02, b10, b11, b12, b20, b21, b22,
     c00, c01, c02, c11, c12, c22) = _shift_sym(o0, o1, o2, a00, a01, a02, a11, a12, a22,
                                                m00, m01, m02, m10, m11, m12, m20, m21, m22,
                                                c00, c01, c02, c11, c12, c22)
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
def rigid_congruence_add(X, M, out):
    """out += X^T M X, as congruence_add, for M of rigid-body form [[m 1, -h^], [h^, C]] (h = m c,
    C symmetric; linear-angular): read from m = M[0, 0], h = (M[5, 1], M[3, 2], M[4, 0]) and C's
    upper triangle, and written back in that form (exactly). The form is kept by congruences and
    sums (composite inertias; and their time derivatives, m = 0: IDSVA's KC). The shift by o
    (congruence_add's B' = B + A o^, C' = C + B^T o^ - o^ B' with A = m 1, B = -h^, expanded with
    a^ b^ = b a^T - (a.b) 1) acts on the parameters: h' = h - m o and
    C' = C + g o^T + o g^T - 2 (o.g) 1 with g = h - m o / 2; then the rotation E^T (.) E, with
    E^T h'^ E = (E^T h')^. About 180 operations where congruence_add takes 375."""
    blocks = xblocks(X)
    (e00, e01, e02, e10, e11, e12, e20, e21, e22) = blocks[0:9]
    o0 = X[2, 3] * e10 + X[2, 4] * e11 + X[2, 5] * e12          # o^ = F E^T
    o1 = X[0, 3] * e20 + X[0, 4] * e21 + X[0, 5] * e22
    o2 = X[1, 3] * e00 + X[1, 4] * e01 + X[1, 5] * e02
    ms = M[0, 0]
    h0, h1, h2 = M[5, 1], M[3, 2], M[4, 0]
    hm = 0.5 * ms
    g0, g1, g2 = h0 - hm * o0, h1 - hm * o1, h2 - hm * o2
    d = -2.0 * (o0 * g0 + o1 * g1 + o2 * g2)
    c00 = M[3, 3] + 2.0 * g0 * o0 + d
    c11 = M[4, 4] + 2.0 * g1 * o1 + d
    c22 = M[5, 5] + 2.0 * g2 * o2 + d
    c01 = M[3, 4] + g0 * o1 + o0 * g1
    c02 = M[3, 5] + g0 * o2 + o0 * g2
    c12 = M[4, 5] + g1 * o2 + o1 * g2
    _rot_sym_add(blocks, c00, c01, c02, c11, c12, c22, out, 3)
    h0, h1, h2 = h0 - ms * o0, h1 - ms * o1, h2 - ms * o2     # h' = h - m o, then E^T h'
    r0 = e00 * h0 + e10 * h1 + e20 * h2
    r1 = e01 * h0 + e11 * h1 + e21 * h2
    r2 = e02 * h0 + e12 * h1 + e22 * h2
    for i in range(3):
        out[i, i] += ms
    out[4, 0] += r2                                              # h^ below, -h^ above
    out[0, 4] += r2
    out[3, 1] -= r2
    out[1, 3] -= r2
    out[5, 1] += r0
    out[1, 5] += r0
    out[4, 2] -= r0
    out[2, 4] -= r0
    out[3, 2] += r1
    out[2, 3] += r1
    out[5, 0] -= r1
    out[0, 5] -= r1


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
                if not all_lanes(acc > 1e-12 * scale):
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


def by_axis(axis_fn, general_fn):
    """The product `f(X, w, a, p, out)` for a joint's tree transform X with structure code a
    (topology.axis_structure): axis_fn(X, w, a, p, out) for a = 0, 1, 2, general_fn(X, p, out)
    for -1. Each axis is its own branch, so that once inlined the axis is a literal and every
    index a constant: with run-time indices the compiler cannot tell the stores from the loads
    that follow them (one buffer), and the fewer operations ran little faster."""
    @njit(inline="always")
    def dispatch(X, w, a, p, out):
        if a == 0:
            axis_fn(X, w, 0, p, out)
        elif a == 1:
            axis_fn(X, w, 1, p, out)
        elif a == 2:
            axis_fn(X, w, 2, p, out)
        else:
            general_fn(X, p, out)
    return dispatch


xmv_s = by_axis(xmv_axis, xmv)                                  # out = X x
xt_add_s = by_axis(xt_add_axis, xt_add)                          # out += X^T x
xtf_rows_s = by_axis(xt_rows_axis, xtf_rows)                     # rows of out = X^T rows of Y
congruence_add_s = by_axis(congruence_add_axis, congruence_add)  # out += X^T M X
rigid_congruence_add_s = by_axis(rigid_congruence_add_axis, rigid_congruence_add)
