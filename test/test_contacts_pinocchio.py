# SPDX-License-Identifier: BSD-3-Clause
"""Contacts against Pinocchio 4.1 (the oracle): rigid contacts (constraintDynamics +
computeConstraintDynamicsDerivatives, RigidConstraintModel CONTACT_3D / CONTACT_6D, LOCAL /
LOCAL_WORLD_ALIGNED, Baumgarte corrector, joint2 = the world at the anchor), forces as inputs
(computeABADerivatives with fext, which holds each force fixed in its joint's LOCAL frame; for
world-aligned forces the rotation term is added from Pinocchio's own frame Jacobian), frames
(getFrameJacobian, oMf). Each Pinocchio call sequence gets a fresh Data, results are copied
before it goes (its matrices are views). Joints matched by name (ros_helpers.oracle)."""
import numpy as np
import pytest

import sva_linearizer as sl
from fd_tools import e_max
from ros_helpers.oracle import pinocchio_state, robot_states
from sva_linearizer.spatial import skew

pin = pytest.importorskip("pinocchio", reason="pin (Pinocchio) is a test dependency: pip install pin")

PIN_TYPE = {"point": "CONTACT_3D", "6d": "CONTACT_6D"}
PIN_REF = {"local": "LOCAL", "world_aligned": "LOCAL_WORLD_ALIGNED"}


def contact_placement(pm, c):
    """(joint id, joint-to-contact SE3) of a contact's frame in Pinocchio's model."""
    fid = pm.getFrameId(c.frame)
    assert fid < len(pm.frames), f"Pinocchio has no frame {c.frame}"
    fr = pm.frames[fid]
    return fr.parentJoint, fr.placement * pin.SE3(np.eye(3), np.array(c.offset))


def pin_contacts(pm, qp, contacts):
    """RigidConstraintModels for our contacts, the anchor at the frames' poses at qp."""
    pd = pm.createData()
    pin.forwardKinematics(pm, pd, qp)
    cms = pin.StdVec_RigidConstraintModel()
    for c in contacts:
        jid, jMc = contact_placement(pm, c)
        oMc = pd.oMi[jid] * jMc
        cm = pin.RigidConstraintModel(getattr(pin.ContactType, PIN_TYPE[c.kind]), pm, jid, jMc, 0,
                                      pin.SE3(oMc.rotation.copy(), oMc.translation.copy()),
                                      getattr(pin.ReferenceFrame, PIN_REF[c.reference]))
        kp, kd = c.baumgarte
        bp = cm.m_baumgarte_parameters          # Pinocchio 4.1: scalar gains (a reference)
        bp.Kp, bp.Kd = kp, kd
        cms.append(cm)
    return cms


def pin_constraint_data(pm, cms):
    """A fresh Data and the RigidConstraintDatas of cms, initialised (initConstraintDynamics)."""
    pd = pm.createData()
    cds = pin.StdVec_RigidConstraintData()
    for cm in cms:
        cds.append(cm.createData())
    pin.initConstraintDynamics(pm, pd, cms, cds)
    return pd, cds


def pin_constrained(model, pm, q, v, tau, contacts):
    """Pinocchio's constrained A, B, forces and their derivatives, in our order."""
    qp, vp, taup, perm = pinocchio_state(model, pm, q, v, tau)
    nv, nj = model.nv, model.nj
    cms = pin_contacts(pm, qp, contacts)
    pd, cds = pin_constraint_data(pm, cms)
    ddq = pin.constraintDynamics(pm, pd, qp, vp, taup, cms, cds).copy()
    lam = pd.lambda_c.copy()
    ddq_dq, ddq_dv, ddq_dtau, dl_dq, dl_dv, dl_dtau = (
        np.array(X, copy=True) for X in pin.computeConstraintDynamicsDerivatives(pm, pd, cms, cds))
    cols = perm[nv - nj:]
    A_low = np.hstack([ddq_dq[perm][:, perm], ddq_dv[perm][:, perm]])
    B_low = ddq_dtau[perm][:, cols]
    dl_dz = np.hstack([dl_dq[:, perm], dl_dv[:, perm]])
    return ddq[perm], A_low, B_low, lam, dl_dz, dl_dtau[:, cols]


def check(name, X, Y, tol=1e-7):
    err = e_max(X, Y)
    print(f"{name}: e_max {err:.1e}")
    assert err <= tol, f"{name}: e_max {err:.2e} > {tol:.0e}"
    return err


SOLO_FEET = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]


@pytest.mark.parametrize("reference", ["local", "world_aligned"])
@pytest.mark.parametrize("gains", [(0.0, 0.0), (30.0, 4.0)])
def test_solo12_four_point_contacts(reference, gains):
    model, pm, path, states = robot_states("solo12", True, n=2)
    for q, v, tau in states:
        st = sl.State.from_vectors(model, q, v)
        offs = [(0.0, 0.0, -0.01 * i) for i in range(4)]
        cs = [sl.Contact(f, "point", reference, offset=o, baumgarte=gains) for f, o in zip(SOLO_FEET, offs)]
        lin = sl.linearize(model, st, tau, contacts=cs)
        ddq, A_low, B_low, lam, dl_dz, dl_dtau = pin_constrained(model, pm, q, v, tau, cs)
        nv = model.nv
        check("nu_dot", lin.nu_dot, ddq, 1e-9)
        check("forces", lin.forces, lam, 1e-9)
        check("A", lin.A[nv:], A_low)
        check("B", lin.B[nv:], B_low)
        check("dforces_dz", lin.dforces_dz, dl_dz)
        check("dforces_dtau", lin.dforces_dtau, dl_dtau)
        assert np.array_equal(lin.A[:nv], sl.linearize(model, st, tau).A[:nv])


