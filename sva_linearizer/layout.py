# SPDX-License-Identifier: BSD-3-Clause
"""The workspace layout: ONE table per buffer (MODEL_INTS, MODEL_FLOATS, WORK below), each field's
name, shape and meaning. From them derive the buffer sizes (`buffer_sizes`), the compiled views
(`views`, generated from the tables: one namedtuple `m` of the model's arrays and one `d` of the
workspace, the `f(m, d)` arguments of every algorithm kernel) and the attributes of a Python
`Data` (data.py). A compiled call takes just the two flat buffers (ib, fb) and carves them with
`views`: unboxing two arrays costs ~0.2 us where forty cost ~5 us; `kernel` compiles an algorithm
on them.

Indexing (thesis): body 0 is the base, bodies k = 1..N are moved by joint k-1; lam[k] < k. Per-body
arrays have N+1 rows (row 0 of the joint arrays is unused). Quantities are in body coordinates,
linear-angular order. Shape symbols: nb = N+1 bodies, n = N joints, nv = n (+6 with a floating
base), nx = 2 nv, nrng = the number of subtree index ranges, ngrp = the number of -Minv D's column
windows and nsup = the number of rows they sum over (grp_rows: the unions of their columns' supports
in D; topology.column_groups).
"""
from __future__ import annotations

import math
from collections import namedtuple

from ._jit import HAVE_NUMBA, njit
from ._intrinsics import _carve_view_py, carve_view
from ._plain import set_plain_form

