# SPDX-License-Identifier: BSD-3-Clause
"""Centroidal dynamics: the robot's momentum about its centre of mass (Orin, Goswami, Lee,
"Centroidal dynamics of a humanoid robot", Auton. Robots 35, 2013) and its rate, with their
derivatives, from the quantities of one EIDAmb pass and IDSVA's composites.

Definitions (Pinocchio 4.1's ccrba / computeCentroidalMomentumTimeVariation /
computeCentroidalDynamicsDerivatives, so that results compare):
    h_G = A_G(q) nu: [linear momentum; angular momentum about the centre of mass G] in world axes
    h_G_dot = A_G nu_dot + A_G_dot nu: its time derivative along a motion with acceleration nu_dot
              (kinematic: gravity plays no part in it; by Newton-Euler it equals the external
              wrench about G, gravity's included, when nu_dot is the robot's true acceleration)
with nu = [v (6, the base's body twist), r] and nu_dot its derivative, as everywhere in the package;
the derivatives are taken with respect to z = [z_q, z_nu] (H -> H exp(z_H^), s + z_s, nu + z_nu) and
nu_dot: dh_G/dz = [dh_G/dz_q | A_G], dh_G_dot/dz = [dh_G_dot/dz_q | dh_G_dot/dnu],
dh_G_dot/dnu_dot = A_G. Pinocchio's matrices are the same (its free-flyer tangent is the body
frame's too; its `a` is nu_dot) up to the joints' order. A fixed base is part of the world: the
mass, G and the momentum are the moving bodies' (Pinocchio's convention too).

How (body coordinates; IDSVA's sweeps, eidamb_derivatives: idsva_forward, idsva_terms,
idsva_accumulate): EIDAmb without gravity gives each body's twist, acceleration and subtree force
f_k, so f_0 = h_0_dot, the rate of the total momentum at the base's origin in base axes (T4.1:41
with a_0^r = 0). The forward sweep also gives each body's pose, hence G and the momentum; the
backward sweep the composites M^C_k, 2B^C_k (symmetric part KC and momentum hC: 2B^C x = KC x +
x x* hC) and, per joint k with Gamma, sigma, Psi-dot, Psi-ddot (IDSVA:5-7),
    t1 = M^C Gamma                                     = d h / d r_k  (= d h_dot / d rdd_k)
    t2 = 2B^C Gamma + M^C (S-dot + Psi-dot)            = d h_dot / d r_k
    t3 = 2B^C Psi-dot + M^C Psi-ddot + f^C x-bar* sigma = d h_dot / d s_k
(the base rows of IDSVA's derivatives: the base's wrench is h_0_dot without gravity) and, here,
    tm = sigma x* h^C + M^C Psi-dot                    = d h / d s_k
    (the bodies of subtree(k) turn about sigma_k: d(M_b v_b) = sigma x* M_b v_b - M_b (sigma x v_lam)),
all in k's frame, about its origin. Only the base's rows are wanted, so each goes straight to G in
world axes by k's pose (one transform per joint, not a walk up the ancestors), plus the terms of
G's own motion, d c / d s_k = R_k (M^C sigma)_l / m in world axes:
    d h_G / d s_k += [0; h_G,l x dc/ds_k],  d h_G_dot / d s_k += [0; h_G_dot,l x dc/ds_k].
z_H turns the base and everything with it: d x / d z_H,ang = (R e_c) x x (each 3-block of h_G,
h_G_dot), nothing depends on z_H,lin; the base velocity's columns are M^C_0 (A_G) and 2B^C_0 +
M^C_0 (v_0 x) (Table 4.4's base block, IDSVA:20), taken to G likewise.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from .._arrays import _FLOAT64
from .._jit import DirectEntry, njit
from .._intrinsics import carve_view
from ..coupling import is_coupled
from ..data import Data, get_data
from ..layout import views
from ..spatial_ops import cross_f, cross_m, mv_r
from ..state import State, as_vector, input_error
from .common import (BAD_INPUT, EIDAMB_STEPS, NOT_FINITE, check_state, largest_inputs, not_finite,
                     overflow_error)
from .eidamb import eidamb
from .eidamb_derivatives import idsva_accumulate, idsva_forward, idsva_terms
from .kinematics import fill_custom, prepare

if TYPE_CHECKING:
    from ..model import Model

COMPILE_GROUP = "centroidal"  # the compile group of this module's kernels (_jit)

NO_MASS = 1     # a status of centroidal_entry: the moving bodies have no mass (G undefined)


def buffer_size(nv: int, nb: int) -> int:
    """Floats of a centroidal call's buffer (carve): results (h_G, h_G_dot, com, mass; dh_G/dz,
    dh_G_dot/dz) and the bodies' poses (scratch)."""
    return 16 + 24 * nv + 12 * nb


