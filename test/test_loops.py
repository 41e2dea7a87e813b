# SPDX-License-Identifier: BSD-3-Clause
"""Closed kinematic loops (sl.Loop) against oracles the package does not share:

* Pinocchio 4.1's constraintDynamics (two-joint RigidConstraintModel, CONTACT_3D / CONTACT_6D,
  LOCAL / LOCAL_WORLD_ALIGNED, Baumgarte): its forward VALUES (acceleration, forces lambda_c), and
  central differences of them for A, B and the forces' derivatives (not its derivative
  algorithm, which is wrong for constraints between two moving bodies), on a planar four-bar:
  fixed base, and floating base held at a point of its ground link (a contact beside the loop). The
  planar linkage closed in 3D has dependent rows (point: 1, 6d: 3), and Pinocchio's proximal
  solver (mu > 0) returns the minimum-norm forces, which are zero on those rows, as ours;
* for a "revolute" loop (no Pinocchio constraint), the equivalent tree: the closing revolute
  joint added to frame_a's chain, its near-massless child welded 6D to frame_b;
* the package's own Lie-group central differences on random trees (revolute, prismatic, helical
  joints) with random loops (point, revolute, 6d) beside contacts;
* a 2 s simulation with the package's forward dynamics: the Baumgarte loop stays closed.
"""
import numpy as np
import pytest

import sva_linearizer as sl
from fd_tools import random_state, random_tree
from test_contacts_fd import TWO_LEGS, fd_columns

pin = pytest.importorskip("pinocchio", reason="pin (Pinocchio) is a test dependency: pip install pin")

A_, B_, C_, G_ = 0.3, 0.5, 0.4, 0.45     # crank, coupler, rocker, ground lengths


def _link(name, length, mass):
    I = mass * length * length / 12
    return (f'<link name="{name}"><inertial><origin xyz="{length / 2} 0 0"/><mass value="{mass}"/>'
            f'<inertia ixx="{0.01 * mass}" iyy="{I}" izz="{I}" ixy="0" ixz="0" iyz="0"/></inertial></link>')


def _joint(name, parent, child, x):
    return (f'<joint name="{name}" type="revolute"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{x} 0 0"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>')


FOURBAR = ('<robot name="fourbar"><link name="ground"><inertial><mass value="5"/><inertia ixx="1" iyy="1" '
           'izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>'
           + _link("crank", A_, 1.0) + _link("coupler", B_, 1.5) + _link("rocker", C_, 0.8)
           + _joint("j1", "ground", "crank", 0) + _joint("j2", "crank", "coupler", A_)
           + _joint("j3", "ground", "rocker", G_) + "</robot>")


def fourbar_state(th1=0.7, w1=1.3):
    """Joint angles closing the four-bar (coupler end = rocker end) and velocities that keep it
    closed: plane geometry, independent of the package."""
    A = A_ * np.array([np.cos(th1), np.sin(th1)])
    O2 = np.array([G_, 0.0])
    u = (O2 - A) / np.linalg.norm(O2 - A)
    dd = np.linalg.norm(O2 - A)
    x = (dd * dd + B_ * B_ - C_ * C_) / (2 * dd)
    B = A + x * u + np.sqrt(B_ * B_ - x * x) * np.array([-u[1], u[0]])
    q = np.array([th1, np.arctan2(*(B - A)[::-1]) - th1, np.arctan2(*(B - O2)[::-1])])
    perp = lambda r: np.array([-r[1], r[0]])  # noqa: E731  (z x r)
    w2, w3 = np.linalg.solve(np.column_stack([perp(B - A), -perp(B - O2)]), -w1 * perp(B))
    return q, np.array([w1, w2, w3])


@pytest.fixture(scope="module")
def fourbar_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("fourbar") / "fourbar.urdf"
    p.write_text(FOURBAR)
    return p


PIN_TYPE = {"point": "CONTACT_3D", "6d": "CONTACT_6D"}
PIN_REF = {"local": "LOCAL", "world_aligned": "LOCAL_WORLD_ALIGNED"}


def pin_models(pm, qp, constraints):
    """RigidConstraintModels: a Loop between its two joints' frames (joint placements = the link
    frames: each URDF joint's child link), a Contact with the world at its pose at qp."""
    pd = pm.createData()
    pin.forwardKinematics(pm, pd, qp)
    cms = pin.StdVec_RigidConstraintModel()
    for c in constraints:
        typ, ref = getattr(pin.ContactType, PIN_TYPE[c.kind]), getattr(pin.ReferenceFrame, PIN_REF[c.reference])
        if isinstance(c, sl.Loop):
            ja, jb = pm.getJointId(JOINT_OF[c.frame_a]), pm.getJointId(JOINT_OF[c.frame_b])
            cm = pin.RigidConstraintModel(typ, pm, ja, pin.SE3(np.eye(3), np.array(c.offset_a)), jb,
                                          pin.SE3(np.eye(3), np.array(c.offset_b)), ref)
        else:
            fr = pm.frames[pm.getFrameId(c.frame)]
            jMc = fr.placement * pin.SE3(np.eye(3), np.array(c.offset))
            oMc = pd.oMi[fr.parentJoint] * jMc
            cm = pin.RigidConstraintModel(typ, pm, fr.parentJoint, jMc, 0,
                                          pin.SE3(oMc.rotation.copy(), oMc.translation.copy()), ref)
        bp = cm.m_baumgarte_parameters
        bp.Kp, bp.Kd = c.baumgarte
        cms.append(cm)
    return cms