@pytest.mark.parametrize("robot,feet", [("anymal_c", ["LF_FOOT", "LH_FOOT", "RF_FOOT", "RH_FOOT"]),
                                        ("hyq", ["lf_foot", "lh_foot", "rf_foot", "rh_foot"])])
def test_quadruped_point_contacts(robot, feet):
    model, pm, path, states = robot_states(robot, True, n=2)
    for i, (q, v, tau) in enumerate(states):
        ref = ("local", "world_aligned")[i % 2]
        cs = [sl.Contact(f, "point", ref, baumgarte=(10.0, 2.0)) for f in feet]
        st = sl.State.from_vectors(model, q, v)
        lin = sl.linearize(model, st, tau, contacts=cs)
        ddq, A_low, B_low, lam, dl_dz, dl_dtau = pin_constrained(model, pm, q, v, tau, cs)
        nv = model.nv
        check("forces", lin.forces, lam, 1e-9)
        check("A", lin.A[nv:], A_low)
        check("B", lin.B[nv:], B_low)
        check("dforces_dz", lin.dforces_dz, dl_dz)
        check("dforces_dtau", lin.dforces_dtau, dl_dtau)


@pytest.mark.parametrize("reference", ["local", "world_aligned"])
def test_talos_two_6d_sole_contacts(reference):
    model, pm, path, states = robot_states("talos", True, n=2)
    for k, (q, v, tau) in enumerate(states):
        gains = [(0.0, 0.0), (20.0, 3.0)][k % 2]
        cs = [sl.Contact(f, "6d", reference, baumgarte=gains) for f in ("left_sole_link", "right_sole_link")]
        st = sl.State.from_vectors(model, q, v)
        lin = sl.linearize(model, st, tau, contacts=cs)
        ddq, A_low, B_low, lam, dl_dz, dl_dtau = pin_constrained(model, pm, q, v, tau, cs)
        nv = model.nv
        check("forces", lin.forces, lam, 1e-9)
        check("A", lin.A[nv:], A_low)
        check("B", lin.B[nv:], B_low)
        check("dforces_dz", lin.dforces_dz, dl_dz)
        check("dforces_dtau", lin.dforces_dtau, dl_dtau)


def test_6d_contact_with_a_distant_anchor():
    """A given anchor away from the frame's pose: the 6d Baumgarte error is log6, its derivative
    Jlog6 (Pinocchio's definitions)."""
    model, pm, path, states = robot_states("talos", True, n=1)
    q, v, tau = states[0]
    st = sl.State.from_vectors(model, q, v)
    from sva_linearizer.spatial import rot_axis_angle
    cs = []
    for f in ("left_sole_link", "right_sole_link"):
        R, p = sl.frame_placement(model, st, f)
        anchor = (R @ rot_axis_angle(np.array([0.6, 0.0, 0.8]), 0.3), p + np.array([0.05, -0.02, 0.03]))
        cs.append(sl.Contact(f, "6d", "local", baumgarte=(25.0, 5.0), anchor=anchor))
    lin = sl.linearize(model, st, tau, contacts=cs)
    qp, vp, taup, perm = pinocchio_state(model, pm, q, v, tau)
    cms = pin_contacts(pm, qp, cs)
    for cm, c in zip(cms, cs):
        cm.joint2_placement = pin.SE3(*c.anchor)
    pd = pm.createData()
    cds = pin.StdVec_RigidConstraintData()
    for cm in cms:
        cds.append(cm.createData())
    pin.initConstraintDynamics(pm, pd, cms, cds)
    pin.constraintDynamics(pm, pd, qp, vp, taup, cms, cds)
    lam = pd.lambda_c.copy()
    dl_dq, dl_dv = (np.array(X, copy=True) for X in pin.computeConstraintDynamicsDerivatives(pm, pd, cms, cds)[3:5])
    check("forces", lin.forces, lam, 1e-9)
    check("dforces_dz", lin.dforces_dz, np.hstack([dl_dq[:, perm], dl_dv[:, perm]]))


