"""The thesis's algorithms on a Model and a State (Python layer over kernels.py).

    rneamb                         RNEA (E.1) / RNEAmb (E.2): base acceleration and tau from r_dot
    mass_matrix                    CRBA (E.3) / CRBAmb (E.4)
    forward_dynamics               ABA (E.5) / ABAmb (E.6)
    extended_inverse_dynamics      EIDAmb (Table 4.1)
    extended_inverse_dynamics_derivatives   Tables 4.2-4.5
    inverse_mass_matrix            IMMA (Table 4.6) / IMMAmb (Table 4.7)

Every function takes an optional `data=sl.Data(model)`: the preallocated buffers of one model (the
Data of a Model/Data split, as in Pinocchio). Without it, a Data cached on the model is used.
"""
from __future__ import annotations

import numpy as np

from . import kernels as K
from .state import State, as_vector
from .spatial import crm

BASE_VELOCITY_FRAMES = ("body", "inertial")


class Data:
    """Preallocated buffers for one model: the model's arrays and every workspace the algorithms
    write, carved out of one int and one float buffer (kernels.views), so that a compiled call
    takes few arguments and allocates nothing. Results read from a Data (`data.Minv`,
    `data.nu_dot`, `data.D`, ...) are overwritten by the next call that uses it. Not thread-safe:
    use one Data per thread."""

    def __init__(self, model):
        arr = model.arrays()
        self._arrays = arr
        self.model_name = model.name
        n = model.nj
        nb = n + 1
        self.nj, self.nv, self.floating_base = n, model.nv, model.floating_base
        self.custom = tuple((j, model.bodies[j].joint, model.joint_names[j]) for j in arr.custom)
        lam = np.concatenate([[-1], arr.parent + 1]).astype(np.int64)
        children = [[] for _ in range(nb)]
        for k in range(1, nb):
            children[lam[k]].append(k)

        def ranges(joints):  # sorted joint indices -> [a, b) ranges
            out = []
            for jj in sorted(joints):
                if out and out[-1][1] == jj:
                    out[-1][1] = jj + 1
                else:
                    out.append([jj, jj + 1])
            return out

        sub_ptr, sub_rng = [0], []
        for k in range(nb):
            stack, members = [k], []
            while stack:               # subtree joints, k's own included (the smallest)
                b_ = stack.pop()
                if b_ > 0:
                    members.append(b_ - 1)
                stack.extend(children[b_])
            sub_rng += ranges(members)
            sub_ptr.append(len(sub_rng))
        self.ib = np.array([n, int(model.floating_base), len(sub_rng)] + list(lam)
                           + [0] + [int(t) for t in arr.jtype] + sub_ptr
                           + [x for rg in sub_rng for x in rg], dtype=np.int64)
        self.fb = np.zeros(K.float_size(n, 2 * model.nv))
        used = self._bind()
        assert used == self.fb.shape[0], "kernels.float_size and kernels.views disagree"
        self.Xtree[1:] = arr.Xtree
        self.I[0] = arr.base_inertia
        self.I[1:] = arr.inertia
        self.jaxis[1:] = arr.jaxis
        self.jpitch[1:] = arr.jpitch
        self.a_grav[:] = arr.a_grav
        self.R[:] = np.eye(3)
        self.A = np.zeros((2 * self.nv, 2 * self.nv))
        self.B = np.zeros((2 * self.nv, n))
        # ABA's own workspace (forward_dynamics; not on the linearization's path)
        self.c, self.pA, self.u, self.rdd = np.zeros((nb, 6)), np.zeros((nb, 6)), np.zeros(nb), np.zeros(n)

    def _bind(self):
        ints, floats, used = K.views(self.ib, self.fb)
        self.lam, self.jtype, self.sub_ptr, self.sub_rng = ints
        for name, a in zip(K.FLOAT_FIELDS, floats):
            setattr(self, name, a)
        return used

    def copy(self):
        """An independent Data for the same model (e.g. one per thread)."""
        new = object.__new__(Data)
        new.__dict__.update(self.__dict__)
        new.ib, new.fb = self.ib.copy(), self.fb.copy()
        for name in ("A", "B", "c", "pA", "u", "rdd"):
            setattr(new, name, getattr(self, name).copy())
        new._bind()
        return new

    def __repr__(self):
        return f"<sva_linearizer.Data for '{self.model_name}' nv={self.nv}>"


def get_data(model, data=None):
    """`data` checked against the model, or the Data cached on the model."""
    if data is None:
        data = model._cache.get("data")
        if data is None or data._arrays is not model.arrays():
            data = Data(model)
            model._cache["data"] = data
        return data
    if not isinstance(data, Data):
        raise ValueError(f"data must be an sva_linearizer.Data, got {type(data).__name__}")
    if data._arrays is not model.arrays():
        raise ValueError("data was built for another model (or before the model changed); "
                         "make a new one with sl.Data(model)")
    return data


