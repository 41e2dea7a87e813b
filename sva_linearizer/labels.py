# SPDX-License-Identifier: BSD-3-Clause
"""Names of the components of z and w, in the order of A's and B's rows and columns."""
from __future__ import annotations


def z_names(model):
    """Names of the state perturbation's components, in order: floating base
    z = [z_H (6), z_s (nj), z_v (6), z_r (nj)] -> "z_H.vx" .. "z_H.wz", "s.<joint>", "v.vx" .. "v.wz",
    "r.<joint>" (z_H: the pose perturbation H -> H exp(z_H^), linear-angular; v: the base's body twist);
    fixed base z = [s, r]."""
    twist = ("vx", "vy", "vz", "wx", "wy", "wz")
    joints = list(model.joint_names)
    names = []
    if model.floating_base:
        names += [f"z_H.{c}" for c in twist]
    names += [f"s.{j}" for j in joints]
    if model.floating_base:
        names += [f"v.{c}" for c in twist]
    names += [f"r.{j}" for j in joints]
    return names


def w_names(model):
    """Names of the input w = tau, in order: "tau.<joint>"."""
    return [f"tau.{j}" for j in model.joint_names]
