# SPDX-License-Identifier: BSD-3-Clause
"""Kinematics: jcalc for every joint (thesis Appendix B), the tree transforms ^kX_lam(k) (EIDAmb
line 16), the base rotation and the gravity term a_0^r (line 7).

`prepare(m, d, q, vel, x)` is the first step of every compiled entry point: it checks and reads the flat state
vectors (Pinocchio's layout, see State) and fills d.XJ, d.Xup, d.S, d.Sig, d.R, d.g0 and d.v[0].
Joints given by user callbacks (Joint.custom) cannot run in compiled code: `fill_custom` writes
their X_J, Gamma and sigma into the Data before the compiled call.
"""
from __future__ import annotations

import numpy as np

from .._lanes import any_lane
from .._jit import njit
from ..layout import kernel
from ..joints import CUSTOM, HELICAL, PRISMATIC
from ..spatial import crm
from ..spatial_ops import quat_to_rot
from ..state import QUATERNION_TOLERANCE, check_vectors
from .status import BAD_INPUT


@kernel
def joint_transforms(m, d, s):
    """jcalc (Appendix B.2) and ^kX_lam = X_J Xtree (EIDAmb line 16) for every body k = 1..N, with
    the joint's motion subspace Gamma_k (S) and its position twist sigma_k (Sig), defined by
    d ^kX_lam / ds_k = -(sigma_k x) ^kX_lam (jcalcderiv, Appendix B.3, in Lie-algebra form).

    Built-in joints about a unit axis e: REVOLUTE, PRISMATIC, HELICAL (pitch):
    X_J = [[E, o^ E], [0, E]] with E = R(e, s)^T and o = -(translation along e), so the child moves
    the way Gamma says and sigma = Gamma. CUSTOM joints: the caller has filled XJ[k], S[k] and
    Sig[k] from the user's jcalc / jcalcderiv (sigma may differ from Gamma there, as in the
    thesis's Table B.1 joints: docs/derivations.md, "Joints")."""
    jtype, jaxis, jpitch, S, Sig, xax = m.jtype, m.jaxis, m.jpitch, d.S, d.Sig, m.xax
    for k in range(1, m.nb):
        t = jtype[k]
        X = d.XJ[k]
        if xax[k] >= 0:      # about +-e_a on an unrotated placement: Xup = [[E, E w^], [0, E]] at once
            axis_joint_transform(xax[k], jaxis[k, xax[k]], s[k - 1], m.xw[k], S[k], Sig[k], d.Xup[k])
            continue
        if t != CUSTOM:
            e0, e1, e2 = jaxis[k, 0], jaxis[k, 1], jaxis[k, 2]
            q = s[k - 1]
            for i in range(6):
                S[k, i] = 0.0
            for i in range(6):
                for c in range(6):
                    X[i, c] = 0.0
            if t == PRISMATIC:
                S[k, 0], S[k, 1], S[k, 2] = e0, e1, e2
                for i in range(3):
                    X[i, i] = 1.0
                    X[i + 3, i + 3] = 1.0
                o0, o1, o2 = -q * e0, -q * e1, -q * e2
            else:
                pitch = jpitch[k] if t == HELICAL else 0.0
                S[k, 0], S[k, 1], S[k, 2] = pitch * e0, pitch * e1, pitch * e2
                S[k, 3], S[k, 4], S[k, 5] = e0, e1, e2
                sn, cs = np.sin(q), 1.0 - np.cos(q)
                # E = R^T, R = I + sin K + (1 - cos) K^2, K = e^ ; K^2 = e e^T - I
                X[0, 0] = 1.0 + cs * (e0 * e0 - 1.0)
                X[1, 1] = 1.0 + cs * (e1 * e1 - 1.0)
                X[2, 2] = 1.0 + cs * (e2 * e2 - 1.0)
                X[1, 0] = -sn * e2 + cs * e0 * e1   # E[1,0] = R[0,1]
                X[0, 1] = sn * e2 + cs * e0 * e1
                X[2, 0] = sn * e1 + cs * e0 * e2    # E[2,0] = R[0,2]
                X[0, 2] = -sn * e1 + cs * e0 * e2
                X[2, 1] = -sn * e0 + cs * e1 * e2   # E[2,1] = R[1,2]
                X[1, 2] = sn * e0 + cs * e1 * e2
                for i in range(3):
                    for c in range(3):
                        X[i + 3, c + 3] = X[i, c]
                o0, o1, o2 = -pitch * q * e0, -pitch * q * e1, -pitch * q * e2
            if any_lane(o0 != 0.0) or any_lane(o1 != 0.0) or any_lane(o2 != 0.0):    # upper-right block o^ E
                for c in range(3):
                    E0, E1, E2 = X[0, c], X[1, c], X[2, c]
                    X[0, c + 3] = o1 * E2 - o2 * E1
                    X[1, c + 3] = o2 * E0 - o0 * E2
                    X[2, c + 3] = o0 * E1 - o1 * E0
            for i in range(6):
                Sig[k, i] = S[k, i]
        # Xup = X_J Xtree with both [[E, F], [0, E]]: [[E_J E_t, E_J F_t + F_J E_t], [0, E_J E_t]]
        Y = d.Xup[k]
        T = m.Xtree[k]
        for i in range(3):
            for c in range(3):
                e = X[i, 0] * T[0, c] + X[i, 1] * T[1, c] + X[i, 2] * T[2, c]
                Y[i, c] = e
                Y[i + 3, c + 3] = e
                Y[i + 3, c] = 0.0
                Y[i, c + 3] = (X[i, 0] * T[0, c + 3] + X[i, 1] * T[1, c + 3] + X[i, 2] * T[2, c + 3]
                               + X[i, 3] * T[3, c + 3] + X[i, 4] * T[4, c + 3] + X[i, 5] * T[5, c + 3])