JOINT_OF = {"crank": "j1", "coupler": "j2", "rocker": "j3"}


def pin_forward(pm, cms, qp, vp, taup):
    """Pinocchio's constrained acceleration and forces (proximal settings: mu = 1e-10, so that a
    dependent row gets the minimum-norm answer rather than a failed factorisation)."""
    pd = pm.createData()
    cds = pin.StdVec_RigidConstraintData()
    for cm in cms:
        cds.append(cm.createData())
    pin.initConstraintDynamics(pm, pd, cms, cds)
    prox = pin.ProximalSettings(1e-14, 1e-10, 200)
    ddq = pin.constraintDynamics(pm, pd, qp, vp, taup, cms, cds, prox).copy()
    return ddq, pd.lambda_c.copy()


def pin_fd(model, pm, cms, q, v, tau, h=1e-6):
    """Central differences of Pinocchio's forward values on the Lie group (q exp(dq), Pinocchio's
    integrate, our H exp(z^)): A's lower blocks, B's, dlambda/dz, dlambda/dtau (model and pm in
    the same joint order, checked by the caller)."""
    nv, nj = model.nv, model.nj
    cols_a, cols_l = [], []
    for c in range(2 * nv):
        out = []
        for sgn in (1, -1):
            e = np.zeros(nv)
            e[c % nv] = sgn * h
            qq, vv = (pin.integrate(pm, q, e), v) if c < nv else (q, v + e)
            out.append(pin_forward(pm, cms, qq, vv, tau))
        cols_a.append((out[0][0] - out[1][0]) / (2 * h))
        cols_l.append((out[0][1] - out[1][1]) / (2 * h))
    bt_a, bt_l = [], []
    for j in range(nj):
        out = []
        for sgn in (1, -1):
            t = tau.copy()
            t[nv - nj + j] += sgn
            out.append(pin_forward(pm, cms, q, v, t))
        bt_a.append((out[0][0] - out[1][0]) / 2)
        bt_l.append((out[0][1] - out[1][1]) / 2)
    return (np.array(cols_a).T, np.array(bt_a).T, np.array(cols_l).T, np.array(bt_l).T)

def assert_floating_matches_pinocchio(model, pm, q, v, tau, cons):
    """A floating-base linearization with the constraints `cons` against central differences of
    Pinocchio's constraintDynamics (nu_dot, forces, A and B's lower rows, the forces' derivatives)."""
    lin = sl.linearize(model, sl.State.from_vectors(model, q, v), tau, contacts=cons)
    nv = model.nv
    taup = np.r_[np.zeros(6), tau]
    cms = pin_models(pm, q, cons)
    ddq, lam = pin_forward(pm, cms, q, v, taup)
    A_low, B_low, dl_dz, dl_dtau = pin_fd(model, pm, cms, q, v, taup)
    E = {"nu_dot": rel(lin.nu_dot, ddq), "lam": rel(lin.forces, lam), "A": rel(lin.A[nv:], A_low),
         "B": rel(lin.B[nv:], B_low), "dl_dz": rel(lin.dforces_dz, dl_dz), "dl_dtau": rel(lin.dforces_dtau, dl_dtau)}
    assert max(E.values()) < 1e-6, E



def rel(X, Y, floor=1e-300):
    """max|X - Y| / max|Y| (or / floor when larger: the scale of a quantity that vanishes, e.g. B
    of a linkage welded into a structure, measured against M^-1)."""
    return float(np.max(np.abs(X - Y)) / max(floor, np.max(np.abs(Y))))


@pytest.mark.parametrize("reference", ["local", "world_aligned"])
@pytest.mark.parametrize("kind", ["point", "6d"])
def test_fourbar_against_pinocchio(fourbar_path, kind, reference, floating=False):
    model = sl.load_urdf(fourbar_path, floating_base=floating)
    pm = (pin.buildModelFromUrdf(str(fourbar_path), pin.JointModelFreeFlyer()) if floating
          else pin.buildModelFromUrdf(str(fourbar_path)))
    assert model.joint_names == [pm.names[i] for i in range(2 if floating else 1, pm.njoints)]
    s, r = fourbar_state()
    loop = sl.Loop("coupler", "rocker", kind, offset_a=(B_, 0, 0), offset_b=(C_, 0, 0), reference=reference,
                   baumgarte=(10.0, 3.0))
    cons = [loop]
    tau = np.array([0.5, -0.2, 0.1])
    if floating:             # standing on its ground link: a 6d contact beside the loop
        cons = [sl.Contact("ground", "6d", reference, baumgarte=(0.0, 2.0)), loop]
        rng = np.random.default_rng(5)
        quat = rng.normal(size=4)
        q = np.r_[rng.normal(size=3), quat / np.linalg.norm(quat), s]
        v = np.r_[rng.normal(size=6) * 0.3, r]
    else:
        q, v = s, r
    st = sl.State.from_vectors(model, q, v)
    lin = sl.linearize(model, st, tau, contacts=cons)
    nv = model.nv
    taup = np.r_[np.zeros(nv - model.nj), tau]
    # the loop's rows out of the plane depend on the others: zero rows (fixed base), combinations
    # of the ground contact's rows (floating base). Ours carry no force (rows kept in order);
    # Pinocchio's proximal solver gives the minimum-norm forces, and on zero rows what its
    # rounding of their zero drift accumulates: the same where the dependent rows are zero rows
    o = 6 if floating else 0
    dep = [o + 2] if kind == "point" else [o + 2, o + 3, o + 4]
    ind = [i for i in range(len(lin.forces)) if i not in dep]
    assert np.all(lin.forces[dep] == 0.0) and np.all(lin.dforces_dz[dep] == 0.0)
    cms = pin_models(pm, q, cons)
    ddq, lam = pin_forward(pm, cms, q, v, taup)
    nu, f = sl.forward_dynamics(model, st, tau, contacts=cons)
    assert rel(lin.nu_dot, ddq) < 1e-9 and rel(nu, ddq) < 1e-9 and np.array_equal(f, lin.forces)
    A_low, B_low, dl_dz, dl_dtau = pin_fd(model, pm, cms, q, v, taup)
    E = {"A": rel(lin.A[nv:], A_low), "B": rel(lin.B[nv:], B_low, np.abs(lin.Minv).max())}
    E.update(lam=rel(f[ind], lam[ind]), dl_dz=rel(lin.dforces_dz[ind], dl_dz[ind]),
             dl_dtau=rel(lin.dforces_dtau[ind], dl_dtau[ind]))
    assert max(E.values()) < 1e-6, E


