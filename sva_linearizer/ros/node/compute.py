# SPDX-License-Identifier: BSD-3-Clause
"""The records of paired joint states, computed through :func:`sva_linearizer.linearize_horizon`.

One implementation for the live node (a state at a time, as the states are paired) and for
``sva-linearizer bag`` (the states of a recording in batches): each state is a knot of one
horizon call, with the contacts active at it, and its record holds what the horizon gives at that
knot. The horizon computes every knot on its own (a group of lockstep lanes is filled with copies
of its last state), so a state's record has the same bits whichever states share its call: the
node's records and the bag's are equal bit for bit (test/test_bag.py checks it).

:func:`knot_sections` takes one knot's sections out of a horizon in the record's layout (the
active contacts' rows and input-force columns only); the planner's horizon answers
(:func:`.horizon.encode_answer`) use it too.
"""
from __future__ import annotations

import re

import numpy as np

import sva_linearizer as sl

from .record import encode_records

_KNOT = re.compile(r"^linearize_horizon: knot (\d+): ")
_NS = 1_000_000_000


def knot_sections(h, k, on, rigid: bool, nj: int, n_loop_rows: int, with_dt: bool, input_row=None):
    """Knot k of the horizon ``h`` as record sections -> (parts, nw, m): nu_dot, A, B, with
    ``with_dt`` Ad, Bd, q_next, v_next, the constraint forces and their derivatives (the active
    rigid contacts' rows, then the loops' ``n_loop_rows``), ``active`` (1.0 / 0.0 per configured
    contact, ``on``) when contacts are configured and, with forces as inputs (not ``rigid``), the
    active contacts' ``input_forces`` from ``input_row`` (every contact's force, in configured
    order) and B's columns of those contacts only. nw: B's columns; m: the rows of ``forces``.
    ``k`` an index array of knots with the same contacts ``on`` (``input_row`` their rows): each
    section with a leading axis, one row per knot. Knots that are all touchdowns of ``h`` (rigid
    contacts, dt) add reset, v_plus and the impulses with their derivatives (the rows of ``forces``)."""
    C = len(on)
    loop_rows = list(range(h.forces.shape[1] - n_loop_rows, h.forces.shape[1]))
    if rigid:
        held = [i for r, a in zip(h.rows[:C], on) if a for i in range(r.start, r.stop)] + loop_rows
        cols = list(range(nj))
    else:
        held = loop_rows
        cols = list(range(nj)) + [i for c, a in zip(h.columns, on) if a for i in range(c.start, c.stop)]
    # every column (row): the horizon's own arrays, else the columns (rows) taken
    c = slice(None) if len(cols) == h.B.shape[2] else np.array(cols, dtype=np.intp)
    r = slice(None) if len(held) == h.forces.shape[1] else np.array(held, dtype=np.intp)
    parts = {"nu_dot": h.nu_dot[k], "A": h.A[k], "B": h.B[k][..., c]}
    if C:
        parts["active"] = np.broadcast_to(np.asarray(on, dtype=np.float64), np.shape(k) + (C,))
    if not rigid and input_row is not None:
        parts["input_forces"] = input_row[..., [i - nj for i in cols[nj:]]]
    if with_dt:
        parts.update(Ad=h.Ad[k], Bd=h.Bd[k][..., c], q_next=h.q_next[k], v_next=h.v_next[k])
    if held:
        parts.update(forces=h.forces[k][..., r], dforces_dz=h.dforces_dz[k][..., r, :],
                     dforces_dtau=h.dforces_dtau[k][..., r, :])
    if rigid and with_dt and h.touchdown is not None and np.size(k) and np.all(h.touchdown[k]):
        parts.update(reset=h.reset[k], v_plus=h.v_plus[k], impulses=h.impulses[k][..., r],
                     dimpulses_dz=h.dimpulses_dz[k][..., r, :])
    return parts, len(cols), len(held)


class Computed:
    """One state's outcome: ``data`` (the record, its seq 0 until it is published or written:
    ``data[2]``), ``A`` and ``B`` (for linearization/A and /B), or ``error`` (the drop's text,
    reason ``linearize``)."""
    __slots__ = ("data", "A", "B", "error")

    def __init__(self, data=None, A=None, B=None, error=None):
        self.data, self.A, self.B, self.error = data, A, B, error


