# SPDX-License-Identifier: BSD-3-Clause
"""An extended-precision reference for the lower blocks of A and for M, independent of the package's
algorithms: a textbook recursive Newton-Euler pass (Featherstone, linear-angular spatial vectors)
written here with numpy's ``longdouble`` / ``clongdouble`` (x86-64: 64-bit mantissa, eps 1.1e-19;
aarch64 Linux: IEEE quad), differentiated by the complex step (no cancellation: every derivative is
as accurate as the arithmetic), and a Gaussian elimination with partial pivoting in ``longdouble``.

    ref = reference_linearization(tree, s, R_base, v, tau)   # ref.M, ref.nu_dot, ref.D, ref.A_lower

``tree`` is a plain description of a kinematic tree (:func:`tree_from_pinocchio` builds it from a
Pinocchio model, :func:`tree_from_model` from one of ours); the numbers (placements, axes, masses,
centres of mass, rotational inertias) are the model's doubles, and everything computed from them is
done in extended precision. Where ``longdouble`` is just ``double`` (Windows, macOS on arm64) the
reference is no better than the implementations it checks: :data:`AVAILABLE` is False there.

Conventions are the package's (README "Conventions"): ID = [base wrench (6, base frame); tau];
columns of D = [z_H (6; H -> H exp(z^)), s | v (6, body twist), r]; nu_dot = [body-twist rate; r_ddot].
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LD, CLD = np.longdouble, np.clongdouble
EPS = float(np.finfo(LD).eps)
AVAILABLE = EPS < 1e-18          # at least 3 more digits than double
STEP = LD("1e-200")              # complex step (clongdouble's range reaches 1e-4932)


@dataclass
class Body:
    name: str
    parent: int          # index into the body list, -1 = the base
    R: np.ndarray        # joint frame orientation in the parent body frame (3x3)
    p: np.ndarray        # joint frame origin in the parent body frame (3,)
    revolute: bool       # else prismatic
    axis: np.ndarray     # unit axis in the joint (= body) frame
    inertia: object      # (mass, com, I_com) in the body frame, or a 6x6 spatial inertia about its origin


@dataclass
class Tree:
    bodies: list
    base: object         # the base body's inertia, as Body.inertia
    floating: bool
    gravity: np.ndarray


def _skew(a):
    """(..., 3) -> (..., 3, 3) with skew(a) @ b = a x b."""
    z = np.zeros_like(a[..., 0])
    return np.stack([np.stack([z, -a[..., 2], a[..., 1]], -1),
                     np.stack([a[..., 2], z, -a[..., 0]], -1),
                     np.stack([-a[..., 1], a[..., 0], z], -1)], -2)


def _inertia6(inertia):
    """6x6 linear-angular spatial inertia about the body origin, formed in longdouble from
    (mass, com, I_com), or a given 6x6 matrix."""
    if not isinstance(inertia, tuple):
        return np.asarray(inertia, dtype=LD)
    mass, com, I_com = inertia
    m = LD(mass)
    c = _skew(np.asarray(com, dtype=LD))
    out = np.zeros((6, 6), dtype=LD)
    out[0:3, 0:3] = m * np.eye(3, dtype=LD)
    out[0:3, 3:6] = -m * c
    out[3:6, 0:3] = m * c
    out[3:6, 3:6] = np.asarray(I_com, dtype=LD) - m * (c @ c)
    return out


def tree_from_model(model):
    """Our Model's numbers (placements, axes, 6x6 inertias)."""
    from sva_linearizer.joints import PRISMATIC, REVOLUTE

    index = {b.name: i for i, b in enumerate(model.bodies)}
    bodies = []
    for b in model.bodies:
        assert b.joint.kind in (REVOLUTE, PRISMATIC), f"{b.name}: only revolute/prismatic joints"
        parent = -1 if b.parent < 0 else index[model.bodies[b.parent].name]
        bodies.append(Body(b.name, parent, b.placement_R, b.placement_p, b.joint.kind == REVOLUTE,
                           np.asarray(b.joint.axis, float), b.inertia))
    return Tree(bodies, model.base_inertia, model.floating_base, model.gravity)


