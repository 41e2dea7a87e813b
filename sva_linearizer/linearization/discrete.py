# SPDX-License-Identifier: BSD-3-Clause
"""Discrete time: the semi-implicit (symplectic) Euler step on the Lie group (next_state),

    nu+ = nu + dt FD(q, nu, tau),   H+ = H exp(dt v+^),   s+ = s + dt r+,

linearized exactly in the perturbation coordinates of the continuous A, B (z = [z_H, z_s, z_v,
z_r]): with Vq = dt A_nu,q, Vn = I + dt A_nu,nu, Vb = dt B_nu, E = diag(exp(-ad(dt v+)), I) and
J = diag(Jr(dt v+), I) (Jr the right Jacobian of SE(3): exp(xi + e) = exp(xi) exp(Jr(xi) e)),

    Ad = [[E + dt J Vq, dt J Vn], [Vq, Vn]],   Bd = [[dt J Vb], [Vb]].

E and Jr come in closed form (Barfoot, State Estimation for Robotics, 2017, eqs. 7.83-7.86, in the
linear-angular order used here), by their Taylor series below 1 rad where the closed forms cancel.
"""
from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from .._jit import njit
from .._lanes import all_lanes, any_lane, where
from .._arrays import kernel_array, real_array
from ..algorithms.common import all_finite
from ..model import Model
from ..spatial_ops import quat_to_rot
from ..state import State, as_vector


@njit(inline="always")
def _coefficients(th):
    """s1 = sin/th, a = (1 - cos)/th^2, b = (th - sin)/th^3, c2 = (th^2 + 2 cos - 2)/(2 th^4),
    c3 = (2 th - 3 sin + th cos)/(2 th^5), by their series for th < 1. On lanes (linearization/lanes.py)
    each lane takes the form its own th selects."""
    big = th >= 1.0
    if all_lanes(big):
        return _closed_form(th)
    if not any_lane(big):
        return _series(th)
    c, s = _closed_form(th), _series(th)
    return (where(big, c[0], s[0]), where(big, c[1], s[1]), where(big, c[2], s[2]), where(big, c[3], s[3]),
            where(big, c[4], s[4]))


@njit(inline="always")
def _closed_form(th):
    sn, cs = math.sin(th), math.cos(th)
    t2 = th * th
    return (sn / th, (1.0 - cs) / t2, (th - sn) / (t2 * th), (t2 + 2.0 * cs - 2.0) / (2.0 * t2 * t2),
            (2.0 * th - 3.0 * sn + th * cs) / (2.0 * t2 * t2 * th))


@njit(inline="always")
def _series(th):
    t = th * th
    s1 = a = b = c2 = c3 = 0.0 * t
    pw = 1.0 + 0.0 * t
    f1 = 1.0        # 1/(2k+1)!, k = 0
    for k in range(12):
        f2 = f1 / (2 * k + 2)           # 1/(2k+2)!
        f3 = f2 / (2 * k + 3)           # 1/(2k+3)!
        f4 = f3 / (2 * k + 4)           # 1/(2k+4)!
        f5 = f4 / (2 * k + 5)           # 1/(2k+5)!
        s1 += pw * f1
        a += pw * f2
        b += pw * f3
        c2 += pw * f4
        c3 += pw * 0.5 * (f4 - 3.0 * f5)
        pw *= -t
        f1 = f3
    return s1, a, b, c2, c3


@njit(inline="always")
def _mm3(X, Y, out):
    for i in range(3):
        for c in range(3):
            out[i, c] = X[i, 0] * Y[0, c] + X[i, 1] * Y[1, c] + X[i, 2] * Y[2, c]


@njit(inline="always")
def _skew(x, out):
    out[0, 0], out[0, 1], out[0, 2] = 0.0, -x[2], x[1]
    out[1, 0], out[1, 1], out[1, 2] = x[2], 0.0, -x[0]
    out[2, 0], out[2, 1], out[2, 2] = -x[1], x[0], 0.0


