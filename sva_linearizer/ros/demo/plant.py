# SPDX-License-Identifier: BSD-3-Clause
"""Simulated robots to close loops around: Pinocchio's dynamics of the same URDF (an independent
simulator: the examples' and the closed-loop tests' plant) and the package's own dynamics (the
demo's plant where Pinocchio is not installed).

The controllers of the examples and of ``sva-linearizer demo --control`` are designed on
sva_linearizer's A and B; the robot they control is simulated by Pinocchio
(https://github.com/stack-of-tasks/pinocchio, ``pip install pin``),
which computes its own forward dynamics (``pin.aba``, or ``pin.constraintDynamics`` for a robot
standing on rigid contacts) and integrates on the configuration manifold (``pin.integrate``: the
base pose H <- H exp(h v^) on SE(3)). Nothing here calls sva_linearizer's dynamics.

The two libraries share the flat conventions q = [p (3), quaternion x y z w (4), joints] and
v = [base body twist (linear, angular), joint rates] for a floating base; only the joint order may
differ, so joints are mapped by name (``Plant.to_pin`` / ``Plant.from_pin``).
"""
from __future__ import annotations

import numpy as np

import sva_linearizer as sl

try:
    import pinocchio as pin
except ImportError:                                   # the examples say so and exit 2
    pin = None

MISSING = "this simulates the robot with Pinocchio: pip install pin"


