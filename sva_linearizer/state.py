"""Robot state: base pose H in SE(3) and body twist v (floating base), joint positions s and rates r."""
from __future__ import annotations

import math

import numpy as np

from .spatial import matrix_to_quat, quat_to_matrix

QUATERNION_TOLERANCE = 1e-6  # |norm - 1| up to this is normalised silently; beyond it is an error


def as_vector(name, x, size):
    """x as a finite, contiguous float vector of the given size, or a ValueError naming the problem."""
    try:
        arr = np.ascontiguousarray(x, dtype=float)
    except (TypeError, ValueError):
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

    Fixed base: H is the identity and v zero. Build with State.from_vectors (flat Pinocchio-style
    vectors) or State(model, R=..., p=..., s=..., v_base=..., r=...)."""

    __slots__ = ("nj", "floating_base", "quat", "_R", "p", "s", "v_base", "r")

    def __init__(self, model, R=None, p=None, s=None, v_base=None, r=None):
        nj = model.nj
        self.nj = nj
        self.floating_base = model.floating_base
        self.s = np.zeros(nj) if s is None else as_vector("joint positions s", s, nj)
        self.r = np.zeros(nj) if r is None else as_vector("joint velocities r", r, nj)
        if self.floating_base:
            R = np.eye(3) if R is None else np.asarray(R, dtype=float)
            if R.shape != (3, 3) or not np.all(np.isfinite(R)):
                raise ValueError("base rotation R: expected a finite 3x3 matrix")
            if np.max(np.abs(R.T @ R - np.eye(3))) > 1e-6 or np.linalg.det(R) < 0:
                raise ValueError("base rotation R: not a rotation matrix")
            self.R = R
            self.p = np.zeros(3) if p is None else as_vector("base position p", p, 3)
            self.v_base = np.zeros(6) if v_base is None else as_vector("base twist v", v_base, 6)
        else:
            if (p is not None and np.any(p)) or (v_base is not None and np.any(v_base)):
                raise ValueError("fixed-base model: base pose and twist are not part of the state")
            self.R, self.p, self.v_base = np.eye(3), np.zeros(3), np.zeros(6)

    @property
    def R(self):
        """Base rotation ^AR_0 (computed from the unit quaternion `quat` (x, y, z, w) on first use)."""
        if self._R is None:
            self._R = quat_to_matrix(self.quat.tolist())
        return self._R

    @R.setter
    def R(self, R):
        q = matrix_to_quat(R)
        self.quat = q / np.linalg.norm(q)
        self._R = R

    @classmethod
    def from_vectors(cls, model, q, v):
        """q = [p(3), quaternion x y z w (4), s(nj)] and v = [v_lin(3), w(3), r(nj)] (body twist)
        for a floating base; q = s, v = r for a fixed base (Pinocchio's conventions)."""
        q = as_vector("q", q, model.nq)
        v = as_vector("v", v, model.nv)
        st = object.__new__(cls)          # fields set directly: the vectors are checked above
        st.nj = model.nj
        st.floating_base = model.floating_base
        if not model.floating_base:
            st.s, st.r = q, v
            st.quat, st._R = np.array([0.0, 0.0, 0.0, 1.0]), None
            st.p, st.v_base = np.zeros(3), np.zeros(6)
            return st
        quat = q[3:7]
        nrm = math.sqrt(quat @ quat)
        if abs(nrm - 1.0) > QUATERNION_TOLERANCE:
            unit_quaternion(quat, "q[3:7] (base quaternion x, y, z, w)")  # raises, naming it
        st.quat = quat if nrm == 1.0 else quat / nrm
        st._R = None
        st.p, st.s, st.v_base, st.r = q[0:3], q[7:], v[0:6], v[6:]
        return st

    @property
    def q(self):
        if not self.floating_base:
            return self.s.copy()
        return np.concatenate([self.p, self.quat, self.s])

    @property
    def v(self):
        if not self.floating_base:
            return self.r.copy()
        return np.concatenate([self.v_base, self.r])

    def __repr__(self):
        return f"<sva_linearizer.State nj={self.nj} floating_base={self.floating_base}>"
