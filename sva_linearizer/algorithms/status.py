# SPDX-License-Identifier: BSD-3-Clause
"""The status codes the compiled entry points return (0: done)."""

OK = 0
BAD_INPUT = -2          # an input is not finite, or the base quaternion not of unit norm
BASE_SINGULAR = -1      # the floating base's articulated inertia M^A_0 is singular
NOT_FINITE = -3         # a result overflowed (see common.overflow_error)
CONTACTS_SINGULAR = -4  # the Delassus matrix of the contacts is not (numerically) positive definite
LANES_FAILED = -5       # a lockstep group of states failed as a whole: its states are computed one by one
# k > 0: the pivot D_k of body k (joint k-1) vanishes: M is singular there
