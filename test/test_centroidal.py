# SPDX-License-Identifier: BSD-3-Clause
"""The centroidal momentum (sl.centroidal_momentum, sl.centroidal_derivatives) against Pinocchio
4.1 (computeCentroidalDynamicsDerivatives: hg, dhg, Ag, com, mass and its four derivative
matrices, whose q tangent and `a` are z_q and nu_dot here) mapped to our joint order, and against
central differences of the package's own values on random trees with every joint type, fixed and
floating base; Newton-Euler as an independent check (h_dot of the forward dynamics is gravity's
wrench); mimic joints; errors that name the problem; threads."""
import numpy as np
import pytest

import sva_linearizer as sl
from fd_tools import e_max, perturbed, random_state, random_tree
from ros_helpers.oracle import pinocchio_state, robot_states
from sva_linearizer.coupling import CoupledModel
from test_impacts import results_from_threads, tree_with_every_joint

pin = pytest.importorskip("pinocchio", reason="pin (Pinocchio) is a test dependency: pip install pin")

TOL_PIN = 1e-8


@pytest.mark.parametrize("robot,floating", [("solo12", True), ("talos", True), ("panda", False)])
def test_centroidal_against_pinocchio(robot, floating):
    model, pm, _, states = robot_states(robot, floating, n=3)
    rng = np.random.default_rng(4)
    worst = 0.0
    for q, v, _ in states:
        nu_dot = rng.normal(size=model.nv)
        qp, vp, _, perm = pinocchio_state(model, pm, q, v, np.zeros(model.nj))
        ap = np.empty(model.nv)
        ap[perm] = nu_dot
        pd = pm.createData()
        dh_dq, dhd_dq, dhd_dv, dhd_da = (np.array(X, copy=True) for X in
                                         pin.computeCentroidalDynamicsDerivatives(pm, pd, qp, vp, ap))
        cols = np.ix_(range(6), perm)
        st = sl.State.from_vectors(model, q, v)
        c = sl.centroidal_derivatives(model, st, nu_dot)
        errs = [e_max(c.h, pd.hg.vector), e_max(c.h_dot, pd.dhg.vector), e_max(c.com, pd.com[0]),
                abs(c.mass - pd.mass[0]) / pd.mass[0], e_max(c.A_G, dhd_da[cols]),
                e_max(c.dh_dz, np.hstack([dh_dq[cols], dhd_da[cols]])),
                e_max(c.dhdot_dz, np.hstack([dhd_dq[cols], dhd_dv[cols]])), e_max(c.dhdot_dnu_dot, dhd_da[cols])]
        worst = max(worst, *errs)
        assert max(errs) <= TOL_PIN, errs
        m = sl.centroidal_momentum(model, st)
        assert np.array_equal(m.h, c.h) and np.array_equal(m.A_G, c.A_G) and m.h_dot is None
        assert m.dh_dz is None and np.allclose(c.A_G @ st.v, c.h, atol=1e-12 * np.abs(c.h).max())
    print(f"{robot}: e_max {worst:.1e}")


def values(model, st, nu_dot):
    c = sl.centroidal_momentum(model, st, nu_dot)
    return np.concatenate([c.h, c.h_dot])


