# SPDX-License-Identifier: BSD-3-Clause
"""Intrinsics: code numba emits directly (views without reference counts), each with its
plain-Python form (the same result, for the kernels' plain form and for Python without numba)."""
from __future__ import annotations

from ._jit import HAVE_NUMBA
from ._plain import set_plain_form


def _carve_view_py(buf, offset, shape):
    """The C-contiguous array of `shape` that starts at buf[offset] (a view, no copy)."""
    size = 1
    for k in shape:
        size *= k
    return buf[offset:offset + size].reshape(shape)


def _borrow_py(arr):
    return arr


def _flat_view_py(arr):
    out = arr.view()
    out.shape = (arr.size,)        # raises where reshape would copy (a non-contiguous array)
    return out


if HAVE_NUMBA:
    from numba.core import cgutils as _cgutils
    from numba.core import types as _types
    from numba.core.imputils import impl_ret_borrowed as _borrowed
    from numba.extending import intrinsic as _intrinsic
    from numba.np.arrayobj import make_array as _make_array
    from numba.np.arrayobj import populate_array as _populate_array

    @_intrinsic
    def carve_view(typingctx, buf, offset, shape):
        """Compiled `_carve_view_py`: the view's shape, strides and data pointer are written
        directly (numba's reshape calls a C helper per array; the workspace views are carved at
        every entry point). The caller guarantees offset + prod(shape) <= buf.size (layout.views
        checks the total).

        The view borrows buf's memory without a reference (a null meminfo, as numba.carray
        gives): numba keeps every array's reference count up to date, an atomic increment and
        decrement for each view and each slice of one (Xup[k], Fc[k], ...), hundreds per call;
        these were ~12% of solo12's kernel and a quarter of ur5's. With a null meminfo they are
        a pointer test. This is safe because buf is always an argument of the compiled entry
        point (ib, fb, a contact plan's buffers), which its caller holds for the whole call, and
        no view is returned to Python. Never carve from an array allocated in compiled code (it
        may be freed while a view is in use), nor return a carved view."""
        if not isinstance(buf, _types.Array) or buf.ndim != 1 or buf.layout != "C":
            return None
        ndim = len(shape)
        retty = _types.Array(buf.dtype, ndim, "C")

        def codegen(context, builder, sig, args):
            bufty, offty, shapety = sig.args
            src = _make_array(bufty)(context, builder, args[0])
            off = context.cast(builder, args[1], offty, _types.intp)
            dims = [context.cast(builder, v, t, _types.intp)
                    for v, t in zip(_cgutils.unpack_tuple(builder, args[2], ndim), shapety)]
            itemsize = context.get_constant(_types.intp,
                                            context.get_abi_sizeof(context.get_data_type(bufty.dtype)))
            strides, acc = [], itemsize
            for k in reversed(dims):
                strides.insert(0, acc)
                acc = builder.mul(acc, k)
            out = _make_array(retty)(context, builder)
            _populate_array(out, data=builder.gep(src.data, [off], inbounds=True), shape=dims,
                            strides=strides, itemsize=itemsize,
                            meminfo=_cgutils.get_null_value(src.meminfo.type),
                            parent=_cgutils.get_null_value(out.parent.type))
            return _borrowed(context, builder, retty, out._getvalue())

        return retty(buf, offset, shape), codegen

    @_intrinsic
    def borrow(typingctx, arr):
        """arr itself, as a view that holds no reference (a null meminfo: see carve_view), for the
        arrays a compiled entry point is given and its caller holds for the call: slicing it
        (Q[i], OA[i] per state of a batch) then costs no atomic operation on a reference count
        that the batch's threads share."""
        if not isinstance(arr, _types.Array):
            return None

        def codegen(context, builder, sig, args):
            aty = sig.args[0]
            src = _make_array(aty)(context, builder, args[0])
            out = _make_array(aty)(context, builder)
            _populate_array(out, data=src.data,
                            shape=_cgutils.unpack_tuple(builder, src.shape, aty.ndim),
                            strides=_cgutils.unpack_tuple(builder, src.strides, aty.ndim),
                            itemsize=src.itemsize,
                            meminfo=_cgutils.get_null_value(src.meminfo.type),
                            parent=_cgutils.get_null_value(out.parent.type))
            return _borrowed(context, builder, aty, out._getvalue())

        return arr(arr), codegen
    @_intrinsic
    def flat_view(typingctx, arr):
        """A C-contiguous array as one vector (its elements in memory order), holding no reference
        (see borrow): for loops over a whole matrix that the compiler vectorises in one piece
        rather than row by row (a row of 36 to 100 elements leaves a scalar remainder each time)."""
        if not isinstance(arr, _types.Array) or arr.layout != "C":
            return None
        retty = _types.Array(arr.dtype, 1, "C")

        def codegen(context, builder, sig, args):
            aty = sig.args[0]
            src = _make_array(aty)(context, builder, args[0])
            size = context.get_constant(_types.intp, 1)
            for k in _cgutils.unpack_tuple(builder, src.shape, aty.ndim):
                size = builder.mul(size, k)
            out = _make_array(retty)(context, builder)
            _populate_array(out, data=src.data, shape=[size], strides=[src.itemsize],
                            itemsize=src.itemsize,
                            meminfo=_cgutils.get_null_value(src.meminfo.type),
                            parent=_cgutils.get_null_value(out.parent.type))
            return _borrowed(context, builder, retty, out._getvalue())

        return retty(arr), codegen

    set_plain_form(carve_view, _carve_view_py)
    set_plain_form(borrow, _borrow_py)
    set_plain_form(flat_view, _flat_view_py)
else:
    carve_view, borrow, flat_view = _carve_view_py, _borrow_py, _flat_view_py
