# SPDX-License-Identifier: BSD-3-Clause
"""Bad input gets a ValueError that names the problem."""
import numpy as np
import pytest

import sva_linearizer as sl
from sva_linearizer.cli import main as cli_main
from sva_linearizer.robots import load_robot


@pytest.fixture(scope="module")
def quad():
    return load_robot("quadruped")


def flat_state(model):
    q = np.zeros(model.nq)
    q[6] = 1.0
    return q, np.zeros(model.nv)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_state_and_torque(quad, bad):
    q, v = flat_state(quad)
    q2 = q.copy()
    q2[9] = bad
    with pytest.raises(ValueError, match=r"q: entry 9 is .*(NaN or infinite)"):
        sl.State.from_vectors(quad, q2, v)
    v2 = v.copy()
    v2[2] = bad
    with pytest.raises(ValueError, match=r"v: entry 2"):
        sl.State.from_vectors(quad, q, v2)
    st = sl.State.from_vectors(quad, q, v)
    tau = np.zeros(quad.nj)
    tau[0] = bad
    with pytest.raises(ValueError, match=r"tau: entry 0"):
        sl.linearize(quad, st, tau)
    with pytest.raises(ValueError, match=r"nu_dot: entry"):
        sl.extended_inverse_dynamics(quad, st, np.full(quad.nv, bad))


def test_wrong_sizes(quad):
    q, v = flat_state(quad)
    with pytest.raises(ValueError, match=rf"q: expected a vector of size {quad.nq}"):
        sl.State.from_vectors(quad, q[:-1], v)
    with pytest.raises(ValueError, match=rf"v: expected a vector of size {quad.nv}"):
        sl.State.from_vectors(quad, q, np.zeros(quad.nv + 2))
    st = sl.State.from_vectors(quad, q, v)
    with pytest.raises(ValueError, match=rf"tau: expected a vector of size {quad.nj}"):
        sl.linearize(quad, st, np.zeros(3))
    with pytest.raises(ValueError, match="linearize_batch: q, v, tau must be 2-D"):
        sl.linearize_batch(quad, q, v, np.zeros(quad.nj))
    with pytest.raises(ValueError, match="state was built for another model"):
        sl.linearize(load_robot("quadruped", floating_base=False), st, np.zeros(quad.nj))


