# SPDX-License-Identifier: BSD-3-Clause
"""The articulated-body sweep that ABAmb, IMMAmb and the pivot check share (Featherstone; thesis
Appendix E.5-E.6, Tables 4.6-4.7 lines 7-14): from the leaves to the root, each body's articulated
inertia M^A_k is reduced by its joint and added to its parent's."""
from __future__ import annotations

import numpy as np
from typing import TYPE_CHECKING

from numpy.typing import ArrayLike

if TYPE_CHECKING:
    from ..model import Model

from .._lanes import where
from .._jit import PLAIN_ONLY, njit
from ..layout import views
from ..spatial_ops import congruence_add_s, dot6, mv
from .kinematics import prepare


@njit(inline="always")
def pivot_tolerance(m):
    """Pivots D_k at or below this are taken as zero (M singular): 1e-12 of the largest inertia."""
    scale = 0.0
    for k in range(m.nb):
        scale = max(scale, abs(m.I[k, 0, 0]) + abs(m.I[k, 3, 3]))
    return 1e-12 * scale


@njit(inline="always")
def init_articulated(m, d):
    """M^A_k = M_k for every body (E.5; T4.6:1-5)."""
    IA, I = d.IA, m.I
    for k in range(m.nb):
        for i in range(6):
            for c in range(6):
                IA[k, i, c] = I[k, i, c]


@njit(inline="always")
def articulated_step(m, d, k, tol):
    """Body k's step of the sweep, M^A_k complete on entry:
        U_k = M^A_k Gamma_k, D_k = Gamma_k^T U_k           (E.5; T4.6:7-8)
        M^a_k = M^A_k - U_k U_k^T / D_k  (left in d.T2)    (T4.6:13)
        M^A_lam(k) += ^kX_lam^T M^a_k ^kX_lam               (T4.6:14)
    Returns 1/D_k, or 0.0 if D_k <= tol (a vanishing pivot: M is singular; M^a_k = M^A_k then)."""
    Sk, Uk, IAk, T2 = d.S[k], d.U[k], d.IA[k], d.T2
    mv(IAk, Sk, Uk)
    Dk = dot6(Sk, Uk)
    d.Dd[k] = Dk
    iD = where(Dk > tol, 1.0 / Dk, 0.0)
    for i in range(6):
        ui = Uk[i] * iD
        for c in range(6):
            T2[i, c] = IAk[i, c] - ui * Uk[c]
    congruence_add_s(d.Xup[k], m.xw[k], m.xax[k], T2, d.IA[m.lam[k]])
    return iD


@njit(inline="always")
def pivots(m, d):
    """The pivots D_k = Gamma^T M^A_k Gamma (d.Dd) and M^A_0 (d.IA[0]): M is positive definite iff
    all D_k > 0 (and M^A_0 > 0 for a floating base). A vanishing pivot is skipped so that the
    others are still computed (Model.validate names every joint whose pivot vanishes)."""
    init_articulated(m, d)
    tol = pivot_tolerance(m)
    for k in range(m.nb - 1, 0, -1):
        articulated_step(m, d, k, tol)


@njit(group=PLAIN_ONLY)   # once per model: a few milliseconds in plain Python
def pivots_entry(ib, fb, q, vel):
    m, d, _ = views(ib, fb)
    status = prepare(m, d, q, vel, q[0:0])
    if status == 0:
        pivots(m, d)
    return status


def articulated_pivots(model: Model, s: ArrayLike) -> tuple[np.ndarray, float]:
    """(D_k for every joint, smallest |eigenvalue| of the base's articulated inertia) at joint
    positions s (Model.validate's check that M is not singular everywhere). A ValueError names the
    first joint whose transform or articulated inertia is not finite (absurd sizes in a model).
    Plain Python always (pivots_entry is PLAIN_ONLY): 1-5 ms a call for a 30-40 joint humanoid,
    against seconds of compile time on every machine for a check that runs once per model."""
    from ..state import State
    from .common import setup

    st = State(model, s=s)
    d = setup(model, st)
    pivots_entry(d.ib, d.fb, st.q, st.v)
    finite = [bool(np.all(np.isfinite(d.IA[k]))) for k in range(model.nj + 1)]
    for k in range(1, model.nj + 1):   # the joint where it starts: its own parts finite, its parent's not
        if not np.all(np.isfinite(d.Xup[k])) or (finite[k] and not finite[d.lam[k]]):
            raise ValueError(f"joint '{model.joint_names[k - 1]}': its placement, or the inertia it "
                             "carries, is so large that the dynamics overflow float64 (check the "
                             "model's units)")
    if not finite[0] or not all(finite):
        raise ValueError("the base's inertia is so large that the dynamics overflow float64 (check "
                         "the model's units)")
    base_ev = float(np.min(np.abs(np.linalg.eigvalsh(d.IA[0])))) if model.floating_base else np.inf
    return d.Dd[1:].copy(), base_ev
