# SPDX-License-Identifier: BSD-3-Clause
"""Contacts API: validation with errors that name the problem, merged URDF links as frames, the
singular / redundant contact set error, forward_dynamics with contacts satisfies the constraint."""
import threading

import numpy as np
import pytest

import sva_linearizer as sl
from fd_tools import random_state, random_tree
from sva_linearizer.robots import robot_urdf_path
from sva_linearizer.spatial import xform


def _run_threads(work, n):
    """work(t) on n threads at once; the exceptions they raised."""
    errors = []

    def run(t):
        try:
            work(t)
        except Exception as e:  # pragma: no cover - returned to the test
            errors.append(e)
    threads = [threading.Thread(target=run, args=(t,)) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return errors


def test_contact_validation_names_the_problem():
    with pytest.raises(ValueError, match="kind must be one of"):
        sl.Contact("foot", kind="plane")
    with pytest.raises(ValueError, match="reference must be one of"):
        sl.Contact("foot", reference="world")
    with pytest.raises(ValueError, match="offset must be 3 finite numbers"):
        sl.Contact("foot", offset=(0, 0))
    with pytest.raises(ValueError, match="baumgarte must be"):
        sl.Contact("foot", baumgarte=(1.0,))
    with pytest.raises(ValueError, match="frame must be a non-empty"):
        sl.Contact("")
    with pytest.raises(ValueError, match="anchor"):
        sl.Contact("foot", kind="6d", anchor=(np.ones((3, 3)), np.zeros(3)))
    c = sl.Contact("foot", kind="6d", baumgarte=(3, 1))
    assert c.dim == 6 and c.baumgarte == (3.0, 1.0)


def test_unknown_frame_and_bad_force_are_named():
    rng = np.random.default_rng(0)
    model = random_tree(rng, n=4)
    st = random_state(model, rng)
    tau = np.zeros(model.nj)
    with pytest.raises(ValueError, match="unknown frame 'toe'"):
        sl.linearize(model, st, tau, contacts=[sl.Contact("toe")])
    with pytest.raises(ValueError, match="must be an sl.Contact"):
        sl.linearize(model, st, tau, contacts=["j1"])
    with pytest.raises(ValueError, match="3 finite numbers"):
        sl.linearize(model, st, tau, forces=[(sl.Contact("j1"), [1.0, 2.0])])
    with pytest.raises(ValueError, match="unknown frame"):
        sl.frame_placement(model, st, "nope")
    with pytest.raises(ValueError, match="reference must be one of"):
        sl.frame_jacobian(model, st, "j1", reference="world")


def test_merged_links_stay_frames():
    """solo12's feet are links welded to the lower legs by fixed joints: they are frames, placed
    where the URDF puts them (the fixed joint's origin composed with the lower leg's pose)."""
    model = sl.load_urdf(robot_urdf_path("solo12"))
    assert "FL_FOOT" in model.frame_names and "FL_FOOT" not in model.joint_names
    body, R, p = model.frame("FL_FOOT")
    assert model.joint_names[body] == "FL_KFE" and np.linalg.norm(p) > 0.1
    st = sl.State(model)
    Rk, pk = sl.frame_placement(model, st, "FL_LOWER_LEG")
    Rf, pf = sl.frame_placement(model, st, "FL_FOOT")
    assert np.allclose(pf, pk + Rk @ p) and np.allclose(Rf, Rk @ R)


def test_redundant_contacts_are_named():
    """Two 6d contacts on a fixed-base arm's last two links: more constraints than joints."""
    rng = np.random.default_rng(2)
    model = random_tree(rng, n=6, floating_base=False, parents=[0, 1, 2, 3, 4, 5])
    st = random_state(model, rng)
    cs = [sl.Contact("j5", "6d"), sl.Contact("j4", "6d")]
    with pytest.raises(ValueError, match=r"redundant.*j5 \(6d, local\), j4 \(6d, local\)"):
        sl.linearize(model, st, np.zeros(model.nj), contacts=cs)
    with pytest.raises(ValueError, match="redundant"):
        sl.forward_dynamics(model, st, np.zeros(model.nj), contacts=cs)



def test_dependent_rows_that_hold_are_dropped_anywhere_in_the_set():
    """A fixed-base chain of 6 joints at rest, locked by a 6d contact at its end: a point contact
    on a body before it adds 3 rows that depend on the 6d ones and hold (nothing moves). Wherever
    the dependent rows sit in the set, they are dropped with no force and the rest is the solution
    with the 6d contact alone."""
    rng = np.random.default_rng(2)
    model = random_tree(rng, n=6, floating_base=False, parents=[0, 1, 2, 3, 4, 5])
    st = sl.State(model, s=rng.uniform(-1, 1, model.nj), r=np.zeros(model.nj))
    tau = rng.normal(size=model.nj)
    six, point = sl.Contact("j5", "6d"), sl.Contact("j3", "point", offset=(0.1, -0.2, 0.05))
    nu1, lam1 = sl.forward_dynamics(model, st, tau, contacts=[six])
    for cs in ([six, point], [point, six]):
        nu, lam = sl.forward_dynamics(model, st, tau, contacts=cs)
        assert np.abs(nu).max() <= 1e-9 and np.abs(nu1).max() <= 1e-9
        kept = lam[0:6] if cs[0] is six else lam[3:9]
        dropped = lam[6:9] if cs[0] is six else lam[0:3]
        if cs[0] is six:
            assert np.array_equal(dropped, np.zeros(3))
            assert np.allclose(kept, lam1, rtol=1e-9, atol=1e-9 * np.abs(lam1).max())
        # (the point first: three of the 6d rows are dropped instead; the forces still balance tau)
        at_point = xform(np.eye(3), -np.asarray(point.offset))
        Jc = np.vstack([sl.frame_jacobian(model, st, c.frame) if c.kind == "6d" else
                        (at_point @ sl.frame_jacobian(model, st, c.frame))[0:3] for c in cs])
        h = sl.extended_inverse_dynamics(model, st, np.zeros(model.nv))
        assert np.allclose(Jc.T @ lam, h - tau, atol=1e-9 * np.abs(h - tau).max())

def test_constrained_acceleration_meets_the_constraint():
    """J nu_dot + J-dot nu = -(Kd v_c + Kp e): checked against a finite difference of the contact
    point's world velocity along the motion (point, world_aligned, anchor at the current pose)."""
    rng = np.random.default_rng(4)
    model = random_tree(rng, n=8, floating_base=True)
    st = random_state(model, rng)
    tau = rng.normal(size=model.nj)
    kd = 2.0
    c = sl.Contact("j7", "point", "world_aligned", offset=(0.05, 0.0, 0.0), baumgarte=(0.0, kd))
    nu_dot, lam = sl.forward_dynamics(model, st, tau, contacts=[c])
    assert lam.shape == (3,)
    from fd_tools import perturbed

    def point_velocity(s):
        R, _ = sl.frame_placement(model, s, "j7")
        J = sl.frame_jacobian(model, s, "j7", "world_aligned")
        w = J[3:6] @ s.v
        return J[0:3] @ s.v + np.cross(w, R @ c.offset)

    h = 1e-6
    nv = model.nv
    z = np.concatenate([st.v, nu_dot]) * h     # move along the flow: q by nu h, nu by nu_dot h
    acc = (point_velocity(perturbed(model, st, z)) - point_velocity(perturbed(model, st, -z))) / (2 * h)
    vc = point_velocity(st)
    assert np.allclose(acc, -kd * vc, atol=1e-6 * max(1.0, np.abs(vc).max()))
    assert nv == nu_dot.size


def test_contacts_are_immutable_and_reused_buffers_do_not_leak():
    """A Contact cannot change after it is built (the compiled buffers kept per Data rely on it);
    alternating contact sets on one Data, and several threads at once, give what fresh calls give."""

    c = sl.Contact("j3", "point", baumgarte=(1.0, 2.0))
    with pytest.raises(AttributeError):
        c.baumgarte = (0.0, 0.0)
    with pytest.raises(ValueError):
        c.offset[0] = 1.0
    rng = np.random.default_rng(9)
    model = random_tree(rng, n=10, floating_base=True)
    st = random_state(model, rng)
    tau = rng.normal(size=model.nj)
    sets = [[sl.Contact("j9", "6d", "world_aligned", baumgarte=(3.0, 1.0))],
            [sl.Contact("j8", "point", "local", offset=(0.1, 0, 0)), sl.Contact("j5", "point", "world_aligned")]]
    fresh = [sl.linearize(model, st, tau, contacts=s, data=sl.Data(model)) for s in sets]
    d = sl.Data(model)
    for i in (0, 1, 0, 1):
        lin = sl.linearize(model, st, tau, contacts=sets[i], data=d)
        assert np.array_equal(lin.A, fresh[i].A) and np.array_equal(lin.forces, fresh[i].forces)
    out = {}

    def work(t):
        for _ in range(5):
            out[t] = sl.linearize(model, st, tau, contacts=sets[t % 2])
    errors = _run_threads(work, 4)
    assert not errors
    for t, lin in out.items():
        assert np.array_equal(lin.A, fresh[t % 2].A) and np.array_equal(lin.dforces_dz, fresh[t % 2].dforces_dz)


NOJIT_SCRIPT = """
import json, numpy as np, sva_linearizer as sl, sva_linearizer._jit as j
from sva_linearizer.robots import load_robot
m = load_robot("quadruped")
rng = np.random.default_rng(5)
q = np.r_[rng.normal(size=3), [0.1, -0.2, 0.3, 0.9] / np.linalg.norm([0.1, -0.2, 0.3, 0.9]), rng.uniform(-1, 1, 12)]
st = sl.State.from_vectors(m, q, rng.normal(size=18))
cs = [sl.Contact(f, "point", "world_aligned", baumgarte=(5.0, 1.0)) for f in ("LF_foot", "RF_foot", "LH_foot")]
fs = [(sl.Contact("RH_foot", "point", "local"), [1.0, 2.0, 30.0])]
lin = sl.linearize(m, st, rng.normal(size=12), contacts=cs, forces=fs)
print(json.dumps({"jit": j.HAVE_NUMBA, "A": lin.A.tolist(), "B": lin.B.tolist(), "f": lin.forces.tolist(),
                  "dz": lin.dforces_dz.tolist()}))
"""


def test_contacts_pure_python_path_gives_the_same_numbers():
    """The compiled contact pipeline and the same code run as plain Python (no numba) agree."""
    import json
    import os
    import subprocess
    import sys

    results = {}
    for flag in ("0", "1"):
        env = dict(os.environ, SVA_LINEARIZER_NO_JIT=flag)
        out = subprocess.run([sys.executable, "-c", NOJIT_SCRIPT], env=env, capture_output=True, text=True,
                             timeout=600, check=True)
        results[flag] = json.loads(out.stdout.strip().splitlines()[-1])
    assert results["1"]["jit"] is False and results["0"]["jit"] is True
    for key in ("A", "B", "f", "dz"):
        X, Y = np.array(results["0"][key]), np.array(results["1"][key])
        assert np.max(np.abs(X - Y)) <= 1e-10 * max(1.0, np.abs(Y).max()), key


def test_contact_plans_reused_across_sets_states_and_forces():
    """One Data keeps a plan (packed contacts, workspace) per contact set: alternating sets, states
    that change between calls, new lists of the same Contacts and new input-force values give
    exactly what a fresh Data gives; a bad force on a known plan is still named; Data.copy()
    does not share the plans."""
    rng = np.random.default_rng(21)
    model = random_tree(rng, n=14, floating_base=True)
    states = [random_state(model, rng) for _ in range(3)]
    taus = [rng.normal(size=model.nj) for _ in range(3)]
    c6 = sl.Contact("j13", "6d", "world_aligned", baumgarte=(3.0, 1.0))
    cp = sl.Contact("j6", "point", "local", offset=(0.1, 0.0, 0.0), baumgarte=(0.0, 2.0))
    cw = sl.Contact("j9", "point", "world_aligned")
    cf = sl.Contact("j4", "6d", "world_aligned", offset=(0.0, 0.02, 0.0))
    calls = [dict(contacts=[c6]), dict(contacts=[cp, cw]), dict(contacts=[cw, cp]),
             dict(contacts=[cp], forces=[(cf, rng.normal(size=6))]),
             dict(contacts=[cp], forces=[(cf, rng.normal(size=6))]), dict(forces=[(cw, rng.normal(size=3))]),
             dict(contacts=[c6], generator=True)]
    d = sl.Data(model)
    for k in range(3 * len(calls)):
        kw = dict(calls[k % len(calls)])
        i = (k * 5) % 3
        mine_kw = dict(kw)
        if mine_kw.pop("generator", False):
            kw.pop("generator")
            mine_kw["contacts"] = (c for c in kw["contacts"])     # a new generator each time
        mine = sl.linearize(model, states[i], taus[i], data=d, **mine_kw)
        ref = sl.linearize(model, states[i], taus[i], data=sl.Data(model), **kw)
        for name in ("A", "B", "nu_dot", "forces", "dforces_dz", "dforces_dtau"):
            X, Y = getattr(mine, name), getattr(ref, name)
            assert (X is None and Y is None) or np.array_equal(X, Y), (k, name)
    with pytest.raises(ValueError, match="force must be 6 finite numbers"):
        sl.linearize(model, states[0], taus[0], contacts=[cp], forces=[(cf, np.ones(5))], data=d)
    with pytest.raises(ValueError, match="force must be 6 finite numbers"):
        sl.linearize(model, states[0], taus[0], contacts=[cp], forces=[(cf, [np.nan] * 6)], data=d)
    d2 = d.copy()
    assert "_contact_sets" not in d2.__dict__
    lin2 = sl.linearize(model, states[1], taus[1], contacts=[cp, cw], data=d2)
    lin1 = sl.linearize(model, states[1], taus[1], contacts=[cp, cw], data=d)
    assert np.array_equal(lin1.A, lin2.A) and np.array_equal(lin1.dforces_dz, lin2.dforces_dz)


def test_bench_contact_rows_run_against_pinocchio(capsys):
    """`sva-linearizer bench --only-contacts`: a row per robot, both sides computing the same A, B,
    forces and derivatives (its e_max column)."""
    pytest.importorskip("pinocchio")
    from sva_linearizer.cli import main

    assert main(["bench", "--only-contacts", "--contact-robots", "solo12,talos", "--batch", "3",
                 "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    for robot in ("solo12", "talos"):
        line = [ln for ln in out.splitlines() if ln.startswith(robot)][0]
        assert float(line.split("|")[-1]) < 1e-8, line


def test_contact_batches_from_threads_are_exact():
    """linearize_batch with contacts (compiled chunks on the worker threads, a plan per thread's
    Data) from several threads at once: every thread's batch is bitwise the same, and within
    1e-12 (relative to the largest entry) of linearize state by state (the lanes' compilation may
    round differently in the last bits)."""

    rng = np.random.default_rng(17)
    model = random_tree(rng, n=14, floating_base=True)
    sts = [random_state(model, rng) for _ in range(12)]
    Q, V = np.stack([s.q for s in sts]), np.stack([s.v for s in sts])
    T = rng.normal(size=(12, model.nj))
    sets = [[sl.Contact("j13", "6d", "world_aligned", baumgarte=(0.0, 2.0))],
            [sl.Contact("j6", "point", "local", baumgarte=(4.0, 1.0)), sl.Contact("j9", "point", "world_aligned")]]
    F = rng.normal(size=(12, 3))
    fc = sl.Contact("j4", "point", "world_aligned")
    ref = [[sl.linearize(model, s, T[i], contacts=cs, forces=[(fc, F[i])]) for i, s in enumerate(sts)] for cs in sets]
    out = {}
    barrier = threading.Barrier(4)

    def work(t):
        barrier.wait()
        for _ in range(3):
            out[t] = sl.linearize_batch(model, Q, V, T, contacts=sets[t % 2], forces=[(fc, F)])
    errors = _run_threads(work, 4)
    assert not errors, errors
    for t, (A, B) in out.items():
        assert np.array_equal(A, out[t % 2][0]) and np.array_equal(B, out[t % 2][1]), t
        for i, lin in enumerate(ref[t % 2]):
            for ours, r in ((A[i], lin.A), (B[i], lin.B)):
                np.testing.assert_allclose(ours, r, rtol=0, atol=1e-12 * np.abs(r).max(), err_msg=f"{t} {i}")
