# SPDX-License-Identifier: BSD-3-Clause
"""Data: the preallocated buffers of one model (the Data of Pinocchio's Model/Data split), laid out
by the tables of layout.py, and the Data a call runs on (get_data).
"""
from __future__ import annotations

import os
import threading

import numpy as np

from .layout import buffer_sizes, views_py
from .topology import (axis_codes, axis_structure, column_groups, rigid_subtrees, subtree_ranges,
                       support_rows)


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
            f"(it grows as nj^2: IMMAmb's F and P blocks, M^-1, the derivatives, A, B); "
            f"only {avail / 2**30:.1f} GiB of "
            "memory is available")


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
        sub_ptr, sub_rng = subtree_ranges(lam)
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
        self.sax[:] = -1
        self.sax[1:] = axis_codes(arr.jtype, arr.jaxis, arr.jpitch)
        self.rig[:] = rigid_subtrees(lam, np.concatenate([arr.base_inertia[None], arr.inertia]))
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
        new.__dict__.pop("_centroidal", None)       # the centroidal workspace: per Data
        new.__dict__.pop("_lane_workspaces", None)  # linearize_batch's lane workspaces: per Data
        new._bind()
        return new

    def __repr__(self):
        return f"<sva_linearizer.Data for '{self.model_name}' nv={self.nv}>"


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