class RecordComputer:
    """The records of a model and the node's configuration: the contacts (sl.Contact, configured
    order), the loops, ``contact_mode`` (rigid or forces), ``dt`` (0: continuous only), the
    sections ``omit`` leaves out and the description's id; ``alloc(K, n)``: the (K, n) float64
    array K records of n values are written into (the bag tool's: views of their serialized
    messages; None: a new array)."""

    def __init__(self, model, contacts, loops, contact_mode: str, dt: float, omit, description_id: int,
                 alloc=None):
        self.model, self.contacts, self.loops = model, list(contacts), list(loops)
        self.alloc = alloc
        self.rigid = contact_mode != "forces"
        self.dt, self.omit, self.description_id = float(dt), tuple(omit), int(description_id)
        self.n_loop_rows = sum(lp.dim for lp in self.loops)
        self._dims = [c.dim for c in self.contacts]

    def compute(self, states) -> list:
        """The records of :class:`.inputs.Paired` states -> one :class:`Computed` per state, in order.
        A state whose linearization fails (or gives a non-finite number) gets its error; the others
        their records, as if each had been computed alone."""
        states = list(states)
        if not states:
            return []
        try:
            h, F = self._horizon(states)
        except Exception as e:
            if len(states) == 1:
                return [Computed(error=f"linearization failed: {_reason(e)}")]
            k = _failed_knot(e)
            if k is None or not 0 <= k < len(states):     # not a knot's failure: halve until it is one
                k = len(states) // 2
                return self.compute(states[:k]) + self.compute(states[k:])
            return self.compute(states[:k]) + self.compute(states[k:k + 1]) + self.compute(states[k + 1:])
        out = [None] * len(states)
        groups: dict = {}                       # the knots by their active contacts: one layout each
        for k in range(len(states)):
            groups.setdefault(tuple(h.active[k]) if self.contacts else (), []).append(k)
        for on, ks in groups.items():
            self._records(h, F, np.array(ks, dtype=np.intp), on, states, out)
        return out

    def _horizon(self, states):
        model, dt = self.model, self.dt or None
        Q = np.array([st.q for st in states])
        V = np.array([st.v for st in states])
        T = np.array([st.tau for st in states])
        if not self.contacts:
            return sl.linearize_horizon(model, Q, V, T, dt, contacts=self.loops, touchdowns=False), None
        index = {id(c): i for i, c in enumerate(self.contacts)}
        on = np.zeros((len(states), len(self.contacts)), dtype=bool)
        for k, st in enumerate(states):
            on[k, [index[id(c)] for c in st.active]] = True
        if self.rigid:
            return sl.linearize_horizon(model, Q, V, T, dt, contacts=self.contacts + self.loops, active=on,
                                        touchdowns=False), None
        F = np.zeros((len(states), sum(self._dims)))
        offsets = np.cumsum([0] + self._dims)
        for k, st in enumerate(states):
            for c, f in zip(st.active, st.forces):
                i = index[id(c)]
                F[k, offsets[i]:offsets[i + 1]] = f
        forces = [(c, F[:, offsets[i]:offsets[i + 1]]) for i, c in enumerate(self.contacts)]
        return sl.linearize_horizon(model, Q, V, T, dt, contacts=self.loops, forces=forces, active=on,
                                    touchdowns=False), F

    def _records(self, h, F, ks, on, states, out) -> None:
        """The records of the knots ``ks`` (the same active contacts ``on``) into ``out``, encoded at once."""
        model = self.model
        q = []
        for k in ks:
            st = states[k]
            try:
                q.append(sl.State.from_vectors(model, st.q, st.v).q)   # the point as the State holds it (normalised)
            except Exception as e:
                out[k] = Computed(error=f"linearization failed: {_reason(e)}")
        if len(q) < len(ks):
            ks = np.array([k for k in ks if out[k] is None], dtype=np.intp)
            if not len(ks):
                return
        group = [states[k] for k in ks]
        parts, nw, m = knot_sections(h, ks, on, self.rigid, model.nj, self.n_loop_rows, bool(self.dt),
                                     F[ks] if F is not None else None)
        B = parts["B"]
        parts.update(q=np.array(q), v=np.array([st.v for st in group]), tau=np.array([st.tau for st in group]))
        if group[0].odom is not None:
            parts["odom_stamp"] = np.array([divmod(int(st.odom.stamp), _NS) for st in group], dtype=np.float64)
        for name in self.omit:
            parts.pop(name, None)
        data = encode_records(self.description_id, np.zeros(len(ks)), [st.stamp for st in group], model.nv,
                              model.nj, nw, m, self.dt, parts, self.alloc)
        finite = np.isfinite(data).all(axis=1)
        for j, k in enumerate(ks):
            if finite[j]:
                out[k] = Computed(data[j], h.A[k], B[j])
            else:       # never a non-finite number out: the whole record or nothing
                bad = next(name for name, x in parts.items() if not np.all(np.isfinite(x[j])))
                out[k] = Computed(error=f"linearization: {bad} has NaN or infinite entries (nothing published "
                                        f"for this state)")


def _failed_knot(e) -> int | None:
    """The knot a horizon's error names (KnotError's ``knot``, else its message), or None."""
    k = getattr(e, "knot", None)
    if isinstance(k, int):
        return k
    match = _KNOT.match(str(e))
    return int(match.group(1)) if match else None


def _reason(e) -> str:
    """An error as the node's drop names it: its type and message, without the horizon's knot prefix."""
    return f"{type(e).__name__}: {_KNOT.sub('', str(e))}"