def test_quaternion_normalised_within_tolerance_rejected_beyond(quad):
    q, v = flat_state(quad)
    q[3:7] = [0.1, 0.2, 0.3, 0.9]
    q[3:7] /= np.linalg.norm(q[3:7])
    ref = sl.State.from_vectors(quad, q, v)
    q_near = q.copy()
    q_near[3:7] *= 1 + 5e-7  # within 1e-6: normalised silently
    before = q_near.copy()
    st = sl.State.from_vectors(quad, q_near, v)
    np.testing.assert_allclose(st.R, ref.R, atol=1e-12)
    assert abs(np.linalg.norm(st.quat) - 1.0) < 4e-16          # the state's own copy, normalised
    np.testing.assert_allclose(st.quat, q[3:7], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(q_near, before)              # the caller's q is left alone
    q_far = q.copy()
    q_far[3:7] *= 1.01
    with pytest.raises(ValueError, match=r"quaternion.*norm 1.01 is not 1"):
        sl.State.from_vectors(quad, q_far, v)
    q_zero = q.copy()
    q_zero[3:7] = 0.0
    with pytest.raises(ValueError, match="norm 0 is not 1"):
        sl.State.from_vectors(quad, q_zero, v)


def test_unknown_robot_name():
    with pytest.raises(ValueError, match="unknown robot 'no_such_robot'.*solo12"):
        load_robot("no_such_robot")


def test_cli_reports_bad_input(capsys):
    assert cli_main(["linearize", "--robot", "no_such_robot"]) == 2
    assert "unknown robot 'no_such_robot'" in capsys.readouterr().err
    assert cli_main(["linearize", "--tau", "1 2 nan"]) == 2
    assert "tau" in capsys.readouterr().err
    assert cli_main(["linearize", "--q", "1 2 x"]) == 2
    assert "--q" in capsys.readouterr().err


def test_model_building_errors():
    m = sl.Model()
    with pytest.raises(ValueError, match="parent body 'nope' is not in the model"):
        m.add_body("a", "nope", sl.Joint.revolute())
    with pytest.raises(ValueError, match="joint axis must be non-zero"):
        sl.Joint.revolute((0, 0, 0))
    with pytest.raises(ValueError, match="inertia has NaN"):
        m.add_body("a", None, sl.Joint.revolute(), inertia=np.full((6, 6), np.nan))
    with pytest.raises(ValueError, match="not symmetric"):
        m.add_body("a", None, sl.Joint.revolute(), inertia=np.triu(np.ones((6, 6))))
    m.set_base_inertia(sl.Inertia(1.0, (0, 0, 0), np.eye(3) * 0.01))
    m.add_body("a", None, sl.Joint.revolute(), inertia=sl.Inertia(1.0, (0, 0, 0.1), np.eye(3) * 0.01))
    with pytest.raises(ValueError, match="already in the model"):
        m.add_body("a", None, sl.Joint.revolute())
    # a massless leaf makes M singular: named
    m.add_body("massless", "a", sl.Joint.revolute((1, 0, 0)))
    with pytest.raises(ValueError, match="joint 'massless'.*massless subtree"):
        sl.linearize(m, sl.State(m), np.zeros(2))
    with pytest.raises(ValueError, match="base_velocity_frame"):
        sl.extended_inverse_dynamics_derivatives(load_robot("quadruped"), sl.State(load_robot("quadruped")),
                                                 np.zeros(18), base_velocity_frame="world")


def test_vectors_changed_after_the_state_was_built(quad):
    """A State holds its own copies of q, v (the one rule: State.from_vectors always copies), so
    the caller changing its arrays afterwards changes nothing; values written into the state's own
    arrays are checked again in the compiled call, so a NaN or a drifted quaternion is still
    named, and nothing is computed from it."""
    q, v = flat_state(quad)
    st = sl.State.from_vectors(quad, q, v)
    data = sl.Data(quad)
    tau = np.zeros(quad.nj)
    good = sl.linearize(quad, st, tau, data=data).A.copy()
    q[8] = np.nan                       # the caller's array: not the state's
    q[3:7] = [0.0, 0.0, 0.0, 1.02]
    np.testing.assert_array_equal(sl.linearize(quad, st, tau, data=data).A, good)
    st.q[8] = np.nan
    with pytest.raises(ValueError, match=r"q: entry 8 is nan"):
        sl.linearize(quad, st, tau, data=data)
    st.q[8] = q[8] = 0.0
    st.q[3:7] = [0.0, 0.0, 0.0, 1.02]
    with pytest.raises(ValueError, match=r"quaternion.*norm 1.02 is not 1"):
        sl.linearize(quad, st, tau, data=data)
    st.q[3:7] = [0.0, 0.0, 0.0, 1.0 + 5e-7]   # within tolerance: used normalised
    np.testing.assert_allclose(sl.linearize(quad, st, tau, data=data).A, good, atol=1e-9)


def test_state_setters_do_not_write_into_the_callers_arrays(quad):
    q, v = flat_state(quad)
    q0, v0 = q.copy(), v.copy()
    st = sl.State.from_vectors(quad, q, v)
    st.s = np.ones(quad.nj)
    st.v_base = np.arange(6.0)
    np.testing.assert_array_equal(q, q0)
    np.testing.assert_array_equal(v, v0)
    np.testing.assert_array_equal(st.q[7:], 1.0)
    np.testing.assert_array_equal(st.v[0:6], np.arange(6.0))
    with pytest.raises(ValueError, match="joint positions s: expected a vector of size"):
        st.s = np.ones(3)


def test_assigning_q_or_v_checks_them_as_from_vectors_does(quad):
    """state.q = ... and state.v = ... take the same path as State.from_vectors: a copy, checked
    (size, finite values, unit quaternion, normalised within tolerance). The compiled call reads a
    State's own q and v without checking their sizes, so a vector of the wrong size assigned
    there once gave A and B silently (read past its end)."""
    q, v = flat_state(quad)
    q[3:7] = [0.1, 0.2, 0.3, 0.9]
    q[3:7] /= np.linalg.norm(q[3:7])
    q[7:] = np.linspace(-1.0, 1.0, quad.nj)
    v[:] = np.linspace(0.5, -0.5, quad.nv)
    tau = np.linspace(-2.0, 2.0, quad.nj)
    st = sl.State.from_vectors(quad, q, v)
    data = sl.Data(quad)
    good = sl.linearize(quad, st, tau, data=data).A.copy()
    for bad, match in [(q[:-1], rf"q: expected a vector of size {quad.nq}"),
                       (np.where(np.arange(quad.nq) == 9, np.nan, q), r"q: entry 9 is nan"),
                       (np.concatenate([q[:3], 1.01 * q[3:7], q[7:]]), r"quaternion.*norm 1.01 is not 1")]:
        with pytest.raises(ValueError, match=match):
            st.q = bad
    for bad, match in [(np.zeros(quad.nv + 2), rf"v: expected a vector of size {quad.nv}"),
                       (np.full(quad.nv, np.inf), r"v: entry 0 is inf")]:
        with pytest.raises(ValueError, match=match):
            st.v = bad
    np.testing.assert_array_equal(sl.linearize(quad, st, tau, data=data).A, good)   # unchanged
    # accepted: anything from_vectors accepts, as the same numbers (a copy, normalised)
    q2 = q.copy()
    q2[3:7] *= 1 + 5e-7
    v2 = v[::-1].copy()
    ref = sl.State.from_vectors(quad, q2, v2)
    ref_lin = sl.linearize(quad, ref, tau)
    ro = q2.copy()
    ro.flags.writeable = False
    for q_in, v_in in [(q2, v2), (list(q2), list(v2)), (ro, np.repeat(v2, 2)[::2]),
                       (q2.astype(np.float32).astype(np.float64), v2)]:
        st.q, st.v = q_in, v_in
        assert st.q is not q_in and st.v is not v_in
        assert st.q.dtype == np.float64 and st.q.flags.carray and st.v.flags.carray
        if q_in is not None and np.array_equal(np.asarray(q_in), q2):
            np.testing.assert_array_equal(st.q, ref.q)
            lin = sl.linearize(quad, st, tau, data=data)
            np.testing.assert_array_equal(lin.A, ref_lin.A)
            np.testing.assert_array_equal(lin.B, ref_lin.B)
    q2[8] = 7.0                                  # the caller's arrays stay theirs
    assert st.q[8] != 7.0


def _one_custom_joint_model(jcalc, jcalcderiv):
    m = sl.Model(floating_base=False)
    m.add_body("odd", None, sl.Joint.custom(jcalc, jcalcderiv),
               inertia=sl.Inertia(1.0, (0.1, 0, 0), np.eye(3) * 0.01))
    return m


def test_custom_joint_that_is_not_a_spatial_transform_is_named():
    from sva_linearizer.spatial import xform

    def rot_z(s):
        c, sn = np.cos(s), np.sin(s)
        return np.array([[c, sn, 0], [-sn, c, 0], [0, 0, 1.0]])

    gamma = np.array([0, 0, 0, 0, 0, 1.0])
    # a 6x6 matrix that is not [[E, o^ E], [0, E]]
    bad = _one_custom_joint_model(lambda s: (np.full((6, 6), 0.5), gamma), lambda s: np.zeros((6, 6)))
    with pytest.raises(ValueError, match="joint 'odd': jcalc.*not a spatial transform"):
        sl.linearize(bad, sl.State(bad), np.zeros(1))
    # a true transform with a jcalcderiv that is not its derivative (d/ds of a rotation about z
    # is -(e_z x) X_J; this one is a plain scaling)
    wrong = _one_custom_joint_model(lambda s: (xform(rot_z(s), np.zeros(3)), gamma),
                                    lambda s: 2.0 * xform(rot_z(s), np.zeros(3)))
    with pytest.raises(ValueError, match="joint 'odd': jcalcderiv.*not the derivative of jcalc"):
        sl.linearize(wrong, sl.State(wrong), np.zeros(1))