def spatial_urdf(rng, n1=4, n2=3):
    """A base link with two chains of revolute joints (random axes and origins, random inertias):
    links a1..a{n1}, b1..b{n2}; joint names j_<link>."""
    def inertial():
        m = rng.uniform(0.5, 2.0)
        d = np.sort(rng.uniform(0.01, 0.05, 3))
        c = rng.normal(size=3) * 0.05
        return (f'<inertial><origin xyz="{c[0]} {c[1]} {c[2]}"/><mass value="{m}"/><inertia ixx="{d[0] + d[1]}" '
                f'iyy="{d[1] + d[2]}" izz="{d[0] + d[2]}" ixy="0" ixz="0" iyz="0"/></inertial>')
    out = [f'<robot name="spatial"><link name="base">{inertial()}</link>']
    for prefix, n, start in (("a", n1, (0.0, 0.15, 0.0)), ("b", n2, (0.0, -0.15, 0.0))):
        parent = "base"
        for i in range(1, n + 1):
            link = f"{prefix}{i}"
            ax = rng.normal(size=3)
            ax /= np.linalg.norm(ax)
            o = np.array(start) if i == 1 else rng.normal(size=3) * 0.15 + [0.25, 0, 0]
            rpy = rng.uniform(-0.5, 0.5, 3)
            out.append(f'<link name="{link}">{inertial()}</link><joint name="j_{link}" type="revolute"><parent '
                       f'link="{parent}"/><child link="{link}"/><origin xyz="{o[0]} {o[1]} {o[2]}" rpy="{rpy[0]} '
                       f'{rpy[1]} {rpy[2]}"/><axis xyz="{ax[0]} {ax[1]} {ax[2]}"/><limit lower="-3" upper="3" '
                       'effort="1" velocity="1"/></joint>')
            parent = link
    return "".join(out) + "</robot>"


@pytest.mark.parametrize("reference", ["local", "world_aligned"])
@pytest.mark.parametrize("kind", ["point", "6d"])
def test_spatial_linkage_on_floating_base_against_pinocchio(tmp_path, kind, reference):
    """A spatial linkage (two chains of 4 and 3 revolute joints about random axes, closed between
    their last links: independent rows) on a floating base standing on its base link (a 6d
    contact): A, B, the forces and their derivatives against central differences of Pinocchio's
    constraintDynamics."""
    rng = np.random.default_rng(17)
    path = tmp_path / "spatial.urdf"
    path.write_text(spatial_urdf(rng))
    model = sl.load_urdf(path, floating_base=True)
    pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())
    assert model.joint_names == [pm.names[i] for i in range(2, pm.njoints)]
    JOINT_OF.update({n: f"j_{n}" for n in ("a4", "b3")})
    quat = rng.normal(size=4)
    q = np.r_[rng.normal(size=3), quat / np.linalg.norm(quat), rng.uniform(-1, 1, model.nj)]
    v = np.r_[rng.normal(size=6) * 0.3, rng.normal(size=model.nj)]
    pd = pm.createData()
    pin.forwardKinematics(pm, pd, q)
    off_a = rng.normal(size=3) * 0.1
    Ma, Mb = pd.oMi[pm.getJointId("j_a4")], pd.oMi[pm.getJointId("j_b3")]
    off_b = Mb.rotation.T @ (Ma.rotation @ off_a + Ma.translation - Mb.translation)   # closed at q
    loop = sl.Loop("a4", "b3", kind, offset_a=off_a, offset_b=off_b, reference=reference, baumgarte=(10.0, 3.0))
    cons = [sl.Contact("base", "6d", reference, baumgarte=(0.0, 2.0)), loop]
    assert_floating_matches_pinocchio(model, pm, q, v, rng.normal(size=model.nj), cons)


