# SPDX-License-Identifier: BSD-3-Clause
"""The tasks of ``sva-linearizer demo --control --horizon N`` (docs/ros.md, "An MPC on the horizon").

- **The arm tracks a fast reference**: every joint swings by :data:`FAST_SWING` rad at
  :data:`FAST_HZ` around where it started (today's ``demo --control`` reference, four times faster).
  The one-step controller (control.RecordLQR) misses its own bound there (demo.arm_bound); the
  horizon MPC (mpc.HorizonMPC) must stay within :func:`mpc_arm_bound` and at half the one-step's
  error at most.
- **The quadruped shifts its weight and lifts a foot**: standing on its four feet, it moves its
  base so that its centre of mass lies inside the triangle of the three other feet
  (:data:`SHIFT`), lifts :data:`LIFT_FOOT` for :data:`LIFT` (its height following a sin^2 bump of
  :data:`FOOT_HEIGHT`), puts it down where it stood, and moves its base back (:data:`SHIFT_BACK`).
  The contact schedule (the foot inactive while lifted) is the plant's and the knots'. Its bounds:
  :data:`QUADRUPED_BOUNDS`.

The references are kinematic plans, made here with the package's kinematics (frame placements and
Jacobians for the legs' inverse kinematics); the controller's dynamics come from the node alone.
"""
from __future__ import annotations

import numpy as np

import sva_linearizer as sl

#: The fast arm task: amplitude (rad) and frequency (Hz) of every joint's swing.
FAST_SWING, FAST_HZ = 0.3, 2.0
#: The plant's substeps per period (sim.run_sim_control integrates each period in this many steps).
PLANT_SUBSTEPS = 10


def mpc_arm_bound(rate: float, swing: float = FAST_SWING, hz: float = FAST_HZ,
                  substeps: int = PLANT_SUBSTEPS) -> float:
    """The horizon MPC's bound on the arm's largest joint error (rad), after the first second.

    The node's model of a period is one semi-implicit Euler step (s+ = s + dt r + dt^2 a); the
    plant takes n substeps of it (s+ = s + dt r + (n + 1)/(2n) dt^2 a under the same torque), so
    each period the position lands rho dt^2 a short of the prediction, rho = (n - 1)/(2n) = 0.45.
    With that model otherwise exact (a plant that steps as the node does is tracked to 0.000 mrad),
    a controller that removes the measured error each period (deadbeat) obeys
    e_{k+1} = rho (e_k - e_{k-1}) - rho dt^2 a_ref: a sinusoid of acceleration amplitude
    swing (2 pi hz)^2 leaves an error of rho dt^2 swing (2 pi hz)^2 / |1 - rho (1 - e^{-i w dt})|
    (about rho dt^2 swing w^2 at w dt << 1). The bound is twice this: the MPC is not quite deadbeat
    (its finite weight on velocities), takes one SQP step per period, and the arm's joints are
    coupled and its acceleration changes within a period."""
    dt = 1.0 / rate
    w = 2 * np.pi * hz
    rho = (substeps - 1) / (2 * substeps)
    gain = rho / abs(1 - rho * (1 - np.exp(-1j * w * dt)))
    return 2.0 * gain * dt * dt * swing * w * w


def arm_reference(q0: np.ndarray, swing: float, hz: float, dt: float | None = None):
    """reference(t) -> (q_ref, v_ref): q0 + swing sin(2 pi hz t) on every joint. v_ref: the exact
    derivative (dt None), or the backward difference over one period (q_ref(t) - q_ref(t - dt)) / dt,
    the velocity with which the node's semi-implicit step (s+ = s + dt r+) lands on q_ref(t): a
    reference the discrete model can follow exactly (the MPC's)."""
    w = 2 * np.pi * hz
    ones = np.ones_like(q0)

    def reference(t):
        q = q0 + swing * np.sin(w * t)
        if dt is None:
            return q, swing * w * np.cos(w * t) * ones
        return q, (np.sin(w * t) - np.sin(w * (t - dt))) * swing / dt * ones

    return reference


# ------------------------------------------------------------------ the quadruped
#: The foot lifted, when (s, into the loop), how high (m); the weight shift's span and its return's
#: (s), and how far into the support triangle of the three other feet the centre of mass moves (0:
#: where it stands, 1: the triangle's centroid).
LIFT_FOOT = "FL_FOOT"
SHIFT = (0.1, 0.6)
LIFT = (0.8, 1.3)
SHIFT_BACK = (1.4, 1.9)
FOOT_HEIGHT = 0.04
SHIFT_FRACTION = 0.5
#: The quadruped task's bounds (docs/ros.md): the base's distance from its planned path and its
#: tilt, at every period; the lifted foot at least this high at the top of its swing and at most
#: this far from where it stood once down; the plant's normal force on every foot in contact stays
#: positive (the weight really shifted: the plant's contacts are bilateral, a foot could pull).
QUADRUPED_BOUNDS = {"base_m": 0.002, "tilt_rad": 0.01, "lift_min_m": 0.03, "touchdown_m": 0.002,
                    "normal_force_min_n": 0.0}


