# SPDX-License-Identifier: BSD-3-Clause
"""A and B from the derivatives: the continuous-time matrices of z_dot = A z + B w (thesis Props.
3.1-3.3, eq. 3.53) and, with dt, the discrete step (discrete.py).

    A = [[ -ad(v) (+) 0 ,  I          ],       B = [[ 0       ],
         [ -Minv D_q ID , -Minv D_nu ID ]]           [ Minv S  ]]

Linearization is the result object of every linearize call.
"""
from __future__ import annotations

import numpy as np

from .._jit import njit
from .._intrinsics import flat_view
from ..algorithms.common import NOT_FINITE, not_finite
from ..algorithms.eidamb import eidamb, set_base_acceleration
from ..algorithms.eidamb_derivatives import eidamb_derivatives
from ..spatial_ops import cross_m
from .discrete import discrete_step, se3_step_jacobians
from .sparse_product import neg_minv_times


class Linearization:
    """A (2nv, 2nv), B (2nv, nj) (with forces as inputs: 2nv x (nj + m)); nu_dot (nv,) the consistent
    acceleration the derivatives were
    taken at; Minv (nv, nv); D (nv, 2nv) the EIDAmb derivatives [D_q | D_nu]; with dt: Ad, Bd of
    the discrete step (else None); with rigid contacts: forces (m,), dforces_dz (m, 2nv),
    dforces_dtau (m, nj) (else None)."""

    __slots__ = ("A", "B", "nu_dot", "Minv", "D", "dt", "Ad", "Bd", "forces", "dforces_dz",
                 "dforces_dtau")

    def __init__(self, A, B, nu_dot, Minv, D, dt=None, Ad=None, Bd=None, forces=None,
                 dforces_dz=None, dforces_dtau=None):
        self.A = A                  # (one assignment each: a tuple assignment builds the tuple)
        self.B = B
        self.nu_dot = nu_dot
        self.Minv = Minv
        self.D = D
        self.dt = dt
        self.Ad = Ad
        self.Bd = Bd
        # rigid contacts: the forces on the robot (m,) and their derivatives (m x 2nv, m x nj)
        self.forces = forces
        self.dforces_dz = dforces_dz
        self.dforces_dtau = dforces_dtau

    @property
    def D_q(self) -> np.ndarray:
        """d EIDAmb / d q (nv, nv): columns [z_H (6), s] (fixed base: s)."""
        return self.D[:, :self.D.shape[0]]

    @property
    def D_nu(self) -> np.ndarray:
        """d EIDAmb / d nu (nv, nv): columns [v (6), r] (fixed base: r)."""
        return self.D[:, self.D.shape[0]:]

    def __repr__(self):
        return f"<Linearization A{self.A.shape} B{self.B.shape}{'' if self.dt is None else f' dt={self.dt}'}>"


@njit(inline="always")
def linearize_at(m, d, vel, A, B, dt, Ad, Bd):
    """A and B at the acceleration d.nu_dot (after free_acceleration, or a contact solve that
    replaced d.nu_dot and d.fext): EIDAmb there, its derivatives (Tables 4.2-4.5), the assembly
    (3.53) and with dt > 0 the discrete step. Returns 0 or NOT_FINITE."""
    derivatives_at(m, d, vel)
    return assemble(m, d, vel, d.D, A, B, dt, Ad, Bd)


@njit(inline="always")
def derivatives_at(m, d, vel):
    """EIDAmb at the acceleration d.nu_dot, then its derivatives D (Tables 4.2-4.5) into d.D."""
    set_base_acceleration(m, d, d.nu_dot)
    eidamb(m, d, vel, d.nu_dot, m.nb < 0)  # accelerations only
    eidamb_derivatives(m, d)


@njit(inline="always")
def assemble(m, d, vel, Dm, A, B, dt, Ad, Bd):
    """A = [[-ad(v) (+) 0, I], [-Minv Dm]], B = [[0], [Minv S]] (3.53) with Dm = d.D (or D with the
    contacts' extra term: with_contacts.py), and with dt > 0 the discrete step. Returns 0 or
    NOT_FINITE."""
    nv, n, nu_dot = m.nv, m.n, d.nu_dot
    off = nv - n
    Minv = d.Minv
    nx = 2 * nv
    Af, Bf = flat_view(A), flat_view(B)      # (whole-matrix loops: vectorised in one piece)
    for i in range(nv * nx):
        Af[i] = 0.0
    for i in range(nv):
        A[i, nv + i] = 1.0
    for i in range(nv * n):
        Bf[i] = 0.0
    bad = False                     # some result overflowed (not_finite ORed over them)
    if m.floating:
        e = d.t6[1]
        for c in range(6):
            for i in range(6):
                e[i] = 1.0 if i == c else 0.0
            cross_m(vel[0:6], e, A[0:6, c], -1.0)                    # d/dt z_H = -ad(v) z_H + z_v
            for i in range(6):
                bad |= not_finite(A[i, c])
    AL = A[nv:]
    neg_minv_times(Minv, Dm, AL, m.grp_start, m.grp_ptr, m.grp_rows)   # -Minv D over D's support
    ALf = flat_view(AL)             # (a loop from 0: one that starts at nv nx ran 5x slower)
    for i in range(nv * nx):
        bad |= not_finite(ALf[i])
    for i in range(nv):
        for c in range(n):
            x = Minv[i, off + c]
            B[nv + i, c] = x
            bad |= not_finite(x)
        bad |= not_finite(nu_dot[i])
    if bad:
        return NOT_FINITE
    if dt > 0.0:
        return discrete_at(m, d, vel, A, B, dt, Ad, Bd)
    return 0


@njit(inline="always")
def discrete_at(m, d, vel, A, B, dt, Ad, Bd):
    """Ad, Bd of the semi-implicit Euler step of dt (discrete.py) from A, B at the acceleration
    d.nu_dot (B: nj or, with input forces, nj + m columns). Returns 0 or NOT_FINITE."""
    if m.floating:
        xi = d.t6[2]
        for i in range(6):
            xi[i] = dt * (vel[i] + dt * d.nu_dot[i])                # dt v+, v+ = v + dt v_dot
        se3_step_jacobians(xi, d.E6, d.J6, d.M3)
    discrete_step(A, B, dt, m.nv - m.n, d.E6, d.J6, Ad, Bd)
    nx, nw = Bd.shape
    bad = False
    for i in range(nx):
        for c in range(nx):
            bad |= not_finite(Ad[i, c])
        for c in range(nw):
            bad |= not_finite(Bd[i, c])
    if bad:
        return NOT_FINITE
    return 0
