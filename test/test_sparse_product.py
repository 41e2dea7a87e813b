# SPDX-License-Identifier: BSD-3-Clause
"""-Minv D over D's branch-induced sparsity (linearization/sparse_product.py): the support that the
product skips outside of holds for the EIDAmb derivatives of real robots and random trees, and the
SIMD tiles give numpy's dense product for every size (the tiles of 6 and 4 rows, the overlapping
last tile and window, the plain loop below 4 columns or for strided arrays); the column windows
cover every column."""
import numpy as np
import pytest

import sva_linearizer as sl
from fd_tools import random_state, random_tree
from sva_linearizer.topology import column_groups, support_rows
from sva_linearizer.linearization.sparse_product import neg_minv_times
from sva_linearizer.robots import load_robot


def _mask(lam, nv):
    off = nv - (len(lam) - 1)
    vidx = np.concatenate([[0], off + np.arange(len(lam) - 1)])
    ptr, rows = support_rows(np.asarray(lam), vidx, nv)
    mask = np.zeros((nv, nv), dtype=bool)
    for j in range(nv):
        mask[rows[ptr[j]:ptr[j + 1]], j] = True
    return ptr, rows, np.hstack([mask, mask])


def _ancestors(lam, k):
    out = []
    while k > 0:
        out.append(k)
        k = lam[k]
    return out


def test_support_is_ancestors_and_subtree():
    """The support by its definition: joint j's column holds the base's rows and the joints k with
    k on j's path to the base or j on k's."""
    lam = [-1, 0, 1, 2, 1, 4, 0, 6, 6]          # two branches at body 1, one at the base
    for floating in (True, False):
        off = 6 if floating else 0
        nv = off + len(lam) - 1
        _, _, mask = _mask(lam, nv)
        for j in range(nv):
            for k in range(nv):
                if j < off or k < off:
                    expect = True
                else:
                    bj, bk = j - off + 1, k - off + 1
                    expect = bj in _ancestors(lam, bk) or bk in _ancestors(lam, bj)
                assert mask[k, j] == expect, (floating, k, j)
        assert mask[off + 2, off + 3] == mask[off + 3, off + 2] == False  # noqa: E712 - siblings


@pytest.mark.parametrize("name", ["panda", "solo12", "g1_29dof", "icub", "talos_full"])
def test_D_is_zero_outside_its_support_on_real_robots(name):
    model = load_robot(name)
    data = sl.Data(model)
    rng = np.random.default_rng(3)
    for _ in range(3):
        st = random_state(model, rng)
        lin = sl.linearize(model, st, rng.normal(size=model.nj), data=data)
        _, _, mask = _mask(data.lam, model.nv)
        assert np.all(lin.D[~mask] == 0.0)
        if name != "panda":
            assert (~mask).sum() > 0.3 * mask.size     # branched: a third or more is skipped
            assert np.count_nonzero(lin.D[mask]) > 0.75 * mask.sum()   # the support is not loose


@pytest.mark.parametrize("seed", range(6))
def test_D_is_zero_outside_its_support_on_random_trees(seed):
    rng = np.random.default_rng(seed)
    for floating in (True, False):
        model = random_tree(rng, n=5 + 3 * seed, floating_base=floating)
        data = sl.Data(model)
        st = random_state(model, rng)
        lin = sl.linearize(model, st, rng.normal(size=model.nj) * 5, data=data)
        _, _, mask = _mask(data.lam, model.nv)
        assert np.all(lin.D[~mask] == 0.0)


def _random_parents(rng, n):
    return [-1] + [int(rng.integers(0, k)) for k in range(1, n + 1)]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17, 29, 44])
def test_tiles_equal_the_dense_product(n):
    """Every entry written (the output starts as NaN), equal to -Minv X by numpy to rounding, for
    a random symmetric Minv and X random on its support, and to the sum over its own column's
    support; the plain loop (X and out strided views) gives the tiles' result bit for bit."""
    rng = np.random.default_rng(n)
    for floating in (False, True):
        lam = _random_parents(rng, n)
        nv = n + (6 if floating else 0)
        ptr, rows, mask = _mask(lam, nv)
        R = rng.normal(size=(nv, nv))
        Minv = R @ R.T + nv * np.eye(nv)
        X = np.where(mask, rng.normal(size=(nv, 2 * nv)) * 10.0 ** rng.integers(-3, 4, size=(nv, 2 * nv)), 0.0)
        ref = -Minv @ X
        windows = column_groups(ptr, rows)
        out = np.full((nv, 2 * nv), np.nan)
        neg_minv_times(Minv, X, out, *windows)
        assert np.abs(out - ref).max() <= 1e-14 * np.abs(ref).max()
        # each entry is the sum over its own column's support, in ascending order: the rows a
        # window adds hold exact zeros of X and change no bit
        for j in range(0, 2 * nv, max(1, nv // 3)):
            ks = rows[ptr[j % nv]:ptr[j % nv + 1]]
            for i in range(0, nv, max(1, nv // 4)):
                acc = 0.0
                for k in ks:
                    acc += X[k, j] * Minv[k, i]
                assert abs(out[i, j] + acc) <= len(ks) * 2.3e-16 * (np.abs(X[ks, j]) @ np.abs(Minv[ks, i]))
        Xs = np.zeros((nv, 4 * nv))[:, ::2]
        Xs[:] = X
        big = np.full((nv, 4 * nv), np.nan)
        neg_minv_times(Minv, Xs, big[:, ::2], *windows)      # strided: the plain loop
        assert np.array_equal(big[:, ::2], out)
        assert np.all(np.isnan(big[:, 1::2]))                # nothing written between
        rows_only = np.full((2 * nv, 2 * nv), np.nan)[nv:]   # A[nv:], as the pipeline passes it
        neg_minv_times(Minv, X, rows_only, *windows)
        assert np.array_equal(rows_only, out)


@pytest.mark.parametrize("name", ["ur5", "panda", "solo12", "g1_29dof", "icub", "talos_full"])
def test_column_windows_cover_every_column_with_their_supports(name):
    """Every column lies in a window of 4 adjacent columns (all of them below 4) whose rows are
    exactly the union of its columns' supports, ascending; the windows sum over no more rows than
    windows at multiples of 4 would."""
    model = load_robot(name)
    data = sl.Data(model)
    nv = model.nv
    ptr, rows, _ = _mask(data.lam, nv)
    start, gptr, grows = column_groups(ptr, rows)
    assert np.array_equal(start, data.grp_start) and np.array_equal(gptr, data.grp_ptr)
    assert np.array_equal(grows, data.grp_rows)
    covered = np.zeros(nv, dtype=bool)
    width = min(4, nv)
    for g, j0 in enumerate(start):
        assert 0 <= j0 <= nv - width
        covered[j0:j0 + width] = True
        union = set()
        for j in range(j0, j0 + width):
            union |= set(rows[ptr[j]:ptr[j + 1]].tolist())
        assert grows[gptr[g]:gptr[g + 1]].tolist() == sorted(union)
    assert covered.all()
    aligned = 0
    for j0 in range(0, nv, 4):
        j0 = min(j0, nv - width)
        aligned += len(set().union(*(set(rows[ptr[j]:ptr[j + 1]].tolist()) for j in range(j0, j0 + width))))
    assert gptr[-1] <= aligned
