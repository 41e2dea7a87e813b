# SPDX-License-Identifier: BSD-3-Clause
"""Per-model preprocessing of the kinematic tree: the tables a Data stores beside the model's
arrays, computed once when the Data is built (plain Python, no kernel).

    axis_codes       sax: per joint, the coordinate axis its motion subspace Gamma is (+-e_i), or -1
    axis_structure   xax, xw: per joint, the coordinate axis its tree transform rotates about (with
                     its constant offset w), or -1
    rigid_form       whether a 6x6 inertia is of rigid-body form [[m 1, -h^], [h^, C]]
    rigid_subtrees   rig: per body, 1 when its whole subtree has rigid-body-form inertias
    subtree_ranges   sub_ptr, sub_rng: each subtree's joints as index ranges
    support_rows     each column of D's possibly nonzero rows (the tree's branch-induced sparsity)
    column_groups    windows of COLUMN_WINDOW columns of D and the union of their rows
"""
from __future__ import annotations

import numpy as np

from .joints import CUSTOM, HELICAL, PRISMATIC, REVOLUTE


def axis_codes(jtype: np.ndarray, jaxis: np.ndarray, jpitch: np.ndarray) -> np.ndarray:
    """Per joint: i in 0..5 when its Gamma (= sigma) is +-e_i for every s (a built-in revolute or
    prismatic joint, or a helical one of pitch 0, about +-x, +-y or +-z exactly), else -1 (custom
    joints, general axes). The kernels then read a column instead of a product (spatial_ops)."""
    out = np.full(len(jtype), -1, dtype=np.int64)
    for j, t in enumerate(jtype):
        if t == CUSTOM:
            continue
        e = np.asarray(jaxis[j], dtype=float)
        pitch = jpitch[j] if t == HELICAL else 0.0
        g = np.concatenate([e, np.zeros(3)]) if t == PRISMATIC else np.concatenate([pitch * e, e])
        nz = np.flatnonzero(g)
        if len(nz) == 1 and abs(g[nz[0]]) == 1.0:
            out[j] = nz[0]
    return out


def axis_structure(jtype: np.ndarray, sax: np.ndarray, Xtree: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Per joint (xax, xw): xax = a in 0..2 when ^kX_lam = X_J Xtree = [[E, E w^], [0, E]] with E a
    rotation about e_a and w constant, for every s: a revolute joint about +-e_a (axis code 3 + a)
    whose placement has no rotation (Xtree = [[1, w^], [0, 1]] exactly); else -1. The kernels then
    apply X and X^T with the rotation's 2x2 block and a cross product with w (spatial_ops, *_axis),
    about half the arithmetic of the 6x6 (URDF joints mostly are of this kind)."""
    n = len(jtype)
    xax = np.full(n, -1, dtype=np.int64)
    xw = np.zeros((n, 3))
    eye = np.eye(3)
    for j in range(n):
        if jtype[j] != REVOLUTE or not 3 <= sax[j] <= 5:
            continue
        T = Xtree[j]
        w = np.array([T[2, 4], T[0, 5], T[1, 3]])
        F = np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])
        if (np.array_equal(T[0:3, 0:3], eye) and np.array_equal(T[3:6, 3:6], eye)
                and not np.any(T[3:6, 0:3]) and np.array_equal(T[0:3, 3:6], F)):
            xax[j] = sax[j] - 3
            xw[j] = w
    return xax, xw


def rigid_form(M: np.ndarray) -> bool:
    """Whether a 6x6 linear-angular inertia is exactly [[m 1, -h^], [h^, C]] (C symmetric): every
    body built from a mass, a centre of mass and a rotational inertia (URDF, sl.Inertia; merged
    fixed links add such matrices and keep the form). A 6x6 given as a raw matrix may not be."""
    m = M[0, 0]
    L = M[3:6, 0:3]
    return bool(np.array_equal(M, M.T) and np.array_equal(M[0:3, 0:3], m * np.eye(3))
                and np.array_equal(L, -L.T))


def rigid_subtrees(lam: np.ndarray, inertia: np.ndarray) -> np.ndarray:
    """rig[k] = 1 when every body of subtree(k) has a rigid_form inertia (lam[k] < k)."""
    rig = np.array([rigid_form(M) for M in inertia], dtype=np.int64)
    for k in range(len(lam) - 1, 0, -1):
        if not rig[k]:
            rig[lam[k]] = 0
    return rig


def subtree_ranges(lam):
    """subtree(k)'s joint indices (k's own included) as [a, b) ranges: (sub_ptr, sub_rng)."""
    nb = lam.shape[0]
    children = [[] for _ in range(nb)]
    for k in range(1, nb):
        children[lam[k]].append(k)
    sub_ptr, sub_rng = [0], []
    for k in range(nb):
        stack, members = [k], []
        while stack:
            b_ = stack.pop()
            if b_ > 0:
                members.append(b_ - 1)
            stack.extend(children[b_])
        for jj in sorted(members):
            if sub_rng and len(sub_rng) > sub_ptr[-1] and sub_rng[-1][1] == jj:
                sub_rng[-1][1] = jj + 1
            else:
                sub_rng.append([jj, jj + 1])
        sub_ptr.append(len(sub_rng))
    return sub_ptr, sub_rng


def support_rows(lam: np.ndarray, vidx: np.ndarray, nv: int) -> tuple[np.ndarray, np.ndarray]:
    """(ptr, rows): column j of D_q and of D_nu (j < nv) can be nonzero only in rows
    rows[ptr[j]:ptr[j + 1]] (ascending): every row for a base column; for joint k's column the
    base's rows, k's ancestors, k and k's subtree (the tree's branch-induced sparsity, which
    linearization/sparse_product.py's -Minv D sums over). lam: parent body (lam[0] = -1); vidx[k]:
    body k's index in nu (body 0: the base block)."""
    nb = lam.shape[0]
    off = nv - (nb - 1)
    anc = [[] for _ in range(nb)]           # the joints on the path base -> k, k included
    for k in range(1, nb):
        anc[k] = anc[lam[k]] + [int(vidx[k])]
    desc = [set() for _ in range(nb)]        # the joints of subtree(k), k included
    for k in range(nb - 1, 0, -1):           # lam[k] < k: children before parents
        desc[k].add(int(vidx[k]))
        if lam[k] > 0:
            desc[lam[k]] |= desc[k]
    cols = [list(range(nv)) for _ in range(off)]
    for k in range(1, nb):
        cols.append(sorted(set(range(off)) | set(anc[k]) | desc[k]))
    ptr = np.zeros(nv + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(c) for c in cols])
    rows = np.array([r for c in cols for r in c], dtype=np.int64)
    return ptr, rows


