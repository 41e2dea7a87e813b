# SPDX-License-Identifier: BSD-3-Clause
"""Lanes: L states computed by the instructions of one, the kernels' own source compiled on a vector
number type (linearize_batch's lockstep groups, linearization/batch.py).

Every state of a batch shares the model, so every branch of the kernels (joint type, axis, tree)
goes the same way for all of them. `Lanes(L)` is a numba type that holds one double for each of L
states as one LLVM vector (<L x double>: 8 lanes fill an AVX-512 register, 4 an AVX2 one). Its
arithmetic (+, -, *, /, unary -, with floats and ints broadcast), sqrt, abs, min, max, sin and cos
act lane by lane, and an array whose elements are Lanes is an array of L interleaved states
(`as_lanes`: a float64 array of shape (..., L) seen as (...) Lanes). A kernel called on such arrays
(a workspace buffer carved by layout.views, the state vectors, the outputs) is compiled again by
numba for that type: the same source, now computing L states in lockstep, with the compiler
emitting one vector instruction where the one-state code has a scalar one. The one-state kernels
are untouched by it.

A comparison of Lanes gives a `LaneMask` (one flag per lane) that has no truth value: a branch on
data cannot silently take one lane's way for all of them. The few kernel branches on data say
what they mean with these helpers, which are the identity on a plain bool (the one-state code is
the same as without them):

    any_lane(c)      some lane's c holds (for a scalar: c)
    all_lanes(c)     every lane's c holds
    where(c, a, b)   a where c holds, else b, lane by lane (both evaluated; for a scalar: a if c else b)

Two more helpers are the plain operation on numbers: `matmul(a, b, out)` (np.dot, BLAS; a loop on
Lanes) and `zero_like(x)` (0.0 in x's type: a variable that becomes Lanes starts as Lanes).

A kernel that returns a failure status on any_lane(...) fails the whole group; the batch then
computes that group's states one at a time (`redo_failed_groups`: the one-state kernels give each
its own status).

Into and out of the lanes: `interleave` (a group's states, taken by their positions in an index),
`copy_out` (a matrix of every lane to its state's place: L x L blocks transposed in registers) and
`copy_rows` (rows to the rows of a fixed layout); `LaneExtras` names what a lane kernel writes
beside A and B.
"""
from __future__ import annotations

import numpy as np

from ._jit import HAVE_NUMBA, env, njit
from ._intrinsics import flat_view


def any_lane(c):
    """Some lane of the condition c holds (c itself for a plain bool)."""
    return c


def all_lanes(c):
    """Every lane of the condition c holds (c itself for a plain bool)."""
    return c


def where(c, a, b):
    """a where c holds, else b (lane by lane on Lanes; both a and b are evaluated)."""
    return a if c else b


def zero_like(x):
    """0.0 of x's type (Lanes of zeros for Lanes): a variable that becomes Lanes later starts so."""
    return 0.0


def matmul(a, b, out):
    """out = a b for 2-D arrays: numpy's np.dot(a, b, out) (BLAS) on numbers; on Lanes a loop, each
    row of out summed over k in order."""
    import numpy as np

    np.dot(a, b, out)


_HOST_WIDTH = None     # the host CPU's width, asked of LLVM once (~0.3 ms)


def lane_width() -> int:
    """L for this machine: 8 doubles with AVX-512, 4 with AVX or AVX2, else 2 (SSE2); 1 without
    numba. SVA_LINEARIZER_LANES overrides it (2, 4 or 8)."""
    global _HOST_WIDTH
    setting = env("SVA_LINEARIZER_LANES")
    if setting and setting.strip():
        setting = setting.strip()
        if setting not in ("2", "4", "8"):
            raise ValueError(f"SVA_LINEARIZER_LANES must be 2, 4 or 8, got {setting!r}")
        return int(setting)
    if not HAVE_NUMBA:
        return 1
    if _HOST_WIDTH is None:
        import llvmlite.binding as llvm

        features = llvm.get_host_cpu_features()
        _HOST_WIDTH = 8 if features.get("avx512f", False) else 4 if features.get("avx", False) else 2
    return _HOST_WIDTH