@pytest.mark.parametrize("floating", [False, True])
@pytest.mark.parametrize("reference", ["local", "world_aligned"])
@pytest.mark.parametrize("kind", ["point", "revolute", "6d"])
def test_random_loops_against_own_differences(kind, reference, floating):
    """Two chains of 7 joints (revolute, prismatic, helical about random axes) from the base,
    closed by a loop between random points of their last links, a contact beside it (floating
    base): A, B, the forces and their derivatives against central differences of
    forward_dynamics, the loop's error recomputed at each perturbed state."""
    rng = np.random.default_rng(13 + 3 * floating + ["point", "revolute", "6d"].index(kind))
    model = random_tree(rng, n=14, floating_base=floating, parents=TWO_LEGS)
    st = random_state(model, rng)
    tau = rng.normal(size=model.nj)
    loop = sl.Loop("j6", "j13", kind, offset_a=rng.normal(size=3) * 0.1, offset_b=rng.normal(size=3) * 0.1,
                   axis=rng.normal(size=3), reference=reference, baumgarte=(rng.uniform(1, 20), rng.uniform(1, 10)))
    cons = [loop]
    if floating:
        R, p = sl.frame_placement(model, st, "j3")
        cons = [loop, sl.Contact("j3", "point", reference, anchor=p, baumgarte=(4.0, 2.0))]
    lin = sl.linearize(model, st, tau, contacts=cons)
    nv = model.nv
    F = fd_columns(lambda s: np.concatenate(sl.forward_dynamics(model, s, tau, contacts=cons)), model, st)
    assert rel(lin.A[nv:], F[:nv]) < 1e-6
    assert rel(lin.dforces_dz, F[nv:]) < 1e-6
    ht = 1e-3
    Bf = []
    for j in range(model.nj):
        e = np.zeros(model.nj)
        e[j] = ht
        Bf.append((np.concatenate(sl.forward_dynamics(model, st, tau + e, contacts=cons))
                   - np.concatenate(sl.forward_dynamics(model, st, tau - e, contacts=cons))) / (2 * ht))
    Bf = np.array(Bf).T
    assert rel(lin.B[nv:], Bf[:nv]) < 1e-6 and rel(lin.dforces_dtau, Bf[nv:]) < 1e-6
    # dt and the batch give the same constrained system
    lin_d = sl.linearize(model, st, tau, contacts=cons, dt=1e-3)
    assert np.array_equal(lin_d.A, lin.A) and lin_d.Ad.shape == lin.A.shape
    OA, OB = sl.linearize_batch(model, np.stack([st.q, st.q]), np.stack([st.v, st.v]), np.stack([tau, tau]),
                                contacts=cons)
    assert np.allclose(OA[1], lin.A, rtol=0, atol=1e-12 * np.abs(lin.A).max())
    assert np.allclose(OB[0], lin.B, rtol=0, atol=1e-12 * np.abs(lin.B).max())


def test_loop_forces_are_equal_and_opposite(fourbar_path):
    """The published point force acts on frame_a's body; frame_b's body gets its opposite: the
    generalized force Jc^T lambda equals J_a^T f - J_b^T f with the package's frame Jacobians."""
    model = sl.load_urdf(fourbar_path, floating_base=False)
    q, v = fourbar_state()
    st = sl.State.from_vectors(model, q, v)
    loop = sl.Loop("coupler", "rocker", "point", offset_a=(B_, 0, 0), offset_b=(C_, 0, 0),
                   reference="world_aligned")
    tau = np.array([0.5, -0.2, 0.1])
    nu, f = sl.forward_dynamics(model, st, tau, contacts=[loop])
    M = sl.mass_matrix(model, st)
    h = sl.extended_inverse_dynamics(model, st, np.zeros(3))

    def point_jacobian(frame, off):
        J = sl.frame_jacobian(model, st, frame, "world_aligned")
        R, _ = sl.frame_placement(model, st, frame)
        return J[0:3] - np.cross(R @ np.array(off), J[3:6], axis=0)   # velocity of the offset point
    Ja, Jb = point_jacobian("coupler", (B_, 0, 0)), point_jacobian("rocker", (C_, 0, 0))
    assert np.allclose(M @ nu + h, tau + Ja.T @ f - Jb.T @ f, atol=1e-10)
    assert np.allclose((Ja - Jb) @ v, 0.0, atol=1e-12)         # the state is closed (independent geometry)


def test_loop_stays_closed_in_simulation(fourbar_path):
    """2 s of semi-implicit Euler (dt = 1 ms) with the package's forward dynamics and a Baumgarte
    loop (Kp = 2500 s^-2, Kd = 100 s^-1) from a closed state, a sine torque on the crank: the
    closure error |p_a - p_b| (frame placements) stays below 5e-4 m (links 0.3-0.5 m; measured
    2.9e-4), where without Baumgarte it drifts past 10 times that (measured 8.3e-3)."""
    model = sl.load_urdf(fourbar_path, floating_base=False)
    q0, v0 = fourbar_state(0.7, 1.3)

    def run(gains):
        loop = sl.Loop("coupler", "rocker", "point", offset_a=(B_, 0, 0), offset_b=(C_, 0, 0), baumgarte=gains)
        q, v, worst = q0.copy(), v0.copy(), 0.0
        for k in range(2000):
            st = sl.State.from_vectors(model, q, v)
            nu, _ = sl.forward_dynamics(model, st, np.array([np.sin(3e-3 * k), 0.0, 0.0]), contacts=[loop])
            v = v + 1e-3 * nu
            q = q + 1e-3 * v
            Ra, pa = sl.frame_placement(model, st, "coupler")
            Rb, pb = sl.frame_placement(model, st, "rocker")
            worst = max(worst, float(np.linalg.norm(pa + Ra @ [B_, 0, 0] - pb - Rb @ [C_, 0, 0])))
        return worst
    closed = run((2500.0, 100.0))
    assert closed < 5e-4, closed
    assert run((0.0, 0.0)) > 10 * closed


