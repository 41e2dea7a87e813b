# SPDX-License-Identifier: BSD-3-Clause
"""The speed issue's API: Data reuse and output arrays, the compiled batch, discrete time (checked
against finite differences of the integrated nonlinear step), and the benchmark command."""
import numpy as np
import pytest

import sva_linearizer as sl
from fd_tools import e_max, perturbed, random_state, random_tree
from sva_linearizer._jit import HAVE_NUMBA
from sva_linearizer.robots import load_robot
from sva_linearizer.spatial import se3_exp, se3_log


def _tree_state_tau(seed, n, floating):
    """A random tree, a random state of it and random joint torques; and the generator."""
    rng = np.random.default_rng(seed)
    model = random_tree(rng, n=n, floating_base=floating)
    st = random_state(model, rng)
    return model, st, rng.normal(size=model.nj), rng


@pytest.mark.parametrize("floating", [True, False])
def test_data_and_out_arrays_give_the_same_numbers(floating):
    model, st, tau, rng = _tree_state_tau(3, 7, floating)
    ref = sl.linearize(model, st, tau)
    data = sl.Data(model)
    lin = sl.linearize(model, st, tau, data=data)
    assert lin.A is data.A and lin.B is data.B          # no allocation: views into the Data
    np.testing.assert_array_equal(lin.A, ref.A)
    np.testing.assert_array_equal(lin.B, ref.B)
    np.testing.assert_array_equal(lin.Minv, ref.Minv)
    A = np.empty_like(ref.A)
    B = np.empty_like(ref.B)
    lin2 = sl.linearize(model, st, tau, out=(A, B))
    assert lin2.A is A and lin2.B is B
    np.testing.assert_array_equal(A, ref.A)
    # a second state overwrites the Data's arrays, not the default call's results
    st2 = random_state(model, rng)
    sl.linearize(model, st2, tau, data=data)
    assert not np.array_equal(data.A, ref.A)
    np.testing.assert_array_equal(sl.linearize(model, st, tau).A, ref.A)
    # an independent copy for another thread
    d2 = data.copy()
    sl.linearize(model, st, tau, data=d2)
    np.testing.assert_array_equal(d2.A, ref.A)


@pytest.mark.parametrize("floating", [True, False])
def test_the_datas_own_result_object_is_set_anew_by_every_call(floating):
    """With data= (no out, dt, contacts) linearize returns the Data's one Linearization, every
    field set anew: a field a caller replaced, or one a dt= call's result had, does not survive
    into the next call; a copy of the Data has a result object of its own (its views)."""
    model, st, tau, rng = _tree_state_tau(5, 6, floating)
    st2 = random_state(model, rng)
    ref1, ref2 = sl.linearize(model, st, tau), sl.linearize(model, st2, tau)
    data = sl.Data(model)
    lin = sl.linearize(model, st, tau, data=data)
    lin.A = lin.A.copy()                      # a caller keeps A by replacing the field
    lin.dt, lin.Ad = 0.5, np.zeros((1, 1))
    lin2 = sl.linearize(model, st2, tau, data=data)
    assert lin2 is lin
    assert lin2.A is data.A and lin2.B is data.B and lin2.D is data.D and lin2.Minv is data.Minv
    assert lin2.dt is None and lin2.Ad is None and lin2.Bd is None and lin2.forces is None
    np.testing.assert_array_equal(lin2.A, ref2.A)
    np.testing.assert_array_equal(lin2.nu_dot, ref2.nu_dot)
    d2 = data.copy()                          # another thread's Data: its own result object
    lin3 = sl.linearize(model, st, tau, data=d2)
    assert lin3 is not lin2 and lin3.A is d2.A and lin2.A is data.A
    np.testing.assert_array_equal(lin3.A, ref1.A)
    np.testing.assert_array_equal(lin2.A, ref2.A)   # the first Data's result is untouched
    # a dt= call on the Data gives a result of its own (Ad, Bd), which a later call leaves be
    lin_dt = sl.linearize(model, st, tau, data=data, dt=0.01)
    sl.linearize(model, st2, tau, data=data)
    assert lin_dt.dt == 0.01 and lin_dt.Ad is data.Ad