if HAVE_NUMBA:
    import math
    import operator

    import numpy as np
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.core.datamodel import models, register_default
    from numba.core.imputils import impl_ret_borrowed, lower_builtin, lower_cast
    from numba.core.typeconv import Conversion
    from numba.core.typing.templates import AbstractTemplate, infer_global, signature
    from numba.extending import intrinsic, overload
    from numba.np.arrayobj import make_array, populate_array

    _I32 = ir.IntType(32)

    class Lanes(types.Type):
        """L doubles, one per state of a lockstep group."""

        def __init__(self, width):
            self.width = width
            super().__init__(name=f"Lanes{width}")

        def can_convert_from(self, typingctx, other):
            if isinstance(other, (types.Float, types.Integer)):
                return Conversion.safe      # a number is the same in every lane
            return None

        def unify(self, typingctx, other):
            if other == self or isinstance(other, (types.Float, types.Integer)):
                return self
            return None

    class LaneMask(types.Type):
        """L flags, a comparison of Lanes; no truth value (any_lane, all_lanes, where)."""

        def __init__(self, width):
            self.width = width
            super().__init__(name=f"LaneMask{width}")

    @register_default(Lanes)
    class _LanesModel(models.PrimitiveModel):
        def __init__(self, dmm, fe_type):
            super().__init__(dmm, fe_type, ir.VectorType(ir.DoubleType(), fe_type.width))

    @register_default(LaneMask)
    class _LaneMaskModel(models.PrimitiveModel):
        def __init__(self, dmm, fe_type):
            super().__init__(dmm, fe_type, ir.VectorType(ir.IntType(1), fe_type.width))

    def _splat(builder, x, width):
        vt = ir.VectorType(ir.DoubleType(), width)
        v = builder.insert_element(ir.Constant(vt, ir.Undefined), x, ir.Constant(_I32, 0))
        return builder.shuffle_vector(v, ir.Constant(vt, ir.Undefined),
                                      ir.Constant(ir.VectorType(_I32, width), [0] * width))

    @lower_cast(types.Float, Lanes)
    @lower_cast(types.Integer, Lanes)
    def _number_to_lanes(context, builder, fromty, toty, val):
        return _splat(builder, context.cast(builder, val, fromty, types.float64), toty.width)

    def _lanes_of(args):
        """The Lanes type of a binary operation's operands (one at least Lanes, the other Lanes of
        the same width or a number), else None."""
        lanes = [a for a in args if isinstance(a, Lanes)]
        if len(args) != 2 or not lanes:
            return None
        L = lanes[0]
        if all(a == L or isinstance(a, (types.Float, types.Integer)) for a in args):
            return L
        return None

    # Templates for the CPU target are tried before numba's generic ones: an operation on Lanes
    # then types at its first template instead of after every built-in one has failed (each
    # failure formats its signatures); an operation on numbers fails here at once.
    _FIRST = {"target": "cpu"}

    def _binary(op, result, lower):
        class _Typing(AbstractTemplate):
            metadata = _FIRST

            def generic(self, args, kws):
                L = _lanes_of(args)
                if L is not None:
                    return signature(result(L), L, L)
                return None

        infer_global(op)(_Typing)
        lower_builtin(op, Lanes, Lanes)(lower)

    _ARITH = {operator.add: "fadd", operator.sub: "fsub", operator.mul: "fmul", operator.truediv: "fdiv",
              operator.iadd: "fadd", operator.isub: "fsub", operator.imul: "fmul", operator.itruediv: "fdiv"}
    for _op, _inst in _ARITH.items():
        # the one-state kernels' fastmath flags: contraction into fused multiply-adds only
        _binary(_op, lambda L: L, lambda context, builder, sig, args, _inst=_inst:
                getattr(builder, _inst)(args[0], args[1], flags=("contract",)))

    _COMPARE = {operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">=",
                operator.eq: "==", operator.ne: "!="}
    for _op, _code in _COMPARE.items():
        # ordered (False with a NaN) but !=, as Python's float comparisons
        _binary(_op, lambda L: LaneMask(L.width), lambda context, builder, sig, args, _code=_code:
                (builder.fcmp_unordered if _code == "!=" else builder.fcmp_ordered)(_code, args[0], args[1]))

    class _Negate(AbstractTemplate):
        metadata = _FIRST

        def generic(self, args, kws):
            if len(args) == 1 and isinstance(args[0], Lanes):
                return signature(args[0], args[0])
            return None

    infer_global(operator.neg)(_Negate)

    @lower_builtin(operator.neg, Lanes)
    def _negate(context, builder, sig, args):
        return builder.fneg(args[0])

    def _vector_call(builder, name, L, vals):
        vt = vals[0].type
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vt, [vt] * len(vals)),
                                            f"{name}.v{L.width}f64")
        return builder.call(fn, vals)

    def _vector_unary(name):
        """Lanes -> Lanes by LLVM's vector intrinsic `name` (llvm.sqrt, llvm.fabs)."""
        @intrinsic
        def call(typingctx, x):
            if not isinstance(x, Lanes):
                return None
            return x(x), lambda context, builder, sig, args: _vector_call(builder, name, x, args)
        return call

    def _vector_binary(name):
        """(Lanes or number, Lanes or number) -> Lanes by LLVM's vector intrinsic `name`
        (llvm.maxnum, llvm.minnum)."""
        @intrinsic
        def call(typingctx, x, y):
            L = _lanes_of((x, y))
            if L is None:
                return None

            def codegen(context, builder, sig, args):
                return _vector_call(builder, name, L, [context.cast(builder, a, t, L)
                                                       for a, t in zip(args, sig.args)])
            return L(x, y), codegen
        return call

    _sqrt, _fabs = _vector_unary("llvm.sqrt"), _vector_unary("llvm.fabs")
    _maxnum, _minnum = _vector_binary("llvm.maxnum"), _vector_binary("llvm.minnum")

    def _lanewise(scalar_fn):
        """Lanes -> Lanes calling numba's float64 scalar_fn on each lane (sin, cos: no vector form
        in LLVM without a vector math library; the batch calls them once per joint)."""
        @intrinsic
        def call(typingctx, x):
            if not isinstance(x, Lanes):
                return None

            def codegen(context, builder, sig, args):
                impl = context.get_function(scalar_fn, signature(types.float64, types.float64))
                out = args[0]
                for i in range(x.width):
                    k = ir.Constant(_I32, i)
                    out = builder.insert_element(out, impl(builder, [builder.extract_element(args[0], k)]), k)
                return out
            return x(x), codegen
        return call

    _sin, _cos = _lanewise(math.sin), _lanewise(math.cos)

    def _unary_overloads(fns, impl):
        for fn in fns:
            @overload(fn)
            def _ov(x):
                if isinstance(x, Lanes):
                    return lambda x: impl(x)
                return None

    _unary_overloads((math.sqrt, np.sqrt), _sqrt)
    _unary_overloads((abs, np.abs), _fabs)
    _unary_overloads((math.sin, np.sin), _sin)
    _unary_overloads((math.cos, np.cos), _cos)

    @overload(max)
    def _ov_max(x, y):
        if _lanes_of((x, y)) is not None:
            return lambda x, y: _maxnum(x, y)
        return None

    @overload(min)
    def _ov_min(x, y):
        if _lanes_of((x, y)) is not None:
            return lambda x, y: _minnum(x, y)
        return None

    @intrinsic
    def _isfinite(typingctx, x):
        if not isinstance(x, Lanes):
            return None

        def codegen(context, builder, sig, args):
            vt = args[0].type
            fabs = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vt, [vt]),
                                                  f"llvm.fabs.v{x.width}f64")
            return builder.fcmp_ordered("<", builder.call(fabs, [args[0]]),
                                        ir.Constant(vt, [float("inf")] * x.width))
        return LaneMask(x.width)(x), codegen

    @overload(math.isfinite)
    def _ov_isfinite(x):
        if isinstance(x, Lanes):
            return lambda x: _isfinite(x)
        return None

    def _reduction(every):
        @intrinsic
        def reduce(typingctx, c):
            if not isinstance(c, LaneMask):
                return None

            def codegen(context, builder, sig, args):
                it = ir.IntType(c.width)
                bits = builder.bitcast(args[0], it)
                if every:
                    return builder.icmp_unsigned("==", bits, ir.Constant(it, (1 << c.width) - 1))
                return builder.icmp_unsigned("!=", bits, ir.Constant(it, 0))
            return types.boolean(c), codegen
        return reduce

    def _mask_overload(fn, reduce):
        """fn(c): c itself for a bool, `reduce` of a LaneMask."""
        @overload(fn)
        def _ov(c):
            if isinstance(c, types.Boolean):
                return lambda c: c
            if isinstance(c, LaneMask):
                return lambda c: reduce(c)
            return None

    _mask_overload(any_lane, _reduction(False))
    _mask_overload(all_lanes, _reduction(True))

    @intrinsic
    def _select(typingctx, c, a, b):
        if isinstance(c, LaneMask):
            T = Lanes(c.width)
        elif isinstance(c, types.Boolean):
            T = typingctx.unify_types(a, b)
        else:
            return None

        def codegen(context, builder, sig, args):
            return builder.select(args[0], context.cast(builder, args[1], sig.args[1], T),
                                  context.cast(builder, args[2], sig.args[2], T))
        return T(c, a, b), codegen

    @overload(where)
    def _ov_where(c, a, b):
        if isinstance(c, (types.Boolean, LaneMask)):
            return lambda c, a, b: _select(c, a, b)
        return None

    @overload(zero_like)
    def _ov_zero_like(x):
        if isinstance(x, Lanes):
            return lambda x: _select(True, 0.0, x)
        if isinstance(x, (types.Float, types.Integer)):
            return lambda x: 0.0
        return None

    @overload(matmul)
    def _ov_matmul(a, b, out):
        if not all(isinstance(x, types.Array) and x.ndim == 2 for x in (a, b, out)):
            return None
        if isinstance(out.dtype, Lanes):
            def lanes_matmul(a, b, out):
                for i in range(out.shape[0]):
                    for j in range(out.shape[1]):
                        out[i, j] = 0.0
                    for k in range(a.shape[1]):
                        x = a[i, k]
                        for j in range(out.shape[1]):
                            out[i, j] += x * b[k, j]
            return lanes_matmul
        return lambda a, b, out: np.dot(a, b, out)

    @intrinsic
    def as_lanes(typingctx, arr, tag):
        """A C-contiguous float64 array of shape (..., L) as the array (...) of Lanes(L), a view
        that holds no reference (the caller holds arr for the call, as layout.carve_view's
        buffers). tag: a tuple of L floats, whose type carries L. arr's data must be aligned to
        8 L bytes (`aligned_empty`): a vector is loaded and stored whole."""
        if not (isinstance(arr, types.Array) and arr.dtype == types.float64 and arr.layout == "C"
                and arr.ndim >= 2 and isinstance(tag, types.UniTuple)):
            return None
        L = tag.count
        retty = types.Array(Lanes(L), arr.ndim - 1, "C")

        def codegen(context, builder, sig, args):
            aty = sig.args[0]
            src = make_array(aty)(context, builder, args[0])
            shape = cgutils.unpack_tuple(builder, src.shape, aty.ndim)[:-1]
            itemsize = context.get_constant(types.intp, 8 * L)
            strides, acc = [], itemsize
            for k in reversed(shape):
                strides.insert(0, acc)
                acc = builder.mul(acc, k)
            out = make_array(retty)(context, builder)
            populate_array(out, data=builder.bitcast(src.data, context.get_data_type(retty.dtype).as_pointer()),
                           shape=shape, strides=strides, itemsize=itemsize,
                           meminfo=cgutils.get_null_value(src.meminfo.type),
                           parent=cgutils.get_null_value(out.parent.type))
            return impl_ret_borrowed(context, builder, retty, out._getvalue())
        return retty(arr, tag), codegen


    @intrinsic
    def store_transposed(typingctx, src, s, dst, r, c, idx, lo):
        """dst[idx[lo + l]] from entry (r, c) on, L consecutive doubles = lane l of src[s + j] for
        j, l < L: an L x L block of lanes (L consecutive vectors of L states) written as L vectors,
        one into each state's matrix (a transpose in registers: log2(L) rounds of L two-vector
        shuffles, each round swapping one bit of the vector's index with the same bit of the
        element's). src: 1-D Lanes, dst: 3-D float64, idx: 1-D int64 (the states' matrices in dst);
        the caller guarantees s + L <= len(src), lo + L <= len(idx), and that the L doubles from
        dst[i, r, c] on lie in dst[i] (within a row, or across rows where dst[i] is contiguous)."""
        if not (isinstance(src, types.Array) and isinstance(src.dtype, Lanes) and src.ndim == 1
                and isinstance(dst, types.Array) and dst.dtype == types.float64 and dst.ndim == 3
                and isinstance(idx, types.Array) and isinstance(idx.dtype, types.Integer) and idx.ndim == 1):
            return None
        L = src.dtype.width

        def codegen(context, builder, sig, args):
            sty, dty, ity = sig.args[0], sig.args[2], sig.args[5]
            S = make_array(sty)(context, builder, args[0])
            D = make_array(dty)(context, builder, args[2])
            IX = make_array(ity)(context, builder, args[5])
            s0, rr, cc, l0 = args[1], args[3], args[4], args[6]
            intp = context.get_value_type(types.intp)
            vt = ir.VectorType(ir.DoubleType(), L)
            cols = []
            for j in range(L):
                p = cgutils.get_item_pointer(context, builder, sty, S, [builder.add(s0, ir.Constant(intp, j))])
                cols.append(builder.load(builder.bitcast(p, vt.as_pointer()), align=8))
            bit = 1
            while bit < L:              # swap this bit of the vector's and the element's index
                for i in range(L):
                    if i & bit:
                        continue
                    first = [e if not e & bit else L + (e ^ bit) for e in range(L)]
                    second = [e ^ bit if not e & bit else L + e for e in range(L)]
                    a, b = cols[i], cols[i | bit]
                    cols[i] = builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(_I32, L), first))
                    cols[i | bit] = builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(_I32, L), second))
                bit *= 2
            for lane in range(L):
                pi = cgutils.get_item_pointer(context, builder, ity, IX, [builder.add(l0, ir.Constant(intp, lane))])
                state = context.cast(builder, builder.load(pi), ity.dtype, types.intp)
                p = cgutils.get_item_pointer(context, builder, dty, D, [state, rr, cc])
                builder.store(cols[lane], builder.bitcast(p, vt.as_pointer()), align=8)
            return context.get_dummy_value()
        return types.void(src, types.intp, dst, types.intp, types.intp, idx, types.intp), codegen