def test_loop_errors():
    rng = np.random.default_rng(2)
    model = random_tree(rng, n=6, floating_base=False, parents=[0, 1, 2, 3, 4, 5])
    st = random_state(model, rng)
    with pytest.raises(ValueError, match="kind must be one of"):
        sl.Loop("j1", "j2", "cylinder")
    with pytest.raises(ValueError, match="the two frames must differ"):
        sl.Loop("j1", "j1")
    with pytest.raises(ValueError, match="unknown frame 'nope'"):
        sl.linearize(model, st, np.zeros(6), contacts=[sl.Loop("j1", "nope")])
    with pytest.raises(ValueError, match="an sl.Loop is a constraint, not a force input"):
        sl.linearize(model, st, np.zeros(6), forces=[(sl.Loop("j1", "j2"), np.zeros(3))])
    # a 6d weld of the chain's end to its base link and a 6d contact on the same end: 12 rows for
    # 6 joints, the same constraint twice: the contact's rows are dropped (no force on them) and
    # hold, the weld's answer is the answer
    weld = sl.Loop("j5", "base", "6d")
    one = sl.linearize(model, st, np.zeros(6), contacts=[weld])
    two = sl.linearize(model, st, np.zeros(6), contacts=[weld, sl.Contact("j5", "6d")])
    assert np.array_equal(two.forces[6:], np.zeros(6))
    for name in ("nu_dot", "A", "B"):
        X, Y = getattr(two, name), getattr(one, name)
        assert np.allclose(X, Y, rtol=0, atol=1e-9 * np.abs(Y).max()), name
    # with a damped contact there (a + Kd v = 0 against the weld's a = 0, v != 0): not all
    # satisfiable, the error names them
    cs = [weld, sl.Contact("j5", "6d", baumgarte=(0.0, 5.0))]
    with pytest.raises(ValueError, match=r"redundant.*j5-base \(6d, local\), j5 \(6d, local\)"):
        sl.linearize(model, st, np.zeros(6), contacts=cs)


