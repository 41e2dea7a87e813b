# SPDX-License-Identifier: BSD-3-Clause
"""Pinocchio as an independent oracle (see the thesis notes, section 2), in our conventions and our
joint order (joints matched by name):

* :func:`pinocchio_A_B`: A and B with the lower blocks from ``computeABADerivatives``, B from its
  Minv, upper blocks [[-ad(v) (+) 0, I]];
* :func:`pinocchio_oracle`: the same plus Minv, ``aba``'s acceleration, ``crba``'s M and
  ``computeRNEADerivatives`` at a given acceleration (the well-conditioned ingredients of A);
* :func:`pinocchio_model`, :func:`random_state`, :func:`robot_states`: the model with or without
  a free-flyer root, random states within Pinocchio's joint limits, a named robot's test states.

Both free-flyer conventions agree with ours: Pinocchio's velocity is the body twist (linear first),
a configuration perturbation is q (+) dq = q exp(dq) (right, body side), as our H -> H exp(z^).
"""
import zlib
from types import SimpleNamespace

import numpy as np

from sva_linearizer.spatial import crm


def pinocchio_model(urdf_path, floating):
    import pinocchio as pin

    if floating:
        return pin.buildModelFromUrdf(str(urdf_path), pin.JointModelFreeFlyer())
    return pin.buildModelFromUrdf(str(urdf_path))


def joint_maps(model, pm):
    """For each of our joints, its index into Pinocchio's q and v vectors, and whether Pinocchio
    stores it as (cos, sin) (continuous joints: JointModelRevoluteUnbounded, nq = 2)."""
    qi, vi, unbounded = [], [], []
    for name in model.joint_names:
        jid = pm.getJointId(name)
        assert jid < pm.njoints, f"Pinocchio has no joint '{name}'"
        assert pm.nvs[jid] == 1 and pm.nqs[jid] in (1, 2), f"joint '{name}' is not 1-DoF in Pinocchio"
        qi.append(pm.idx_qs[jid])
        vi.append(pm.idx_vs[jid])
        unbounded.append(pm.nqs[jid] == 2)
    return np.array(qi, dtype=int), np.array(vi, dtype=int), np.array(unbounded, dtype=bool)


def velocity_permutation(model, pm):
    """perm[i] = Pinocchio's v index of our v index i."""
    vi = joint_maps(model, pm)[1]
    return np.r_[np.arange(6), vi].astype(int) if model.floating_base else vi


def random_state(model, pm, rng):
    """Random (q, v, tau) in our flat conventions: joint positions uniform within Pinocchio's
    limits where finite (else in [-1.5, 1.5]), a random base pose, v ~ N(0, 1), tau ~ N(0, 9)."""
    import pinocchio as pin

    floating = model.floating_base
    qi, vi, unbounded = joint_maps(model, pm)
    lo, hi = pm.lowerPositionLimit, pm.upperPositionLimit
    s = np.zeros(len(qi))
    for j, (k, ub) in enumerate(zip(qi, unbounded)):
        a, b = (lo[k], hi[k]) if not ub else (-np.pi, np.pi)
        if not (np.isfinite(a) and np.isfinite(b)) or b - a > 2 * np.pi or b <= a:
            a, b = -1.5, 1.5
        s[j] = rng.uniform(a, b)
    q = pin.neutral(pm)
    if floating:
        q[0:3] = rng.normal(size=3)
        quat = rng.normal(size=4)
        q[3:7] = quat / np.linalg.norm(quat)
    v = rng.normal(size=pm.nv)             # drawn in Pinocchio's order
    tau = rng.normal(size=pm.nv) * 3.0
    perm = velocity_permutation(model, pm)
    our_q = np.r_[q[0:7], s] if floating else s
    return our_q, v[perm], tau[vi]


