"""What every algorithm's Python wrapper shares: argument checks, the Data to run on, status codes
of the compiled entry points and the errors they become."""
from __future__ import annotations

from .._jit import njit
from ..data import Data, get_data
from ..state import State

OK = 0
BAD_INPUT = -2        # an input is not finite, or the base quaternion not of unit norm
BASE_SINGULAR = -1    # the floating base's articulated inertia M^A_0 is singular
NOT_FINITE = -3       # a result overflowed (see diagnose_overflow)
# k > 0: the pivot D_k of body k (joint k-1) vanishes: M is singular there


@njit(inline="always")
def not_finite(x):
    """x is NaN or infinite (x - x is 0 for every finite x). The kernels OR it over their results
    (`bad |= not_finite(x)`): an integer reduction that the compiler vectorises, where a float sum
    of the results is one serial chain of additions (~4 cycles each: 0.5 us of solo12's 18 x 36
    A, 2 us of g1's 35 x 70) and can overflow on large finite results."""
    y = x - x
    return y != y


def check_state(model, state) -> None:
    if not isinstance(state, State):
        raise ValueError(f"state must be an sva_linearizer.State, got {type(state).__name__}")
    if state.nj != model.nj or state.floating_base != model.floating_base:
        raise ValueError(f"state was built for another model (nj={state.nj}, floating_base="
                         f"{state.floating_base}); this model has nj={model.nj}, "
                         f"floating_base={model.floating_base}")


def setup(model, state, data=None) -> Data:
    """The Data a call runs on (see data.get_data), with custom joints' jcalc filled in."""
    from .kinematics import fill_custom

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