@njit
def se3_step_jacobians(xi, E, J, M3):
    """E = exp(-ad xi) = Ad_exp(-xi) and J = Jr(xi) = Jl(-xi) = sum_k (-ad xi)^k / (k+1)!, both 6x6,
    for a twist xi = [rho; phi]. M3: (>= 10, 3, 3) scratch."""
    W, P, WW, WP, PW, WPW, WWP, PWW, WPWW, WWPW = (M3[0], M3[1], M3[2], M3[3], M3[4], M3[5], M3[6],
                                                   M3[7], M3[8], M3[9])
    _skew(xi[3:6], W)
    _skew(xi[0:3], P)
    th = math.sqrt(xi[3] * xi[3] + xi[4] * xi[4] + xi[5] * xi[5])
    s1, a, b, c2, c3 = _coefficients(th)
    _mm3(W, W, WW)
    _mm3(W, P, WP)
    _mm3(P, W, PW)
    _mm3(WP, W, WPW)
    _mm3(W, WP, WWP)
    _mm3(PW, W, PWW)
    _mm3(WPW, W, WPWW)
    _mm3(W, WPW, WWPW)
    for i in range(3):
        for c in range(3):
            d = 1.0 if i == c else 0.0
            jl = d - a * W[i, c] + b * WW[i, c]                 # Jl(-phi), SO(3)
            R = d - s1 * W[i, c] + a * WW[i, c]                 # exp(-phi^)
            Q = (-0.5 * P[i, c] + b * (WP[i, c] + PW[i, c] - WPW[i, c])
                 + c2 * (3.0 * WPW[i, c] - WWP[i, c] - PWW[i, c])
                 + c3 * (WPWW[i, c] + WWPW[i, c]))              # Barfoot's Q(-rho, -phi)
            J[i, c] = J[i + 3, c + 3] = jl
            J[i, c + 3] = Q
            J[i + 3, c] = 0.0
            E[i, c] = E[i + 3, c + 3] = R
            E[i + 3, c] = 0.0
    p0 = -(J[0, 0] * xi[0] + J[0, 1] * xi[1] + J[0, 2] * xi[2])  # translation of exp(-xi)
    p1 = -(J[1, 0] * xi[0] + J[1, 1] * xi[1] + J[1, 2] * xi[2])
    p2 = -(J[2, 0] * xi[0] + J[2, 1] * xi[1] + J[2, 2] * xi[2])
    for c in range(3):                                          # E's upper-right block p^ R
        R0, R1, R2 = E[0, c], E[1, c], E[2, c]
        E[0, c + 3] = p1 * R2 - p2 * R1
        E[1, c + 3] = p2 * R0 - p0 * R2
        E[2, c + 3] = p0 * R1 - p1 * R0


@njit
def discrete_step(A, B, dt, nb6, E, J, Ad, Bd):
    """Ad, Bd (module docstring) from the continuous A, B. nb6 = 6 for a floating base, with E, J
    the base blocks (se3_step_jacobians at dt v+); 0 for a fixed base (E = J = I)."""
    nv = A.shape[0] // 2
    nw = B.shape[1]
    for i in range(nv):                                         # the velocity rows: Vq, Vn, Vb
        Ai, Adi = A[nv + i], Ad[nv + i]
        for c in range(2 * nv):
            Adi[c] = dt * Ai[c]
        Adi[nv + i] += 1.0
        for c in range(nw):
            Bd[nv + i, c] = dt * B[nv + i, c]
    for i in range(nb6, nv):                                    # joint rows: s+ = s + dt r+
        Vi, Adi = Ad[nv + i], Ad[i]
        for c in range(2 * nv):
            Adi[c] = dt * Vi[c]
        Adi[i] += 1.0
        for c in range(nw):
            Bd[i, c] = dt * Bd[nv + i, c]
    for i in range(nb6):                                        # base rows: E z_H + dt Jr z_v+
        Adi, Bdi = Ad[i], Bd[i]
        for c in range(2 * nv):
            acc = 0.0
            for r in range(6):
                acc += J[i, r] * Ad[nv + r, c]
            Adi[c] = dt * acc
        for c in range(6):
            Adi[c] += E[i, c]
        for c in range(nw):
            acc = 0.0
            for r in range(6):
                acc += J[i, r] * Bd[nv + r, c]
            Bdi[c] = dt * acc


def check_dt(dt) -> float:
    """dt as a positive finite float, or a ValueError."""
    if isinstance(dt, (bool, str, bytes)):
        raise ValueError(f"dt must be a positive number of seconds, got {dt!r}")
    try:
        dt = float(real_array(dt, "dt").reshape(()))
    except (TypeError, ValueError):
        raise ValueError(f"dt must be a positive number of seconds, got {dt!r}") from None
    if not (math.isfinite(dt) and dt > 0):
        raise ValueError(f"dt must be a positive finite number of seconds, got {dt}")
    return dt


