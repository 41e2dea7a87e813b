# SPDX-License-Identifier: BSD-3-Clause
"""-Minv X over X's branch-induced sparsity: the lower block of A, -Minv D (3.53), in SIMD tiles.

D = [D_q | D_nu] (the EIDAmb derivatives, nv x 2nv) has the tree's branch-induced sparsity
(Featherstone, RBDA chapter 6, for the mass matrix; Singh et al., IDSVA, for the derivatives):
joint j's columns of D_q and D_nu can be nonzero only in the rows of the base, of j's ancestors,
of j itself and of j's subtree. The generalized force of joint k does not depend on the position
or the velocity of a joint on another branch: neither one moves the other's bodies. The base's
columns are dense. The contacts' term E (linearization/with_contacts.py) has the same pattern: a
world-aligned force on body c turns with the joints of c's support, and the force reaches only
their generalized forces.

`topology.support_rows` lists each column's rows (base, ancestors, subtree: 43-53% of nv^2 on the
humanoids, 67% on solo12). `topology.column_groups` covers the columns with windows of 4 adjacent
ones (a joint's neighbours in the model's order are mostly on its own limb, so their supports
nearly agree), chosen once per model to make the sum of the windows' row sets (the union of their
4 supports) least. `neg_minv_times` sums over a window's rows only. For each window (columns
j0..j0+3 of D_q and the same of D_nu) and each tile of 6 rows of the result (4 when nv < 6), it
keeps 12 accumulators of 4 doubles in registers: row i's entries in those 8 columns. Per summed
row k it loads D's rows k at j0 and nv + j0 as vectors of 4 doubles and multiplies them by
Minv[k, i] (Minv is symmetric: Minv[i, k]) for the tile's 6 rows; the tile's results are written
as vectors, along A's rows.
Numba has no vector type, so a tile is an intrinsic that emits LLVM vectors itself (`_tile_typer`).
LLVM's SLP vectorizer can find such vectors, but numba leaves it off by default, and turning it on
for the whole pipeline made the kernels slower (docs/performance.md, "What does not pay").

Each entry is one sum over its window's rows in ascending order, with fused multiply-adds where
the compiler contracts them (FASTMATH). The rows a window adds to a column's own support hold
exact zeros of D, which add exactly nothing (x + 0 * m = x for finite m), so every entry is the
same sum, bit for bit, as over its column's own support. A batch and a single call give the same
result; BLAS's dense product gives it to rounding (6e-15 of the largest entry at most, measured
on 9 robots with and without contacts).
"""
from __future__ import annotations

from .._jit import HAVE_NUMBA, njit
from .._plain import set_plain_form
from ..topology import COLUMN_WINDOW as WIDTH    # columns of D_q (and of D_nu) per window


@njit(inline="always")
def _neg_block(Minv, X, out, j0, j1, i0, i1, p0, p1, rows):
    """out[i, j] = -sum_p X[rows[p], j] Minv[rows[p], i] for rows i0..i1-1 and the columns
    j0..j1-1 and nv + j0..nv + j1-1 (the plain form of the tiles: no numba, strided X or out,
    nv < 4)."""
    nv = Minv.shape[0]
    for i in range(i0, i1):
        for j in range(j0, j1):
            a = 0.0
            b = 0.0
            for p in range(p0, p1):
                k = rows[p]
                a += X[k, j] * Minv[k, i]
                b += X[k, j + nv] * Minv[k, i]
            out[i, j] = -a
            out[i, j + nv] = -b


