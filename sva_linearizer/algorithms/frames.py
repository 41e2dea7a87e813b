"""Frames: the pose, Jacobian and velocity of a named frame (a body, or a URDF link merged into its
body through fixed joints, Model.frame), and the forward-mode derivatives of a body's twist and
acceleration that the contact constraints need.

Everything is in body coordinates, on the kinematics of a compiled call (d.Xup, d.S, d.Sig, d.v,
d.vp after eidamb_entry / the linearization's first stage), walking the path base -> body:

    v_k = X_k v_lam + Gamma_k r_k,   a_k = X_k a_lam + Gamma_k r_ddot_k + v_k x Gamma_k r_k
    (EIDAmb lines 15-18 without the gravity term), with dX_k/ds_k = -(sigma_k x) X_k, so that
    d v_k/d s_k = v_p x sigma_k (Psi-dot), d a_k/d s_k = a_p x sigma_k + (d v_k) x Gamma_k r_k
    (v_p, a_p: the parent's twist / acceleration in k's frame; the IDSVA quantities of
    notes/singh_kim_digest.md, here in the moving body's own coordinates).
The base's body twist v_0 and acceleration v_dot_0 are state / input (held fixed), so in body
coordinates nothing depends on z_H. J (the velocity Jacobian, columns [v (6), r]) and Jq (the
position Jacobian, columns [z_H (6), s]: a frame moves by M exp((Jq z)^)) differ only for custom
joints whose sigma differs from Gamma.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._jit import ensure_compiled, njit
from ..data import views
from ..spatial import placement_to_xform
from ..spatial_ops import cross_m, mv
from .common import setup

if TYPE_CHECKING:
    from ..model import Model
    from ..state import State

REFERENCES = ("local", "world_aligned")


class FrameRef:
    """A frame resolved on a model: Data body index k (0: the base), the path from the base to k
    (Data indices, base excluded), the frame's placement (R_f, p_f) in body k and ^F X_k."""

    __slots__ = ("name", "k", "path", "R_f", "p_f", "XF")

    def __init__(self, model: Model, name: str, offset=(0.0, 0.0, 0.0)):
        body, R, p = model.frame(name)
        self.name = name
        self.k = body + 1
        self.R_f = R
        self.p_f = p + R @ np.asarray(offset, dtype=float)
        self.XF = placement_to_xform(self.R_f, self.p_f)
        arr = model.arrays()
        path, j = [], body
        while j >= 0:
            path.append(j + 1)
            j = int(arr.parent[j])
        self.path = path[::-1]


def frame_ref(model: Model, name: str, offset=(0.0, 0.0, 0.0)) -> FrameRef:
    """FrameRef(model, name, offset), cached on the model (emptied when the model changes)."""
    key = (name, tuple(float(x) for x in offset))
    cache = model._frame_refs
    fr = cache.get(key)
    if fr is None:
        fr = FrameRef(model, name, offset)
        if len(cache) > 256:
            cache.clear()
        cache[key] = fr
    return fr


@njit
def frame_pose_c(m, d, q, k, R_f, p_f, R, p):
    """R, p = the world pose of the frame at (R_f, p_f) in body k, composing the tree transforms
    ^bX_lam = [[E, o^ E], [0, E]] (the child at R_rel = E^T, p_rel = -E^T o in its parent) from the
    base's pose (q[0:3] and d.R; identity for a fixed base)."""
    path = np.empty(m.nb, dtype=np.int64)
    npath = 0
    b = k
    while b > 0:
        path[npath] = b
        npath += 1
        b = m.lam[b]
    Rb = np.empty((3, 3))
    pb = np.empty(3)
    Rn = np.empty((3, 3))
    for i in range(3):
        pb[i] = q[i] if m.floating else 0.0
        for c in range(3):
            Rb[i, c] = d.R[i, c] if m.floating else (1.0 if i == c else 0.0)
    for qq in range(npath - 1, -1, -1):
        X = d.Xup[path[qq]]
        # o from o^ = F E^T
        o0 = X[2, 3] * X[1, 0] + X[2, 4] * X[1, 1] + X[2, 5] * X[1, 2]
        o1 = X[0, 3] * X[2, 0] + X[0, 4] * X[2, 1] + X[0, 5] * X[2, 2]
        o2 = X[1, 3] * X[0, 0] + X[1, 4] * X[0, 1] + X[1, 5] * X[0, 2]
        for i in range(3):
            acc = 0.0
            for c in range(3):
                acc -= Rb[i, c] * (X[0, c] * o0 + X[1, c] * o1 + X[2, c] * o2)
            pb[i] += acc
            for c in range(3):
                Rn[i, c] = Rb[i, 0] * X[c, 0] + Rb[i, 1] * X[c, 1] + Rb[i, 2] * X[c, 2]   # R E^T
        for i in range(3):
            for c in range(3):
                Rb[i, c] = Rn[i, c]
    for i in range(3):
        p[i] = pb[i] + Rb[i, 0] * p_f[0] + Rb[i, 1] * p_f[1] + Rb[i, 2] * p_f[2]
        for c in range(3):
            R[i, c] = Rb[i, 0] * R_f[0, c] + Rb[i, 1] * R_f[1, c] + Rb[i, 2] * R_f[2, c]