def discretize(A: ArrayLike, B: ArrayLike, dt: float,
               v_plus: ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Ad, Bd of the semi-implicit Euler step (module docstring) from continuous A (..., 2nv, 2nv)
    and B (..., 2nv, nw), for one state or a batch (leading axes). v_plus: the base twist after
    the velocity update, v + dt v_dot, (..., 6): required for a floating base (an A whose z_H block
    -ad(v) is not zero without it is refused); None for a fixed base."""
    dt = check_dt(dt)
    A = real_array(A, "discretize: A")
    B = real_array(B, "discretize: B")
    if A.ndim < 2 or A.shape[-1] != A.shape[-2] or A.shape[-1] % 2:
        raise ValueError(f"discretize: A must be (..., 2nv, 2nv), got shape {A.shape}")
    if B.shape[:-1] != A.shape[:-1]:
        raise ValueError(f"discretize: B must be (..., {A.shape[-1]}, nw) beside A {A.shape}, got "
                         f"shape {B.shape}")
    lead = A.shape[:-2]
    if v_plus is None:
        nv = A.shape[-1] // 2
        if np.any(A[..., :nv, :nv] != 0.0):
            raise ValueError("discretize: A has a non-zero z_q block (-ad(v) of a floating base): "
                             "pass v_plus, the base twist after the velocity update")
    else:
        v_plus = real_array(v_plus, "discretize: v_plus")
        if v_plus.shape != lead + (6,):
            raise ValueError(f"discretize: v_plus must have shape {lead + (6,)}, got {v_plus.shape}")
        if A.shape[-1] < 12:
            raise ValueError("discretize: v_plus is for a floating base (2nv >= 12)")
    if not (np.all(np.isfinite(A)) and np.all(np.isfinite(B))
            and (v_plus is None or np.all(np.isfinite(v_plus)))):
        raise ValueError("discretize: A, B and v_plus must be finite")
    Ad, Bd = np.empty(A.shape), np.empty(B.shape)
    E, J, M3 = np.eye(6), np.eye(6), np.zeros((10, 3, 3))
    A2 = A.reshape((-1,) + A.shape[-2:])
    B2 = B.reshape((-1,) + B.shape[-2:])
    Ad2, Bd2 = Ad.reshape(A2.shape), Bd.reshape(B2.shape)
    V2 = None if v_plus is None else v_plus.reshape(-1, 6)
    for i in range(A2.shape[0]):
        if V2 is not None:
            se3_step_jacobians(kernel_array(dt * V2[i]), E, J, M3)
        discrete_step(kernel_array(A2[i]), kernel_array(B2[i]), dt,
                      0 if V2 is None else 6, E, J, Ad2[i], Bd2[i])
    if not (all_finite(Ad) and all_finite(Bd)):
        raise ValueError("discretize overflowed float64: Ad or Bd is not finite (dt x A is too large: "
                         f"dt = {dt:g}, largest |entry| of A: {np.max(np.abs(A)):.3g})")
    return Ad, Bd


@njit
def next_states(Q, V, NU, dt, floating, QN, VN):
    """The semi-implicit Euler step (next_state) from each row i of Q, V (flat vectors) with the
    acceleration NU[i]: VN[i] = V[i] + dt NU[i], QN[i] = the configuration after dt at VN[i]. The
    pose H exp(dt v+^): the rotation as the quaternion product q (x) exp(dt w+ / 2) (the rotation
    R exp(dt w+^)), normalised and in q's hemisphere (QN[i, 3:7] . Q[i, 3:7] >= 0), the position p
    + R Vs u (Vs = I + a W + b W^2, W = (dt w+)^, u = dt v+_lin; a, b: _coefficients)."""
    nv = V.shape[1]
    R = np.empty((3, 3))
    for i in range(Q.shape[0]):
        for j in range(nv):
            VN[i, j] = V[i, j] + dt * NU[i, j]
        if not floating:
            for j in range(nv):
                QN[i, j] = Q[i, j] + dt * VN[i, j]
            continue
        for j in range(6, nv):
            QN[i, j + 1] = Q[i, j + 1] + dt * VN[i, j]
        u0, u1, u2 = dt * VN[i, 0], dt * VN[i, 1], dt * VN[i, 2]
        w0, w1, w2 = dt * VN[i, 3], dt * VN[i, 4], dt * VN[i, 5]
        th = math.sqrt(w0 * w0 + w1 * w1 + w2 * w2)
        _, a, b, _, _ = _coefficients(th)
        c0, c1, c2 = w1 * u2 - w2 * u1, w2 * u0 - w0 * u2, w0 * u1 - w1 * u0      # W u
        e0, e1, e2 = w1 * c2 - w2 * c1, w2 * c0 - w0 * c2, w0 * c1 - w1 * c0      # W^2 u
        d0, d1, d2 = u0 + a * c0 + b * e0, u1 + a * c1 + b * e1, u2 + a * c2 + b * e2
        quat_to_rot(Q[i, 3:7], R)
        for r in range(3):
            QN[i, r] = Q[i, r] + R[r, 0] * d0 + R[r, 1] * d1 + R[r, 2] * d2
        sh = 0.5 * _coefficients(0.5 * th)[0]                   # sin(th/2) / th
        hx, hy, hz, hw = sh * w0, sh * w1, sh * w2, math.cos(0.5 * th)
        x, y, z, w = Q[i, 3], Q[i, 4], Q[i, 5], Q[i, 6]
        nx = w * hx + hw * x + y * hz - z * hy                  # q (x) h
        ny = w * hy + hw * y + z * hx - x * hz
        nz = w * hz + hw * z + x * hy - y * hx
        nw = w * hw - x * hx - y * hy - z * hz
        nrm = math.sqrt(nx * nx + ny * ny + nz * nz + nw * nw)
        if nx * x + ny * y + nz * z + nw * w < 0.0:            # the point's hemisphere
            nrm = -nrm
        QN[i, 3], QN[i, 4], QN[i, 5], QN[i, 6] = nx / nrm, ny / nrm, nz / nrm, nw / nrm


def next_state(model: Model, state: State, nu_dot: ArrayLike, dt: float) -> State:
    """The state one step of dt after `state`, by the semi-implicit Euler step that Ad, Bd linearize:

        nu+ = nu + dt nu_dot,   H+ = H exp(dt v+^),   s+ = s + dt r+

    nu_dot: the acceleration at `state` (lin.nu_dot of the linearization there: FD(q, nu, tau),
    with contacts the constrained one). A state x = x_pt (+) z one step later is
    next_state(x_pt) (+) (Ad z + Bd w) to first order, (+) the perturbation of the README's
    Conventions (H exp(z_H^), s + z_s, nu + z_nu).

    The quaternion (x, y, z, w) of the next pose is the one of the two (q and -q give the same
    rotation) in the hemisphere of the state's own: q_next . q >= 0, whatever the sign of the
    state's w, so that q and q_next can be differenced or interpolated component by component.
    (The compiled step, next_states, is linearize_horizon's too.)"""
    dt = check_dt(dt)
    nu_dot = as_vector("nu_dot", nu_dot, model.nv)
    with np.errstate(all="ignore"):
        q, v = step_rows(model, state.q[None], state.v[None], kernel_array(nu_dot)[None], dt)
    step_error(state.v, nu_dot, dt, q[0], v[0])
    return State.from_vectors(model, q[0], v[0])


def step_rows(model: Model, Q: np.ndarray, V: np.ndarray, NU: np.ndarray, dt: float,
              QN: np.ndarray | None = None, VN: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """next_states on C-contiguous float64 rows (N, nq), (N, nv), (N, nv) into QN, VN (new arrays
    when None); returns (QN, VN)."""
    if QN is None:
        QN, VN = np.empty(Q.shape), np.empty(V.shape)
    next_states(Q, V, NU, dt, model.floating_base, QN, VN)
    return QN, VN


def step_error(v: np.ndarray, nu_dot: np.ndarray, dt: float, q_next: np.ndarray, v_next: np.ndarray) -> None:
    """Raise next_state's ValueError when the step overflowed (q_next or v_next not finite)."""
    for what, x in (("velocity", v_next), ("configuration", q_next)):
        if not np.all(np.isfinite(x)):
            raise ValueError(f"next_state overflowed float64: the {what} one step of {dt:g} s after the state "
                             f"(|nu| {np.max(np.abs(v)):.3g}, |nu_dot| {np.max(np.abs(nu_dot)):.3g})")
