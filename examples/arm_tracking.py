# SPDX-License-Identifier: BSD-3-Clause
"""Tracking a motion with a time-varying LQR built on ``linearize_batch``, in an independent simulator.

    python examples/arm_tracking.py [--seconds 2.0] [--plot errors.png]

What it does:
1. A reference motion of the UR5 (example-robot-data; without it, the bundled quadruped with its
   base welded to the world): every joint swings about a pose where gravity pulls hard,
   s_ref(t) = s_mid + a sin(2 pi t / T_p), with its rates and accelerations in closed form.
2. The feedforward torque along it from the inverse dynamics, tau_ref = ID(s_ref, r_ref, a_ref),
   taken at the middle of each control period (the torque is held over the period).
3. The discrete-time A and B at every knot in one call: ``sl.linearize_batch(model, Q, V, TAU,
   dt=DT)`` -> Ad (N, 2n, 2n), Bd (N, 2n, n), z = [s - s_ref, r - r_ref].
4. The time-varying LQR by the backward Riccati recursion
       K_k = (R + Bk' P_{k+1} Bk)^-1 Bk' P_{k+1} Ak,   P_k = Q + Ak' P_{k+1} (Ak - Bk K_k),
   from P_N = the terminal weight; tau_k = tau_ref_k - K_k z_k.
5. Simulates the arm in Pinocchio (its own forward dynamics, 10 substeps per control period) from
   a state off the reference, once with the feedforward alone and once with the TV-LQR.

It prints the tracking error over time for both, the cost beside the Riccati prediction z0' P_0 z0,
and exits 0 when the TV-LQR tracks as the linear model predicts (the error falls to 5% of its start,
the realized cost is within 10% of z0' P_0 z0, the simulated error trajectory is within 10% of the
linear prediction); 1 otherwise; 2 if Pinocchio is missing.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import sva_linearizer as sl
from sva_linearizer.robots import load_robot, robot_urdf_path

from plant import MISSING, Plant, pin, state_error

DT = 0.01            # control period (s)
SUBSTEPS = 10        # the simulator's steps per control period
PERIOD = 2.0         # period of the reference swing (s)


def pick_robot() -> tuple[str, np.ndarray, np.ndarray]:
    """(robot, s_mid, amplitude) of the swing."""
    try:
        robot_urdf_path("ur5")
        return "ur5", np.array([0.0, -1.0, 1.2, -0.8, 1.2, 0.0]), np.array([0.6, 0.3, 0.4, 0.5, 0.5, 0.6])
    except ValueError:              # example-robot-data is not installed
        return "quadruped", np.tile([0.2, 0.7, -1.2], 4), np.tile([0.2, 0.3, 0.4], 4)


def reference(t: np.ndarray, s_mid: np.ndarray, amp: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """s_ref, r_ref, a_ref at the times t, each (len(t), n)."""
    w = 2 * np.pi / PERIOD
    ph = w * t[:, None]
    return s_mid + amp * np.sin(ph), amp * w * np.cos(ph), -amp * w * w * np.sin(ph)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=2.0, help="length of the motion (default 2 s)")
    ap.add_argument("--plot", metavar="FILE", help="save the tracking error over time (needs matplotlib)")
    args = ap.parse_args(argv)
    if pin is None:
        print(MISSING, file=sys.stderr)
        return 2

    robot, s_mid, amp = pick_robot()
    model = load_robot(robot, floating_base=False)
    n = model.nj
    N = int(round(args.seconds / DT))
    t = np.arange(N + 1) * DT
    S, V, _ = reference(t, s_mid, amp)                                   # the knots, (N+1, n)
    Sm, Vm, Am = reference(t[:N] + DT / 2, s_mid, amp)                   # mid-period
    TAU = np.array([sl.extended_inverse_dynamics(model, sl.State.from_vectors(model, Sm[k], Vm[k]), Am[k])
                    for k in range(N)])
    print(f"robot    {robot}: fixed base, {n} joints; a {args.seconds:g} s swing of "
          f"+-{np.round(amp, 2)} rad about {np.round(s_mid, 2)}, {N} control periods of {DT} s")
    print(f"tau_ref  feedforward torque from the inverse dynamics, |tau_ref| up to "
          f"{np.max(np.abs(TAU)):.1f} N m")

    # -- Ad_k, Bd_k along the motion, one call
    Ad, Bd = sl.linearize_batch(model, S[:N], V[:N], TAU, dt=DT)       # (N, 2n, 2n), (N, 2n, n)

    # -- time-varying LQR: backward Riccati recursion
    Q = np.diag(np.r_[np.full(n, 100.0), np.full(n, 1.0)])
    R = np.eye(n) * 0.01
    P = [None] * (N + 1)
    K = np.empty((N, n, 2 * n))
    P[N] = 10 * Q
    for k in range(N - 1, -1, -1):
        A, B = Ad[k], Bd[k]
        K[k] = np.linalg.solve(R + B.T @ P[k + 1] @ B, B.T @ P[k + 1] @ A)
        P[k] = Q + A.T @ P[k + 1] @ (A - B @ K[k])
        P[k] = 0.5 * (P[k] + P[k].T)

    # -- the simulated arm starts off the reference, with and without the feedback
    plant = Plant(robot_urdf_path(robot), list(model.joint_names), floating_base=False,
                  gravity=tuple(model.gravity))
    rng = np.random.default_rng(1)
    dq0 = rng.uniform(-1.0, 1.0, n)
    dq0 *= 0.1 / np.max(np.abs(dq0))                                     # at most 0.1 rad per joint

    def run(feedback: bool) -> tuple[np.ndarray, np.ndarray, float, float]:
        """(|z_k| for k = 0..N, |z_k| predicted by the closed-loop linear model, cost, largest gap
        to the linear prediction / largest |z|)."""
        q, v = S[0] + dq0, V[0].copy()
        z = state_error(q, v, S[0], V[0], floating_base=False)
        z_lin = z.copy()
        errs, errs_lin = [np.linalg.norm(z)], [np.linalg.norm(z)]
        cost, gap, peak = 0.0, 0.0, np.linalg.norm(z)
        for k in range(N):
            dtau = -K[k] @ z if feedback else np.zeros(n)
            cost += z @ Q @ z + dtau @ R @ dtau
            q, v = plant.step(q, v, TAU[k] + dtau, DT, SUBSTEPS)
            z = state_error(q, v, S[k + 1], V[k + 1], floating_base=False)
            z_lin = (Ad[k] - Bd[k] @ K[k]) @ z_lin
            errs.append(np.linalg.norm(z))
            errs_lin.append(np.linalg.norm(z_lin))
            gap, peak = max(gap, np.linalg.norm(z - z_lin)), max(peak, np.linalg.norm(z))
        return np.array(errs), np.array(errs_lin), cost + z @ P[N] @ z, gap / peak

    e_ff, _, _, _ = run(feedback=False)
    e_fb, e_lin, cost, gap = run(feedback=True)
    z0 = np.r_[dq0, np.zeros(n)]
    cost_pred = z0 @ P[0] @ z0
    print(f"\n{'t (s)':>6} {'|z| feedforward only':>21} {'|z| TV-LQR':>11}")
    for k in range(0, N + 1, max(1, N // 10)):
        print(f"{t[k]:6.2f} {e_ff[k]:21.3e} {e_fb[k]:11.3e}")
    decay = e_fb[-1] / e_fb[0]
    cost_err = abs(cost - cost_pred) / cost_pred
    print(f"\ncost     simulated sum z'Qz + dtau'R dtau + z_N' P_N z_N = {cost:.4f}, Riccati's z0' P_0 z0 = "
          f"{cost_pred:.4f} ({100 * cost_err:.2f}% apart)")
    print(f"error    TV-LQR |z(T)| / |z(0)| = {decay:.2e} (feedforward alone: {e_ff[-1] / e_ff[0]:.2e}); "
          f"largest gap to the linear model's prediction: {100 * gap:.2f}% of the largest |z|")
    if args.plot:
        from figures import save_time_plot

        save_time_plot(args.plot, t, {"feedforward alone": e_ff, "TV-LQR, simulated (Pinocchio)": e_fb,
                                      "TV-LQR, linear model": e_lin},
                       f"{robot}: tracking error z = [s - s_ref, r - r_ref], TV-LQR from linearize_batch")
    ok = decay < 0.05 and cost_err < 0.10 and gap < 0.10
    print("result   " + ("tracks: the error decays along the motion as the linear model predicts" if ok else
                         "FAILED: the loop does not behave as the linearization predicts"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