def test_revolute_loop_against_pinocchio_equivalent_tree(tmp_path):
    """A "revolute" loop has no Pinocchio constraint: the equivalent tree gets the closing
    revolute joint r (about the loop's axis, at frame_a) added to frame_a's chain, its child
    body (mass 1e-9 kg, inertia 1e-11 kg m^2: A changes by ~1e-9 relative) welded 6D (LOCAL) to
    frame_b; r's angle is 0 (frame_a's axes) and its rate is the relative rotation rate about
    the axis (the weld's sixth row satisfied), in every state. Pinocchio's rows are the time
    derivative of the relative twist in r's rotating frame, ours in frame_a's: they differ by the
    rate about the axis times the rest of the relative twist, which vanishes with its first
    derivatives where both do, so the state has the two frames moving together (the relative
    twist zero: a velocity in the null space of Pinocchio's relative Jacobian). Floating base
    standing on a 6d contact; A, B, forces and their derivatives against central differences."""
    rng = np.random.default_rng(23)
    base = spatial_urdf(rng)
    (tmp_path / "s0.urdf").write_text(base)
    pm0 = pin.buildModelFromUrdf(str(tmp_path / "s0.urdf"), pin.JointModelFreeFlyer())
    quat = rng.normal(size=4)
    q = np.r_[rng.normal(size=3), quat / np.linalg.norm(quat), rng.uniform(-1, 1, pm0.nv - 6)]
    pd0 = pm0.createData()
    pin.forwardKinematics(pm0, pd0, q)
    Ma, Mb = pd0.oMi[pm0.getJointId("j_a4")], pd0.oMi[pm0.getJointId("j_b3")]
    Mt = pin.SE3(pin.rpy.rpyToMatrix(*rng.uniform(-1, 1, 3)), rng.normal(size=3) * 0.1)   # frame_a in a4
    tips = {"a_tip": ("a4", Mt), "b_tip": ("b3", Mb.inverse() * Ma * Mt)}                  # closed at q

    def fixed(name):
        parent, M = tips[name]
        rpy, p = pin.rpy.matrixToRpy(M.rotation), M.translation
        return (f'<link name="{name}"/><joint name="{name}_fix" type="fixed"><parent link="{parent}"/><child '
                f'link="{name}"/><origin xyz="{p[0]} {p[1]} {p[2]}" rpy="{rpy[0]} {rpy[1]} {rpy[2]}"/></joint>')
    xml = base.replace("</robot>", fixed("a_tip") + fixed("b_tip") + "</robot>")
    mr = 1e-9
    (tmp_path / "tree.urdf").write_text(xml.replace("</robot>", (
        f'<link name="rlink"><inertial><mass value="{mr}"/><inertia ixx="{mr * 1e-2}" iyy="{mr * 1e-2}" '
        f'izz="{mr * 1e-2}" ixy="0" ixz="0" iyz="0"/></inertial></link><joint name="r" type="revolute"><parent '
        'link="a_tip"/><child link="rlink"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" '
        'velocity="1"/></joint></robot>')))
    model = sl.load_urdf(xml, floating_base=True)
    pm = pin.buildModelFromUrdf(str(tmp_path / "tree.urdf"), pin.JointModelFreeFlyer())
    jr = pm.getJointId("r")
    vi = np.r_[np.arange(6), [pm.idx_vs[pm.getJointId(n)] for n in model.joint_names]]
    qi = np.r_[np.arange(7), [pm.idx_qs[pm.getJointId(n)] for n in model.joint_names]]
    fb_id = pm.getFrameId("b_tip")
    fbr = pm.frames[fb_id]
    kd = 3.0
    cm_c = pin_models(pm, _to_pin(pm, qi, q), [sl.Contact("base", "6d", baumgarte=(0.0, 2.0))])[0]
    weld = pin.RigidConstraintModel(pin.ContactType.CONTACT_6D, pm, jr, pin.SE3.Identity(), fbr.parentJoint,
                                    fbr.placement, pin.ReferenceFrame.LOCAL)
    weld.m_baumgarte_parameters.Kd = kd
    cms = pin.StdVec_RigidConstraintModel()
    cms.append(cm_c)
    cms.append(weld)

    def pin_state(qo, vo):
        qp, vp = _to_pin(pm, qi, qo), np.zeros(pm.nv)
        vp[vi] = vo
        pd = pm.createData()
        pin.forwardKinematics(pm, pd, qp, vp)
        pin.updateFramePlacements(pm, pd)
        err = pd.v[jr] - (pd.oMi[jr].inverse() * pd.oMf[fb_id]).act(pin.getFrameVelocity(pm, pd, fb_id, pin.LOCAL))
        vp[pm.idx_vs[jr]] = -err.angular[2]           # the weld's sixth row satisfied
        return qp, vp

    # a velocity with the two frames moving together (Pinocchio's Jacobians)
    pd = pm.createData()
    qp0 = _to_pin(pm, qi, q)
    pin.computeJointJacobians(pm, pd, qp0)
    pin.updateFramePlacements(pm, pd)
    fa_id = pm.getFrameId("a_tip")
    Jrel = (pin.getFrameJacobian(pm, pd, fa_id, pin.LOCAL)
            - (pd.oMf[fa_id].inverse() * pd.oMf[fb_id]).toActionMatrix()
            @ pin.getFrameJacobian(pm, pd, fb_id, pin.LOCAL))[:, vi]
    N = np.linalg.svd(Jrel)[2][6:].T
    v = N @ rng.normal(size=N.shape[1])
    st = sl.State.from_vectors(model, q, v)
    tau = rng.normal(size=model.nj)
    loop = sl.Loop("a_tip", "b_tip", "revolute", axis=(0, 0, 1), baumgarte=(0.0, kd))
    cons = [sl.Contact("base", "6d", baumgarte=(0.0, 2.0)), loop]
    lin = sl.linearize(model, st, tau, contacts=cons)
    nv = model.nv

    def forward(qo, vo, t):
        qp, vp = pin_state(qo, vo)
        taup = np.zeros(pm.nv)
        taup[vi[6:]] = t
        ddq, lam = pin_forward(pm, cms, qp, vp, taup)
        assert abs(lam[11]) < 1e-6 * np.abs(lam).max()      # no moment about the free axis
        return np.r_[ddq[vi], lam[:11]]

    x0 = forward(q, v, tau)
    assert rel(lin.nu_dot, x0[:nv]) < 1e-7 and rel(lin.forces, x0[nv:]) < 1e-7
    F = fd_columns(lambda s: forward(s.q, s.v, tau), model, st)
    Bt = np.array([(forward(q, v, tau + e) - forward(q, v, tau - e)) / 2 for e in np.eye(model.nj)]).T
    E = {"A": rel(lin.A[nv:], F[:nv]), "dl_dz": rel(lin.dforces_dz, F[nv:]), "B": rel(lin.B[nv:], Bt[:nv]),
         "dl_dtau": rel(lin.dforces_dtau, Bt[nv:])}
    assert max(E.values()) < 1e-6, E


def _to_pin(pm, qi, q):
    qp = pin.neutral(pm)
    qp[qi] = q
    return qp


