# SPDX-License-Identifier: BSD-3-Clause
"""A quadruped standing on four rigid point contacts, pushed, brought back by an LQR on the
contact linearization; simulated with contacts by an independent simulator.

    python examples/quadruped_balance.py [--seconds 1.5] [--plot errors.png]

What it does:
1. Stands Solo-12 (example-robot-data; without it, the bundled 12-joint quadruped) on bent legs
   with the base level and the feet at z = 0, and finds the joint torques tau0 that hold it still:
   with nu_dot = 0, M nu_dot + h = S tau + Jc' f splits into the base rows (six equations for the
   twelve foot forces f: the least-norm solution) and the joint rows (tau0 = h_j - Jc_j' f).
2. Linearizes the constrained dynamics there: ``sl.linearize(model, state, tau0, contacts=feet,
   dt=DT)`` gives Ad (36 x 36) and Bd (36 x 12) of the semi-implicit Euler step with the feet as
   world-aligned point contacts (KKT solve: the contact forces respond to every perturbation).
3. Designs an LQR, not on all 36 directions of z = [z_H, z_s, z_v, z_r] but on the 12 that the
   contacts allow (next paragraph).
4. Pushes the robot (a base twist, with the joint rates that keep the feet still: what an impulse
   on a robot with rigid contacts produces) and simulates it in Pinocchio (pin.constraintDynamics
   with the same four point contacts, Baumgarte-corrected, 10 substeps per control period).

The uncontrollable directions, and what is done about them. With four feet held (12 constraint rows
Jc), a perturbation z either respects the contacts (Jc z_q = 0 and Jc z_nu = 0: the feet do not
move) or it does not. The second kind, 24 directions (the feet displaced or sliding), cannot be
changed by the joint torques at all: the constraint forces, not the motors, act on them (in Ad they
are the constraint's drift, eigenvalues at 1 without a corrector, the Baumgarte corrector's poles
with one). The Riccati equation on all of z has nothing to work with there: without a corrector
scipy's solver finds no stabilising solution ("eigenvalues too close to the unit circle"); with one
it solves, but its cost then weighs the corrector's made-up dynamics. And a real robot never is in
those states: its feet stay put. So the controller works in a constraint-consistent basis: N, an
orthonormal basis of the null space of Jc (18 x 6: the base can move six ways with the feet fixed,
the legs follow), T = diag(N, N), xi = T' z. The script checks that T spans an invariant subspace of
Ad holding Bd (then T' Ad T, T' Bd are exactly the dynamics on it) and that (T' Ad T, T' Bd) is
controllable, designs the LQR there, and feeds back dtau = -K T' z: the measured z is projected onto
the contact-consistent directions (what the simulator's small constraint drift adds is discarded). A
finite-horizon linear MPC on the full z would be the other choice; it needs the same care
(constraints on, or costs off, the drift directions), and an LQR on the reduced model is its
infinite-horizon, unconstrained limit.

Exit code 0 when the model is consistent with the contacts (the checks above) and the push is
rejected as the linear model predicts (the error decays to 1% of its start, the realized cost is
within 10% of xi0' P xi0, the simulated trajectory is within 10% of the linear prediction, every
foot keeps pushing on the ground); 1 otherwise; 2 without Pinocchio.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
from scipy.linalg import block_diag, null_space, solve_discrete_are

import sva_linearizer as sl
from sva_linearizer.robots import load_robot, robot_urdf_path

from plant import MISSING, Plant, pin, state_error

DT = 0.01                    # control period (s)
SUBSTEPS = 10                # the simulator's steps per control period
BAUMGARTE = (100.0, 20.0)    # (Kp, Kd) of the contact corrector, the same in the model and the simulator


def pick_robot() -> tuple[str, list[str]]:
    """Solo-12 and its feet; the bundled quadruped when example-robot-data is not installed."""
    try:
        robot_urdf_path("solo12")
        return "solo12", ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
    except ValueError:
        return "quadruped", ["LF_foot", "RF_foot", "LH_foot", "RH_foot"]


def standing(model: sl.Model, feet: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q0, tau0, f0): legs bent (hip flexion +-0.8 rad, knee -+1.6 rad, front and hind legs
    mirrored), base level with the feet at z = 0; the torques and least-norm foot forces (world
    axes, on the robot) that hold it still."""
    s = np.zeros(model.nj)
    for j, name in enumerate(model.joint_names):
        leg, joint = name.split("_", 1)
        sign = 1.0 if leg in ("FL", "FR", "LF", "RF") else -1.0
        s[j] = {"HFE": 0.8 * sign, "KFE": -1.6 * sign}.get(joint, 0.0)
    quat = [0.0, 0.0, 0.0, 1.0]
    st = sl.State.from_vectors(model, np.r_[0.0, 0.0, 0.0, quat, s], np.zeros(model.nv))
    height = -np.mean([sl.frame_placement(model, st, f)[1][2] for f in feet])
    q0 = np.r_[0.0, 0.0, height, quat, s]
    st = sl.State.from_vectors(model, q0, np.zeros(model.nv))
    h = sl.extended_inverse_dynamics(model, st, np.zeros(model.nv))           # gravity, [base; joints]
    Jc = np.vstack([sl.frame_jacobian(model, st, f, reference="world_aligned")[:3] for f in feet])
    f0 = np.linalg.lstsq(Jc[:, :6].T, h[:6], rcond=None)[0]                   # base rows: h_b = Jc_b' f
    tau0 = h[6:] - Jc[:, 6:].T @ f0                                           # joint rows
    return q0, tau0, f0


