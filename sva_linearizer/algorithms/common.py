# SPDX-License-Identifier: BSD-3-Clause
"""What every algorithm's Python wrapper shares: argument checks, the Data to run on, status codes
of the compiled entry points and the errors they become."""
from __future__ import annotations

import math

import numpy as np

from .._lanes import any_lane
from .._jit import njit
from ..data import Data, get_data
from ..state import State
from .kinematics import fill_custom
from .status import BAD_INPUT, BASE_SINGULAR, NOT_FINITE, OK  # noqa: F401 - the codes, for the wrappers



@njit(inline="always")
def not_finite(x):
    """x is NaN or infinite (x - x is 0 for every finite x). The kernels OR it over their results
    (`bad |= not_finite(x)`): an integer reduction that the compiler vectorises, where a float sum
    of the results is one serial chain of additions (~4 cycles each: 0.5 us of solo12's 18 x 36
    A, 2 us of g1's 35 x 70) and can overflow on large finite results."""
    y = x - x
    return any_lane(y != y)


def check_state(model, state) -> None:
    if not isinstance(state, State):
        raise ValueError(f"state must be an sva_linearizer.State, got {type(state).__name__}")
    if state.nj != model.nj or state.floating_base != model.floating_base:
        raise ValueError(f"state was built for another model (nj={state.nj}, floating_base="
                         f"{state.floating_base}); this model has nj={model.nj}, "
                         f"floating_base={model.floating_base}")


def setup(model, state, data=None) -> Data:
    """The Data a call runs on (see data.get_data), with custom joints' jcalc filled in."""
    check_state(model, state)
    d = get_data(model, data)
    if d.custom:
        fill_custom(d, state.s)
    return d


def singular_mass_matrix_error(model, status: int, d: Data | None = None) -> ValueError:
    """The ValueError for a kernel's status code (k > 0: pivot of body k, -1: the base); with the
    Data the kernel ran on, the pivot and the threshold it fell below."""
    if status > 0:
        why = ""
        if d is not None:
            scale = float(max(abs(d.I[k, 0, 0]) + abs(d.I[k, 3, 3]) for k in range(d.I.shape[0])))
            why = (f" (its articulated pivot D = {d.Dd[status]:.3g} is not above 1e-12 x {scale:.3g}, "
                   "the largest body's mass + inertia")
            why += ("; inertias spanning more than 12 orders of magnitude make M numerically singular)"
                    if d.Dd[status] > 0 else ")")
        return ValueError(f"the mass matrix is singular at this configuration: joint "
                          f"'{model.joint_names[status - 1]}' moves no mass or inertia here{why}")
    return ValueError("the mass matrix is singular at this configuration: the floating base's "
                      "articulated inertia is singular")


# What a kernel leaves in the Data, in the order it computes it: (Data field, what it holds, the
# likely cause when it is not finite). overflow_error walks them to name the first quantity that
# overflowed and the body it belongs to.
KINEMATICS_STEPS = (
    ("Xup", "the joint transforms", "a joint position or a placement is too large"),
    ("v", "the body twists", "the velocities are too large"),
)
EIDAMB_STEPS = KINEMATICS_STEPS + (
    ("hv", "the body momenta", "the velocities are too large"),
    ("f", "the inverse-dynamics forces", "the state, the accelerations or the torques are too large"),
)
ABAMB_STEPS = KINEMATICS_STEPS + (
    ("pA", "the articulated bias forces", "the velocities or the torques are too large"),
)


def all_finite(x: np.ndarray) -> bool:
    """Every entry of x is finite (a dot product first: NaN and inf propagate into it; only when
    it is not finite, which large finite entries can also cause, are the entries tested)."""
    flat = x.reshape(-1)
    return flat.size == 0 or math.isfinite(flat @ flat) or bool(np.isfinite(flat).all())


def _first_bad_body(model, arr) -> str | None:
    """The first body (the base or a joint's body) whose row of a per-body array is not finite."""
    for k in range(arr.shape[0]):
        if not np.all(np.isfinite(arr[k])):
            return "the base" if k == 0 else f"body '{model.joint_names[k - 1]}'"
    return None


def largest_inputs(**inputs) -> str:
    """'(largest |entry| of q, v, tau: 1e+160)' for the named input arrays."""
    big = max((float(np.max(np.abs(x), initial=0.0)) for x in inputs.values()), default=0.0)
    return f"(largest |entry| of {', '.join(inputs)}: {big:.3g})"


def first_overflow(model, d: Data, steps) -> str | None:
    """'<what> of <body> are not finite: <why>' for the first of the Data's intermediate
    quantities (steps, in the order the algorithm computed them) that is not finite, or None."""
    for field, what, why in steps:
        where = _first_bad_body(model, getattr(d, field))
        if where is not None:
            return f"{what} of {where} are not finite: {why}"
    return None


def overflow_error(model, d: Data | None, algorithm: str, steps, result: str,
                   inputs: str) -> ValueError:
    """The ValueError for a result that is not finite: the first intermediate quantity that
    overflowed (first_overflow), else the result itself. algorithm names the call
    ("forward_dynamics"), inputs is largest_inputs' text."""
    found = first_overflow(model, d, steps) if d is not None else None
    if found is not None:
        return ValueError(f"{algorithm} overflowed float64: {found} {inputs}")
    return ValueError(f"{algorithm} overflowed float64: {result} is not finite {inputs}")


def finite_result(model, d: Data | None, algorithm: str, steps, result_name: str, result,
                  **inputs):
    """result (an array or a tuple of arrays) when every entry is finite; else raises
    overflow_error's ValueError."""
    for r in (result if isinstance(result, tuple) else (result,)):
        if not all_finite(r):
            raise overflow_error(model, d, algorithm, steps, result_name, largest_inputs(**inputs))
    return result
