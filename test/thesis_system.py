# SPDX-License-Identifier: BSD-3-Clause
"""The thesis's Chapter 5 test system (Section 5.1, Appendix D.1), shared by the tests.

Two builds of the same tree: `joints="table_b1"` uses Joint.custom with jcalc exactly as Table B.1
prints it (reproduces the printed numbers; docs/derivations.md, "Joints", says why prismatic and helical
joints move against their motion subspace there); `joints="package"` uses the package's own joints.
"""
import numpy as np

import sva_linearizer as sl
from sva_linearizer.spatial import skew, xform

# Table D.1: (type, axis, pitch); the tree of Figure 5.1 as docs/derivations.md reconstructs it
PARENTS = [0, 1, 2, 0, 4, 4, 0, 7, 8]
JOINTS = [("P", "x", 0), ("R", "y", 0), ("H", "z", 4), ("H", "x", 5), ("R", "z", 0), ("P", "y", 0),
          ("R", "x", 0), ("P", "z", 0), ("H", "y", 3)]
# Table D.2: ^{lambda(i)|i}X_{lambda(i)} = blockdiag(R, R) [[1, o^], [0, 1]]
TREE = [("x", 1, [2, 1, 7]), ("z", 4, [1, 7, 6]), ("y", 7, [8, 9, 3]), ("x", 8, [7, 0, 7]),
        ("y", 5, [6, 5, 8]), ("x", 1, [3, 8, 0]), ("x", 0, [4, 3, 2]), ("z", 6, [7, 5, 1]),
        ("y", 4, [3, 2, 2])]
# Table D.3, used as printed as 6x6 matrices (they are not consistent rigid-body inertias in
# linear-angular order; the algorithms do not need them to be)
INERTIAS = [
    [[120, -23, -68, 0, -14, 6], [-23, 153, -39, 14, 0, -10], [-68, -39, 76, -6, 10, 0],
     [0, 14, -6, 2, 0, 0], [-14, 0, 10, 0, 2, 0], [6, -10, 0, 0, 0, 2]],
    [[129, -71, -138, 0, -24, 12], [-71, 314, -43, 24, 0, -36], [-138, -43, 241, -12, 36, 0],
     [0, 24, -12, 6, 0, 0], [-24, 0, 36, 0, 6, 0], [12, -36, 0, 0, 0, 6]],
    [[238, -74, -403, 0, -45, 9], [-74, 959, -42, 45, 0, -81], [-403, -42, 746, -9, 81, 0],
     [0, 45, -9, 9, 0, 0], [-45, 0, 81, 0, 9, 0], [9, -81, 0, 0, 0, 9]],
    [[852, -113, -214, 0, -72, 40], [-113, 725, -357, 72, 0, -24], [-214, -357, 280, -40, 24, 0],
     [0, 72, -40, 8, 0, 0], [-72, 0, 24, 0, 8, 0], [40, -24, 0, 0, 0, 8]],
    [[45, -41, -36, 0, -6, 6], [-41, 118, -13, 6, 0, -14], [-36, -13, 117, -6, 14, 0],
     [0, 6, -6, 2, 0, 0], [-6, 0, 14, 0, 2, 0], [6, -14, 0, 0, 0, 2]],
    [[122, -34, -34, 0, -8, 7], [-34, 91, -51, 8, 0, -5], [-34, -51, 75, -7, 5, 0],
     [0, 8, -7, 1, 0, 0], [-8, 0, 5, 0, 1, 0], [7, -5, 0, 0, 0, 1]],
    [[94, -83, -88, 0, -15, 15], [-83, 230, -42, 15, 0, -30], [-88, -42, 233, -15, 30, 0],
     [0, 15, -15, 5, 0, 0], [-15, 0, 30, 0, 5, 0], [15, -30, 0, 0, 0, 5]],
    [[168, -121, -158, 0, -20, 16], [-121, 361, -77, 20, 0, -32], [-158, -77, 328, -16, 32, 0],
     [0, 20, -16, 4, 0, 0], [-20, 0, 32, 0, 4, 0], [16, -32, 0, 0, 0, 4]],
    [[569, -503, -246, 0, -28, 56], [-503, 681, -219, 28, 0, -63], [-246, -219, 1016, -56, 63, 0],
     [0, 28, -56, 7, 0, 0], [-28, 0, 63, 0, 7, 0], [56, -63, 0, 0, 0, 7]],
    [[184, -11, -4, 0, -6, 18], [-11, 25, -51, 6, 0, -2], [-4, -51, 172, -18, 2, 0],
     [0, 6, -18, 2, 0, 0], [-6, 0, 2, 0, 2, 0], [18, -2, 0, 0, 0, 2]],
]
AXES = {"x": np.array([1.0, 0, 0]), "y": np.array([0, 1.0, 0]), "z": np.array([0, 0, 1.0])}

