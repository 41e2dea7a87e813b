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


def _check_knots(model, h, Q, V, T, dt, rigid, schedule, loops=(), inputs=()):
    """Every section of every knot against linearize (and next_state) at that knot."""
    nr = len(rigid)
    for i in range(len(Q)):
        on = schedule[i]
        act = [c for c, a in zip(rigid, on[:nr]) if a] + list(loops)
        fin = [(c, F[i]) for (c, F), a in zip(inputs, on[nr:]) if a]
        st = sl.State.from_vectors(model, Q[i], V[i])
        lin = sl.linearize(model, st, T[i], contacts=act or None, forces=fin or None, dt=dt)
        close(h.nu_dot[i], lin.nu_dot, f"knot {i} nu_dot")
        close(h.A[i], lin.A, f"knot {i} A")
        cols = np.concatenate([np.arange(model.nj)] + [np.arange(s.start, s.stop)
                                                       for s, a in zip(h.columns, on[nr:]) if a])
        close(h.B[i][:, cols], lin.B, f"knot {i} B")
        assert not np.delete(h.B[i], cols, axis=1).any(), f"knot {i}: B's inactive columns"
        if dt:
            close(h.Ad[i], lin.Ad, f"knot {i} Ad")
            close(h.Bd[i][:, cols], lin.Bd, f"knot {i} Bd")
            assert not np.delete(h.Bd[i], cols, axis=1).any(), f"knot {i}: Bd's inactive columns"
            nxt = sl.next_state(model, st, lin.nu_dot, dt)
            close(h.q_next[i], nxt.q, f"knot {i} q_next")
            close(h.v_next[i], nxt.v, f"knot {i} v_next")
        acting = list(on[:nr]) + [True] * len(loops)
        held = np.concatenate([np.arange(r.start, r.stop) for r, a in zip(h.rows, acting) if a] or [np.zeros(0, int)])
        if held.size:
            close(h.forces[i, held], lin.forces, f"knot {i} forces")
            close(h.dforces_dz[i, held], lin.dforces_dz, f"knot {i} dforces_dz")
            close(h.dforces_dtau[i, held], lin.dforces_dtau, f"knot {i} dforces_dtau")
        idle = np.setdiff1d(np.arange(h.forces.shape[1]), held)
        assert not (h.forces[i, idle].any() or h.dforces_dz[i, idle].any() or h.dforces_dtau[i, idle].any())


def _lanes_only(monkeypatch):
    """Fail the test if the horizon leaves the lanes: the per-knot reference path, or (once the
    lane groups are compiled) a state computed one by one."""
    from sva_linearizer._jit import compiled, decide_groups
    from sva_linearizer.linearization import batch, horizon, with_contacts

    def refuse(*args, **kwargs):
        raise AssertionError("the horizon left the lanes")

    monkeypatch.setattr(horizon, "_knot_by_knot", refuse)
    decide_groups("batch", "contacts_batch")
    if compiled("batch") and compiled("contacts_batch"):
        monkeypatch.setattr(with_contacts, "contacts_one_by_one", refuse)
        monkeypatch.setattr(batch, "_one_by_one", refuse)


@pytest.mark.parametrize("reference", ["local", "world_aligned"])
def test_several_contact_sets_flight_and_many_groups_in_one_call(solo, reference, monkeypatch):
    """A schedule with five distinct sets (four feet, two diagonals, three feet, none: free flight)
    over more knots than one lane group holds, with and without dt: every knot equals linearize."""
    _lanes_only(monkeypatch)
    rng = np.random.default_rng(21)
    N = 43
    Q, V, T = knots(solo, N, rng)
    contacts = [sl.Contact(f, reference=reference, baumgarte=(0.0, 5.0)) for f in FEET]
    patterns = np.array([[1, 1, 1, 1], [1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 1, 0], [0, 0, 0, 0]], dtype=bool)
    schedule = patterns[rng.integers(0, len(patterns), N)]
    for dt in (None, 0.004):
        h = sl.linearize_horizon(solo, Q, V, T, dt, contacts=contacts, active=schedule)
        _check_knots(solo, h, Q, V, T, dt, contacts, schedule)