def cassie_like_urdf(rng):
    """A Cassie-like leg: pelvis, hip roll / yaw / pitch, knee, tarsus and toe (pitch), and two
    rods, each on a universal joint (two revolute joints, the first tilted 0.3 rad off the pitch
    axis: the loops are not planar, their rows independent): the knee rod on the hip-pitch link
    (its end held on the tarsus), the heel rod on the knee link (its end on the toe). Links:
    pelvis, hip_roll, hip_yaw, hip_pitch, knee, tarsus, toe, knee_rod(_a), heel_rod(_a)."""
    def inertial(m):
        d = np.sort(rng.uniform(0.005, 0.03, 3)) * m
        c = rng.normal(size=3) * 0.03
        return (f'<inertial><origin xyz="{c[0]} {c[1]} {c[2]}"/><mass value="{m}"/><inertia ixx="{d[0] + d[1]}" '
                f'iyy="{d[1] + d[2]}" izz="{d[0] + d[2]}" ixy="0" ixz="0" iyz="0"/></inertial>')
    tilt = np.array([np.sin(0.3), np.cos(0.3), 0.0])
    chain = [("hip_roll", "pelvis", (0, 0.1, -0.05), (1, 0, 0), 1.5),
             ("hip_yaw", "hip_roll", (0.05, 0, -0.05), (0, 0, 1), 1.5),
             ("hip_pitch", "hip_yaw", (0, 0, -0.08), (0, 1, 0), 3.0),
             ("knee", "hip_pitch", (0.1, 0, -0.4), (0, 1, 0), 1.5),
             ("tarsus", "knee", (0, 0, -0.45), (0, 1, 0), 0.8), ("toe", "tarsus", (0, 0, -0.45), (0, 1, 0), 0.2),
             ("knee_rod_a", "hip_pitch", (-0.05, 0, -0.05), tilt, 0.05),
             ("knee_rod", "knee_rod_a", (0, 0, 0), (1, 0, 0), 0.1),
             ("heel_rod_a", "knee", (-0.05, 0, -0.1), tilt, 0.05),
             ("heel_rod", "heel_rod_a", (0, 0, 0), (1, 0, 0), 0.1)]
    out = [f'<robot name="cassie_like"><link name="pelvis">{inertial(10.0)}</link>']
    for name, parent, o, ax, m in chain:
        out.append(f'<link name="{name}">{inertial(m)}</link><joint name="{name}_joint" type="revolute"><parent '
                   f'link="{parent}"/><child link="{name}"/><origin xyz="{o[0]} {o[1]} {o[2]}"/><axis xyz="{ax[0]} '
                   f'{ax[1]} {ax[2]}"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>')
    return "".join(out) + "</robot>"


ROD = (0.0, 0.0, -0.4)          # a rod's far end in its link


def cassie_like(tmp_path, rng):
    """(model, Pinocchio model, q, v, constraints): the leg at a random pose, closed there (each
    loop's offset_b is the rod end in the target link at q, from Pinocchio's placements), standing
    on its toe (6d contact), loops with Baumgarte gains."""
    path = tmp_path / "cassie_like.urdf"
    path.write_text(cassie_like_urdf(rng))
    model = sl.load_urdf(path, floating_base=True)
    pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())
    quat = rng.normal(size=4)
    q = np.r_[rng.normal(size=3), quat / np.linalg.norm(quat), rng.uniform(-0.5, 0.5, model.nj)]
    v = np.r_[rng.normal(size=6) * 0.3, rng.normal(size=model.nj)]
    pd = pm.createData()
    pin.forwardKinematics(pm, pd, q)
    loops = []
    for rod, target, kind in (("knee_rod", "tarsus", "point"), ("heel_rod", "toe", "point")):
        Mr, Mt = pd.oMi[pm.getJointId(rod + "_joint")], pd.oMi[pm.getJointId(target + "_joint")]
        off_b = Mt.rotation.T @ (Mr.rotation @ np.array(ROD) + Mr.translation - Mt.translation)
        loops.append(sl.Loop(rod, target, kind, offset_a=ROD, offset_b=off_b, baumgarte=(20.0, 5.0)))
        JOINT_OF[rod], JOINT_OF[target] = rod + "_joint", target + "_joint"
    return model, pm, q, v, [sl.Contact("toe", "6d", baumgarte=(0.0, 2.0))] + loops


def test_cassie_like_leg_against_pinocchio(tmp_path):
    """The Cassie-like leg (knee and heel rod loops) on a floating base standing on its toe:
    A, B, forces and their derivatives against central differences of Pinocchio's
    constraintDynamics."""
    rng = np.random.default_rng(31)
    model, pm, q, v, cons = cassie_like(tmp_path, rng)
    assert model.joint_names == [pm.names[i] for i in range(2, pm.njoints)]
    assert_floating_matches_pinocchio(model, pm, q, v, rng.normal(size=model.nj), cons)


