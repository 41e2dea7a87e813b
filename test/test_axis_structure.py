# SPDX-License-Identifier: BSD-3-Clause
"""The structured transform products (topology.axis_structure, spatial_ops *_axis): for a joint
transform X = [[E, E w^], [0, E]] with E a rotation about a coordinate axis, each product equals
the 6x6 product of numpy (the oracle here: plain matrix products, not the package's code) and the
package's general product, to rounding."""
import numpy as np
import pytest

import sva_linearizer as sl
from sva_linearizer import spatial_ops as so
from sva_linearizer.robots import load_robot


def skew(w):
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def axis_transform(rng, a):
    """X = X_J Xtree as joint_transforms builds it for a revolute joint about e_a at a random angle
    on a placement without rotation, and w."""
    t = rng.uniform(-3, 3)
    c, s = np.cos(t), np.sin(t)
    E = np.eye(3)
    b, cc = (a + 1) % 3, (a + 2) % 3
    E[b, b], E[b, cc], E[cc, b], E[cc, cc] = c, s, -s, c
    w = rng.normal(size=3)
    X = np.zeros((6, 6))
    X[0:3, 0:3] = E
    X[3:6, 3:6] = E
    X[0:3, 3:6] = E @ skew(w)
    return X, w


def rigid(rng, mass=None):
    m = rng.uniform(0.5, 3) if mass is None else mass
    h = rng.normal(size=3)
    C = rng.normal(size=(3, 3))
    C = C @ C.T + np.eye(3)
    M = np.zeros((6, 6))
    M[0:3, 0:3] = m * np.eye(3)
    M[0:3, 3:6] = -skew(h)
    M[3:6, 0:3] = skew(h)
    M[3:6, 3:6] = C
    return M


@pytest.mark.parametrize("a", [0, 1, 2])
def test_axis_products_equal_the_6x6_products(a):
    rng = np.random.default_rng(a)
    for _ in range(20):
        X, w = axis_transform(rng, a)
        x = rng.normal(size=6)
        out = np.zeros(6)
        so.xmv_axis(X, w, a, x, out)
        np.testing.assert_allclose(out, X @ x, rtol=0, atol=1e-14 * np.abs(X @ x).max())
        out = rng.normal(size=6)
        ref = out + X.T @ x
        so.xt_add_axis(X, w, a, x, out)
        np.testing.assert_allclose(out, ref, rtol=0, atol=1e-13 * np.abs(ref).max())
        Y = rng.normal(size=(4, 6))
        ref = Y @ X
        so.xt_rows_axis(X, w, a, Y, Y)
        np.testing.assert_allclose(Y, ref, rtol=0, atol=1e-13 * np.abs(ref).max())
        G = rng.normal(size=(6, 6))
        M = G @ G.T
        out0 = rng.normal(size=(6, 6))
        out0 = out0 + out0.T
        out = out0.copy()
        so.congruence_add_axis(X, w, a, M, out)
        ref = out0 + X.T @ M @ X
        np.testing.assert_allclose(out, ref, rtol=0, atol=1e-13 * np.abs(ref).max())
        assert np.array_equal(out, out.T)
        for mass in (None, 0.0):            # composite inertias and their derivatives (m = 0)
            M = rigid(rng, mass)
            outr = np.zeros((6, 6))
            so.rigid_congruence_add_axis(X, w, a, M, outr)
            ref = X.T @ M @ X
            np.testing.assert_allclose(outr, ref, rtol=0, atol=1e-13 * np.abs(ref).max())
            assert np.array_equal(outr, outr.T)
            outg = np.zeros((6, 6))
            so.rigid_congruence_add(X, M, outg)          # the general product, same numbers
            np.testing.assert_allclose(outr, outg, rtol=0, atol=1e-13 * np.abs(ref).max())


