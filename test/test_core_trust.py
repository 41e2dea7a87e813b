# SPDX-License-Identifier: BSD-3-Clause
"""No wrong number on the paths users take. Threads (bitwise equal to
sequential calls), the State's copy rule, overflow named instead of NaN, huge models refused
before allocating, discrete time inside the compiled call (checked against an independent matrix
exponential), a load-balanced batch."""
import threading

import numpy as np
import pytest
from scipy.linalg import expm

import sva_linearizer as sl
from fd_tools import random_state, random_tree
from sva_linearizer import data as data_module
from sva_linearizer.linearization.discrete import se3_step_jacobians
from sva_linearizer.robots import load_robot
from sva_linearizer.spatial import crm

N_THREADS, N_STATES = 4, 400


def _states(model, n, seed):
    rng = np.random.default_rng(seed)
    sts = [random_state(model, rng) for _ in range(n)]
    return (np.array([s.q for s in sts]), np.array([s.v for s in sts]),
            rng.normal(size=(n, model.nj)))


def _in_threads(fn, n=N_THREADS):
    """Run fn(t) in n threads started together; re-raise the first error."""
    out, errors = [None] * n, []
    barrier = threading.Barrier(n)

    def run(t):
        try:
            barrier.wait()
            out[t] = fn(t)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(t,)) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not any(th.is_alive() for th in threads), "a thread did not finish"
    if errors:
        raise errors[0]
    return out


@pytest.mark.parametrize("floating", [True, False])
def test_threads_give_exactly_the_sequential_results(floating):
    """4 threads x 400 states of linearize (with and without data=) and of the other public
    functions at once: every result bitwise equal to the sequential call's."""
    model = load_robot("quadruped", floating_base=floating)
    Q, V, T = _states(model, N_STATES, 1)
    ref = [sl.linearize(model, sl.State.from_vectors(model, Q[i], V[i]), T[i]) for i in range(N_STATES)]
    ref_fd = [sl.forward_dynamics(model, sl.State.from_vectors(model, Q[i], V[i]), T[i])
              for i in range(0, N_STATES, 7)]

    def worker(t):
        data = sl.Data(model) if t % 2 else None
        bad = []
        for i in range(N_STATES):
            j = (i * (t + 1) * 7) % N_STATES       # each thread its own order
            st = sl.State.from_vectors(model, Q[j], V[j])
            lin = sl.linearize(model, st, T[j], data=data)
            if not (np.array_equal(lin.A, ref[j].A) and np.array_equal(lin.B, ref[j].B)
                    and np.array_equal(lin.nu_dot, ref[j].nu_dot)):
                bad.append(j)
            if i % 7 == 0:
                k = i // 7
                st = sl.State.from_vectors(model, Q[7 * k], V[7 * k])
                if not np.array_equal(sl.forward_dynamics(model, st, T[7 * k]), ref_fd[k]):
                    bad.append(("fd", k))
        return bad

    assert _in_threads(worker) == [[]] * N_THREADS


def test_batches_from_threads_are_exact():
    model = load_robot("quadruped")
    Q, V, T = _states(model, 64, 2)
    A0, B0 = sl.linearize_batch(model, Q, V, T)
    Ad0, Bd0 = sl.linearize_batch(model, Q, V, T, dt=0.01)

    def worker(t):
        A, B = sl.linearize_batch(model, Q, V, T, dt=0.01 if t % 2 else None)
        return np.array_equal(A, Ad0 if t % 2 else A0) and np.array_equal(B, Bd0 if t % 2 else B0)

    assert all(_in_threads(worker))
    # and the batch equals the states one by one: to rounding, not bitwise. The batch's chunk and
    # linearize's entry are two compiled copies of the pipeline, and with floating-point
    # contraction (a * b + c as one fused multiply-add where the compiler chooses) they may round
    # differently in the last bits: on an AMD Zen 1 core 6 of these 64 states differed by up to
    # 1.1e-13 (EIDAmb's bias pass), on other CPUs none do (test_speed_api's batch test has the
    # same tolerance)
    for i in range(0, 64, 9):
        lin = sl.linearize(model, sl.State.from_vectors(model, Q[i], V[i]), T[i], dt=0.01)
        for ours, ref in ((A0[i], lin.A), (Ad0[i], lin.Ad), (Bd0[i], lin.Bd)):
            np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12 * np.abs(ref).max())


