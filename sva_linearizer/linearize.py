"""The singularity-free linearization z_dot = A z + B w (thesis Props. 3.1-3.3; thesis_notes section 2).

State perturbation z = [z_H (6); z_s; z_v (6); z_r] (floating base; H -> H exp(z_H^), v the base's
body twist) or z = [z_s; z_r] (fixed base); input w = tau.

    A = [[ -ad(v) (+) 0 ,  I          ],       B = [[ 0       ],
         [ -Minv D_q ID , -Minv D_nu ID ]]           [ Minv S  ]]

with the EIDAmb derivatives (Tables 4.2-4.5, body twist held fixed) at the consistent acceleration
nu_dot = M^-1 (S tau - h(q, nu)) (h from EIDAmb at zero acceleration) and Minv from IMMAmb
(Table 4.7) / IMMA (Table 4.6). The whole chain is one compiled call (kernels.linearize_packed).

Discrete time (dt given): the semi-implicit (symplectic) Euler step on the Lie group,
    nu+ = nu + dt FD(q, nu, tau),   H+ = H exp(dt v+^),   s+ = s + dt r+,
linearized exactly in the same perturbation coordinates: z+ = Ad z + Bd w.
"""
from __future__ import annotations

import numpy as np

from . import algorithms as alg
from . import kernels as K
from .spatial import crm
from .state import QUATERNION_TOLERANCE, _is_vector, as_vector, input_error


class Linearization:
    """A (2nv, 2nv), B (2nv, nj); nu_dot (nv,) the consistent acceleration the derivatives were
    taken at; Minv (nv, nv); D (nv, 2nv) the EIDAmb derivatives [D_q | D_nu]; with dt: Ad, Bd of
    the discrete step (else None)."""

    __slots__ = ("A", "B", "nu_dot", "Minv", "D", "dt", "Ad", "Bd")

    def __init__(self, A, B, nu_dot, Minv, D, dt=None, Ad=None, Bd=None):
        self.A, self.B, self.nu_dot, self.Minv, self.D = A, B, nu_dot, Minv, D
        self.dt, self.Ad, self.Bd = dt, Ad, Bd

    @property
    def D_q(self):
        """d EIDAmb / d q (nv, nv): columns [z_H (6), s] (fixed base: s)."""
        return self.D[:, :self.D.shape[0]]

    @property
    def D_nu(self):
        """d EIDAmb / d nu (nv, nv): columns [v (6), r] (fixed base: r)."""
        return self.D[:, self.D.shape[0]:]

    def __repr__(self):
        return f"<Linearization A{self.A.shape} B{self.B.shape}{'' if self.dt is None else f' dt={self.dt}'}>"


def _out_arrays(out, shape_A, shape_B):
    if out is None:
        return np.empty(shape_A), np.empty(shape_B)
    try:
        A, B = out
    except (TypeError, ValueError):
        raise ValueError("out must be a pair (A, B) of float64 arrays") from None
    for name, X, shape in (("A", A, shape_A), ("B", B, shape_B)):
        if (not isinstance(X, np.ndarray) or X.shape != shape or X.dtype != np.float64
                or not X.flags.c_contiguous or not X.flags.writeable):
            raise ValueError(f"out: {name} must be a writeable C-contiguous float64 array of shape "
                             f"{shape}")
    return A, B


def linearize(model, state, tau, *, data=None, out=None, dt=None):
    """A and B of the continuous-time dynamics at (state, tau); see the module docstring.

    data: an sl.Data(model) to reuse (no allocation at all); the returned Linearization's arrays
    are then views into it, overwritten by its next use. Without it, fresh arrays are returned.
    out: (A, B) arrays to write into. dt: also the discrete-time Ad, Bd (semi-implicit Euler)."""
    if not _is_vector(tau, model.nj):
        tau = as_vector("tau", tau, model.nj)
    alg.check_state(model, state)
    d = alg.get_data(model, data)
    if out is None and data is not None:
        A, B = d.A, d.B
    else:
        A, B = _out_arrays(out, (2 * d.nv, 2 * d.nv), (2 * d.nv, d.nj))
    if d.custom:
        alg.fill_custom(d, state.s)
    status = K.linearize_packed(d.ib, d.fb, state.q, state.v, tau, A, B)
    if status != 0:
        if status == K.BAD_INPUT:
            raise input_error(model, state.q, state.v, tau)
        raise alg.singular_mass_matrix_error(model, status)
    if data is not None:
        lin = Linearization(A, B, d.nu_dot, d.Minv, d.D)
    else:
        lin = Linearization(A, B, d.nu_dot.copy(), d.Minv.copy(), d.D.copy())
    if dt is not None:
        dt = _check_dt(dt)
        v_plus = state.v_base + dt * lin.nu_dot[0:6] if model.floating_base else None
        lin.dt = dt
        lin.Ad, lin.Bd = discretize(A, B, dt, v_plus)
    return lin


