# SPDX-License-Identifier: BSD-3-Clause
"""Pinocchio as oracle (test/ros_helpers/oracle.py): A and B assembled from
pinocchio.computeABADerivatives (free-flyer root, and fixed base), joints matched by name, equal
ours to e_max <= 1e-8 on real robots of example-robot-data; the well-conditioned ingredients of A,
the mass matrix (crba) and the inverse-dynamics derivatives (computeRNEADerivatives, at our
acceleration), equal ours to e_max <= 1e-10 on every robot.

icub is ill-conditioned (cond(M) 4e6-9e6 fixed base, 1.6e8-5.7e8 floating base at these states:
the head, `neck_yaw`, carries ~1 kg with zero rotational inertia), so a double-precision
computation of A's lower blocks -M^-1 [D_q | D_nu] can be off by up to cond(M) eps (normwise), two
of them can differ by twice that, and ours and Pinocchio's do differ by e_max 6e-8..8e-5. For
icub, A, B and Minv are compared with Pinocchio's normwise against 2 cond(M) eps; which side is
accurate (ours: e_max <= 1e-8 against an extended-precision reference and a backward error at
machine precision; Pinocchio's: neither) is shown in test_accuracy.py.
"""
import numpy as np
import pytest

import sva_linearizer as sl
from fd_tools import e_max
from ros_helpers.oracle import pinocchio_oracle, robot_states
from sva_linearizer.spatial import quat_to_matrix

pin = pytest.importorskip("pinocchio", reason="pin (Pinocchio) is a test dependency: pip install pin")

ROBOTS = ["solo12", "anymal_c", "hyq", "ur5", "panda", "kinova", "icub"]
ILL_CONDITIONED = {"icub"}
EPS = np.finfo(float).eps


def rel(X, Y):
    """Normwise (Frobenius) relative difference."""
    return np.linalg.norm(X - Y) / np.linalg.norm(Y)


@pytest.mark.parametrize("robot", ROBOTS)
def test_A_B_equal_pinocchio(robot):
    for floating in (True, False):
        model, pm, path, states = robot_states(robot, floating)
        nv = model.nv
        for q, v, tau in states:
            st = sl.State.from_vectors(model, q, v)
            lin = sl.linearize(model, st, tau)
            o = pinocchio_oracle(path, model, q, v, tau, nu_dot=lin.nu_dot, pm=pm)
            what = f"{robot} floating={floating}"

            # The well-conditioned ingredients: M (CRBAmb vs crba) and the ID derivatives
            # (EIDAmb derivatives vs computeRNEADerivatives, both at our acceleration).
            M = sl.mass_matrix(model, st)
            assert e_max(M, o.M) <= 1e-10, f"{what}: M e_max {e_max(M, o.M):.2e}"
            assert e_max(lin.D_q, o.D_q) <= 1e-10, f"{what}: D_q e_max {e_max(lin.D_q, o.D_q):.2e}"
            assert e_max(lin.D_nu, o.D_nu) <= 1e-10, f"{what}: D_nu e_max {e_max(lin.D_nu, o.D_nu):.2e}"

            if robot not in ILL_CONDITIONED:
                assert e_max(lin.A, o.A) <= 1e-8, f"{what}: A e_max {e_max(lin.A, o.A):.2e}"
                assert e_max(lin.B, o.B) <= 1e-8, f"{what}: B e_max {e_max(lin.B, o.B):.2e}"
                assert e_max(lin.Minv, o.Minv) <= 1e-9, f"{what}: Minv e_max {e_max(lin.Minv, o.Minv):.2e}"
            else:
                # A's lower blocks solve M X = -[D_q | D_nu] with the M and D checked above. A
                # double-precision result is at best within cond(M) eps of the exact one (rounding M
                # alone moves it that much), so two of them differ by at most 2 cond(M) eps, normwise.
                # Ours is within 1e-4 of that bound of an extended-precision reference
                # (test_accuracy.py), so this bounds Pinocchio's error by what the conditioning permits.
                bound = 2 * np.linalg.cond(M) * EPS
                for name, X, Y in (("A", lin.A[nv:], o.A[nv:]), ("B", lin.B[nv:], o.B[nv:]),
                                   ("Minv", lin.Minv, o.Minv)):
                    assert rel(X, Y) <= bound, \
                        f"{what}: {name} differs by {rel(X, Y):.2e} > 2 cond(M) eps = {bound:.2e}"
            # forward dynamics agree too (the upper blocks of A are the same formula on both sides)
            np.testing.assert_allclose(lin.nu_dot, o.nu_dot, rtol=1e-9, atol=1e-9 * np.abs(o.nu_dot).max())
            np.testing.assert_allclose(lin.A[:nv], o.A[:nv], rtol=0, atol=1e-12)
            if floating:
                np.testing.assert_allclose(st.R, quat_to_matrix(q[3:7]), atol=1e-12)