@njit(inline="always")
def _neg_pair(Minv, X, out, j0, i, p0, p1, rows):
    """Rows i and i + 1 of window j0 (exactly WIDTH = 4 columns of each half) with their 16 sums in
    registers: the tiles' arithmetic, for arrays of Lanes (each element a vector of states), where
    _neg_block would reload Minv's and X's vectors for every entry."""
    nv = Minv.shape[0]
    j1, v0 = j0 + 1, j0 + nv
    j2, j3, v1, v2, v3 = j0 + 2, j0 + 3, v0 + 1, v0 + 2, v0 + 3
    a0 = a1 = a2 = a3 = b0 = b1 = b2 = b3 = 0.0 * Minv[0, 0]
    c0 = c1 = c2 = c3 = e0 = e1 = e2 = e3 = 0.0 * Minv[0, 0]
    for p in range(p0, p1):
        k = rows[p]
        m0, m1 = Minv[k, i], Minv[k, i + 1]
        x0, x1, x2, x3 = X[k, j0], X[k, j1], X[k, j2], X[k, j3]
        y0, y1, y2, y3 = X[k, v0], X[k, v1], X[k, v2], X[k, v3]
        a0 += x0 * m0
        a1 += x1 * m0
        a2 += x2 * m0
        a3 += x3 * m0
        b0 += y0 * m0
        b1 += y1 * m0
        b2 += y2 * m0
        b3 += y3 * m0
        c0 += x0 * m1
        c1 += x1 * m1
        c2 += x2 * m1
        c3 += x3 * m1
        e0 += y0 * m1
        e1 += y1 * m1
        e2 += y2 * m1
        e3 += y3 * m1
    out[i, j0], out[i, j1], out[i, j2], out[i, j3] = -a0, -a1, -a2, -a3
    out[i, v0], out[i, v1], out[i, v2], out[i, v3] = -b0, -b1, -b2, -b3
    out[i + 1, j0], out[i + 1, j1], out[i + 1, j2], out[i + 1, j3] = -c0, -c1, -c2, -c3
    out[i + 1, v0], out[i + 1, v1], out[i + 1, v2], out[i + 1, v3] = -e0, -e1, -e2, -e3


def _neg_tile_py(height):
    def neg_tile(Minv, X, out, j0, i0, p0, p1, rows):
        """Rows i0..i0+height-1 of window j0 (the plain-Python form of the tile intrinsics)."""
        _neg_block(Minv, X, out, j0, j0 + WIDTH, i0, i0 + height, p0, p1, rows)
    return neg_tile


if HAVE_NUMBA:
    import llvmlite.ir as _ir
    from numba.core import cgutils as _cgutils
    from numba.core import types as _types
    from numba.extending import intrinsic as _intrinsic

    _V4 = _ir.VectorType(_ir.DoubleType(), WIDTH)
    _I32 = _ir.IntType(32)

    def _tile_typer(height, Minv, X, out, rows):
        """The typing and code of the tile `_neg_tile_py(height)` as an intrinsic: row i0 + r of
        the result in columns j0..j0+3 and nv+j0..nv+j0+3 as two LLVM vectors of 4 doubles (2
        height accumulators). X's and out's rows are read and written as vectors: the caller
        guarantees that their columns are contiguous (strides[1] == 8), that i0 + height <= nv,
        j0 + 4 <= nv and that the indices are in range."""
        arrays = (Minv, X, out)
        if not (all(isinstance(a, _types.Array) and a.ndim == 2 and a.dtype == _types.float64
                    for a in arrays) and isinstance(rows, _types.Array)
                and rows.ndim == 1 and rows.dtype == _types.int64):
            return None
        sig = _types.void(Minv, X, out, _types.intp, _types.intp, _types.intp, _types.intp, rows)

        def codegen(context, builder, sig, args):
            mty, xty, oty, _, _, _, _, rty = sig.args
            M = context.make_array(mty)(context, builder, args[0])
            Xa = context.make_array(xty)(context, builder, args[1])
            O = context.make_array(oty)(context, builder, args[2])
            R = context.make_array(rty)(context, builder, args[7])
            jq, i0v, p0v, p1v = args[3], args[4], args[5], args[6]
            intp = context.get_value_type(_types.intp)
            nv = _cgutils.unpack_tuple(builder, M.shape, 2)[0]
            jv = builder.add(jq, nv)

            def at(aty, a, inds):
                return _cgutils.get_item_pointer(context, builder, aty, a, inds)

            def vec(ptr):
                return builder.bitcast(ptr, _V4.as_pointer())

            def splat(x):
                v = builder.insert_element(_ir.Constant(_V4, _ir.Undefined), x, _ir.Constant(_I32, 0))
                return builder.shuffle_vector(v, v, _ir.Constant(_ir.VectorType(_I32, WIDTH), [0] * WIDTH))

            zero = _ir.Constant(_V4, [0.0] * WIDTH)
            acc = [_cgutils.alloca_once_value(builder, zero) for _ in range(2 * height)]   # registers
            step = _ir.Constant(p0v.type, 1)
            with _cgutils.for_range_slice(builder, p0v, p1v, step, inc=True) as (p, _):
                k = builder.load(at(rty, R, [p]))
                xq = builder.load(vec(at(xty, Xa, [k, jq])), align=8)        # X[k, j0:j0+4]
                xv = builder.load(vec(at(xty, Xa, [k, jv])), align=8)        # X[k, nv+j0:nv+j0+4]
                for r in range(height):                                      # Minv[k, i0 + r]
                    m = splat(builder.load(at(mty, M, [k, builder.add(i0v, _ir.Constant(intp, r))])))
                    for a, x in ((2 * r, xq), (2 * r + 1, xv)):
                        prod = builder.fmul(x, m, flags=("contract",))
                        builder.store(builder.fadd(builder.load(acc[a]), prod, flags=("contract",)), acc[a])
            for r in range(height):
                row = builder.add(i0v, _ir.Constant(intp, r))
                for a, col in ((2 * r, jq), (2 * r + 1, jv)):
                    builder.store(builder.fneg(builder.load(acc[a])), vec(at(oty, O, [row, col])), align=8)
            return context.get_dummy_value()

        return sig, codegen

    @_intrinsic
    def neg_tile4(typingctx, Minv, X, out, j0, i0, p0, p1, rows):
        return _tile_typer(4, Minv, X, out, rows)

    @_intrinsic
    def neg_tile6(typingctx, Minv, X, out, j0, i0, p0, p1, rows):
        return _tile_typer(6, Minv, X, out, rows)

    set_plain_form(neg_tile4, _neg_tile_py(4))
    set_plain_form(neg_tile6, _neg_tile_py(6))
    from numba.extending import overload as _overload

    @njit(inline="always")
    def _lane_tile(Minv, X, out, j0, i0, height, p0, p1, rows):
        for i in range(i0, i0 + height, 2):
            _neg_pair(Minv, X, out, j0, i, p0, p1, rows)

    def _tile_or_block(height, tile):
        """The tile intrinsic for float64 arrays; for arrays of Lanes (_lanes.py), where every
        element is already a vector of states, the same rows by pairs (_neg_pair)."""
        plain = _neg_tile_py(height)

        def tile_any(Minv, X, out, j0, i0, p0, p1, rows):
            plain(Minv, X, out, j0, i0, p0, p1, rows)

        @_overload(tile_any)
        def _typed(Minv, X, out, j0, i0, p0, p1, rows):
            if Minv.dtype == _types.float64:
                return lambda Minv, X, out, j0, i0, p0, p1, rows: tile(Minv, X, out, j0, i0, p0, p1, rows)
            return lambda Minv, X, out, j0, i0, p0, p1, rows: _lane_tile(Minv, X, out, j0, i0, height, p0, p1, rows)
        return tile_any

    tile4, tile6 = _tile_or_block(4, neg_tile4), _tile_or_block(6, neg_tile6)