def _check_dt(dt):
    try:
        dt = float(dt)
    except (TypeError, ValueError):
        raise ValueError(f"dt must be a positive number of seconds, got {dt!r}") from None
    if not (np.isfinite(dt) and dt > 0):
        raise ValueError(f"dt must be a positive finite number of seconds, got {dt}")
    return dt


def se3_step_jacobians(xi):
    """For xi (..., 6): exp(-ad xi) = Ad_{exp(-xi)} and the right Jacobian
    Jr(xi) = sum_k (-ad xi)^k / (k+1)!  (exp(xi + d) = exp(xi) exp(Jr(xi) d) + O(|d|^2)), both from
    one matrix exponential expm([[-ad xi, I], [0, 0]]) = [[exp(-ad xi), Jr(xi)], [0, I]]."""
    from scipy.linalg import expm

    xi = np.asarray(xi, dtype=float)
    Z = np.zeros(xi.shape[:-1] + (12, 12))
    Z[..., 0:6, 0:6] = -np.vectorize(crm, signature="(6)->(6,6)")(xi)
    Z[..., 0:6, 6:12] = np.eye(6)
    E = expm(Z)
    return E[..., 0:6, 0:6], E[..., 0:6, 6:12]


def discretize(A, B, dt, v_plus=None):
    """Ad, Bd of the semi-implicit Euler step (module docstring) from the continuous A, B, for one
    state or a batch (leading axes). v_plus: the base twist after the velocity update,
    v + dt v_dot (floating base; None for a fixed base).

        z_nu+ = Vq z_q + Vn z_nu + Vb w,  Vq = dt A_nu,q, Vn = I + dt A_nu,nu, Vb = dt B_nu
        z_q+  = E z_q + dt J z_nu+,  E = diag(exp(-ad(dt v+)), I), J = diag(Jr(dt v+), I)
    """
    nv = A.shape[-1] // 2
    I = np.eye(nv)
    Vq = dt * A[..., nv:, :nv]
    Vn = I + dt * A[..., nv:, nv:]
    Vb = dt * B[..., nv:, :]
    E = np.broadcast_to(I, A.shape[:-2] + (nv, nv)).copy()
    J = E.copy()
    if v_plus is not None:
        E[..., 0:6, 0:6], J[..., 0:6, 0:6] = se3_step_jacobians(dt * np.asarray(v_plus))
    dtJ = dt * J
    Ad = np.empty(A.shape)
    Bd = np.empty(B.shape)
    Ad[..., :nv, :nv] = E + dtJ @ Vq
    Ad[..., :nv, nv:] = dtJ @ Vn
    Ad[..., nv:, :nv] = Vq
    Ad[..., nv:, nv:] = Vn
    Bd[..., :nv, :] = dtJ @ Vb
    Bd[..., nv:, :] = Vb
    return Ad, Bd