@pytest.mark.parametrize("reference", ["local", "world_aligned"])
def test_forces_as_inputs_against_aba_derivatives_with_fext(reference):
    """computeABADerivatives with fext (each force in its joint's LOCAL frame, held fixed there);
    for world-aligned forces the force turns with the link in Pinocchio's fext but not in ours:
    the difference is the rotation term -Minv (-J_F^T [R^T f]^ J_F,ang), formed from Pinocchio's
    own frame Jacobian. B_f = Minv Jc^T."""
    model, pm, path, states = robot_states("solo12", True, n=2)
    rng = np.random.default_rng(3)
    nv, nj = model.nv, model.nj
    for q, v, tau in states:
        st = sl.State.from_vectors(model, q, v)
        cs = [sl.Contact(f, "point", reference, offset=(0.01, 0.0, -0.02)) for f in SOLO_FEET[:3]]
        cs.append(sl.Contact("HR_FOOT", "6d", reference))
        fs = [(c, rng.normal(size=c.dim) * 10) for c in cs]
        lin = sl.linearize(model, st, tau, forces=fs)
        qp, vp, taup, perm = pinocchio_state(model, pm, q, v, tau)
        pd = pm.createData()
        pin.forwardKinematics(pm, pd, qp)
        fext = [pin.Force.Zero() for _ in range(pm.njoints)]
        Jcs, E = [], np.zeros((nv, nv))
        pin.computeJointJacobians(pm, pd, qp)
        for c, f in fs:
            jid, jMc = contact_placement(pm, c)
            oMc = pd.oMi[jid] * jMc
            Jl = jMc.inverse().action @ pin.getJointJacobian(pm, pd, jid, pin.ReferenceFrame.LOCAL)
            w = np.zeros(6)
            Rc = oMc.rotation
            if reference == "world_aligned":
                w[0:3] = Rc.T @ f[0:3]
                if c.dim == 6:
                    w[3:6] = Rc.T @ f[3:6]
                dw = np.vstack([skew(w[0:3]) @ Jl[3:6], skew(w[3:6]) @ Jl[3:6]])
                E -= Jl.T @ dw
                rows = np.vstack([Rc @ Jl[0:3], Rc @ Jl[3:6]])[0:c.dim]
            else:
                w[0:c.dim] = f
                rows = Jl[0:c.dim]
            fext[jid] = fext[jid] + jMc.act(pin.Force(w))
            Jcs.append(rows.copy())
        pd = pm.createData()
        pin.computeABADerivatives(pm, pd, qp, vp, taup, fext)
        Minv = np.triu(pd.Minv) + np.triu(pd.Minv, 1).T
        ddq_dq, ddq_dv = pd.ddq_dq.copy(), pd.ddq_dv.copy()
        ddq_dq -= Minv @ E
        A_low = np.hstack([ddq_dq[perm][:, perm], ddq_dv[perm][:, perm]])
        Bf = (Minv @ np.vstack(Jcs).T)[perm]
        check("A", lin.A[nv:], A_low)
        check("B_tau", lin.B[nv:, :nj], Minv[perm][:, perm[6:]])
        check("B_f", lin.B[nv:, nj:], Bf)


@pytest.mark.parametrize("frame", ["FL_FOOT", "HR_FOOT", "base_link"])
def test_frames_against_pinocchio(frame):
    model, pm, path, states = robot_states("solo12", True, n=1)
    q, v, tau = states[0]
    st = sl.State.from_vectors(model, q, v)
    qp, vp, taup, perm = pinocchio_state(model, pm, q, v, tau)
    pd = pm.createData()
    pin.computeJointJacobians(pm, pd, qp)
    pin.updateFramePlacements(pm, pd)
    fid = pm.getFrameId(frame)
    R, p = sl.frame_placement(model, st, frame)
    assert np.allclose(R, pd.oMf[fid].rotation, atol=1e-12) and np.allclose(p, pd.oMf[fid].translation, atol=1e-12)
    for ref, pref in (("local", pin.ReferenceFrame.LOCAL),
                      ("world_aligned", pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)):
        Jp = pin.getFrameJacobian(pm, pd, fid, pref).copy()[:, perm]
        J = sl.frame_jacobian(model, st, frame, reference=ref)
        assert np.max(np.abs(J - Jp)) <= 1e-12


@pytest.mark.parametrize("case", [0, 1])
def test_fixed_base_arm_contacts(case):
    """A fixed-base arm (panda, 9 joints): a 6d contact on its tool frame (a link merged through
    fixed joints), or two point contacts."""
    model, pm, path, states = robot_states("panda", False, n=2)
    if case == 0:
        cs = [sl.Contact("panda_hand_tcp", "6d", "world_aligned", baumgarte=(15.0, 3.0))]
    else:
        cs = [sl.Contact("panda_link4", "point", "local", offset=(0.0, 0.05, 0.0), baumgarte=(5.0, 0.0)),
              sl.Contact("panda_hand_tcp", "point", "world_aligned")]
    for q, v, tau in states:
        st = sl.State.from_vectors(model, q, v)
        lin = sl.linearize(model, st, tau, contacts=cs)
        ddq, A_low, B_low, lam, dl_dz, dl_dtau = pin_constrained(model, pm, q, v, tau, cs)
        nv = model.nv
        check("nu_dot", lin.nu_dot, ddq, 1e-9)
        check("forces", lin.forces, lam, 1e-9)
        check("A", lin.A[nv:], A_low)
        check("B", lin.B[nv:], B_low)
        check("dforces_dz", lin.dforces_dz, dl_dz)
        check("dforces_dtau", lin.dforces_dtau, dl_dtau)
