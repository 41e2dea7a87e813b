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

from ..spatial import crm, se3_log
from .._jit import njit
from .._arrays import real_array
from .._intrinsics import carve_view

COMPILE_GROUP = "contacts"  # the compile group of this module's kernels (_jit)
from ..layout import kernel
from .frames import frame_motion, frame_pose, frame_pose_c, frame_ref

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
        off = real_array(offset, f"Contact on '{frame}': offset").reshape(-1) if np.size(offset) == 3 else None
        if off is None or not np.all(np.isfinite(off)):
            raise ValueError(f"Contact on '{frame}': offset must be 3 finite numbers, got {offset!r}")
        try:
            kp, kd = (float(x) for x in baumgarte)
        except (TypeError, ValueError):
            raise ValueError(f"Contact on '{frame}': baumgarte must be (Kp, Kd), two numbers, "
                             f"got {baumgarte!r}") from None
        if not (np.isfinite(kp) and np.isfinite(kd)):
            raise ValueError(f"Contact on '{frame}': baumgarte gains must be finite, got {baumgarte!r}")
        off.flags.writeable = False
        anc = None if anchor is None else _anchor(anchor, frame, kind)
        for name, value in (("frame", frame), ("kind", kind), ("reference", reference), ("offset", off),
                            ("baumgarte", (kp, kd)), ("anchor", anc)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError("sl.Contact is immutable: make a new one")

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
            R, p = np.eye(3), real_array(anchor, f"Contact on '{frame}': anchor").reshape(3)
        else:
            R, p = anchor
            R = real_array(R, f"Contact on '{frame}': anchor rotation").reshape(3, 3)
            p = real_array(p, f"Contact on '{frame}': anchor position").reshape(3)
    except (TypeError, ValueError):
        raise ValueError(f"Contact on '{frame}': anchor must be (R, p) (or, for a point, p), "
                         f"got {anchor!r}") from None
    if not (np.all(np.isfinite(R)) and np.all(np.isfinite(p))) or np.max(np.abs(R @ R.T - np.eye(3))) > 1e-9:
        raise ValueError(f"Contact on '{frame}': anchor rotation must be a rotation matrix, finite")
    R, p = R.copy(), p.copy()
    R.flags.writeable = False
    p.flags.writeable = False
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
        f = real_array(f, f"forces[{i}]").reshape(-1)
        if f.shape != (c.dim if isinstance(c, Contact) else -1,) or not np.all(np.isfinite(f)):
            raise ValueError(f"forces[{i}] on {getattr(c, 'frame', c)!r}: the force must be "
                             f"{getattr(c, 'dim', '3 or 6')} finite numbers ({getattr(c, 'kind', '?')} "
                             f"contact), got shape {f.shape}")
        fs.append(f)
    return check_contacts(model, pairs, "forces"), (np.concatenate(fs) if fs else np.zeros(0))


@njit(inline="always")
def _cross3(a0, a1, a2, b0, b1, b2):
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@njit(inline="always")
def contact_rows(m, d, ncol, dim, wa, kp, kd, e, JL, vel, derivatives, R, J, Jq, dvq, daq, dan, a,
                 cols, Jc, r, dr):
    """One contact's constraint rows Jc (dim x nv), its residual r (dim,) in the contact's
    reference frame and with derivatives dr = dr/dz at fixed nu_dot (dim x 2nv; module
    docstring), from its frame's pose R and motion (J, Jq, a; with derivatives dvq, daq, dan: the
    ncol active columns cols of frames.frame_motion at the same state). e: the Baumgarte error
    (zero without an anchor), JL: Jlog6(e) (6d).
    As frame_motion, only the frame's active columns of dr are written (the others are zero in
    the set's buffer and stay so). set_rows inlines frame_pose_c, frame_motion and this, one
    after the other: numba copies an inlined function's IR at its call site, at a cost that grows
    with its blocks x variables, so nesting frame_motion inside this would copy it twice."""
    nv = m.nv
    vF = d.t6[6]                                                 # scratch rows of the workspace
    for i in range(6):
        vF[i] = 0.0
    for qq in range(ncol):
        c = cols[qq]
        for i in range(6):
            vF[i] += J[i, c] * vel[c]
    rl = d.t6[5]
    for i in range(6):
        rl[i] = 0.0
    if derivatives:
        for i in range(dim):
            for qq in range(ncol):
                dr[i, cols[qq]] = 0.0
                dr[i, nv + cols[qq]] = 0.0
    if dim == 3:
        w0, w1, w2 = _cross3(vF[3], vF[4], vF[5], vF[0], vF[1], vF[2])
        rl[0] = a[0] + w0 + kd * vF[0] + kp * e[0]
        rl[1] = a[1] + w1 + kd * vF[1] + kp * e[1]
        rl[2] = a[2] + w2 + kd * vF[2] + kp * e[2]
        if derivatives:
            for qq in range(ncol):
                c = cols[qq]
                x0, x1, x2 = _cross3(vF[3], vF[4], vF[5], dvq[0, c], dvq[1, c], dvq[2, c])
                y0, y1, y2 = _cross3(vF[0], vF[1], vF[2], dvq[3, c], dvq[4, c], dvq[5, c])
                z0, z1, z2 = _cross3(e[0], e[1], e[2], Jq[3, c], Jq[4, c], Jq[5, c])
                dr[0, c] = daq[0, c] + x0 - y0 + kd * dvq[0, c] + kp * (Jq[0, c] + z0)
                dr[1, c] = daq[1, c] + x1 - y1 + kd * dvq[1, c] + kp * (Jq[1, c] + z1)
                dr[2, c] = daq[2, c] + x2 - y2 + kd * dvq[2, c] + kp * (Jq[2, c] + z2)
                x0, x1, x2 = _cross3(vF[3], vF[4], vF[5], J[0, c], J[1, c], J[2, c])
                y0, y1, y2 = _cross3(vF[0], vF[1], vF[2], J[3, c], J[4, c], J[5, c])
                dr[0, nv + c] = dan[0, c] + x0 - y0 + kd * J[0, c]
                dr[1, nv + c] = dan[1, c] + x1 - y1 + kd * J[1, c]
                dr[2, nv + c] = dan[2, c] + x2 - y2 + kd * J[2, c]
    else:
        for i in range(6):
            rl[i] = a[i] + kd * vF[i] + kp * e[i]
        if derivatives:
            for qq in range(ncol):
                c = cols[qq]
                for i in range(6):
                    acc = 0.0
                    for l in range(6):
                        acc += JL[i, l] * Jq[l, c]
                    dr[i, c] = daq[i, c] + kd * dvq[i, c] + kp * acc
                    dr[i, nv + c] = dan[i, c] + kd * J[i, c]
    for i in range(dim):
        for c in range(nv):
            Jc[i, c] = J[i, c]
        r[i] = rl[i]
    if wa:
        # r = R r_l (each 3-block); d(R x) = R dx - R [x]^ Jq_ang z_q
        t = d.t6[4]
        for b in range(0, dim, 3):
            for qq in range(ncol):
                c = cols[qq]
                if derivatives:
                    for cc in (c, nv + c):
                        for i in range(3):
                            t[i] = dr[b + i, cc]
                        if cc == c:
                            x0, x1, x2 = _cross3(rl[b], rl[b + 1], rl[b + 2], Jq[3, c], Jq[4, c], Jq[5, c])
                            t[0] -= x0
                            t[1] -= x1
                            t[2] -= x2
                        for i in range(3):
                            dr[b + i, cc] = R[i, 0] * t[0] + R[i, 1] * t[1] + R[i, 2] * t[2]
                for i in range(3):
                    t[i] = Jc[b + i, c]
                for i in range(3):
                    Jc[b + i, c] = R[i, 0] * t[0] + R[i, 1] * t[1] + R[i, 2] * t[2]
            for i in range(3):
                r[b + i] = R[i, 0] * rl[b] + R[i, 1] * rl[b + 1] + R[i, 2] * rl[b + 2]
    return ncol


@njit(inline="always")
def _carve_terms(nv, dim, buf, o):
    """The views of contact_rows' outputs in the flat buffer buf from offset o (one argument for
    all of them: cheap calls; carve_view, not reshape: no helper call per view)."""
    n6 = 6 * nv
    R = carve_view(buf, o, (3, 3))
    p = carve_view(buf, o + 9, (3,))
    o += 12
    J = carve_view(buf, o, (6, nv))
    Jq = carve_view(buf, o + n6, (6, nv))
    dvq = carve_view(buf, o + 2 * n6, (6, nv))
    daq = carve_view(buf, o + 3 * n6, (6, nv))
    dan = carve_view(buf, o + 4 * n6, (6, nv))
    o += 5 * n6
    a = carve_view(buf, o, (6,))
    o += 6
    Jc = carve_view(buf, o, (dim, nv))
    o += dim * nv
    r = carve_view(buf, o, (dim,))
    dr = carve_view(buf, o + dim, (dim, 2 * nv))
    return R, p, J, Jq, dvq, daq, dan, a, Jc, r, dr


def terms_size(nv: int, dim: int) -> int:
    return 9 + 3 + 30 * nv + 6 + 3 * dim * nv + dim


@kernel
def set_rows(m, d, q, vel, nu_dot, derivatives, ipar, par, offs, buf, cols):
    """For every contact of a set, its frame's pose (frame_pose_c) and motion (frame_motion), then
    contact_rows: ipar[i] = [k, dim, world_aligned, ncol], par[i] = [XF (36), R_f (9), p_f (3),
    e (6), JL (36), Kp, Kd], outputs carved from buf[offs[i]:] (_carve_terms).
    Its callers pass `derivatives` as bool(constant), a run-time flag: numba compiles a kernel once
    per literal constant argument, and set_rows, with contact_rows inlined, takes ~35 s to compile
    on 2 cores; the branch costs nothing next to a contact's rows."""
    for i in range(ipar.shape[0]):
        dim = ipar[i, 1]
        P = par[i]
        R, p, J, Jq, dvq, daq, dan, a, Jc, r, dr = _carve_terms(m.nv, dim, buf, offs[i])
        k, ci = ipar[i, 0], cols[i]
        if not derivatives:             # with derivatives: the pose of the pass before, same q
            frame_pose_c(m, d, q, k, carve_view(P, 36, (3, 3)), P[45:48], R, p, ci)
        ncol = frame_motion(m, d, k, carve_view(P, 0, (6, 6)), vel, nu_dot, derivatives, J, Jq, dvq, daq,
                            dan, a, ci)
        contact_rows(m, d, ncol, dim, ipar[i, 2] != 0, P[90], P[91], P[48:54], carve_view(P, 54, (6, 6)),
                     vel, derivatives, R, J, Jq, dvq, daq, dan, a, ci, Jc, r, dr)


@njit
def set_wrench(nv, fext, w, ipar, par, offs, buf, cols, lam, add_fext, E):
    """contact_wrench for every contact of a set (after set_rows at the state), lam stacked; fext:
    the workspace's d.fext, w: a 6-vector of scratch (the arrays it needs, not the whole (m, d):
    cheap to call)."""
    o = 0
    for i in range(ipar.shape[0]):
        dim = ipar[i, 1]
        R, p, J, Jq, dvq, daq, dan, a, Jc, r, dr = _carve_terms(nv, dim, buf, offs[i])
        contact_wrench(nv, fext, w, ipar[i, 0], carve_view(par[i], 0, (6, 6)), dim, ipar[i, 2] != 0, R, J,
                       Jq, lam[o:o + dim], add_fext, E, cols[i], ipar[i, 3])
        o += dim


@njit
def set_gather(nv, ipar, offs, buf, what, out):
    """The set's Jc (what 0, m x nv), r (1, m x 1) or dr (2, m x 2nv), stacked into out."""
    o = 0
    for i in range(ipar.shape[0]):
        dim = ipar[i, 1]
        R, p, J, Jq, dvq, daq, dan, a, Jc, r, dr = _carve_terms(nv, dim, buf, offs[i])
        for rr in range(dim):
            if what == 0:
                for c in range(nv):
                    out[o + rr, c] = Jc[rr, c]
            elif what == 1:
                out[o + rr, 0] = r[rr]
            else:
                for c in range(2 * nv):
                    out[o + rr, c] = dr[rr, c]
        o += dim


class ContactTerms:
    """One contact's results (views into its set's buffer): pose R, p, J, Jq (6 x nv, F's
    coordinates), Jc (dim x nv), the residual r (dim,) and with derivatives dr (dim x 2nv)."""

    __slots__ = ("c", "fr", "R", "p", "J", "Jq", "Jc", "r", "dr")


class ContactSet:
    """Contacts [(Contact, FrameRef)] on one Data, their parameters and results packed for the
    compiled set_rows / set_wrench / set_gather (ipar, par, offs, buf, cols); kept in the Data for
    the next call with the same contacts (constrained_dynamics.ContactPlan). terms: each
    contact's results as views."""

    __slots__ = ("pairs", "terms", "ipar", "par", "offs", "buf", "cols", "m")

    @staticmethod
    def sizes(nv: int, pairs) -> tuple[int, int]:
        """(ints, floats) that a set of these contacts occupies: ipar, offs, cols; par, buf."""
        nc = len(pairs)
        return nc * (5 + nv), nc * 92 + sum(terms_size(nv, c.dim) for c, _ in pairs)

    def __init__(self, d, pairs, ints=None, floats=None):
        """ints, floats: zeroed flat int64 / float64 arrays of sizes(d.nv, pairs) to hold the set's
        arrays (a ContactPlan's buffers); None: the set allocates its own."""
        nv = d.nv
        nc = len(pairs)
        ni, nf = ContactSet.sizes(nv, pairs)
        ints = np.zeros(ni, dtype=np.int64) if ints is None else ints
        floats = np.zeros(nf) if floats is None else floats
        self.pairs = pairs
        self.ipar = ints[0:4 * nc].reshape((nc, 4))
        self.offs = ints[4 * nc:5 * nc]
        self.cols = ints[5 * nc:ni].reshape((nc, nv))
        self.par = floats[0:92 * nc].reshape((nc, 92))
        self.buf = floats[92 * nc:nf]
        sizes = [terms_size(nv, c.dim) for c, _ in pairs]
        self.offs[1:] = np.cumsum(sizes)[:-1] if nc else []
        self.terms = []
        for i, (c, fr) in enumerate(pairs):
            self.ipar[i, 0:4] = (fr.k, c.dim, c.reference == "world_aligned",
                                 len(fr.path) + (6 if d.floating_base else 0))   # active columns
            P = self.par[i]
            P[0:36] = fr.XF.ravel()
            P[36:45] = fr.R_f.ravel()
            P[45:48] = fr.p_f
            P[54:90:7] = 1.0                                    # JL = I
            P[90], P[91] = c.baumgarte
            t = ContactTerms()
            t.c, t.fr = c, fr
            (t.R, t.p, t.J, t.Jq, _, _, _, _, t.Jc, t.r, t.dr) = _carve_py(
                nv, c.dim, self.buf[self.offs[i]:self.offs[i] + sizes[i]])
            self.terms.append(t)
        self.m = sum(c.dim for c, _ in pairs)

    def anchor_errors(self, d, state) -> None:
        """The anchored contacts' Baumgarte errors e (and Jlog6(e)) from their frames' poses, after
        the kinematics at state (contacts without an anchor keep e = 0, JL = I)."""
        for i, (c, fr) in enumerate(self.pairs):
            if c.anchor is not None:
                R, p = frame_pose(d, state, fr)
                Rs, ps = c.anchor
                if c.kind == "point":
                    self.par[i, 48:51] = R.T @ (p - ps)
                else:
                    e = se3_log(Rs.T @ R, Rs.T @ (p - ps))
                    self.par[i, 48:54] = e
                    self.par[i, 54:90] = _jlog6(e).ravel()

    @property
    def anchored(self) -> bool:
        return any(c.anchor is not None for c, _ in self.pairs)

    def stacked(self, name) -> np.ndarray:
        """The contacts' Jc, r or dr stacked."""
        parts = [getattr(t, name) for t in self.terms]
        return np.concatenate(parts, axis=0) if parts else np.zeros((0,))


def _carve_py(nv, dim, buf):
    o, out = 0, []
    for shape in ((3, 3), (3,), (6, nv), (6, nv), (6, nv), (6, nv), (6, nv), (6,), (dim, nv), (dim,),
                  (dim, 2 * nv)):
        n = shape[0] * (shape[1] if len(shape) == 2 else 1)
        out.append(buf[o:o + n].reshape(shape))
        o += n
    return out


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


@njit(inline="always")
def contact_wrench(nv, fext, w, k, XF, dim, wa, R, J, Jq, f, add_fext, E, cols, ncol):
    """A contact force f (dim,) in its reference frame as the wrench w_F = [f; tau] in F's axes
    (rotated back by R^T for world_aligned; w: 6 scratch). add_fext: fext[k] += ^F X_k^T w_F (EIDAmb's external
    force). E (nv x nv, or 0 x 0): for world_aligned, E -= J_F^T d(w_F)/dz_q with
    d(R^T x) = [R^T x]^ Jq_ang z_q: the term EIDAmb's derivatives (force fixed in the body) miss.
    J and Jq vanish outside the frame's active columns cols[:ncol], and so does E's block."""
    for i in range(6):
        w[i] = 0.0
    for b in range(0, dim, 3):
        for i in range(3):
            w[b + i] = (R[0, i] * f[b] + R[1, i] * f[b + 1] + R[2, i] * f[b + 2]) if wa else f[b + i]
    if add_fext:
        for i in range(6):
            acc = 0.0
            for l in range(6):
                acc += XF[l, i] * w[l]
            fext[k, i] += acc
    if wa and E.shape[0] == nv:
        for qc in range(ncol):
            c = cols[qc]
            for b in range(0, dim, 3):
                dw0 = w[b + 1] * Jq[5, c] - w[b + 2] * Jq[4, c]        # w x Jq_ang[:, c]
                dw1 = w[b + 2] * Jq[3, c] - w[b] * Jq[5, c]
                dw2 = w[b] * Jq[4, c] - w[b + 1] * Jq[3, c]
                for qr in range(ncol):
                    rr = cols[qr]
                    E[rr, c] -= J[b, rr] * dw0 + J[b + 1, rr] * dw1 + J[b + 2, rr] * dw2


def delassus_inverse(model, terms, K):
    """K^-1 for the Delassus matrix K = Jc Minv Jc^T (m x m, symmetric positive definite when the
    contacts are independent: checked by its Cholesky factor); a ValueError naming the contacts
    whose constraints are redundant or cannot all be met (K singular)."""
    try:
        dg = np.abs(np.diag(np.linalg.cholesky(K)))
        ok = dg.min() > 1e-5 * dg.max()             # cond(K) ~ (max/min)^2 < 1e10
    except np.linalg.LinAlgError:
        ok = False
    if ok:
        Kinv = np.linalg.inv(K)
        return 0.5 * (Kinv + Kinv.T)
    s = np.linalg.svd(K, compute_uv=False)
    names, rows = [], []
    for t in terms:                 # the first contact whose rows make the set dependent
        rows.append(t.Jc)
        names.append(f"{t.c.frame} ({t.c.kind}, {t.c.reference})")
        Jall = np.vstack(rows)
        if np.linalg.matrix_rank(Jall, tol=1e-9 * max(1.0, np.abs(Jall).max())) < Jall.shape[0]:
            break
    raise ValueError("the contact constraints are redundant or cannot all be satisfied (the "
                     f"Delassus matrix Jc Minv Jc^T is singular, cond {s[0] / max(s[-1], 1e-300):.2e}): "
                     f"contacts {', '.join(names)} constrain the same motion; remove one, or use "
                     "point contacts")