# Int buffer: a header [n, floating, nrng, nsup, ngrp], then these.
INT_HEADER = ("n", "floating", "nrng", "nsup", "ngrp")
MODEL_INTS = (
    ("lam", ("nb",), "parent body of body k (lam[0] = -1)"),
    ("jtype", ("nb",), "joint type of body k (joints.REVOLUTE, ...; row 0 unused)"),
    ("vidx", ("nb",), "index of body k's joint in nu (and in z_q, z_nu); vidx[0] = 0, the base block"),
    ("sub_ptr", ("nb+1",), "subtree(k)'s joint-index ranges are sub_rng[sub_ptr[k]:sub_ptr[k+1]]"),
    ("sub_rng", ("nrng", 2), "[first, last+1) joint-index ranges (IMMA's column sets)"),
    ("grp_start", ("ngrp",), "-Minv D's column window g: columns grp_start[g]..+3 of D_q and of D_nu "
                             "(column_groups; linearization/sparse_product.py)"),
    ("grp_ptr", ("ngrp+1",), "window g sums over rows grp_rows[grp_ptr[g]:grp_ptr[g+1]]"),
    ("grp_rows", ("nsup",), "the union of the window's columns' supports in D (base, ancestors, "
                            "subtree: support_rows), ascending"),
    ("sax", ("nb",), "axis code of joint k: i when Gamma_k = sigma_k = +-e_i (a column read), else -1"),
    ("rig", ("nb",), "1 when every inertia in subtree(k) has rigid-body form exactly (rigid_form): "
                     "its composites do too (rigid_congruence_add), else 0"),
    ("xax", ("nb",), "structure code of Xup[k]: a in 0..2 when Xup[k] = [[E, E w^], [0, E]] for every s, "
                     "E a rotation about e_a and w = xw[k] constant (a revolute joint about +-e_a on a "
                     "placement without rotation: axis_structure), else -1 (the full 6x6)"),
)
MODEL_FLOATS = (
    ("Xtree", ("nb", 6, 6), "^{lam(k)|k}X_lam(k): the joint frame's placement in the parent (D.2)"),
    ("I", ("nb", 6, 6), "M_k: body k's spatial inertia about its origin (I[0]: the base)"),
    ("jaxis", ("nb", 3), "unit joint axis (built-in joints)"),
    ("xw", ("nb", 3), "w of Xup[k] = [[E, E w^], [0, E]] where xax[k] >= 0: the placement's offset"),
    ("jpitch", ("nb",), "helical pitch"),
    ("a_grav", (3,), "-gravity in the world frame (the base 'accelerates upwards', EIDAmb line 7)"),
)
WORK = (
    # kinematics
    ("XJ", ("nb", 6, 6), "X_J(s_k), the joint transform (jcalc, Appendix B.2); not written for the "
                         "joints with xax >= 0, whose Xup is written directly"),
    ("Xup", ("nb", 6, 6), "^kX_lam(k) = X_J Xtree (EIDAmb line 16)"),
    ("S", ("nb", 6), "Gamma_k, the joint's motion subspace"),
    ("Sig", ("nb", 6), "sigma_k: d Xup[k]/d s_k = -(sigma_k x) Xup[k] (= Gamma_k but for custom joints)"),
    ("R", (3, 3), "^AR_0, the base rotation"),
    ("g0", (6,), "a_0^r = ^0X_A a_grav, gravity seen from the base (EIDAmb line 7)"),
    # EIDAmb / RNEA (Table 4.1)
    ("v", ("nb", 6), "v_k, body twist"),
    ("a", ("nb", 6), "a_k + gravity term: body acceleration (lines 18, 31)"),
    ("f", ("nb", 6), "subtree force: f_k summed over the subtree (lines 22, 27)"),
    ("vp", ("nb", 6), "^kX_lam v_lam, the parent's twist in k's frame (line 17)"),
    ("ap", ("nb", 6), "^kX_lam a_lam, the parent's acceleration in k's frame"),
    ("hv", ("nb", 6), "M_k v_k, body momentum"),
    ("fext", ("nb", 6), "external wrench on body k in its frame (contacts; zeroed by prepare), subtracted in EIDAmb"),
    ("tau_id", ("nv",), "EIDAmb's joint torques (rows vidx[k])"),
    # articulated-body quantities (ABAmb, IMMAmb, pivots)
    ("IA", ("nb", 6, 6), "M^A_k, articulated inertia (E.6; Tables 4.6-4.7 line 13)"),
    ("U", ("nb", 6), "U_k = M^A_k Gamma_k"),
    ("Dd", ("nb",), "D_k = Gamma_k^T U_k, the pivots"),
    ("c", ("nb", 6), "c_k = v_k x Gamma_k r_k, velocity-product acceleration (ABA)"),
    ("pA", ("nb", 6), "p^A_k, articulated bias force (ABA)"),
    ("u", ("nb",), "u_k = tau_k - Gamma^T p^A_k (ABA)"),
    ("Fc", ("nb", 6, "n"), "F_k of IMMA(mb) (Table 4.6/4.7), 6 x N, rows = components"),
    ("P", ("nb", 6, "n"), "P_k of IMMA(mb), 6 x N"),
    ("Minv", ("nv", "nv"), "M^-1 (IMMAmb)"),
    # derivatives of EIDAmb (Tables 4.2-4.5 as IDSVA)
    ("IC", ("nb", 6, 6), "M^C_k, composite inertia (lines 8, 22); also CRBA's"),
    ("KC", ("nb", 6, 6), "symmetric part of 2B^C_k (lines 9, 22)"),
    ("hC", ("nb", 6), "composite momentum h^C_k: 2B^C x = KC x + x x* hC"),
    ("Ps", ("nb", 3, 6), "[Psi-dot, Psi-ddot, S-dot + Psi-dot] of joint k (IDSVA lines 5-7)"),
    ("tt", ("nb", 4, 6), "t1..t4 of body k (IDSVA lines 13-16)"),
    ("cur", (4, 6), "t1..t4 of one body on its way up to an ancestor"),
    ("D", ("nv", "nx"), "[D_q | D_nu]: the derivatives of EIDAmb, columns [z_H, s | v, r]"),
    # the linearization
    ("nu_dot", ("nv",), "the consistent acceleration M^-1 (S tau - h)"),
    ("bias", ("nv",), "S tau - h(q, nu)"),
    ("rdd", ("n",), "joint accelerations (ABA)"),
    ("A", ("nx", "nx"), "A of linearize(..., data=) (3.53), [z_q, z_nu] rows and columns"),
    ("B", ("nx", "n"), "B of linearize(..., data=)"),
    ("Ad", ("nx", "nx"), "Ad of linearize(..., data=, dt=) (discrete step)"),
    ("Bd", ("nx", "n"), "Bd of linearize(..., data=, dt=)"),
    ("E6", (6, 6), "exp(-ad(dt v+)) (discrete step)"),
    ("J6", (6, 6), "Jr(dt v+), the right Jacobian of SE(3) (discrete step)"),
    ("M3", (10, 3, 3), "3x3 scratch of the discrete step"),
    # scratch
    ("T", (6, 6), "scratch"),
    ("T2", (6, 6), "scratch"),
    ("t6", (8, 6), "scratch"),
)