def test_data_and_out_are_checked():
    m1 = load_robot("quadruped")
    m2 = load_robot("quadruped", floating_base=False)
    st = sl.State.from_vectors(m1, np.r_[0, 0, 0, 0, 0, 0, 1, np.zeros(m1.nj)], np.zeros(m1.nv))
    with pytest.raises(ValueError, match="another model"):
        sl.linearize(m1, st, np.zeros(m1.nj), data=sl.Data(m2))
    with pytest.raises(ValueError, match="sva_linearizer.Data"):
        sl.linearize(m1, st, np.zeros(m1.nj), data=object())
    with pytest.raises(ValueError, match="out: A must be"):
        sl.linearize(m1, st, np.zeros(m1.nj), out=(np.zeros((3, 3)), np.zeros((36, 12))))
    with pytest.raises(ValueError, match="out must be a pair"):
        sl.linearize(m1, st, np.zeros(m1.nj), out=np.zeros(3))


@pytest.mark.parametrize("floating", [True, False])
def test_batch_equals_single_states(floating):
    rng = np.random.default_rng(11)
    model = random_tree(rng, n=6, floating_base=floating)
    states = [random_state(model, rng) for _ in range(9)]
    Q = np.array([s.q for s in states])
    V = np.array([s.v for s in states])
    T = rng.normal(size=(9, model.nj))
    A, B = sl.linearize_batch(model, Q, V, T)
    for i, st in enumerate(states):
        lin = sl.linearize(model, st, T[i])
        np.testing.assert_allclose(A[i], lin.A, rtol=0, atol=1e-12 * np.abs(lin.A).max())
        np.testing.assert_allclose(B[i], lin.B, rtol=0, atol=1e-12 * np.abs(lin.B).max())
    A2, B2 = np.empty_like(A), np.empty_like(B)
    r = sl.linearize_batch(model, Q, V, T, out=(A2, B2))
    assert r[0] is A2
    np.testing.assert_array_equal(A2, A)


def test_batch_bad_input_names_the_state():
    model = load_robot("quadruped")
    rng = np.random.default_rng(0)
    N = 5
    Q = np.zeros((N, model.nq))
    Q[:, 6] = 1.0
    V, T = rng.normal(size=(N, model.nv)), rng.normal(size=(N, model.nj))
    Qb = Q.copy()
    Qb[3, 9] = np.nan
    with pytest.raises(ValueError, match="state 3: q: entry 9"):
        sl.linearize_batch(model, Qb, V, T)
    Qb = Q.copy()
    Qb[2, 3:7] = [0.0, 0.0, 0.0, 1.1]
    with pytest.raises(ValueError, match="state 2: q\\[3:7\\]"):
        sl.linearize_batch(model, Qb, V, T)
    with pytest.raises(ValueError, match="v rows must have size"):
        sl.linearize_batch(model, Q, V[:, :3], T)
    with pytest.raises(ValueError, match="different batch sizes"):
        sl.linearize_batch(model, Q, V[:4], T)
    # a quaternion slightly off unit norm is normalised, as for one state
    Qn = Q.copy()
    Qn[1, 3:7] *= 1 + 5e-7
    A, _ = sl.linearize_batch(model, Qn, V, T)
    A0, _ = sl.linearize_batch(model, Q, V, T)
    np.testing.assert_allclose(A[1], A0[1], atol=1e-9 * np.abs(A0[1]).max())


def _step(model, st, tau, dt):
    """The semi-implicit Euler step on the Lie group: nu+ = nu + dt FD, H+ = H exp(dt v+), s+ = s + dt r+."""
    nu_plus = (np.concatenate([st.v_base, st.r]) if model.floating_base else st.r) \
        + dt * sl.forward_dynamics(model, st, tau)
    nj = model.nj
    if not model.floating_base:
        return sl.State(model, s=st.s + dt * nu_plus, r=nu_plus)
    dR, dp = se3_exp(dt * nu_plus[0:6])
    return sl.State(model, R=st.R @ dR, p=st.p + st.R @ dp, s=st.s + dt * nu_plus[6:],
                    v_base=nu_plus[0:6], r=nu_plus[6:6 + nj])


def _difference(model, a, b):
    """z with b = a (+) z, in A's coordinates."""
    if not model.floating_base:
        return np.concatenate([b.s - a.s, b.r - a.r])
    zH = se3_log(a.R.T @ b.R, a.R.T @ (b.p - a.p))
    return np.concatenate([zH, b.s - a.s, b.v_base - a.v_base, b.r - a.r])


