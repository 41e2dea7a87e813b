"""The singularity-free linearization z_dot = A z + B w (thesis Props. 3.1-3.3; thesis_notes section 2).

State perturbation z = [z_H (6); z_s; z_v (6); z_r] (floating base; H -> H exp(z_H^), v the base's
body twist) or z = [z_s; z_r] (fixed base); input w = tau.

    A = [[ -ad(v) (+) 0 ,  I          ],       B = [[ 0       ],
         [ -Minv D_q ID , -Minv D_nu ID ]]           [ Minv S  ]]

with the EIDAmb derivatives (Tables 4.2-4.5, body twist held fixed) at the consistent acceleration
nu_dot = FD(q, nu, tau) (ABAmb) and Minv from IMMAmb (Table 4.7) / IMMA (Table 4.6).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import algorithms as alg
from .spatial import crm
from .state import State, as_vector


@dataclass
class Linearization:
    A: np.ndarray       # (2nv, 2nv)
    B: np.ndarray       # (2nv, nj)
    nu_dot: np.ndarray  # (nv,) the consistent acceleration the derivatives were taken at
    Minv: np.ndarray    # (nv, nv)
    D_q: np.ndarray     # (nv, nv) d EIDAmb / d[z_H, s]
    D_nu: np.ndarray    # (nv, nv) d EIDAmb / d[v, r]


def linearize(model, state, tau):
    """A and B of the continuous-time dynamics at (state, tau); see the module docstring."""
    tau = as_vector("tau", tau, model.nj)
    nu_dot = alg.forward_dynamics(model, state, tau)          # ABAmb
    arr, ws = alg._run_eidamb(model, state, nu_dot)           # EIDAmb at the consistent point
    D = alg._eid_derivatives(model, ws, state)                # Tables 4.2-4.5
    Minv = alg._immamb(model, ws)                             # IMMAmb / IMMA (same kinematics)
    nv, nj = model.nv, model.nj
    A = np.zeros((2 * nv, 2 * nv))
    A[:nv, nv:] = np.eye(nv)
    if model.floating_base:
        A[0:6, 0:6] = -crm(state.v_base)                      # d/dt z_H = -ad(v) z_H + z_v
    A[nv:, :] = -Minv @ D                                     # D_1..D_4 FD = -Minv D_x ID (3.53)
    B = np.zeros((2 * nv, nj))
    B[nv:, :] = Minv[:, nv - nj:]                             # Minv S, S = [0; I]
    return Linearization(A, B, nu_dot, Minv, D[:, :nv], D[:, nv:])


def linearize_batch(model, q_batch, v_batch, tau_batch):
    """A (N, 2nv, 2nv) and B (N, 2nv, nj) for N states given as flat vectors (rows)."""
    Q = np.asarray(q_batch, dtype=float)
    V = np.asarray(v_batch, dtype=float)
    T = np.asarray(tau_batch, dtype=float)
    if Q.ndim != 2 or V.ndim != 2 or T.ndim != 2:
        raise ValueError(f"linearize_batch: q, v, tau must be 2-D (N, size) arrays, got shapes "
                         f"{Q.shape}, {V.shape}, {T.shape}")
    N = Q.shape[0]
    if V.shape[0] != N or T.shape[0] != N:
        raise ValueError(f"linearize_batch: q, v, tau have different batch sizes {Q.shape[0]}, "
                         f"{V.shape[0]}, {T.shape[0]}")
    nv, nj = model.nv, model.nj
    A = np.empty((N, 2 * nv, 2 * nv))
    B = np.empty((N, 2 * nv, nj))
    for i in range(N):
        try:
            lin = linearize(model, State.from_vectors(model, Q[i], V[i]), T[i])
        except ValueError as e:
            raise ValueError(f"linearize_batch: state {i}: {e}") from None
        A[i], B[i] = lin.A, lin.B
    return A, B
