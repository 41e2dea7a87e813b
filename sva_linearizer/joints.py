# SPDX-License-Identifier: BSD-3-Clause
"""1-DoF joints with the thesis's interface (Appendix B): jcalc(s) -> (X_J, Gamma), jcalcderiv(s) -> dX_J/ds.

X_J = ^iX_{lambda(i)|i} maps twists from the joint's parent-side frame lambda(i)|i into the child
body frame i; Gamma is the motion subspace in the child frame. Built-in joints move the way Gamma says
(the child of a prismatic joint slides +s e, of a helical joint +h s e; Table B.1 prints the opposite
sign for o: docs/derivations.md, "Joints"). Axes are arbitrary unit vectors (URDF), not only x, y, z.
"""
from __future__ import annotations

import numpy as np

from ._arrays import real_array
from .spatial import crm, rot_axis_angle, xform

REVOLUTE, PRISMATIC, HELICAL, CUSTOM = 0, 1, 2, 3
_KIND_NAMES = {REVOLUTE: "revolute", PRISMATIC: "prismatic", HELICAL: "helical", CUSTOM: "custom"}


def _unit_axis(axis):
    a = real_array(axis, "joint axis").reshape(-1)
    if a.shape != (3,) or not np.all(np.isfinite(a)):
        raise ValueError(f"joint axis must be 3 finite numbers, got {axis!r}")
    n = np.linalg.norm(a)
    if n < 1e-9:
        raise ValueError(f"joint axis must be non-zero, got {axis!r}")
    return a / n


class Joint:
    """A 1-DoF joint. Use the constructors revolute / prismatic / helical / custom."""

    def __init__(self, kind, axis=(0.0, 0.0, 1.0), pitch=0.0, jcalc=None, jcalcderiv=None):
        self.kind = kind
        self.axis = _unit_axis(axis) if kind != CUSTOM else np.zeros(3)
        self.pitch = float(pitch)
        self._jcalc = jcalc
        self._jcalcderiv = jcalcderiv

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def revolute(cls, axis=(0.0, 0.0, 1.0)):
        """Rotation s about a unit axis (URDF revolute and continuous). Gamma = [0; e]."""
        return cls(REVOLUTE, axis)

    @classmethod
    def prismatic(cls, axis=(0.0, 0.0, 1.0)):
        """Translation s along a unit axis. Gamma = [e; 0]."""
        return cls(PRISMATIC, axis)

    @classmethod
    def helical(cls, axis=(0.0, 0.0, 1.0), pitch=0.0):
        """Rotation s about e with translation pitch*s along e. Gamma = [h e; e]."""
        return cls(HELICAL, axis, pitch)

    @classmethod
    def custom(cls, jcalc, jcalcderiv):
        """Any other 1-DoF joint from its jcalc(s) -> (X_J 6x6, Gamma 6) and jcalcderiv(s) -> dX_J/ds.

        Gamma must not depend on s (thesis Assumption 2.2, conventional joints)."""
        if not callable(jcalc) or not callable(jcalcderiv):
            raise ValueError("Joint.custom needs two callables: jcalc(s) and jcalcderiv(s)")
        return cls(CUSTOM, jcalc=jcalc, jcalcderiv=jcalcderiv)

    # -- Appendix B ---------------------------------------------------------------------------
    @property
    def type_name(self):
        return _KIND_NAMES[self.kind]

    def motion_subspace(self):
        if self.kind == REVOLUTE:
            return np.concatenate([np.zeros(3), self.axis])
        if self.kind == PRISMATIC:
            return np.concatenate([self.axis, np.zeros(3)])
        if self.kind == HELICAL:
            return np.concatenate([self.pitch * self.axis, self.axis])
        return np.asarray(self._jcalc(0.0)[1], dtype=float).reshape(6)

    def jcalc(self, s):
        """(X_J, Gamma) at joint position s (Appendix B.2)."""
        if self.kind == CUSTOM:
            X, G = self._jcalc(s)
            return np.asarray(X, dtype=float).reshape(6, 6), np.asarray(G, dtype=float).reshape(6)
        e = self.axis
        if self.kind == REVOLUTE:
            return xform(rot_axis_angle(e, s).T, np.zeros(3)), self.motion_subspace()
        if self.kind == PRISMATIC:
            return xform(np.eye(3), -s * e), self.motion_subspace()
        return xform(rot_axis_angle(e, s).T, -self.pitch * s * e), self.motion_subspace()

    def jcalcderiv(self, s):
        """dX_J/ds (Appendix B.3). For the built-in joints, dX_J/ds = -(Gamma x) X_J."""
        if self.kind == CUSTOM:
            return np.asarray(self._jcalcderiv(s), dtype=float).reshape(6, 6)
        X, G = self.jcalc(s)
        return -crm(G) @ X

    def __repr__(self):
        if self.kind == CUSTOM:
            return "Joint.custom(...)"
        extra = f", pitch={self.pitch}" if self.kind == HELICAL else ""
        return f"Joint.{self.type_name}(axis={self.axis.tolist()}{extra})"
