# SPDX-License-Identifier: BSD-3-Clause
"""Mimic joints (load_urdf(..., mimic=True)) against Pinocchio 4.1's mimic model
(buildModelFromUrdf(..., mimic=True)): central differences of its forward dynamics
M^-1 (tau - h), M from crba and h from nonLinearEffects (which support mimic joints; its ABA and
derivative algorithms refuse them), on the Lie group (pin.integrate: q exp(dq), as our H exp(z^)).
Joints matched by name; our degrees of freedom are Pinocchio's (the independent joints)."""
import numpy as np
import pytest

import sva_linearizer as sl
from fd_tools import fd_linearization, random_tree
from ros_helpers.oracle import pinocchio_state, random_state
from sva_linearizer.robots import robot_urdf_path
from sva_linearizer.spatial import crm

pin = pytest.importorskip("pinocchio", reason="pin (Pinocchio) is a test dependency: pip install pin")


def erd(rel):
    return robot_urdf_path("panda").parents[2] / rel


ROBOTS = {"panda": ("panda_description/urdf/panda.urdf", False),
          "tiago_pro": ("tiago_pro_description/robots/tiago_pro.urdf", True)}


def pin_forward(pm, pd, qp, vp, taup):
    M = pin.crba(pm, pd, qp)
    M = np.triu(M) + np.triu(M, 1).T
    h = pin.nonLinearEffects(pm, pd, qp, vp)
    return np.linalg.solve(M, taup - h)


def pin_fd_A_B(model, pm, q, v, tau, h=1e-5):
    """Central differences of Pinocchio's mimic forward dynamics, in our order: A, B."""
    pd = pm.createData()
    qp, vp, taup, perm = pinocchio_state(model, pm, q, v, tau)
    nv, nj = model.nv, model.nj
    A = np.zeros((2 * nv, 2 * nv))
    A[:nv, nv:] = np.eye(nv)
    if model.floating_base:
        A[0:6, 0:6] = -crm(vp[0:6])
    for c in range(2 * nv):
        e = np.zeros(pm.nv)
        e[perm[c % nv]] = h
        if c < nv:
            fp = pin_forward(pm, pd, pin.integrate(pm, qp, e), vp, taup)
            fm = pin_forward(pm, pd, pin.integrate(pm, qp, -e), vp, taup)
        else:
            fp = pin_forward(pm, pd, qp, vp + e, taup)
            fm = pin_forward(pm, pd, qp, vp - e, taup)
        A[nv:, c] = ((fp - fm) / (2 * h))[perm]
    B = np.zeros((2 * nv, nj))
    for j in range(nj):
        e = np.zeros(pm.nv)
        e[perm[nv - nj + j]] = 1.0
        B[nv:, j] = ((pin_forward(pm, pd, qp, vp, taup + e) - pin_forward(pm, pd, qp, vp, taup - e)) / 2)[perm]
    return A, B, pin_forward(pm, pd, qp, vp, taup)[perm]


@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_mimic_linearization_against_pinocchio(robot):
    rel, floating = ROBOTS[robot]
    path = erd(rel)
    model = sl.load_urdf(path, floating_base=floating, mimic=True)
    pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer(), mimic=True) if floating else \
        pin.buildModelFromUrdf(str(path), mimic=True)
    tree = sl.load_urdf(path, floating_base=floating)
    assert isinstance(model, sl.CoupledModel) and model.nv == pm.nv and model.nv < tree.nv
    assert set(model.mimic) == {pm.names[i] for i in range(1, pm.njoints)
                               if pm.joints[i].shortname() == "JointModelMimic"}
    rng = np.random.default_rng(41)
    for _ in range(2):
        q, v, tau = random_state(model, pm, rng)
        st = sl.State.from_vectors(model, q, v)
        lin = sl.linearize(model, st, tau)
        A, B, nu = pin_fd_A_B(model, pm, q, v, tau)
        scale = np.max(np.abs(A))
        assert np.max(np.abs(lin.nu_dot - nu)) <= 1e-9 * max(1.0, np.max(np.abs(nu)))
        assert np.max(np.abs(sl.forward_dynamics(model, st, tau) - nu)) <= 1e-9 * max(1.0, np.max(np.abs(nu)))
        eA = np.max(np.abs(lin.A - A)) / scale
        eB = np.max(np.abs(lin.B - B)) / np.max(np.abs(B))
        assert eA < 1e-6 and eB < 1e-6, (robot, eA, eB)
        qp, vp, _, perm = pinocchio_state(model, pm, q, v, tau)
        Mp = pin.crba(pm, pm.createData(), qp)
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        assert np.allclose(sl.mass_matrix(model, st), Mp[np.ix_(perm, perm)], rtol=0, atol=1e-10 * np.abs(Mp).max())
        assert np.allclose(sl.inverse_mass_matrix(model, st) @ Mp[np.ix_(perm, perm)], np.eye(model.nv),
                           atol=1e-8)
    # the batch gives the per-state numbers
    Q, V, T = np.stack([q, q]), np.stack([v, 0 * v]), np.stack([tau, tau])
    OA, OB = sl.linearize_batch(model, Q, V, T)
    assert np.array_equal(OA[0], lin.A) and np.array_equal(OB[0], lin.B)
    lin0 = sl.linearize(model, sl.State.from_vectors(model, q, 0 * v), tau)
    assert np.array_equal(OA[1], lin0.A)


