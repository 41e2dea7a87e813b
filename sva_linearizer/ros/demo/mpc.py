# SPDX-License-Identifier: BSD-3-Clause
"""A model-predictive controller on the node's horizon (``sva-linearizer demo --control --horizon N``).

Each period the controller holds a predicted trajectory: N knots x_0 .. x_{N-1} (states) with
inputs u_0 .. u_{N-1} (joint torques), one loop period dt apart, and a contact schedule (which
contacts act at each knot). Knot 0 is the measured state. It sends the knots to the node as one
horizon request and gets back each knot's record: x_next_k (the state one step of dt after knot k
under u_k), Ad_k and Bd_k, such that a knot moved by z and an input moved by du step to

    x_next_k (+) (Ad_k z + Bd_k du)          (docs/ros.md, "The model the record gives")

With the defects d_k = x_next_k (-) x_{k+1} (zero along a trajectory that is dynamically consistent;
for the last knot, x_N is x_next_{N-1} itself and d = 0), a deviation z_k = x_k' (-) x_k of a new
trajectory from the knots obeys z_{k+1} = Ad_k z_k + Bd_k du_k + d_k to first order, with z_0 = 0
(the measured state cannot move). The controller takes one SQP (iLQR) step on

    sum_{k=1..N-1} |x_k' (-) x_ref(t_k)|^2_Q  +  |x_N' (-) x_ref(t_N)|^2_P  +  sum_{k=0..N-1} |u_k' - u_{k-1}'|^2_R

with u_{-1}' the torque the robot runs now (the record's tau), e_k = x_k (-) x_ref(t_k) linearized
as e_k + z_k, and P the discrete Riccati solution of the last knot's (Ad, Bd, Q, R): with N = 1
this is RecordLQR's program exactly. One Riccati backward pass along the knots, on the state
[z_k; du_{k-1}] (the torque's change couples neighbouring knots), gives du_k = k_k + K_k [z_k;
du_{k-1}]; a forward pass x_{k+1}' = x_next_k (+) (Ad_k z_k + Bd_k du_k) the new trajectory. It
sends u_0 + du_0 (z_0 = 0: the feed-forward k_0), and keeps x_1' .. x_N', u_1' .. u_{N-1}' (the
last input repeated) as the next period's knots: the warm start, shifted by one period, whose
knot 0 the next measurement replaces.

Where R is negligible (the demo's cost), the pass is all but invariant under Bd_k -> -Bd_k with
du_k -> -du_k: a sign flipped on the Bd of a knot between the first and the last leaves u_0 as it
was and spoils only that knot's stored input, which the next step repairs as a defect. On knot 0 it
turns the command around; on the last knot, whose stored input is also its own warm start one
period on, the spoiled input feeds back and grows until the loop fails. :data:`HORIZON_CORRUPTIONS`
damage the answer (or the request) on purpose.
"""
from __future__ import annotations

from copy import copy

import numpy as np
from scipy.linalg import solve_discrete_are

from sva_linearizer.spatial import matrix_to_quat, quat_to_matrix, se3_exp

from .control import state_minus

#: Ways to damage the horizon (the tests show each breaks the loop): the answer's knots in reverse
#: order; knot 0's Bd with its sign flipped (the knot whose input is applied; see the module
#: docstring for the others); the schedule ignored (every contact active at every knot of the
#: request).
HORIZON_CORRUPTIONS = ("knots_reversed", "Bd_flipped", "schedule_ignored")


def state_plus(q: np.ndarray, v: np.ndarray, z: np.ndarray, floating_base: bool) -> tuple[np.ndarray, np.ndarray]:
    """(q, v) (+) z: H exp(z_H^), s + z_s, v + z_v, r + z_r; the quaternion kept in q's hemisphere."""
    nv = v.shape[0]
    if not floating_base:
        return q + z[:nv], v + z[nv:]
    R = quat_to_matrix(q[3:7])
    dR, dp = se3_exp(z[:6])
    quat = matrix_to_quat(R @ dR)
    if quat @ q[3:7] < 0.0:
        quat = -quat
    return np.r_[q[:3] + R @ dp, quat, q[7:] + z[6:nv]], v + z[nv:]


def corrupt_knots(knots: list, how: str | None) -> list:
    """The answer's knot records as a corruption leaves them (knots_reversed, Bd_flipped)."""
    if how == "knots_reversed":
        return knots[::-1]
    if how == "Bd_flipped":
        first = copy(knots[0])
        first.Bd = -first.Bd
        return [first] + list(knots[1:])
    return knots


