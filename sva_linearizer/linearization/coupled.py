# SPDX-License-Identifier: BSD-3-Clause
"""The linearization of a model with mimic joints (coupling.py): the tree's EIDAmb derivatives at
the tree state, projected on the coupling G. With nu_dot = M_r^-1 (S tau - h_r) and
ID_r(z, nu_dot) = G^T ID(s0 + G z_q, G nu, G nu_dot):
    A = [[-ad(v) (+) 0, I], [-M_r^-1 G^T D_q G, -M_r^-1 G^T D_nu G]],   B = [[0], [M_r^-1 S]]
(the implicit-function theorem on ID_r = S tau, as for the tree: assembly.py).
"""
from __future__ import annotations

import numpy as np

from ..algorithms.abamb import coupled_acceleration
from ..algorithms.common import finite_result
from ..algorithms.crbamb import mass_matrix
from ..algorithms.eidamb_derivatives import extended_inverse_dynamics_derivatives
from ..coupling import CoupledModel, coupled_inverse
from ..spatial import crm
from ..state import State, as_vector
from .assembly import Linearization
from .discrete import check_dt, discretize


def linearize_coupled(model: CoupledModel, state: State, tau, dt: float | None = None) -> Linearization:
    """sl.linearize for a CoupledModel (module docstring); with dt also Ad, Bd (discrete.py)."""
    tau = as_vector("tau", tau, model.nj)
    if dt is not None:
        dt = check_dt(dt)
    nv, nj = model.nv, model.nj
    Minv = coupled_inverse(model, mass_matrix(model, state))
    nu = coupled_acceleration(model, state, tau, None, Minv)
    D_q, D_nu = extended_inverse_dynamics_derivatives(model, state, nu)
    D = np.hstack([D_q, D_nu])
    A = np.zeros((2 * nv, 2 * nv))
    A[:nv, nv:] = np.eye(nv)
    if model.floating_base:
        A[0:6, 0:6] = -crm(state.v[0:6])                # d/dt z_H = -ad(v) z_H + z_v
    A[nv:] = -Minv @ D
    B = np.zeros((2 * nv, nj))
    B[nv:] = Minv[:, nv - nj:]
    finite_result(model, None, "linearize", (), "A and B", (A, B), q=state.q, v=state.v, tau=tau)
    lin = Linearization(A, B, nu, Minv, D)
    if dt is not None:
        v_plus = state.v[0:6] + dt * nu[0:6] if model.floating_base else None
        lin.dt = dt
        lin.Ad, lin.Bd = discretize(A, B, dt, v_plus)
    return lin