def test_structure_codes_of_real_robots():
    """Which joints take the structured products: revolute about +-x, +-y, +-z on a placement
    without rotation (all of solo12's; g1's with rotated placements do not)."""
    for name, expected in (("solo12", 12), ("go2", 12), ("g1_29dof", 21), ("ur5", 4)):
        d = sl.Data(load_robot(name))
        assert int(np.sum(d.xax[1:] >= 0)) == expected, name
        for k in np.flatnonzero(d.xax >= 0):
            T = d.Xtree[k]
            assert np.array_equal(T[0:3, 0:3], np.eye(3)) and d.sax[k] == 3 + d.xax[k]
            np.testing.assert_array_equal(T[0:3, 3:6], skew(d.xw[k]))
    d = sl.Data(load_robot("icub"))   # its URDF's axes are 6e-17 off the coordinate axes
    assert int(np.sum(d.xax[1:] >= 0)) <= 2


@pytest.mark.parametrize("robot,floating", [("solo12", True), ("g1_29dof", True), ("ur5", False),
                                            ("talos_full", True)])
def test_structured_and_general_paths_agree(robot, floating):
    """The pipeline with the structure codes (the default) and with them cleared on the same Data
    (every transform the 6x6 way): the same transforms, A, B, D and Minv to rounding, and not
    bitwise equal (both paths ran)."""
    model = load_robot(robot, floating_base=floating)
    fast, slow = sl.Data(model), sl.Data(model)
    assert np.any(fast.xax >= 0)
    slow.xax[:] = -1
    rng = np.random.default_rng(3)
    differ = False
    for _ in range(3):
        q = np.zeros(model.nq)
        if floating:
            q[0:3] = rng.normal(size=3)
            quat = rng.normal(size=4)
            q[3:7] = quat / np.linalg.norm(quat)
        q[model.nq - model.nj:] = rng.uniform(-2, 2, model.nj)
        st = sl.State.from_vectors(model, q, rng.normal(size=model.nv))
        tau = rng.normal(size=model.nj)
        a = sl.linearize(model, st, tau, data=fast)
        b = sl.linearize(model, st, tau, data=slow)
        np.testing.assert_allclose(fast.Xup, slow.Xup, rtol=0, atol=1e-15)
        for x, y in ((a.A, b.A), (a.B, b.B), (a.D, b.D), (a.Minv, b.Minv), (a.nu_dot, b.nu_dot)):
            assert np.max(np.abs(x - y)) <= 1e-12 * np.max(np.abs(y))
            differ |= not np.array_equal(x, y)
    assert differ


def test_rigid_form_products_equal_the_6x6_products():
    """M x and the symmetric part of 2B (Singh eq. 28) on a rigid-body inertia's parameters equal
    numpy's 6x6 products (mass 0 included: the composites' derivatives KC)."""
    from sva_linearizer.algorithms.eidamb_derivatives import two_b_sym
    rng = np.random.default_rng(5)
    for mass in (None, 0.0, None):
        M = rigid(rng, mass)
        x = rng.normal(size=6)
        out = np.zeros(6)
        so.mv_r(M, 1, x, out)
        np.testing.assert_allclose(out, M @ x, rtol=0, atol=1e-14 * np.abs(M @ x).max())
        out2 = rng.normal(size=6)
        ref = out2 + M @ x
        so.mv_add_r(M, 1, x, out2)
        np.testing.assert_allclose(out2, ref, rtol=0, atol=1e-14 * np.abs(ref).max())
        v = rng.normal(size=6)
        vxs = np.zeros((6, 6))                              # v x* = [[w^, 0], [l^, w^]]
        vxs[0:3, 0:3] = vxs[3:6, 3:6] = skew(v[3:6])
        vxs[3:6, 0:3] = skew(v[0:3])
        C = vxs @ M
        K = np.zeros((6, 6))
        so.two_b_sym_rigid(M, v, K)
        np.testing.assert_allclose(K, C + C.T, rtol=0, atol=1e-13 * np.abs(C).max())
        assert np.array_equal(K, K.T)
        K2 = np.zeros((6, 6))
        two_b_sym(M, v, np.zeros((6, 6)), K2)
        np.testing.assert_allclose(K, K2, rtol=0, atol=1e-13 * np.abs(C).max())
