# SPDX-License-Identifier: BSD-3-Clause
"""The linearization z_dot = A z + B w, as a pipeline of the algorithms' kernels:

    continuous.py   linearize: A, B at one state (and Ad, Bd with dt), one compiled call
    assembly.py     A and B from the derivatives D and Minv (eq. 3.53); the Linearization result
    with_contacts.py  linearize with rigid contacts (KKT) or contact forces as inputs
    reset_map.py    impact, linearize_impact: an impact at a touchdown, its reset map (the Jacobian on
                    z) and the impulses' derivatives, one compiled call
    batch.py        linearize_batch: many states, in parallel, one compiled call
    horizon.py      linearize_horizon: a planner's knots with a contact schedule, every record section,
                    with dt the impact at each touchdown (linearize_impact where the step lands)
    discrete.py     the semi-implicit Euler step on the Lie group: Ad, Bd (discretize)
    sparse_product.py  -Minv D over D's branch-induced sparsity, in SIMD tiles (A's lower block)
    overflow.py     naming what overflowed when a result is not finite
"""
from .batch import linearize_batch, num_threads
from .continuous import Linearization, linearize, linearize_flat
from .reset_map import Impact, impact, linearize_impact  # noqa: F401 (sl.impact, sl.linearize_impact)
from .discrete import discretize, next_state
from .horizon import Horizon, KnotError, linearize_horizon

__all__ = ["Horizon", "KnotError", "Linearization", "discretize", "linearize", "linearize_batch", "linearize_flat",
           "linearize_horizon", "next_state", "num_threads"]