@pytest.mark.parametrize("floating", [True, False])
def test_discrete_time_against_finite_differences_of_the_step(floating):
    model, st, tau, _ = _tree_state_tau(5, 6, floating)
    dt = 0.02
    lin = sl.linearize(model, st, tau, dt=dt)
    assert lin.dt == dt
    nx = 2 * model.nv
    nominal = _step(model, st, tau, dt)
    h = 1e-5
    Ad_fd = np.zeros((nx, nx))
    for c in range(nx):
        z = np.zeros(nx)
        z[c] = h
        plus = _difference(model, nominal, _step(model, perturbed(model, st, z), tau, dt))
        minus = _difference(model, nominal, _step(model, perturbed(model, st, -z), tau, dt))
        Ad_fd[:, c] = (plus - minus) / (2 * h)
    Bd_fd = np.zeros((nx, model.nj))
    for c in range(model.nj):
        d = np.zeros(model.nj)
        d[c] = 1e-3
        Bd_fd[:, c] = (_difference(model, nominal, _step(model, st, tau + d, dt))
                       - _difference(model, nominal, _step(model, st, tau - d, dt))) / 2e-3
    assert e_max(lin.Ad, Ad_fd) < 1e-7
    assert e_max(lin.Bd, Bd_fd) < 1e-7
    # batch gives the same discrete matrices
    Ad, Bd = sl.linearize_batch(model, st.q[None], st.v[None], tau[None], dt=dt)
    np.testing.assert_allclose(Ad[0], lin.Ad, atol=1e-12 * np.abs(lin.Ad).max())
    np.testing.assert_allclose(Bd[0], lin.Bd, atol=1e-12 * np.abs(lin.Bd).max())


def test_discrete_time_tends_to_identity_plus_dt_A():
    model = load_robot("quadruped")
    rng = np.random.default_rng(2)
    st = random_state(model, rng)
    tau = rng.normal(size=model.nj)
    lin = sl.linearize(model, st, tau, dt=1e-7)
    I = np.eye(2 * model.nv)
    np.testing.assert_allclose((lin.Ad - I) / 1e-7, lin.A, atol=1e-5 * np.abs(lin.A).max())
    for bad in (0.0, -0.1, np.nan, "x"):
        with pytest.raises(ValueError, match="dt must be"):
            sl.linearize(model, st, tau, dt=bad)


def test_bench_command_runs_against_pinocchio(capsys):
    pytest.importorskip("pinocchio")
    from sva_linearizer.cli import main

    assert main(["bench", "--robots", "ur5", "--batch", "4", "--repeat", "1", "--no-cold", "--horizon", "9",
                 "--horizon-robots", "ur5", "--horizon-contact-robots", "go2"]) == 0
    out = capsys.readouterr().out
    assert "numba compiles for" in out.splitlines()[0]   # the ratios depend on the CPU: named
    line = [ln for ln in out.splitlines() if ln.startswith("ur5")][0]
    e = float(line.split("|")[-1])
    assert e < 1e-8   # the benchmark also checks that both sides computed the same A and B
    # the horizon rows: ur5, and go2 on four feet; lanes, both sides' times, the ratios
    horizon = out[out.index("a horizon of 9 states"):]
    for robot, m in (("ur5", 0), ("go2", 12)):
        cells = [ln for ln in horizon.splitlines() if ln.startswith(robot)][0].split("|")
        assert int(cells[0].split()[2]) == m
        lanes = int(cells[0].split()[3])
        assert lanes >= 1
        for part in cells[1:3]:
            ours, pin, ratio = part.replace("us", "").replace("x", "").split()
            assert float(ours) > 0 and float(pin) > 0 and float(ratio) > 0
    # linearize_horizon's rows: go2 on a trot, ur5 free; against the batch and Pinocchio
    calls = out[out.index("a horizon in one call, 9 knots"):]
    for robot, schedule in (("go2", "trot"), ("ur5", "free")):
        cells = [ln for ln in calls.splitlines() if ln.startswith(robot)][0].split("|")
        assert cells[0].split()[3] == schedule
        assert float(cells[1].replace("us", "")) > 0
        for part in cells[2:4]:
            theirs, ratio = part.replace("us", "").replace("x", "").split()
            assert float(theirs) > 0 and float(ratio) > 0


def test_bench_names_an_unknown_robot_before_running(capsys):
    from sva_linearizer.cli import main

    assert main(["bench", "--horizon-robots", "ur5,talos_full_v2", "--no-cold"]) == 2
    out = capsys.readouterr()
    assert out.out == ""            # nothing ran
    assert "--horizon-robots: unknown robot 'talos_full_v2'" in out.err