def tree_from_pinocchio(pm, joint_names, floating, gravity=(0.0, 0.0, -9.81)):
    """Pinocchio's numbers (jointPlacements, inertias), bodies in the order of ``joint_names``
    (ours; parents before children). Joint axes from the joint's motion subspace."""
    import pinocchio as pin

    data = pm.createData()
    pin.computeJointJacobians(pm, data, pin.neutral(pm))
    first = 2 if floating else 1
    order = {name: i for i, name in enumerate(joint_names)}
    bodies = []
    for name in joint_names:
        j = pm.getJointId(name)
        J = np.asarray(pin.getJointJacobian(pm, data, j, pin.ReferenceFrame.LOCAL))
        S = J[:, pm.joints[j].idx_v]
        revolute = np.linalg.norm(S[3:6]) > 0.5
        axis = S[3:6] if revolute else S[0:3]
        pj = pm.parents[j]
        parent = -1 if pj < first else order[pm.names[pj]]
        M, Y = pm.jointPlacements[j], pm.inertias[j]
        bodies.append(Body(name, parent, np.array(M.rotation), np.array(M.translation), revolute, axis,
                           (Y.mass, np.array(Y.lever), np.array(Y.inertia))))
    Yb = pm.inertias[1 if floating else 0]
    return Tree(bodies, (Yb.mass, np.array(Yb.lever), np.array(Yb.inertia)), floating,
                np.asarray(gravity, float))


def _rotation(axis, angle):
    """(B,) angles -> (B, 3, 3) rotations about a fixed unit axis (Rodrigues)."""
    k = _skew(np.asarray(axis, dtype=LD))
    s, c = np.sin(angle)[:, None, None], np.cos(angle)[:, None, None]
    return np.eye(3, dtype=LD) + s * k + (1 - c) * (k @ k)


def _cross_motion(v, u):
    """v x u for (B, 6) twists (linear-angular)."""
    vl, w, ul, ua = v[:, 0:3], v[:, 3:6], u[:, 0:3], u[:, 3:6]
    return np.concatenate([np.cross(w, ul) + np.cross(vl, ua), np.cross(w, ua)], axis=1)


def _cross_force(v, f):
    """v x* f for a (B, 6) twist and wrench."""
    vl, w, fl, fa = v[:, 0:3], v[:, 3:6], f[:, 0:3], f[:, 3:6]
    return np.concatenate([np.cross(w, fl), np.cross(vl, fl) + np.cross(w, fa)], axis=1)


def rnea(tree, s, g_base, v0, a0, qd, qdd):
    """Batched inverse dynamics in clongdouble: every argument has a leading batch axis B.
    s, qd, qdd: (B, n) joint positions, rates, accelerations; g_base: (B, 3) gravity in the base
    frame; v0, a0: (B, 6) base twist and its rate (body frame; zero for a fixed base).
    Returns (B, nv): [base wrench (6); tau] (floating) or tau (fixed)."""
    n = len(tree.bodies)
    B = s.shape[0]
    I = [np.asarray(_inertia6(b.inertia), dtype=CLD) for b in tree.bodies]
    I0 = np.asarray(_inertia6(tree.base), dtype=CLD)
    a_base = a0.copy()
    a_base[:, 0:3] -= g_base                       # gravity as an upward base acceleration
    v, a, f, E, P = [None] * n, [None] * n, [None] * n, [None] * n, [None] * n
    vb, ab = v0, a_base
    fb = ab @ I0.T + _cross_force(vb, vb @ I0.T)
    for i, b in enumerate(tree.bodies):
        vp, ap = (vb, ab) if b.parent < 0 else (v[b.parent], a[b.parent])
        Rp, pp = np.asarray(b.R, dtype=LD), np.asarray(b.p, dtype=LD)
        axis = np.asarray(b.axis, dtype=LD)
        if b.revolute:
            Ei = Rp @ _rotation(axis, s[:, i])                         # (B, 3, 3)
            pi = np.broadcast_to(pp.astype(CLD), (B, 3))
        else:
            Ei = np.broadcast_to(Rp.astype(CLD), (B, 3, 3))
            pi = pp + s[:, i:i + 1] * (Rp @ axis)
        Et = np.swapaxes(Ei, 1, 2)
        S = np.concatenate([np.zeros(3), axis] if b.revolute else [axis, np.zeros(3)]).astype(CLD)

        def to_child(m):  # ^iX_p m = [E^T (lin - p x ang); E^T ang]
            return np.concatenate([np.einsum("bij,bj->bi", Et, m[:, 0:3] - np.cross(pi, m[:, 3:6])),
                                   np.einsum("bij,bj->bi", Et, m[:, 3:6])], axis=1)

        vJ = qd[:, i:i + 1] * S
        v[i] = to_child(vp) + vJ
        a[i] = to_child(ap) + qdd[:, i:i + 1] * S + _cross_motion(v[i], vJ)
        f[i] = a[i] @ I[i].T + _cross_force(v[i], v[i] @ I[i].T)
        E[i], P[i] = Ei, pi
    tau = np.zeros((B, n), dtype=CLD)
    for i in reversed(range(n)):
        b = tree.bodies[i]
        tau[:, i] = f[i] @ np.concatenate([np.zeros(3), b.axis] if b.revolute
                                          else [b.axis, np.zeros(3)]).astype(CLD)
        fl = np.einsum("bij,bj->bi", E[i], f[i][:, 0:3])       # to the parent: X^T f
        fa = np.einsum("bij,bj->bi", E[i], f[i][:, 3:6]) + np.cross(P[i], fl)
        fp = np.concatenate([fl, fa], axis=1)
        if b.parent < 0:
            fb = fb + fp
        else:
            f[b.parent] = f[b.parent] + fp
    return np.concatenate([fb, tau], axis=1) if tree.floating else tau


