# SPDX-License-Identifier: BSD-3-Clause
"""The model's check on first use: a massless subtree (or base) makes the mass matrix singular at
every configuration, which the articulated-body pivots show (Model.validate runs this)."""
from __future__ import annotations

import warnings

import numpy as np

from ..model import Model, set_validator
from .articulated import articulated_pivots


def validate_model(model: Model, warn: bool = False) -> None:
    """Raise ValueError naming the joint (or the base) whose subtree makes M singular.

    A massless subtree makes M singular at every configuration; M can also be singular at
    isolated configurations (e.g. point masses on a joint axis), which the algorithms report
    when they meet one. So a joint is rejected only if its pivot vanishes at two random
    configurations. ``warn=True``: a UserWarning for each problem (each massless subtree,
    named by its topmost joint) instead of the error."""
    def problem(msg):
        if not warn:
            raise ValueError(msg)
        warnings.warn(f"{msg}; accepted because the model is not strict (load_urdf(..., "
                      "validate=False)): the algorithms that need M^-1 will raise", stacklevel=6)

    if model.nj == 0 and not model.floating_base:
        problem(f"model '{model.name}' has no joints and a fixed base: nothing moves")
        return
    rng = np.random.default_rng(0)
    scale = max(1.0, model.total_mass())
    bad_joints, bad_base = None, True
    for _ in range(2):
        D, base_ev = articulated_pivots(model, rng.uniform(-1.0, 1.0, model.nj))
        bad = {i for i in range(model.nj) if not abs(D[i]) > 1e-12 * scale}
        bad_joints = bad if bad_joints is None else bad_joints & bad
        bad_base = bad_base and model.floating_base and not abs(base_ev) > 1e-12 * scale
    for i in sorted(bad_joints):
        if any(model._is_below(i, k) for k in bad_joints):
            continue  # reported with the topmost joint of its subtree
        below = [model.bodies[k].name for k in sorted(bad_joints) if k != i and model._is_below(k, i)]
        also = f" (and so do the joints below it: {', '.join(below)})" if below else ""
        problem(
            f"joint '{model.bodies[i].name}': the bodies it moves have no mass or inertia along its "
            f"motion, so the mass matrix is singular (massless subtree){also}")
    if bad_base:
        problem(
            f"floating base '{model.base_name}': the base and the bodies rigidly attached to it have "
            "no mass or inertia in some direction, so the mass matrix is singular")


set_validator(validate_model)
