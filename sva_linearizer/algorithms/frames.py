# SPDX-License-Identifier: BSD-3-Clause
"""Frames: the pose, Jacobian and velocity of a named frame (a body, or a URDF link merged into its
body through fixed joints, Model.frame), and the forward-mode derivatives of a body's twist and
acceleration that the contact constraints need.

Everything is in body coordinates, on the kinematics of a compiled call (d.Xup, d.S, d.Sig, d.v,
d.vp after eidamb_entry / the linearization's first stage), walking the path base -> body:

    v_k = X_k v_lam + Gamma_k r_k,   a_k = X_k a_lam + Gamma_k r_ddot_k + v_k x Gamma_k r_k
    (EIDAmb lines 15-18 without the gravity term), with dX_k/ds_k = -(sigma_k x) X_k, so that
    d v_k/d s_k = v_p x sigma_k (Psi-dot), d a_k/d s_k = a_p x sigma_k + (d v_k) x Gamma_k r_k
    (v_p, a_p: the parent's twist / acceleration in k's frame; IDSVA's quantities (Singh et al.,
    IDSVA:13), here in the moving body's own coordinates).
The base's body twist v_0 and acceleration v_dot_0 are state / input (held fixed), so in body
coordinates nothing depends on z_H. J (the velocity Jacobian, columns [v (6), r]) and Jq (the
position Jacobian, columns [z_H (6), s]: a frame moves by M exp((Jq z)^)) differ only for custom
joints whose sigma differs from Gamma.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._jit import njit
from .._lanes import all_lanes
from .._arrays import kernel_array

COMPILE_GROUP = "contacts"  # the compile group of this module's kernels (_jit)
from ..layout import views
from ..spatial import placement_to_xform
from ..spatial_ops import xmv
from .common import KINEMATICS_STEPS, finite_result, setup

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


@njit(inline="always")
def frame_pose_c(m, d, q, k, R_f, p_f, R, p, path):
    """R, p = the world pose of the frame at (R_f, p_f) in body k, composing the tree transforms
    ^bX_lam = [[E, o^ E], [0, E]] (the child at R_rel = E^T, p_rel = -E^T o in its parent) from the
    base's pose (q[0:3] and d.R; identity for a fixed base). path: scratch, at least the path's
    length (nv ints will do)."""
    npath = 0
    b = k
    while b > 0:
        path[npath] = b
        npath += 1
        b = m.lam[b]
    Rb = d.T[0:3, 0:3]                                           # scratch
    Rn = d.T[3:6, 0:3]
    pb = d.t6[7]
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
def frame_pose_entry(ib, fb, q, k, R_f, p_f, R, p, path):
    m, d, _ = views(ib, fb)
    frame_pose_c(m, d, q, k, R_f, p_f, R, p, path)
    return 0


def frame_pose(d, state, fr: FrameRef):
    """World pose (R, p) of a resolved frame, after the kinematics at state (frame_pose_c)."""
    R, p = np.empty((3, 3)), np.empty(3)
    frame_pose_entry(d.ib, d.fb, state.q, fr.k, fr.R_f, fr.p_f, R, p, np.empty(d.nv + 1, dtype=np.int64))
    return R, p


@njit(inline="always")
def _x_cols(X, M, cols, lo, hi):
    """M[:, c] = X M[:, c] for the active columns c = cols[lo:hi] of a 6 x nv M, X = [[E, F], [0, E]]
    a spatial transform (its zero block skipped: 27 multiplications a column, not 36). X is held in
    locals: the compiler cannot tell that the stores leave it unchanged."""
    x00, x01, x02, x03, x04, x05 = X[0, 0], X[0, 1], X[0, 2], X[0, 3], X[0, 4], X[0, 5]
    x10, x11, x12, x13, x14, x15 = X[1, 0], X[1, 1], X[1, 2], X[1, 3], X[1, 4], X[1, 5]
    x20, x21, x22, x23, x24, x25 = X[2, 0], X[2, 1], X[2, 2], X[2, 3], X[2, 4], X[2, 5]
    x33, x34, x35 = X[3, 3], X[3, 4], X[3, 5]
    x43, x44, x45 = X[4, 3], X[4, 4], X[4, 5]
    x53, x54, x55 = X[5, 3], X[5, 4], X[5, 5]
    for q in range(lo, hi):
        c = cols[q]
        t0, t1, t2, t3, t4, t5 = M[0, c], M[1, c], M[2, c], M[3, c], M[4, c], M[5, c]
        M[0, c] = x00 * t0 + x01 * t1 + x02 * t2 + x03 * t3 + x04 * t4 + x05 * t5
        M[1, c] = x10 * t0 + x11 * t1 + x12 * t2 + x13 * t3 + x14 * t4 + x15 * t5
        M[2, c] = x20 * t0 + x21 * t1 + x22 * t2 + x23 * t3 + x24 * t4 + x25 * t5
        M[3, c] = x33 * t3 + x34 * t4 + x35 * t5
        M[4, c] = x43 * t3 + x44 * t4 + x45 * t5
        M[5, c] = x53 * t3 + x54 * t4 + x55 * t5


@njit(inline="always")
def _cross_col(l0, l1, l2, w0, w1, w2, M, c, out, oc, sign):
    """out[:, oc] += sign * (v x M[:, c]) for the motion v = [l; w] (spatial_ops.cross_m on
    matrix columns, without column views)."""
    u0, u1, u2, u3, u4, u5 = M[0, c], M[1, c], M[2, c], M[3, c], M[4, c], M[5, c]
    out[0, oc] += sign * (w1 * u2 - w2 * u1 + l1 * u5 - l2 * u4)
    out[1, oc] += sign * (w2 * u0 - w0 * u2 + l2 * u3 - l0 * u5)
    out[2, oc] += sign * (w0 * u1 - w1 * u0 + l0 * u4 - l1 * u3)
    out[3, oc] += sign * (w1 * u5 - w2 * u4)
    out[4, oc] += sign * (w2 * u3 - w0 * u5)
    out[5, oc] += sign * (w0 * u4 - w1 * u3)


@njit(inline="always")
def frame_motion(m, d, k, XF, vel, nu_dot, derivatives, J, Jq, dvq, daq, dan, a, cols):
    """Frame F (^F X_k, fixed) on body k, in F's coordinates, in two passes at one q.

    Without derivatives: J (6 x nv, twist = J nu), Jq (6 x nv, pose perturbation
    M -> M exp((Jq z_q)^)) and a (6,): F's true (gravity-free) spatial acceleration at nu_dot.
    With derivatives (after a pass without at the same q: its J and Jq are read, not rewritten):
    a at nu_dot and the partials at fixed (nu, nu_dot): dvq = dv_F/dz_q, daq = da_F/dz_q,
    dan = da_F/dnu (module docstring).

    Needs d.Xup, d.S, d.Sig, d.v, d.vp of an EIDAmb run at the state. cols (nv ints) gets the
    active columns: the base's and the path's joints; returns their number. Only the active
    columns are written: the others are zero in the caller's arrays and stay so (the path of a
    frame never changes, so buffers reused for one frame need no clearing).
    - Jq equals J where the path's position twists equal its motion subspaces (every built-in
      joint), and is then copied rather than transformed.
    - In body coordinates nothing depends on z_H: dvq's and daq's base columns stay zero.
    - dan in closed form from J: with u_c = sum of J[:, j] r_j over the path's joints j at or below
      column c's joint (all of them for a base column), da_F/dr_c = (v_F - 2 u_c) x J[:, c] and
      da_F/dv_0 = -u x J[:, 0:6] (the v x Gamma r terms of a_F, each transported to F).
    Nothing is allocated (cols holds the path's bodies until each is replaced by its joint's
    column); inlined into its callers: a compiled call per contact (even on the two buffers, as a
    `layout.kernel`) makes a linearization with four contacts 2-8% slower, for ~70 s less CPU
    time in the contacts group's compile (docs/performance.md)."""
    vidx, Xup, S, Sig = m.vidx, d.Xup, d.S, d.Sig
    off = 6 if m.floating else 0
    npath = 0
    b = k
    sig_is_gamma = True                                       # Jq = J (no custom joint with sigma != Gamma)
    while b > 0:
        npath += 1
        for i in range(6):
            sig_is_gamma = sig_is_gamma and all_lanes(Sig[b, i] == S[b, i])   # (model data: alike in all lanes)
        b = m.lam[b]
    own_jq = not derivatives and not sig_is_gamma            # Jq transformed along with J
    ncol = off + npath
    b = k
    for q in range(ncol - 1, off - 1, -1):                    # the path's bodies, root first
        cols[q] = b
        b = m.lam[b]
    for q in range(ncol):
        c = q if q < off else vidx[cols[q]]
        for i in range(6):
            if derivatives:
                dvq[i, c] = 0.0
                daq[i, c] = 0.0
            else:
                J[i, c] = 0.0
                if own_jq:
                    Jq[i, c] = 0.0
    for i in range(off):
        cols[i] = i
        if not derivatives:
            J[i, i] = 1.0
            if own_jq:
                Jq[i, i] = 1.0
    for i in range(6):
        a[i] = nu_dot[i] if m.floating else 0.0
    ap = d.t6[7]                                                 # scratch row: X a_p
    for q in range(off, ncol):
        b = cols[q]
        j = vidx[b]
        cols[q] = j
        X = Xup[b]
        if not derivatives:
            _x_cols(X, J, cols, 0, q)
            if own_jq:
                _x_cols(X, Jq, cols, 0, q)
            for i in range(6):
                J[i, j] = S[b, i]
                if own_jq:
                    Jq[i, j] = Sig[b, i]
        xmv(X, a, ap)
        r, rdd = vel[j], nu_dot[j]
        s0, s1, s2, s3, s4, s5 = S[b, 0] * r, S[b, 1] * r, S[b, 2] * r, S[b, 3] * r, S[b, 4] * r, S[b, 5] * r
        for i in range(6):
            a[i] = ap[i] + S[b, i] * rdd
        vb = d.v[b]                                              # a += v x Gamma r (cross_m)
        l0, l1, l2, w0, w1, w2 = vb[0], vb[1], vb[2], vb[3], vb[4], vb[5]
        a[0] += 1.0 * (w1 * s2 - w2 * s1 + l1 * s5 - l2 * s4)
        a[1] += 1.0 * (w2 * s0 - w0 * s2 + l2 * s3 - l0 * s5)
        a[2] += 1.0 * (w0 * s1 - w1 * s0 + l0 * s4 - l1 * s3)
        a[3] += 1.0 * (w1 * s5 - w2 * s4)
        a[4] += 1.0 * (w2 * s3 - w0 * s5)
        a[5] += 1.0 * (w0 * s4 - w1 * s3)
        if derivatives:
            _x_cols(X, dvq, cols, off, q)                        # (base columns: zero)
            _x_cols(X, daq, cols, off, q)
            vpb = d.vp[b]
            _cross_col(vpb[0], vpb[1], vpb[2], vpb[3], vpb[4], vpb[5], Sig.T, b, dvq, j, 1.0)   # Psi-dot
            _cross_col(ap[0], ap[1], ap[2], ap[3], ap[4], ap[5], Sig.T, b, daq, j, 1.0)         # a_p x sigma
            for qq in range(off, q + 1):
                c = cols[qq]
                _cross_col(s0, s1, s2, s3, s4, s5, dvq, c, daq, c, -1.0)   # (d v / d z_q) x Gamma r
    xmv(XF, a, a)
    if not derivatives:
        _x_cols(XF, J, cols, 0, ncol)
        if own_jq:
            _x_cols(XF, Jq, cols, 0, ncol)
        else:
            for q in range(ncol):
                c = cols[q]
                for i in range(6):
                    Jq[i, c] = J[i, c]
        return ncol
    _x_cols(XF, dvq, cols, off, ncol)
    _x_cols(XF, daq, cols, off, ncol)
    u, vF = d.t6[7], d.t6[6]                                     # dan in closed form (docstring)
    for i in range(6):
        u[i] = 0.0
        vF[i] = 0.0
    for q in range(ncol):
        c = cols[q]
        for i in range(6):
            vF[i] += J[i, c] * vel[c]
    for q in range(ncol - 1, -1, -1):
        c = cols[q]
        if q >= off:
            r = vel[c]
            for i in range(6):
                u[i] += J[i, c] * r
        for i in range(6):
            dan[i, c] = 0.0
        if q >= off:
            _cross_col(vF[0] - 2.0 * u[0], vF[1] - 2.0 * u[1], vF[2] - 2.0 * u[2], vF[3] - 2.0 * u[3],
                       vF[4] - 2.0 * u[4], vF[5] - 2.0 * u[5], J, c, dan, c, 1.0)
        else:
            _cross_col(u[0], u[1], u[2], u[3], u[4], u[5], J, c, dan, c, -1.0)
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
    r.J, r.Jq, r.dvq, r.daq, r.dan = (np.zeros((6, nv)) for _ in range(5))   # zero: frame_motion
    r.a = np.empty(6)
    nu_dot = kernel_array(nu_dot)
    for second in ((False, True) if derivatives else (False,)):   # the derivatives' pass reads J, Jq
        frame_motion_entry(d.ib, d.fb, fr.k, fr.XF, vel, nu_dot, second, r.J, r.Jq, r.dvq, r.daq, r.dan,
                           r.a, np.empty(nv, dtype=np.int64))
    return r


def _run_kinematics(model, state, data=None):
    from ..state import input_error
    from .eidamb import eidamb_entry

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
    return finite_result(model, d, "frame_placement", KINEMATICS_STEPS[:1], "the placement", (R, p),
                         q=state.q)


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
    return finite_result(model, d, "frame_jacobian", KINEMATICS_STEPS[:1], "the Jacobian", J, q=state.q)


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
    return finite_result(model, d, "frame_velocity", KINEMATICS_STEPS, "the frame's twist", vf,
                         q=state.q, v=state.v)
