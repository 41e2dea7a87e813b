# SPDX-License-Identifier: BSD-3-Clause
"""CRBAmb (thesis Appendix E.4) / CRBA (E.3): the joint-space mass matrix M (nv x nv) from the
composite inertias."""
from __future__ import annotations

import numpy as np
from typing import TYPE_CHECKING


if TYPE_CHECKING:
    from ..data import Data
    from ..model import Model
    from ..state import State

from .._jit import njit
from ..layout import kernel, views
from ..spatial_ops import congruence_add, dot6, mv, xt_add
from ..coupling import is_coupled
from ..state import input_error
from .common import BAD_INPUT, KINEMATICS_STEPS, finite_result, setup
from .kinematics import prepare


@kernel
def crbamb(m, d, M):
    """M (nv x nv, base block first for a floating base) into M; d.IC holds the composites."""
    lam, vidx, S, Xup, Ic, t6 = m.lam, m.vidx, d.S, d.Xup, d.IC, d.t6
    for k in range(m.nb):
        Ic[k] = m.I[k]
    for k in range(m.nb - 1, 0, -1):                     # M^c_lam += X^T M^c_k X
        congruence_add(Xup[k], Ic[k], Ic[lam[k]])
    for k in range(1, m.nb):
        F = t6[0]
        mv(Ic[k], S[k], F)                               # F = M^c_k Gamma_k
        rk = vidx[k]
        M[rk, rk] = dot6(S[k], F)
        i = k
        while lam[i] > 0:                                # up the ancestors: F in their frames
            t6[1] = 0.0
            xt_add(Xup[i], F, t6[1])
            F[:] = t6[1]
            i = lam[i]
            M[rk, vidx[i]] = dot6(S[i], F)
            M[vidx[i], rk] = M[rk, vidx[i]]
        if m.floating:
            t6[1] = 0.0
            xt_add(Xup[i], F, t6[1])
            for c in range(6):
                M[c, rk] = t6[1, c]
                M[rk, c] = t6[1, c]
    if m.floating:
        for i in range(6):
            for c in range(6):
                M[i, c] = Ic[0, i, c]


@njit
def crbamb_entry(ib, fb, q, vel, M):
    m, d, _ = views(ib, fb)
    if prepare(m, d, q, vel, q[0:0]) != 0:
        return BAD_INPUT
    crbamb(m, d, M)
    return 0


def mass_matrix(model: Model, state: State, data: Data | None = None) -> np.ndarray:
    """CRBAmb / CRBA: the joint-space mass matrix M (nv x nv); with mimic joints G^T M G."""
    if is_coupled(model):
        return model.reduce(mass_matrix(model.tree, model.tree_state(state), data))
    d = setup(model, state, data)
    M = np.zeros((model.nv, model.nv))
    if crbamb_entry(d.ib, d.fb, state.q, state.v, M) == BAD_INPUT:
        raise input_error(model, state.q, state.v)
    return finite_result(model, d, "mass_matrix", KINEMATICS_STEPS[:1], "M", M, q=state.q)
