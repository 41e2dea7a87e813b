# SPDX-License-Identifier: BSD-3-Clause
"""Robot state: base pose H in SE(3) and body twist v (floating base), joint positions s and rates r."""
from __future__ import annotations

import math

import numpy as np

from ._lanes import all_lanes, any_lane
from ._jit import DirectEntry, njit
from ._arrays import kernel_array, real_array
from .spatial import matrix_to_quat, quat_to_matrix

QUATERNION_TOLERANCE = 1e-6  # |norm - 1| up to this is normalised silently; beyond it is an error


def as_vector(name, x, size):
    """x as a finite, contiguous float vector of the given size, or a ValueError naming the problem."""
    try:
        arr = kernel_array(x, name)
    except (TypeError, ValueError) as e:
        if str(e).startswith(name + ":"):     # real_array's error, naming the argument
            raise
        raise ValueError(f"{name}: expected {size} numbers, got {type(x).__name__}") from None
    if arr.ndim == 2 and 1 in arr.shape:  # a row or column vector
        arr = arr.reshape(-1)
    if arr.ndim != 1 or arr.shape[0] != size:
        raise ValueError(f"{name}: expected a vector of size {size}, got shape {arr.shape}")
    if size == 0 or math.isfinite(arr @ arr):  # fast path: NaN and inf propagate into the sum
        return arr
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name}: entry {i} is {arr[i]} (NaN or infinite values are not allowed)")
    return arr


def unit_quaternion(quat, name="quaternion"):
    """Normalise a quaternion whose norm is within QUATERNION_TOLERANCE of 1; raise beyond."""
    nrm = float(np.linalg.norm(quat))
    if abs(nrm - 1.0) > QUATERNION_TOLERANCE:
        raise ValueError(f"{name}: norm {nrm:.9g} is not 1 (|norm - 1| = {abs(nrm - 1.0):.3g} > "
                         f"{QUATERNION_TOLERANCE:g}); pass a unit quaternion (x, y, z, w)")
    return np.asarray(quat, dtype=float) / nrm


class State:
    """q = (H, s), nu = (v, r) of thesis (3.6); v is the base's body twist [v_lin; w].

    Held as the flat vectors q = [p, quaternion (x, y, z, w), s] and v = [v_lin, w, r] (Pinocchio's
    layout; q = s, v = r for a fixed base); p, quat, s, v_base, r are views of them and R is
    computed from quat on each use. Fixed base: H is the identity and v zero.

    The rule for your arrays: a State always holds its own copies. State.from_vectors(model, q, v)
    copies q and v (normalising a quaternion within QUATERNION_TOLERANCE of unit norm), so changing
    your q afterwards never changes the state: build a new State (or use the setters, which give
    the state new vectors) to linearize somewhere else. Also State(model, R=..., p=..., s=...,
    v_base=..., r=...)."""

    __slots__ = ("nj", "floating_base", "_q", "_v")

    def __init__(self, model, R=None, p=None, s=None, v_base=None, r=None):
        nj = model.nj
        self.nj = nj
        self.floating_base = model.floating_base
        s = np.zeros(nj) if s is None else as_vector("joint positions s", s, nj)
        r = np.zeros(nj) if r is None else as_vector("joint velocities r", r, nj)
        if self.floating_base:
            R = np.eye(3) if R is None else real_array(R, "base rotation R")
            if R.shape != (3, 3) or not np.all(np.isfinite(R)):
                raise ValueError("base rotation R: expected a finite 3x3 matrix")
            if np.max(np.abs(R.T @ R - np.eye(3))) > 1e-6 or np.linalg.det(R) < 0:
                raise ValueError("base rotation R: not a rotation matrix")
            quat = matrix_to_quat(R)
            p = np.zeros(3) if p is None else as_vector("base position p", p, 3)
            v_base = np.zeros(6) if v_base is None else as_vector("base twist v", v_base, 6)
            self._q = np.concatenate([p, quat / np.linalg.norm(quat), s])
            self._v = np.concatenate([v_base, r])
        else:
            if (p is not None and np.any(p)) or (v_base is not None and np.any(v_base)):
                raise ValueError("fixed-base model: base pose and twist are not part of the state")
            self._q, self._v = s.copy(), r.copy()

    @classmethod
    def from_vectors(cls, model, q, v):
        """q = [p(3), quaternion x y z w (4), s(nj)] and v = [v_lin(3), w(3), r(nj)] (body twist)
        for a floating base; q = s, v = r for a fixed base (Pinocchio's conventions)."""
        nj, floating = len(model.bodies), model.floating_base
        nq, nv = (nj + 7, nj + 6) if floating else (nj, nj)
        if (type(q) is _ndarray and type(v) is _ndarray and q.dtype is _FLOAT64
                and v.dtype is _FLOAT64 and q.shape == (nq,) and v.shape == (nv,)):
            # always the state's own copies (see the class docstring); a copy is C-contiguous,
            # aligned and writeable whatever q's layout, so _is_vector's flags test is not needed
            q, v = q.copy(), v.copy()
        else:
            q = np.array(as_vector("q", q, nq))
            v = np.array(as_vector("v", v, nv))
        if (_CHECK.code or _CHECK.get())(q, v, floating) == 1:   # check_state_vectors, on the copies
            raise input_error(model, q, v)
        st = _new(cls)
        st.nj = nj                  # (one assignment each: a tuple assignment builds the tuple)
        st.floating_base = floating
        st._q = q
        st._v = v
        return st

    # q and v are the state's own arrays (C-contiguous float64 vectors of the model's sizes, which
    # the compiled calls take without numba's type dispatch: see _jit.direct). Assigning a new one
    # checks it as from_vectors does (finite, the right size, a unit quaternion within
    # QUATERNION_TOLERANCE, normalised) and stores a copy.
    @property
    def q(self):
        """[p, quaternion (x, y, z, w), s] (floating base) or s (fixed base)."""
        return self._q

    @q.setter
    def q(self, value):
        q = np.array(as_vector("q", value, self._q.shape[0]))
        if (_CHECK.code or _CHECK.get())(q, self._v, self.floating_base) == 1:   # (q is finite)
            unit_quaternion(q[3:7], "q[3:7] (base quaternion x, y, z, w)")   # raises, naming it
            raise ValueError("q: not a valid state vector")   # pragma: no cover - they agree
        self._q = q

    @property
    def v(self):
        """[v_lin, w, r] (floating base: the body twist of the base) or r (fixed base)."""
        return self._v

    @v.setter
    def v(self, value):
        self._v = np.array(as_vector("v", value, self._v.shape[0]))

    @property
    def quat(self):
        """Base orientation as a unit quaternion (x, y, z, w) (identity for a fixed base)."""
        return self.q[3:7] if self.floating_base else np.array([0.0, 0.0, 0.0, 1.0])

    @property
    def p(self):
        return self.q[0:3] if self.floating_base else np.zeros(3)

    @property
    def s(self):
        return self.q[7:] if self.floating_base else self.q

    @property
    def v_base(self):
        return self.v[0:6] if self.floating_base else np.zeros(6)

    @property
    def r(self):
        return self.v[6:] if self.floating_base else self.v

    @property
    def R(self):
        """Base rotation ^AR_0, from the unit quaternion."""
        return quat_to_matrix(self.quat)

    # Setters give the state new vectors (never writing into arrays a caller passed in).
    def _set(self, which, lo, name, value, base=False):
        if base and not self.floating_base:
            raise ValueError("fixed-base model: base pose and twist are not part of the state")
        new = getattr(self, "_" + which).copy()
        size = (new.shape[0] - lo) if not base else (3 if which == "q" else 6)
        new[lo:lo + size] = as_vector(name, value, size)
        setattr(self, "_" + which, new)

    @s.setter
    def s(self, value):
        self._set("q", 7 if self.floating_base else 0, "joint positions s", value)

    @r.setter
    def r(self, value):
        self._set("v", 6 if self.floating_base else 0, "joint velocities r", value)

    @p.setter
    def p(self, value):
        self._set("q", 0, "base position p", value, base=True)

    @v_base.setter
    def v_base(self, value):
        self._set("v", 0, "base twist v", value, base=True)

    def __repr__(self):
        return f"<sva_linearizer.State nj={self.nj} floating_base={self.floating_base}>"