@pytest.mark.parametrize("floating", [True, False])
def test_linearize_flat_is_linearize_without_the_objects(floating):
    """The lean path: the same compiled call, bitwise the same A and B as linearize, read from
    the caller's flat vectors and written into the Data."""
    model, st, tau, rng = _tree_state_tau(11, 7, floating)
    data = sl.Data(model)
    ref = sl.linearize(model, st, tau)
    A, B = sl.linearize_flat(model, st.q, st.v, tau, data)
    assert A is data.A and B is data.B
    np.testing.assert_array_equal(A, ref.A)
    np.testing.assert_array_equal(B, ref.B)
    np.testing.assert_array_equal(data.nu_dot, ref.nu_dot)
    # lists and strided arrays are copied; a quaternion near unit norm is normalised in the call
    q = list(st.q)
    if floating:
        q[3:7] = [x * (1 + 3e-7) for x in q[3:7]]
    A2, _ = sl.linearize_flat(model, q, np.repeat(st.v, 2)[::2], list(tau), data)   # strided v: copied
    assert e_max(A2, ref.A) < 1e-9


def test_linearize_flat_checks_its_inputs():
    model = load_robot("quadruped")
    data = sl.Data(model)
    q = np.r_[0, 0, 0, 0, 0, 0, 1, np.zeros(model.nj)]
    v, tau = np.zeros(model.nv), np.zeros(model.nj)
    bad = q.copy()
    bad[8] = np.nan
    with pytest.raises(ValueError, match="q"):
        sl.linearize_flat(model, bad, v, tau, data)
    bad = q.copy()
    bad[3:7] = (0, 0, 0, 2)
    with pytest.raises(ValueError, match="quaternion"):
        sl.linearize_flat(model, bad, v, tau, data)
    with pytest.raises(ValueError):
        sl.linearize_flat(model, q[:-1], v, tau, data)
    with pytest.raises(ValueError, match="another model"):
        sl.linearize_flat(model, q, v, tau, sl.Data(load_robot("quadruped", floating_base=False)))
    A, _ = sl.linearize_flat(model, q, v, tau, data)      # still usable after the errors
    np.testing.assert_array_equal(A, sl.linearize(model, sl.State.from_vectors(model, q, v), tau).A)


def test_flop_counter_counts_arithmetic():
    """The profile's counting float against operation counts done by hand: a dense product of
    (n x k)(k x m) has n m k multiplications and n m (k - 1) additions."""
    from sva_linearizer.tools.profile import _COUNT, _counted

    a, b = _counted(np.ones((5, 4))), _counted(np.ones((4, 3)))
    before = _COUNT[0]
    c = a.dot(b)
    assert _COUNT[0] - before == 5 * 3 * 4 + 5 * 3 * 3
    x = _counted(np.arange(3.0))
    before = _COUNT[0]
    y = (np.sin(x[1]) * x[2] + 1.0) / x[2] - x[0]          # 4 operations, a numpy value included
    assert _COUNT[0] - before == 4 and float(y) == pytest.approx((np.sin(1.0) * 2 + 1) / 2)
    assert float(c[0, 0]) == 4.0


def test_profile_command_counts_and_times_every_stage(capsys):
    """`sva-linearizer profile`: each stage timed and counted; the matrix-vector stage's count is
    the hand count 2 nv^2 (nv products and nv sums per row) + nj (S tau - h)."""
    from sva_linearizer.cli import main
    from sva_linearizer.tools.profile import STAGES, flops_in_child

    flops = flops_in_child("ur5")
    nv = 6
    assert flops["nu_dot"] == 2 * nv * nv + nv
    assert flops["kernel"] == sum(flops[s] for s in STAGES)
    assert main(["profile", "ur5", "--reps", "3", "--runs", "2"]) == 0
    out = capsys.readouterr().out
    for stage in STAGES + ("dispatch", "Python"):
        assert any(line.strip().startswith(stage) for line in out.splitlines()), stage


