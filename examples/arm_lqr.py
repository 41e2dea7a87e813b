# SPDX-License-Identifier: BSD-3-Clause
"""LQR on a robot arm held away from its equilibrium, closed around an independent simulator.

    python examples/arm_lqr.py [--seconds 2.0] [--plot errors.png]

What it does:
1. Loads the UR5 (example-robot-data; without it, the bundled quadruped with its base welded to the
   world: four 3-joint legs hanging as arms) and picks a pose where gravity pulls hard.
2. Holds the pose with the gravity-compensating torque tau0 = ID(s0, 0, 0): the extended inverse
   dynamics at zero velocity and acceleration. That torque makes (s0, 0) an equilibrium, but not a
   stable one in general, and nothing damps it.
3. Linearizes the discrete-time dynamics there, z_{k+1} = Ad z_k + Bd dtau_k, with
   ``sl.linearize(model, state, tau0, dt=DT)`` (z = [s - s0, r], the semi-implicit Euler step of
   length DT), and solves the discrete Riccati equation (scipy) for the LQR gain K:
   tau = tau0 - K z minimises sum z' Q z + dtau' R dtau, and the optimal cost from z0 is z0' P z0.
4. Simulates the arm in Pinocchio (its own forward dynamics, 10 substeps per control period: the
   controller does not know the plant's integrator) from a perturbed state, with the torques held
   over each control period as a real controller would.

It prints the error over time beside what the linear model predicts, and the cost the simulator
incurred beside z0' P z0. Exit code 0 when the loop is stable and behaves as the model says (the
error decays to 1% of its start, the realized cost is within 10% of z0' P z0, the simulated error
trajectory is within 10% of the linear prediction); 1 otherwise; 2 if Pinocchio is missing.
A wrong sign or a transposed block in A or B breaks the last two checks even where the gain still
happens to stabilise the arm.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
from scipy.linalg import solve_discrete_are

import sva_linearizer as sl
from sva_linearizer.robots import load_robot, robot_urdf_path

from plant import MISSING, Plant, pin, state_error

DT = 0.01            # control period (s)
SUBSTEPS = 10        # the simulator's steps per control period


def pick_robot() -> tuple[str, np.ndarray]:
    """The UR5 and a pose with the upper arm and forearm near horizontal (large gravity torques);
    else the bundled quadruped, base fixed, legs bent."""
    try:
        robot_urdf_path("ur5")
        return "ur5", np.array([0.3, -0.9, 1.2, -0.8, 1.2, 0.4])
    except ValueError:              # example-robot-data is not installed
        return "quadruped", np.tile([0.3, 0.7, -1.2], 4)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=2.0, help="simulated time (default 2 s)")
    ap.add_argument("--plot", metavar="FILE",
                    help="save |z| over time, simulated and predicted (needs matplotlib)")
    args = ap.parse_args(argv)
    if pin is None:
        print(MISSING, file=sys.stderr)
        return 2

    robot, s0 = pick_robot()
    model = load_robot(robot, floating_base=False)
    n = model.nj
    print(f"robot    {robot}: fixed base, {n} joints {list(model.joint_names)}")

    # -- the operating point: hold s0 still with the torque that cancels gravity
    state0 = sl.State.from_vectors(model, s0, np.zeros(n))
    tau0 = sl.extended_inverse_dynamics(model, state0, np.zeros(n))      # M*0 + h(s0, 0) = gravity
    print(f"tau0     gravity-compensating torque {np.round(tau0, 2)} N m")

    # -- discrete-time A and B at the operating point, and the LQR gain
    lin = sl.linearize(model, state0, tau0, dt=DT)
    Ad, Bd = lin.Ad, lin.Bd                                              # (2n, 2n), (2n, n)
    Q = np.diag(np.r_[np.full(n, 100.0), np.full(n, 1.0)])             # weight angles over rates
    R = np.eye(n) * 0.01
    P = solve_discrete_are(Ad, Bd, Q, R)
    K = np.linalg.solve(R + Bd.T @ P @ Bd, Bd.T @ P @ Ad)               # dtau = -K z
    Acl = Ad - Bd @ K
    rho_open = max(abs(np.linalg.eigvals(Ad)))
    rho_closed = max(abs(np.linalg.eigvals(Acl)))
    print(f"open loop    spectral radius of Ad      {rho_open:.5f}  "
          f"({'unstable' if rho_open > 1 + 1e-6 else 'undamped'}: nothing damps the held pose)")
    print(f"closed loop  spectral radius of Ad-Bd K {rho_closed:.5f}")

    # -- the simulated arm starts away from s0, at rest
    plant = Plant(robot_urdf_path(robot), list(model.joint_names), floating_base=False,
                  gravity=tuple(model.gravity))
    rng = np.random.default_rng(0)
    dq0 = rng.uniform(-1.0, 1.0, n)
    dq0 *= 0.05 / np.max(np.abs(dq0))                                    # at most 0.05 rad per joint
    q, v = s0 + dq0, np.zeros(n)
    z = state_error(q, v, s0, np.zeros(n), floating_base=False)
    z_lin = z.copy()                                                      # what the linear model predicts
    z0 = z.copy()
    steps = int(round(args.seconds / DT))
    cost = 0.0
    worst_gap = 0.0
    peak = np.linalg.norm(z0)
    hist_sim, hist_lin = [np.linalg.norm(z)], [np.linalg.norm(z_lin)]
    print(f"\n{'t (s)':>6} {'|s-s0| (rad)':>13} {'|r| (rad/s)':>12} {'|dtau| (N m)':>13} "
          f"{'linear model |z|':>17} {'simulated |z|':>14}")
    for k in range(steps + 1):
        dtau = -K @ z
        if k % max(1, steps // 10) == 0:
            print(f"{k * DT:6.2f} {np.linalg.norm(z[:n]):13.2e} {np.linalg.norm(z[n:]):12.2e} "
                  f"{np.linalg.norm(dtau):13.3f} {np.linalg.norm(z_lin):17.3e} {np.linalg.norm(z):14.3e}")
        if k == steps:
            break
        cost += z @ Q @ z + dtau @ R @ dtau
        q, v = plant.step(q, v, tau0 + dtau, DT, SUBSTEPS)
        z = state_error(q, v, s0, np.zeros(n), floating_base=False)
        z_lin = Acl @ z_lin
        worst_gap = max(worst_gap, np.linalg.norm(z - z_lin))
        peak = max(peak, np.linalg.norm(z))
        hist_sim.append(np.linalg.norm(z))
        hist_lin.append(np.linalg.norm(z_lin))
    cost_pred = z0 @ P @ z0
    decay = np.linalg.norm(z) / np.linalg.norm(z0)
    cost_err = abs(cost - cost_pred) / cost_pred
    gap = worst_gap / peak
    print(f"\ncost     simulated sum z'Qz + dtau'R dtau = {cost:.4f}, LQR's z0' P z0 = {cost_pred:.4f} "
          f"({100 * cost_err:.2f}% apart; the rest of the horizon adds {z @ P @ z:.2e})")
    print(f"error    |z(T)| / |z(0)| = {decay:.2e}; largest gap between the simulated and the linear "
          f"model's error trajectory: {100 * gap:.2f}% of the largest |z|")
    if args.plot:
        from figures import save_time_plot

        save_time_plot(args.plot, np.arange(len(hist_sim)) * DT,
                       {"simulated (Pinocchio)": np.array(hist_sim), "linear model": np.array(hist_lin)},
                       f"{robot}: LQR from sl.linearize(..., dt={DT}), error z = [s - s0, r]")
    ok = decay < 0.01 and cost_err < 0.10 and gap < 0.10
    print("result   " + ("stable: the error decays as the linear model predicts" if ok else
                         "FAILED: the loop does not behave as the linearization predicts"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
