# SPDX-License-Identifier: BSD-3-Clause
"""A controller that closes the loop on the node's linearization records alone (the closed-loop
demo, ``sva-linearizer demo --control``, and its tests).

Each record, at the measured state x_k with the torque tau_k the robot was running, gives the
affine, discrete model of docs/ros.md, "The model the record gives": under tau_k + dw the robot
steps to x_next (+) (Bd dw) (x_next: the record's predicted state, the drift), and a deviation z
from x_k would step to x_next (+) (Ad z + Bd dw). The simulator applies a command to the period
that follows the state it answers (it waits for it: a lockstep loop), so the controller chooses dw
to minimise e' P e + dw' R dw for the next state's error e = (x_next (-) x_ref) + Bd dw against the
reference one period ahead, P the solution of the discrete Riccati equation of (Ad, Bd, Q, R): a
one-step model-predictive controller with the infinite-horizon LQR cost-to-go. It sends
tau_k + dw.

Every part of the record enters: x_next (the drift), Ad (through P), Bd (the input's effect).
:data:`CORRUPTIONS` damage one part on purpose, to show that the loop fails without it.
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import solve_discrete_are

from sva_linearizer.spatial import quat_to_matrix, se3_log

from ..node.record import Record

#: Ways to damage a record before the controller uses it (the tests show each breaks the loop).
CORRUPTIONS = ("A_transposed", "B_transposed", "no_drift", "Bd_flipped")


def state_minus(q: np.ndarray, v: np.ndarray, q_ref: np.ndarray, v_ref: np.ndarray, floating_base: bool
                ) -> np.ndarray:
    """z with (q, v) = (q_ref, v_ref) (+) z (the record's perturbation: the pose's z_H = log(H_ref^-1 H),
    linear-angular; joints and velocities by difference)."""
    if not floating_base:
        return np.r_[q - q_ref, v - v_ref]
    R, R_ref = quat_to_matrix(q[3:7]), quat_to_matrix(q_ref[3:7])
    z_H = se3_log(R_ref.T @ R, R_ref.T @ (q[:3] - q_ref[:3]))
    return np.r_[z_H, q[7:] - q_ref[7:], v - v_ref]


def corrupt(rec: Record, how: str) -> Record:
    """The record with one part damaged (see CORRUPTIONS); the record itself is not changed."""
    if how not in CORRUPTIONS:
        raise ValueError(f"unknown corruption {how!r} (one of {', '.join(CORRUPTIONS)})")
    from dataclasses import replace

    if how == "A_transposed":
        return replace(rec, A=rec.A.T.copy(), Ad=rec.Ad.T.copy())
    if how == "B_transposed":
        return replace(rec, B=rec.B.T.copy(), Bd=rec.Bd.T.copy())
    if how == "no_drift":                   # as if the point were an equilibrium
        return replace(rec, nu_dot=np.zeros_like(rec.nu_dot), q_next=rec.q.copy(), v_next=rec.v.copy())
    return replace(rec, Bd=-rec.Bd)


class RecordLQR:
    """The controller of the module docstring. reference(t) -> (q_ref, v_ref) at time t (seconds,
    the records' clock); Q, R: the cost on z (2nv) and on dw (nw); refresh: solve the Riccati
    equation again every `refresh` records (it is where most of the time goes)."""

    def __init__(self, reference, Q: np.ndarray, R: np.ndarray, refresh: int = 1) -> None:
        self.reference, self.Q, self.R, self.refresh = reference, Q, R, max(1, int(refresh))
        self.P = None
        self.n = 0

    def command(self, rec: Record) -> np.ndarray:
        """The joint torques to apply from the next period on (nj)."""
        if rec.Ad is None or rec.q_next is None:
            raise ValueError("the controller needs the record's discrete part: set the node's dt parameter")
        floating = rec.description.floating_base
        if self.P is None or self.n % self.refresh == 0:
            self.P = solve_discrete_are(rec.Ad, rec.Bd, self.Q, self.R)
        self.n += 1
        q_ref, v_ref = self.reference(rec.stamp_ns * 1e-9 + rec.dt)
        e = state_minus(rec.q_next, rec.v_next, q_ref, v_ref, floating)
        Bd = rec.Bd
        dw = -np.linalg.solve(self.R + Bd.T @ self.P @ Bd, Bd.T @ self.P @ e)
        return rec.tau + dw[:rec.nj]