def test_a_state_always_copies_the_callers_vectors():
    model = load_robot("quadruped")
    Q, V, T = _states(model, 2, 3)
    q, v = Q[0].copy(), V[0].copy()
    for quat in (q[3:7], q[3:7] * (1 + 1e-9)):   # bit-exactly unit, and within tolerance
        q[3:7] = quat
        st = sl.State.from_vectors(model, q, v)
        assert not np.shares_memory(st.q, q) and not np.shares_memory(st.v, v)
        A = sl.linearize(model, st, T[0]).A
        q[7:] += 0.3                      # updating your array in place ...
        v[:] += 1.0
        np.testing.assert_array_equal(sl.linearize(model, st, T[0]).A, A)   # ... leaves the state
        st2 = sl.State.from_vectors(model, q, v)                              # a new state sees it
        assert not np.array_equal(sl.linearize(model, st2, T[0]).A, A)


def test_huge_body_twist_is_named_not_nan():
    model = load_robot("quadruped")
    Q, V, T = _states(model, 1, 4)
    V[0, 3:6] = 1e155                      # squares overflow float64
    st = sl.State.from_vectors(model, Q[0], V[0])
    with pytest.raises(ValueError, match=r"overflowed float64: .*body twists|overflowed float64: .*momenta|"
                                         r"overflowed float64: .*forces.*largest \|entry\|.*1e\+155"):
        sl.linearize(model, st, T[0])
    with pytest.raises(ValueError, match=r"linearize_batch: state 0: .*overflowed float64"):
        sl.linearize_batch(model, Q, V, T)


def test_a_result_that_overflows_later_is_named():
    """Finite twists, but torques so large that nu_dot and A overflow."""
    model = load_robot("quadruped")
    Q, V, T = _states(model, 1, 5)
    st = sl.State.from_vectors(model, Q[0], V[0])
    with pytest.raises(ValueError, match=r"overflowed float64: .*(forces|acceleration|derivatives|A ).*1e\+306"):
        sl.linearize(model, st, np.full(model.nj, 1e306))


def test_absurd_urdf_origin_names_the_joint():
    urdf = """<robot name="r"><link name="base"><inertial><mass value="1"/>
      <inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>
      <link name="l1"><inertial><mass value="1"/>
      <inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>
      <joint name="far" type="revolute"><parent link="base"/><child link="l1"/>
      <origin xyz="1e300 0 0"/><axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/>
      </joint></robot>"""
    with pytest.raises(ValueError, match="joint 'far': .*overflow float64"):
        sl.load_urdf(urdf)


def test_a_model_whose_workspace_does_not_fit_is_refused_before_allocating(monkeypatch):
    """A 20k-joint chain: the error gives the size before anything is allocated."""
    m = sl.Model(floating_base=False)
    parent = None
    for i in range(20000):
        parent = m.add_body(f"j{i}", parent, sl.Joint.revolute((0, 0, 1)), placement=(np.eye(3), (0, 0, 0.1)),
                            inertia=sl.Inertia(1.0, (0.05, 0, 0), np.eye(3) * 1e-3))
    monkeypatch.setattr(data_module, "_available_memory", lambda: 8 * 2**30)
    with pytest.raises(ValueError, match=r"nj=20000\) needs a \d+\.\d GiB workspace.*only 8\.0 GiB"):
        sl.Data(m)


