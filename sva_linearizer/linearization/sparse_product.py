"""-Minv X over X's branch-induced sparsity: the lower block of A, -Minv D (3.53), in SIMD tiles.

D = [D_q | D_nu] (the EIDAmb derivatives, nv x 2nv) has the tree's branch-induced sparsity
(Featherstone, RBDA chapter 6, for the mass matrix; Singh et al., IDSVA, for the derivatives):
joint j's columns of D_q and D_nu can be nonzero only in the rows of the base, of j's ancestors,
of j itself and of j's subtree. The generalized force of joint k does not depend on the position
or the velocity of a joint on another branch: neither one moves the other's bodies. The base's
columns are dense. The contacts' term E (linearization/contacts.py) has the same pattern: a
world-aligned force on body c turns with the joints of c's support, and the force reaches only
their generalized forces.

`data.support_rows` lists each column's rows (base, ancestors, subtree: 43-53% of nv^2 on the
humanoids, 67% on solo12), once per model. `neg_minv_times` sums over these rows only. For each
column pair (j, j + nv) and each tile of 12 rows of the result (then 8 and 4 for the rest), it
keeps 6 accumulators of 4 doubles in registers and loads Minv's row k (Minv is symmetric: column
k) as vectors of 4 doubles.
Numba has no vector type, so a tile is an intrinsic that emits LLVM vectors itself (`_tile_typer`).
LLVM's SLP vectorizer can find such vectors, but numba leaves it off by default, and turning it on
for the whole pipeline made the kernels slower (README, session 7).

Each entry is one sum over the support's rows in ascending order, with fused multiply-adds where
the compiler contracts them (FASTMATH). A batch and a single call give the same result; BLAS's
dense product gives it to rounding (6e-15 of the largest entry at most, measured on 9 robots
with and without contacts).
"""
from __future__ import annotations

from .._jit import HAVE_NUMBA, njit


def _neg_tile_py(width):
    def neg_tile(Minv, X, out, j, i0, p0, p1, rows):
        """out[i0:i0+width, j] = -sum_p X[rows[p], j] Minv[rows[p], i0:i0+width], and the same
        for column j + nv (the plain-Python form of the tile intrinsics; Minv symmetric)."""
        _neg_tile_rows(Minv, X, out, j, i0, i0 + width, p0, p1, rows)
    return neg_tile


@njit(inline="always")
def _neg_tile_rows(Minv, X, out, j, i0, i1, p0, p1, rows):
    """Rows i0..i1-1 of the tile (the plain form; robots with fewer than 4 joints)."""
    nv = Minv.shape[0]
    for w in range(i1 - i0):
        a = 0.0
        b = 0.0
        for p in range(p0, p1):
            k = rows[p]
            a += X[k, j] * Minv[k, i0 + w]
            b += X[k, j + nv] * Minv[k, i0 + w]
        out[i0 + w, j] = -a
        out[i0 + w, j + nv] = -b


