"""The thesis's algorithms on a Model and a State (Python layer over kernels.py).

    rneamb                         RNEA (E.1) / RNEAmb (E.2): base acceleration and tau from r_dot
    mass_matrix                    CRBA (E.3) / CRBAmb (E.4)
    forward_dynamics               ABA (E.5) / ABAmb (E.6)
    extended_inverse_dynamics      EIDAmb (Table 4.1)
    extended_inverse_dynamics_derivatives   Tables 4.2-4.5
    inverse_mass_matrix            IMMA (Table 4.6) / IMMAmb (Table 4.7)
"""
from __future__ import annotations

import numpy as np

from . import kernels as K
from .state import State, as_vector

BASE_VELOCITY_FRAMES = ("body", "inertial")


class Workspace:
    """Preallocated arrays for one model (the 'Data' of the Model/Data split)."""

    def __init__(self, model):
        arr = model.arrays()
        n = model.nj
        nb = n + 1
        nx = 2 * model.nv
        self.lam = np.concatenate([[-1], arr.parent + 1]).astype(np.int64)
        self.Xtree = np.zeros((nb, 6, 6))
        self.Xtree[1:] = arr.Xtree
        self.I = np.zeros((nb, 6, 6))
        self.I[0] = arr.base_inertia
        self.I[1:] = arr.inertia
        # subtree(k) as joint indices, CSR layout (for IMMA/IMMAmb)
        children = [[] for _ in range(nb)]
        for k in range(1, nb):
            children[self.lam[k]].append(k)
        ptr, idx = [0], []
        for k in range(nb):
            stack, members = [k], []
            while stack:
                b = stack.pop()
                if b > 0:
                    members.append(b - 1)
                stack.extend(children[b])
            idx.extend(sorted(members))
            ptr.append(len(idx))
        self.sub_ptr = np.array(ptr, dtype=np.int64)
        self.sub_idx = np.array(idx, dtype=np.int64)
        z66 = lambda: np.zeros((nb, 6, 6))  # noqa: E731
        z6 = lambda: np.zeros((nb, 6))  # noqa: E731
        self.XJ, self.dXJ, self.Xup, self.dXup = z66(), z66(), z66(), z66()
        self.IA, self.Ic = z66(), z66()
        self.S, self.v, self.a, self.f, self.c, self.pA, self.U = z6(), z6(), z6(), z6(), z6(), z6(), z6()
        self.Dd, self.u = np.zeros(nb), np.zeros(nb)
        self.dv, self.da, self.df = (np.zeros((nb, 6, nx)) for _ in range(3))
        self.Fc, self.P = np.zeros((nb, n, 6)), np.zeros((nb, 6, n))
        self.tau = np.zeros(n)
        self.rdd = np.zeros(n)
        self.g0 = np.zeros(6)


def workspace(model):
    ws = model._cache.get("workspace")
    if ws is None:
        ws = Workspace(model)
        model._cache["workspace"] = ws
    return ws


def _check_state(model, state):
    if not isinstance(state, State):
        raise ValueError(f"state must be an sva_linearizer.State, got {type(state).__name__}")
    if state.nj != model.nj or state.floating_base != model.floating_base:
        raise ValueError(f"state was built for another model (nj={state.nj}, floating_base="
                         f"{state.floating_base}); this model has nj={model.nj}, "
                         f"floating_base={model.floating_base}")


def _kinematics(model, state):
    """jcalc for every joint and ^kX_lam, d^kX_lam/ds_k; base twist and gravity term a_0^r."""
    _check_state(model, state)
    arr = model.arrays()
    ws = workspace(model)
    K.jcalc_builtin(arr.jtype, arr.jaxis, arr.jpitch, state.s, ws.XJ, ws.dXJ, ws.S)
    for j in arr.custom:  # user jcalc/jcalcderiv (Appendix B interface); none in URDF models
        joint = model.bodies[j].joint
        ws.XJ[j + 1], ws.S[j + 1] = joint.jcalc(state.s[j])
        ws.dXJ[j + 1] = joint.jcalcderiv(state.s[j])
    K.tree_transforms(ws.Xtree, ws.XJ, ws.dXJ, ws.Xup, ws.dXup)
    # a_0^r = ^0X_A ^A a_grav (EIDAmb line 7): gravity seen from the base frame
    ws.g0[0:3] = state.R.T @ arr.a_grav
    ws.g0[3:6] = 0.0
    ws.v[0] = state.v_base
    return arr, ws


