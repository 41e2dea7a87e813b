# SPDX-License-Identifier: BSD-3-Clause
"""RNEAmb (thesis Appendix E.2) / RNEA (E.1): the base acceleration consistent with zero base
wrench, and the joint torques, for given joint accelerations (from EIDAmb and CRBAmb's M^c_0)."""
from __future__ import annotations

import numpy as np
from typing import TYPE_CHECKING

from numpy.typing import ArrayLike

if TYPE_CHECKING:
    from ..data import Data
    from ..model import Model
    from ..state import State

from ..state import as_vector
from .crbamb import mass_matrix
from .common import finite_result
from .eidamb import eidamb_forces


def rneamb(model: Model, state: State, r_ddot: ArrayLike,
           data: Data | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(v_dot, tau) for joint accelerations r_ddot; v_dot is empty for a fixed base."""
    r_ddot = as_vector("r_ddot", r_ddot, model.nj)
    if not model.floating_base:
        return np.zeros(0), eidamb_forces(model, state, r_ddot, data, "rneamb")
    # ID_b is affine in v_dot with slope M^c_0: solve M^c_0 v_dot = -ID_b(v_dot = 0)
    out0 = eidamb_forces(model, state, np.concatenate([np.zeros(6), r_ddot]), data, "rneamb")
    Mc0 = mass_matrix(model, state, data)[0:6, 0:6]
    vdot = finite_result(model, None, "rneamb", (), "the base acceleration v_dot",
                         -np.linalg.solve(Mc0, out0[0:6]), q=state.q, v=state.v, r_ddot=r_ddot)
    tau = eidamb_forces(model, state, np.concatenate([vdot, r_ddot]), data, "rneamb")[6:]
    return vdot, tau
