# SPDX-License-Identifier: BSD-3-Clause
"""Every public output on fixed random states, saved to an npz, and two such files compared: the
check that a change leaves the numbers as they were (run the saving half on each version).

    python -m sva_linearizer.tools.outputs save FILE.npz ur5,solo12,quadruped,g1_29dof,talos
    python -m sva_linearizer.tools.outputs compare NEW.npz OLD.npz
"""
import sys

import numpy as np

import sva_linearizer as sl
from sva_linearizer.robots import load_robot

# the robots whose feet are also linearized as point contacts
FEET = {"solo12": ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"),
        "quadruped": ("LF_foot", "RF_foot", "LH_foot", "RH_foot")}


def _random_q(m, rng, n=None):
    """Random configurations (n of them, or one): unit quaternions, joints in [-1, 1]."""
    shape = (m.nq,) if n is None else (n, m.nq)
    q = np.zeros(shape)
    if m.floating_base:
        q[..., :3] = rng.normal(size=shape[:-1] + (3,))
        quat = rng.normal(size=shape[:-1] + (4,))
        q[..., 3:7] = quat / np.linalg.norm(quat, axis=-1, keepdims=True)
    q[..., m.nq - m.nj:] = rng.uniform(-1, 1, shape[:-1] + (m.nj,))
    return q


def save(path: str, robots) -> None:
    """linearize (with dt), forward dynamics, M, M^-1, EIDAmb and its derivatives, contacts on the
    FEET robots, a frame Jacobian, for three random states of each robot, and a batch of 19 states
    with and without dt, and on the FEET robots with contacts and an input force, with and without dt."""
    out = {}
    for name in robots:
        m = load_robot(name)
        rng = np.random.default_rng(42)
        for k in range(3):
            q = _random_q(m, rng)
            v, tau = rng.normal(size=m.nv), rng.normal(size=m.nj)
            st = sl.State.from_vectors(m, q, v)
            key = f"{name}_{k}"
            lin = sl.linearize(m, st, tau, dt=0.01)
            for f in ("A", "B", "nu_dot", "Minv", "D", "Ad", "Bd"):
                out[f"{key}_lin_{f}"] = getattr(lin, f)
            out[f"{key}_fd"] = sl.forward_dynamics(m, st, tau)
            out[f"{key}_M"] = sl.mass_matrix(m, st)
            out[f"{key}_Minv"] = sl.inverse_mass_matrix(m, st)
            nd = rng.normal(size=m.nv)
            out[f"{key}_eid"] = sl.extended_inverse_dynamics(m, st, nd)
            Dq, Dn = sl.extended_inverse_dynamics_derivatives(m, st, nd)
            out[f"{key}_Dq"], out[f"{key}_Dn"] = Dq, Dn
            if name in FEET:
                cs = [sl.Contact(f, baumgarte=(1.0, 2.0)) for f in FEET[name]]
                lc = sl.linearize(m, st, tau, contacts=cs)
                for f in ("A", "B", "forces", "dforces_dz", "dforces_dtau"):
                    out[f"{key}_c_{f}"] = getattr(lc, f)
                out[f"{key}_fj"] = sl.frame_jacobian(m, st, FEET[name][0], reference="world_aligned")
        rng = np.random.default_rng(7)      # two lockstep groups of 8 and a part-filled one
        Qb = _random_q(m, rng, 19)
        Vb, Tb = rng.normal(size=(19, m.nv)), rng.normal(size=(19, m.nj))
        out[f"{name}_batch_A"], out[f"{name}_batch_B"] = sl.linearize_batch(m, Qb, Vb, Tb)
        out[f"{name}_batch_Ad"], out[f"{name}_batch_Bd"] = sl.linearize_batch(m, Qb, Vb, Tb, dt=0.01)
        if name in FEET:                    # three feet in contact, the fourth's force an input per state
            cs = [sl.Contact(f, baumgarte=(1.0, 2.0)) for f in FEET[name][:3]]
            Fb = rng.normal(scale=20.0, size=(19, 3))
            fs = [(sl.Contact(FEET[name][3]), Fb)]
            out[f"{name}_batch_c_A"], out[f"{name}_batch_c_B"] = sl.linearize_batch(
                m, Qb, Vb, Tb, contacts=cs, forces=fs)
            out[f"{name}_batch_c_Ad"], out[f"{name}_batch_c_Bd"] = sl.linearize_batch(
                m, Qb, Vb, Tb, contacts=cs, forces=fs, dt=0.01)
    np.savez(path, **out)
    print(len(out), "arrays saved to", path)


def compare(new: str, old: str) -> None:
    a, b = np.load(new), np.load(old)
    if set(a.files) != set(b.files):
        raise SystemExit(f"the files hold different arrays: {sorted(set(a.files) ^ set(b.files))}")
    worst, worst_key, bitwise = 0.0, None, 0
    for k in a.files:
        x, y = a[k], b[k]
        if np.array_equal(x, y):
            bitwise += 1
            continue
        r = float(np.max(np.abs(x - y)) / max(np.max(np.abs(y)), 1e-300))
        if r > worst:
            worst, worst_key = r, k
    print(f"{len(a.files)} arrays, {bitwise} bitwise equal, largest difference relative to the array's "
          f"largest entry {worst:.3g}" + (f" ({worst_key})" if worst_key else ""))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "save":
        save(sys.argv[2], sys.argv[3].split(","))
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(__doc__)
