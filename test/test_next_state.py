# SPDX-License-Identifier: BSD-3-Clause
"""next_state: the semi-implicit Euler step that Ad, Bd linearize. Its pose update is checked against
the matrix exponential of the twist (scipy's expm of the 4x4 twist matrix, independent of the
package's se3_exp), and Ad, Bd against central differences of the step itself around the state it
predicts: x_pt (+) z one step later is next_state(x_pt) (+) (Ad z + Bd w) to first order."""
import numpy as np
import pytest
from scipy.linalg import expm

import sva_linearizer as sl
from fd_tools import e_max, perturbed, random_state, random_tree
from sva_linearizer.spatial import se3_log


def _hat(xi):
    v, w = xi[:3], xi[3:]
    return np.array([[0.0, -w[2], w[1], v[0]], [w[2], 0.0, -w[0], v[1]], [-w[1], w[0], 0.0, v[2]],
                     [0.0, 0.0, 0.0, 0.0]])


def _minus(model, x, y):
    """x (-) y: z with y (+) z = x (the perturbation of A's columns)."""
    if not model.floating_base:
        return np.r_[x.s - y.s, x.r - y.r]
    dR = y.R.T @ x.R
    dp = y.R.T @ (x.p - y.p)
    return np.r_[se3_log(dR, dp), x.s - y.s, x.v_base - y.v_base, x.r - y.r]


def test_next_state_is_the_symplectic_euler_step_on_se3():
    rng = np.random.default_rng(11)
    model = random_tree(rng, n=5, floating_base=True)
    st = random_state(model, rng)
    nu_dot = rng.normal(size=model.nv)
    dt = 0.01
    nxt = sl.next_state(model, st, nu_dot, dt)
    v_plus = st.v + dt * nu_dot
    H = np.eye(4)
    H[:3, :3], H[:3, 3] = st.R, st.p
    H_plus = H @ expm(_hat(dt * v_plus[:6]))
    assert np.allclose(nxt.R, H_plus[:3, :3], atol=1e-13) and np.allclose(nxt.p, H_plus[:3, 3], atol=1e-13)
    assert np.allclose(nxt.v, v_plus, atol=0) and np.allclose(nxt.s, st.s + dt * v_plus[6:], atol=1e-15)
    fixed = random_tree(rng, n=4, floating_base=False)
    st = random_state(fixed, rng)
    nxt = sl.next_state(fixed, st, np.ones(fixed.nv), dt)
    assert np.allclose(nxt.r, st.r + dt) and np.allclose(nxt.s, st.s + dt * (st.r + dt))
    with pytest.raises(ValueError, match="dt must be a positive"):
        sl.next_state(fixed, st, np.ones(fixed.nv), 0.0)
    with pytest.raises(ValueError, match="nu_dot"):
        sl.next_state(fixed, st, np.ones(fixed.nv + 1), dt)


@pytest.mark.parametrize("floating", [True, False])
def test_Ad_Bd_linearize_next_state(floating):
    rng = np.random.default_rng(12 + floating)
    model = random_tree(rng, n=5, floating_base=floating)
    st = random_state(model, rng)
    tau = rng.normal(size=model.nj)
    dt, h = 0.01, 1e-6
    lin = sl.linearize(model, st, tau, dt=dt)
    center = sl.next_state(model, st, lin.nu_dot, dt)
    n2, nj = 2 * model.nv, model.nj

    def step(z, w):
        x = perturbed(model, st, z)
        return _minus(model, sl.next_state(model, x, sl.forward_dynamics(model, x, tau + w), dt), center)

    Ad = np.zeros((n2, n2))
    for c in range(n2):
        e = np.zeros(n2)
        e[c] = h
        Ad[:, c] = (step(e, np.zeros(nj)) - step(-e, np.zeros(nj))) / (2 * h)
    Bd = np.zeros((n2, nj))
    for c in range(nj):
        e = np.zeros(nj)
        e[c] = h
        Bd[:, c] = (step(np.zeros(n2), e) - step(np.zeros(n2), -e)) / (2 * h)
    assert np.allclose(step(np.zeros(n2), np.zeros(nj)), 0.0, atol=1e-13)
    assert e_max(lin.Ad, Ad) < 1e-6 and e_max(lin.Bd, Bd) < 1e-6, (e_max(lin.Ad, Ad), e_max(lin.Bd, Bd))