def check_state(model, state):
    if not isinstance(state, State):
        raise ValueError(f"state must be an sva_linearizer.State, got {type(state).__name__}")
    if state.nj != model.nj or state.floating_base != model.floating_base:
        raise ValueError(f"state was built for another model (nj={state.nj}, floating_base="
                         f"{state.floating_base}); this model has nj={model.nj}, "
                         f"floating_base={model.floating_base}")


def fill_custom(d, s):
    """jcalc / jcalcderiv of user-defined joints (Appendix B interface), which compiled code
    cannot call: their X_J, Gamma and position twist sigma (dX_J/ds = -(sigma x) X_J) go into the
    buffers before a kernel runs."""
    for j, joint, name in d.custom:
        X, d.S[j + 1] = joint.jcalc(s[j])
        d.XJ[j + 1] = X
        d.Sig[j + 1] = position_twist(X, joint.jcalcderiv(s[j]), name, s[j])


def position_twist(X, dX, name="", s=0.0):
    """sigma with dX_J/ds = -(sigma x) X_J: the twist along which the joint moves its child per unit
    of s (Gamma for the built-in joints). A ValueError names the joint if dX is not of that form,
    i.e. not the derivative of a path of spatial transforms."""
    X = np.asarray(X, dtype=float)
    dX = np.asarray(dX, dtype=float)
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(dX))):
        raise ValueError(f"joint '{name}': jcalc / jcalcderiv returned NaN or infinite values at "
                         f"s = {s}")
    scale = max(1.0, float(np.max(np.abs(X))))
    if (np.max(np.abs(X[3:6, 0:3])) > 1e-9 * scale or np.max(np.abs(X[0:3, 0:3] - X[3:6, 3:6])) > 1e-9 * scale
            or np.max(np.abs(X[0:3, 0:3] @ X[0:3, 0:3].T - np.eye(3))) > 1e-9):
        raise ValueError(f"joint '{name}': jcalc(s) at s = {s} is not a spatial transform "
                         "[[E, o^ E], [0, E]] (E a rotation; linear-angular order, thesis (2.36))")
    W = -dX @ np.linalg.inv(X)   # = sigma x = [[w^, v^], [0, w^]]
    sigma = np.array([W[2, 4], W[0, 5], W[1, 3], W[5, 4], W[3, 5], W[4, 3]])
    resid = np.max(np.abs(W - crm(sigma)))
    if resid > 1e-8 * max(1.0, np.max(np.abs(W))):
        raise ValueError(f"joint '{name}': jcalcderiv(s) at s = {s} is not the derivative of jcalc's "
                         f"X_J (dX_J X_J^-1 is not a motion cross-product matrix; residual "
                         f"{resid:.3g})")
    return sigma


def _kinematics(model, state, data=None):
    """jcalc for every joint and ^kX_lam; base twist and gravity term a_0^r."""
    check_state(model, state)
    d = get_data(model, data)
    fill_custom(d, state.s)
    K.kinematics(d.jtype, d.jaxis, d.jpitch, d.Xtree, state.s, d.XJ, d.S, d.Sig, d.Xup)
    K.gravity_in_base(state.R, d.a_grav, d.g0)
    d.v[0] = state.v_base
    return d


def singular_mass_matrix_error(model, status):
    """The ValueError for a kernel's status code (k > 0: pivot of body k, -1: the base)."""
    if status > 0:
        return ValueError(f"the mass matrix is singular at this configuration: joint "
                          f"'{model.joint_names[status - 1]}' moves no mass or inertia here")
    return ValueError("the mass matrix is singular at this configuration: the floating base's "
                      "articulated inertia is singular")


def articulated_pivots(model, s):
    """(D_k for every joint, smallest |eigenvalue| of the base's articulated inertia) at positions s."""
    st = State(model, s=s)
    d = _kinematics(model, st)
    K.articulated_pivots(d.lam, d.Xup, d.S, d.I, d.IA, d.Dd, d.T, d.T2)
    base_ev = float(np.min(np.abs(np.linalg.eigvalsh(d.IA[0])))) if model.floating_base else np.inf
    return d.Dd[1:].copy(), base_ev


def forward_dynamics(model, state, tau, data=None):
    """ABAmb / ABA: nu_dot = [v_dot (body frame, 6); r_ddot] (floating) or r_ddot (fixed)."""
    tau = as_vector("tau", tau, model.nj)
    d = _kinematics(model, state, data)
    d.a[0] = d.g0
    status = K.abamb(d.lam, d.Xup, d.S, d.I, state.r, tau, model.floating_base, d.v, d.c, d.IA,
                     d.pA, d.U, d.Dd, d.u, d.a, d.rdd, d.T, d.T2, d.t6)
    if status != 0:
        raise singular_mass_matrix_error(model, status)
    if model.floating_base:
        return np.concatenate([d.a[0] - d.g0, d.rdd])  # remove the gravity term a_0^r
    return d.rdd.copy()


