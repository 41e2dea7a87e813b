"""Data: the preallocated buffers of one model (the Data of Pinocchio's Model/Data split).

The whole layout is ONE table per buffer (MODEL_INTS, MODEL_FLOATS, WORK below): each field's name,
shape and meaning. From it derive the buffer sizes (`buffer_sizes`), the compiled views (`views`,
generated from the tables: one namedtuple `m` of the model's arrays and one `d` of the workspace,
the `f(m, d)` arguments of every algorithm kernel), and the attributes of a Python `Data`. A
compiled call takes just the two flat buffers (ib, fb) and carves them with `views`: unboxing two
arrays costs ~0.2 us where forty cost ~5 us.

Indexing (thesis): body 0 is the base, bodies k = 1..N are moved by joint k-1; lam[k] < k. Per-body
arrays have N+1 rows (row 0 of the joint arrays is unused). Quantities are in body coordinates,
linear-angular order. Shape symbols: nb = N+1 bodies, n = N joints, nv = n (+6 with a floating
base), nx = 2 nv, nrng = the number of subtree index ranges, ngrp = the number of -Minv D's column
windows and nsup = the number of rows they sum over (grp_rows: the unions of their columns' supports
in D; column_groups).
"""
from __future__ import annotations

import math
import os
import threading
from collections import namedtuple

import numpy as np

from ._jit import HAVE_NUMBA, _carve_view_py, carve_view, njit
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
views = njit(inline="always")(_generate(carve_view))
set_plain_form(views, views_py)


def kernel(fn):
    """Compile an algorithm `fn(m, d, *args)` as a kernel that its callers reach through the two
    buffers. A compiled call that passes the named views m, d passes every field of both (~60
    arrays, ~400 machine words, with their reference counts) at each call: ~100-150 ns, a tenth
    of a fast algorithm. So `fn` is compiled once into `<name>__buffers(ib, fb, *args)`, which
    carves the views itself (pointer arithmetic: see carve_view; unused views are optimised away),
    and `kernel` returns an inlined shim with fn's own signature that calls it with m.ibuf,
    m.fbuf. Callers and the pure-Python path (no numba: fn itself) see no difference."""
    if not HAVE_NUMBA:
        return fn
    import inspect

    params = list(inspect.signature(fn).parameters)
    if params[:2] != ["m", "d"]:
        raise TypeError(f"kernel {fn.__name__}: the first two parameters must be m, d")
    args = ", ".join(params[2:])
    name = fn.__name__
    first = fn.__code__.co_firstlineno
    # generated in fn's own file, at fn's line (numba's cache names an entry by file, name, line)
    src = ("\n" * (first - 1) + f"def {name}__buffers(ib, fb, {args}):\n"
           f"    m, d, _ = views(ib, fb)\n    return body(m, d, {args})\n"
           f"def {name}(m, d, {args}):\n    return {name}__buffers(m.ibuf, m.fbuf, {args})\n")
    ns = {"__name__": fn.__module__, "views": views, "body": njit(inline="always")(fn),
          "COMPILE_GROUP": fn.__globals__.get("COMPILE_GROUP", "core")}
    exec(compile(src, fn.__code__.co_filename, "exec"), ns)  # noqa: S102 - two one-line wrappers
    ns[f"{name}__buffers"] = njit(ns[f"{name}__buffers"])
    shim = njit(inline="always")(ns[name])
    shim.__doc__ = fn.__doc__
    shim.plain_source = fn          # its plain form is fn's (no buffers to carve)
    return shim


def buffer_sizes(n: int, floating: bool, nrng: int, nsup: int, ngrp: int) -> tuple[int, int]:
    """(int, float) buffer lengths of a model with n joints, from the tables."""
    nv = n + 6 * int(floating)
    dims = {"n": n, "nb": n + 1, "nv": nv, "nx": 2 * nv, "nrng": nrng, "nsup": nsup,
            "ngrp": ngrp, "nb+1": n + 2, "nv+1": nv + 1, "ngrp+1": ngrp + 1}

    def size(table):
        return sum(math.prod(dims[d] if isinstance(d, str) else d for d in shape) for _, shape, _ in table)

    return len(INT_HEADER) + size(MODEL_INTS), size(MODEL_FLOATS) + size(WORK)