def solve(M, rhs):
    """M X = rhs by Gaussian elimination with partial pivoting, in longdouble."""
    A = np.array(M, dtype=LD)
    X = np.array(rhs, dtype=LD).reshape(A.shape[0], -1)
    n = A.shape[0]
    for k in range(n):
        piv = k + int(np.argmax(np.abs(A[k:, k])))
        if piv != k:
            A[[k, piv]], X[[k, piv]] = A[[piv, k]], X[[piv, k]]
        lk = A[k + 1:, k] / A[k, k]
        A[k + 1:, k:] -= np.outer(lk, A[k, k:])
        X[k + 1:] -= np.outer(lk, X[k])
    for k in reversed(range(n)):
        X[k] = (X[k] - A[k, k + 1:] @ X[k + 1:]) / A[k, k]
    return X


@dataclass
class Reference:
    M: np.ndarray        # (nv, nv) longdouble
    nu_dot: np.ndarray   # (nv,)
    D: np.ndarray        # (nv, 2nv): [D_q | D_nu] at nu_dot
    A_lower: np.ndarray  # (nv, 2nv) = -M^-1 D
    Minv: np.ndarray     # (nv, nv)


def reference_linearization(tree, s, R_base, v, tau):
    """M, the consistent nu_dot, D = [D_q | D_nu] and A_lower = -M^-1 D at the state (s, R_base,
    v = [base twist (6, body); r] or r) with joint torques tau, all in extended precision."""
    n = len(tree.bodies)
    fb = 6 if tree.floating else 0
    nv = n + fb
    s, v, tau = (np.asarray(x, dtype=LD) for x in (s, v, tau))
    g_base = np.asarray(R_base, dtype=LD).T @ np.asarray(tree.gravity, dtype=LD)
    v0 = v[0:6] if tree.floating else np.zeros(6, dtype=LD)
    r = v[fb:]
    h = STEP

    def batch(k, nu_dot):
        """k copies of the state at acceleration nu_dot, as clongdouble arrays."""
        a0 = nu_dot[0:6] if tree.floating else np.zeros(6, dtype=LD)
        rep = lambda x: np.tile(np.asarray(x, dtype=CLD), (k, 1))  # noqa: E731
        return rep(s), rep(g_base), rep(v0), rep(a0), rep(r), rep(nu_dot[fb:])

    # Pass 1 at nu_dot = 0: row 0 gives h(q, nu) = C nu + g, row 1 + k the column k of M (ID is
    # affine in nu_dot, so the complex step in nu_dot is exact).
    S_, G, V0, A0, QD, QDD = batch(nv + 1, np.zeros(nv, dtype=LD))
    for k in range(nv):
        if k < fb:
            A0[1 + k, k] += 1j * h
        else:
            QDD[1 + k, k - fb] += 1j * h
    out = rnea(tree, S_, G, V0, A0, QD, QDD)
    bias = out[0].real.astype(LD)
    M = (out[1:].imag / h).astype(LD).T
    M = (M + M.T) / 2
    rhs = -bias
    rhs[fb:] += tau
    nu_dot = solve(M, rhs)[:, 0]

    # Pass 2 at the consistent nu_dot: complex steps in z_H (only gravity's direction in the base
    # frame depends on H: (H exp(z^))^T g = (1 - w^) R^T g), s, the base twist and r.
    S_, G, V0, A0, QD, QDD = batch(2 * nv, nu_dot)
    for k in range(nv):
        if k < fb:
            if k >= 3:
                e = np.zeros(3, dtype=LD)
                e[k - 3] = 1
                G[k] -= 1j * h * np.cross(e, g_base)
            V0[nv + k, k] += 1j * h
        else:
            S_[k, k - fb] += 1j * h
            QD[nv + k, k - fb] += 1j * h
    out = rnea(tree, S_, G, V0, A0, QD, QDD)
    D = (out.imag / h).astype(LD).T
    Minv = solve(M, np.eye(nv, dtype=LD))
    return Reference(M, nu_dot, D, -solve(M, D), Minv)