# Model_ ends with the two buffers themselves (ibuf, fbuf): see `kernel`
Model_ = namedtuple("Model_", INT_HEADER + ("nb", "nv") + tuple(f[0] for f in MODEL_INTS + MODEL_FLOATS)
                    + ("ibuf", "fbuf"))
Work = namedtuple("Work", tuple(f[0] for f in WORK))


def _size_expr(shape):
    return " * ".join(f"({d})" if isinstance(d, str) else str(d) for d in shape)


def _shape_expr(shape):
    return "(" + ", ".join(f"({d})" if isinstance(d, str) else str(d) for d in shape) + ",)"


def _carve(buf, table, lines):
    for name, shape, _ in table:
        lines.append(f"    {name} = carve({buf}, o, {_shape_expr(shape)})")
        lines.append(f"    o += {_size_expr(shape)}")


def _views_source():
    """`views(ib, fb) -> (m, d, used)`, generated from the tables (the one place a field's offset
    comes from its position)."""
    lines = ["def views(ib, fb):",
             "    " + ", ".join(INT_HEADER) + " = " + ", ".join(f"ib[{i}]" for i in range(len(INT_HEADER))),
             "    nb = n + 1",
             "    nv = n + 6 * floating",
             "    nx = 2 * nv",
             f"    o = {len(INT_HEADER)}"]
    _carve("ib", MODEL_INTS, lines)
    lines += ["    if o > ib.shape[0]:",
              "        raise ValueError('sva_linearizer: int buffer too small for its header')",
              "    o = 0"]
    _carve("fb", MODEL_FLOATS + WORK, lines)
    lines += ["    if o > fb.shape[0]:",
              "        raise ValueError('sva_linearizer: float buffer too small for the model')"]
    mf = ", ".join(f[0] for f in MODEL_INTS + MODEL_FLOATS)
    wf = ", ".join(f[0] for f in WORK)
    lines.append(f"    return Model_(n, floating != 0, nrng, nsup, ngrp, nb, nv, {mf}, ib, fb), Work({wf}), o")
    return "\n".join(lines) + "\n"


def _generate(carve):
    ns = {"Model_": Model_, "Work": Work, "carve": carve}
    exec(compile(_views_source(), __file__, "exec"), ns)  # noqa: S102 - generated from the tables above
    return ns["views"]


views_py = _generate(_carve_view_py)          # plain Python (Data's numpy views)
# compiled, inlined into every entry point; `carve_view` builds each view directly (an array
# .reshape in numba calls a C helper each time: ~60 of them cost ~1.5 us per call)
views = njit(inline="ir")(_generate(carve_view))
set_plain_form(views, views_py)