@njit(inline="ir")
def carve(nv, nb, buf):
    """The views of a centroidal call's buffer: h (6), hd (6), com (3), mass (1), dh (6 x 2nv),
    dhd (6 x 2nv), poses (nb x 12: a body's axes in world axes row by row, then its origin from
    the base's, in world axes)."""
    h = carve_view(buf, 0, (6,))
    hd = carve_view(buf, 6, (6,))
    com = carve_view(buf, 12, (3,))
    mass = carve_view(buf, 15, (1,))
    dh = carve_view(buf, 16, (6, 2 * nv))
    dhd = carve_view(buf, 16 + 12 * nv, (6, 2 * nv))
    poses = carve_view(buf, 16 + 24 * nv, (nb, 12))
    return h, hd, com, mass, dh, dhd, poses


@njit(inline="always")
def _to_g(P, c, x, out, col):
    """out[:, col] = the wrench x of a body's frame in world axes about G: with P the body's pose
    (poses: R row by row, then p) and c = G, both from the base's origin in world axes,
    [R x_l; R x_a + (p - c) x R x_l]."""
    l0 = P[0] * x[0] + P[1] * x[1] + P[2] * x[2]
    l1 = P[3] * x[0] + P[4] * x[1] + P[5] * x[2]
    l2 = P[6] * x[0] + P[7] * x[1] + P[8] * x[2]
    p0, p1, p2 = P[9] - c[0], P[10] - c[1], P[11] - c[2]
    out[0, col], out[1, col], out[2, col] = l0, l1, l2
    out[3, col] = P[0] * x[3] + P[1] * x[4] + P[2] * x[5] + p1 * l2 - p2 * l1
    out[4, col] = P[3] * x[3] + P[4] * x[4] + P[5] * x[5] + p2 * l0 - p0 * l2
    out[5, col] = P[6] * x[3] + P[7] * x[4] + P[8] * x[5] + p0 * l1 - p1 * l0


@njit(inline="always")
def _pose(X, Pp, P):
    """P = body k's pose (poses) from its parent's Pp and the tree transform X = ^kX_lam =
    [[E, F], [0, E]] (F E^T = o^, k's origin at -E^T o in the parent: frames.frame_pose_c)."""
    o0 = X[2, 3] * X[1, 0] + X[2, 4] * X[1, 1] + X[2, 5] * X[1, 2]
    o1 = X[0, 3] * X[2, 0] + X[0, 4] * X[2, 1] + X[0, 5] * X[2, 2]
    o2 = X[1, 3] * X[0, 0] + X[1, 4] * X[0, 1] + X[1, 5] * X[0, 2]
    r0 = -(X[0, 0] * o0 + X[1, 0] * o1 + X[2, 0] * o2)
    r1 = -(X[0, 1] * o0 + X[1, 1] * o1 + X[2, 1] * o2)
    r2 = -(X[0, 2] * o0 + X[1, 2] * o1 + X[2, 2] * o2)
    for i in range(3):
        a0, a1, a2 = Pp[3 * i], Pp[3 * i + 1], Pp[3 * i + 2]
        P[9 + i] = Pp[9 + i] + a0 * r0 + a1 * r1 + a2 * r2
        for c in range(3):
            P[3 * i + c] = a0 * X[c, 0] + a1 * X[c, 1] + a2 * X[c, 2]   # R_lam E^T