def test_threads_give_what_one_thread_gives(solo, monkeypatch):
    """SVA_LINEARIZER_NUM_THREADS=2: the knots on two worker threads, bitwise what one thread gives."""
    _lanes_only(monkeypatch)
    rng = np.random.default_rng(22)
    N = 64
    Q, V, T = knots(solo, N, rng)
    contacts = [sl.Contact(f) for f in FEET]
    results = []
    for threads in ("1", "2"):
        monkeypatch.setenv("SVA_LINEARIZER_NUM_THREADS", threads)
        results.append(sl.linearize_horizon(solo, Q, V, T, 0.01, contacts=contacts, active=trot(N)))
    for name in ("nu_dot", "A", "B", "Ad", "Bd", "q_next", "v_next", "forces", "dforces_dz", "dforces_dtau"):
        np.testing.assert_array_equal(getattr(results[0], name), getattr(results[1], name), err_msg=name)
    _check_knots(solo, results[1], Q, V, T, 0.01, contacts, trot(N))


def test_free_robots_in_lanes_equal_linearize(monkeypatch):
    """No contacts: the free pipeline's lanes plus nu_dot and the next state (fixed and floating base)."""
    _lanes_only(monkeypatch)
    rng = np.random.default_rng(23)
    for name in ("ur5", "solo12"):
        model = load_robot(name)
        Q, V, T = knots(model, 19, rng)
        for dt in (None, 0.01):
            h = sl.linearize_horizon(model, Q, V, T, dt)
            _check_knots(model, h, Q, V, T, dt, [], np.zeros((19, 0), dtype=bool))


def test_a_bad_knot_inside_a_lane_group_is_named(solo):
    """A bad knot in a group of its contact set (and in a free-flight group): the error names it;
    the horizon without it is whole."""
    rng = np.random.default_rng(24)
    N = 40
    Q, V, T = knots(solo, N, rng)
    contacts = [sl.Contact(f) for f in FEET]
    schedule = trot(N)
    schedule[30:] = False                                  # free flight at the end
    for bad in (13, 21, 35):
        Vb = V.copy()
        Vb[bad, 7] = np.nan
        for dt in (None, 0.01):
            with pytest.raises(ValueError, match=f"knot {bad}: v: entry 7"):
                sl.linearize_horizon(solo, Q, Vb, T, dt, contacts=contacts, active=schedule)
    Tb = T.copy()
    Tb[17, 2] = 1e308                                      # finite, an overflowing result
    with pytest.raises(ValueError, match="knot 17: .*overflowed"):
        sl.linearize_horizon(solo, Q, V, Tb, 0.01, contacts=contacts, active=schedule)
    Vb = V.copy()
    Vb[26, 0] = 1e306                                      # the step itself overflows
    with pytest.raises(ValueError, match="knot 26: .*overflowed"):
        sl.linearize_horizon(solo, Q, Vb, T, 1e10, contacts=contacts, active=schedule)
    h = sl.linearize_horizon(solo, Q, V, T, 0.01, contacts=contacts, active=schedule)
    _check_knots(solo, h, Q, V, T, 0.01, contacts, schedule)


def test_a_forces_as_inputs_schedule_in_lanes(solo, monkeypatch):
    """Rigid feet and input forces switched by the schedule, a loop-free quadruped: each knot's B
    keeps the columns of every input contact, zeros where it is inactive; every section equals
    linearize with the active contacts and forces."""
    _lanes_only(monkeypatch)
    rng = np.random.default_rng(25)
    N = 30
    Q, V, T = knots(solo, N, rng)
    rigid = [sl.Contact(f, reference="world_aligned") for f in FEET[:2]]
    inputs = [(sl.Contact(FEET[2], reference="world_aligned"), rng.normal(size=(N, 3)) * 10.0),
              (sl.Contact(FEET[3]), rng.normal(size=3) * 10.0)]
    schedule = rng.random((N, 4)) < 0.5
    schedule[0] = False                                    # nothing acts at knot 0
    h = sl.linearize_horizon(solo, Q, V, T, 0.01, contacts=rigid, forces=inputs, active=schedule)
    assert h.B.shape == (N, 36, 18) and h.columns == (slice(12, 15), slice(15, 18))
    inputs_n = [(c, np.broadcast_to(F, (N, 3))) for c, F in inputs]
    _check_knots(solo, h, Q, V, T, 0.01, rigid, schedule, inputs=inputs_n)


def test_the_reference_path_where_lanes_cannot_run(solo):
    """An anchored contact: each knot by linearize (the lanes need the anchor's error per knot)."""
    rng = np.random.default_rng(26)
    N = 6
    Q, V, T = knots(solo, N, rng)
    contacts = [sl.Contact(FEET[0], baumgarte=(10.0, 1.0), anchor=(np.eye(3), np.zeros(3))),
                sl.Contact(FEET[1])]
    schedule = trot(N, period=2)[:, :2]
    h = sl.linearize_horizon(solo, Q, V, T, 0.01, contacts=contacts, active=schedule)
    _check_knots(solo, h, Q, V, T, 0.01, contacts, schedule)