def test_se3_step_jacobians_against_the_matrix_exponential():
    """E = exp(-ad xi), Jr = sum (-ad xi)^k/(k+1)! from the 12x12 block exponential (scipy's expm,
    an independent oracle), across small, medium and large rotation angles."""
    rng = np.random.default_rng(6)
    E, J, M3 = np.zeros((6, 6)), np.zeros((6, 6)), np.zeros((10, 3, 3))
    for scale in (0.0, 1e-9, 1e-4, 0.05, 0.5, 0.99, 1.0, 1.01, 2.0, 3.0, 6.0):
        for _ in range(5):
            w = rng.normal(size=3)
            xi = np.concatenate([rng.normal(size=3), scale * w / np.linalg.norm(w)])
            Z = np.zeros((12, 12))
            Z[0:6, 0:6] = -crm(xi)
            Z[0:6, 6:12] = np.eye(6)
            X = expm(Z)
            se3_step_jacobians(xi, E, J, M3)
            np.testing.assert_allclose(E, X[0:6, 0:6], rtol=0, atol=2e-14 * max(1.0, np.abs(X).max()))
            np.testing.assert_allclose(J, X[0:6, 6:12], rtol=0, atol=2e-14 * max(1.0, np.abs(X).max()))


@pytest.mark.parametrize("floating", [True, False])
def test_discretize_equals_the_compiled_step_and_checks_its_input(floating):
    model = random_tree(np.random.default_rng(7), n=5, floating_base=floating)
    Q, V, T = _states(model, 3, 7)
    dt = 0.01
    Ad, Bd = sl.linearize_batch(model, Q, V, T, dt=dt)
    A, B = sl.linearize_batch(model, Q, V, T)
    vplus = None
    if floating:
        nud = np.array([sl.linearize(model, sl.State.from_vectors(model, Q[i], V[i]), T[i]).nu_dot
                        for i in range(3)])
        vplus = V[:, 0:6] + dt * nud[:, 0:6]
        with pytest.raises(ValueError, match="pass v_plus"):
            sl.discretize(A, B, dt)
        with pytest.raises(ValueError, match="v_plus must have shape"):
            sl.discretize(A, B, dt, vplus[0])
    Ad2, Bd2 = sl.discretize(A, B, dt, vplus)
    np.testing.assert_allclose(Ad2, Ad, rtol=0, atol=1e-13 * np.abs(Ad).max())
    np.testing.assert_allclose(Bd2, Bd, rtol=0, atol=1e-13 * np.abs(Bd).max())
    for bad in (0.0, -0.01, np.inf, True, "x"):
        with pytest.raises(ValueError, match="dt must be"):
            sl.discretize(A, B, bad, vplus)
        with pytest.raises(ValueError, match="dt must be"):
            sl.linearize_batch(model, Q, V, T, dt=bad)
    with pytest.raises(ValueError, match="B must be"):
        sl.discretize(A, B[:, :-1], dt, vplus)


def test_empty_batch_with_and_without_dt():
    model = load_robot("quadruped")
    for dt in (None, 0.01):
        A, B = sl.linearize_batch(model, np.zeros((0, model.nq)), np.zeros((0, model.nv)),
                                  np.zeros((0, model.nj)), dt=dt)
        assert A.shape == (0, 2 * model.nv, 2 * model.nv) and B.shape == (0, 2 * model.nv, model.nj)


def test_batch_uses_every_thread_it_is_given(monkeypatch):
    """SVA_LINEARIZER_NUM_THREADS sets the workers; any count gives the same numbers."""
    model = load_robot("quadruped")
    Q, V, T = _states(model, 37, 8)
    ref = sl.linearize_batch(model, Q, V, T)[0]
    for n in ("1", "3", "8"):
        monkeypatch.setenv("SVA_LINEARIZER_NUM_THREADS", n)
        np.testing.assert_array_equal(sl.linearize_batch(model, Q, V, T)[0], ref)
    monkeypatch.setenv("SVA_LINEARIZER_NUM_THREADS", "many")
    with pytest.raises(ValueError, match="SVA_LINEARIZER_NUM_THREADS"):
        sl.linearize_batch(model, Q, V, T)
