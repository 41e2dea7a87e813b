# SPDX-License-Identifier: BSD-3-Clause
"""Independent oracles: Lie-group central finite differences of the package's forward dynamics and
EIDAmb, and random kinematic trees with every joint type."""
import numpy as np

import sva_linearizer as sl
from sva_linearizer.spatial import rot_axis_angle, se3_exp


def random_unit(rng):
    a = rng.normal(size=3)
    return a / np.linalg.norm(a)


def random_inertia(rng):
    """A physically consistent random rigid-body inertia."""
    m = rng.uniform(0.5, 3.0)
    Q = rot_axis_angle(random_unit(rng), rng.uniform(0, np.pi))
    d = np.sort(rng.uniform(0.01, 0.1, 3))
    d[2] = min(d[2], 0.99 * (d[0] + d[1]))  # triangle inequality
    return sl.Inertia(m, rng.normal(size=3) * 0.1, Q @ np.diag(d) @ Q.T)


def random_tree(rng, n=8, floating_base=True, parents=None):
    """Random tree with revolute, prismatic and helical joints about random axes, branching at the
    base and deeper (unless parents is given: parents[i] = parent index + 1, 0 = base)."""
    m = sl.Model(floating_base=floating_base, gravity=rng.normal(size=3) * 3 + [0, 0, -9.81])
    m.set_base_inertia(random_inertia(rng))
    names = []
    for i in range(n):
        if parents is not None:
            par = None if parents[i] == 0 else names[parents[i] - 1]
        else:
            k = rng.integers(0, i + 1) if i > 1 else 0
            par = None if k == 0 else names[k - 1]
        kind = i % 3
        ax = random_unit(rng)
        joint = [sl.Joint.revolute(ax), sl.Joint.prismatic(ax), sl.Joint.helical(ax, rng.uniform(-0.5, 0.5))][kind]
        R = rot_axis_angle(random_unit(rng), rng.uniform(-np.pi, np.pi))
        names.append(m.add_body(f"j{i}", par, joint, placement=(R, rng.normal(size=3) * 0.3),
                                inertia=random_inertia(rng)))
    return m


def random_state(model, rng, scale=1.0):
    nj = model.nj
    if not model.floating_base:
        return sl.State(model, s=rng.uniform(-1, 1, nj), r=rng.normal(size=nj) * scale)
    R = rot_axis_angle(random_unit(rng), rng.uniform(-np.pi, np.pi))
    return sl.State(model, R=R, p=rng.normal(size=3), s=rng.uniform(-1, 1, nj),
                    v_base=rng.normal(size=6) * scale, r=rng.normal(size=nj) * scale)


def perturbed(model, st, z):
    """The state st (+) z: H exp(z_H^), s + z_s, v + z_v, r + z_r (z in A's column order)."""
    nv, nj = model.nv, model.nj
    if not model.floating_base:
        return sl.State(model, s=st.s + z[:nj], r=st.r + z[nv:nv + nj])
    dR, dp = se3_exp(z[0:6])
    return sl.State(model, R=st.R @ dR, p=st.p + st.R @ dp, s=st.s + z[6:nv],
                    v_base=st.v_base + z[nv:nv + 6], r=st.r + z[nv + 6:])


def fd_linearization(model, st, tau, h=1e-6):
    """Central differences of forward_dynamics on the Lie group: the lower blocks of A, and B."""
    nv = model.nv
    A_low = np.zeros((nv, 2 * nv))
    for c in range(2 * nv):
        z = np.zeros(2 * nv)
        z[c] = h
        A_low[:, c] = (sl.forward_dynamics(model, perturbed(model, st, z), tau)
                       - sl.forward_dynamics(model, perturbed(model, st, -z), tau)) / (2 * h)
    B_low = np.zeros((nv, model.nj))
    ht = 1e-3 * max(1.0, float(np.max(np.abs(tau))))  # FD is affine in tau: a large step is exact
    for c in range(model.nj):
        d = np.zeros(model.nj)
        d[c] = ht
        B_low[:, c] = (sl.forward_dynamics(model, st, tau + d) - sl.forward_dynamics(model, st, tau - d)) / (2 * ht)
    return A_low, B_low


def fd_kinematic_block(model, st, h=1e-4, dt=1e-4):
    """Upper blocks of A by finite differences: z_H(t) = log(Hbar(t)^-1 H(t)) where Hbar(t) follows
    the nominal twist and H(t) the perturbed one (H(0) = H exp(z_H)); z_H_dot = d/dt z_H."""
    from sva_linearizer.spatial import se3_exp as ex, se3_log

    nv = model.nv
    if not model.floating_base:
        return np.hstack([np.zeros((nv, nv)), np.eye(nv)])

    def flow(R, p, v, t):
        dR, dp = ex(v * t)
        return R @ dR, p + R @ dp

    def z_rates(z):
        ps = perturbed(model, st, z)
        out = np.zeros(nv)
        zs = []
        for t in (dt, -dt):
            Rb, pb = flow(st.R, st.p, st.v_base, t)
            R1, p1 = flow(ps.R, ps.p, ps.v_base, t)
            zs.append(se3_log(Rb.T @ R1, Rb.T @ (p1 - pb)))
        out[0:6] = (zs[0] - zs[1]) / (2 * dt)
        out[6:] = ps.r
        return out

    A_up = np.zeros((nv, 2 * nv))
    for c in range(2 * nv):
        z = np.zeros(2 * nv)
        z[c] = h
        A_up[:, c] = (z_rates(z) - z_rates(-z)) / (2 * h)
    return A_up


def fd_eid_derivatives(model, st, nu_dot, h=1e-5, inertial=False):
    """Central differences of extended_inverse_dynamics (step h ~ eps^(1/3): truncation and rounding
    errors balanced): (D_q, D_nu); inertial=True holds ^A v
    (rather than the body twist) fixed when H is perturbed, and perturbs ^A v."""
    from sva_linearizer.spatial import xform

    nv = model.nv
    D = np.zeros((nv, 2 * nv))
    XA0 = xform(st.R, st.p) if model.floating_base else None  # ^AX_0
    vA = XA0 @ st.v_base if model.floating_base else None
    for c in range(2 * nv):
        vals = []
        for sign in (1, -1):
            z = np.zeros(2 * nv)
            z[c] = sign * h
            if inertial and model.floating_base:
                zz = z.copy()
                zz[nv:nv + 6] = 0.0
                ps = perturbed(model, st, zz)
                X0A = xform(ps.R.T, -ps.R.T @ ps.p)
                ps.v_base = X0A @ (vA + z[nv:nv + 6])
            else:
                ps = perturbed(model, st, z)
            vals.append(sl.extended_inverse_dynamics(model, ps, nu_dot))
        D[:, c] = (vals[0] - vals[1]) / (2 * h)
    return D[:, :nv], D[:, nv:]


def e_max(X, Y):
    """The thesis's (5.9) error measure max|X - Y| / mean|Y|."""
    return float(np.max(np.abs(X - Y)) / np.mean(np.abs(Y)))