@njit(inline="always")
def axis_joint_transform(a, sg, q, w, S, Sig, Y):
    """joint_transforms for a revolute joint about sg e_a (sg = +-1) on a placement without
    rotation (topology.axis_structure): Gamma = sigma = sg e_(3+a) and Xup = X_J Xtree =
    [[E, E w^], [0, E]] written directly, with E's entries computed as joint_transforms computes
    them for that axis (the same numbers) and E w^ on E's 2x2 block."""
    b = a + 1 if a < 2 else 0
    c = b + 1 if b < 2 else 0
    for i in range(6):
        S[i] = 0.0
    S[3 + a] = sg
    for i in range(6):
        Sig[i] = S[i]
    sn, cs = np.sin(q), 1.0 - np.cos(q)
    ebb = 1.0 - cs                                   # 1 + cs (e_b e_b - 1), e_b = 0
    ebc = sg * sn
    ecb = -sg * sn
    for i in range(6):
        for j in range(6):
            Y[i, j] = 0.0
    for r in (0, 3):
        Y[r + a, r + a] = 1.0
        Y[r + b, r + b] = ebb
        Y[r + c, r + c] = ebb
        Y[r + b, r + c] = ebc
        Y[r + c, r + b] = ecb
    w0, w1, w2 = w[0], w[1], w[2]                    # F = E w^, w^ = [[0, -w2, w1], ...]
    Y[a, 3 + 0], Y[a, 3 + 1], Y[a, 3 + 2] = (0.0, -w2, w1) if a == 0 else (
        (w2, 0.0, -w0) if a == 1 else (-w1, w0, 0.0))
    rb0, rb1, rb2 = (0.0, -w2, w1) if b == 0 else ((w2, 0.0, -w0) if b == 1 else (-w1, w0, 0.0))
    rc0, rc1, rc2 = (0.0, -w2, w1) if c == 0 else ((w2, 0.0, -w0) if c == 1 else (-w1, w0, 0.0))
    Y[b, 3], Y[b, 4], Y[b, 5] = ebb * rb0 + ebc * rc0, ebb * rb1 + ebc * rc1, ebb * rb2 + ebc * rc2
    Y[c, 3], Y[c, 4], Y[c, 5] = ecb * rb0 + ebb * rc0, ecb * rb1 + ebb * rc1, ecb * rb2 + ebb * rc2


