# SPDX-License-Identifier: BSD-3-Clause
"""Contacts against Lie-group central finite differences on random trees (fd_tools): frame
Jacobians, forces as inputs (A, B_f) and rigid contacts (A, B, the forces and their derivatives)."""
import numpy as np
import pytest

import sva_linearizer as sl
from fd_tools import e_max, perturbed, random_state, random_tree
from sva_linearizer.spatial import se3_log

H = 1e-6


def fd_columns(fun, model, st, h=H):
    """Central differences of fun(state) over z (2nv columns) on the Lie group."""
    nx = 2 * model.nv
    cols = []
    for c in range(nx):
        z = np.zeros(nx)
        z[c] = h
        cols.append((np.asarray(fun(perturbed(model, st, z))) - np.asarray(fun(perturbed(model, st, -z)))) / (2 * h))
    return np.stack(cols, axis=-1)


TWO_LEGS = [0, 1, 2, 3, 4, 5, 6, 0, 8, 9, 10, 11, 12, 13]   # two chains of 7 joints from the base
FEET = ["j6", "j13"]


def random_contacts(model, rng, kinds, references, gains=False):
    names = FEET[:len(kinds)]
    cs = []
    for name, kind, ref in zip(names, kinds, references):
        kp, kd = (rng.uniform(1, 20), rng.uniform(1, 10)) if gains else (0.0, 0.0)
        cs.append(sl.Contact(str(name), kind=kind, reference=ref, offset=rng.normal(size=3) * 0.1,
                             baumgarte=(kp, kd)))
    return cs


def anchored(model, st, contacts):
    """The same contacts with the anchor fixed at the frames' poses at st (what anchor=None means
    for the linearization; a finite difference must not move it)."""
    out = []
    for c in contacts:
        R, p = sl.frame_placement(model, st, c.frame)
        p = p + R @ c.offset
        out.append(sl.Contact(c.frame, c.kind, c.reference, c.offset, c.baumgarte, anchor=(R, p)))
    return out


@pytest.mark.parametrize("floating", [True, False])
def test_frame_jacobian_is_the_pose_derivative(floating):
    rng = np.random.default_rng(11)
    model = random_tree(rng, n=7, floating_base=floating)
    st = random_state(model, rng)
    nv = model.nv
    for frame in ("j3", "j6"):
        R0, p0 = sl.frame_placement(model, st, frame)

        def local_log(s):
            R, p = sl.frame_placement(model, s, frame)
            return se3_log(R0.T @ R, R0.T @ (p - p0))
        Jfd = fd_columns(local_log, model, st)[:, :nv]
        J = sl.frame_jacobian(model, st, frame)
        assert e_max(J, Jfd) <= 1e-7
        # the twist is J nu, in both references
        assert np.allclose(sl.frame_velocity(model, st, frame), J @ st.v, atol=1e-12)
        Jw = sl.frame_jacobian(model, st, frame, reference="world_aligned")
        assert np.allclose(Jw[0:3], R0 @ J[0:3]) and np.allclose(Jw[3:6], R0 @ J[3:6])
        assert np.allclose(sl.frame_velocity(model, st, frame, "world_aligned"), Jw @ st.v, atol=1e-12)


@pytest.mark.parametrize("reference", ["local", "world_aligned"])
@pytest.mark.parametrize("floating", [True, False])
def test_forces_as_inputs_fd(reference, floating):
    rng = np.random.default_rng(5 + floating)
    model = random_tree(rng, n=14, floating_base=floating, parents=TWO_LEGS)
    st = random_state(model, rng)
    tau = rng.normal(size=model.nj)
    cs = random_contacts(model, rng, ["point", "6d"], [reference, reference])
    fs = [(cs[0], rng.normal(size=3) * 5), (cs[1], rng.normal(size=6) * 5)]
    lin = sl.linearize(model, st, tau, forces=fs)
    nv, nj = model.nv, model.nj
    A_fd = fd_columns(lambda s: sl.forward_dynamics(model, s, tau, forces=fs), model, st)
    assert e_max(lin.A[nv:], A_fd) <= 1e-6, e_max(lin.A[nv:], A_fd)
    assert lin.B.shape == (2 * nv, nj + 9)
    # B_f: the forward dynamics is affine in f
    Bf = np.zeros((nv, 9))
    for i in range(9):
        df = np.zeros(9)
        df[i] = 1.0
        fp = [(cs[0], fs[0][1] + df[0:3]), (cs[1], fs[1][1] + df[3:9])]
        Bf[:, i] = sl.forward_dynamics(model, st, tau, forces=fp) - sl.forward_dynamics(model, st, tau, forces=fs)
    assert e_max(lin.B[nv:, nj:], Bf) <= 1e-8
    assert np.allclose(lin.B[:, :nj], sl.linearize(model, st, tau).B)
    assert np.all(lin.B[:nv] == 0)


