# SPDX-License-Identifier: BSD-3-Clause
"""Second-order derivatives of EIDAmb (extended_inverse_dynamics_second_derivatives) against oracles
that do not use them:

1. central differences on the Lie group of Pinocchio's computeRNEADerivatives (q (+) dq by
   pin.integrate, v + dv) and of its crba, on a fixed-base arm (ur5), a quadruped (solo12) and a
   humanoid (talos), joints matched by name;
2. central differences of the package's own first-order derivatives (extended_inverse_dynamics_
   derivatives) and mass matrix on random trees with revolute, prismatic and helical joints,
   fixed and floating base;
3. the Lie bracket that makes the base block of d2tau_dq2 unsymmetric;
4. the three corrections to the printed formulas of seeds/002 (Eq. 234 against Eq. 233, the
   outer transpose of Eq. 267, K16 for j below i).
e_max <= 1e-6 against the differences (relative to the tensor's largest entry, at least 1).
"""
import numpy as np
import pytest

import sva_linearizer as sl
from fd_tools import e_max, perturbed, random_state, random_tree
from sva_linearizer.spatial import crf, crm, xform

H = 1e-5          # central-difference step: truncation ~H^2 * third derivative, rounding ~eps / H
TOL = 1e-6


def rel_err(X, Y):
    """Largest entry difference over max(1, largest |entry| of the oracle)."""
    return float(np.max(np.abs(X - Y))) / max(1.0, float(np.max(np.abs(Y))))


def own_differences(model, st, nu_dot, h=H):
    """(d2tau_dq2, d2tau_dnu2, d2tau_dq_dnu, dM_dq) by central differences of the package's
    first-order derivatives and mass matrix along z_q[k] (H exp(z^), s + z) and nu[k]."""
    nv = model.nv
    T, V, X, Q = (np.zeros((nv, nv, nv)) for _ in range(4))
    for k in range(nv):
        z = np.zeros(2 * nv)
        z[k] = h
        sp, sm = perturbed(model, st, z), perturbed(model, st, -z)
        Dp, Dm = (sl.extended_inverse_dynamics_derivatives(model, s, nu_dot) for s in (sp, sm))
        T[:, :, k] = (Dp[0] - Dm[0]) / (2 * h)
        Q[:, :, k] = (sl.mass_matrix(model, sp) - sl.mass_matrix(model, sm)) / (2 * h)
        z = np.zeros(2 * nv)
        z[nv + k] = h
        Dp, Dm = (sl.extended_inverse_dynamics_derivatives(model, perturbed(model, st, s * z), nu_dot)
                  for s in (1, -1))
        V[:, :, k] = (Dp[1] - Dm[1]) / (2 * h)
        X[:, :, k] = (Dp[0] - Dm[0]) / (2 * h)
    return T, V, X, Q


def pinocchio_differences(model, pm, q, v, nu_dot, h=H):
    """The same four tensors from Pinocchio: central differences of computeRNEADerivatives'
    dtau_dq, dtau_dv (at the acceleration nu_dot) and of crba, along Pinocchio's tangent
    directions (pin.integrate: q exp(dq) for the free flyer, as our H exp(z^)), in our order."""
    import pinocchio as pin
    from ros_helpers.oracle import pinocchio_state

    pd = pm.createData()
    nv = pm.nv
    qp, vp, _, perm = pinocchio_state(model, pm, q, v, np.zeros(model.nj))
    ap = np.empty(nv)
    ap[perm] = nu_dot
    ix = np.ix_(perm, perm)
    sym = lambda A: np.triu(A) + np.triu(A, 1).T  # noqa: E731  (crba fills the upper triangle)

    def first(qq, vv):
        pin.computeRNEADerivatives(pm, pd, qq, vv, ap)
        return np.array(pd.dtau_dq)[ix], np.array(pd.dtau_dv)[ix]

    T, V, X, Q = (np.zeros((nv, nv, nv)) for _ in range(4))
    for k in range(nv):
        dq = np.zeros(nv)
        dq[perm[k]] = h
        qplus, qminus = pin.integrate(pm, qp, dq), pin.integrate(pm, qp, -dq)
        (Dqp, _), (Dqm, _) = first(qplus, vp), first(qminus, vp)
        T[:, :, k] = (Dqp - Dqm) / (2 * h)
        Q[:, :, k] = (sym(pin.crba(pm, pd, qplus))[ix] - sym(pin.crba(pm, pd, qminus))[ix]) / (2 * h)
        (Dqp, Dvp), (Dqm, Dvm) = first(qp, vp + dq), first(qp, vp - dq)
        V[:, :, k] = (Dvp - Dvm) / (2 * h)
        X[:, :, k] = (Dqp - Dqm) / (2 * h)
    return T, V, X, Q