@njit(inline="always")
def _add_cross(y, g0, g1, g2, out, col):
    """out[3:6, col] += y_l x g (g: G's motion, world axes)."""
    out[3, col] += y[1] * g2 - y[2] * g1
    out[4, col] += y[2] * g0 - y[0] * g2
    out[5, col] += y[0] * g1 - y[1] * g0


@njit
def centroidal_entry(ib, fb, q, vel, nu_dot, derivatives, buf):
    """h_G, h_G_dot, A_G, G and the mass (and with `derivatives`, a run-time bool, dh_G/dz_q,
    dh_G_dot/dz_q and dh_G_dot/dnu) into buf's views (carve), one compiled call on the Data's
    buffers (module docstring): kinematics and EIDAmb without gravity; forward, each body's pose,
    its share of the mass, of G and of the momentum, and IDSVA's forward terms; backward, IDSVA's
    terms with each joint's columns taken straight to G in world axes (_to_g), and the
    composites. A fixed base's own inertia is left out. Returns 0, BAD_INPUT, NO_MASS or
    NOT_FINITE."""
    m, d, _ = views(ib, fb)
    if prepare(m, d, q, vel, nu_dot) != 0:
        return BAD_INPUT
    nv, nb, floating = m.nv, m.nb, m.floating
    h, hd, com, mass, dh, dhd, poses = carve(nv, nb, buf)
    IC, KC, hC, tt, Ps, Sig, I, R, T = d.IC, d.KC, d.hC, d.tt, d.Ps, d.Sig, m.I, d.R, d.T
    for i in range(6):
        d.a[0, i] = nu_dot[i] if floating else 0.0             # a_0^r = 0: no gravity
    eidamb(m, d, vel, nu_dot, m.nb > 0)                          # f[0] = h_0_dot
    P0 = poses[0]
    for i in range(3):
        P0[9 + i] = 0.0
        for j in range(3):
            P0[3 * i + j] = R[i, j]
    c, zero, y = d.t6[2], d.t6[3], d.t6[4]                       # G (from the base's origin), 0, scratch
    for i in range(6):
        c[i] = 0.0
        zero[i] = 0.0
        h[i] = 0.0
    ms = 0.0
    for k in range(nb):                                          # forward
        if k > 0:
            _pose(d.Xup[k], poses[m.lam[k]], poses[k])
        idsva_forward(m, d, k, k > 0 or floating)
        if k > 0 or floating:                                    # (a fixed base is the world's)
            P, Ik = poses[k], I[k]
            mk = Ik[0, 0]
            ms += mk                                             # m c += m_k p_k + R_k h_k
            for i in range(3):
                c[i] += (mk * P[9 + i] + P[3 * i] * Ik[5, 1] + P[3 * i + 1] * Ik[3, 2]
                         + P[3 * i + 2] * Ik[4, 0])
            _to_g(P, zero, d.hv[k], T, 0)                        # the momentum about the base's origin
            for i in range(6):
                h[i] += T[i, 0]
    mass[0] = ms
    if not ms > 0.0:
        return NO_MASS
    for i in range(3):
        c[i] /= ms
        com[i] = c[i] + (q[i] if floating else 0.0)
    h[3] -= c[1] * h[2] - c[2] * h[1]                            # moved to G
    h[4] -= c[2] * h[0] - c[0] * h[2]
    h[5] -= c[0] * h[1] - c[1] * h[0]
    _to_g(P0, c, d.f[0], T, 1)
    for i in range(6):
        hd[i] = T[i, 1]
    if not floating:                                             # composites of the moving bodies
        for i in range(6):
            hC[0, i] = 0.0
            for j in range(6):
                IC[0, i, j] = 0.0
                KC[0, i, j] = 0.0
    for k in range(nb - 1, 0, -1):                               # backward
        j, t, P, rk = m.vidx[k], tt[k], poses[k], m.rig[k]
        idsva_terms(m, d, k)                                     # t1, t2, t3
        _to_g(P, c, t[0], dh, nv + j)                            # A_G
        if derivatives:
            _to_g(P, c, t[1], dhd, nv + j)                       # d h_dot / d r_k
            _to_g(P, c, t[2], dhd, j)                            # d h_dot / d s_k
            mv_r(IC[k], rk, Ps[k, 0], t[3])                      # tm = M^C Psi-dot + sigma x* hC (in
            cross_f(Sig[k], hC[k], t[3])                         # t4's row: IDSVA's t4 is not used)
            _to_g(P, c, t[3], dh, j)                             # d h / d s_k
            mv_r(IC[k], rk, Sig[k], y)                           # m dc/ds_k = R_k (M^C sigma)_l
            g0 = (P[0] * y[0] + P[1] * y[1] + P[2] * y[2]) / ms
            g1 = (P[3] * y[0] + P[4] * y[1] + P[5] * y[2]) / ms
            g2 = (P[6] * y[0] + P[7] * y[1] + P[8] * y[2]) / ms
            _add_cross(h, g0, g1, g2, dh, j)
            _add_cross(hd, g0, g1, g2, dhd, j)
        idsva_accumulate(m, d, k, m.lam[k])
    if floating:                                                 # the base's columns
        I0, e, v0 = IC[0], d.t6[6], d.v[0]
        for cc in range(6):
            _to_g(P0, c, I0[cc], dh, nv + cc)                    # (M^C_0 symmetric: row = column)
            if derivatives:
                for i in range(6):
                    e[i] = 1.0 if i == cc else 0.0
                    zero[i] = 0.0
                cross_m(v0, e, zero, 1.0)                        # 2B^C_0 e + M^C_0 (v_0 x e)
                mv_r(I0, m.rig[0], zero, y)
                cross_f(e, hC[0], y)
                for i in range(6):
                    y[i] += KC[0, i, cc]
                _to_g(P0, c, y, dhd, nv + cc)
        if derivatives:                                          # z_H: d(R x)/dz_ang = (R e) x (R x)
            for cc in range(3):
                for i in range(6):
                    dh[i, cc] = 0.0
                    dhd[i, cc] = 0.0
                r0, r1, r2 = R[0, cc], R[1, cc], R[2, cc]
                for out, x in ((dh, h), (dhd, hd)):
                    for b in range(0, 6, 3):
                        out[b, 3 + cc] = r1 * x[b + 2] - r2 * x[b + 1]
                        out[b + 1, 3 + cc] = r2 * x[b] - r0 * x[b + 2]
                        out[b + 2, 3 + cc] = r0 * x[b + 1] - r1 * x[b]
    bad = False
    for i in range(6):
        bad |= not_finite(h[i]) or not_finite(hd[i])
        for col in range(nv, 2 * nv):
            bad |= not_finite(dh[i, col])
        for col in range(0, 2 * nv if derivatives else 0):
            bad |= not_finite(dh[i, col]) or not_finite(dhd[i, col])
    if bad:
        return NOT_FINITE
    return 0


