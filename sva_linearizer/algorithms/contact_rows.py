# SPDX-License-Identifier: BSD-3-Clause
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

Loops (Pinocchio's RigidConstraintModel with two joints; docs/loops.md): between c_a (frame_a at
offset_a) and c_b, with X12 the motion transform of c_b's pose in c_a (R12 its rotation),
ev = v_a - X12 v_b, u2 = X12 v_b, in c_a's axes:
    point:    r = [a_a,l + w_a x v_a,l] - R12 [a_b,l + w_b x v_b,l] + Kd (v_a,l - R12 v_b,l) + Kp e,
              e = R_a^T (p_a - p_b)
    6d:       r = a_a - X12 a_b + ev x u2 + Kd ev + Kp e,  e = log6(M_b^-1 M_a)
    revolute: the 6d rows, the angular three projected on u, w (perpendicular to the axis)
rotated by R_a for world_aligned (6d: without ev x u2; revolute: the linear rows only), Jc = J_a -
X12 J_b (its rows likewise). lambda acts on c_a's body; c_b's body receives -R12^T lambda at c_b
(point) or the wrench -X12^T lambda (6d). The rows are contact_rows' for each frame (frame_b's
with Kp = 0), combined by loop_rows; the reaction by loop_wrench.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..spatial import crm, se3_log
from .._jit import njit
from .._lanes import any_lane
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


LOOP_KINDS = ("point", "revolute", "6d")