def com_xy(model, q: np.ndarray) -> np.ndarray:
    """The centre of mass's horizontal position for a level base (from the base's gravity wrench)."""
    st = sl.State.from_vectors(model, q, np.zeros(model.nv))
    h = sl.extended_inverse_dynamics(model, st, np.zeros(model.nv))
    return np.array([q[0] - h[4] / h[2], q[1] + h[3] / h[2]])


def feet_ik(model, q: np.ndarray, feet, targets, iterations: int = 30) -> np.ndarray:
    """q with its joints moved so that each foot's point is at its target (world), the base fixed."""
    q = q.copy()
    for _ in range(iterations):
        st = sl.State.from_vectors(model, q, np.zeros(model.nv))
        err, J = [], []
        for f, target in zip(feet, targets):
            R, p = sl.frame_placement(model, st, f)
            err.append(target - p)
            J.append(R @ sl.frame_jacobian(model, st, f, reference="local")[:3, 6:])
        e = np.concatenate(err)
        if np.max(np.abs(e)) < 1e-12:
            break
        q[7:] += np.linalg.lstsq(np.vstack(J), e, rcond=None)[0]
    return q


def _smooth(x: float) -> float:
    """0 -> 1 with zero slope at both ends, x in [0, 1]."""
    x = min(max(x, 0.0), 1.0)
    return 0.5 - 0.5 * np.cos(np.pi * x)


class QuadrupedPlan:
    """The weight shift and the lifted foot as a reference and a contact schedule, sampled every
    period (dt) from t = 0 to ``seconds``: reference(t) -> (q_ref, v_ref) (the base level, velocities
    the backward differences over a period, as in arm_reference), schedule(t) -> active per foot."""

    def __init__(self, model, q0: np.ndarray, feet, dt: float, seconds: float) -> None:
        self.model, self.feet, self.dt = model, list(feet), float(dt)
        self.lift_index = self.feet.index(LIFT_FOOT)
        st = sl.State.from_vectors(model, q0, np.zeros(model.nv))
        self.anchors = np.array([sl.frame_placement(model, st, f)[1] for f in self.feet])
        others = [a for i, a in enumerate(self.anchors) if i != self.lift_index]
        target = com_xy(model, q0) + SHIFT_FRACTION * (np.mean(others, axis=0)[:2] - com_xy(model, q0))
        shift = np.zeros(3)
        for _ in range(4):                  # the base offset that puts the centre of mass on target
            q = q0.copy()
            q[:3] += shift
            q = feet_ik(model, q, self.feet, self.anchors)
            shift[:2] += target - com_xy(model, q)
        self.shift, self.com_target = shift, target
        n = int(np.ceil(seconds / self.dt)) + 2
        Q = np.empty((n, model.nq))
        q = q0.copy()
        for j in range(n):
            t = j * self.dt
            q = q.copy()
            q[:3] = q0[:3] + shift * (_smooth((t - SHIFT[0]) / (SHIFT[1] - SHIFT[0]))
                                      - _smooth((t - SHIFT_BACK[0]) / (SHIFT_BACK[1] - SHIFT_BACK[0])))
            targets = self.anchors.copy()
            targets[self.lift_index, 2] += FOOT_HEIGHT * self.foot_lift(t)
            Q[j] = q = feet_ik(model, q, self.feet, targets)
        V = np.zeros((n, model.nv))
        V[1:, :3] = np.diff(Q[:, :3], axis=0) / self.dt        # the base level: body = world axes
        V[1:, 6:] = np.diff(Q[:, 7:], axis=0) / self.dt
        self.Q, self.V = Q, V

    @staticmethod
    def foot_lift(t: float) -> float:
        """The lifted foot's planned height over FOOT_HEIGHT: sin^2 over the lift, else 0."""
        if not LIFT[0] <= t < LIFT[1]:
            return 0.0
        return float(np.sin(np.pi * (t - LIFT[0]) / (LIFT[1] - LIFT[0])) ** 2)

    def reference(self, t: float):
        j = min(max(int(round(t / self.dt)), 0), len(self.Q) - 1)
        return self.Q[j], self.V[j]

    def schedule(self, t: float) -> np.ndarray:
        """The feet in contact during the period that starts at t (lift_schedule's rule)."""
        return lift_schedule(self.feet, LIFT_FOOT, LIFT, self.dt)(t)


def lift_schedule(feet, foot: str, span: tuple[float, float], dt: float):
    """schedule(t) -> active (bool per foot): ``foot`` is off the ground during the periods k
    (t = k dt) with round(span[0] / dt) <= k < round(span[1] / dt); the simulator and the MPC's
    knots both follow this rule."""
    i = list(feet).index(foot)
    k0, k1 = round(span[0] / dt), round(span[1] / dt)

    def schedule(t: float) -> np.ndarray:
        on = np.ones(len(feet), dtype=bool)
        on[i] = not k0 <= round(t / dt) < k1
        return on

    return schedule
