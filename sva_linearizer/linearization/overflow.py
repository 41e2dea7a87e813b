# SPDX-License-Identifier: BSD-3-Clause
"""What overflowed, and where it came from, when a linearization's result is not finite.

The compiled pipeline only checks its results (common.not_finite ORed over them: a NaN or an
infinity anywhere sets the flag); when it reports NOT_FINITE this walks the intermediate quantities
left in the Data, in the order the pipeline computed them, and names the first one that is not
finite and the body it belongs to."""
from __future__ import annotations

import numpy as np

from ..algorithms.common import EIDAMB_STEPS, first_overflow, largest_inputs


def overflow_error(model, d, q, v, tau, A, B) -> ValueError:
    inputs = largest_inputs(q=q, v=v, tau=tau)
    found = first_overflow(model, d, EIDAMB_STEPS)
    if found is not None:
        return ValueError(f"the linearization overflowed float64: {found} {inputs}")
    for arr, what in ((d.Minv, "M^-1 (the mass matrix is nearly singular at this state)"),
                      (d.nu_dot, f"the acceleration nu_dot {inputs}"),
                      (d.D, f"the inverse-dynamics derivatives {inputs}"),
                      (A, f"A {inputs}"), (B, f"B {inputs}")):
        if not np.all(np.isfinite(arr)):
            return ValueError(f"the linearization overflowed float64: {what} is not finite")
    return ValueError(f"the linearization overflowed float64 (Ad, Bd of the discrete step): dt or "
                      f"the state is too large {inputs}")