class Centroidal:
    """The centroidal quantities at a state (module docstring; world axes, about the centre of mass,
    linear first): h (6,) = A_G nu; h_dot (6,) = A_G nu_dot + A_G_dot nu (None without nu_dot);
    A_G (6, nv), columns [v (6), r]; com (3,) the centre of mass in the world; mass. With the
    derivatives (centroidal_derivatives): dh_dz (6, 2nv) = [dh/dz_q | A_G], dhdot_dz (6, 2nv) =
    [dh_dot/dz_q | dh_dot/dnu], dhdot_dnu_dot (6, nv) = A_G (else None)."""

    __slots__ = ("h", "h_dot", "A_G", "com", "mass", "dh_dz", "dhdot_dz", "dhdot_dnu_dot")

    def __init__(self, h, h_dot, A_G, com, mass, dh_dz=None, dhdot_dz=None):
        self.h = h
        self.h_dot = h_dot
        self.A_G = A_G
        self.com = com
        self.mass = mass
        self.dh_dz = dh_dz
        self.dhdot_dz = dhdot_dz
        self.dhdot_dnu_dot = None if dh_dz is None else A_G

    def __repr__(self):
        return f"<Centroidal nv={self.A_G.shape[1]} mass={self.mass:.6g}>"


class _Workspace:
    """A Data's centroidal buffer (buffer_size) and its views (carve), made on its first centroidal
    call and kept in it (Data.copy drops it); rigid: whether the moving bodies' inertias are of
    rigid-body form (the mass and G are then defined); result: the Centroidal that calls with this
    Data return."""

    __slots__ = ("buf", "h", "hd", "com", "mass", "dh", "dhd", "A", "rigid", "result")

    def __init__(self, d):
        nv = d.nv
        self.buf = np.zeros(buffer_size(nv, d.nj + 1))
        o, views_ = 0, []
        for shape in ((6,), (6,), (3,), (1,), (6, 2 * nv), (6, 2 * nv)):
            n = shape[0] * (shape[1] if len(shape) == 2 else 1)
            views_.append(self.buf[o:o + n].reshape(shape))
            o += n
        self.h, self.hd, self.com, self.mass, self.dh, self.dhd = views_
        self.A = self.dh[:, nv:]
        self.rigid = bool(d.rig[1:].all() and (d.rig[0] or not d.floating_base))
        self.result = None