else:
    tile4, tile6 = _neg_tile_py(4), _neg_tile_py(6)


@njit
def neg_minv_times(Minv, X, out, gstart, gptr, grows):
    """out = -Minv X for X (nv, 2nv) whose columns j and j + nv are zero outside the rows of
    topology.support_rows; Minv (nv, nv) symmetric. Window g covers columns gstart[g]..gstart[g]+3
    (all nv when nv < 4) and sums over rows grows[gptr[g]:gptr[g+1]] (topology.column_groups).
    Every entry of out is written: by tiles of 6 rows (4 when nv < 6), the last one overlapping
    the one before. X and out with columns that are not contiguous take the plain loop. (Not
    inlined into the pipeline: inlined, numba's copy of it ran 2x slower.)"""
    nv = Minv.shape[0]
    ng = gstart.shape[0]
    if (X.shape[0] != nv or X.shape[1] != 2 * nv or out.shape[0] != nv or out.shape[1] != 2 * nv
            or gptr.shape[0] != ng + 1 or Minv.shape[1] != nv):
        raise ValueError("neg_minv_times: X, out or the windows do not match Minv's size")   # the tiles index unchecked
    vectors = nv >= WIDTH and X.strides[1] == X.itemsize and out.strides[1] == out.itemsize
    for g in range(ng):
        j0, p0, p1 = gstart[g], gptr[g], gptr[g + 1]
        if not vectors:
            _neg_block(Minv, X, out, j0, min(j0 + WIDTH, nv), 0, nv, p0, p1, grows)
        elif nv >= 6:
            for i0 in range(0, nv, 6):
                tile6(Minv, X, out, j0, min(i0, nv - 6), p0, p1, grows)
        else:
            for i0 in range(0, nv, 4):
                tile4(Minv, X, out, j0, min(i0, nv - 4), p0, p1, grows)
