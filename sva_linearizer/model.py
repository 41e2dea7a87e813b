# SPDX-License-Identifier: BSD-3-Clause
"""The kinematic tree: a base body and 1-DoF joints, each joint owning the body it moves.

Bodies are stored parents-before-children (add_body requires the parent to exist), which is the
joint order of the model (`model.joint_names`). The algorithms work on flat arrays compiled from the
tree (`Model.arrays()`), laid out for the kernels by :mod:`sva_linearizer.layout`.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ._arrays import real_array
from .joints import CUSTOM, Joint
from .spatial import inertia_params, placement_to_xform, spatial_inertia

# the check Model.validate runs (algorithms/checks.py registers it: it runs the articulated-body
# algorithm, a layer above the model)
_VALIDATOR = None


def set_validator(check) -> None:
    """Register check(model, warn) as what Model.validate runs."""
    global _VALIDATOR
    _VALIDATOR = check


@dataclass
class Inertia:
    """Rigid-body inertia: mass, centre of mass (body frame), rotational inertia about the COM."""

    mass: float
    com: tuple = (0.0, 0.0, 0.0)
    I_com: object = None

    def matrix(self):
        I_com = np.zeros((3, 3)) if self.I_com is None else real_array(self.I_com, "Inertia: I_com")
        return spatial_inertia(float(self.mass), real_array(self.com, "Inertia: com"), I_com)


@dataclass
class Body:
    name: str
    parent: int            # index of the parent body, -1 for the base (root) body
    joint: Joint
    placement_R: np.ndarray  # joint frame orientation in the parent body frame
    placement_p: np.ndarray  # joint frame origin in the parent body frame
    inertia: np.ndarray      # 6x6 about the body origin, linear-angular


@dataclass
class ModelArrays:
    """Flat arrays the kernels take (built once per model change)."""

    parent: np.ndarray   # (N,) int64, -1 = base
    Xtree: np.ndarray    # (N,6,6) ^{lambda(i)|i}X_{lambda(i)}
    inertia: np.ndarray  # (N,6,6)
    base_inertia: np.ndarray  # (6,6)
    jtype: np.ndarray    # (N,) int64
    jaxis: np.ndarray    # (N,3)
    jpitch: np.ndarray   # (N,)
    custom: tuple        # indices of custom joints
    a_grav: np.ndarray   # (3,) world-frame -gravity (the "base accelerates upwards" trick)
    floating: bool


def _as_inertia_matrix(inertia, what):
    if isinstance(inertia, Inertia):
        M = inertia.matrix()
    elif inertia is None:
        M = np.zeros((6, 6))
    else:
        M = real_array(inertia, f"{what}: inertia")
        if M.shape != (6, 6):
            raise ValueError(f"{what}: inertia must be a 6x6 matrix or an sl.Inertia, got shape {M.shape}")
    if not np.all(np.isfinite(M)):
        raise ValueError(f"{what}: inertia has NaN or infinite entries")
    scale = max(1.0, float(np.max(np.abs(M))))
    if np.max(np.abs(M - M.T)) > 1e-9 * scale:
        raise ValueError(f"{what}: inertia matrix is not symmetric")
    M = 0.5 * (M + M.T)
    ev = np.linalg.eigvalsh(M)
    if ev[0] < -1e-9 * scale:
        # accepted (the thesis's own test system has such matrices), but it is not a body's inertia
        warnings.warn(f"{what}: 6x6 inertia is not positive semi-definite (smallest eigenvalue "
                      f"{ev[0]:.3g}); the mass matrix may be indefinite", stacklevel=4)
    else:
        _warn_if_inconsistent(M, what)
    return M


def _warn_if_inconsistent(M, what):
    """Warn when a 6x6 matrix is not the spatial inertia of a rigid body (mass*1, skew coupling,
    rotational inertia obeying the triangle inequality)."""
    m = M[0, 0]
    scale = max(1.0, float(np.max(np.abs(M))))
    tol = 1e-8 * scale
    ok = np.allclose(M[0:3, 0:3], m * np.eye(3), atol=tol) and np.allclose(M[3:6, 0:3], -M[3:6, 0:3].T, atol=tol)
    if ok and m > 0:
        _, _, Ic = inertia_params(M)
        ev = np.linalg.eigvalsh(0.5 * (Ic + Ic.T))
        ok = ev[0] >= -tol and ev[0] + ev[1] >= ev[2] - 1e-6 * max(ev[2], 1e-12) - tol
    elif ok and m == 0:
        ok = np.allclose(M, 0.0, atol=tol)
    if not ok:
        warnings.warn(f"{what}: the 6x6 inertia is not physically consistent for a rigid body "
                      "(accepted as given)", stacklevel=4)


class Model:
    """A kinematic tree with a fixed or a floating (SE(3)) base.

    ``strict`` (default True): on first use (``arrays()``) ``validate()`` raises a ValueError when
    the mass matrix is singular at every configuration (a massless subtree). False (what
    ``load_urdf(..., validate=False)`` returns): it warns instead, once per massless subtree, and
    the algorithms that invert M refuse, at run time, the configurations where it is singular.

    >>> m = Model(floating_base=True)
    >>> m.set_base_inertia(Inertia(5.0, (0, 0, 0), np.eye(3) * 0.1))
    >>> m.add_body("hip", None, Joint.revolute((1, 0, 0)), placement=(np.eye(3), (0.2, 0.1, 0)),
    ...            inertia=Inertia(1.0, (0, 0, -0.1), np.eye(3) * 0.01))
    'hip'
    """

    def __init__(self, floating_base=True, gravity=(0.0, 0.0, -9.81), name="robot"):
        g = real_array(gravity, "gravity").reshape(-1)
        if g.shape != (3,) or not np.all(np.isfinite(g)):
            raise ValueError(f"gravity must be 3 finite numbers, got {gravity!r}")
        self.name = name
        self.strict = True
        self.floating_base = bool(floating_base)
        self.gravity = g
        self.base_name = "base"
        self.base_inertia = np.zeros((6, 6))
        self.bodies: list[Body] = []
        self._index: dict[str, int] = {}
        self._arrays = None
        self._validated = False
        self._frames: dict[str, tuple[str | None, np.ndarray, np.ndarray]] = {}
        self._frame_refs: dict = {}     # frames.frame_ref's cache

    # -- building -----------------------------------------------------------------------------
    def set_base_inertia(self, inertia):
        """Inertia of the base (root) body about its origin (6x6 linear-angular, or sl.Inertia)."""
        self.base_inertia = _as_inertia_matrix(inertia, f"base body '{self.base_name}'")
        self._changed()

    def add_body(self, name, parent, joint, placement=None, inertia=None):
        """Add a body moved by `joint` relative to `parent` (a body name, or None for the base).

        placement = (R, p): pose of the joint frame in the parent body frame (URDF <origin>).
        Returns the body's name, which is also its joint's name."""
        name = str(name)
        if not name:
            raise ValueError("body name must be a non-empty string")
        if name in self._index or name == self.base_name:
            raise ValueError(f"body '{name}' is already in the model")
        if not isinstance(joint, Joint):
            raise ValueError(f"body '{name}': joint must be an sl.Joint, got {type(joint).__name__}")
        if parent is None or parent == self.base_name:
            pidx = -1
        elif parent in self._index:
            pidx = self._index[parent]
        else:
            raise ValueError(f"body '{name}': parent body '{parent}' is not in the model (add parents first)")
        if placement is None:
            R, p = np.eye(3), np.zeros(3)
        else:
            R, p = placement
            R = real_array(R, f"body '{name}': placement rotation")
            p = real_array(p, f"body '{name}': placement position").reshape(-1)
            if R.shape != (3, 3) or p.shape != (3,) or not (np.all(np.isfinite(R)) and np.all(np.isfinite(p))):
                raise ValueError(f"body '{name}': placement must be (3x3 rotation, 3-vector) of finite numbers")
            if np.max(np.abs(R @ R.T - np.eye(3))) > 1e-6 or np.linalg.det(R) < 0:
                raise ValueError(f"body '{name}': placement rotation is not a rotation matrix")
        M = _as_inertia_matrix(inertia, f"body '{name}'")
        self._index[name] = len(self.bodies)
        self.bodies.append(Body(name, pidx, joint, R, p, M))
        self._changed()
        return name

    def add_frame(self, name, body, placement=None):
        """A named frame rigidly attached to `body` (a body name, or None / the base's name for the
        base) at placement (R, p) in the body frame: what URDF links merged into their parent
        through fixed joints become (contacts and frame_* address frames by name). Every body is
        a frame of its own name (and the base of base_name)."""
        name = str(name)
        if body is not None and body != self.base_name and body not in self._index:
            raise ValueError(f"frame '{name}': body '{body}' is not in the model")
        R, p = (np.eye(3), np.zeros(3)) if placement is None else placement
        R = real_array(R, f"frame '{name}': placement rotation")
        p = real_array(p, f"frame '{name}': placement position").reshape(-1)
        if R.shape != (3, 3) or p.shape != (3,) or not (np.all(np.isfinite(R)) and np.all(np.isfinite(p))) \
                or np.max(np.abs(R @ R.T - np.eye(3))) > 1e-6 or np.linalg.det(R) < 0:
            raise ValueError(f"frame '{name}': placement must be (3x3 rotation, 3-vector) of finite numbers")
        self._frames[name] = (None if body == self.base_name else body, R.copy(), p.copy())
        self._frame_refs = {}

    @property
    def frame_names(self) -> list[str]:
        """Every addressable frame: the base, the bodies, and the added frames (URDF links)."""
        names = [self.base_name] + self.joint_names
        return names + [f for f in self._frames if f not in names]

    def frame(self, name) -> tuple[int, np.ndarray, np.ndarray]:
        """(body index (-1: the base), R, p) of a frame: its pose in that body's frame. URDF link
        names come first, then body names (for a URDF model, its joints' names)."""
        name = str(name)
        if name in self._frames:
            body, R, p = self._frames[name]
            return (-1 if body is None else self._index[body]), R, p
        if name in self._index:
            return self._index[name], np.eye(3), np.zeros(3)
        if name == self.base_name:
            return -1, np.eye(3), np.zeros(3)
        known = self.frame_names
        shown = ", ".join(known[:40]) + (", ..." if len(known) > 40 else "")
        raise ValueError(f"unknown frame '{name}' (model '{self.name}' has the frames: {shown})")

    def _is_below(self, k, i):
        """Whether body k is in the subtree of body i (k != i)."""
        while k >= 0:
            k = self.bodies[k].parent
            if k == i:
                return True
        return False

    def _changed(self):
        self._arrays = None
        self._validated = False
        self._frame_refs = {}

    # -- queries ------------------------------------------------------------------------------
    @property
    def joint_names(self):
        return [b.name for b in self.bodies]

    @property
    def nj(self):
        return len(self.bodies)

    @property
    def nv(self):
        return self.nj + (6 if self.floating_base else 0)

    @property
    def nq(self):
        return self.nj + (7 if self.floating_base else 0)

    def joint_index(self, name):
        try:
            return self._index[name]
        except KeyError:
            raise ValueError(f"unknown joint name '{name}' (model '{self.name}' has: "
                             f"{', '.join(self.joint_names)})") from None

    def parent_name(self, name):
        p = self.bodies[self.joint_index(name)].parent
        return self.base_name if p < 0 else self.bodies[p].name

    def total_mass(self):
        return float(self.base_inertia[0, 0] + sum(b.inertia[0, 0] for b in self.bodies))

    def __repr__(self):
        kind = "floating" if self.floating_base else "fixed"
        return f"<sva_linearizer.Model '{self.name}': {kind} base, nj={self.nj}, nv={self.nv}>"

    # -- compiled form ------------------------------------------------------------------------
    def arrays(self) -> ModelArrays:
        if self._arrays is None:
            N = self.nj
            parent = np.array([b.parent for b in self.bodies], dtype=np.int64)
            Xtree = np.zeros((N, 6, 6))
            inertia = np.zeros((N, 6, 6))
            jtype = np.zeros(N, dtype=np.int64)
            jaxis = np.zeros((N, 3))
            jpitch = np.zeros(N)
            custom = []
            for i, b in enumerate(self.bodies):
                Xtree[i] = placement_to_xform(b.placement_R, b.placement_p)
                inertia[i] = b.inertia
                jtype[i] = b.joint.kind
                jaxis[i] = b.joint.axis
                jpitch[i] = b.joint.pitch
                if b.joint.kind == CUSTOM:
                    custom.append(i)
            self._arrays = ModelArrays(parent, Xtree, inertia, self.base_inertia.copy(), jtype, jaxis,
                                       jpitch, tuple(custom), -self.gravity.copy(), self.floating_base)
        if not self._validated:
            self._validated = True  # set first: validate() itself calls the kernels
            try:
                self.validate(warn=not self.strict)
            except Exception:
                self._validated = False
                raise
        return self._arrays

    def validate(self, warn=False):
        """Raise ValueError naming the joint (or the base) whose subtree makes M singular
        (algorithms/checks.py: the articulated pivots at two random configurations). ``warn=True``:
        a UserWarning for each problem instead of the error."""
        if _VALIDATOR is None:  # pragma: no cover - sva_linearizer's import registers it
            raise RuntimeError("no model check registered: import sva_linearizer")
        _VALIDATOR(self, warn)