def test_next_states_is_next_state_on_every_row():
    """The compiled step of a whole horizon (discrete.next_states) gives next_state's state on each
    row (within 1e-12: next_state's State normalises the quaternions it is given and gets), for
    quaternions given in either hemisphere and turns beyond a half turn."""
    from sva_linearizer.linearization.discrete import step_rows

    rng = np.random.default_rng(27)
    model = load_robot("solo12")
    Q, V, _ = knots(model, 50, rng)
    Q[::2, 3:7] *= -1.0
    V[:, 3:6] *= 40.0
    NU = rng.normal(size=V.shape)
    QN, VN = step_rows(model, Q, V, NU, 0.05)
    for i in range(50):
        nxt = sl.next_state(model, sl.State.from_vectors(model, Q[i], V[i]), NU[i], 0.05)
        close(QN[i], nxt.q, f"row {i} q")
        np.testing.assert_array_equal(VN[i], nxt.v)
        assert QN[i, 3:7] @ Q[i, 3:7] >= 0.0


def test_while_the_lane_groups_compile_the_knots_run_the_one_state_pipeline(solo, monkeypatch):
    """While the batch and contacts_batch groups are not compiled, the knots run one by one on the
    compiled one-state entry points (with every section copied out: nu_dot, A, B beside Ad, Bd,
    forces and their derivatives), not on plain Python and not on the per-knot reference path."""
    from sva_linearizer import _jit
    from sva_linearizer.linearization import horizon

    if not _jit.HAVE_NUMBA:
        pytest.skip("without numba every kernel is plain Python")
    rng = np.random.default_rng(28)
    N = 12
    Q, V, T = knots(solo, N, rng)
    contacts = [sl.Contact(f) for f in FEET]
    schedule = trot(N, period=3)
    schedule[5] = False
    _check_knots(solo, sl.linearize_horizon(solo, Q, V, T, 0.01), Q, V, T, 0.01, [], np.zeros((N, 0), bool))
    plain = []
    real = _jit._plain_call
    monkeypatch.setattr(_jit, "_plain_call", lambda d: plain.append(d.py_func.__name__) or real(d))
    monkeypatch.setitem(_jit._state, "batch", "plain")
    monkeypatch.setitem(_jit._state, "contacts_batch", "plain")
    monkeypatch.setattr(horizon, "_knot_by_knot", lambda *a: pytest.fail("the per-knot reference path ran"))
    for dt in (None, 0.01):
        h = sl.linearize_horizon(solo, Q, V, T, dt, contacts=contacts, active=schedule)
        free = sl.linearize_horizon(solo, Q, V, T, dt)
        assert plain == []
        _check_knots(solo, h, Q, V, T, dt, contacts, schedule)
        _check_knots(solo, free, Q, V, T, dt, [], np.zeros((N, 0), bool))


def loop_beside_a_foot(rng, N):
    """A random two-legged tree (revolute, prismatic and helical joints) with a closed loop between
    its legs and a point foot active at every third knot from knot 0: (model, Q, V, T, loop, foot,
    schedule (N, 1)) for N random knots."""
    from fd_tools import random_state, random_tree
    from test_contacts_fd import TWO_LEGS

    model = random_tree(rng, n=14, floating_base=True, parents=TWO_LEGS)
    states = [random_state(model, rng) for _ in range(N)]
    Q, V = np.stack([s.q for s in states]), np.stack([s.v for s in states])
    T = rng.normal(size=(N, model.nj))
    loop = sl.Loop("j6", "j13", "revolute", offset_a=(0.1, 0, 0), axis=(0, 1, 0), baumgarte=(0.0, 3.0))
    foot = sl.Contact("j3", "point", "world_aligned")
    return model, Q, V, T, loop, foot, (np.arange(N) % 3 == 0)[:, None]


def test_a_loop_acts_at_every_knot_beside_switched_contacts(monkeypatch):
    """A closed loop (always active, its rows after the contacts') beside a point contact switched
    by the schedule, on a random two-legged tree (revolute, prismatic and helical joints): in the
    lanes, every knot equals linearize with the loop and the contacts active there."""
    _lanes_only(monkeypatch)
    model, Q, V, T, loop, foot, schedule = loop_beside_a_foot(np.random.default_rng(29), 11)
    h = sl.linearize_horizon(model, Q, V, T, 0.01, contacts=[foot, loop], active=schedule)
    assert h.rows == (slice(0, 3), slice(3, 8))
    _check_knots(model, h, Q, V, T, 0.01, [foot], schedule, loops=[loop])