@njit(inline="ir")
def split_state(m, q, vel):
    """(quat, s, v_base, r) as views of the flat vectors (empty quat and v_base for a fixed base)."""
    if m.floating:
        return q[3:7], q[7:], vel[0:6], vel[6:]
    return q[0:0], q, vel[0:0], vel


@njit(inline="always")
def prepare(m, d, q, vel, x):
    """Checks q, vel and a third input x (finite values, unit quaternion: BAD_INPUT and nothing
    computed otherwise), then: joint and tree transforms at s; R = ^AR_0 of the base quaternion;
    a_0^r = ^0X_A a_grav (T4.1:7: gravity as an upward acceleration of the base); v[0] = the base
    twist; no external forces (fext = 0: the contact pipelines set them after this). Returns 0 or
    BAD_INPUT."""
    if check_vectors(q, vel, x, m.floating, QUATERNION_TOLERANCE) == 1:
        return BAD_INPUT
    quat, s, vb, r = split_state(m, q, vel)
    joint_transforms(m, d, s)
    R, g0 = d.R, d.g0
    if m.floating:
        quat_to_rot(quat, R)
    else:
        for i in range(3):
            for c in range(3):
                R[i, c] = 1.0 if i == c else 0.0
    a_grav = m.a_grav
    for i in range(3):
        g0[i] = R[0, i] * a_grav[0] + R[1, i] * a_grav[1] + R[2, i] * a_grav[2]
        g0[i + 3] = 0.0
    for i in range(6):
        d.v[0, i] = vb[i] if m.floating else 0.0
    fext = d.fext                           # no external forces unless a contact pipeline sets them
    for k in range(m.nb):
        for i in range(6):
            fext[k, i] = 0.0
    return 0


def fill_custom(d, s):
    """jcalc / jcalcderiv of user-defined joints (Appendix B interface), which compiled code cannot
    call: their X_J, Gamma and position twist sigma (dX_J/ds = -(sigma x) X_J) go into the buffers
    before a kernel runs."""
    for j, joint, name in d.custom:
        X, d.S[j + 1] = joint.jcalc(s[j])
        d.XJ[j + 1] = X
        d.Sig[j + 1] = position_twist(X, joint.jcalcderiv(s[j]), name, s[j])


def position_twist(X, dX, name="", s=0.0):
    """sigma with dX_J/ds = -(sigma x) X_J: the twist along which the joint moves its child per unit
    of s (Gamma for the built-in joints). A ValueError names the joint if dX is not of that form,
    i.e. not the derivative of a path of spatial transforms."""
    X = np.asarray(X, dtype=float)
    dX = np.asarray(dX, dtype=float)
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(dX))):
        raise ValueError(f"joint '{name}': jcalc / jcalcderiv returned NaN or infinite values at "
                         f"s = {s}")
    scale = max(1.0, float(np.max(np.abs(X))))
    if (np.max(np.abs(X[3:6, 0:3])) > 1e-9 * scale or np.max(np.abs(X[0:3, 0:3] - X[3:6, 3:6])) > 1e-9 * scale
            or np.max(np.abs(X[0:3, 0:3] @ X[0:3, 0:3].T - np.eye(3))) > 1e-9):
        raise ValueError(f"joint '{name}': jcalc(s) at s = {s} is not a spatial transform "
                         "[[E, o^ E], [0, E]] (E a rotation; linear-angular order, thesis (2.36))")
    W = -dX @ np.linalg.inv(X)   # = sigma x = [[w^, v^], [0, w^]]
    sigma = np.array([W[2, 4], W[0, 5], W[1, 3], W[5, 4], W[3, 5], W[4, 3]])
    resid = np.max(np.abs(W - crm(sigma)))
    if resid > 1e-8 * max(1.0, np.max(np.abs(W))):
        raise ValueError(f"joint '{name}': jcalcderiv(s) at s = {s} is not the derivative of jcalc's "
                         f"X_J (dX_J X_J^-1 is not a motion cross-product matrix; residual "
                         f"{resid:.3g})")
    return sigma
