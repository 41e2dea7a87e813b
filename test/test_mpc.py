# SPDX-License-Identifier: BSD-3-Clause
"""The horizon MPC of ``demo --control --horizon N`` (sva_linearizer.ros.demo.mpc), in-process:
its Riccati pass solves the step's quadratic program exactly (against a dense solve of the same
program), and with one knot it is the one-step controller (control.RecordLQR) to rounding."""
from types import SimpleNamespace as NS

import numpy as np
import pytest

pytest.importorskip("scipy", reason="the controllers solve a discrete Riccati equation with scipy")

import sva_linearizer as sl  # noqa: E402
from sva_linearizer.robots import load_robot  # noqa: E402
from sva_linearizer.ros.demo.control import RecordLQR, state_minus  # noqa: E402
from sva_linearizer.ros.demo.mpc import HorizonMPC, corrupt_knots, state_plus  # noqa: E402


def _dense_step(As, Bs, X, nxt, U, tau_run, refs, Q, R, P):
    """u_0 of the step's program written out: z_0 = 0, z_{k+1} = A_k z_k + B_k du_k + d_k, cost
    sum_{k=1..N-1} |z_k + e_k|_Q^2 + |z_N + e_N|_P^2 + sum_k |u_k + du_k - u_{k-1} - du_{k-1}|_R^2."""
    N, nu, nx = len(As), U.shape[1], As[0].shape[0]
    d = [nxt[i] - X[i + 1] for i in range(N - 1)] + [np.zeros(nx)]
    Xs = X + [nxt[-1]]
    e = [Xs[i] - refs[i] for i in range(N + 1)]
    M, m = [np.zeros((nx, N * nu))], [np.zeros(nx)]
    for i in range(N):
        Mi = As[i] @ M[i]
        Mi[:, i * nu:(i + 1) * nu] += Bs[i]
        M.append(Mi)
        m.append(As[i] @ m[i] + d[i])
    H, g = np.zeros((N * nu, N * nu)), np.zeros(N * nu)
    for i in range(1, N + 1):
        W = Q if i < N else P
        H += M[i].T @ W @ M[i]
        g += M[i].T @ W @ (m[i] + e[i])
    prev = np.vstack([tau_run, U])
    for i in range(N):
        D = np.zeros((nu, N * nu))
        D[:, i * nu:(i + 1) * nu] = np.eye(nu)
        if i:
            D[:, (i - 1) * nu:i * nu] -= np.eye(nu)
        H += D.T @ R @ D
        g += D.T @ R @ (U[i] - prev[i])
    return U[0] - np.linalg.solve(H, g)[:nu]


def test_the_riccati_pass_solves_the_steps_program():
    rng = np.random.default_rng(3)
    nv, nu, N, dt = 3, 3, 5, 0.1
    nx = 2 * nv
    As = [np.eye(nx) + 0.2 * rng.normal(size=(nx, nx)) for _ in range(N)]
    Bs = [rng.normal(size=(nx, nu)) for _ in range(N)]
    Q, R, P = (np.diag(rng.uniform(0.5, 2.0, n)) for n in (nx, nu, nx))
    refs = [rng.normal(size=nx) for _ in range(N + 1)]
    X = [rng.normal(size=nx) for _ in range(N)]
    nxt = [rng.normal(size=nx) for _ in range(N)]
    U, tau_run = rng.normal(size=(N, nu)), rng.normal(size=nu)
    mpc = HorizonMPC(N, dt, lambda t: (refs[round(t / dt)][:nv], refs[round(t / dt)][nv:]), Q, R, False)
    mpc.terminal = lambda A, B: P
    mpc.knots(X[0][:nv], X[0][nv:], 0.0, tau_run)
    mpc.X, mpc.U = [(x[:nv], x[nv:]) for x in X], U.copy()
    knots = [NS(Ad=As[i], Bd=Bs[i], q_next=nxt[i][:nv], v_next=nxt[i][nv:]) for i in range(N)]
    u0 = mpc.step(knots, tau_run)
    expected = _dense_step(As, Bs, X, nxt, U, tau_run, refs, Q, R, P)
    assert np.max(np.abs(u0 - expected)) < 1e-9 * max(1.0, np.max(np.abs(expected)))
    # the warm start: one period on, its first knot the plan's x_1, its last input repeated
    assert len(mpc.X) == N and np.array_equal(mpc.U[-1], mpc.U[-2])
    # knot 0's Bd flipped turns the command around
    flipped = HorizonMPC(N, dt, mpc.reference, Q, R, False)
    flipped.terminal = mpc.terminal
    flipped.knots(X[0][:nv], X[0][nv:], 0.0, tau_run)
    flipped.X, flipped.U = [(x[:nv], x[nv:]) for x in X], U.copy()
    u0_flipped = flipped.step(corrupt_knots(knots, "Bd_flipped"), tau_run)
    assert np.max(np.abs(u0_flipped - u0)) > 1e-3


def test_state_plus_inverts_state_minus_on_se3():
    rng = np.random.default_rng(4)
    model = load_robot("solo12")
    quat = rng.normal(size=4)
    q = np.r_[rng.normal(size=3), quat / np.linalg.norm(quat), rng.uniform(-1, 1, model.nj)]
    v = rng.normal(size=model.nv)
    z = 0.3 * rng.normal(size=2 * model.nv)
    q1, v1 = state_plus(q, v, z, True)
    assert np.max(np.abs(state_minus(q1, v1, q, v, True) - z)) < 1e-12
    assert q1[3:7] @ q[3:7] >= 0.0


@pytest.mark.parametrize("robot", ["ur5", "solo12"])
def test_one_knot_is_the_one_step_controller(robot):
    """With N = 1 the step's program is RecordLQR's: e' P e + dw' R dw for the next state's error."""
    from sva_linearizer.ros.demo.sim import BAUMGARTE, STANDING_FEET, initial_state

    model = load_robot(robot)
    feet = STANDING_FEET.get(robot) if model.floating_base else None
    q, v, tau = initial_state(model, feet)
    rng = np.random.default_rng(5)
    v = v + 0.1 * rng.normal(size=model.nv)
    contacts = [sl.Contact(f, kind="point", reference="world_aligned", baumgarte=BAUMGARTE) for f in feet or ()]
    dt, stamp_ns = 0.01, 1_700_000_000_250_000_000
    lin = sl.linearize(model, sl.State.from_vectors(model, q, v), tau, contacts=contacts or None, dt=dt)
    nxt = sl.next_state(model, sl.State.from_vectors(model, q, v), lin.nu_dot, dt)
    rec = NS(q=q, v=v, tau=tau, Ad=lin.Ad, Bd=lin.Bd, q_next=nxt.q, v_next=nxt.v, stamp_ns=stamp_ns, dt=dt,
             nj=model.nj, description=NS(floating_base=model.floating_base))
    q_ref = q.copy()
    q_ref[-model.nj:] += 0.05
    reference = lambda t: (q_ref, np.full(model.nv, 0.2) * np.sin(t))   # noqa: E731
    Q = np.diag([1e3] * model.nv + [1.0] * model.nv)
    R = np.eye(model.nj) * 1e-3
    expected = RecordLQR(reference, Q, R).command(rec)
    mpc = HorizonMPC(1, dt, reference, Q, R, model.floating_base)
    mpc.knots(q, v, stamp_ns * 1e-9, tau)
    got = mpc.step([rec], tau)
    assert np.max(np.abs(got - expected)) < 1e-8 * max(1.0, np.max(np.abs(expected)))
