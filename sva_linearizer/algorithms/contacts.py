"""Contacts: rigid contact constraints (KKT) and contact forces as given inputs, with their analytical
derivatives, on the package's Lie-group conventions (z = [z_H, z_s, z_v, z_r]).

Definitions (Pinocchio 4.1's RigidConstraintModel with joint2 = the world, so that results compare;
constrained-dynamics.hxx, contact-info.hpp): for a contact on frame F (the link frame moved to
`offset`, its axes), with F's twist v_F and spatial acceleration a_F in F's coordinates,
    point (CONTACT_3D):  r = a_F,lin + w_F x v_F,lin + Kd v_F,lin + Kp e,  e = R_F^T (p_F - p*)
    6d    (CONTACT_6D):  r = a_F + Kd v_F + Kp e,                          e = log6(M*^-1 M_F)
in F's axes ("local"), or rotated by R_F (each 3-block) for "world_aligned" (LOCAL_WORLD_ALIGNED:
for 6d the spatial acceleration of the frame in world axes at its origin, for a point the classical
acceleration of the point), M* = (R*, p*) the anchor. The constraint is r = 0: r = Jc nu_dot + r0,
Jc = J_F's rows (rotated for world_aligned). The forces lambda act ON the robot, in the contact's
reference frame: M nu_dot + h = S tau + Jc^T lambda (Pinocchio's data.lambda_c, contact_forces).

Forward dynamics (KKT through the inverse mass matrix that IMMAmb already gives; the Delassus
matrix K = Jc Minv Jc^T is m x m, m <= a few dozen):
    nu_free = Minv (S tau - h),  K lambda = -(Jc nu_free + r0),  nu_dot = nu_free + Minv Jc^T lambda
Derivatives (the implicit-function theorem on [ID(z, nu_dot, lambda) = S tau; r(z, nu_dot) = 0]):
    D = d ID/dz at (nu_dot, lambda fixed in its frame): EIDAmb's derivatives (IDSVA) with the
        contact wrenches in d.fext (fixed in the body: no extra term), plus for world_aligned
        forces the rotation term  -J_F^T [R^T f]^ Jq_ang  (the wrench turns with the link);
    Ar = dr/dz at fixed nu_dot (frames.frame_motion);  Y = Minv Jc^T
    dlambda/dz = K^-1 (Y^T D - Ar),  dnu_dot/dz = -Minv D + Y dlambda/dz
    dlambda/dtau = -K^-1 Jc Minv S,   dnu_dot/dtau = Minv S + Y dlambda/dtau
(Pinocchio's computeConstraintDynamicsDerivatives solves the same system.)
Forces as inputs: nu_dot = Minv (S tau - h + Jc^T f), A's lower blocks -Minv D (lambda := f),
B_f = Minv Jc^T.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..spatial import crm, se3_log, skew, xform
from .frames import frame_motion_py, frame_pose, frame_ref

if TYPE_CHECKING:
    from ..model import Model

KINDS = ("point", "6d")
REFERENCES = ("local", "world_aligned")


class Contact:
    """A contact on a frame: kind "point" (3 force components, the point's acceleration is
    constrained; Pinocchio CONTACT_3D) or "6d" (a wrench [f; tau], the frame's spatial
    acceleration is constrained; CONTACT_6D); reference "local" (the link's axes, LOCAL) or
    "world_aligned" (world axes at the contact point, LOCAL_WORLD_ALIGNED); offset: the contact
    point in the link frame; baumgarte (Kp, Kd): a_c + Kd v_c + Kp e = 0 (scalars); anchor: the
    pose the error e is measured from, (R, p) in the world (for a point, p alone may be given);
    None: the frame's pose at the state being linearized (it then stays fixed under perturbations
    of the state)."""

    __slots__ = ("frame", "kind", "reference", "offset", "baumgarte", "anchor")

    def __init__(self, frame: str, kind: str = "point", reference: str = "local",
                 offset: Sequence[float] = (0.0, 0.0, 0.0), baumgarte: tuple[float, float] = (0.0, 0.0),
                 anchor=None):
        if not isinstance(frame, str) or not frame:
            raise ValueError(f"Contact: frame must be a non-empty frame name (a link or body name), got {frame!r}")
        if kind not in KINDS:
            raise ValueError(f"Contact on '{frame}': kind must be one of {KINDS}, got {kind!r}")
        if reference not in REFERENCES:
            raise ValueError(f"Contact on '{frame}': reference must be one of {REFERENCES}, got {reference!r}")
        off = np.asarray(offset, dtype=float).reshape(-1) if np.size(offset) == 3 else None
        if off is None or not np.all(np.isfinite(off)):
            raise ValueError(f"Contact on '{frame}': offset must be 3 finite numbers, got {offset!r}")
        try:
            kp, kd = (float(x) for x in baumgarte)
        except (TypeError, ValueError):
            raise ValueError(f"Contact on '{frame}': baumgarte must be (Kp, Kd), two numbers, "
                             f"got {baumgarte!r}") from None
        if not (np.isfinite(kp) and np.isfinite(kd)):
            raise ValueError(f"Contact on '{frame}': baumgarte gains must be finite, got {baumgarte!r}")
        self.frame, self.kind, self.reference = frame, kind, reference
        self.offset = off
        self.baumgarte = (kp, kd)
        self.anchor = None if anchor is None else _anchor(anchor, frame, kind)

    @property
    def dim(self) -> int:
        """3 (point) or 6 (6d): the number of force components / constraint rows."""
        return 3 if self.kind == "point" else 6

    def __repr__(self):
        return (f"Contact({self.frame!r}, kind={self.kind!r}, reference={self.reference!r}, "
                f"offset={tuple(self.offset)}, baumgarte={self.baumgarte})")


def _anchor(anchor, frame, kind):
    try:
        if kind == "point" and not (isinstance(anchor, (tuple, list)) and len(anchor) == 2):
            R, p = np.eye(3), np.asarray(anchor, dtype=float).reshape(3)
        else:
            R, p = anchor
            R = np.asarray(R, dtype=float).reshape(3, 3)
            p = np.asarray(p, dtype=float).reshape(3)
    except (TypeError, ValueError):
        raise ValueError(f"Contact on '{frame}': anchor must be (R, p) (or, for a point, p), "
                         f"got {anchor!r}") from None
    if not (np.all(np.isfinite(R)) and np.all(np.isfinite(p))) or np.max(np.abs(R @ R.T - np.eye(3))) > 1e-9:
        raise ValueError(f"Contact on '{frame}': anchor rotation must be a rotation matrix, finite")
    return R, p


def check_contacts(model: Model, contacts, what="contacts") -> list:
    """The contacts as a list of (Contact, FrameRef); unknown frames and non-Contacts named."""
    if contacts is None:
        return []
    out = []
    for i, c in enumerate(contacts):
        if not isinstance(c, Contact):
            raise ValueError(f"{what}[{i}] must be an sl.Contact, got {type(c).__name__}")
        try:
            fr = frame_ref(model, c.frame, c.offset)
        except ValueError as e:
            raise ValueError(f"{what}[{i}] ({c.frame!r}): {e}") from None
        out.append((c, fr))
    return out


def check_forces(model: Model, forces) -> tuple[list, np.ndarray]:
    """forces = [(Contact, f), ...] -> ([(Contact, FrameRef)], stacked f)."""
    if forces is None:
        return [], np.zeros(0)
    pairs, fs = [], []
    for i, item in enumerate(forces):
        try:
            c, f = item
        except (TypeError, ValueError):
            raise ValueError(f"forces[{i}] must be a pair (sl.Contact, force)") from None
        pairs.append(c)
        f = np.asarray(f, dtype=float).reshape(-1)
        if f.shape != (c.dim if isinstance(c, Contact) else -1,) or not np.all(np.isfinite(f)):
            raise ValueError(f"forces[{i}] on {getattr(c, 'frame', c)!r}: the force must be "
                             f"{getattr(c, 'dim', '3 or 6')} finite numbers ({getattr(c, 'kind', '?')} "
                             f"contact), got shape {f.shape}")
        fs.append(f)
    return check_contacts(model, pairs, "forces"), (np.concatenate(fs) if fs else np.zeros(0))


def _rot(c, R):
    """The reference frame's rotation acting on the contact's 3- or 6-rows."""
    if c.dim == 3:
        return R
    out = np.zeros((6, 6))
    out[0:3, 0:3] = R
    out[3:6, 3:6] = R
    return out


class ContactTerms:
    """One contact at a state: pose, Jacobians (6 x nv, F's coordinates), Jc (dim x nv)."""

    __slots__ = ("c", "fr", "R", "p", "J", "Jq", "Jc", "anchor", "a0")


def contact_terms(d, state, c, fr) -> ContactTerms:
    """Also a0: F's spatial acceleration at nu_dot = 0 (velocity products only)."""
    t = ContactTerms()
    t.c, t.fr = c, fr
    t.R, t.p = frame_pose(d, state, fr)
    fm = frame_motion_py(d, fr, state.v, np.zeros(d.nv), False)
    t.J, t.Jq, t.a0 = fm.J, fm.Jq, fm.a
    Jc = t.J[0:c.dim]
    t.Jc = _rot(c, t.R) @ Jc if c.reference == "world_aligned" else Jc.copy()
    t.anchor = c.anchor if c.anchor is not None else (t.R.copy(), t.p.copy())
    return t


def _jlog6(e):
    """Jlog6 at exp(e): the inverse of SE(3)'s right Jacobian Jr(e) (d log(X exp(x)) / dx)."""
    if np.linalg.norm(e) < 1e-300:
        return np.eye(6)
    # Jr(e) = sum_k (-ad e)^k / (k+1)!; series with enough terms for |e| of a contact error
    A = -crm(e)
    Jr, term = np.eye(6), np.eye(6)
    for k in range(1, 40):
        term = term @ A / (k + 1)
        Jr = Jr + term
        if np.max(np.abs(term)) < 1e-18:
            break
    return np.linalg.inv(Jr)


def residual(d, state, t, vel, nu_dot, derivatives=True):
    """The constraint residual r (dim,) at nu_dot in the contact's reference frame and, with
    derivatives, dr/dz (dim x 2nv) at fixed nu_dot (see the module docstring)."""
    c, fr = t.c, t.fr
    nv = d.nv
    kp, kd = c.baumgarte
    vF = t.J @ vel
    if derivatives:
        fm = frame_motion_py(d, fr, vel, nu_dot, True)
        aF, dvF, daF, danF = fm.a, fm.dvq, fm.daq, fm.dan
    else:
        aF = t.a0 + t.J @ nu_dot
    Rs, ps = t.anchor
    if c.anchor is None:                    # anchored at the current pose: no error
        e = np.zeros(c.dim)
    elif c.kind == "point":
        e = t.R.T @ (t.p - ps)
    else:
        e = se3_log(Rs.T @ t.R, Rs.T @ (t.p - ps))
    if c.kind == "point":
        r = aF[0:3] + np.cross(vF[3:6], vF[0:3]) + kd * vF[0:3] + kp * e
    else:
        r = aF + kd * vF + kp * e
    dr = None
    if derivatives:
        dr = np.zeros((c.dim, 2 * nv))
        if c.kind == "point":
            W, V = skew(vF[3:6]), skew(vF[0:3])
            dr[:, :nv] = (daF[0:3] + W @ dvF[0:3] - V @ dvF[3:6] + kd * dvF[0:3]
                          + kp * (t.Jq[0:3] + skew(e) @ t.Jq[3:6]))
            dr[:, nv:] = danF[0:3] + W @ t.J[0:3] - V @ t.J[3:6] + kd * t.J[0:3]
        else:
            dr[:, :nv] = daF + kd * dvF + (kp * _jlog6(e) @ t.Jq if kp != 0.0 else 0.0)
            dr[:, nv:] = danF + kd * t.J
    if c.reference == "world_aligned":
        Rr = _rot(c, t.R)
        if derivatives:
            # d(R x) = R dx - R [x]^ dtheta, dtheta = Jq_ang z_q (each 3-block)
            rot = np.zeros((c.dim, nv))
            for b in range(0, c.dim, 3):
                rot[b:b + 3] = -t.R @ skew(r[b:b + 3]) @ t.Jq[3:6]
            dr = Rr @ dr
            dr[:, :nv] += rot
        r = Rr @ r
    return r, dr


def apply_forces(d, terms, lam):
    """Adds each contact's wrench (lam, stacked, in the contacts' reference frames) to d.fext of its
    body: w_F = [f; tau] in F's axes (rotated back for world_aligned), X_F^T w_F in the body."""
    o = 0
    for t in terms:
        m = t.c.dim
        w = np.zeros(6)
        f = lam[o:o + m]
        if t.c.reference == "world_aligned":
            f = _rot(t.c, t.R).T @ f
        w[0:m] = f
        d.fext[t.fr.k] += t.fr.XF.T @ w
        o += m


def rotation_term(d, terms, lam):
    """d(-Jc^T lambda)/dz_q beyond what EIDAmb's derivatives see (the wrench fixed in the body):
    for world_aligned forces, held fixed in world axes, -J_F^T d(w_F)/dz_q, d(R^T x) = [R^T x]^
    Jq_ang z_q (nv x nv)."""
    nv = d.nv
    E = np.zeros((nv, nv))
    o = 0
    for t in terms:
        m = t.c.dim
        if t.c.reference == "world_aligned":
            dw = np.zeros((6, nv))
            for b in range(0, m, 3):
                dw[b:b + 3] = skew(t.R.T @ lam[o + b:o + b + 3]) @ t.Jq[3:6]
            E -= t.J.T @ dw
        o += m
    return E


def delassus_solve(model, terms, K, rhs):
    """K^-1 rhs for the Delassus matrix K = Jc Minv Jc^T; a ValueError naming the contacts whose
    constraints are redundant or cannot all be met (K singular)."""
    m = K.shape[0]
    s = np.linalg.svd(K, compute_uv=False) if m else np.zeros(0)
    if m and (s[-1] <= 1e-10 * max(s[0], 1e-300)):
        # find the first contact whose rows make the set dependent
        names, rows = [], []
        for t in terms:
            rows.append(t.Jc)
            names.append(f"{t.c.frame} ({t.c.kind}, {t.c.reference})")
            Jall = np.vstack(rows)
            if np.linalg.matrix_rank(Jall, tol=1e-9 * max(1.0, np.abs(Jall).max())) < Jall.shape[0]:
                break
        raise ValueError("the contact constraints are redundant or cannot all be satisfied (the "
                         f"Delassus matrix Jc Minv Jc^T is singular, cond {s[0] / max(s[-1], 1e-300):.2e}): "
                         f"contacts {', '.join(names)} constrain the same motion; remove one, or use "
                         "point contacts")
    return np.linalg.solve(K, rhs)