def _batch_arrays(model, q_batch, v_batch, tau_batch):
    """(N, nq), (N, nv), (N, nj) contiguous float arrays of the right shapes (no copy when they
    already are). Their values are checked in the compiled call (see _batch_value_error)."""
    Q = np.ascontiguousarray(q_batch, dtype=float)
    V = np.ascontiguousarray(v_batch, dtype=float)
    T = np.ascontiguousarray(tau_batch, dtype=float)
    if Q.ndim != 2 or V.ndim != 2 or T.ndim != 2:
        raise ValueError(f"linearize_batch: q, v, tau must be 2-D (N, size) arrays, got shapes "
                         f"{Q.shape}, {V.shape}, {T.shape}")
    N = Q.shape[0]
    if V.shape[0] != N or T.shape[0] != N:
        raise ValueError(f"linearize_batch: q, v, tau have different batch sizes {Q.shape[0]}, "
                         f"{V.shape[0]}, {T.shape[0]}")
    for name, X, size in (("q", Q, model.nq), ("v", V, model.nv), ("tau", T, model.nj)):
        if X.shape[1] != size:
            raise ValueError(f"linearize_batch: {name} rows must have size {size}, got {X.shape[1]}")
    return Q, V, T


def _batch_value_error(model, Q, V, T):
    """The ValueError naming the first state whose values are not finite or whose quaternion is not
    of unit norm (within QUATERNION_TOLERANCE, which the kernels normalise)."""
    for name, X in (("q", Q), ("v", V), ("tau", T)):
        bad = ~np.isfinite(X)
        if bad.any():
            i, j = np.argwhere(bad)[0]
            return ValueError(f"linearize_batch: state {i}: {name}: entry {j} is {X[i, j]} "
                              "(NaN or infinite values are not allowed)")
    if model.floating_base:
        nrm = np.linalg.norm(Q[:, 3:7], axis=1)
        off = np.abs(nrm - 1.0) > QUATERNION_TOLERANCE
        if off.any():
            i = int(np.flatnonzero(off)[0])
            return ValueError(f"linearize_batch: state {i}: q[3:7] (base quaternion x, y, z, w): "
                              f"norm {nrm[i]:.9g} is not 1 (|norm - 1| > {QUATERNION_TOLERANCE:g})")
    return None


def _batch_buffers(model, d, nchunk):
    """One float buffer per parallel chunk (cached on the model)."""
    key = ("batch_buffers", nchunk)
    fbs = model._cache.get(key)
    if fbs is None or fbs.shape[1] != d.fb.shape[0]:
        fbs = np.tile(d.fb, (nchunk, 1))
        model._cache[key] = fbs
    return fbs


def linearize_batch(model, q_batch, v_batch, tau_batch, *, dt=None, out=None):
    """A (N, 2nv, 2nv) and B (N, 2nv, nj) for N states given as flat vectors (rows), computed in
    one compiled call, in parallel over chunks of the batch (numba threads). dt: return the
    discrete-time (Ad, Bd) instead (semi-implicit Euler, see linearize). out: (A, B) to write into."""
    Q, V, T = _batch_arrays(model, q_batch, v_batch, tau_batch)
    N = Q.shape[0]
    nv, nj = model.nv, model.nj
    A, B = _out_arrays(out, (N, 2 * nv, 2 * nv), (N, 2 * nv, nj))
    d = alg.get_data(model)
    if d.custom:  # user jcalc callbacks are Python: one state at a time
        from .state import State

        err = _batch_value_error(model, Q, V, T)
        if err is not None:
            raise err
        nu = np.empty((N, nv))
        for i in range(N):
            st = State.from_vectors(model, Q[i], V[i])
            try:
                lin = linearize(model, st, T[i], out=(A[i], B[i]))
            except ValueError as e:
                raise ValueError(f"linearize_batch: state {i}: {e}") from None
            nu[i] = lin.nu_dot
    else:
        nchunk = max(1, min(N, K.num_threads()))
        fbs = _batch_buffers(model, d, nchunk)
        status = np.zeros(N, dtype=np.int64)
        nu = np.empty((N, nv))
        K.linearize_batch_packed(d.ib, fbs, Q, V, T, A, B, nu, status)
        badi = np.flatnonzero(status)
        if badi.size:
            if np.any(status == K.BAD_INPUT):
                raise _batch_value_error(model, Q, V, T)
            i = int(badi[0])
            raise ValueError(f"linearize_batch: state {i}: "
                             f"{alg.singular_mass_matrix_error(model, int(status[i]))}")
    if dt is None:
        return A, B
    dt = _check_dt(dt)
    v_plus = V[:, 0:6] + dt * nu[:, 0:6] if model.floating_base else None
    return discretize(A, B, dt, v_plus)