else:
    def as_lanes(arr, tag):
        """Lanes are numba's: without numba the batch computes one state at a time."""
        raise RuntimeError("sva_linearizer: lanes need numba")

    def store_transposed(src, s, dst, r, c, idx, lo):
        """Lanes are numba's (see as_lanes)."""
        raise RuntimeError("sva_linearizer: lanes need numba")


@njit(inline="always")
def interleave(X, XL, idx, lo, hi):
    """XL[j, l] = X[idx[lo + l], j] for the L lanes l of XL (..., L), the state at hi - 1 repeated
    to fill the lanes past hi - lo. idx: the rows of X that positions lo..hi-1 stand for (a
    batch's states in order: 0..N-1; a horizon's knots of one contact set)."""
    width = XL.shape[XL.ndim - 1]
    for lane in range(width):
        i = idx[min(lo + lane, hi - 1)]
        for j in range(X.shape[1]):
            XL[j, lane] = X[i, j]


@njit(inline="always")
def copy_out(XL, X, OX, idx, lo, hi):
    """OX[idx[lo + l]] = lane l of X (XL: the same memory as floats, (rows, cols, L)) for l < hi -
    lo. A full group goes out in L x L blocks transposed in registers (store_transposed): along
    each state's whole matrix where it is contiguous in OX, else along each row (rows of L or more
    columns), the last block of either overlapping the one before it; anything else one entry at a
    time. OX may have more columns than X (those are left as they are)."""
    width = XL.shape[2]
    rows, cols = XL.shape[0], XL.shape[1]
    n = rows * cols
    Xf = flat_view(X)
    if hi - lo == width:
        if OX.shape[2] == cols and OX.strides[2] == 8 and OX.strides[1] == 8 * cols and n >= width:
            for s in range(0, n - width + 1, width):
                store_transposed(Xf, s, OX, s // cols, s % cols, idx, lo)
            if n % width:
                s = n - width
                store_transposed(Xf, s, OX, s // cols, s % cols, idx, lo)
            return
        if cols >= width and OX.strides[2] == 8:
            for r in range(rows):
                for c in range(0, cols - width + 1, width):
                    store_transposed(Xf, r * cols + c, OX, r, c, idx, lo)
                if cols % width:
                    store_transposed(Xf, r * cols + cols - width, OX, r, cols - width, idx, lo)
            return
    for r in range(rows):
        for c in range(cols):
            for lane in range(hi - lo):
                OX[idx[lo + lane], r, c] = XL[r, c, lane]


@njit(inline="always")
def copy_rows(XL, OX, idx, rows, lo, hi):
    """OX[idx[lo + l], rows[r], c] = XL[r, c, l] for l < hi - lo (XL: floats (R, C, L)): lanes out
    to rows of a fixed layout (a horizon's contact forces, each contact's rows where the layout
    keeps them), one entry at a time."""
    for lane in range(hi - lo):
        i = idx[lo + lane]
        for r in range(XL.shape[0]):
            o = rows[r]
            for c in range(XL.shape[1]):
                OX[i, o, c] = XL[r, c, lane]


def chunk_size(n: int, width: int, nthreads: int) -> int:
    """States per call of a batch's worker threads: whole lockstep groups of `width` (1: one state
    at a time), a few calls per thread, so that a thread slowed down by other work takes fewer; on
    one thread, all of them in one call."""
    if nthreads <= 1:
        return max(1, n)
    if width > 1:
        return width * max(1, min(8, -(-n // width) // (2 * nthreads)))
    return max(1, min(16, n // (8 * nthreads)))


def redo_failed_groups(status, lo: int, hi: int, width: int, one_by_one) -> None:
    """one_by_one(a, b) for each lockstep group a..b-1 within lo..hi whose states have status
    LANES_FAILED (a lane kernel failed it as a whole): the one-state kernels then give each of its
    states its own status and result. A failed group is rare (a bad state; with contacts, rows
    dependent in some lanes only), so it runs from Python and the lane kernels need not link the
    one-state pipeline's code (seconds of LLVM time in each lane group's compile)."""
    from .algorithms.status import LANES_FAILED

    for a in range(lo, hi, width):
        if status[a] == LANES_FAILED:
            one_by_one(a, min(hi, a + width))


class LaneExtras:
    """What a lane kernel writes beside A, B (Ad, Bd with dt) of each state i: with dt the
    continuous A, B into OAc[i], OBc[i], and nu_dot into ONU[i, 0] (each NONE, (0, 0, 0), when not
    asked for: linearize_batch); with contacts the forces and their derivatives into
    OLAM[i, rows, 0], ODZ[i, rows], ODTAU[i, rows] (rows: the set's rows in the fixed layout of a
    horizon). nuo: nu_dot's offset in a workspace's float buffer."""

    __slots__ = ("OAc", "OBc", "ONU", "nuo", "OLAM", "ODZ", "ODTAU", "rows")
    NONE = np.empty((0, 0, 0))          # an output not asked for (nothing is ever written to it)
    NO_ROWS = np.zeros(0, dtype=np.int64)

    def __init__(self, OAc, OBc, ONU, nuo, OLAM=NONE, ODZ=NONE, ODTAU=NONE, rows=NO_ROWS):
        self.OAc, self.OBc, self.ONU, self.nuo = OAc, OBc, ONU, nuo
        self.OLAM, self.ODZ, self.ODTAU, self.rows = OLAM, ODZ, ODTAU, rows

    @classmethod
    def none(cls):
        """Nothing beside A, B (linearize_batch)."""
        return cls(cls.NONE, cls.NONE, cls.NONE, 0)

    def one(self, i, fb, A, B, dt, plan=None):
        """State i's extras from a one-state call: nu_dot from its workspace fb, with dt the A, B
        (the scratch the call wrote them to), with a contact plan its forces and derivatives."""
        if self.ONU.shape[0]:
            self.ONU[i, 0] = fb[self.nuo:self.nuo + self.ONU.shape[2]]
        if dt > 0.0 and self.OAc.shape[0]:
            self.OAc[i] = A
            self.OBc[i] = B
        if plan is not None and self.OLAM.shape[0] and plan.mc:
            self.OLAM[i, self.rows, 0] = plan.lam
            self.ODZ[i, self.rows] = plan.dz
            self.ODTAU[i, self.rows] = plan.dtau


def aligned_empty(shape, width: int):
    """An uninitialised float64 array of `shape` whose data is aligned to 8 width bytes (as_lanes)."""
    import numpy as np

    n = 1
    for k in shape:
        n *= k
    align = 8 * width
    raw = np.empty(n + width)
    off = (-raw.ctypes.data % align) // 8
    return raw[off:off + n].reshape(shape)
