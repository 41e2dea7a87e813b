# SPDX-License-Identifier: BSD-3-Clause
"""The singularity-free linearization z_dot = A z + B w (thesis Props. 3.1-3.3) at one state.

State perturbation z = [z_H (6); z_s; z_v (6); z_r] (floating base; H -> H exp(z_H^), v the base's
body twist) or z = [z_s; z_r] (fixed base); input w = tau.

    A = [[ -ad(v) (+) 0 ,  I          ],       B = [[ 0       ],
         [ -Minv D_q ID , -Minv D_nu ID ]]           [ Minv S  ]]     (assembly.py)

with the EIDAmb derivatives (Tables 4.2-4.5, body twist held fixed) at the consistent acceleration
nu_dot = M^-1 (S tau - h(q, nu)) (h from EIDAmb at zero acceleration) and Minv from IMMAmb
(Table 4.7) / IMMA (Table 4.6). The whole chain, and with dt the discrete step (discrete.py), is
one compiled call, `linearize_state`, a pipeline of the algorithms' kernels.
"""
from __future__ import annotations

import numpy as np
from typing import TYPE_CHECKING

from numpy.typing import ArrayLike

if TYPE_CHECKING:
    from ..model import Model

from .._jit import DirectEntry, njit
from ..algorithms.common import BAD_INPUT, NOT_FINITE, check_state, singular_mass_matrix_error
from ..algorithms.constrained_dynamics import free_acceleration
from ..algorithms.kinematics import fill_custom, prepare
from ..coupling import is_coupled
from ..data import Data, get_data
from ..layout import kernel, views
from ..state import _FLOAT64, State, _is_vector, as_vector, input_error
from .assembly import Linearization, linearize_at
from .coupled import linearize_coupled
from .discrete import check_dt
from .overflow import overflow_error
from .with_contacts import linearize_contacts

_ndarray = np.ndarray


@kernel
def linearize_state(m, d, q, vel, tau, A, B, dt, Ad, Bd):
    """The linearization pipeline at one state; with dt > 0 also Ad, Bd. Returns 0, BAD_INPUT
    (nothing computed), k > 0 / BASE_SINGULAR (M singular: immamb), or NOT_FINITE (a result
    overflowed: see overflow.py)."""
    if prepare(m, d, q, vel, tau) != 0:
        return BAD_INPUT
    # bias h(q, nu) = EIDAmb at nu_dot = 0, then nu_dot = Minv (S tau - h) (consistent acceleration)
    status = free_acceleration(m, d, vel, tau)
    if status != 0:
        return status
    return linearize_at(m, d, vel, A, B, dt, Ad, Bd)


@njit
def linearize_entry(ib, fb, q, vel, tau, A, B, dt, Ad, Bd):
    m, d, _ = views(ib, fb)
    return linearize_state(m, d, q, vel, tau, A, B, dt, Ad, Bd)


@njit
def linearize_entry_data(ib, fb, q, vel, tau, dt):
    """linearize_entry into the Data's own A, B (and with dt > 0 Ad, Bd): five arrays for numba
    to unbox, not nine (~0.1 us each, a tenth of an arm's call)."""
    m, d, _ = views(ib, fb)
    return linearize_state(m, d, q, vel, tau, d.A, d.B, dt, d.Ad, d.Bd)


# linearize_entry_data's compiled code for its one signature, called without numba's dispatch
# (_jit.DirectEntry): the Data's two buffers, three C-contiguous, aligned, writeable float64 vectors
# and a float, which is what linearize and linearize_flat pass (a State's own q, v; tau and flat
# vectors through `_is_vector`'s test or a copy)
_ENTRY_DATA = DirectEntry(linearize_entry_data, np.zeros(1, dtype=np.int64), np.zeros(1), np.zeros(1),
                          np.zeros(1), np.zeros(1), 0.0)