def _available_memory() -> int | None:
    """Bytes of memory available to allocate (Linux MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_fits(model, nbytes: int, what: str = "workspace") -> None:
    """A ValueError with the size, before allocating, if `nbytes` would not fit in memory."""
    avail = _available_memory()
    if avail is not None and nbytes > avail:
        raise ValueError(
            f"model '{model.name}' (nj={model.nj}) needs a {nbytes / 2**30:.1f} GiB {what} "
            f"(it grows as nj^2: IMMAmb's F and P blocks, M^-1, the derivatives, A, B); only {avail / 2**30:.1f} GiB of "
            "memory is available")


def rigid_form(M: np.ndarray) -> bool:
    """Whether a 6x6 linear-angular inertia is exactly [[m 1, -h^], [h^, C]] (C symmetric): every
    body built from a mass, a centre of mass and a rotational inertia (URDF, sl.Inertia; merged
    fixed links add such matrices and keep the form). A 6x6 given as a raw matrix may not be."""
    m = M[0, 0]
    L = M[3:6, 0:3]
    return bool(np.array_equal(M, M.T) and np.array_equal(M[0:3, 0:3], m * np.eye(3))
                and np.array_equal(L, -L.T))


def _rigid_subtrees(lam: np.ndarray, inertia: np.ndarray) -> np.ndarray:
    """rig[k] = 1 when every body of subtree(k) has a rigid_form inertia (lam[k] < k)."""
    rig = np.array([rigid_form(M) for M in inertia], dtype=np.int64)
    for k in range(len(lam) - 1, 0, -1):
        if not rig[k]:
            rig[lam[k]] = 0
    return rig


class Data:
    """Preallocated buffers for one model: the model's arrays and every workspace the algorithms
    write, carved out of one int and one float buffer (`views`), so that a compiled call takes few
    arguments and allocates nothing. Each field of the tables above is an attribute (`data.Minv`,
    `data.nu_dot`, `data.D`, ...); results read from a Data are overwritten by the next call that
    uses it. One Data serves one call at a time: give each thread its own (`data.copy()`)."""

    def __init__(self, model):
        arr = model.arrays()
        self._arrays = arr
        self.model_name = model.name
        n = model.nj
        self.nj, self.nv, self.floating_base = n, model.nv, model.floating_base
        self._tau_shape = (n,)   # tau's shape (the hot paths compare it, not a new tuple)
        self._lin = None        # linearize(..., data=self)'s result object, made on first use
        self.custom = tuple((j, model.bodies[j].joint, model.joint_names[j]) for j in arr.custom)
        nfloat = buffer_sizes(n, model.floating_base, 0, 0, 0)[1]
        check_fits(model, 8 * nfloat)                     # before allocating
        lam = np.concatenate([[-1], arr.parent + 1]).astype(np.int64)
        sub_ptr, sub_rng = _subtree_ranges(lam)
        off = 6 if model.floating_base else 0
        vidx = np.concatenate([[0], off + np.arange(n)]).astype(np.int64)
        grp_start, grp_ptr, grp_rows = column_groups(*support_rows(lam, vidx, model.nv))
        nint = buffer_sizes(n, model.floating_base, len(sub_rng), len(grp_rows), len(grp_start))[0]
        self.ib = np.zeros(nint, dtype=np.int64)
        self.ib[0:5] = (n, int(model.floating_base), len(sub_rng), len(grp_rows), len(grp_start))
        self.fb = np.zeros(nfloat)
        used = self._bind()
        assert used == nfloat, "buffer_sizes and views disagree"
        self.lam[:] = lam
        self.jtype[1:] = arr.jtype
        from .algorithms.kinematics import axis_codes
        self.sax[:] = -1
        self.sax[1:] = axis_codes(arr.jtype, arr.jaxis, arr.jpitch)
        self.rig[:] = _rigid_subtrees(lam, np.concatenate([arr.base_inertia[None], arr.inertia]))
        from .algorithms.kinematics import axis_structure
        self.xax[:] = -1
        self.xax[1:], self.xw[1:] = axis_structure(arr.jtype, self.sax[1:], arr.Xtree)
        self.vidx[:] = vidx
        self.grp_start[:] = grp_start
        self.grp_ptr[:] = grp_ptr
        self.grp_rows[:] = grp_rows
        self.sub_ptr[:] = sub_ptr
        if sub_rng:
            self.sub_rng[:] = sub_rng
        self.Xtree[1:] = arr.Xtree
        self.I[0] = arr.base_inertia
        self.I[1:] = arr.inertia
        self.jaxis[1:] = arr.jaxis
        self.jpitch[1:] = arr.jpitch
        self.a_grav[:] = arr.a_grav
        self.R[:] = np.eye(3)
        self._busy = False      # in use by a call of this thread (see get_data)

    def _bind(self):
        m, d, used = views_py(self.ib, self.fb)
        for name, a in zip(m._fields, m):
            if isinstance(a, np.ndarray) and name not in ("ibuf", "fbuf"):
                setattr(self, name, a)
        for name, a in zip(d._fields, d):
            setattr(self, name, a)
        return used

    def copy(self) -> "Data":
        """An independent Data for the same model (e.g. one per thread)."""
        new = object.__new__(Data)
        new.__dict__.update(self.__dict__)
        new.ib, new.fb = self.ib.copy(), self.fb.copy()
        new._busy = False
        new._lin = None                             # its result object holds this Data's views
        new.__dict__.pop("_contact_sets", None)     # contacts.contact_set's buffers: per Data
        new.__dict__.pop("_second_order", None)     # the second-order workspace: per Data
        new._bind()
        return new

    def __repr__(self):
        return f"<sva_linearizer.Data for '{self.model_name}' nv={self.nv}>"


def _subtree_ranges(lam):
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


_local = threading.local()


def get_data(model, data=None) -> Data:
    """`data` checked against the model; without one, this thread's own Data for the model (never
    shared between threads, nor between two calls running at once in one thread)."""
    if data is None:
        cache = getattr(_local, "data", None)
        if cache is None:
            cache = _local.data = {}
        d = cache.get(id(model))
        if d is None or d._arrays is not model.arrays() or d._busy:
            d = Data(model)
            if len(cache) > 32:
                cache.clear()
            cache[id(model)] = d
        return d
    if not isinstance(data, Data):
        raise ValueError(f"data must be an sva_linearizer.Data, got {type(data).__name__}")
    if data._arrays is not model.arrays():
        raise ValueError("data was built for another model (or before the model changed); "
                         "make a new one with sl.Data(model)")
    return data