CASES = [  # (kinds, references, Baumgarte gains)
    (["point", "point"], ["local", "local"], False),
    (["point", "point"], ["world_aligned", "world_aligned"], True),
    (["6d"], ["local"], True),
    (["6d", "point"], ["world_aligned", "local"], False),
    (["6d", "point"], ["world_aligned", "world_aligned"], True),
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("floating", [True, False])
def test_rigid_contacts_fd(case, floating):
    kinds, refs, gains = CASES[case]
    rng = np.random.default_rng(100 + case + 10 * floating)
    model = random_tree(rng, n=14, floating_base=floating, parents=TWO_LEGS)
    st = random_state(model, rng)
    tau = rng.normal(size=model.nj)
    cs = random_contacts(model, rng, kinds, refs, gains)
    lin = sl.linearize(model, st, tau, contacts=cs)
    nv, nj = model.nv, model.nj
    fixed = anchored(model, st, cs)
    nu0, lam0 = sl.forward_dynamics(model, st, tau, contacts=fixed)
    assert np.allclose(nu0, lin.nu_dot, rtol=1e-10, atol=1e-10 * np.abs(nu0).max())
    assert np.allclose(lam0, lin.forces, rtol=1e-10, atol=1e-10 * np.abs(lam0).max())
    # the constraint holds: Jc nu_dot + drift = -(Kd v_c + Kp e)
    both = fd_columns(lambda s: np.concatenate(sl.forward_dynamics(model, s, tau, contacts=fixed)),
                      model, st)
    A_fd, L_fd = both[:nv], both[nv:]
    assert e_max(lin.A[nv:], A_fd) <= 1e-6, e_max(lin.A[nv:], A_fd)
    assert e_max(lin.dforces_dz, L_fd) <= 1e-6, e_max(lin.dforces_dz, L_fd)
    Bn = np.zeros((nv, nj))
    Bl = np.zeros((lin.forces.size, nj))
    for i in range(nj):
        dt_ = np.zeros(nj)
        dt_[i] = 1.0
        n1, l1 = sl.forward_dynamics(model, st, tau + dt_, contacts=fixed)
        n2, l2 = sl.forward_dynamics(model, st, tau - dt_, contacts=fixed)
        Bn[:, i], Bl[:, i] = (n1 - n2) / 2, (l1 - l2) / 2
    assert e_max(lin.B[nv:], Bn) <= 1e-8
    assert e_max(lin.dforces_dtau, Bl) <= 1e-8


def test_discrete_step_with_contacts_fd():
    """dt=: Ad, Bd of the semi-implicit Euler step of the constrained dynamics against central
    differences of that step on the Lie group (z+ = log(H+nominal^-1 H+), s+, nu+)."""
    from sva_linearizer.spatial import se3_exp

    rng = np.random.default_rng(21)
    model = random_tree(rng, n=14, floating_base=True, parents=TWO_LEGS)
    st = random_state(model, rng)
    tau = rng.normal(size=model.nj)
    cs = random_contacts(model, rng, ["point", "6d"], ["world_aligned", "local"], gains=True)
    fixed = anchored(model, st, cs)
    dt = 0.01
    lin = sl.linearize(model, st, tau, contacts=cs, dt=dt)
    nv = model.nv

    def step(s, t=tau):
        nu_dot, _ = sl.forward_dynamics(model, s, t, contacts=fixed)
        nu_p = s.v + dt * nu_dot
        dR, dp = se3_exp(dt * nu_p[0:6])
        return s.R @ dR, s.p + s.R @ dp, s.s + dt * nu_p[6:], nu_p

    R0, p0, s0, nu0 = step(st)

    def z_plus(res):
        R, p, sj, nup = res
        return np.concatenate([se3_log(R0.T @ R, R0.T @ (p - p0)), sj - s0, nup - nu0])

    Ad_fd = fd_columns(lambda s: z_plus(step(s)), model, st)
    assert e_max(lin.Ad, Ad_fd) <= 1e-6, e_max(lin.Ad, Ad_fd)
    Bd_fd = np.zeros((2 * nv, model.nj))
    for i in range(model.nj):
        e = np.zeros(model.nj)
        e[i] = 1e-3
        Bd_fd[:, i] = (z_plus(step(st, tau + e)) - z_plus(step(st, tau - e))) / 2e-3
    assert e_max(lin.Bd, Bd_fd) <= 1e-6, e_max(lin.Bd, Bd_fd)


def test_batch_with_contacts_and_forces():
    rng = np.random.default_rng(8)
    model = random_tree(rng, n=14, floating_base=True, parents=TWO_LEGS)
    sts = [random_state(model, rng) for _ in range(3)]
    Q = np.stack([s.q for s in sts])
    V = np.stack([s.v for s in sts])
    T = rng.normal(size=(3, model.nj))
    c_rigid = sl.Contact("j6", "point", "world_aligned", baumgarte=(5.0, 1.0))
    c_force = sl.Contact("j13", "6d", "local")
    F = rng.normal(size=(3, 6))
    A, B = sl.linearize_batch(model, Q, V, T, contacts=[c_rigid], forces=[(c_force, F)])
    Ad, Bd = sl.linearize_batch(model, Q, V, T, contacts=[c_rigid], forces=[(c_force, F)], dt=0.02)
    assert B.shape == (3, 2 * model.nv, model.nj + 6)
    for i, s in enumerate(sts):
        lin = sl.linearize(model, s, T[i], contacts=[c_rigid], forces=[(c_force, F[i])], dt=0.02)
        for ours, ref in ((A[i], lin.A), (B[i], lin.B), (Ad[i], lin.Ad), (Bd[i], lin.Bd)):
            np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12 * np.abs(ref).max())   # lanes: last bits