class Plant:
    """The robot of ``urdf_path`` in Pinocchio, stepped with a zero-order hold on the torques.

    joint_names: the joint order of the caller's model (sva_linearizer's ``model.joint_names``);
    states are passed in and out in that order, as sva_linearizer's flat (q, v)."""

    def __init__(self, urdf_path: str, joint_names: list[str], floating_base: bool,
                 gravity: tuple[float, float, float] = (0.0, 0.0, -9.81)) -> None:
        if floating_base:
            self.pm = pin.buildModelFromUrdf(str(urdf_path), pin.JointModelFreeFlyer())
        else:
            self.pm = pin.buildModelFromUrdf(str(urdf_path))
        self.pm.gravity.linear = np.asarray(gravity, dtype=float)
        self.pd = self.pm.createData()
        self.floating_base = floating_base
        nb = 7 if floating_base else 0                 # configuration entries of the base
        nbv = 6 if floating_base else 0
        qi, vi = [], []
        for name in joint_names:                       # Pinocchio's index of each of our joints
            jid = self.pm.getJointId(name)
            if jid >= self.pm.njoints:
                raise ValueError(f"Pinocchio's model has no joint {name!r}")
            j = self.pm.joints[jid]
            if j.nq != 1 or j.nv != 1:
                raise ValueError(f"joint {name!r}: the examples handle 1-DoF joints only")
            qi.append(j.idx_q)
            vi.append(j.idx_v)
        self.iq = np.r_[np.arange(nb), qi].astype(int)     # our flat q[k] is Pinocchio's q[iq[k]]
        self.iv = np.r_[np.arange(nbv), vi].astype(int)
        self.ij = np.array(vi, dtype=int)                   # tau (joints only) in Pinocchio's v order
        self.contacts = None

    # ---- conversions (our joint order <-> Pinocchio's) ----
    def to_pin(self, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        qp, vp = np.zeros(self.pm.nq), np.zeros(self.pm.nv)
        qp[self.iq], vp[self.iv] = q, v
        return qp, vp

    def from_pin(self, qp: np.ndarray, vp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return qp[self.iq].copy(), vp[self.iv].copy()

    def _tau(self, tau: np.ndarray) -> np.ndarray:
        tp = np.zeros(self.pm.nv)
        tp[self.ij] = tau
        return tp

    # ---- rigid point contacts (a robot standing on its feet) ----
    def add_point_contacts(self, q: np.ndarray, frames: list[str], kp: float, kd: float) -> None:
        """Point contacts (CONTACT_3D, forces in world axes: LOCAL_WORLD_ALIGNED) at the frames'
        positions in configuration q, held there by a Baumgarte corrector: the constraint is
        a_c + kd v_c + kp e = 0 with e the foot's displacement from that anchor."""
        qp, _ = self.to_pin(q, np.zeros(len(self.iv)))
        pin.framesForwardKinematics(self.pm, self.pd, qp)
        self.contacts = pin.StdVec_RigidConstraintModel()
        for f in frames:
            fid = self.pm.getFrameId(f)
            if fid >= len(self.pm.frames):
                raise ValueError(f"Pinocchio's model has no frame {f!r}")
            fr = self.pm.frames[fid]
            anchor = self.pd.oMf[fid]
            cm = pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, self.pm, fr.parentJoint, fr.placement,
                                          0, pin.SE3(anchor.rotation.copy(), anchor.translation.copy()),
                                          pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
            bp = cm.m_baumgarte_parameters            # a reference into cm
            bp.Kp, bp.Kd = kp, kd
            self.contacts.append(cm)
        self.all_contacts = list(self.contacts)
        self._sets = {}
        self.set_active([True] * len(frames))

    def set_active(self, flags) -> None:
        """Which of the point contacts hold from now on (one bool per frame of add_point_contacts);
        an inactive one exerts no force and keeps its anchor for when it is active again."""
        key = tuple(bool(f) for f in flags)
        if len(key) != len(self.all_contacts):
            raise ValueError(f"set_active: {len(key)} flags for {len(self.all_contacts)} contacts")
        if key not in self._sets:
            models, datas = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
            for cm, on in zip(self.all_contacts, key):
                if on:
                    models.append(cm)
                    datas.append(cm.createData())
            self._sets[key] = (models, datas)
        self.contacts, self.contact_datas = self._sets[key]
        self.active = key
        if len(self.contacts):
            pin.initConstraintDynamics(self.pm, self.pd, self.contacts, self.contact_datas)

    def contact_forces(self) -> np.ndarray:
        """The contact forces of the last step (on the robot, world axes), one row per active contact."""
        if not len(self.contacts):
            return np.zeros((0, 3))
        return np.array(self.pd.lambda_c).reshape(-1, 3)

    def contact_offsets(self, q: np.ndarray) -> np.ndarray:
        """Each foot's point minus its anchor (world, m) in configuration q, active or not (rows
        in the order of add_point_contacts)."""
        qp, _ = self.to_pin(q, np.zeros(len(self.iv)))
        pin.framesForwardKinematics(self.pm, self.pd, qp)
        out = []
        for cm in self.all_contacts:
            oMc = self.pd.oMi[cm.joint1_id] * cm.joint1_placement
            out.append(oMc.translation - cm.joint2_placement.translation)
        return np.array(out)

    def contact_drift(self, q: np.ndarray) -> float:
        """The largest distance of an active foot from its anchor (m) in configuration q."""
        off = self.contact_offsets(q)[list(self.active)]
        return float(np.max(np.linalg.norm(off, axis=1))) if len(off) else 0.0

    # ---- time stepping ----
    def step(self, q: np.ndarray, v: np.ndarray, tau: np.ndarray, dt: float, substeps: int = 10,
             base_wrench: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The state after dt seconds with the joint torques tau held constant, in `substeps`
        semi-implicit Euler steps: v += h a(q, v, tau); q = q (+) h v. base_wrench: an external
        wrench [f; tau] on the base, in the base's axes at its origin (a push), held as well."""
        qp, vp = self.to_pin(q, v)
        tp = self._tau(tau)
        if base_wrench is not None:
            tp[:6] = base_wrench                       # the free-flyer's generalized force
        h = dt / substeps
        for _ in range(substeps):
            if self.contacts is None or not len(self.contacts):
                a = pin.aba(self.pm, self.pd, qp, vp, tp)
            else:
                a = pin.constraintDynamics(self.pm, self.pd, qp, vp, tp, self.contacts, self.contact_datas)
            vp = vp + h * a
            qp = pin.integrate(self.pm, qp, h * vp)
        return self.from_pin(qp, vp)


def state_error(q: np.ndarray, v: np.ndarray, q_ref: np.ndarray, v_ref: np.ndarray,
                floating_base: bool) -> np.ndarray:
    """z, the state perturbation of sva_linearizer's A and B, such that (q, v) = (q_ref, v_ref) (+) z.

    Floating base: z = [z_H, z_s, z_v, z_r] with H = H_ref exp(z_H^), so z_H = log(H_ref^-1 H) on
    SE(3) (linear, angular; not a difference of positions and quaternions), z_s = s - s_ref, and
    z_v, z_r the differences of the body twists and joint rates. Fixed base: z = [s - s_ref, r - r_ref]."""
    if not floating_base:
        return np.r_[q - q_ref, v - v_ref]
    H = pin.XYZQUATToSE3(q[:7])
    H_ref = pin.XYZQUATToSE3(q_ref[:7])
    z_H = pin.log6(H_ref.actInv(H)).vector            # log(H_ref^-1 H), [linear; angular]
    return np.r_[z_H, q[7:] - q_ref[7:], v - v_ref]


class PackagePlant:
    """The same interface on sva_linearizer's own forward dynamics (ABAmb; with point contacts the
    constrained dynamics, anchored where the feet stand), stepped by ``sl.next_state``: for the demo
    without Pinocchio. Not an independent check of the package: the tests use :class:`Plant`."""

    def __init__(self, model: sl.Model) -> None:
        self.model = model
        self.contacts = None
        self.push = sl.Contact(model.base_name, kind="6d", reference="local") if model.floating_base else None

    def add_point_contacts(self, q: np.ndarray, frames: list[str], kp: float, kd: float) -> None:
        st = sl.State.from_vectors(self.model, q, np.zeros(self.model.nv))
        self.contacts = [sl.Contact(f, kind="point", reference="world_aligned", baumgarte=(kp, kd),
                                    anchor=sl.frame_placement(self.model, st, f)[1]) for f in frames]
        self.all_contacts = list(self.contacts)
        self.active = (True,) * len(frames)

    def set_active(self, flags) -> None:
        """As Plant.set_active."""
        key = tuple(bool(f) for f in flags)
        if len(key) != len(self.all_contacts):
            raise ValueError(f"set_active: {len(key)} flags for {len(self.all_contacts)} contacts")
        self.contacts = [c for c, on in zip(self.all_contacts, key) if on]
        self.active = key

    def contact_forces(self) -> np.ndarray:
        """As Plant.contact_forces (the last substep's)."""
        return getattr(self, "last_forces", np.zeros((0, 3)))

    def contact_offsets(self, q: np.ndarray) -> np.ndarray:
        """As Plant.contact_offsets."""
        st = sl.State.from_vectors(self.model, q, np.zeros(self.model.nv))
        return np.array([sl.frame_placement(self.model, st, c.frame)[1] - c.anchor[1]
                         for c in self.all_contacts])

    def step(self, q: np.ndarray, v: np.ndarray, tau: np.ndarray, dt: float, substeps: int = 10,
             base_wrench: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        st = sl.State.from_vectors(self.model, q, v)
        h = dt / substeps
        forces = [(self.push, base_wrench)] if base_wrench is not None and self.push is not None else None
        for _ in range(substeps):
            a = sl.forward_dynamics(self.model, st, tau, contacts=self.contacts or None, forces=forces)
            self.last_forces = np.asarray(a[1]).reshape(-1, 3) if self.contacts else np.zeros((0, 3))
            st = sl.next_state(self.model, st, a[0] if self.contacts else a, h)
        return st.q.copy(), st.v.copy()