def test_the_affine_model_in_the_fixed_chart_at_the_point():
    """docs/ros.md, "The model the record gives": in the chart x = x_pt (+) zeta with x_pt fixed,
    zeta_dot = f0 + A_f zeta + B dw to first order, f0 = [v; nu_dot] and A_f = A with ad(v)/2 added
    to the z_H block. Checked by central differences of zeta_dot, itself a central difference in
    time of the true motion (the pose moving with the body twist, nu with FD)."""
    rng = np.random.default_rng(21)
    model = random_tree(rng, n=4, floating_base=True)
    st = random_state(model, rng)
    tau = rng.normal(size=model.nj)
    lin = sl.linearize(model, st, tau)
    n2 = 2 * model.nv

    def zeta_dot(zeta, t=1e-6):
        x = perturbed(model, st, zeta)
        nu_dot = sl.forward_dynamics(model, x, tau)
        ends = []
        for sign in (1.0, -1.0):
            h = sign * t
            moved = perturbed(model, x, np.r_[h * x.v, h * nu_dot])   # x(h) to first order in h
            ends.append(_minus(model, moved, st))
        return (ends[0] - ends[1]) / (2 * t)

    f0 = np.r_[st.v, lin.nu_dot]
    assert np.allclose(zeta_dot(np.zeros(n2)), f0, rtol=1e-7, atol=1e-7)
    J = np.zeros((n2, n2))
    e = 1e-4
    for c in range(n2):
        d = np.zeros(n2)
        d[c] = e
        J[:, c] = (zeta_dot(d) - zeta_dot(-d)) / (2 * e)
    v = st.v[:6]
    ad = np.zeros((6, 6))
    W, U = _hat(np.r_[0.0, 0.0, 0.0, v[3:]])[:3, :3], _hat(np.r_[0.0, 0.0, 0.0, v[:3]])[:3, :3]
    ad[:3, :3], ad[:3, 3:], ad[3:, 3:] = W, U, W
    A_f = lin.A.copy()
    A_f[:6, :6] += ad / 2
    assert e_max(J, A_f) < 1e-5, e_max(J, A_f)
    assert e_max(J, lin.A) > 1e-3            # A alone is the deviation from the nominal motion


def test_next_state_keeps_the_quaternion_hemisphere_of_the_state():
    """q and -q are the same rotation: the next state's quaternion is the one with q_next . q >= 0,
    for states given with w < 0 as with w > 0, also across a half turn where w changes sign."""
    rng = np.random.default_rng(13)
    model = random_tree(rng, n=3, floating_base=True)
    dt, seen_negative_w = 0.01, 0
    for k in range(200):
        quat = rng.normal(size=4)
        quat /= np.linalg.norm(quat)
        if k % 2:
            quat = -quat                      # the same rotation given in the other hemisphere
        seen_negative_w += quat[3] < 0
        st = sl.State.from_vectors(model, np.r_[rng.normal(size=3), quat, rng.normal(size=model.nj)],
                                   rng.normal(size=model.nv) * 5.0)
        nxt = sl.next_state(model, st, rng.normal(size=model.nv), dt)
        assert nxt.quat @ st.quat >= 0.0
        np.testing.assert_allclose(st.quat, quat, rtol=0, atol=1e-15)   # the point keeps the sign it was given
    assert seen_negative_w > 50
    # a turn across w = 0: w > 0 at the state, w < 0 on the other side; the sign does not jump
    st = sl.State.from_vectors(model, np.r_[np.zeros(3), 0.0, 0.0, np.sin(0.49 * np.pi), np.cos(0.49 * np.pi),
                                            np.zeros(model.nj)], np.r_[0, 0, 0, 0, 0, 10.0, np.zeros(model.nj)])
    nxt = sl.next_state(model, st, np.zeros(model.nv), dt)
    assert nxt.quat[3] < 0.0 < st.quat[3] and nxt.quat @ st.quat > 0.99