def test_humanoid_with_ankle_rods_against_pinocchio(tmp_path):
    """talos (reduced, 32 joints) with each ankle driven by two parallel rods: a crank on the knee
    link (pitch), a universal joint (two revolute joints), the rod's end held on the foot (leg_6)
    link by a point loop: 12 rod joints more, 4 loops, both soles on the ground (6d contacts).
    A, B, forces and their derivatives against central differences of Pinocchio's
    constraintDynamics."""
    from sva_linearizer.robots import robot_urdf_path

    rng = np.random.default_rng(41)
    xml = robot_urdf_path("talos").read_text()
    extra = []
    for side in ("left", "right"):
        for k, y in ((1, 0.04), (2, -0.04)):
            rod, parent = f"{side}_rod{k}", f"leg_{side}_4_link"
            for name, par, o, ax, m in ((f"{rod}_crank", parent, (-0.08, y, -0.1), (0, 1, 0), 0.2),
                                        (f"{rod}_u", f"{rod}_crank", (-0.05, 0, 0), (1, 0, 0), 0.02),
                                        (rod, f"{rod}_u", (0, 0, 0), (0, np.cos(0.2), np.sin(0.2)), 0.1)):
                extra.append(f'<link name="{name}"><inertial><mass value="{m}"/><inertia ixx="{m * 1e-3}" '
                             f'iyy="{m * 1e-3}" izz="{m * 1e-4}" ixy="0" ixz="0" iyz="0"/></inertial></link>'
                             f'<joint name="{name}_joint" type="revolute"><parent link="{par}"/><child link="{name}"/>'
                             f'<origin xyz="{o[0]} {o[1]} {o[2]}"/><axis xyz="{ax[0]} {ax[1]} {ax[2]}"/>'
                             '<limit lower="-3" upper="3" effort="1" velocity="1"/></joint>')
    path = tmp_path / "talos_rods.urdf"
    path.write_text(xml.replace("</robot>", "".join(extra) + "</robot>"))
    model = sl.load_urdf(path, floating_base=True)
    pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())
    from ros_helpers.oracle import joint_maps

    qi, vi, unbounded = joint_maps(model, pm)
    assert not unbounded.any() and model.nv == pm.nv
    perm = np.r_[np.arange(6), vi]
    quat = rng.normal(size=4)
    s = rng.uniform(-0.3, 0.3, model.nj)
    qp = pin.neutral(pm)
    qp[0:3], qp[3:7], qp[qi] = rng.normal(size=3), quat / np.linalg.norm(quat), s
    q = np.r_[qp[0:7], s]
    v = np.r_[rng.normal(size=6) * 0.3, rng.normal(size=model.nj) * 0.5]
    pd = pm.createData()
    pin.forwardKinematics(pm, pd, qp)
    cons = [sl.Contact("left_sole_link", "6d", baumgarte=(0.0, 2.0)),
            sl.Contact("right_sole_link", "6d", baumgarte=(0.0, 2.0))]
    for side in ("left", "right"):
        for k in (1, 2):
            rod, target = f"{side}_rod{k}", f"leg_{side}_6_link"
            Mr, Mt = pd.oMi[pm.getJointId(rod + "_joint")], pd.oMi[pm.getJointId(f"leg_{side}_6_joint")]
            end = np.array([0.0, 0.0, -0.3])
            off_b = Mt.rotation.T @ (Mr.rotation @ end + Mr.translation - Mt.translation)   # closed at q
            cons.append(sl.Loop(rod, target, "point", offset_a=end, offset_b=off_b, baumgarte=(20.0, 5.0)))
            JOINT_OF[rod], JOINT_OF[target] = rod + "_joint", f"leg_{side}_6_joint"
    st = sl.State.from_vectors(model, q, v)
    tau = rng.normal(size=model.nj)
    lin = sl.linearize(model, st, tau, contacts=cons)
    nv = model.nv
    taup = np.zeros(nv)
    taup[vi] = tau
    cms = pin_models(pm, qp, cons)

    def ours_order(x):
        return x[perm]
    # central differences in Pinocchio's coordinates, mapped to ours
    h = 1e-6
    vp = np.zeros(nv)
    vp[perm] = v
    cols_a, cols_l = [], []
    for c in range(2 * nv):
        out = []
        for sgn in (1, -1):
            e = np.zeros(nv)
            e[perm[c % nv]] = sgn * h
            out.append(pin_forward(pm, cms, pin.integrate(pm, qp, e), vp, taup) if c < nv
                       else pin_forward(pm, cms, qp, vp + e, taup))
        cols_a.append(ours_order((out[0][0] - out[1][0]) / (2 * h)))
        cols_l.append((out[0][1] - out[1][1]) / (2 * h))
    ddq, lam = pin_forward(pm, cms, qp, vp, taup)
    E = {"nu_dot": rel(lin.nu_dot, ours_order(ddq)), "lam": rel(lin.forces, lam),
         "A": rel(lin.A[nv:], np.array(cols_a).T), "dl_dz": rel(lin.dforces_dz, np.array(cols_l).T)}
    Bc = []
    for j in range(model.nj):
        t = taup.copy()
        t[vi[j]] += 1.0
        up = pin_forward(pm, cms, qp, vp, t)
        t[vi[j]] -= 2.0
        dn = pin_forward(pm, cms, qp, vp, t)
        Bc.append(np.r_[ours_order((up[0] - dn[0]) / 2), (up[1] - dn[1]) / 2])
    Bc = np.array(Bc).T
    E.update(B=rel(lin.B[nv:], Bc[:nv]), dl_dtau=rel(lin.dforces_dtau, Bc[nv:]))
    assert max(E.values()) < 1e-6, E


def test_batch_with_loops_runs_compiled_chunks():
    """Loops without Kp take linearize_batch's compiled contact path (contacts_lanes on each worker's
    plan): the same A and B as linearize state by state."""
    rng = np.random.default_rng(8)
    model = random_tree(rng, n=14, floating_base=True, parents=TWO_LEGS)
    states = [random_state(model, rng) for _ in range(5)]
    taus = rng.normal(size=(5, model.nj))
    cons = [sl.Loop("j6", "j13", "revolute", offset_a=(0.1, 0, 0), axis=(0, 1, 0), baumgarte=(0.0, 3.0)),
            sl.Contact("j3", "point", "world_aligned")]
    OA, OB = sl.linearize_batch(model, np.stack([s.q for s in states]), np.stack([s.v for s in states]), taus,
                                contacts=cons)
    for i, st in enumerate(states):
        lin = sl.linearize(model, st, taus[i], contacts=cons)
        assert np.allclose(OA[i], lin.A, rtol=0, atol=1e-10 * np.abs(lin.A).max())
        assert np.allclose(OB[i], lin.B, rtol=0, atol=1e-10 * np.abs(lin.B).max())