_FLOAT64 = np.dtype(np.float64)
_ndarray = np.ndarray   # (a module global: one lookup on the hot paths, not two)
_new = object.__new__


def _is_vector(x, size):
    """x is already what the kernels take: a float64 vector of the given size, C-contiguous,
    aligned and writeable (`flags.carray`; see kernel_array). (On the hot path: `is` against
    numpy's float64 descriptor is a pointer compare; an equal descriptor that is another object
    only sends x through as_vector, which copies it.)"""
    return (type(x) is _ndarray and x.dtype is _FLOAT64 and x.shape == (size,)
            and x.flags.carray)


def input_error(model, q, v, tau=None):
    """The ValueError naming what is wrong with flat state vectors (and tau), which check_vectors
    found not finite or with a non-unit quaternion."""
    try:
        q = as_vector("q", q, model.nq)
        v = as_vector("v", v, model.nv)
        if tau is not None:
            as_vector("tau", tau, model.nj)
        if model.floating_base:
            unit_quaternion(q[3:7], "q[3:7] (base quaternion x, y, z, w)")
    except ValueError as e:
        return e
    return ValueError("invalid state vectors")  # pragma: no cover - check_vectors and this agree


@njit
def check_vectors(q, v, tau, floating, tol):
    """0 if q, v, tau are finite and (floating base) q[3:7] has unit norm; 4 if that norm is within
    tol of 1 (normalise it), else 1 (something to report: see input_error)."""
    for i in range(q.shape[0]):
        if not all_lanes(math.isfinite(q[i])):
            return 1
    for i in range(v.shape[0]):
        if not all_lanes(math.isfinite(v[i])):
            return 1
    for i in range(tau.shape[0]):
        if not all_lanes(math.isfinite(tau[i])):
            return 1
    if floating:
        nrm = math.sqrt(q[3] * q[3] + q[4] * q[4] + q[5] * q[5] + q[6] * q[6])
        if any_lane(abs(nrm - 1.0) > tol):
            return 1
        if any_lane(nrm != 1.0):
            return 4
    return 0


@njit
def check_state_vectors(q, v, floating):
    """State.from_vectors' check of its own copies q, v: check_vectors(q, v, no tau, floating,
    QUATERNION_TOLERANCE), and a base quaternion within that tolerance of unit norm (status 4)
    normalised in place. Compiled, three arguments: the normalisation of a quaternion whose norm
    is 1 only to rounding (about half of the states a user builds) cost ~2 us in numpy."""
    status = check_vectors(q, v, q[0:0], floating, QUATERNION_TOLERANCE)
    if status == 4:
        nrm = math.sqrt(q[3] * q[3] + q[4] * q[4] + q[5] * q[5] + q[6] * q[6])
        for i in range(3, 7):
            q[i] /= nrm
    return status


# check_state_vectors called directly on its one signature (a State's own copies: _jit.DirectEntry)
_CHECK = DirectEntry(check_state_vectors, np.zeros(7), np.zeros(6), True)