# Section 5.1 inputs
S = np.arange(13.0, 22.0)
V_INERTIAL = np.arange(7.0, 13.0)   # ^A v_{A,0}
R_JOINT = np.arange(21.0, 30.0)
RDOT = np.arange(30.0, 39.0)
P_BASE = np.array([4.0, 5.0, 6.0])


def R_axis(axis, s):
    """(B.2)-(B.4): coordinate rotations, the transpose of the active rotation about the axis."""
    c, sn = np.cos(s), np.sin(s)
    if axis == "x":
        return np.array([[1, 0, 0], [0, c, sn], [0, -sn, c]])
    if axis == "y":
        return np.array([[c, 0, -sn], [0, 1, 0], [sn, 0, c]])
    return np.array([[c, sn, 0], [-sn, c, 0], [0, 0, 1]])


def dR_axis(axis, s):
    e = AXES[axis]
    return -skew(e) @ R_axis(axis, s)


def table_b1_joint(kind, axis, pitch):
    """A joint exactly as Table B.1 prints it: X = [[R, o^ R], [0, R]], o = 0, s e or h s e."""
    e = AXES[axis]
    rot = kind in ("R", "H")
    G = {"R": np.r_[0, 0, 0, e], "P": np.r_[e, 0, 0, 0], "H": np.r_[pitch * e, e]}[kind]
    do = {"R": 0.0 * e, "P": e, "H": pitch * e}[kind]  # o = s * do

    def jcalc(s):
        R = R_axis(axis, s) if rot else np.eye(3)
        return xform(R, s * do), G

    def jcalcderiv(s):
        R = R_axis(axis, s) if rot else np.eye(3)
        dR = dR_axis(axis, s) if rot else np.zeros((3, 3))
        X = np.zeros((6, 6))
        X[0:3, 0:3] = dR
        X[0:3, 3:6] = skew(do) @ R + skew(s * do) @ dR
        X[3:6, 3:6] = dR
        return X

    return sl.Joint.custom(jcalc, jcalcderiv)


def package_joint(kind, axis, pitch):
    e = AXES[axis]
    return {"R": sl.Joint.revolute(e), "P": sl.Joint.prismatic(e), "H": sl.Joint.helical(e, pitch)}[kind]


def build(joints="table_b1", floating_base=True):
    m = sl.Model(floating_base=floating_base, gravity=(0.0, 0.0, -9.81), name="bos2019_test_system")
    m.set_base_inertia(np.array(INERTIAS[0], dtype=float))
    make = table_b1_joint if joints == "table_b1" else package_joint
    names = []
    for i in range(9):
        kind, axis, pitch = JOINTS[i]
        tax, tang, o = TREE[i]
        R = R_axis(tax, tang)
        parent = None if PARENTS[i] == 0 else names[PARENTS[i] - 1]
        # placement (URDF terms) of ^{lambda|i}X_lambda = blockdiag(R,R)[[1,o^],[0,1]]: (R^T, -o)
        names.append(m.add_body(f"joint{i + 1}", parent, make(kind, axis, pitch),
                                placement=(R.T, -np.asarray(o, dtype=float)),
                                inertia=np.array(INERTIAS[i + 1], dtype=float)))
    return m


def base_rotation():
    """^A R_0 = R^z(1)^T R^y(2)^T R^x(3)^T (Section 5.1)."""
    return R_axis("z", 1.0).T @ R_axis("y", 2.0).T @ R_axis("x", 3.0).T


def state(model):
    R = base_rotation()
    if not model.floating_base:
        return sl.State(model, s=S, r=R_JOINT)
    X0A = xform(R.T, -R.T @ P_BASE)
    return sl.State(model, R=R, p=P_BASE, s=S, v_base=X0A @ V_INERTIAL, r=R_JOINT)
