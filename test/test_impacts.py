# SPDX-License-Identifier: BSD-3-Clause
"""Impacts (sl.impact, sl.linearize_impact) against Pinocchio 4.1 (impulseDynamics and
computeImpulseDynamicsDerivatives, RigidConstraintModel CONTACT_3D / CONTACT_6D, LOCAL /
LOCAL_WORLD_ALIGNED: its ddq_dv is d v+/d v- minus the identity) mapped to z, and against central
differences of the package's own impact on random trees with every joint type (revolute,
prismatic, helical, custom), fixed and floating base, with loops; the physics (the constraints
hold after, e = 1 keeps the kinetic energy); errors that name the problem; threads."""
import numpy as np
import pytest

import sva_linearizer as sl
from fd_tools import e_max, perturbed, random_inertia, random_state, random_tree, random_unit
from ros_helpers.oracle import pinocchio_state, robot_states
from sva_linearizer.coupling import CoupledModel
from sva_linearizer.spatial import rot_axis_angle, xform
from test_contacts_api import _run_threads
from test_contacts_pinocchio import pin_constraint_data, pin_contacts
from thesis_system import table_b1_joint

pin = pytest.importorskip("pinocchio", reason="pin (Pinocchio) is a test dependency: pip install pin")

TOL_PIN = 1e-8


def pin_impact(model, pm, q, v, contacts, e):
    """Pinocchio's v+, impulses, reset map's Jacobian on z ([[1, 0], [ddq_dq, ddq_dv + 1]]) and
    the impulses' derivatives, in our joint order (the contacts' models of the contact tests; an
    impact has no Baumgarte terms), on a fresh Data."""
    qp, vp, _, perm = pinocchio_state(model, pm, q, v, np.zeros(model.nj))
    cms = pin_contacts(pm, qp, contacts)
    pd, cds = pin_constraint_data(pm, cms)
    v_plus = pin.impulseDynamics(pm, pd, qp, vp, cms, cds, e).copy()
    impulses = pd.impulse_c.copy()
    pin.computeImpulseDynamicsDerivatives(pm, pd, cms, cds, e)
    dq, dv, dlq, dlv = (np.array(X, copy=True) for X in (pd.ddq_dq, pd.ddq_dv, pd.dlambda_dq, pd.dlambda_dv))
    nv = model.nv
    J = np.zeros((2 * nv, 2 * nv))
    J[:nv, :nv] = np.eye(nv)
    J[nv:, :nv] = dq[perm][:, perm]
    J[nv:, nv:] = dv[perm][:, perm] + np.eye(nv)
    return v_plus[perm], impulses, J, np.hstack([dlq[:, perm], dlv[:, perm]])


