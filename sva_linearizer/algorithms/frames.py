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

from ..spatial import crm, placement_to_xform
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


def body_pose(d, state, path):
    """World pose (R, p) of the last body of `path` (the base's for an empty path)."""
    if d.floating_base:
        R, p = state.R.copy(), state.p.copy()
    else:
        R, p = np.eye(3), np.zeros(3)
    for b in path:
        X = d.Xup[b]
        E = X[0:3, 0:3]
        O = X[0:3, 3:6] @ E.T                 # o^, o = the parent's origin seen from b
        o = np.array([O[2, 1], O[0, 2], O[1, 0]])
        p = p - R @ (E.T @ o)
        R = R @ E.T
    return R, p


def frame_pose(d, state, fr: FrameRef):
    R, p = body_pose(d, state, fr.path)
    return R @ fr.R_f, p + R @ fr.p_f


def path_jacobians(d, path):
    """(J, Jq) of the last body of `path`, 6 x nv in its own coordinates: J maps nu to its twist,
    Jq maps z_q to its pose perturbation (M -> M exp((Jq z_q)^))."""
    nv = d.nv
    J = np.zeros((6, nv))
    if d.floating_base:
        J[:, 0:6] = np.eye(6)
    Jq = J.copy()
    for b in path:
        X = d.Xup[b]
        J = X @ J
        Jq = X @ Jq
        j = d.vidx[b]
        J[:, j] += d.S[b]
        Jq[:, j] += d.Sig[b]
    return J, Jq


def path_motion(d, path, vel, nu_dot, derivatives=True):
    """The true (gravity-free) spatial acceleration a of the last body of `path` at nu_dot, in its
    coordinates, and with derivatives the partials at fixed (nu, nu_dot): dv/dz_q, da/dz_q,
    da/dnu (each 6 x nv). Needs d.v, d.vp of an EIDAmb run at the same state."""
    nv = d.nv
    a = np.array(nu_dot[0:6], dtype=float) if d.floating_base else np.zeros(6)
    dvq = np.zeros((6, nv))
    daq = np.zeros((6, nv))
    dan = np.zeros((6, nv))
    Jv = np.zeros((6, nv))
    if d.floating_base:
        Jv[:, 0:6] = np.eye(6)
    for b in path:
        X, S, sig, j = d.Xup[b], d.S[b], d.Sig[b], d.vidx[b]
        ap = X @ a
        Sr = S * vel[j]
        a = ap + S * nu_dot[j] + crm(d.v[b]) @ Sr
        if derivatives:
            Jv = X @ Jv
            Jv[:, j] += S
            dvq = X @ dvq
            dvq[:, j] += crm(d.vp[b]) @ sig                  # Psi-dot: v_p x sigma
            daq = X @ daq
            daq[:, j] += crm(ap) @ sig                       # a_p x sigma
            daq -= crm(Sr) @ dvq                             # (d v) x Gamma r
            dan = X @ dan
            dan -= crm(Sr) @ Jv                              # (d v / d nu) x Gamma r
            dan[:, j] += crm(d.v[b]) @ S                     # v x Gamma (d/d r_j of Gamma r_j)
    return a, dvq, daq, dan


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
    fr = FrameRef(model, frame)
    d = _run_kinematics(model, state, data)
    R, p = frame_pose(d, state, fr)
    return R, p


def frame_jacobian(model: Model, state: State, frame: str, reference: str = "local",
                   data=None) -> np.ndarray:
    """6 x nv: the frame's twist [v; w] = J nu, in the frame's axes ("local", Pinocchio LOCAL) or
    world axes at the frame's origin ("world_aligned", LOCAL_WORLD_ALIGNED); columns [v (6), r]
    (equal to Pinocchio's getFrameJacobian with a free-flyer root)."""
    _check_reference(reference)
    fr = FrameRef(model, frame)
    d = _run_kinematics(model, state, data)
    J = fr.XF @ path_jacobians(d, fr.path)[0]
    if reference == "world_aligned":
        R = frame_pose(d, state, fr)[0]
        J = np.vstack([R @ J[0:3], R @ J[3:6]])
    return J


def frame_velocity(model: Model, state: State, frame: str, reference: str = "local",
                   data=None) -> np.ndarray:
    """The frame's twist [v; w] (6,) in its axes ("local") or world axes ("world_aligned")."""
    _check_reference(reference)
    fr = FrameRef(model, frame)
    d = _run_kinematics(model, state, data)
    vf = fr.XF @ d.v[fr.k]
    if reference == "world_aligned":
        R = frame_pose(d, state, fr)[0]
        vf = np.concatenate([R @ vf[0:3], R @ vf[3:6]])
    return vf
