"""What overflowed, and where it came from, when a linearization's result is not finite.

The compiled pipeline only checks its results (common.not_finite ORed over them: a NaN or an
infinity anywhere sets the flag); when it reports NOT_FINITE this walks the intermediate quantities
left in the Data, in the order the pipeline computed them, and names the first one that is not
finite and the body it belongs to."""
from __future__ import annotations

import numpy as np


def _first_bad_body(model, arr):
    """Name of the first body (base or joint's) whose row of a per-body array is not finite."""
    for k in range(arr.shape[0]):
        if not np.all(np.isfinite(arr[k])):
            return "the base" if k == 0 else f"body '{model.joint_names[k - 1]}'"
    return None


def overflow_error(model, d, q, v, tau, A, B) -> ValueError:
    big = max(float(np.max(np.abs(q), initial=0.0)), float(np.max(np.abs(v), initial=0.0)),
              float(np.max(np.abs(tau), initial=0.0)))
    inputs = f"(largest |entry| of q, v, tau: {big:.3g})"
    steps = (
        (d.Xup, "the joint transforms", "a joint position or a placement is too large"),
        (d.v, "the body twists", f"the velocities are too large {inputs}"),
        (d.hv, "the body momenta", f"the velocities are too large {inputs}"),
        (d.f, "the inverse-dynamics forces", f"the state or the torques are too large {inputs}"),
    )
    for arr, what, why in steps:
        where = _first_bad_body(model, arr)
        if where is not None:
            return ValueError(f"the linearization overflowed float64: {what} of {where} are not "
                              f"finite: {why}")
    for arr, what in ((d.Minv, "M^-1 (the mass matrix is nearly singular at this state)"),
                      (d.nu_dot, f"the acceleration nu_dot {inputs}"),
                      (d.D, f"the inverse-dynamics derivatives {inputs}"),
                      (A, f"A {inputs}"), (B, f"B {inputs}")):
        if not np.all(np.isfinite(arr)):
            return ValueError(f"the linearization overflowed float64: {what} is not finite")
    return ValueError(f"the linearization overflowed float64 (Ad, Bd of the discrete step): dt or "
                      f"the state is too large {inputs}")