@njit
def frame_pose_entry(ib, fb, q, k, R_f, p_f, R, p):
    m, d, _ = views(ib, fb)
    frame_pose_c(m, d, q, k, R_f, p_f, R, p)
    return 0


def frame_pose(d, state, fr: FrameRef):
    """World pose (R, p) of a resolved frame, after the kinematics at state (frame_pose_c)."""
    R, p = np.empty((3, 3)), np.empty(3)
    frame_pose_entry(d.ib, d.fb, state.q, fr.k, fr.R_f, fr.p_f, R, p)
    return R, p


@njit(inline="always")
def _x_cols(X, M, cols, ncol, t):
    """M[:, c] = X M[:, c] for the active columns c = cols[:ncol] of a 6 x nv M; t: 6 scratch."""
    for q in range(ncol):
        c = cols[q]
        for i in range(6):
            t[i] = M[i, c]
        for i in range(6):
            M[i, c] = (X[i, 0] * t[0] + X[i, 1] * t[1] + X[i, 2] * t[2] + X[i, 3] * t[3]
                       + X[i, 4] * t[4] + X[i, 5] * t[5])


@njit
def frame_motion(m, d, k, XF, vel, nu_dot, derivatives, J, Jq, dvq, daq, dan, a, cols):
    """Frame F (^F X_k, fixed) on body k, in F's coordinates: J (6 x nv, twist = J nu), Jq (6 x nv,
    pose perturbation M -> M exp((Jq z_q)^)), a (6,): F's true (gravity-free) spatial acceleration
    at nu_dot, and with derivatives the partials at fixed (nu, nu_dot): dvq = dv_F/dz_q,
    daq = da_F/dz_q, dan = da_F/dnu (module docstring). Needs d.Xup, d.S, d.Sig, d.v, d.vp of an
    EIDAmb run at the state. cols (nv ints) gets the active columns: the base's and the path's
    joints; returns their number (the other columns are zero)."""
    nv, vidx, Xup, S, Sig = m.nv, m.vidx, d.Xup, d.S, d.Sig
    for i in range(6):
        for c in range(nv):
            J[i, c] = 0.0
            Jq[i, c] = 0.0
            dvq[i, c] = 0.0
            daq[i, c] = 0.0
            dan[i, c] = 0.0
    path = np.empty(m.nb, dtype=np.int64)
    npath = 0
    b = k
    while b > 0:
        path[npath] = b
        npath += 1
        b = m.lam[b]
    ncol = 0
    if m.floating:
        for i in range(6):
            J[i, i] = 1.0
            Jq[i, i] = 1.0
            cols[i] = i
            a[i] = nu_dot[i]
        ncol = 6
    else:
        for i in range(6):
            a[i] = 0.0
    t = np.empty(6)
    ap = np.empty(6)
    Sr = np.empty(6)
    for q in range(npath - 1, -1, -1):
        b = path[q]
        X = Xup[b]
        j = vidx[b]
        _x_cols(X, J, cols, ncol, t)
        _x_cols(X, Jq, cols, ncol, t)
        cols[ncol] = j
        ncol += 1
        for i in range(6):
            J[i, j] = S[b, i]
            Jq[i, j] = Sig[b, i]
        mv(X, a, ap)
        for i in range(6):
            Sr[i] = S[b, i] * vel[j]
            a[i] = ap[i] + S[b, i] * nu_dot[j]
        cross_m(d.v[b], Sr, a, 1.0)                              # a = X a_p + Gamma r_dd + v x Gamma r
        if derivatives:
            _x_cols(X, dvq, cols, ncol - 1, t)
            _x_cols(X, daq, cols, ncol - 1, t)
            _x_cols(X, dan, cols, ncol - 1, t)
            cross_m(d.vp[b], Sig[b], dvq[:, j], 1.0)             # Psi-dot: v_p x sigma
            cross_m(ap, Sig[b], daq[:, j], 1.0)                  # a_p x sigma
            cross_m(d.v[b], S[b], dan[:, j], 1.0)                # v x Gamma (d/d r_j of Gamma r_j)
            for qq in range(ncol):
                c = cols[qq]
                cross_m(Sr, dvq[:, c], daq[:, c], -1.0)          # (d v / d z_q) x Gamma r
                cross_m(Sr, J[:, c], dan[:, c], -1.0)            # (d v / d nu) x Gamma r
    _x_cols(XF, J, cols, ncol, t)
    _x_cols(XF, Jq, cols, ncol, t)
    if derivatives:
        _x_cols(XF, dvq, cols, ncol, t)
        _x_cols(XF, daq, cols, ncol, t)
        _x_cols(XF, dan, cols, ncol, t)
    mv(XF, a, t)
    for i in range(6):
        a[i] = t[i]
    return ncol