def _out_arrays(out, shape_A, shape_B):
    if out is None:
        return np.empty(shape_A), np.empty(shape_B)
    try:
        A, B = out
    except (TypeError, ValueError):
        raise ValueError("out must be a pair (A, B) of float64 arrays") from None
    if (type(A) is _ndarray and type(B) is _ndarray and A.dtype is _FLOAT64 and B.dtype is _FLOAT64
            and A.shape == shape_A and B.shape == shape_B and A.flags.carray and B.flags.carray):
        if np.may_share_memory(A, B):      # (exact for two C-contiguous arrays: overlapping extents)
            raise ValueError("out: A and B must not overlap")
        return A, B
    for name, X, shape in (("A", A, shape_A), ("B", B, shape_B)):
        if (not isinstance(X, np.ndarray) or X.shape != shape or X.dtype != np.float64
                or not X.flags.c_contiguous or not X.flags.writeable):
            raise ValueError(f"out: {name} must be a writeable C-contiguous float64 array of shape "
                             f"{shape}")
    if np.may_share_memory(A, B):      # (exact for two C-contiguous arrays: overlapping extents)
        raise ValueError("out: A and B must not overlap")
    return A, B


def status_error(model, d, status, q, v, tau, A, B) -> ValueError:
    """The ValueError for a non-zero status of linearize_state."""
    if status == BAD_INPUT:
        return input_error(model, q, v, tau)
    if status == NOT_FINITE:
        return overflow_error(model, d, q, v, tau, A, B)
    return singular_mass_matrix_error(model, status, d)


def linearize(model: Model, state: State, tau: ArrayLike, *, data: Data | None = None,
              out: tuple[np.ndarray, np.ndarray] | None = None, dt: float | None = None,
              contacts=None, forces=None) -> Linearization:
    """A and B of the continuous-time dynamics at (state, tau); see the module docstring.

    contacts: [sl.Contact, ...] rigid contacts (the constrained dynamics, KKT; lin.forces and their
    derivatives); forces: [(sl.Contact, f), ...] contact forces as given inputs (B = [B_tau | B_f]);
    see linearization/with_contacts.py (dt works with them too; out does not).

    data: an sl.Data(model) to reuse (no allocation at all); the returned Linearization's arrays
    (A, B, nu_dot, Minv, D, Ad, Bd; with contacts also forces, dforces_dz, dforces_dtau) are then
    views into it, overwritten by its next use. Without out=, dt=, contacts or forces the result
    object itself is the Data's own too: every such call returns that one object, its fields set
    anew (copy what you keep, e.g. A = lin.A.copy()). Without it, fresh arrays are returned
    (each thread then uses a Data of its own). out: (A, B) arrays to write into. dt: also the
    discrete-time Ad, Bd of the semi-implicit Euler step (discrete.py)."""
    if is_coupled(model):            # mimic joints (coupled.py)
        if contacts or forces or out is not None or data is not None:
            raise ValueError("linearize: a model with mimic joints takes neither contacts, forces, "
                             "out= nor data= (load it with mimic=False for those)")
        return linearize_coupled(model, state, tau, dt)
    if contacts or forces:
        if not _is_vector(tau, model.nj):
            tau = as_vector("tau", tau, model.nj)
        check_state(model, state)
        if out is not None:
            raise ValueError("linearize: out= is not supported with contacts or forces (B has nj + m "
                             "columns with forces); use the returned arrays")
        return linearize_contacts(model, state, tau, contacts, forces, data, dt)
    if type(data) is not Data or data._arrays is not model._arrays:   # (a Data of this model: as is)
        d = get_data(model, data)     # checked against the model: its sizes are the model's
    else:
        d = data
    if not (type(tau) is _ndarray and tau.dtype is _FLOAT64 and tau.shape == d._tau_shape
            and tau.flags.carray):    # (_is_vector, inline: a call costs ~0.05 us here)
        tau = as_vector("tau", tau, d.nj)
    if type(state) is not State or state.nj != d.nj or state.floating_base != d.floating_base:
        check_state(model, state)     # raises, naming the problem (or accepts a State subclass)
    if data is not None and out is None and dt is None and not d.custom:
        # the control-loop call, into the caller's Data: nothing to mark busy (get_data never
        # hands out a caller's Data), nothing to copy
        status = (_ENTRY_DATA.code or _ENTRY_DATA.get())(d.ib, d.fb, state._q, state._v, tau, 0.0)
        if status != 0:
            raise status_error(model, d, status, state._q, state._v, tau, d.A, d.B)
        # the Data's own result object (its arrays are the Data's views in any case), every
        # field set anew: ~0.2 us, where building a Linearization costs ~0.6 us (an arm's call
        # is ~12 us in all)
        lin = d._lin
        if lin is None:
            lin = d._lin = Linearization(d.A, d.B, d.nu_dot, d.Minv, d.D)
            return lin
        lin.A = d.A
        lin.B = d.B
        lin.nu_dot = d.nu_dot
        lin.Minv = d.Minv
        lin.D = d.D
        lin.dt = lin.Ad = lin.Bd = lin.forces = lin.dforces_dz = lin.dforces_dtau = None
        return lin
    dtv = 0.0 if dt is None else check_dt(dt)
    d._busy = True
    try:
        if d.custom:
            fill_custom(d, state.s)
        if out is None:                 # into the Data's A, B (Ad, Bd)
            A, B, Ad, Bd = d.A, d.B, d.Ad, d.Bd
            status = (_ENTRY_DATA.code or _ENTRY_DATA.get())(d.ib, d.fb, state._q, state._v, tau, dtv)
        else:
            A, B = _out_arrays(out, (2 * d.nv, 2 * d.nv), (2 * d.nv, d.nj))
            Ad, Bd = (A, B) if dt is None else (d.Ad, d.Bd)
            status = linearize_entry(d.ib, d.fb, state.q, state.v, tau, A, B, dtv, Ad, Bd)
        if status != 0:
            raise status_error(model, d, status, state.q, state.v, tau, A, B)
        if data is not None:
            lin = Linearization(A, B, d.nu_dot, d.Minv, d.D)
        else:                           # this thread's Data: the caller gets arrays of its own
            if out is None:
                A, B = A.copy(), B.copy()
            if dt is not None:
                Ad, Bd = Ad.copy(), Bd.copy()
            lin = Linearization(A, B, d.nu_dot.copy(), d.Minv.copy(), d.D.copy())
    finally:
        d._busy = False
    if dt is not None:
        lin.dt, lin.Ad, lin.Bd = dt, Ad, Bd
    return lin