@pytest.mark.parametrize("floating", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
def test_centroidal_against_own_differences(floating, seed, h=1e-6):
    """Every joint type (revolute, prismatic, helical; custom joints whose position twist differs
    from Gamma): dh_dz, dhdot_dz against central differences over z on the Lie group,
    dhdot_dnu_dot (= A_G) against differences over nu_dot (h_dot is affine in it)."""
    rng = np.random.default_rng(60 + seed + 2 * floating)
    model = tree_with_every_joint(rng, floating)
    st = random_state(model, rng)
    nu_dot = rng.normal(size=model.nv)
    c = sl.centroidal_derivatives(model, st, nu_dot)
    nx = 2 * model.nv
    F = np.zeros((12, nx))
    for k in range(nx):
        z = np.zeros(nx)
        z[k] = h
        F[:, k] = (values(model, perturbed(model, st, z), nu_dot)
                   - values(model, perturbed(model, st, -z), nu_dot)) / (2 * h)
    assert e_max(c.dh_dz, F[:6]) <= 1e-6, e_max(c.dh_dz, F[:6])
    assert e_max(c.dhdot_dz, F[6:]) <= 1e-6, e_max(c.dhdot_dz, F[6:])
    W = np.stack([values(model, st, nu_dot + e)[6:] - values(model, st, nu_dot)[6:] for e in np.eye(model.nv)], axis=1)
    assert e_max(c.dhdot_dnu_dot, W) <= 1e-9


@pytest.mark.parametrize("floating", [True, False])
def test_centre_of_mass_moves_with_the_linear_momentum(floating):
    """m dc/dt = h_lin, dc/dt by differences along the motion (built-in joints: their position
    and velocity twists agree)."""
    rng = np.random.default_rng(31 + floating)
    model = random_tree(rng, n=9, floating_base=floating)
    st = random_state(model, rng)
    c = sl.centroidal_momentum(model, st)
    dt, nv = 1e-6, model.nv
    com = [sl.centroidal_momentum(model, perturbed(model, st, np.r_[s * dt * st.v, np.zeros(nv)])).com
           for s in (1, -1)]
    assert np.allclose(c.mass * (com[0] - com[1]) / (2 * dt), c.h[0:3], rtol=0, atol=1e-7 * np.abs(c.h).max())


@pytest.mark.parametrize("seed", [0, 1])
def test_rate_of_the_free_motion_is_gravity_alone(seed):
    """Newton-Euler: a floating robot moving freely (its forward dynamics) has h_G_dot = the
    external wrench about G, which is gravity's alone: [m g; 0]."""
    rng = np.random.default_rng(seed)
    model = tree_with_every_joint(rng, True)
    st = random_state(model, rng)
    tau = rng.normal(size=model.nj) * 3
    c = sl.centroidal_momentum(model, st, sl.forward_dynamics(model, st, tau))
    g = model.gravity
    wrench = np.r_[c.mass * g, np.zeros(3)]
    assert np.allclose(c.h_dot, wrench, atol=1e-9 * np.abs(wrench).max())


def test_mimic_joints_and_data_views():
    rng = np.random.default_rng(7)
    tree = random_tree(rng, n=7, floating_base=True)
    model = CoupledModel(tree, {"j3": ("j1", 0.7, 0.2)})
    st = random_state(model, rng)
    nu_dot = rng.normal(size=model.nv)
    c = sl.centroidal_derivatives(model, st, nu_dot)
    t = sl.centroidal_derivatives(tree, model.tree_state(st), model.G @ nu_dot)
    G = model.G
    assert np.allclose(c.h, t.h, atol=1e-12) and np.allclose(c.A_G, t.A_G @ G, atol=1e-12)
    nt = tree.nv
    assert np.allclose(c.dh_dz, np.hstack([t.dh_dz[:, :nt] @ G, t.A_G @ G]), atol=1e-12)
    assert np.allclose(c.dhdot_dz, np.hstack([t.dhdot_dz[:, :nt] @ G, t.dhdot_dz[:, nt:] @ G]), atol=1e-12)
    data = sl.Data(tree)
    a = sl.centroidal_derivatives(tree, model.tree_state(st), model.G @ nu_dot, data=data)
    assert np.array_equal(a.dh_dz, t.dh_dz) and np.array_equal(a.dhdot_dz, t.dhdot_dz)
    h0 = a.h.copy()
    sl.centroidal_momentum(tree, random_state(tree, rng), data=data)     # views: overwritten
    assert not np.array_equal(a.h, h0)
    assert not np.shares_memory(t.h, data.fb)
    copy = data.copy()
    sl.centroidal_momentum(tree, random_state(tree, rng), data=copy)
    assert not np.shares_memory(copy._centroidal.buf, data._centroidal.buf)


def test_errors_name_the_problem():
    rng = np.random.default_rng(5)
    model = random_tree(rng, n=4)
    st = random_state(model, rng)
    with pytest.raises(ValueError, match="nu_dot"):
        sl.centroidal_derivatives(model, st, np.zeros(model.nv + 1))
    with pytest.raises(ValueError, match="nu_dot"):
        sl.centroidal_momentum(model, st, np.full(model.nv, np.nan))
    with pytest.raises(ValueError, match="nu_dot is required"):
        sl.centroidal_derivatives(model, st, None)
    other = random_tree(np.random.default_rng(1), n=3)
    with pytest.raises(ValueError, match="another model"):
        sl.centroidal_momentum(model, random_state(other, rng))
    raw = sl.Model(floating_base=True)                 # a general 6x6 inertia: no mass, no G
    with pytest.warns(UserWarning, match="not physically consistent"):
        raw.set_base_inertia(np.diag([2.0, 3.0, 4.0, 0.1, 0.2, 0.3]))
    with pytest.raises(ValueError, match="rigid-body form"):
        sl.centroidal_momentum(raw, sl.State(raw))
    arm = sl.Model(floating_base=False)
    with pytest.warns(UserWarning, match="not physically consistent"):
        arm.add_body("a", None, sl.Joint.revolute((0, 0, 1)), placement=(np.eye(3), (0, 0, 0)),
                     inertia=sl.Inertia(0.0, (0, 0, 0), np.diag([1.0, 1.0, 1.0])))
    with pytest.raises(ValueError, match="no mass"):
        sl.centroidal_momentum(arm, sl.State(arm, s=[0.1], r=[0.2]))


def test_threads_give_sequential_results():
    rng = np.random.default_rng(9)
    model = tree_with_every_joint(rng, True)
    states = [random_state(model, rng) for _ in range(6)]
    nu_dot = rng.normal(size=model.nv)

    def rate(s):
        return sl.centroidal_derivatives(model, s, nu_dot).dhdot_dz
    ref = [rate(s) for s in states]
    out = results_from_threads(rate, states)
    assert all(np.array_equal(out[(t, i)], ref[i]) for t in range(4) for i in range(len(states)))