@njit
def frame_motion_entry(ib, fb, k, XF, vel, nu_dot, derivatives, J, Jq, dvq, daq, dan, a, cols):
    m, d, _ = views(ib, fb)
    return frame_motion(m, d, k, XF, vel, nu_dot, derivatives, J, Jq, dvq, daq, dan, a, cols)


class FrameMotion:
    """frame_motion's results for one frame (F's coordinates; see there)."""

    __slots__ = ("J", "Jq", "dvq", "daq", "dan", "a")


def frame_motion_py(d, fr: FrameRef, vel, nu_dot, derivatives=True) -> FrameMotion:
    nv = d.nv
    r = FrameMotion()
    r.J, r.Jq, r.dvq, r.daq, r.dan = (np.empty((6, nv)) for _ in range(5))
    r.a = np.empty(6)
    frame_motion_entry(d.ib, d.fb, fr.k, fr.XF, vel, np.ascontiguousarray(nu_dot, dtype=float),
                       derivatives, r.J, r.Jq, r.dvq, r.daq, r.dan, r.a, np.empty(nv, dtype=np.int64))
    return r


def _run_kinematics(model, state, data=None):
    from ..state import input_error
    from .eidamb import eidamb_entry

    ensure_compiled("contacts")
    d = setup(model, state, data)
    if eidamb_entry(d.ib, d.fb, state.q, state.v, np.zeros(model.nv)) != 0:
        raise input_error(model, state.q, state.v)
    return d


def _check_reference(reference):
    if reference not in REFERENCES:
        raise ValueError(f"reference must be one of {REFERENCES}, got {reference!r}")


def frame_placement(model: Model, state: State, frame: str, data=None) -> tuple[np.ndarray, np.ndarray]:
    """(R, p): the world pose of a frame (a body name or a URDF link, merged links included)."""
    fr = frame_ref(model, frame)
    d = _run_kinematics(model, state, data)
    R, p = frame_pose(d, state, fr)
    return R, p


def frame_jacobian(model: Model, state: State, frame: str, reference: str = "local",
                   data=None) -> np.ndarray:
    """6 x nv: the frame's twist [v; w] = J nu, in the frame's axes ("local", Pinocchio LOCAL) or
    world axes at the frame's origin ("world_aligned", LOCAL_WORLD_ALIGNED); columns [v (6), r]
    (equal to Pinocchio's getFrameJacobian with a free-flyer root)."""
    _check_reference(reference)
    fr = frame_ref(model, frame)
    d = _run_kinematics(model, state, data)
    J = frame_motion_py(d, fr, state.v, np.zeros(model.nv), False).J
    if reference == "world_aligned":
        R = frame_pose(d, state, fr)[0]
        J = np.vstack([R @ J[0:3], R @ J[3:6]])
    return J


def frame_velocity(model: Model, state: State, frame: str, reference: str = "local",
                   data=None) -> np.ndarray:
    """The frame's twist [v; w] (6,) in its axes ("local") or world axes ("world_aligned")."""
    _check_reference(reference)
    fr = frame_ref(model, frame)
    d = _run_kinematics(model, state, data)
    vf = fr.XF @ d.v[fr.k]
    if reference == "world_aligned":
        R = frame_pose(d, state, fr)[0]
        vf = np.concatenate([R @ vf[0:3], R @ vf[3:6]])
    return vf
