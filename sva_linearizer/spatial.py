# SPDX-License-Identifier: BSD-3-Clause
"""Spatial algebra in linear-angular order (thesis Sec. 2.5; Pinocchio's order).

Twist v = [v_lin; w], wrench f = [force; torque].
    motion cross (2.33):  v x  = [[w^, v_lin^], [0, w^]]
    force cross  (2.42):  v x* = -(v x)^T = [[w^, 0], [v_lin^, w^]]
    velocity transform (2.36): ^iX_j = [[R, o^ R], [0, R]], R = ^iR_j, o = origin of j seen from i
    wrench transform: _jX^i = (^iX_j)^T
These helpers are for model building, tests and readability; the compiled kernels in
:mod:`sva_linearizer.kernels` spell the same products out elementwise.
"""
from __future__ import annotations

import numpy as np


def skew(a):
    """3x3 matrix a^ with a^ b = a x b."""
    return np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])


def crm(v):
    """Motion cross product matrix v x (thesis 2.33), linear-angular."""
    out = np.zeros((6, 6))
    w = skew(v[3:6])
    out[0:3, 0:3] = w
    out[0:3, 3:6] = skew(v[0:3])
    out[3:6, 3:6] = w
    return out


def crf(v):
    """Force cross product matrix v x* = -(v x)^T (thesis 2.42)."""
    return -crm(v).T


def xform(R, o):
    """Velocity transform [[R, o^ R], [0, R]] (thesis 2.36)."""
    X = np.zeros((6, 6))
    X[0:3, 0:3] = R
    X[0:3, 3:6] = skew(o) @ R
    X[3:6, 3:6] = R
    return X


def placement_to_xform(R, p):
    """^{child}X_{parent} for a child frame at pose (R, p) in the parent frame (URDF <origin>).

    The child sees the parent origin at o = -R^T p, with rotation R^T."""
    R = np.asarray(R, dtype=float)
    p = np.asarray(p, dtype=float)
    return xform(R.T, -R.T @ p)


def spatial_inertia(mass, com, I_com):
    """6x6 spatial inertia about the body origin, linear-angular:
    [[m 1, -m c^], [m c^, I_c - m c^ c^]]."""
    c = skew(np.asarray(com, dtype=float))
    M = np.zeros((6, 6))
    M[0:3, 0:3] = mass * np.eye(3)
    M[0:3, 3:6] = -mass * c
    M[3:6, 0:3] = mass * c
    M[3:6, 3:6] = np.asarray(I_com, dtype=float) - mass * c @ c
    return M


def inertia_params(M):
    """(mass, com, I_com) of a 6x6 linear-angular spatial inertia (inverse of spatial_inertia)."""
    m = M[0, 0]
    if m <= 0.0:
        return 0.0, np.zeros(3), M[3:6, 3:6].copy()
    cx = M[3:6, 0:3] / m
    com = np.array([cx[2, 1], cx[0, 2], cx[1, 0]])
    c = skew(com)
    return m, com, M[3:6, 3:6] + m * c @ c


def rot_axis_angle(axis, angle):
    """Active rotation matrix exp(angle * axis^) (Rodrigues), axis a unit 3-vector."""
    k = skew(axis)
    return np.eye(3) + np.sin(angle) * k + (1.0 - np.cos(angle)) * (k @ k)


def rpy_to_matrix(rpy):
    """URDF roll-pitch-yaw: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def quat_to_matrix(q) -> np.ndarray:
    """Rotation matrix of a quaternion (x, y, z, w) (Pinocchio / ROS order), normalised on the way
    (spatial_ops.quat_to_rot, the one implementation the kernels use too)."""
    from ._arrays import kernel_array
    from .spatial_ops import quat_to_rot

    R = np.empty((3, 3))
    quat_to_rot(kernel_array(q), R)
    return R


def matrix_to_quat(R):
    """Unit quaternion (x, y, z, w), w >= 0, of a rotation matrix."""
    tr = R[0, 0] + R[1, 1] + R[2, 2]
    if tr > 0:
        s = 2.0 * np.sqrt(tr + 1.0)
        q = np.array([(R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s, 0.25 * s])
    else:
        i = int(np.argmax([R[0, 0], R[1, 1], R[2, 2]]))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + R[i, i] - R[j, j] - R[k, k])
        q = np.zeros(4)
        q[i] = 0.25 * s
        q[j] = (R[j, i] + R[i, j]) / s
        q[k] = (R[k, i] + R[i, k]) / s
        q[3] = (R[k, j] - R[j, k]) / s
    return q if q[3] >= 0 else -q


def se3_exp(z):
    """exp(z^) in SE(3) for a twist z = [v_lin; w] (thesis 2.39): returns (R, p)."""
    z = np.asarray(z, dtype=float)
    u, w = z[0:3], z[3:6]
    th = np.linalg.norm(w)
    W = skew(w)
    if th < 1e-8:
        R = np.eye(3) + W + 0.5 * W @ W
        V = np.eye(3) + 0.5 * W + W @ W / 6.0
    else:
        R = np.eye(3) + np.sin(th) / th * W + (1 - np.cos(th)) / th**2 * W @ W
        V = np.eye(3) + (1 - np.cos(th)) / th**2 * W + (th - np.sin(th)) / th**3 * W @ W
    return R, V @ u


def se3_log(R, p):
    """Inverse of se3_exp (for rotations with angle < pi): twist [v_lin; w]."""
    c = np.clip((np.trace(R) - 1.0) / 2.0, -1.0, 1.0)
    th = np.arccos(c)
    if th < 1e-8:
        W = 0.5 * (R - R.T)
        Vinv = np.eye(3) - 0.5 * W + W @ W / 12.0
    else:
        W = th / (2 * np.sin(th)) * (R - R.T)
        Vinv = np.eye(3) - 0.5 * W + (1 / th**2) * (1 - (th * np.sin(th)) / (2 * (1 - np.cos(th)))) * W @ W
    w = np.array([W[2, 1], W[0, 2], W[1, 0]])
    return np.concatenate([Vinv @ p, w])