def _mimic_tree(floating, mult=(0.7, -1.3), off=(0.2, -0.1)):
    """A random tree (every joint type) with j3 mimicking j1 and j5 mimicking j3 (a chain)."""
    rng = np.random.default_rng(7)
    tree = random_tree(rng, n=7, floating_base=floating)
    from sva_linearizer.coupling import CoupledModel

    return tree, CoupledModel(tree, {"j3": ("j1", mult[0], off[0]), "j5": ("j3", mult[1], off[1])})


@pytest.mark.parametrize("floating", [False, True])
def test_mimic_chain_against_own_differences(floating):
    """A mimic chain (j5 <- j3 <- j1) on a random tree with revolute, prismatic and helical joints:
    A, B against central differences of the reduced forward dynamics; the coupling composes."""
    tree, model = _mimic_tree(floating)
    assert model.mimic["j5"] == ("j1", pytest.approx(0.7 * -1.3), pytest.approx(-1.3 * 0.2 - 0.1))
    rng = np.random.default_rng(3)
    from fd_tools import fd_kinematic_block, random_state as rs

    st = rs(model, rng)
    tau = rng.normal(size=model.nj)
    lin = sl.linearize(model, st, tau, dt=1e-3)
    A_low, B_low = fd_linearization(model, st, tau, h=1e-5)
    nv = model.nv
    assert np.max(np.abs(lin.A[nv:] - A_low)) / np.max(np.abs(A_low)) < 1e-6
    assert np.max(np.abs(lin.B[nv:] - B_low)) / np.max(np.abs(B_low)) < 1e-6
    assert np.max(np.abs(lin.A[:nv] - fd_kinematic_block(model, st))) < 1e-6
    # the tree state follows the coupling, and the reduced dynamics is the tree's projected
    ts = model.tree_state(st)
    s = ts.s
    names = tree.joint_names
    i1, i3, i5 = (names.index(n) for n in ("j1", "j3", "j5"))
    assert s[i3] == pytest.approx(0.7 * s[i1] + 0.2) and s[i5] == pytest.approx(-1.3 * s[i3] - 0.1)
    G = model.G
    assert np.allclose(sl.mass_matrix(model, st), G.T @ sl.mass_matrix(tree, ts) @ G)
    assert lin.Ad is not None and lin.Ad.shape == lin.A.shape


def test_mimic_errors_name_the_joints():
    rng = np.random.default_rng(7)
    tree = random_tree(rng, n=4, floating_base=False)
    from sva_linearizer.coupling import CoupledModel

    with pytest.raises(ValueError, match="cycle: j1 -> j2 -> j1"):
        CoupledModel(tree, {"j1": ("j2", 1.0, 0.0), "j2": ("j1", 1.0, 0.0)})
    with pytest.raises(ValueError, match="'j1' follows 'nope'"):
        CoupledModel(tree, {"j1": ("nope", 1.0, 0.0)})
    xml = """<robot name="r"><link name="a"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1"
      ixy="0" ixz="0" iyz="0"/></inertial></link>
      <link name="b"><inertial><mass value="1"/>
        <inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
      <link name="c"><inertial><mass value="1"/>
        <inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
      <joint name="fixed_ab" type="fixed"><parent link="a"/><child link="b"/></joint>
      <joint name="bc" type="revolute"><parent link="b"/><child link="c"/><axis xyz="0 0 1"/>
        <limit lower="-1" upper="1" effort="1" velocity="1"/><mimic joint="fixed_ab"/></joint></robot>"""
    with pytest.raises(ValueError, match="'bc' follows 'fixed_ab', which is not a moving joint"):
        sl.load_urdf(xml, floating_base=False, mimic=True)
    m = sl.load_urdf(xml, floating_base=False)              # default: every joint a DoF
    assert m.joint_names == ["bc"]
