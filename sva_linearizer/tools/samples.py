# SPDX-License-Identifier: BSD-3-Clause
"""What the measuring tools share: random states of a model, and Pinocchio's model of the same
URDF with the same vectors (the bench's and the profile's other side)."""
from __future__ import annotations

import numpy as np


def random_states(model, n, seed=0):
    """n random states as flat vectors: positions in [-1, 1], unit quaternions, velocities and
    torques ~ N(0, 1)."""
    rng = np.random.default_rng(seed)
    Q = np.zeros((n, model.nq))
    if model.floating_base:
        Q[:, 0:3] = rng.normal(size=(n, 3))
        quat = rng.normal(size=(n, 4))
        Q[:, 3:7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    Q[:, model.nq - model.nj:] = rng.uniform(-1.0, 1.0, (n, model.nj))
    return Q, rng.normal(size=(n, model.nv)), rng.normal(size=(n, model.nj))


def pinocchio_model(path, floating, model):
    """(pinocchio, its Model of the URDF at path (a free-flyer root if floating), a Data of it),
    checked to take the same vectors as `model` (ImportError without Pinocchio)."""
    import pinocchio as pin

    pm = (pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer()) if floating
          else pin.buildModelFromUrdf(str(path)))
    names = [pm.names[i] for i in range(1 if not floating else 2, pm.njoints)]
    if names != list(model.joint_names) or pm.nq != model.nq or pm.nv != model.nv:
        raise ValueError(f"Pinocchio's joints differ from ours for {model.name} (continuous joints "
                         "have nq=2 in Pinocchio); this benchmark needs the same vectors")
    return pin, pm, pm.createData()