@pytest.mark.skipif(not HAVE_NUMBA, reason="the horizon's parts are lane kernels (numba's)")
def test_profile_horizon_times_the_parts_that_give_the_batchs_outputs(capsys):
    """`sva-linearizer profile --horizon`: the lane pipeline and the copy-out, timed alone, give
    every state's A and B of linearize_batch (the command checks it, and fails otherwise), and each
    part is printed."""
    from sva_linearizer.cli import main
    from sva_linearizer.tools.horizon_bounds import PARTS

    assert main(["profile", "ur5", "solo12", "--horizon", "19", "--runs", "3"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("robot"))
    assert all(p in header for p in PARTS)
    assert any(line.startswith("ur5") for line in out.splitlines())
    assert any(line.startswith("solo12") for line in out.splitlines())


@pytest.mark.skipif(not HAVE_NUMBA, reason="the horizon's parts are lane kernels (numba's)")
def test_profile_horizon_without_pinocchio_writes_its_parts_and_null_ratios(tmp_path, monkeypatch, capsys):
    """Without Pinocchio, `profile --horizon --json` still times and prints every part of the
    batch, and writes Pinocchio and every ratio as null (docs/performance.md's JSON)."""
    import json

    from sva_linearizer.cli import main
    from sva_linearizer.tools import samples
    from sva_linearizer.tools.horizon_bounds import PARTS

    def no_pinocchio(*args):
        raise ImportError("no module named 'pinocchio'")

    monkeypatch.setattr(samples, "pinocchio_model", no_pinocchio)
    out = tmp_path / "h.json"
    assert main(["profile", "ur5", "--horizon", "9", "--runs", "3", "--json", str(out)]) == 0
    assert any(line.startswith("ur5") for line in capsys.readouterr().out.splitlines())
    row = json.loads(out.read_text())["horizon"][0]
    assert row["Pinocchio"] is None and set(row["ratio"]) == set(PARTS)
    assert all(v is None for v in row["ratio"].values())
    assert all(row[p] > 0 for p in PARTS if p not in ("Pinocchio", "Python")) and row["Python"] >= 0


def test_read_only_inputs_give_the_same_numbers_and_compile_nothing():
    """numba compiles a kernel once per argument type, and a read-only array (np.frombuffer, a ROS
    message's array, a view of a read-only batch) is another type than a writeable one: before
    kernel_array, a read-only tau sent linearize into a fresh compile of the whole pipeline (16 s
    on ur5). Every public entry point now gives such inputs the types the kernels were compiled
    for: the same numbers, and no dispatcher gains a signature."""
    from sva_linearizer import _jit
    from sva_linearizer.spatial import quat_to_matrix

    model = load_robot("quadruped")
    rng = np.random.default_rng(3)
    quat = rng.normal(size=4)
    q = np.r_[rng.normal(size=3), quat / np.linalg.norm(quat), rng.uniform(-1, 1, model.nj)]
    v, tau, nu_dot = rng.normal(size=model.nv), rng.normal(size=model.nj), rng.normal(size=model.nv)
    Q, V, T = np.stack([q, q]), np.stack([v, 2 * v]), np.stack([tau, -tau])
    feet = [sl.Contact(f, "point", "world_aligned", baumgarte=(5.0, 1.0)) for f in ("LF_foot", "RH_foot")]
    push = [(sl.Contact("RF_foot", "point", "local"), np.array([1.0, 2.0, 30.0]))]

    def every_entry(q, v, tau, nu_dot, Q, V, T, data):
        st = sl.State.from_vectors(model, q, v)
        lin = sl.linearize(model, st, tau, dt=0.01)
        flat = sl.linearize_flat(model, q, v, tau, data)
        Ab, Bb = sl.linearize_batch(model, Q, V, T)
        c = sl.linearize(model, st, tau, contacts=feet, forces=push)
        A_ro, B_ro, vp = (np.array(x) for x in (lin.A, lin.B, v[:6]))
        if not q.flags.writeable:
            for x in (A_ro, B_ro, vp):
                x.setflags(write=False)
        return [lin.A, lin.B, lin.Ad, lin.Bd, flat[0].copy(), flat[1].copy(), Ab, Bb, c.A, c.B, c.forces,
                sl.forward_dynamics(model, st, tau), sl.extended_inverse_dynamics(model, st, nu_dot),
                *sl.extended_inverse_dynamics_derivatives(model, st, nu_dot),
                *sl.discretize(A_ro, B_ro, 0.01, v_plus=vp), quat_to_matrix(q[3:7])]

    ref = every_entry(q, v, tau, nu_dot, Q, V, T, sl.Data(model))   # compiles or loads what they need
    signatures = [len(d.signatures) for d in _jit.DISPATCHERS]

    def read_only(x):
        y = np.frombuffer(np.array(x).tobytes()).reshape(np.shape(x))
        assert not y.flags.writeable
        return y

    got = every_entry(*(read_only(x) for x in (q, v, tau, nu_dot, Q, V, T)), sl.Data(model))
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(a, b)
    grown = [d.py_func.__qualname__ for d, n in zip(_jit.DISPATCHERS, signatures) if len(d.signatures) != n]
    assert not grown, f"read-only inputs compiled new versions of {grown}"