ROBOTS = {"solo12": (True, [(f, "point") for f in ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")]),
          "talos": (True, [("left_sole_link", "6d"), ("right_sole_link", "6d")]),
          "panda": (False, [("panda_hand_tcp", "6d")])}


@pytest.mark.parametrize("restitution", [0.0, 0.5])
@pytest.mark.parametrize("reference", ["local", "world_aligned"])
@pytest.mark.parametrize("robot", list(ROBOTS))
def test_impact_against_pinocchio(robot, reference, restitution):
    floating, feet = ROBOTS[robot]
    model, pm, _, states = robot_states(robot, floating, n=2)
    cs = [sl.Contact(f, kind, reference, offset=(0.0, 0.01 * i, 0.0), baumgarte=(5.0, 1.0))
          for i, (f, kind) in enumerate(feet)]   # gains play no part in an impact
    worst = 0.0
    for q, v, _ in states:
        st = sl.State.from_vectors(model, q, v)
        imp = sl.linearize_impact(model, st, cs, restitution=restitution)
        v_plus, impulses, J, dl = pin_impact(model, pm, q, v, cs, restitution)
        errs = [e_max(imp.v_plus, v_plus), e_max(imp.impulses, impulses), e_max(imp.jacobian, J),
                e_max(imp.dimpulses_dz, dl)]
        worst = max(worst, *errs)
        assert max(errs) <= TOL_PIN, errs
        vp2, imp2 = sl.impact(model, st, cs, restitution=restitution)
        assert np.array_equal(vp2, imp.v_plus) and np.array_equal(imp2, imp.impulses)
    print(f"{robot} {reference} e={restitution}: e_max {worst:.1e}")


TWO_LEGS = [0, 1, 2, 3, 4, 5, 6, 0, 8, 9, 10, 11, 12, 13]   # two chains of 7 joints from the base


def tree_with_every_joint(rng, floating):
    """Two chains of 7 joints from the base (revolute, prismatic, helical about random axes) with a
    custom helical and a custom prismatic joint (Table B.1's, whose position twist differs from
    Gamma) at their ends."""
    model = random_tree(rng, n=14, floating_base=floating, parents=TWO_LEGS)
    for name, parent, joint in (("c1", "j6", table_b1_joint("H", "z", 0.4)),
                                ("c2", "j13", table_b1_joint("P", "x", 0))):
        R = rot_axis_angle(random_unit(rng), 0.7)
        model.add_body(name, parent, joint, placement=(R, rng.normal(size=3) * 0.2), inertia=random_inertia(rng))
    return model


def fd_impact(model, st, contacts, e, h=1e-6):
    """Central differences of (v+, impulses) over z on the Lie group: the pose perturbed by
    z_q, v- by z_v."""
    nx = 2 * model.nv
    cols = []
    for c in range(nx):
        z = np.zeros(nx)
        z[c] = h
        plus = np.concatenate(sl.impact(model, perturbed(model, st, z), contacts, e))
        minus = np.concatenate(sl.impact(model, perturbed(model, st, -z), contacts, e))
        cols.append((plus - minus) / (2 * h))
    return np.stack(cols, axis=-1)


CASES = [(["point", "point"], "local"), (["6d", "point"], "world_aligned"), (["point", "6d"], "local"),
         (["6d", "6d"], "world_aligned")]


@pytest.mark.parametrize("restitution", [0.0, 0.5])
@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("floating", [True, False])
def test_impact_against_own_differences(floating, case, restitution):
    kinds, reference = CASES[case]
    rng = np.random.default_rng(40 + case + 7 * floating)
    model = tree_with_every_joint(rng, floating)
    st = random_state(model, rng)
    cs = [sl.Contact(f, k, reference, offset=rng.normal(size=3) * 0.1) for f, k in zip(("c1", "c2"), kinds)]
    if not floating and kinds == ["6d", "6d"]:
        cs = cs[:1]                                  # (two 6d contacts would fix the whole tree)
    imp = sl.linearize_impact(model, st, cs, restitution)
    nv = model.nv
    F = fd_impact(model, st, cs, restitution)
    assert e_max(imp.dv_plus_dz, F[:nv]) <= 1e-6, e_max(imp.dv_plus_dz, F[:nv])
    assert e_max(imp.dimpulses_dz, F[nv:]) <= 1e-6, e_max(imp.dimpulses_dz, F[nv:])
    assert np.array_equal(imp.jacobian[:nv], np.hstack([np.eye(nv), np.zeros((nv, nv))]))
    # the contacts' velocities after: -e times before (Jc from frame_jacobian), M (v+ - v-) = Jc^T impulses
    rows = []
    for c in cs:
        Jf = sl.frame_jacobian(model, st, c.frame, reference="local")
        R, _ = sl.frame_placement(model, st, c.frame)
        Jc = xform(np.eye(3), -c.offset) @ Jf                          # at the contact point
        if reference == "world_aligned":
            Jc = np.vstack([R @ Jc[0:3], R @ Jc[3:6]])
        rows.append(Jc[:c.dim])
    Jc = np.vstack(rows)
    scale = np.abs(Jc @ st.v).max()
    assert np.abs(Jc @ imp.v_plus + restitution * Jc @ st.v).max() <= 1e-9 * scale
    M = sl.mass_matrix(model, st)
    assert np.allclose(M @ (imp.v_plus - st.v), Jc.T @ imp.impulses, atol=1e-9 * np.abs(Jc.T @ imp.impulses).max())


def test_elastic_impact_keeps_the_energy_and_plastic_loses_it():
    """e = 1: v+ = (1 - 2 P) v- with P = Minv Jc^T K^-1 Jc an M-orthogonal projection: the kinetic
    energy is kept; e = 0 loses some (and the contacts stop)."""
    rng = np.random.default_rng(3)
    model = tree_with_every_joint(rng, True)
    st = random_state(model, rng)
    cs = [sl.Contact("c1", "point", "world_aligned"), sl.Contact("c2", "6d", "local")]
    M = sl.mass_matrix(model, st)
    T = st.v @ M @ st.v / 2
    vp1, _ = sl.impact(model, st, cs, restitution=1.0)
    assert abs(vp1 @ M @ vp1 / 2 - T) <= 1e-10 * T
    vp0, _ = sl.impact(model, st, cs, restitution=0.0)
    assert vp0 @ M @ vp0 / 2 < T
    assert np.allclose(sl.frame_velocity(model, sl.State.from_vectors(model, st.q, vp0), "c2"), 0, atol=1e-10)



def test_the_centroidal_momentum_jumps_by_the_impulses_wrench():
    """Impulse and momentum: h_G after the impact less before = the impulses' wrench about G, in
    world axes (world-aligned point contacts: [sum f_i; sum (p_i - c) x f_i], p_i the contact
    points); the pose, hence G, does not move."""
    rng = np.random.default_rng(17)
    model = tree_with_every_joint(rng, True)
    st = random_state(model, rng)
    cs = [sl.Contact(f, "point", "world_aligned", offset=rng.normal(size=3) * 0.1) for f in ("c1", "c2", "j3")]
    v_plus, impulses = sl.impact(model, st, cs, 0.3)
    before = sl.centroidal_momentum(model, st)
    after = sl.centroidal_momentum(model, sl.State.from_vectors(model, st.q, v_plus))
    wrench = np.zeros(6)
    for c, f in zip(cs, impulses.reshape(-1, 3)):
        R, p = sl.frame_placement(model, st, c.frame)
        wrench[0:3] += f
        wrench[3:6] += np.cross(p + R @ c.offset - before.com, f)
    assert np.array_equal(after.com, before.com)
    assert np.allclose(after.h - before.h, wrench, atol=1e-10 * np.abs(wrench).max())

@pytest.mark.parametrize("restitution", [0.0, 0.5])
def test_loops_hold_through_the_impact(restitution):
    """A loop between the two chains and a contact: after the impact the loop's rows are 0 (not -e
    times before, even when v- violates it), the contact's are -e times before; the reset map and
    the impulses' derivatives against central differences."""
    rng = np.random.default_rng(21)
    model = tree_with_every_joint(rng, True)
    st = random_state(model, rng)
    loop = sl.Loop("j6", "j13", "point", offset_a=rng.normal(size=3) * 0.1, offset_b=rng.normal(size=3) * 0.1,
                   baumgarte=(10.0, 3.0))
    contact = sl.Contact("j3", "point", "world_aligned")
    cs = [loop, contact]
    imp = sl.linearize_impact(model, st, cs, restitution)
    nv = model.nv
    F = fd_impact(model, st, cs, restitution)
    assert e_max(imp.dv_plus_dz, F[:nv]) <= 1e-6
    assert e_max(imp.dimpulses_dz, F[nv:]) <= 1e-6
    # the loop's relative velocity after (frame_a's point less frame_b's, world axes)
    def point_velocity(s, frame, offset):
        R, _ = sl.frame_placement(model, s, frame)
        tw = sl.frame_velocity(model, s, frame)
        return R @ (tw[0:3] + np.cross(tw[3:6], offset))
    after = sl.State.from_vectors(model, st.q, imp.v_plus)
    rel = point_velocity(after, "j6", loop.offset_a) - point_velocity(after, "j13", loop.offset_b)
    before = point_velocity(st, "j6", loop.offset_a) - point_velocity(st, "j13", loop.offset_b)
    assert np.abs(before).max() > 1e-2 and np.abs(rel).max() <= 1e-10 * np.abs(before).max()
    Rc = sl.frame_placement(model, st, "j3")[0]
    vc_before = Rc @ sl.frame_velocity(model, st, "j3")[0:3]
    vc_after = Rc @ sl.frame_velocity(model, after, "j3")[0:3]
    assert np.allclose(vc_after, -restitution * vc_before, atol=1e-10 * np.abs(vc_before).max())


def test_no_contacts_and_data_views():
    rng = np.random.default_rng(8)
    model = random_tree(rng, n=5)
    st = random_state(model, rng)
    imp = sl.linearize_impact(model, st, [], 0.3)
    assert np.array_equal(imp.v_plus, st.v) and imp.impulses.shape == (0,)
    assert np.array_equal(imp.jacobian, np.eye(2 * model.nv))
    data = sl.Data(model)
    c = [sl.Contact("j4", "point")]
    a = sl.linearize_impact(model, st, c, 0.2, data=data)
    ref = sl.linearize_impact(model, st, c, 0.2)
    assert np.array_equal(a.jacobian, ref.jacobian) and np.array_equal(a.dimpulses_dz, ref.dimpulses_dz)
    J0 = a.jacobian.copy()
    sl.linearize_impact(model, random_state(model, rng), c, 0.2, data=data)   # a view: overwritten
    assert not np.array_equal(a.jacobian, J0)
    assert not np.shares_memory(ref.jacobian, data.fb)


def test_errors_name_the_problem():
    rng = np.random.default_rng(9)
    model = random_tree(rng, n=5)
    st = random_state(model, rng)
    c = [sl.Contact("j4", "point")]
    for bad in (-0.1, 1.5, float("nan"), "elastic", None):
        with pytest.raises(ValueError, match="restitution"):
            sl.impact(model, st, c, restitution=bad)
    with pytest.raises(ValueError, match="unknown frame 'toe'"):
        sl.linearize_impact(model, st, [sl.Contact("toe")])
    with pytest.raises(ValueError, match="contacts must be a list"):
        sl.impact(model, st, sl.Contact("j4"))
    with pytest.raises(ValueError, match="must be an sl.Contact"):
        sl.impact(model, st, ["j4"])
    other = random_tree(np.random.default_rng(1), n=3)
    with pytest.raises(ValueError, match="another model"):
        sl.impact(model, random_state(other, rng), c)
    q = st.q.copy()
    q[0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        sl.linearize_impact(model, _raw_state(model, q, st.v), c)
    with pytest.raises(ValueError, match="mimic"):
        sl.impact(CoupledModel(model, {"j3": ("j1", 0.5, 0.0)}), st, c)


def test_dependent_contacts_are_dropped_and_hold():
    """Two 6d contacts on a fixed-base chain of 6 joints: 12 rows, rank 6. The rows after the first
    six are dropped with no impulse; they hold anyway (Jc v+ = -e Jc v- has the solution -e v-):
    v+ = -e v-, and so is the reset map."""
    rng = np.random.default_rng(2)
    model = random_tree(rng, n=6, floating_base=False, parents=[0, 1, 2, 3, 4, 5])
    st = random_state(model, rng)
    cs = [sl.Contact("j5", "6d"), sl.Contact("j4", "6d")]
    imp = sl.linearize_impact(model, st, cs, 0.5)
    nv = model.nv
    assert np.allclose(imp.v_plus, -0.5 * st.v, atol=1e-10 * np.abs(st.v).max())
    assert np.array_equal(imp.impulses[6:], np.zeros(6))
    assert np.allclose(imp.dv_plus_dz, np.hstack([np.zeros((nv, nv)), -0.5 * np.eye(nv)]), atol=1e-9)


def _raw_state(model, q, v):
    """A State holding q, v as given (from_vectors would refuse a NaN itself)."""
    st = sl.State.from_vectors(model, np.nan_to_num(q), v)
    st._q[:] = q
    return st


def results_from_threads(fn, items, threads=4):
    """fn(item) for every item, in `threads` threads at once, each doing all of them: {(thread,
    index): result}; the first exception is raised."""
    out = {}

    def work(t):
        for i, x in enumerate(items):
            out[(t, i)] = fn(x)
    errors = _run_threads(work, threads)
    if errors:
        raise errors[0]
    return out


def test_threads_give_sequential_results():
    rng = np.random.default_rng(12)
    model = tree_with_every_joint(rng, True)
    states = [random_state(model, rng) for _ in range(6)]
    cs = [sl.Contact("c1", "point"), sl.Contact("c2", "6d", "world_aligned")]

    def jac(s):
        return sl.linearize_impact(model, s, cs, 0.4).jacobian
    ref = [jac(s) for s in states]
    out = results_from_threads(jac, states)
    assert all(np.array_equal(out[(t, i)], ref[i]) for t in range(4) for i in range(len(states)))