def articulated_pivots(model, s):
    """(D_k for every joint, smallest |eigenvalue| of the base's articulated inertia) at positions s."""
    arr = model.arrays()
    ws = workspace(model)
    st = State(model, s=s)
    K.jcalc_builtin(arr.jtype, arr.jaxis, arr.jpitch, st.s, ws.XJ, ws.dXJ, ws.S)
    for j in arr.custom:
        ws.XJ[j + 1], ws.S[j + 1] = model.bodies[j].joint.jcalc(st.s[j])
    K.tree_transforms(ws.Xtree, ws.XJ, ws.dXJ, ws.Xup, ws.dXup)
    K.articulated_pivots(ws.lam, ws.Xup, ws.S, ws.I, ws.IA, ws.Dd)
    base_ev = float(np.min(np.abs(np.linalg.eigvalsh(ws.IA[0])))) if model.floating_base else np.inf
    return ws.Dd[1:].copy(), base_ev


def _check_pivots(model, ws):
    """After ABA/IMMA: M is singular at this configuration if a pivot D_k vanishes."""
    D = np.abs(ws.Dd[1:])
    if D.size and not D.min() > 1e-12 * D.max():
        j = int(np.argmin(D))
        raise ValueError(f"the mass matrix is singular at this configuration: joint "
                         f"'{model.joint_names[j]}' moves no mass or inertia here")


def forward_dynamics(model, state, tau):
    """ABAmb / ABA: nu_dot = [v_dot (body frame, 6); r_ddot] (floating) or r_ddot (fixed)."""
    tau = as_vector("tau", tau, model.nj)
    arr, ws = _kinematics(model, state)
    ws.a[0] = ws.g0
    K.abamb(ws.lam, ws.Xup, ws.S, ws.I, state.r, tau, model.floating_base, ws.v, ws.c, ws.IA,
            ws.pA, ws.U, ws.Dd, ws.u, ws.a, ws.rdd)
    _check_pivots(model, ws)
    if model.floating_base:
        return np.concatenate([ws.a[0] - ws.g0, ws.rdd])  # remove the gravity term a_0^r
    return ws.rdd.copy()


def _split_nu_dot(model, nu_dot):
    nu_dot = as_vector("nu_dot", nu_dot, model.nv)
    if model.floating_base:
        return nu_dot[0:6], nu_dot[6:]
    return np.zeros(6), nu_dot


def _run_eidamb(model, state, nu_dot):
    vdot, rdot = _split_nu_dot(model, nu_dot)
    arr, ws = _kinematics(model, state)
    ws.a[0] = vdot + ws.g0  # ^0a_{A,0} + a_0^r
    K.eidamb(ws.lam, ws.Xup, ws.S, ws.I, state.r, rdot, ws.v, ws.a, ws.f, ws.tau)
    return arr, ws


def extended_inverse_dynamics(model, state, nu_dot):
    """EIDAmb (Table 4.1): [tau_b (6); tau] = M nu_dot + h (floating base), tau (fixed base).

    tau_b is the wrench the base would need (zero when nu_dot is consistent with tau)."""
    arr, ws = _run_eidamb(model, state, nu_dot)
    if model.floating_base:
        return np.concatenate([ws.f[0], ws.tau])
    return ws.tau.copy()