def robot_states(robot, floating, n=3):
    """(our model, Pinocchio's model, URDF path, [(q, v, tau)] * n) for a robot of
    sva_linearizer.robots: the states of test_pinocchio.py and test_accuracy.py (seeded per robot)."""
    import sva_linearizer as sl
    from sva_linearizer.robots import robot_urdf_path

    path = robot_urdf_path(robot)
    model = sl.load_urdf(path, floating_base=floating)
    pm = pinocchio_model(path, floating)
    assert model.nv == pm.nv, f"{robot}: nv {model.nv} vs Pinocchio {pm.nv}"
    rng = np.random.default_rng(zlib.crc32(robot.encode()))
    return model, pm, path, [random_state(model, pm, rng) for _ in range(n)]


def pinocchio_state(model, pm, q, v, tau):
    """Our flat (q, v, tau) -> Pinocchio's (q, v, tau) and the permutation our v -> Pinocchio's v."""
    import pinocchio as pin

    floating = model.floating_base
    off = 6 if floating else 0
    qi, vi, unbounded = joint_maps(model, pm)
    qp, vp, taup = pin.neutral(pm), np.zeros(pm.nv), np.zeros(pm.nv)
    if floating:
        qp[0:7] = q[0:7]
        vp[0:6] = v[0:6]
    for j in range(model.nj):
        s = q[(7 if floating else 0) + j]
        if unbounded[j]:                          # continuous joint stored as (cos, sin)
            qp[qi[j]], qp[qi[j] + 1] = np.cos(s), np.sin(s)
        else:
            qp[qi[j]] = s
        vp[vi[j]], taup[vi[j]] = v[off + j], tau[j]
    return qp, vp, taup, velocity_permutation(model, pm)


def pinocchio_oracle(urdf_path, model, q, v, tau, nu_dot=None, pm=None):
    """Pinocchio's quantities at our (q, v, tau), in our order: A, B (from computeABADerivatives),
    Minv, nu_dot (aba), M (crba), and D_q, D_nu (computeRNEADerivatives at the acceleration
    ``nu_dot``, ours if given, else Pinocchio's aba). ``pm``: a Pinocchio model to reuse."""
    import pinocchio as pin

    pm = pinocchio_model(urdf_path, model.floating_base) if pm is None else pm
    pd = pm.createData()
    nv, nj = pm.nv, model.nj
    assert nv == model.nv
    qp, vp, taup, perm = pinocchio_state(model, pm, q, v, tau)
    sym = lambda X: np.triu(X) + np.triu(X, 1).T  # noqa: E731  (Pinocchio fills the upper triangle)
    pin.computeABADerivatives(pm, pd, qp, vp, taup)
    Minv = sym(pd.Minv)
    A = np.zeros((2 * nv, 2 * nv))
    A[:nv, nv:] = np.eye(nv)
    if model.floating_base:
        A[0:6, 0:6] = -crm(vp[0:6])
    A[nv:, :nv] = pd.ddq_dq
    A[nv:, nv:] = pd.ddq_dv
    B = np.zeros((2 * nv, nj))
    B[nv:, :] = Minv[:, perm[nv - nj:]]
    P = np.r_[perm, nv + perm]
    ddq = pin.aba(pm, pd, qp, vp, taup).copy()
    M = sym(pin.crba(pm, pd, qp))
    a = ddq if nu_dot is None else np.empty(nv)
    if nu_dot is not None:
        a[perm] = nu_dot
    pin.computeRNEADerivatives(pm, pd, qp, vp, a)
    ix = np.ix_(perm, perm)
    return SimpleNamespace(A=A[np.ix_(P, P)], B=B[P, :], Minv=Minv[ix], nu_dot=ddq[perm], M=M[ix],
                           D_q=np.array(pd.dtau_dq)[ix], D_nu=np.array(pd.dtau_dv)[ix], pmodel=pm,
                           q=qp, v=vp, tau=taup)


def pinocchio_A_B(urdf_path, model, q, v, tau, pm=None):
    """A, B in our ordering for our flat q = [p, quat xyzw, s] / s, v = [v_lin, w, r] / r, tau."""
    o = pinocchio_oracle(urdf_path, model, q, v, tau, pm=pm)
    return o.A, o.B
