# SPDX-License-Identifier: BSD-3-Clause
"""Composite inertias on their rigid-body parameters (spatial_ops.rigid_congruence_add, used by
IDSVA where data.rig says a subtree's inertias have that form): checked against the plain 6x6
product X^T M X in numpy, and the derivatives against the general congruence on the same model."""
import numpy as np
import pytest

import sva_linearizer as sl
from fd_tools import random_state
from sva_linearizer.topology import rigid_form
from sva_linearizer.robots import load_robot
from sva_linearizer.spatial import rot_axis_angle, spatial_inertia, xform
from sva_linearizer.spatial_ops import rigid_congruence_add


@pytest.mark.parametrize("mass", [0.0, 2.5])
def test_rigid_congruence_is_the_product_in_numpy(mass):
    rng = np.random.default_rng(3)
    for _ in range(50):
        A = rng.normal(size=(3, 3))
        M = spatial_inertia(mass, rng.normal(size=3), A @ A.T)
        if mass == 0.0:   # the time derivative of an inertia (IDSVA's KC): m = 0, h and C free
            h, C = rng.normal(size=3), rng.normal(size=(3, 3))
            M = np.zeros((6, 6))
            M[3:6, 0:3] = [[0, -h[2], h[1]], [h[2], 0, -h[0]], [-h[1], h[0], 0]]
            M[0:3, 3:6] = M[3:6, 0:3].T
            M[3:6, 3:6] = C + C.T
        axis = rng.normal(size=3)
        X = xform(rot_axis_angle(axis / np.linalg.norm(axis), rng.uniform(-3, 3)), rng.normal(size=3))
        start = spatial_inertia(1.0, rng.normal(size=3), np.eye(3))
        out = start.copy()
        rigid_congruence_add(X, M, out)
        ref = start + X.T @ M @ X
        assert np.max(np.abs(out - ref)) <= 1e-13 * np.max(np.abs(ref))
        assert rigid_form(out)        # written back in the form, exactly


def test_rig_flags_follow_the_inertias():
    model = load_robot("quadruped")
    d = sl.Data(model)
    assert d.rig.tolist() == [1] * (model.nj + 1)        # URDF bodies (merged links included)
    raw = np.array(model.bodies[2].inertia)               # body 3 (joint 2): a raw 6x6, not rigid
    raw[0, 1] = raw[1, 0] = 1e-3
    model.bodies[2].inertia = raw
    model._changed()
    d = sl.Data(model)
    lam = d.lam
    off = {3}
    k = 3
    while k > 0:
        k = lam[k]
        off.add(k)
    assert [k for k in range(model.nj + 1) if d.rig[k] == 0] == sorted(off)


@pytest.mark.parametrize("name", ["quadruped", "ur5"])
def test_derivatives_equal_the_general_congruences(name):
    model = load_robot(name)
    rng = np.random.default_rng(5)
    st, tau = random_state(model, rng), rng.normal(size=model.nj)
    d = sl.Data(model)
    lin = sl.linearize(model, st, tau, data=d)
    A, D = lin.A.copy(), lin.D.copy()
    assert d.rig.all()
    d.rig[:] = 0                                          # the general 6x6 congruences
    lin0 = sl.linearize(model, st, tau, data=d)
    assert np.max(np.abs(lin0.D - D)) <= 1e-12 * np.max(np.abs(D))
    assert np.max(np.abs(lin0.A - A)) <= 1e-12 * np.max(np.abs(A))
    assert not np.array_equal(lin0.D, D)                  # both paths did run