def rneamb(model, state, r_ddot):
    """RNEAmb (Appendix E.2) / RNEA (E.1): the base acceleration consistent with zero base wrench
    and the joint torques, for given joint accelerations. Returns (v_dot, tau); v_dot is empty for a
    fixed base."""
    r_ddot = as_vector("r_ddot", r_ddot, model.nj)
    if not model.floating_base:
        return np.zeros(0), extended_inverse_dynamics(model, state, r_ddot)
    # ID_b is affine in v_dot with slope M^c_0: solve M^c_0 v_dot = -ID_b(v_dot = 0)
    out0 = extended_inverse_dynamics(model, state, np.concatenate([np.zeros(6), r_ddot]))
    ws = workspace(model)
    K.crbamb(ws.lam, ws.Xup, ws.S, ws.I, True, ws.Ic, np.zeros((model.nv, model.nv)))
    vdot = -np.linalg.solve(ws.Ic[0], out0[0:6])
    tau = extended_inverse_dynamics(model, state, np.concatenate([vdot, r_ddot]))[6:]
    return vdot, tau


def mass_matrix(model, state):
    """CRBAmb / CRBA: the joint-space mass matrix M (nv x nv)."""
    arr, ws = _kinematics(model, state)
    M = np.zeros((model.nv, model.nv))
    K.crbamb(ws.lam, ws.Xup, ws.S, ws.I, model.floating_base, ws.Ic, M)
    return M


def inverse_mass_matrix(model, state, out=None):
    """IMMAmb (Table 4.7) / IMMA (Table 4.6): M^-1 (nv x nv) without forming M."""
    arr, ws = _kinematics(model, state)
    return _immamb(model, ws, out)


def _immamb(model, ws, out=None):
    Minv = np.empty((model.nv, model.nv)) if out is None else out
    K.immamb(ws.lam, ws.Xup, ws.S, ws.I, model.floating_base, ws.sub_ptr, ws.sub_idx, ws.IA, ws.U,
             ws.Dd, ws.Fc, ws.P, Minv)
    return Minv


def _eid_derivatives(model, ws, state):
    """Run Tables 4.2-4.5 after _run_eidamb; returns D (nv x 2nv), columns [q-tangent | nu]."""
    nv = model.nv
    D = np.zeros((nv, 2 * nv))
    K.eidamb_derivatives(ws.lam, ws.Xup, ws.dXup, ws.S, ws.I, state.r, ws.v, ws.a, ws.f,
                         model.floating_base, ws.g0[0:3].copy(), ws.dv, ws.da, ws.df, D)
    return D


def extended_inverse_dynamics_derivatives(model, state, nu_dot, base_velocity_frame="body"):
    """Derivatives of EIDAmb (Tables 4.2-4.5) at (state, nu_dot): (D_q, D_nu), each nv x nv.

    D_q columns: [z_H (6, left-trivialized: H -> H exp(z^)), s]; D_nu columns: [v (6), r].
    base_velocity_frame="body" holds the body twist v fixed (what the linearization needs);
    "inertial" holds ^A v fixed, the thesis's convention in Tables 4.1-4.2 and Chapter 5
    (thesis_notes section 3): D_v^A = D_v ^0X_A, D_H^A = D_H + D_v (v x)."""
    if base_velocity_frame not in BASE_VELOCITY_FRAMES:
        raise ValueError(f"base_velocity_frame must be one of {BASE_VELOCITY_FRAMES}, "
                         f"got {base_velocity_frame!r}")
    arr, ws = _run_eidamb(model, state, nu_dot)
    D = _eid_derivatives(model, ws, state)
    nv = model.nv
    D_q, D_nu = D[:, :nv].copy(), D[:, nv:].copy()
    if model.floating_base and base_velocity_frame == "inertial":
        from .spatial import crm, xform

        Dv = D_nu[:, 0:6].copy()
        X0A = xform(state.R.T, -state.R.T @ state.p)  # ^0X_A
        D_nu[:, 0:6] = Dv @ X0A
        D_q[:, 0:6] += Dv @ crm(state.v_base)         # Prop. 4.1 (4.21): d(^0X_A ^Av)/dH = v x
    return D_q, D_nu