# centroidal_entry without numba's dispatch for its one signature: the Data's buffers, a State's q
# and v, a kernel vector nu_dot, a bool, the workspace's buffer
_ENTRY = DirectEntry(centroidal_entry, np.zeros(1, dtype=np.int64), np.zeros(1), np.zeros(1), np.zeros(1),
                     np.zeros(1), True, np.zeros(1))


def _coupled(model, state, nu_dot, derivatives) -> Centroidal:
    """A model with mimic joints: the tree's quantities at the tree state (s_tree = s0 + G_s s,
    nu_tree = G nu: linear), their z_q, nu and nu_dot columns times G."""
    G = model.G
    nu_tree = None if nu_dot is None else model.tree_vector(nu_dot, "nu_dot")
    r = centroidal(model.tree, model.tree_state(state), nu_tree, derivatives)
    A = r.A_G @ G
    if not derivatives:
        return Centroidal(r.h, r.h_dot, A, r.com, r.mass)
    nt = G.shape[0]
    dh = np.hstack([r.dh_dz[:, :nt] @ G, A])
    dhd = np.hstack([r.dhdot_dz[:, :nt] @ G, r.dhdot_dz[:, nt:] @ G])
    return Centroidal(r.h, r.h_dot, A, r.com, r.mass, dh, dhd)