def controllability_rank(A: np.ndarray, B: np.ndarray, tol: float = 1e-8) -> int:
    """Dimension of the span of B, AB, A^2 B, ...: each new direction is kept when what is left of
    it after projecting out the directions found so far exceeds tol times its length."""
    basis = np.zeros((A.shape[0], 0))
    block = B
    while block.shape[1]:
        new = block - basis @ (basis.T @ block)
        u, sv, _ = np.linalg.svd(new, full_matrices=False)
        scale = max(np.linalg.norm(block, axis=0).max(), 1e-300)
        block = u[:, sv > tol * scale]
        basis = np.hstack([basis, block])
        block = A @ block
    return basis.shape[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=1.5, help="simulated time (default 1.5 s)")
    ap.add_argument("--plot", metavar="FILE",
                    help="save |xi| over time, simulated and predicted (needs matplotlib)")
    args = ap.parse_args(argv)
    if pin is None:
        print(MISSING, file=sys.stderr)
        return 2

    robot, feet = pick_robot()
    model = load_robot(robot)                                   # floating base
    nv, nj = model.nv, model.nj
    q0, tau0, f0 = standing(model, feet)
    v0 = np.zeros(nv)
    state0 = sl.State.from_vectors(model, q0, v0)
    print(f"robot    {robot}: floating base, {nj} joints, mass {model.total_mass():.2f} kg, standing on "
          f"{', '.join(feet)} (world-aligned point contacts)")
    print(f"forces   vertical foot forces {np.round(f0[2::3], 2)} N, sum {f0[2::3].sum():.2f} N "
          f"(m g = {model.total_mass() * 9.81:.2f} N)")

    # -- the contact linearization (discrete time)
    contacts = [sl.Contact(f, kind="point", reference="world_aligned", baumgarte=BAUMGARTE) for f in feet]
    lin = sl.linearize(model, state0, tau0, contacts=contacts, dt=DT)
    Ad, Bd = lin.Ad, lin.Bd                                     # (2nv, 2nv), (2nv, nj)
    print(f"model    Ad {Ad.shape[0]}x{Ad.shape[1]}, Bd {Bd.shape[0]}x{Bd.shape[1]}; KKT forces agree with "
          f"the standing forces to {np.max(np.abs(lin.forces - f0)):.1e} N")

    # -- the constraint-consistent basis: feet fixed in position and velocity
    Jc = np.vstack([sl.frame_jacobian(model, state0, f, reference="world_aligned")[:3] for f in feet])
    N = null_space(Jc)                                          # (nv, nv - 12): orthonormal
    T = block_diag(N, N)                                        # z = T xi on the contact manifold
    Ar, Br = T.T @ Ad @ T, T.T @ Bd
    inv_A = np.linalg.norm(Ad @ T - T @ Ar) / np.linalg.norm(Ad)
    inv_B = np.linalg.norm(Bd - T @ Br) / np.linalg.norm(Bd)
    rank_full = controllability_rank(Ad, Bd)
    rank_red = controllability_rank(Ar, Br)
    print(f"subspace {T.shape[1]} contact-consistent directions of {2 * nv}: Ad maps them into themselves "
          f"(residual {inv_A:.1e}), Bd lies in them ({inv_B:.1e})")
    print(f"         controllable directions: {rank_full} of {2 * nv} for (Ad, Bd); "
          f"{rank_red} of {T.shape[1]} for the reduced (T'AdT, T'Bd)")

    # -- LQR on the reduced model; the weights are set on z and carried over to xi
    w = np.r_[np.full(3, 1000.0), np.full(3, 300.0), np.full(nj, 1.0),    # z_H (lin, ang), z_s
              np.full(3, 10.0), np.full(3, 3.0), np.full(nj, 0.01)]      # z_v (lin, ang), z_r
    Qr = T.T @ np.diag(w) @ T
    R = np.eye(nj) * 1.0
    P = solve_discrete_are(Ar, Br, Qr, R)
    K = np.linalg.solve(R + Br.T @ P @ Br, Br.T @ P @ Ar)               # dtau = -K xi
    Acl = Ar - Br @ K
    print(f"loop     spectral radius: open {max(abs(np.linalg.eigvals(Ar))):.5f}, "
          f"closed {max(abs(np.linalg.eigvals(Acl))):.5f} (reduced model)")

    # -- the push: a base twist, the joints moving so that the feet stay where they are
    v_push = np.array([0.05, -0.03, 0.02, 0.15, 0.2, -0.15])             # m/s, rad/s (body axes)
    r_push = -np.linalg.solve(Jc[:, 6:], Jc[:, :6] @ v_push)
    q, v = q0.copy(), np.r_[v_push, r_push]
    print(f"push     base twist {v_push} (linear m/s, angular rad/s)")

    plant = Plant(robot_urdf_path(robot), list(model.joint_names), floating_base=True,
                  gravity=tuple(model.gravity))
    plant.add_point_contacts(q0, feet, *BAUMGARTE)
    xi = T.T @ state_error(q, v, q0, v0, floating_base=True)
    xi0, xi_lin = xi.copy(), xi.copy()
    steps = int(round(args.seconds / DT))
    cost, worst_gap, peak, min_fz, drift = 0.0, 0.0, np.linalg.norm(xi0), np.inf, 0.0
    hist_sim, hist_lin = [], []
    print(f"\n{'t (s)':>6} {'base pos err (mm)':>17} {'base rot err (deg)':>18} {'|dtau| (N m)':>13} "
          f"{'min foot fz (N)':>15} {'foot drift (mm)':>15} {'linear |xi|':>11} {'simulated |xi|':>14}")
    for k in range(steps + 1):
        z = state_error(q, v, q0, v0, floating_base=True)
        xi = T.T @ z                                            # project onto the consistent directions
        dtau = -K @ xi
        if k % max(1, steps // 10) == 0:
            print(f"{k * DT:6.2f} {1e3 * np.linalg.norm(z[0:3]):17.3f} "
                  f"{np.degrees(np.linalg.norm(z[3:6])):18.3f} {np.linalg.norm(dtau):13.3f} "
                  f"{(min_fz if k else min(f0[2::3])):15.2f} {1e3 * drift:15.4f} "
                  f"{np.linalg.norm(xi_lin):11.3e} {np.linalg.norm(xi):14.3e}")
        hist_sim.append(np.linalg.norm(xi))
        hist_lin.append(np.linalg.norm(xi_lin))
        if k > 0:
            worst_gap = max(worst_gap, np.linalg.norm(xi - xi_lin))
            peak = max(peak, np.linalg.norm(xi))
        if k == steps:
            break
        cost += xi @ Qr @ xi + dtau @ R @ dtau
        q, v = plant.step(q, v, tau0 + dtau, DT, SUBSTEPS)
        min_fz = min(min_fz, float(plant.contact_forces()[:, 2].min()))
        drift = max(drift, plant.contact_drift(q))
        xi_lin = Acl @ xi_lin
    cost_pred = xi0 @ P @ xi0
    decay = np.linalg.norm(xi) / np.linalg.norm(xi0)
    cost_err = abs(cost - cost_pred) / cost_pred
    gap = worst_gap / peak
    print(f"\ncost     simulated sum xi'Qxi + dtau'R dtau = {cost:.4f}, LQR's xi0' P xi0 = {cost_pred:.4f} "
          f"({100 * cost_err:.2f}% apart)")
    print(f"error    |xi(T)| / |xi(0)| = {decay:.2e}; largest gap between the simulated and the linear "
          f"model's trajectory: {100 * gap:.2f}% of the largest |xi|")
    print(f"contacts smallest vertical foot force {min_fz:.2f} N (> 0: no foot pulls on the ground), "
          f"largest foot drift {1e3 * drift:.4f} mm")
    if args.plot:
        from figures import save_time_plot

        save_time_plot(args.plot, np.arange(len(hist_sim)) * DT,
                       {"simulated (Pinocchio, rigid contacts)": np.array(hist_sim),
                        "linear model": np.array(hist_lin)},
                       f"{robot} pushed: LQR on the contact-consistent coordinates xi = T' z", "|xi|")
    consistent = inv_A < 1e-6 and inv_B < 1e-6 and rank_red == T.shape[1]
    if not consistent:
        print("model    FAILED: the contact-consistent directions are not an invariant, controllable "
              "subspace of (Ad, Bd)")
    ok = consistent and decay < 0.01 and cost_err < 0.10 and gap < 0.10 and min_fz > 0.0
    print("result   " + ("stable: the push is rejected as the linear model predicts" if ok else
                         "FAILED: the loop does not behave as the linearization predicts"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