class HorizonMPC:
    """The controller of the module docstring.

    N knots dt apart; reference(t) -> (q_ref, v_ref); Q (2nv x 2nv), R (nj x nj); schedule(t) ->
    active (C,) bools per contact of the description (None: no contacts). ``knots(q, v, t)`` gives
    the request's knots for a measured state at time t; ``step(records, tau_running)`` the torque
    to send from the answer's N records (each with Ad, Bd, q_next, v_next)."""

    def __init__(self, N: int, dt: float, reference, Q: np.ndarray, R: np.ndarray, floating_base: bool,
                 schedule=None) -> None:
        if N < 1:
            raise ValueError(f"the horizon needs at least 1 knot, got {N}")
        self.N, self.dt, self.reference, self.Q, self.R = int(N), float(dt), reference, Q, R
        self.floating_base, self.schedule = floating_base, schedule
        self.X = None          # (q, v) per knot: the warm start
        self.U = None          # (N, nj)
        self.t0 = None

    # ------------------------------------------------------------------ the request
    def knots(self, q: np.ndarray, v: np.ndarray, t: float, tau: np.ndarray):
        """-> (Q (N, nq), V (N, nv), T (N, nj), active (N, C) or None) for the measured state (q, v)
        at time t; tau: the torque running now (the first guess, before any solution)."""
        if self.X is None:
            self.X = [(q.copy(), v.copy()) for _ in range(self.N)]
            self.U = np.tile(tau, (self.N, 1))
        self.X[0] = (q.copy(), v.copy())
        self.t0 = t
        Qk = np.stack([x[0] for x in self.X])
        Vk = np.stack([x[1] for x in self.X])
        active = None
        if self.schedule is not None:
            active = np.stack([self.schedule(t + i * self.dt) for i in range(self.N)]).astype(float)
        return Qk, Vk, self.U.copy(), active

    # ------------------------------------------------------------------ the step
    def step(self, records: list, tau_running: np.ndarray) -> np.ndarray:
        """One Riccati step along the knots' records (module docstring) -> u_0 + du_0; the solution
        is kept, shifted by one period, as the next request's warm start. tau_running: the torque
        the robot runs now (u_{-1} of the rate cost)."""
        N, fb, dt = self.N, self.floating_base, self.dt
        if len(records) != N:
            raise ValueError(f"the answer holds {len(records)} knots, the request {N}")
        for r in records:
            if r.Ad is None or r.Bd is None or r.q_next is None:
                raise ValueError("the controller needs the knots' discrete part (Ad, Bd, q_next, v_next): dt > 0")
        nu = self.U.shape[1]
        Ad = [r.Ad for r in records]
        Bd = [r.Bd[:, :nu] for r in records]
        nx = Ad[0].shape[0]
        nxt = [(r.q_next, r.v_next) for r in records]
        X = self.X + [nxt[-1]]                           # x_N: the last knot's prediction
        refs = [self.reference(self.t0 + i * dt) for i in range(N + 1)]
        e = [state_minus(X[i][0], X[i][1], refs[i][0], refs[i][1], fb) for i in range(N + 1)]
        d = [state_minus(nxt[i][0], nxt[i][1], X[i + 1][0], X[i + 1][1], fb) for i in range(N - 1)]
        d.append(np.zeros(nx))
        c = np.diff(np.vstack([tau_running, self.U]), axis=0)     # u_k - u_{k-1} of the warm start
        P = self.terminal(Ad[-1], Bd[-1])
        # the value function of y = [z; p] (p = du_{k-1}): 1/2 y' S y + s' y
        ny = nx + nu
        S = np.zeros((ny, ny))
        S[:nx, :nx] = P
        s = np.zeros(ny)
        s[:nx] = P @ e[N]
        Rw = self.R
        K, k = [None] * N, [None] * N
        for i in range(N - 1, -1, -1):
            A, B = Ad[i], Bd[i]
            Szz, Szp, Spp = S[:nx, :nx], S[:nx, nx:], S[nx:, nx:]
            sz, sp = s[:nx], s[nx:]
            # y+ = F y + G du + f: F = [[A, 0], [0, 0]], G = [B; I], f = [d; 0]
            SG = np.vstack([Szz @ B + Szp, Szp.T @ B + Spp])          # S G (ny x nu)
            g = np.r_[Szz @ d[i] + sz, Szp.T @ d[i] + sp]               # S f + s
            Quu = Rw + B.T @ SG[:nx] + SG[nx:]
            Qux = np.hstack([SG[:nx].T @ A, -Rw])                       # G' S F and the rate's -R
            qu = Rw @ c[i] + B.T @ g[:nx] + g[nx:]
            L = np.linalg.cholesky(0.5 * (Quu + Quu.T))
            K[i] = -np.linalg.solve(L.T, np.linalg.solve(L, Qux))
            k[i] = -np.linalg.solve(L.T, np.linalg.solve(L, qu))
            if i == 0:
                break
            Qxx = np.zeros((ny, ny))
            Qxx[:nx, :nx] = self.Q + A.T @ Szz @ A
            Qxx[nx:, nx:] = Rw
            qx = np.r_[self.Q @ e[i] + A.T @ g[:nx], -Rw @ c[i]]
            S = Qxx + Qux.T @ K[i]
            S = 0.5 * (S + S.T)
            s = qx + Qux.T @ k[i]
        # forward pass: the new trajectory from the measured state (z_0 = 0, p_0 = 0)
        newX, newU = [X[0]], np.empty_like(self.U)
        y = np.zeros(ny)
        for i in range(N):
            du = k[i] + K[i] @ y
            newU[i] = self.U[i] + du
            x1 = state_plus(nxt[i][0], nxt[i][1], Ad[i] @ y[:nx] + Bd[i] @ du, fb)
            newX.append(x1)
            if i + 1 < N:
                y = np.r_[state_minus(x1[0], x1[1], X[i + 1][0], X[i + 1][1], fb), du]
        u0 = newU[0].copy()
        # the warm start, one period on: x_1' .. x_N', u_1' .. u_{N-1}', u_{N-1}'
        self.X = newX[1:N + 1]
        self.U = np.vstack([newU[1:], newU[-1:]])
        return u0

    def terminal(self, Ad: np.ndarray, Bd: np.ndarray) -> np.ndarray:
        """P: the discrete Riccati solution of (Ad, Bd, Q, R) at the last knot (RecordLQR's)."""
        try:
            return solve_discrete_are(Ad, Bd, self.Q, self.R)
        except (ValueError, np.linalg.LinAlgError):
            return self.Q
