# SPDX-License-Identifier: BSD-3-Clause
"""The plain-Python form of a compiled kernel: the same source, run by the interpreter.

A kernel's Python function calls other kernels through its module's globals, where numba's
dispatchers stand; called from Python, a dispatcher compiles. The plain form of a kernel is its
function rebuilt on a copy of those globals in which every kernel is replaced by its own plain
form and every intrinsic (code numba emits directly) by the Python function registered for it
(`set_plain_form`). So a call into a plain form runs plain Python all the way down, with the
numbers of the compiled kernels (up to the fused multiply-adds the compiler may form), and
compiles nothing.

Knows no algorithm and nothing of numba: a kernel is recognised by the `py_func` attribute that
every dispatcher has.
"""
from __future__ import annotations

import types

_forms: dict = {}      # id(kernel or intrinsic) -> its plain form
_keep: list = []       # the objects whose ids key _forms (an id is unique only while it lives)
_shadows: dict = {}    # id(a globals dict) -> the copy its plain forms run on


def set_plain_form(obj, fn) -> None:
    """Use the Python function fn wherever the kernel or intrinsic obj is called in plain form."""
    _forms[id(obj)] = fn
    _keep.append(obj)


def plain_form(kernel):
    """The plain-Python form of a kernel (a numba dispatcher), built once."""
    f = _forms.get(id(kernel))
    if f is not None:
        return f
    src = getattr(kernel, "plain_source", None) or kernel.py_func
    g = _shadow(src.__globals__)
    f = _forms.get(id(kernel))          # built while the globals were copied (mutual calls)
    if f is None:
        closure = src.__closure__
        if closure:
            closure = tuple(types.CellType(_plain_value(c.cell_contents)) for c in closure)
        f = types.FunctionType(src.__code__, g, src.__name__, src.__defaults__, closure)
        f.__kwdefaults__ = src.__kwdefaults__
        f.__doc__ = src.__doc__
        set_plain_form(kernel, f)
    return f


def _plain_value(v):
    if id(v) in _forms:
        return _forms[id(v)]
    if hasattr(v, "py_func") and hasattr(v, "signatures"):     # a numba dispatcher
        return plain_form(v)
    return v


def _shadow(g: dict) -> dict:
    """The copy of a globals dict that plain forms run on (registered before it is filled, so
    that kernels of one module that call each other share it)."""
    s = _shadows.get(id(g))
    if s is None:
        s = _shadows[id(g)] = {}
        _keep.append(g)
        for k, v in list(g.items()):
            s[k] = _plain_value(v)
    return s