COLUMN_WINDOW = 4   # columns of D per window of -Minv D: one vector of 4 doubles (sparse_product)


def column_groups(ptr: np.ndarray, rows: np.ndarray,
                  width: int = COLUMN_WINDOW) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, gptr, grows): windows of `width` adjacent columns of D that cover all nv of them
    (nv = len(ptr) - 1; one window of all nv when nv < width), window g being columns
    start[g]..start[g]+width-1 with the rows grows[gptr[g]:gptr[g+1]] (ascending): the union of
    their supports (ptr, rows: support_rows). Windows may overlap; they are chosen, by dynamic
    programming over the first column not yet covered, to make the sum of their row counts least
    (the work of linearization/sparse_product.py's product: about a fifth more than the supports'
    own on the humanoids, against two fifths for windows at multiples of 4)."""
    nv = len(ptr) - 1
    sup = [rows[ptr[j]:ptr[j + 1]] for j in range(nv)]
    # the rows of the window starting at each column that can start one (below width: all nv)
    union = [np.unique(np.concatenate(sup[s:s + width])) for s in range(max(nv - width, 0) + 1)] if nv else []
    if nv <= width:
        starts = [0] if nv else []
    else:
        cost = [len(u) for u in union]
        best = [0] + [None] * nv            # best[c]: least cost covering columns < c; how
        how = [None] * (nv + 1)
        for c in range(nv):
            if best[c] is None:
                continue
            for s in range(max(0, c - width + 1), min(c, nv - width) + 1):
                e, total = s + width, best[c] + cost[s]
                if best[e] is None or total < best[e]:
                    best[e], how[e] = total, (c, s)
        starts, e = [], nv
        while e > 0:
            e, s = how[e]
            starts.append(s)
        starts.reverse()
    unions = [union[s] for s in starts]
    gptr = np.zeros(len(starts) + 1, dtype=np.int64)
    gptr[1:] = np.cumsum([len(u) for u in unions])
    grows = np.concatenate(unions).astype(np.int64) if unions else np.zeros(0, dtype=np.int64)
    return np.array(starts, dtype=np.int64), gptr, grows