def centroidal(model: Model, state: State, nu_dot, derivatives: bool, data: Data | None = None) -> Centroidal:
    """centroidal_momentum / centroidal_derivatives (their docstrings): views into the Data with
    data=, fresh arrays without."""
    if is_coupled(model):
        if data is not None:
            raise ValueError("centroidal: a model with mimic joints takes no data= (load it with "
                             "mimic=False for that)")
        return _coupled(model, state, nu_dot, derivatives)
    if type(data) is not Data or data._arrays is not model._arrays:
        d = get_data(model, data)     # checked against the model
    else:
        d = data
    nv = d.nv
    rate = nu_dot is not None
    if not rate:
        nd = _ZEROS.get(nv)
        if nd is None:
            nd = _ZEROS[nv] = np.zeros(nv)
    elif not (type(nu_dot) is np.ndarray and nu_dot.dtype is _FLOAT64 and nu_dot.shape == (nv,)
              and nu_dot.flags.carray):   # (as_vector's fast case, inline)
        nd = as_vector("nu_dot", nu_dot, nv)
    else:
        nd = nu_dot
    if type(state) is not State or state.nj != d.nj or state.floating_base != d.floating_base:
        check_state(model, state)
    ws = d.__dict__.get("_centroidal")
    if ws is None:
        ws = d.__dict__["_centroidal"] = _Workspace(d)
    if not ws.rigid:
        raise ValueError("the centroidal momentum needs every moving body's inertia of rigid-body form "
                         "(mass, centre of mass, rotational inertia: sl.Inertia); this model has a general "
                         "6x6 inertia")
    busy, d._busy = d._busy, True
    try:
        if d.custom:
            fill_custom(d, state.s)
        status = (_ENTRY.code or _ENTRY.get())(d.ib, d.fb, state._q, state._v, nd, bool(derivatives), ws.buf)
        if status != 0:
            raise _status_error(model, d, status, state, nd, derivatives)
        if data is None:                 # this thread's Data: arrays of the caller's own
            dh = ws.dh.copy()
            dhd = ws.dhd.copy() if derivatives else None
            return _result(None, ws.h.copy(), ws.hd.copy() if rate else None, dh[:, nv:], ws.com.copy(),
                           float(ws.mass[0]), dh if derivatives else None, dhd)
    finally:
        d._busy = busy
    ws.result = _result(ws.result, ws.h, ws.hd if rate else None, ws.A, ws.com, float(ws.mass[0]),
                        ws.dh if derivatives else None, ws.dhd if derivatives else None)
    return ws.result


_ZEROS: dict = {}     # nu_dot = 0 for calls without one, per size (read only by the kernel)


def _result(obj, h, hd, A, com, mass, dh, dhd) -> Centroidal:
    """obj with its fields set anew (a Data's own result object: ~0.2 us, where a new one costs
    ~0.5 us), or a new Centroidal."""
    if obj is None:
        return Centroidal(h, hd, A, com, mass, dh, dhd)
    obj.__init__(h, hd, A, com, mass, dh, dhd)
    return obj


def _status_error(model, d, status, state, nd, derivatives) -> ValueError:
    if status == BAD_INPUT:
        try:
            as_vector("nu_dot", nd, d.nv)
        except ValueError as e:
            return e
        return input_error(model, state.q, state.v)
    if status == NO_MASS:
        return ValueError(f"model '{model.name}': the moving bodies have no mass, so the centre of mass "
                          "and the centroidal momentum are undefined")
    return overflow_error(model, d, "centroidal_derivatives" if derivatives else "centroidal_momentum",
                          EIDAMB_STEPS, "the centroidal momentum or its derivatives",
                          largest_inputs(q=state.q, v=state.v, nu_dot=nd))


def centroidal_momentum(model: Model, state: State, nu_dot: ArrayLike | None = None,
                        data: Data | None = None) -> Centroidal:
    """The centroidal momentum at this state (module docstring): a Centroidal with h = A_G nu (6:
    linear, angular about the centre of mass, world axes), A_G (6 x nv, columns [v (6), r]), com,
    mass, and with nu_dot its rate h_dot = A_G nu_dot + A_G_dot nu (else None). A fixed base is
    part of the world (its inertia is not counted). With data= the arrays are views into it and the
    Centroidal is the Data's own, its fields set anew by each call (copy what you keep)."""
    return centroidal(model, state, nu_dot, False, data)


def centroidal_derivatives(model: Model, state: State, nu_dot: ArrayLike,
                           data: Data | None = None) -> Centroidal:
    """centroidal_momentum's quantities with their derivatives (Pinocchio's
    computeCentroidalDynamicsDerivatives, in z's coordinates): dh_dz (6 x 2nv) = [dh/dz_q | A_G],
    dhdot_dz (6 x 2nv) = [dh_dot/dz_q | dh_dot/dnu], dhdot_dnu_dot = A_G, z = [z_H (6), s | v (6),
    r] as A's columns (H -> H exp(z_H^)). With data= the arrays are views into it and the
    Centroidal is the Data's own (centroidal_momentum)."""
    if nu_dot is None:
        raise ValueError("centroidal_derivatives: nu_dot is required (the rate h_dot depends on it)")
    return centroidal(model, state, nu_dot, True, data)