@pytest.mark.parametrize("floating", [True, False])
def test_rigid_contacts_with_input_forces_fd(floating):
    """Both at once: a rigid contact on one leg, a given force on the other (B = [B_tau | B_f],
    B_f through the KKT system)."""
    rng = np.random.default_rng(31 + floating)
    model = random_tree(rng, n=14, floating_base=floating, parents=TWO_LEGS)
    st = random_state(model, rng)
    tau = rng.normal(size=model.nj)
    c = sl.Contact("j6", "point", "world_aligned", offset=(0.02, 0.01, 0.0), baumgarte=(8.0, 2.0))
    cf = sl.Contact("j13", "6d", "world_aligned", offset=(0.0, -0.03, 0.02))
    f = rng.normal(size=6) * 4
    lin = sl.linearize(model, st, tau, contacts=[c], forces=[(cf, f)])
    fixed = anchored(model, st, [c])
    nv, nj = model.nv, model.nj
    both = fd_columns(lambda s: np.concatenate(sl.forward_dynamics(model, s, tau, contacts=fixed,
                                                                   forces=[(cf, f)])), model, st)
    assert e_max(lin.A[nv:], both[:nv]) <= 1e-6, e_max(lin.A[nv:], both[:nv])
    assert e_max(lin.dforces_dz, both[nv:]) <= 1e-6
    Bf = np.zeros((nv, 6))
    for i in range(6):
        e = np.zeros(6)
        e[i] = 1.0
        n1, _ = sl.forward_dynamics(model, st, tau, contacts=fixed, forces=[(cf, f + e)])
        n2, _ = sl.forward_dynamics(model, st, tau, contacts=fixed, forces=[(cf, f - e)])
        Bf[:, i] = (n1 - n2) / 2
    assert e_max(lin.B[nv:, nj:], Bf) <= 1e-8


def test_contact_on_the_floating_base_fd():
    """A 6d contact on the base body itself (empty path) and a point contact on a leg."""
    rng = np.random.default_rng(41)
    model = random_tree(rng, n=14, floating_base=True, parents=TWO_LEGS)
    st = random_state(model, rng)
    tau = rng.normal(size=model.nj)
    cs = [sl.Contact(model.base_name, "6d", "world_aligned", offset=(0.1, 0.0, -0.05), baumgarte=(4.0, 1.0)),
          sl.Contact("j13", "point", "local", baumgarte=(3.0, 2.0))]
    lin = sl.linearize(model, st, tau, contacts=cs)
    nv = model.nv
    fixed = anchored(model, st, cs)
    both = fd_columns(lambda s: np.concatenate(sl.forward_dynamics(model, s, tau, contacts=fixed)), model, st)
    assert e_max(lin.A[nv:], both[:nv]) <= 1e-6, e_max(lin.A[nv:], both[:nv])
    assert e_max(lin.dforces_dz, both[nv:]) <= 1e-6


def test_batch_with_contacts_names_the_bad_state():
    rng = np.random.default_rng(8)
    model = random_tree(rng, n=14, floating_base=True, parents=TWO_LEGS)
    sts = [random_state(model, rng) for _ in range(5)]
    Q = np.stack([s.q for s in sts])
    V = np.stack([s.v for s in sts])
    V[3, 2] = np.nan
    with pytest.raises(ValueError, match="state 3"):
        sl.linearize_batch(model, Q, V, np.zeros((5, model.nj)), contacts=[sl.Contact("j6")])
