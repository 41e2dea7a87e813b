# SPDX-License-Identifier: BSD-3-Clause
"""A touchdown in a horizon (linearize_horizon with dt): knot k >= 1 is a touchdown when a rigid
contact acts at k and not at k - 1; its reset, v_plus, impulses and dimpulses_dz equal
linearize_impact at the state the step from knot k - 1 lands in, (q_next[k-1], v_next[k-1]), with
the contacts acting at k (within 1e-12 of the largest entry); every other knot carries the
identity, v_next[k-1] and zeros. The chain z_{k+1} = reset[k+1] (Ad[k] z_k + Bd[k] w_k) against
central differences of the package's own step-then-impact map (linearize's nu_dot, next_state,
impact)."""
import numpy as np
import pytest

import sva_linearizer as sl
from fd_tools import e_max, perturbed
from sva_linearizer.robots import load_robot
from sva_linearizer.spatial import se3_log

FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")


def trot(N, period=8):
    """Diagonal pairs alternating every `period` knots: FL+HR, then FR+HL."""
    first = (np.arange(N) // period) % 2 == 0
    return np.stack([first, ~first, ~first, first], axis=1)


def knots(model, N, rng):
    Q, V, T = np.zeros((N, model.nq)), rng.normal(size=(N, model.nv)), rng.normal(size=(N, model.nj))
    for i in range(N):
        quat = rng.normal(size=4)
        Q[i, :3], Q[i, 3:7] = rng.normal(size=3), quat / np.linalg.norm(quat)
        Q[i, 7:] = rng.uniform(-1, 1, model.nj)
    return Q, V, T


def close(got, want, what, tol=1e-12):
    scale = max(1.0, float(np.max(np.abs(want)))) if np.size(want) else 1.0
    assert e_max(got, want) <= tol * scale, f"{what}: {e_max(got, want):.3g} (largest entry {scale:.3g})"


def minus(model, x, y):
    """x (-) y: z with y (+) z = x (the perturbation of A's columns)."""
    dR = y.R.T @ x.R
    dp = y.R.T @ (x.p - y.p)
    return np.r_[se3_log(dR, dp), x.s - y.s, x.v_base - y.v_base, x.r - y.r]


@pytest.fixture(scope="module")
def solo():
    return load_robot("solo12")


def held_rows(h, on):
    return np.concatenate([np.arange(r.start, r.stop) for r, a in zip(h.rows, on) if a])


@pytest.mark.parametrize("e", [0.0, 0.5])
def test_a_trot_horizon_carries_the_impact_at_each_touchdown(solo, e):
    rng = np.random.default_rng(31)
    N, dt = 24, 0.01
    Q, V, T = knots(solo, N, rng)
    contacts = [sl.Contact(f, reference="world_aligned") for f in FEET]
    schedule = trot(N)
    h = sl.linearize_horizon(solo, Q, V, T, dt, contacts=contacts, active=schedule, restitution=e)
    assert h.restitution == e
    assert np.flatnonzero(h.touchdown).tolist() == [8, 16]          # where a diagonal pair lands
    assert h.reset.shape == (N, 36, 36) and h.v_plus.shape == (N, 18)
    assert h.impulses.shape == (N, 12) and h.dimpulses_dz.shape == (N, 12, 36)
    for k in range(N):
        if not h.touchdown[k]:
            assert np.array_equal(h.reset[k], np.eye(36)), f"knot {k}: reset is not the identity"
            assert np.array_equal(h.v_plus[k], h.v_next[k - 1] if k else V[0])
            assert not h.impulses[k].any() and not h.dimpulses_dz[k].any()
            continue
        act = [c for c, a in zip(contacts, schedule[k]) if a]
        landing = sl.State.from_vectors(solo, h.q_next[k - 1], h.v_next[k - 1])
        imp = sl.linearize_impact(solo, landing, act, e)
        held = held_rows(h, schedule[k])
        close(h.reset[k], imp.jacobian, f"knot {k} reset")
        close(h.v_plus[k], imp.v_plus, f"knot {k} v_plus")
        close(h.impulses[k, held], imp.impulses, f"knot {k} impulses")
        close(h.dimpulses_dz[k, held], imp.dimpulses_dz, f"knot {k} dimpulses_dz")
        idle = np.setdiff1d(np.arange(12), held)
        assert not h.impulses[k, idle].any() and not h.dimpulses_dz[k, idle].any()
        # the impact is taken where the step lands, not at the knot's own point
        own = sl.linearize_impact(solo, sl.State.from_vectors(solo, Q[k], V[k]), act, e)
        assert e_max(h.reset[k], own.jacobian) > 1e-3 and e_max(h.v_plus[k], own.v_plus) > 1e-3
        assert not np.allclose(h.reset[k], np.eye(36))
    # the knots' own sections are those of the horizon without touchdowns
    plain = sl.linearize_horizon(solo, Q, V, T, dt, contacts=contacts, active=schedule)
    for name in ("A", "Ad", "Bd", "q_next", "v_next", "forces"):
        assert np.array_equal(getattr(h, name), getattr(plain, name))


def test_no_dt_no_touchdowns_and_the_first_knot_is_none(solo):
    rng = np.random.default_rng(32)
    Q, V, T = knots(solo, 4, rng)
    contacts = [sl.Contact(f) for f in FEET]
    schedule = np.array([[1, 1, 1, 1], [1, 0, 0, 1], [1, 1, 1, 1], [0, 0, 0, 0]], dtype=bool)
    h = sl.linearize_horizon(solo, Q, V, T, contacts=contacts, active=schedule)
    assert h.touchdown is None and h.reset is None and h.v_plus is None and h.impulses is None
    h = sl.linearize_horizon(solo, Q, V, T, 0.01, contacts=contacts, active=schedule)
    assert h.touchdown.tolist() == [False, False, True, False]       # knot 0 never; a lift-off is none
    # contacts of forces= never land (without a rigid contact no knot can touch down: no sections)
    h = sl.linearize_horizon(solo, Q, V, T, 0.01, forces=[(c, np.zeros(3)) for c in contacts], active=schedule)
    assert h.touchdown is None and h.reset is None and h.impulses is None
    h = sl.linearize_horizon(solo, Q, V, T, 0.01)
    assert h.touchdown is None and h.reset is None and h.v_plus is None
    with pytest.raises(ValueError, match="restitution must be in"):
        sl.linearize_horizon(solo, Q, V, T, 0.01, contacts=contacts, active=schedule, restitution=1.5)
    with pytest.raises(ValueError, match="restitution must be a number"):
        sl.linearize_horizon(solo, Q, V, T, contacts=contacts, active=schedule, restitution="x")


def test_an_impact_that_fails_names_its_knot(solo, monkeypatch):
    from sva_linearizer.linearization import horizon

    def refuse(model, state, contacts, restitution):
        raise ValueError("the contacts are singular")

    rng = np.random.default_rng(33)
    Q, V, T = knots(solo, 12, rng)
    monkeypatch.setattr(horizon, "linearize_impact", refuse)
    with pytest.raises(sl.linearization.KnotError, match="knot 4: the impact at the touchdown") as info:
        sl.linearize_horizon(solo, Q, V, T, 0.01, contacts=[sl.Contact(f) for f in FEET], active=trot(12, 4))
    assert info.value.knot == 4


@pytest.mark.parametrize("e, reference", [(0.0, "local"), (0.5, "world_aligned")])
def test_the_chain_is_the_derivative_of_step_then_impact(solo, e, reference):
    """reset[k] Ad[k-1] and reset[k] Bd[k-1] against central differences of the map x_{k-1} (+) z,
    tau -> impact(next_state(x, nu_dot(x, tau), dt)): nu_dot by linearize with the contacts acting at
    k - 1, the impact with those acting at k; the difference taken on the group at the nominal
    (q_next[k-1], v_plus[k])."""
    rng = np.random.default_rng(34)
    N, dt, eps = 6, 0.01, 1e-6
    Q, V, T = knots(solo, N, rng)
    contacts = [sl.Contact(f, reference=reference, baumgarte=(0.0, 5.0)) for f in FEET]
    schedule = trot(N, 3)
    h = sl.linearize_horizon(solo, Q, V, T, dt, contacts=contacts, active=schedule, restitution=e)
    k = 3
    assert h.touchdown[k]
    before = [c for c, a in zip(contacts, schedule[k - 1]) if a]
    after = [c for c, a in zip(contacts, schedule[k]) if a]
    x = sl.State.from_vectors(solo, Q[k - 1], V[k - 1])
    nominal = sl.State.from_vectors(solo, h.q_next[k - 1], h.v_plus[k])

    def step_then_impact(z, tau):
        xz = perturbed(solo, x, z)
        nu_dot = sl.linearize(solo, xz, tau, contacts=before).nu_dot
        nxt = sl.next_state(solo, xz, nu_dot, dt)
        v_plus, _ = sl.impact(solo, nxt, after, e)
        return minus(solo, sl.State.from_vectors(solo, nxt.q, v_plus), nominal)

    nx = 2 * solo.nv
    assert np.max(np.abs(step_then_impact(np.zeros(nx), T[k - 1]))) < 1e-12
    fd = np.zeros((nx, nx))
    for c in range(nx):
        z = np.zeros(nx)
        z[c] = eps
        fd[:, c] = (step_then_impact(z, T[k - 1]) - step_then_impact(-z, T[k - 1])) / (2 * eps)
    chain = h.reset[k] @ h.Ad[k - 1]
    err = np.max(np.abs(chain - fd))
    assert err <= 1e-6 * max(1.0, np.max(np.abs(fd))), err
    assert np.max(np.abs(h.Ad[k - 1] - fd)) > 1e-3                 # the reset map matters
    ht = 1e-3
    fdb = np.zeros((nx, solo.nj))
    for c in range(solo.nj):
        d = np.zeros(solo.nj)
        d[c] = ht
        fdb[:, c] = (step_then_impact(np.zeros(nx), T[k - 1] + d)
                     - step_then_impact(np.zeros(nx), T[k - 1] - d)) / (2 * ht)
    chain_b = h.reset[k] @ h.Bd[k - 1]
    err = np.max(np.abs(chain_b - fdb))
    assert err <= 1e-6 * max(1.0, np.max(np.abs(fdb))), err


def test_a_loop_holds_through_each_touchdown_and_states_apart_have_none():
    """A closed loop (always active: its rows after the contact's) beside a switched point contact
    on a random two-legged tree: at each touchdown the impact closes the contact and holds the loop,
    its impulses in both their rows; touchdowns=False (states that are not one trajectory, as the
    node's per-state stream): no impact, the fields None, the knots unchanged."""
    from test_horizon import loop_beside_a_foot

    N, dt, e = 11, 0.01, 0.5
    model, Q, V, T, loop, foot, schedule = loop_beside_a_foot(np.random.default_rng(35), N)
    h = sl.linearize_horizon(model, Q, V, T, dt, contacts=[foot, loop], active=schedule, restitution=e)
    assert np.flatnonzero(h.touchdown).tolist() == [3, 6, 9] and h.impulses.shape == (N, 8)
    nx = 2 * model.nv
    for k in range(N):
        if not h.touchdown[k]:
            assert np.array_equal(h.reset[k], np.eye(nx)) and not h.impulses[k].any()
            continue
        landing = sl.State.from_vectors(model, h.q_next[k - 1], h.v_next[k - 1])
        imp = sl.linearize_impact(model, landing, [foot, loop], e)
        close(h.reset[k], imp.jacobian, f"knot {k} reset")
        close(h.v_plus[k], imp.v_plus, f"knot {k} v_plus")
        close(h.impulses[k], imp.impulses, f"knot {k} impulses")
        close(h.dimpulses_dz[k], imp.dimpulses_dz, f"knot {k} dimpulses_dz")
    apart = sl.linearize_horizon(model, Q, V, T, dt, contacts=[foot, loop], active=schedule, restitution=e,
                                 touchdowns=False)
    assert apart.touchdown is None and apart.reset is None and apart.v_plus is None and apart.impulses is None
    for name in ("A", "B", "Ad", "Bd", "q_next", "v_next", "forces", "dforces_dz"):
        assert np.array_equal(getattr(apart, name), getattr(h, name)), name
