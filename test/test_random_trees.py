# SPDX-License-Identifier: BSD-3-Clause
"""A and B against Lie-group central finite differences on random trees (all joint types, random
axes, placements and inertias, branches at the base and deeper), fixed and floating base; the
inverse mass matrix against the inverse of CRBA/CRBAmb."""
import numpy as np
import pytest

import sva_linearizer as sl
from fd_tools import (e_max, fd_eid_derivatives, fd_kinematic_block, fd_linearization, random_state,
                      random_tree)

CASES = [(seed, floating) for seed in range(4) for floating in (True, False)]


@pytest.mark.parametrize("seed,floating", CASES)
def test_A_B_against_finite_differences(seed, floating):
    rng = np.random.default_rng(seed)
    model = random_tree(rng, n=7 + seed, floating_base=floating)
    st = random_state(model, rng)
    tau = rng.normal(size=model.nj) * 5
    lin = sl.linearize(model, st, tau)
    nv = model.nv
    A_low, B_low = fd_linearization(model, st, tau)
    assert e_max(lin.A[nv:], A_low) < 1e-6
    assert e_max(lin.B[nv:], B_low) < 1e-6
    np.testing.assert_array_equal(lin.B[:nv], 0.0)
    A_up = fd_kinematic_block(model, st)
    assert np.abs(lin.A[:nv] - A_up).max() < 1e-6 * max(1.0, np.abs(A_up).max())
    # the consistent acceleration is the forward dynamics, and ID there gives tau back
    np.testing.assert_allclose(lin.nu_dot, sl.forward_dynamics(model, st, tau))
    back = sl.extended_inverse_dynamics(model, st, lin.nu_dot)
    np.testing.assert_allclose(back[nv - model.nj:], tau, atol=1e-9 * max(1, np.abs(tau).max()))


@pytest.mark.parametrize("seed,floating", CASES[:4])
def test_eid_derivatives_against_finite_differences(seed, floating):
    rng = np.random.default_rng(100 + seed)
    model = random_tree(rng, n=6, floating_base=floating)
    st = random_state(model, rng)
    nu_dot = rng.normal(size=model.nv)  # any acceleration, not only the consistent one
    for frame in ("body", "inertial"):
        Dq, Dnu = sl.extended_inverse_dynamics_derivatives(model, st, nu_dot, base_velocity_frame=frame)
        Fq, Fnu = fd_eid_derivatives(model, st, nu_dot, inertial=(frame == "inertial"))
        assert e_max(Dq, Fq) < 1e-7
        assert e_max(Dnu, Fnu) < 1e-7


def test_chain_and_star_trees():
    """A serial chain (depth N) and a star (every joint on the base)."""
    rng = np.random.default_rng(7)
    for parents in ([0, 1, 2, 3, 4, 5], [0, 0, 0, 0, 0, 0]):
        for floating in (True, False):
            model = random_tree(rng, n=6, floating_base=floating, parents=parents)
            st = random_state(model, rng)
            tau = rng.normal(size=6)
            lin = sl.linearize(model, st, tau)
            A_low, B_low = fd_linearization(model, st, tau)
            assert e_max(lin.A[model.nv:], A_low) < 1e-6
            assert e_max(lin.B[model.nv:], B_low) < 1e-6


@pytest.mark.parametrize("floating", [True, False])
def test_imma_immamb_equal_inverse_of_crba(floating):
    for seed in range(5):
        rng = np.random.default_rng(200 + seed)
        model = random_tree(rng, n=3 + 3 * seed, floating_base=floating)
        st = random_state(model, rng)
        M = sl.mass_matrix(model, st)
        np.testing.assert_allclose(M, M.T, atol=1e-12)
        Minv = sl.inverse_mass_matrix(model, st)
        assert e_max(Minv, np.linalg.inv(M)) < 1e-10
        assert e_max(Minv @ M, np.eye(model.nv)) < 1e-10


@pytest.mark.parametrize("floating", [True, False])
def test_a_workspace_full_of_nan_gives_the_same_results(floating):
    """Every kernel writes each workspace entry before it reads it (IMMAmb does not zero F_k, P_k or
    Minv first, relying on that): a Data whose whole workspace holds NaN gives M^-1 = inv(CRBA)
    and exactly the A, B, M^-1 of a fresh Data. Each entry point is compared with itself: one
    kernel's machine code in two entry points may round differently in the last bit, and which
    copy runs can depend on what the process loaded before (`sva-linearizer profile` in the same
    process changes inverse_mass_matrix's last bits). Random trees whose subtrees are several
    index ranges (the gaps between them are IMMAmb's columns outside a subtree)."""
    from sva_linearizer.layout import WORK

    def dirty(model):
        d = sl.Data(model)
        for name, _, _ in WORK:
            getattr(d, name)[...] = np.nan
        return d

    ranges = 0
    for seed in range(4):
        rng = np.random.default_rng(300 + seed)
        model = random_tree(rng, n=4 + 3 * seed, floating_base=floating)
        st = random_state(model, rng)
        tau = rng.normal(size=model.nj)
        d = dirty(model)
        ranges = max(ranges, int(np.max(np.diff(d.sub_ptr))))
        Minv = sl.inverse_mass_matrix(model, st, data=d)
        M = sl.mass_matrix(model, st)
        assert e_max(Minv, np.linalg.inv(M)) < 1e-10
        lin = sl.linearize(model, st, tau, data=dirty(model))
        ref = sl.linearize(model, st, tau, data=sl.Data(model))
        np.testing.assert_array_equal(lin.A, ref.A)
        np.testing.assert_array_equal(lin.B, ref.B)
        np.testing.assert_array_equal(lin.Minv, ref.Minv)
        np.testing.assert_array_equal(Minv, sl.inverse_mass_matrix(model, st, data=sl.Data(model)))
        assert e_max(lin.Minv, Minv) < 1e-12
    assert ranges >= 3   # some subtree is three ranges or more: the gaps are exercised


def test_linearize_batch_matches_single_states():
    rng = np.random.default_rng(3)
    model = random_tree(rng, n=5)
    states = [random_state(model, rng) for _ in range(4)]
    Q = np.array([s.q for s in states])
    V = np.array([s.v for s in states])
    T = rng.normal(size=(4, model.nj))
    A, B = sl.linearize_batch(model, Q, V, T)
    assert A.shape == (4, 2 * model.nv, 2 * model.nv) and B.shape == (4, 2 * model.nv, model.nj)
    for i in range(4):
        lin = sl.linearize(model, sl.State.from_vectors(model, Q[i], V[i]), T[i])
        np.testing.assert_allclose(A[i], lin.A, rtol=1e-13, atol=1e-12)
        np.testing.assert_allclose(B[i], lin.B, rtol=1e-13, atol=1e-12)