class Loop:
    """A closed kinematic loop: a constraint between two frames of the robot, passed in the same
    `contacts=[...]` list as sl.Contact. kind "point" keeps the point offset_a on frame_a and the
    point offset_b on frame_b together (3 rows, Pinocchio CONTACT_3D with two joints), "6d" welds
    the frames (6 rows, CONTACT_6D); reference "local" (frame_a's axes at its point) or
    "world_aligned" (world axes there); baumgarte (Kp, Kd): the error e (point: R_a^T (p_a - p_b);
    6d: log6(M_b^-1 M_a)) and the relative velocity enter as for a contact (module docstring).
    The published forces lambda act on frame_a's body (in the reference frame, at frame_a's
    point); frame_b's body receives the opposite wrench (point: -lambda at frame_b's point).
    "revolute" (5 rows) leaves the rotation about `axis` (a unit vector in frame_a's axes) free:
    the 6d rows' linear three and their angular part projected on two unit vectors u, w
    perpendicular to the axis (u: frame_a's x, y or z axis least aligned with it, made
    perpendicular; w = axis x u), in frame_a's axes whatever the reference (world_aligned rotates
    the linear rows only); its forces are [f (3); the moments about u and w]."""

    __slots__ = ("frame_a", "frame_b", "kind", "reference", "offset_a", "offset_b", "baumgarte", "axis")

    def __init__(self, frame_a: str, frame_b: str, kind: str = "point",
                 offset_a: Sequence[float] = (0.0, 0.0, 0.0), offset_b: Sequence[float] = (0.0, 0.0, 0.0),
                 axis: Sequence[float] = (0.0, 0.0, 1.0), reference: str = "local",
                 baumgarte: tuple[float, float] = (0.0, 0.0)):
        for f in (frame_a, frame_b):
            if not isinstance(f, str) or not f:
                raise ValueError(f"Loop: frames must be non-empty frame names (link or body names), got {f!r}")
        what = f"Loop {frame_a!r}-{frame_b!r}"
        if frame_a == frame_b:
            raise ValueError(f"{what}: the two frames must differ")
        if kind not in LOOP_KINDS:
            raise ValueError(f"{what}: kind must be one of {LOOP_KINDS}, got {kind!r}")
        if reference not in REFERENCES:
            raise ValueError(f"{what}: reference must be one of {REFERENCES}, got {reference!r}")
        offs = []
        for name, off in (("offset_a", offset_a), ("offset_b", offset_b)):
            o = real_array(off, f"{what}: {name}").reshape(-1) if np.size(off) == 3 else None
            if o is None or not np.all(np.isfinite(o)):
                raise ValueError(f"{what}: {name} must be 3 finite numbers, got {off!r}")
            o.flags.writeable = False
            offs.append(o)
        ax = real_array(axis, f"{what}: axis").reshape(-1) if np.size(axis) == 3 else None
        if ax is None or not np.all(np.isfinite(ax)) or np.linalg.norm(ax) < 1e-9:
            raise ValueError(f"{what}: axis must be 3 finite numbers, not zero, got {axis!r}")
        ax = ax / np.linalg.norm(ax)
        ax.flags.writeable = False
        try:
            kp, kd = (float(x) for x in baumgarte)
        except (TypeError, ValueError):
            raise ValueError(f"{what}: baumgarte must be (Kp, Kd), two numbers, got {baumgarte!r}") from None
        if not (np.isfinite(kp) and np.isfinite(kd)):
            raise ValueError(f"{what}: baumgarte gains must be finite, got {baumgarte!r}")
        for name, value in (("frame_a", frame_a), ("frame_b", frame_b), ("kind", kind), ("reference", reference),
                            ("offset_a", offs[0]), ("offset_b", offs[1]), ("baumgarte", (kp, kd)), ("axis", ax)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError("sl.Loop is immutable: make a new one")

    @property
    def dim(self) -> int:
        """3 (point), 5 (revolute) or 6 (6d): the number of constraint rows / force components."""
        return {"point": 3, "revolute": 5, "6d": 6}[self.kind]

    @property
    def rows(self) -> int:
        """The rows computed: 6 for a revolute loop (projected on 5)."""
        return 3 if self.kind == "point" else 6

    def free_basis(self) -> tuple[np.ndarray, np.ndarray]:
        """(u, w): the unit vectors perpendicular to a revolute loop's axis (class docstring)."""
        n = self.axis
        e = np.eye(3)[int(np.argmin(np.abs(n)))]
        u = e - n * (n @ e)
        u /= np.linalg.norm(u)
        return u, np.cross(n, u)

    @property
    def frame(self) -> str:
        """The loop's name in messages: 'frame_a-frame_b'."""
        return f"{self.frame_a}-{self.frame_b}"

    @property
    def offset(self):
        return self.offset_a

    def __repr__(self):
        return (f"Loop({self.frame_a!r}, {self.frame_b!r}, kind={self.kind!r}, reference={self.reference!r}, "
                f"offset_a={tuple(self.offset_a)}, offset_b={tuple(self.offset_b)}, axis={tuple(self.axis)}, "
                f"baumgarte={self.baumgarte})")


class LoopRef:
    """A loop resolved on a model: frame_a's FrameRef (k, path, R_f, p_f, XF, as a contact's) and
    frame_b's (b)."""

    __slots__ = ("k", "path", "R_f", "p_f", "XF", "b")

    def __init__(self, a, b):
        self.k, self.path, self.R_f, self.p_f, self.XF = a.k, a.path, a.R_f, a.p_f, a.XF
        self.b = b


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
        if isinstance(c, Loop) and what == "contacts":
            try:
                fr = LoopRef(frame_ref(model, c.frame_a, c.offset_a), frame_ref(model, c.frame_b, c.offset_b))
            except ValueError as e:
                raise ValueError(f"{what}[{i}] ({c.frame!r}): {e}") from None
            if fr.k == fr.b.k:
                raise ValueError(f"{what}[{i}] ({c.frame!r}): the two frames are on the same rigid body: "
                                 "the loop constrains nothing")
            out.append((c, fr))
            continue
        if not isinstance(c, Contact):
            raise ValueError(f"{what}[{i}] must be an sl.Contact{' or an sl.Loop' if what == 'contacts' else ''}, "
                             f"got {type(c).__name__}")
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
        if isinstance(c, Loop):
            raise ValueError(f"forces[{i}]: an sl.Loop is a constraint, not a force input: pass it in contacts=; "
                             "forces take (sl.Contact, force) pairs")
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


@njit(inline="ir")
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


NI = 7      # ints per constraint of a set: [k, rows, world_aligned, ncol, loop, k_b, dim]: dim of the
            # published rows (5 for a revolute loop, whose 6 rows are projected), rows computed
NP = 146    # floats: [XF (36), R_f (9), p_f (3), e (6), JL (36), Kp, Kd, XF_b (36), R_fb (9), p_fb (3), u, w]


LOOP_SCRATCH = 96   # a loop's scratch after its two frames' terms (_loop_scratch)


def constraint_size(nv: int, c) -> int:
    """Floats of one constraint's results in its set's buffer: a contact's terms (terms_size); a
    loop's twice (frame_b's terms follow frame_a's) and its scratch."""
    return terms_size(nv, c.rows) * 2 + LOOP_SCRATCH if isinstance(c, Loop) else terms_size(nv, c.dim)


@njit(inline="ir")
def _loop_scratch(nv, dim, buf, o):
    """A loop's views after frame_a's terms at o: frame_b's terms (_carve_terms), then R12 = R_a^T R_b,
    p12 = R_a^T (p_b - p_a) (c_b's pose in c_a) and 6-vectors of scratch."""
    ts = 12 + 30 * nv + 6 + 3 * dim * nv + dim                    # terms_size
    tb = _carve_terms(nv, dim, buf, o + ts)
    o2 = o + 2 * ts
    R12 = carve_view(buf, o2, (3, 3))
    vecs = carve_view(buf, o2 + 12, (14, 6))
    return tb, R12, buf[o2 + 9:o2 + 12], vecs


@njit(inline="always")
def _x12(R12, p12, dim, x, out):
    """out = X12 x (dim 6: the motion transform of c_b's pose in c_a, [R x_l + p x (R x_a); R x_a])
    or R12 x (dim 3)."""
    for i in range(3):
        out[i] = R12[i, 0] * x[0] + R12[i, 1] * x[1] + R12[i, 2] * x[2]
    if dim == 6:
        for i in range(3):
            out[3 + i] = R12[i, 0] * x[3] + R12[i, 1] * x[4] + R12[i, 2] * x[5]
        c0, c1, c2 = _cross3(p12[0], p12[1], p12[2], out[3], out[4], out[5])
        out[0] += c0
        out[1] += c1
        out[2] += c2


@njit(inline="always")
def _x12t(R12, p12, dim, y, out):
    """out = X12^T y (dim 6: [R^T y_l; R^T (y_a - p x y_l)]) or R12^T y (dim 3)."""
    if dim == 6:
        c0, c1, c2 = _cross3(p12[0], p12[1], p12[2], y[0], y[1], y[2])
        t0, t1, t2 = y[3] - c0, y[4] - c1, y[5] - c2
        for i in range(3):
            out[3 + i] = R12[0, i] * t0 + R12[1, i] * t1 + R12[2, i] * t2
    for i in range(3):
        out[i] = R12[0, i] * y[0] + R12[1, i] * y[1] + R12[2, i] * y[2]


@njit(inline="always")
def _crm_add(u, x, out, sign):
    """out += sign * (u x x), the motion cross product (6-vectors)."""
    a0, a1, a2 = _cross3(u[3], u[4], u[5], x[0], x[1], x[2])
    b0, b1, b2 = _cross3(u[0], u[1], u[2], x[3], x[4], x[5])
    c0, c1, c2 = _cross3(u[3], u[4], u[5], x[3], x[4], x[5])
    out[0] += sign * (a0 + b0)
    out[1] += sign * (a1 + b1)
    out[2] += sign * (a2 + b2)
    out[3] += sign * c0
    out[4] += sign * c1
    out[5] += sign * c2


@njit(inline="always")
def _crf_add(dl, f, out, sign):
    """out += sign * (dl x* f), the force cross product: [dl_a x f_l; dl_a x f_a + dl_l x f_l]."""
    a0, a1, a2 = _cross3(dl[3], dl[4], dl[5], f[0], f[1], f[2])
    b0, b1, b2 = _cross3(dl[3], dl[4], dl[5], f[3], f[4], f[5])
    c0, c1, c2 = _cross3(dl[0], dl[1], dl[2], f[0], f[1], f[2])
    out[0] += sign * a0
    out[1] += sign * a1
    out[2] += sign * a2
    out[3] += sign * (b0 + c0)
    out[4] += sign * (b1 + c1)
    out[5] += sign * (b2 + c2)


@njit
def loop_rows(nv, derivatives, ip, P, buf, o, vel):
    """A loop's rows (module docstring: Loops), after set_rows gave frame_a's local rows (its Kp
    term with the loop's error e included) and frame_b's local rows y (contact_rows with Kp = 0:
    a_b,l + w_b x v_b,l + Kd v_b,l (point), a_b + Kd v_b (6d)), with poses and motions; with X12 the
    transform of c_b's pose in c_a (R12 for a point):
        Jc = J_a - X12 J_b,   r = r_a - X12 y (+ v_a x X12 v_b: 6d local)
    and their derivatives at fixed nu_dot, c_a -> c_a exp(Jq_a z), c_b -> c_b exp(Jq_b z):
        d(X12 x) = (X12 x) x Jq_a z - X12 (x x Jq_b z) + X12 dx,   de (Kp) += -JL X12 Jq_b (6d),
        -R12 Jq_b,l (point); world_aligned rows are R_a r (each 3-block) as for a contact.
    Every column is written (a loop reaches both frames' columns)."""
    dim, wa = ip[1], ip[2] != 0
    kp = P[90]
    R, p, J, Jq, dvq, daq, dan, a, Jc, r, dr = _carve_terms(nv, dim, buf, o)
    tb, R12, p12, V = _loop_scratch(nv, dim, buf, o)
    R2, p2, J2, Jq2, dvq2, daq2, dan2, a2, Jc2, r2, dr2 = tb
    y, u2, v1, v2, t, t2, rl, Ry, w = V[0], V[1], V[2], V[3], V[4], V[5], V[6], V[7], V[8]
    for i in range(3):
        acc = 0.0
        for k in range(3):
            acc += R[k, i] * (p2[k] - p[k])
            R12[i, k] = R[0, i] * R2[0, k] + R[1, i] * R2[1, k] + R[2, i] * R2[2, k]
        p12[i] = acc
    for i in range(6):
        y[i] = r2[i] if i < dim else 0.0
        rl[i] = r[i] if i < dim else 0.0
        v1[i] = 0.0
        v2[i] = 0.0
    for c in range(nv):
        for i in range(6):
            v1[i] += J[i, c] * vel[c]
            v2[i] += J2[i, c] * vel[c]
        for i in range(dim):
            t[i] = Jc2[i, c]
        _x12(R12, p12, dim, t, t2)
        for i in range(dim):
            Jc[i, c] -= t2[i]
    _x12(R12, p12, dim, y, Ry)
    _x12(R12, p12, 6, v2, u2)
    # d/dt (v_a - X12 v_b) = ... + (v_a - X12 v_b) x X12 v_b: in 6d local rows (Pinocchio's) and in
    # a revolute's (whose relative rotation rate about the axis does not vanish), either reference
    coriolis = dim == 6 and (not wa or ip[6] == 5)
    for i in range(dim):
        rl[i] -= Ry[i]
    if coriolis:
        _crm_add(v1, u2, rl, 1.0)
    if derivatives:
        for c in range(nv):
            # z_q column: -(Ry x Jq_a - X12 (y x Jq_b) + X12 dy + Kp (JL) X12 Jq_b)
            for i in range(6):
                t[i] = -dr2[i, c] if i < dim else 0.0
                w[i] = Jq2[i, c]
            if dim == 3:
                c0, c1, c2 = _cross3(y[0], y[1], y[2], Jq2[3, c], Jq2[4, c], Jq2[5, c])
                t[0] += c0 - kp * Jq2[0, c]
                t[1] += c1 - kp * Jq2[1, c]
                t[2] += c2 - kp * Jq2[2, c]
                _x12(R12, p12, 3, t, t2)
                c0, c1, c2 = _cross3(Ry[0], Ry[1], Ry[2], Jq[3, c], Jq[4, c], Jq[5, c])
                dr[0, c] += t2[0] - c0
                dr[1, c] += t2[1] - c1
                dr[2, c] += t2[2] - c2
            else:
                _crm_add(y, w, t, 1.0)
                _x12(R12, p12, 6, t, t2)                 # X12 (y x Jq_b - dy)
                for i in range(6):
                    t[i] = Jq[i, c]
                _crm_add(Ry, t, t2, -1.0)
                if any_lane(kp != 0.0):                      # (a parameter: alike in all lanes)
                    _x12(R12, p12, 6, w, t)              # X12 Jq_b
                    for i in range(6):
                        acc = 0.0
                        for l in range(6):
                            acc += P[54 + 6 * i + l] * t[l]
                        t2[i] -= kp * acc
                if coriolis:                              # d(v_a x u2) = -u2 x dv_a + v_a x du2
                    s1, s2 = V[10], V[11]
                    for i in range(6):
                        t[i] = dvq[i, c]
                    _crm_add(u2, t, t2, -1.0)
                    for i in range(6):
                        t[i] = dvq2[i, c]
                    _x12(R12, p12, 6, t, w)               # du2 = u2 x Jq_a - X12 (v_b x Jq_b) + X12 dv_b
                    for i in range(6):
                        t[i] = Jq[i, c]
                        s1[i] = 0.0
                    _crm_add(u2, t, w, 1.0)
                    for i in range(6):
                        t[i] = Jq2[i, c]
                    _crm_add(v2, t, s1, 1.0)
                    _x12(R12, p12, 6, s1, s2)
                    for i in range(6):
                        w[i] -= s2[i]
                    _crm_add(v1, w, t2, 1.0)
                for i in range(6):
                    dr[i, c] += t2[i]
            # nu column: -X12 dy/dnu (+ -u2 x J_a + v_a x X12 J_b: 6d local)
            for i in range(6):
                t[i] = dr2[i, nv + c] if i < dim else 0.0
            _x12(R12, p12, dim, t, t2)
            for i in range(dim):
                dr[i, nv + c] -= t2[i]
            if coriolis:
                for i in range(6):
                    t[i] = J[i, c]
                    t2[i] = 0.0
                _crm_add(u2, t, t2, -1.0)
                for i in range(6):
                    t[i] = J2[i, c]
                _x12(R12, p12, 6, t, w)
                _crm_add(v1, w, t2, 1.0)
                for i in range(6):
                    dr[i, nv + c] += t2[i]
    if ip[6] == 5:          # revolute: angular rows projected on u, w (frame_a's axes, any reference)
        for i in range(6):
            t[i] = rl[i]
        rl[3] = P[140] * t[3] + P[141] * t[4] + P[142] * t[5]
        rl[4] = P[143] * t[3] + P[144] * t[4] + P[145] * t[5]
        rl[5] = 0.0
        for c in range(2 * nv if derivatives else 0):
            x3, x4, x5 = dr[3, c], dr[4, c], dr[5, c]
            dr[3, c] = P[140] * x3 + P[141] * x4 + P[142] * x5
            dr[4, c] = P[143] * x3 + P[144] * x4 + P[145] * x5
            dr[5, c] = 0.0
        for c in range(nv):
            x3, x4, x5 = Jc[3, c], Jc[4, c], Jc[5, c]
            Jc[3, c] = P[140] * x3 + P[141] * x4 + P[142] * x5
            Jc[4, c] = P[143] * x3 + P[144] * x4 + P[145] * x5
            Jc[5, c] = 0.0
    if wa:                                              # r = R_a r_l (each 3-block), d(R x) = R (dx - x x Jq_a,ang)
        for b in range(0, 3 if ip[6] == 5 else dim, 3):
            for c in range(nv):
                if derivatives:
                    c0, c1, c2 = _cross3(rl[b], rl[b + 1], rl[b + 2], Jq[3, c], Jq[4, c], Jq[5, c])
                    t[0], t[1], t[2] = dr[b, c] - c0, dr[b + 1, c] - c1, dr[b + 2, c] - c2
                    for i in range(3):
                        dr[b + i, c] = R[i, 0] * t[0] + R[i, 1] * t[1] + R[i, 2] * t[2]
                    t[0], t[1], t[2] = dr[b, nv + c], dr[b + 1, nv + c], dr[b + 2, nv + c]
                    for i in range(3):
                        dr[b + i, nv + c] = R[i, 0] * t[0] + R[i, 1] * t[1] + R[i, 2] * t[2]
                t[0], t[1], t[2] = Jc[b, c], Jc[b + 1, c], Jc[b + 2, c]
                for i in range(3):
                    Jc[b + i, c] = R[i, 0] * t[0] + R[i, 1] * t[1] + R[i, 2] * t[2]
            for i in range(3):
                r[b + i] = R[i, 0] * rl[b] + R[i, 1] * rl[b + 1] + R[i, 2] * rl[b + 2]
        if ip[6] == 5:
            for i in range(3, 6):
                r[i] = rl[i]
    else:
        for i in range(dim):
            r[i] = rl[i]


@njit
def loop_wrench(nv, fext, ip, P, buf, o, lam, add_fext, E):
    """The loop force's reaction on frame_b's body (after set_rows at the state; frame_a's share is
    contact_wrench's): with l the force in c_a's axes (R_a^T lam for world_aligned),
        w_b = -X12^T l (6d), [-R12^T l; 0] (point: at c_b's point), fext[k_b] += ^B X_k^T w_b,
    and E -= J_b^T dw_b/dz_q, for l fixed in the reference frame:
        6d: dw_b = -(Jq_b z) x* w_b - X12^T ((Jq_a z) x* l) (- X12^T (l x Jq_a,ang z) for world_aligned)
        point: dw_b = w_b x Jq_b,ang z (+ R12^T (l x Jq_a,ang z) for local)."""
    dim, wa, kb = ip[1], ip[2] != 0, ip[5]
    R, p, J, Jq, dvq, daq, dan, a, Jc, r, dr = _carve_terms(nv, dim, buf, o)
    tb, R12, p12, V = _loop_scratch(nv, dim, buf, o)
    R2, p2, J2, Jq2, dvq2, daq2, dan2, a2, Jc2, r2, dr2 = tb
    ll, wb, t, t2, dw = V[9], V[10], V[11], V[12], V[13]
    rev = ip[6] == 5
    for b in range(0, 6, 3):
        for i in range(3):
            if b < dim and not (rev and b == 3):
                ll[b + i] = (R[0, i] * lam[b] + R[1, i] * lam[b + 1] + R[2, i] * lam[b + 2]) if wa else lam[b + i]
            elif rev:                                    # the moments about u and w
                ll[b + i] = P[140 + i] * lam[3] + P[143 + i] * lam[4]
            else:
                ll[b + i] = 0.0
    if rev:                 # frame_a's share (contact_wrench's, with the projected moment)
        for i in range(6):
            acc = 0.0
            for l in range(6):
                acc += P[6 * l + i] * ll[l]
            if add_fext:
                fext[ip[0], i] += acc
        if wa and E.shape[0] == nv:                      # d(R^T f) = (R^T f) x Jq_a,ang z_q
            for c in range(nv):
                c0, c1, c2 = _cross3(ll[0], ll[1], ll[2], Jq[3, c], Jq[4, c], Jq[5, c])
                for rr in range(nv):
                    E[rr, c] -= J[0, rr] * c0 + J[1, rr] * c1 + J[2, rr] * c2
    _x12t(R12, p12, dim, ll, wb)
    for i in range(6):
        wb[i] = -wb[i] if i < dim else 0.0
    if add_fext:
        for i in range(6):
            acc = 0.0
            for l in range(6):
                acc += P[92 + 6 * l + i] * wb[l]
            fext[kb, i] += acc
    if E.shape[0] != nv:
        return
    for c in range(nv):
        for i in range(6):
            dw[i] = 0.0
        if dim == 3:
            c0, c1, c2 = _cross3(wb[0], wb[1], wb[2], Jq2[3, c], Jq2[4, c], Jq2[5, c])
            dw[0], dw[1], dw[2] = c0, c1, c2
            if not wa:
                t[0], t[1], t[2] = _cross3(ll[0], ll[1], ll[2], Jq[3, c], Jq[4, c], Jq[5, c])
                _x12t(R12, p12, 3, t, t2)
                for i in range(3):
                    dw[i] += t2[i]
        else:
            for i in range(6):
                t[i] = Jq2[i, c]
            _crf_add(t, wb, dw, -1.0)
            for i in range(6):
                t[i] = Jq[i, c]
                t2[i] = 0.0
            _crf_add(t, ll, t2, 1.0)
            if wa:
                c0, c1, c2 = _cross3(ll[0], ll[1], ll[2], Jq[3, c], Jq[4, c], Jq[5, c])
                t2[0] += c0
                t2[1] += c1
                t2[2] += c2
                if not rev:                               # (a revolute's moments stay in frame_a's axes)
                    d0, d1, d2 = _cross3(ll[3], ll[4], ll[5], Jq[3, c], Jq[4, c], Jq[5, c])
                    t2[3] += d0
                    t2[4] += d1
                    t2[5] += d2
            _x12t(R12, p12, 6, t2, t)
            for i in range(6):
                dw[i] -= t[i]
        for rr in range(nv):
            acc = 0.0
            for i in range(6):
                acc += J2[i, rr] * dw[i]
            E[rr, c] -= acc


@kernel
def set_rows(m, d, q, vel, nu_dot, derivatives, ipar, par, offs, buf, cols):
    """For every constraint of a set, its frame's pose (frame_pose_c) and motion (frame_motion), then
    contact_rows: ipar[i] = [k, rows, world_aligned, ncol, loop, k_b, dim], par[i] (NP floats),
    outputs carved from buf[offs[i]:] (_carve_terms); for a loop the same for frame_b (its terms
    after frame_a's, Kp = 0), then loop_rows combines them (module docstring: Loops).
    cols[i, :nv]: frame_a's active columns, cols[i, nv:]: frame_b's (frame_motion and contact_rows
    are inlined once, for both frames: numba copies an inlined function's IR at each call site).
    Its callers pass `derivatives` as bool(constant), a run-time flag: numba compiles a kernel once
    per literal constant argument, and set_rows, with contact_rows inlined, takes ~35 s to compile
    on 2 cores; the branch costs nothing next to a contact's rows."""
    nv = m.nv
    for i in range(ipar.shape[0]):
        dim = ipar[i, 1]
        P = par[i]
        loop = ipar[i, 4] != 0
        ts = 12 + 30 * nv + 6 + 3 * dim * nv + dim                # terms_size
        for side in range(2 if loop else 1):    # frame_a, then a loop's frame_b (its rows: Kp = 0)
            o, pp = offs[i] + side * ts, 92 * side
            R, p, J, Jq, dvq, daq, dan, a, Jc, r, dr = _carve_terms(nv, dim, buf, o)
            k, ci = ipar[i, 5 * side], cols[i, side * nv:(side + 1) * nv]
            if not derivatives:         # with derivatives: the pose of the pass before, same q
                frame_pose_c(m, d, q, k, carve_view(P, 36 + pp, (3, 3)), P[45 + pp:48 + pp], R, p, ci)
            elif loop and side == 0:    # a loop's rows reach frame_b's columns too
                for rr in range(dim):
                    for c in range(2 * nv):
                        dr[rr, c] = 0.0
            ncol = frame_motion(m, d, k, carve_view(P, pp, (6, 6)), vel, nu_dot, derivatives, J, Jq, dvq, daq,
                                dan, a, ci)
            contact_rows(m, d, ncol, dim, ipar[i, 2] != 0 and not loop, P[90] if side == 0 else 0.0, P[91],
                         P[48:54], carve_view(P, 54, (6, 6)), vel, derivatives, R, J, Jq, dvq, daq, dan, a, ci,
                         Jc, r, dr)
        if loop:
            loop_rows(nv, derivatives, ipar[i], P, buf, offs[i], vel)


@njit
def set_wrench(nv, fext, w, ipar, par, offs, buf, cols, lam, add_fext, E):
    """contact_wrench for every contact of a set (after set_rows at the state), lam stacked; fext:
    the workspace's d.fext, w: a 6-vector of scratch (the arrays it needs, not the whole (m, d):
    cheap to call)."""
    o = 0
    for i in range(ipar.shape[0]):
        dim, m = ipar[i, 1], ipar[i, 6]
        R, p, J, Jq, dvq, daq, dan, a, Jc, r, dr = _carve_terms(nv, dim, buf, offs[i])
        if m == dim:                    # (a revolute loop applies frame_a's share in loop_wrench)
            contact_wrench(nv, fext, w, ipar[i, 0], carve_view(par[i], 0, (6, 6)), dim, ipar[i, 2] != 0, R, J,
                           Jq, lam[o:o + m], add_fext, E, cols[i], ipar[i, 3])
        if ipar[i, 4] != 0:
            loop_wrench(nv, fext, ipar[i], par[i], buf, offs[i], lam[o:o + m], add_fext, E)
        o += m


@njit
def set_gather(nv, ipar, offs, buf, what, out):
    """The set's Jc (what 0, m x nv), r (1, m x 1) or dr (2, m x 2nv), stacked into out."""
    o = 0
    for i in range(ipar.shape[0]):
        dim = ipar[i, 1]
        R, p, J, Jq, dvq, daq, dan, a, Jc, r, dr = _carve_terms(nv, dim, buf, offs[i])
        for rr in range(ipar[i, 6]):
            if what == 0:
                for c in range(nv):
                    out[o + rr, c] = Jc[rr, c]
            elif what == 1:
                out[o + rr, 0] = r[rr]
            else:
                for c in range(2 * nv):
                    out[o + rr, c] = dr[rr, c]
        o += ipar[i, 6]


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
        """(ints, floats) that a set of these constraints occupies: ipar, offs, cols; par, buf."""
        nc = len(pairs)
        return nc * (NI + 1 + 2 * nv), nc * NP + sum(constraint_size(nv, c) for c, _ in pairs)

    def __init__(self, d, pairs, ints=None, floats=None):
        """ints, floats: zeroed flat int64 / float64 arrays of sizes(d.nv, pairs) to hold the set's
        arrays (a ContactPlan's buffers); None: the set allocates its own."""
        nv = d.nv
        nc = len(pairs)
        ni, nf = ContactSet.sizes(nv, pairs)
        ints = np.zeros(ni, dtype=np.int64) if ints is None else ints
        floats = np.zeros(nf) if floats is None else floats
        self.pairs = pairs
        self.ipar = ints[0:NI * nc].reshape((nc, NI))
        self.offs = ints[NI * nc:(NI + 1) * nc]
        self.cols = ints[(NI + 1) * nc:ni].reshape((nc, 2 * nv))
        self.par = floats[0:NP * nc].reshape((nc, NP))
        self.buf = floats[NP * nc:nf]
        sizes = [constraint_size(nv, c) for c, _ in pairs]
        self.offs[1:] = np.cumsum(sizes)[:-1] if nc else []
        self.terms = []
        for i, (c, fr) in enumerate(pairs):
            loop = isinstance(c, Loop)
            rows = c.rows if loop else c.dim
            self.ipar[i, 0:7] = (fr.k, rows, c.reference == "world_aligned",
                                 len(fr.path) + (6 if d.floating_base else 0),   # active columns
                                 loop, fr.b.k if loop else 0, c.dim)
            P = self.par[i]
            P[0:36] = fr.XF.ravel()
            P[36:45] = fr.R_f.ravel()
            P[45:48] = fr.p_f
            P[54:90:7] = 1.0                                    # JL = I
            P[90], P[91] = c.baumgarte
            if loop:
                P[92:128] = fr.b.XF.ravel()
                P[128:137] = fr.b.R_f.ravel()
                P[137:140] = fr.b.p_f
                if c.kind == "revolute":
                    P[140:143], P[143:146] = c.free_basis()
            t = ContactTerms()
            t.c, t.fr = c, fr
            (t.R, t.p, t.J, t.Jq, _, _, _, _, t.Jc, t.r, t.dr) = _carve_py(
                nv, self.ipar[i, 1], self.buf[self.offs[i]:self.offs[i] + sizes[i]])
            t.Jc, t.r, t.dr = t.Jc[:c.dim], t.r[:c.dim], t.dr[:c.dim]
            self.terms.append(t)
        self.m = sum(c.dim for c, _ in pairs)

    def anchor_errors(self, d, state) -> None:
        """The anchored contacts' Baumgarte errors e (and Jlog6(e)) from their frames' poses, after
        the kinematics at state (contacts without an anchor keep e = 0, JL = I)."""
        for i, (c, fr) in enumerate(self.pairs):
            if isinstance(c, Loop):
                if c.baumgarte[0] != 0.0:                   # e = R_a^T (p_a - p_b) / log6(M_b^-1 M_a)
                    Ra, pa = frame_pose(d, state, fr)
                    Rb, pb = frame_pose(d, state, fr.b)
                    if c.kind == "point":
                        self.par[i, 48:51] = Ra.T @ (pa - pb)
                    else:
                        e = se3_log(Rb.T @ Ra, Rb.T @ (pa - pb))
                        self.par[i, 48:54] = e
                        self.par[i, 54:90] = _jlog6(e).ravel()
            elif c.anchor is not None:
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
        """Whether errors are set per state in Python (anchor_errors): anchored contacts, loops
        with a Baumgarte Kp."""
        return any(c.baumgarte[0] != 0.0 if isinstance(c, Loop) else c.anchor is not None
                   for c, _ in self.pairs)

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