def kernel(fn):
    """Compile an algorithm `fn(m, d, *args)` as a kernel that its callers reach through the two
    buffers. A compiled call that passes the named views m, d passes every field of both (~60
    arrays, ~400 machine words, with their reference counts) at each call: ~100-150 ns, a tenth
    of a fast algorithm. So `fn` is compiled once as `<name>__buffers(ib, fb, *args)`: fn's own
    code with its first statement `m, d, _ = views(ib, fb)` (pointer arithmetic: see carve_view;
    unused views are optimised away), and `kernel` returns an inlined shim with fn's signature
    that calls it with m.ibuf, m.fbuf. Callers and the pure-Python path (no numba: fn itself)
    see no difference.

    `<name>__buffers` is built from fn's syntax tree rather than as a wrapper that calls fn
    inlined: numba inlines a function by deep-copying its IR block by block, each block with
    the function's whole variable scope, a cost that grows as blocks x variables; for the
    largest algorithms that copy took most of their compile time."""
    if not HAVE_NUMBA:
        return fn
    import inspect

    params = list(inspect.signature(fn).parameters)
    if params[:2] != ["m", "d"]:
        raise TypeError(f"kernel {fn.__name__}: the first two parameters must be m, d")
    args = ", ".join(params[2:])
    name = fn.__name__
    first = fn.__code__.co_firstlineno
    g = fn.__globals__
    g.setdefault("_layout_views", views)        # the name the generated statement calls
    buffers = _on_buffers(fn, f"{name}__buffers", first)
    # the shim, in fn's own file at fn's line (numba's cache names an entry by file, name, line)
    src = "\n" * (first - 1) + f"def {name}(m, d, {args}):\n    return {name}__buffers(m.ibuf, m.fbuf, {args})\n"
    ns = {"__name__": fn.__module__, f"{name}__buffers": njit(buffers)}
    exec(compile(src, fn.__code__.co_filename, "exec"), ns)  # noqa: S102 - a one-line wrapper
    shim = njit(inline="ir")(ns[name])
    shim.__doc__ = fn.__doc__
    shim.plain_source = fn          # its plain form is fn's (no buffers to carve)
    return shim


def _on_buffers(fn, name: str, first: int):
    """fn(m, d, *args) rewritten as name(ib, fb, *args) whose first statement (after the
    docstring) is `m, d, _ = _layout_views(ib, fb)`: compiled from fn's source, with fn's file,
    line numbers and globals."""
    import ast
    import inspect
    import textwrap
    import types

    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    fdef = tree.body[0]
    fdef.decorator_list = []
    fdef.name = name
    fdef.args.args[0].arg, fdef.args.args[1].arg = "ib", "fb"
    body = fdef.body
    at = int(bool(body) and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
             and isinstance(body[0].value.value, str))
    carve = ast.parse("m, d, _ = _layout_views(ib, fb)").body[0]
    body.insert(at, ast.copy_location(carve, body[min(at, len(body) - 1)]))
    ast.fix_missing_locations(tree)
    ast.increment_lineno(tree, first - 1)
    code = compile(tree, fn.__code__.co_filename, "exec")
    fcode = next(c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == name)
    out = types.FunctionType(fcode, fn.__globals__, name, fn.__defaults__)
    out.__module__ = fn.__module__
    out.__qualname__ = name
    return out


def buffer_sizes(n: int, floating: bool, nrng: int, nsup: int, ngrp: int) -> tuple[int, int]:
    """(int, float) buffer lengths of a model with n joints, from the tables."""
    nv = n + 6 * int(floating)
    dims = {"n": n, "nb": n + 1, "nv": nv, "nx": 2 * nv, "nrng": nrng, "nsup": nsup,
            "ngrp": ngrp, "nb+1": n + 2, "nv+1": nv + 1, "ngrp+1": ngrp + 1}

    def size(table):
        return sum(math.prod(dims[d] if isinstance(d, str) else d for d in shape) for _, shape, _ in table)

    return len(INT_HEADER) + size(MODEL_INTS), size(MODEL_FLOATS) + size(WORK)