def _split_nu_dot(model, nu_dot):
    nu_dot = as_vector("nu_dot", nu_dot, model.nv)
    if model.floating_base:
        return nu_dot[0:6], nu_dot[6:]
    return np.zeros(6), nu_dot


def _run_eidamb(model, state, nu_dot, data=None):
    vdot, rdot = _split_nu_dot(model, nu_dot)
    d = _kinematics(model, state, data)
    d.a[0] = vdot + d.g0  # ^0a_{A,0} + a_0^r
    K.eidamb(d.lam, d.Xup, d.S, d.I, state.r, rdot, d.v, d.a, d.f, d.tau_id[:model.nj], d.vp, d.ap,
             d.hv, True)
    return d


def extended_inverse_dynamics(model, state, nu_dot, data=None):
    """EIDAmb (Table 4.1): [tau_b (6); tau] = M nu_dot + h (floating base), tau (fixed base).

    tau_b is the wrench the base would need (zero when nu_dot is consistent with tau)."""
    d = _run_eidamb(model, state, nu_dot, data)
    if model.floating_base:
        return np.concatenate([d.f[0], d.tau_id[:model.nj]])
    return d.tau_id[:model.nj].copy()


def rneamb(model, state, r_ddot, data=None):
    """RNEAmb (Appendix E.2) / RNEA (E.1): the base acceleration consistent with zero base wrench
    and the joint torques, for given joint accelerations. Returns (v_dot, tau); v_dot is empty for a
    fixed base."""
    r_ddot = as_vector("r_ddot", r_ddot, model.nj)
    if not model.floating_base:
        return np.zeros(0), extended_inverse_dynamics(model, state, r_ddot, data)
    # ID_b is affine in v_dot with slope M^c_0: solve M^c_0 v_dot = -ID_b(v_dot = 0)
    out0 = extended_inverse_dynamics(model, state, np.concatenate([np.zeros(6), r_ddot]), data)
    Mc0 = mass_matrix(model, state, data)[0:6, 0:6]
    vdot = -np.linalg.solve(Mc0, out0[0:6])
    tau = extended_inverse_dynamics(model, state, np.concatenate([vdot, r_ddot]), data)[6:]
    return vdot, tau


def mass_matrix(model, state, data=None):
    """CRBAmb / CRBA: the joint-space mass matrix M (nv x nv)."""
    d = _kinematics(model, state, data)
    M = np.zeros((model.nv, model.nv))
    K.crbamb(d.lam, d.Xup, d.S, d.I, model.floating_base, d.IA, M, d.t6)
    return M


def inverse_mass_matrix(model, state, out=None, data=None):
    """IMMAmb (Table 4.7) / IMMA (Table 4.6): M^-1 (nv x nv) without forming M."""
    d = _kinematics(model, state, data)
    status = K.immamb(d.lam, d.Xup, d.S, d.I, model.floating_base, d.sub_ptr, d.sub_rng, d.IA, d.U, d.Dd,
                      d.Fc, d.P, d.Minv, d.T, d.T2, d.t6)
    if status != 0:
        raise singular_mass_matrix_error(model, status)
    if out is None:
        return d.Minv.copy()
    out[...] = d.Minv
    return out


def extended_inverse_dynamics_derivatives(model, state, nu_dot, base_velocity_frame="body",
                                          data=None):
    """Derivatives of EIDAmb (Tables 4.2-4.5) at (state, nu_dot): (D_q, D_nu), each nv x nv.

    D_q columns: [z_H (6, left-trivialized: H -> H exp(z^)), s]; D_nu columns: [v (6), r].
    base_velocity_frame="body" holds the body twist v fixed (what the linearization needs);
    "inertial" holds ^A v fixed, the thesis's convention in Tables 4.1-4.2 and Chapter 5
    (thesis_notes section 3): D_v^A = D_v ^0X_A, D_H^A = D_H + D_v (v x)."""
    if base_velocity_frame not in BASE_VELOCITY_FRAMES:
        raise ValueError(f"base_velocity_frame must be one of {BASE_VELOCITY_FRAMES}, "
                         f"got {base_velocity_frame!r}")
    d = _run_eidamb(model, state, nu_dot, data)
    K.eidamb_derivatives(d.lam, model.floating_base, d.S, d.Sig, d.Xup, d.I, d.v, d.vp, d.ap, d.hv,
                         d.f, d.g0, d.IC, d.KC, d.hC, d.Ps, d.tt, d.cur, d.D, d.T2, d.t6)
    nv = model.nv
    D_q, D_nu = d.D[:, :nv].copy(), d.D[:, nv:].copy()
    if model.floating_base and base_velocity_frame == "inertial":
        from .spatial import crm, xform

        Dv = D_nu[:, 0:6].copy()
        X0A = xform(state.R.T, -state.R.T @ state.p)  # ^0X_A
        D_nu[:, 0:6] = Dv @ X0A
        D_q[:, 0:6] += Dv @ crm(state.v_base)         # Prop. 4.1 (4.21): d(^0X_A ^Av)/dH = v x
    return D_q, D_nu