if HAVE_NUMBA:
    import llvmlite.ir as _ir
    from numba.core import cgutils as _cgutils
    from numba.core import types as _types
    from numba.extending import intrinsic as _intrinsic

    _V4 = _ir.VectorType(_ir.DoubleType(), 4)
    _I32 = _ir.IntType(32)

    def _tile_typer(h, Minv, X, out, rows):
        """The typing and code of the tile `_neg_tile_py(4 h)` as an intrinsic: the 4 h rows as h
        LLVM vectors of 4 doubles (2 h accumulators with the two columns). Minv must be
        C-contiguous (its row k is read as vectors); X and out any 2D float64 arrays, rows an int64
        vector. The caller guarantees i0 + 4 h <= nv and that the indices are in range."""
        arrays = (Minv, X, out)
        if not (all(isinstance(a, _types.Array) and a.ndim == 2 and a.dtype == _types.float64
                    for a in arrays) and Minv.layout == "C" and isinstance(rows, _types.Array)
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

            def splat(x):
                v = builder.insert_element(_ir.Constant(_V4, _ir.Undefined), x, _ir.Constant(_I32, 0))
                return builder.shuffle_vector(v, v, _ir.Constant(_ir.VectorType(_I32, 4), [0] * 4))

            zero = _ir.Constant(_V4, [0.0] * 4)
            acc = [_cgutils.alloca_once_value(builder, zero) for _ in range(2 * h)]   # registers (mem2reg)
            step = _ir.Constant(p0v.type, 1)
            with _cgutils.for_range_slice(builder, p0v, p1v, step, inc=True) as (p, _):
                k = builder.load(at(rty, R, [p]))
                xq = splat(builder.load(at(xty, Xa, [k, jq])))
                xv = splat(builder.load(at(xty, Xa, [k, jv])))
                mk = []
                for t in range(h):                                   # Minv[k, i0+4t : i0+4t+4]
                    ptr = at(mty, M, [k, builder.add(i0v, _ir.Constant(intp, 4 * t))])
                    mk.append(builder.load(builder.bitcast(ptr, _V4.as_pointer()), align=8))
                for a in range(2 * h):                               # acc[a]: column a // h, vector a % h
                    x, m = (xq if a < h else xv), mk[a % h]
                    prod = builder.fmul(x, m, flags=("contract",))
                    builder.store(builder.fadd(builder.load(acc[a]), prod, flags=("contract",)), acc[a])
            for a in range(2 * h):
                v = builder.load(acc[a])
                col = jq if a < h else jv
                for w in range(4):
                    x = builder.fneg(builder.extract_element(v, _ir.Constant(_I32, w)))
                    row = builder.add(i0v, _ir.Constant(intp, 4 * (a % h) + w))
                    builder.store(x, at(oty, O, [row, col]))
            return context.get_dummy_value()

        return sig, codegen

    @_intrinsic
    def neg_tile4(typingctx, Minv, X, out, j, i0, p0, p1, rows):
        return _tile_typer(1, Minv, X, out, rows)

    @_intrinsic
    def neg_tile8(typingctx, Minv, X, out, j, i0, p0, p1, rows):
        return _tile_typer(2, Minv, X, out, rows)

    @_intrinsic
    def neg_tile12(typingctx, Minv, X, out, j, i0, p0, p1, rows):
        return _tile_typer(3, Minv, X, out, rows)
else:
    neg_tile4, neg_tile8, neg_tile12 = _neg_tile_py(4), _neg_tile_py(8), _neg_tile_py(12)


@njit
def neg_minv_times(Minv, X, out, ptr, rows):
    """out = -Minv X for X (nv, 2nv) whose columns j and j + nv are zero outside rows
    rows[ptr[j]:ptr[j + 1]] (data.support_rows); Minv (nv, nv) symmetric. Every entry of out is
    written: by tiles of 12 rows, then 8 and 4, and a last tile of 4 that overlaps the one
    before. (Not inlined into the pipeline: inlined, numba's copy of it ran 2x slower.)"""
    nv = Minv.shape[0]
    if (X.shape[0] != nv or X.shape[1] != 2 * nv or out.shape[0] != nv or out.shape[1] != 2 * nv
            or ptr.shape[0] != nv + 1):
        raise ValueError("neg_minv_times: X, out or ptr does not match Minv's size")   # the tiles index unchecked
    for j in range(nv):
        p0, p1 = ptr[j], ptr[j + 1]
        i0 = 0
        while nv - i0 >= 12:
            neg_tile12(Minv, X, out, j, i0, p0, p1, rows)
            i0 += 12
        if nv - i0 >= 8:
            neg_tile8(Minv, X, out, j, i0, p0, p1, rows)
            i0 += 8
        if nv - i0 >= 4:
            neg_tile4(Minv, X, out, j, i0, p0, p1, rows)
            i0 += 4
        if i0 < nv:
            if nv >= 4:
                neg_tile4(Minv, X, out, j, nv - 4, p0, p1, rows)
            else:                     # (a robot with fewer than 4 joints)
                _neg_tile_rows(Minv, X, out, j, i0, nv, p0, p1, rows)
