# SPDX-License-Identifier: BSD-3-Clause
"""linearize_horizon: a planner's knots with a contact schedule. Each knot equals `linearize` at
that knot with the contacts active there, and `next_state` with its nu_dot, within 1e-12 of the
largest entry (linearize itself is checked against Pinocchio and finite differences elsewhere; a
knot is checked against Pinocchio here too). The layout is fixed over the knots: an inactive
contact's rows are zeros."""
import numpy as np
import pytest

import sva_linearizer as sl
from fd_tools import e_max
from sva_linearizer.robots import load_robot

FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")


def trot(N, period=8):
    """Diagonal pairs alternating every `period` knots: FL+HR, then FR+HL."""
    first = (np.arange(N) // period) % 2 == 0
    return np.stack([first, ~first, ~first, first], axis=1)


def knots(model, N, rng):
    Q, V, T = np.zeros((N, model.nq)), np.zeros((N, model.nv)), rng.normal(size=(N, model.nj))
    for i in range(N):
        if model.floating_base:
            quat = rng.normal(size=4)
            Q[i, :3], Q[i, 3:7] = rng.normal(size=3), quat / np.linalg.norm(quat)
        Q[i, -model.nj:] = rng.uniform(-1, 1, model.nj)
        V[i] = rng.normal(size=model.nv)
    return Q, V, T


def close(got, want, what):
    scale = max(1.0, float(np.max(np.abs(want)))) if np.size(want) else 1.0
    assert e_max(got, want) <= 1e-12 * scale, f"{what}: {e_max(got, want):.3g} (largest entry {scale:.3g})"


@pytest.fixture(scope="module")
def solo():
    return load_robot("solo12")


def test_a_trot_horizon_equals_linearize_at_every_knot(solo):
    rng = np.random.default_rng(1)
    N, dt = 24, 0.01
    Q, V, T = knots(solo, N, rng)
    contacts = [sl.Contact(f, reference="world_aligned", baumgarte=(100.0, 20.0)) for f in FEET]
    schedule = trot(N)
    h = sl.linearize_horizon(solo, Q, V, T, dt, contacts=contacts, active=schedule)
    assert len(h) == N and h.forces.shape == (N, 12) and h.B.shape == (N, 36, 12)
    assert h.rows == (slice(0, 3), slice(3, 6), slice(6, 9), slice(9, 12))
    for i in range(N):
        act = [c for c, a in zip(contacts, schedule[i]) if a]
        st = sl.State.from_vectors(solo, Q[i], V[i])
        lin = sl.linearize(solo, st, T[i], contacts=act, dt=dt)
        nxt = sl.next_state(solo, st, lin.nu_dot, dt)
        for name in ("nu_dot", "A", "B", "Ad", "Bd"):
            close(getattr(h, name)[i], getattr(lin, name), f"knot {i} {name}")
        close(h.q_next[i], nxt.q, f"knot {i} q_next")
        close(h.v_next[i], nxt.v, f"knot {i} v_next")
        held = np.concatenate([np.arange(r.start, r.stop) for r, a in zip(h.rows, schedule[i]) if a])
        close(h.forces[i, held], lin.forces, f"knot {i} forces")
        close(h.dforces_dz[i, held], lin.dforces_dz, f"knot {i} dforces_dz")
        close(h.dforces_dtau[i, held], lin.dforces_dtau, f"knot {i} dforces_dtau")
        idle = np.setdiff1d(np.arange(12), held)
        assert not h.forces[i, idle].any() and not h.dforces_dz[i, idle].any()
        assert h.q_next[i, 3:7] @ Q[i, 3:7] >= 0.0        # the knot's hemisphere


def test_a_knot_against_pinocchio(solo):
    """Free flight knots (no contact active) against Pinocchio's computeABADerivatives."""
    pin = pytest.importorskip("pinocchio")
    from ros_helpers.oracle import pinocchio_oracle
    from sva_linearizer.robots import robot_urdf_path

    rng = np.random.default_rng(2)
    Q, V, T = knots(solo, 3, rng)
    h = sl.linearize_horizon(solo, Q, V, T, contacts=[sl.Contact(f) for f in FEET], active=np.zeros((3, 4)))
    assert pin is not None and h.Ad is None and h.q_next is None
    for i in range(3):
        o = pinocchio_oracle(robot_urdf_path("solo12"), solo, Q[i], V[i], T[i])
        assert e_max(h.A[i], o.A) <= 1e-8 and e_max(h.B[i], o.B) <= 1e-8 and e_max(h.nu_dot[i], o.nu_dot) <= 1e-8


def test_forces_as_inputs_keep_their_columns_and_loops_always_act():
    """Contact forces as inputs switched by the schedule: B = [B_tau | B_f of every contact], the
    columns of an inactive contact zero; a free arm without contacts equals linearize too."""
    solo = load_robot("solo12")
    rng = np.random.default_rng(3)
    N, dt = 10, 0.005
    Q, V, T = knots(solo, N, rng)
    feet = [sl.Contact(f) for f in FEET]
    F = rng.normal(size=(N, 3)) * 10.0
    schedule = np.array([[k % 2 == 0, True] for k in range(N)])
    h = sl.linearize_horizon(solo, Q, V, T, dt, contacts=[feet[0]], forces=[(feet[1], F)], active=schedule)
    assert h.B.shape == (N, 36, 15) and h.columns == (slice(12, 15),) and h.forces.shape == (N, 3)
    for i in range(N):
        st = sl.State.from_vectors(solo, Q[i], V[i])
        lin = sl.linearize(solo, st, T[i], contacts=[feet[0]] if schedule[i, 0] else None,
                           forces=[(feet[1], F[i])], dt=dt)
        close(h.A[i], lin.A, f"knot {i} A")
        close(h.B[i], lin.B, f"knot {i} B")
        close(h.Bd[i], lin.Bd, f"knot {i} Bd")
        if not schedule[i, 0]:
            assert not h.forces[i].any()
    # switched off at a knot: its columns are zeros there
    off = schedule.copy()
    off[3, 1] = False
    h2 = sl.linearize_horizon(solo, Q, V, T, dt, contacts=[feet[0]], forces=[(feet[1], F)], active=off)
    assert not h2.B[3][:, 12:].any() and h2.B[4][:, 12:].any()
    ur5 = load_robot("ur5")
    Q, V, T = knots(ur5, 5, rng)
    h = sl.linearize_horizon(ur5, Q, V, T, 0.01)
    for i in range(5):
        lin = sl.linearize(ur5, sl.State.from_vectors(ur5, Q[i], V[i]), T[i], dt=0.01)
        close(h.Ad[i], lin.Ad, f"ur5 knot {i} Ad")
    assert h.forces.shape == (5, 0) and h.active.shape == (5, 0)


def test_a_bad_knot_is_named_and_bad_arguments_are_refused(solo):
    rng = np.random.default_rng(4)
    Q, V, T = knots(solo, 6, rng)
    V[4, 2] = np.nan
    with pytest.raises(ValueError, match="knot 4"):
        sl.linearize_horizon(solo, Q, V, T, 0.01)
    V[4, 2] = 0.0
    with pytest.raises(ValueError, match=r"active must be an \(N, C\) = \(6, 4\)"):
        sl.linearize_horizon(solo, Q, V, T, contacts=[sl.Contact(f) for f in FEET], active=np.ones((6, 3)))
    with pytest.raises(ValueError, match=r"v must be an \(N, 18\) array"):
        sl.linearize_horizon(solo, Q, V[:, :5], T)
    with pytest.raises(ValueError, match="6, 6, 5 knots"):
        sl.linearize_horizon(solo, Q, V, T[:5])
    with pytest.raises(ValueError, match="dt"):
        sl.linearize_horizon(solo, Q, V, T, -1.0)
    h = sl.linearize_horizon(solo, Q[:0], V[:0], T[:0], 0.01)
    assert h.A.shape == (0, 36, 36)