NAMES = ("d2tau_dq2", "d2tau_dnu2", "d2tau_dq_dnu", "dM_dq")


def check(so, oracle, what):
    for name, Y in zip(NAMES, oracle):
        err = rel_err(getattr(so, name), Y)
        assert err <= TOL, f"{what}: {name} differs from the differences by {err:.2e}"


@pytest.mark.parametrize("robot, floating", [("ur5", False), ("solo12", True), ("talos", True)])
def test_real_robots_against_pinocchio(robot, floating):
    pytest.importorskip("pinocchio", reason="pin (Pinocchio) is a test dependency: pip install pin")
    from ros_helpers.oracle import robot_states

    model, pm, _, states = robot_states(robot, floating, n=1)
    q, v, _ = states[0]
    nu_dot = np.random.default_rng(5).normal(size=model.nv)
    st = sl.State.from_vectors(model, q, v)
    so = sl.extended_inverse_dynamics_second_derivatives(model, st, nu_dot)
    check(so, pinocchio_differences(model, pm, q, v, nu_dot), f"{robot} vs Pinocchio")
    if robot == "solo12":       # and the package's own first-order derivatives agree
        check(so, own_differences(model, st, nu_dot), f"{robot} vs own first order")


@pytest.mark.parametrize("floating", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
def test_random_trees_every_joint_type(floating, seed):
    rng = np.random.default_rng(100 + seed)
    model = random_tree(rng, n=7, floating_base=floating)
    st = random_state(model, rng)
    nu_dot = rng.normal(size=model.nv)
    so = sl.extended_inverse_dynamics_second_derivatives(model, st, nu_dot)
    check(so, own_differences(model, st, nu_dot), f"random tree seed {seed} floating={floating}")
    # the nu-nu block is symmetric, dM/dq is symmetric in (i, j)
    assert e_max(so.d2tau_dnu2, so.d2tau_dnu2.transpose(0, 2, 1)) <= 1e-12
    assert e_max(so.dM_dq, so.dM_dq.transpose(1, 0, 2)) <= 1e-12


def test_chain_and_deep_tree():
    """A serial chain of 9 joints (every triple on one path) and a star (none beyond depth 1)."""
    for parents in (list(range(9)), [0] * 6):
        rng = np.random.default_rng(len(parents))
        model = random_tree(rng, n=len(parents), floating_base=True, parents=parents)
        st = random_state(model, rng)
        nu_dot = rng.normal(size=model.nv)
        so = sl.extended_inverse_dynamics_second_derivatives(model, st, nu_dot)
        check(so, own_differences(model, st, nu_dot), f"parents {parents}")


def test_base_block_bracket():
    """d2tau_dq2[:, j, k] - d2tau_dq2[:, k, j] = D_q[:, :6] (e_k x e_j) for base directions j, k
    (the commutator of the left-invariant fields of SE(3)); zero for joint pairs."""
    rng = np.random.default_rng(7)
    model = random_tree(rng, n=4, floating_base=True)
    st = random_state(model, rng)
    nu_dot = rng.normal(size=model.nv)
    so = sl.extended_inverse_dynamics_second_derivatives(model, st, nu_dot)
    D_q, _ = sl.extended_inverse_dynamics_derivatives(model, st, nu_dot)
    T = so.d2tau_dq2
    E = np.eye(6)
    scale = np.abs(T).max()
    for j in range(6):
        for k in range(6):
            expect = D_q[:, :6] @ (crm(E[k]) @ E[j])
            assert np.abs(T[:, j, k] - T[:, k, j] - expect).max() <= 1e-10 * scale, (j, k)
    assert np.abs(T[:, 6:, 6:] - T[:, 6:, 6:].transpose(0, 2, 1)).max() <= 1e-10 * scale
    assert np.abs(T[:, :6, :6] - T[:, :6, :6].transpose(0, 2, 1)).max() > 1e-3 * scale


def test_data_reuse_and_contraction():
    """A Data reused at another state gives that state's numbers (no entry of the first state
    left over); lam^T d2tau/dx2 (contract) is the derivative of lam . D."""
    rng = np.random.default_rng(11)
    model = random_tree(rng, n=5, floating_base=True)
    d = sl.Data(model)
    s1, s2 = random_state(model, rng), random_state(model, rng)
    a1, a2 = rng.normal(size=model.nv), rng.normal(size=model.nv)
    sl.extended_inverse_dynamics_second_derivatives(model, s1, a1, data=d)
    so = sl.extended_inverse_dynamics_second_derivatives(model, s2, a2, data=d)
    fresh = sl.extended_inverse_dynamics_second_derivatives(model, s2, a2)
    for name in NAMES:
        np.testing.assert_array_equal(getattr(so, name), getattr(fresh, name))
    lam = rng.normal(size=model.nv)
    Lq, Lnu, Lqnu = fresh.contract(lam)
    T, V, X, _ = own_differences(model, s2, a2)
    for L, Y in ((Lq, T), (Lnu, V), (Lqnu, X)):
        assert rel_err(L, np.tensordot(lam, Y, axes=1)) <= TOL


def test_custom_joint_and_bad_inputs_raise():
    import math

    m = sl.Model(floating_base=False)

    def jcalc(s):
        return xform(np.eye(3), (-s, 0.0, 0.0)), np.array([1.0, 0, 0, 0, 0, 0])

    def jcalcderiv(s):
        return -crm(np.array([1.0, 0, 0, 0, 0, 0])) @ jcalc(s)[0]

    m.add_body("slider", None, sl.Joint.custom(jcalc, jcalcderiv), placement=(np.eye(3), (0, 0, 0)),
               inertia=sl.Inertia(1.0, (0, 0, 0), np.eye(3) * 0.01))
    st = sl.State(m, s=[0.1], r=[0.2])
    with pytest.raises(ValueError, match="custom"):
        sl.extended_inverse_dynamics_second_derivatives(m, st, [0.0])
    rng = np.random.default_rng(3)
    model = random_tree(rng, n=3, floating_base=True)
    st = random_state(model, rng)
    with pytest.raises(ValueError, match="nu_dot"):
        sl.extended_inverse_dynamics_second_derivatives(model, st, np.zeros(model.nv + 1))
    with pytest.raises(ValueError, match="nu_dot"):
        sl.extended_inverse_dynamics_second_derivatives(model, st, np.full(model.nv, math.nan))


def test_printed_formulas_errata():
    """The corrections to seeds/002's printed forms, on a floating-base chain: with the
    per-DoF ingredients in the base frame (the workspace the function fills), Eq. 233 gives the
    q-nu entry that the differences give and Eq. 234's simplified form does not; the outer
    transpose printed in Eq. 267 gives the base-base block of a joint's row transposed, which
    the differences reject; and K16 for j below i, d B^C_i / d rdot_j = B^C_j[S_j] (Eq. 108),
    not B^C_i[S_j]."""
    rng = np.random.default_rng(21)
    model = random_tree(rng, n=3, floating_base=True, parents=[0, 1, 2])    # base - j0 - j1 - j2
    st = random_state(model, rng)
    nu_dot = rng.normal(size=model.nv)
    d = sl.Data(model)
    so = sl.extended_inverse_dynamics_second_derivatives(model, st, nu_dot, data=d)
    T, _, X, _ = own_differences(model, st, nu_dot)
    w = d._second_order                              # frame 0 = the base's frame at this state
    S, Pd, PS, IC, KC, hC = w.Sg, w.Pd, w.PS, w.IC, w.KC, w.hC

    def BC(b, u):        # B^C_b[u] = 1/2 (u x* M^C - M^C u x + (M^C u) x-bar*)  (S2 eq. 15)
        M = IC[b]
        return 0.5 * (crf(u) @ M - M @ crm(u) + xbar(M @ u))

    def xbar(f):         # f x-bar*: (f x-bar*) u = u x* f
        return np.column_stack([crf(e) @ f for e in np.eye(6)])

    def two_BC(b):       # 2 B^C_b = KC + hC x-bar*
        return KC[b] + xbar(hC[b])

    # q-nu case 1B: tau of the deepest joint i = j2 (body 3, DoF 8), nu at k = j0 (DoF 6), q at
    # j = j1 (DoF 7), k before j
    i, ip, kk, jj = 3, 8, 6, 7
    s = S[ip]
    Ms = IC[i] @ s
    eq233 = (-S[kk] @ (2 * BC(i, s) @ Pd[jj]) + 2 * S[kk] @ (xbar(Ms) @ Pd[jj])
             + S[kk] @ (xbar(two_BC(i).T @ s) @ S[jj]) + PS[kk] @ (xbar(Ms) @ S[jj]))
    eq234 = (-S[kk] @ (2 * BC(i, s) @ Pd[jj]) + (2 * S[kk] + PS[kk]) @ (xbar(Ms) @ Pd[jj])
             + S[kk] @ (xbar(two_BC(i).T @ s) @ S[jj]))
    oracle = X[ip, jj, kk]            # d/dnu[k] (d tau_ip / d z_q[j])
    scale = max(1.0, abs(oracle))
    assert abs(eq233 - oracle) <= TOL * scale
    assert abs(so.d2tau_dq_dnu[ip, jj, kk] - oracle) <= TOL * scale
    assert abs(eq234 - oracle) > 1e-3 * scale, "Eq. 234's simplified form should not match"

    # Eq. 267 with its printed outer transpose: the base-base block of tau_ip's Hessian transposed
    block = T[ip, :6, :6]
    assert rel_err(so.d2tau_dq2[ip, :6, :6], block) <= TOL
    assert rel_err(so.d2tau_dq2[ip, :6, :6].T, block) > 1e-3

    # K16: d(2 B^C_1)/d rdot_j for j = j2 (body 3, below body 1) is 2 B^C_3[S_3], not 2 B^C_1[S_3]
    h = 1e-6
    ws = []
    for sign in (1, -1):
        r = st.r.copy()
        r[2] += sign * h
        d2 = sl.Data(model)
        sl.extended_inverse_dynamics_second_derivatives(
            model, sl.State(model, R=st.R, p=st.p, s=st.s, v_base=st.v_base, r=r), nu_dot, data=d2)
        ws.append(d2._second_order.KC[1] + xbar(d2._second_order.hC[1]))
    dB = (ws[0] - ws[1]) / (2 * h)
    u = S[8]
    assert np.abs(dB - 2 * BC(3, u)).max() <= 1e-6 * max(1.0, np.abs(dB).max())
    assert np.abs(dB - 2 * BC(1, u)).max() > 1e-3 * max(1.0, np.abs(dB).max())


def test_compiled_and_plain_forms_agree():
    """The kernel the suite runs (compiled) and its plain-Python form give the same numbers (up to
    the fused multiply-adds the compiler may form)."""
    from sva_linearizer import _jit
    from sva_linearizer._plain import plain_form
    from sva_linearizer.algorithms import eidamb_second_derivatives as E

    if not _jit.HAVE_NUMBA:
        pytest.skip("numba is not installed: only the plain form exists")
    rng = np.random.default_rng(31)
    model = random_tree(rng, n=6, floating_base=True)
    st = random_state(model, rng)
    nu_dot = rng.normal(size=model.nv)
    d = sl.Data(model)
    so = sl.extended_inverse_dynamics_second_derivatives(model, st, nu_dot, data=d)
    out = E._outputs(model, model.nv)
    plain_form(E.second_order_entry)(d.ib, d.fb, *d._second_order.args(), *out)
    for name, Y in zip(NAMES, out):
        assert rel_err(getattr(so, name), Y) <= 1e-12, name