def linearize_flat(model: Model, q: np.ndarray, v: np.ndarray, tau: np.ndarray, data: Data
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The lean path of `linearize` for a control loop: flat vectors (q = [p, quaternion x y z w,
    s], v = [v_lin, w, r] for a floating base, as State.from_vectors takes them) and the caller's
    Data; returns (A, B), views into data.A and data.B overwritten by the next call on that Data
    (data.nu_dot, data.Minv, data.D hold the rest). The same compiled call as `linearize` and the
    same numbers; it skips the State object and the Linearization result. q, v, tau that are
    already C-contiguous float64 vectors of the right sizes are read in place (copied otherwise);
    a quaternion within the tolerance of unit norm is normalised (in the call, not in your q), a
    non-finite or non-unit input raises ValueError naming it, as in `linearize`. One Data per
    thread: this never allocates, so two threads must not share a Data."""
    if is_coupled(model):
        raise ValueError("linearize_flat: a model with mimic joints is linearized with sl.linearize")
    if type(data) is not Data or data._arrays is not model._arrays:
        data = get_data(model, data)              # raises for a Data of another model
    nj, nv = data.nj, data.nv                     # (the Model's sizes are properties: ~0.1 us each)
    nq = nv + 1 if data.floating_base else nv
    if not _is_vector(q, nq):
        q = as_vector("q", q, nq)
    if not _is_vector(v, nv):
        v = as_vector("v", v, nv)
    if not _is_vector(tau, nj):
        tau = as_vector("tau", tau, nj)
    if data.custom:
        fill_custom(data, q[nq - nj:])
    status = (_ENTRY_DATA.code or _ENTRY_DATA.get())(data.ib, data.fb, q, v, tau, 0.0)   # (_is_vector'ed)
    if status != 0:
        raise status_error(model, data, status, q, v, tau, data.A, data.B)
    return data.A, data.B
