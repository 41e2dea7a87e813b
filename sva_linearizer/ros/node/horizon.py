# SPDX-License-Identifier: BSD-3-Clause
"""A planner's horizon over ROS 2: the request a planner sends and the answer the node returns.

A planner in another process sends its predicted trajectory as one ``linearization/horizon/request``
(std_msgs/Float64MultiArray): an id, N knots (q, v, tau, the active contacts, the input forces),
dt. The node answers with one ``linearization/horizon/answer`` (std_msgs/Float64MultiArray): the id
echoed and, for each knot, a complete linearization record (:mod:`.record`), all computed in one
call of :func:`sva_linearizer.linearize_horizon`. A bad request gets an answer with the id, a
status and a one-line reason, never a partial one. docs/ros.md ("The planner's horizon") is the
definition a client in any language is written from; this module is its Python implementation.

Request ``data`` (``layout.dim = [("knots", N, N*S), ("values", S, S)]``, ``data_offset`` = 13)::

    data[0]  format (REQUEST_FORMAT)       data[7]  nq
    data[1]  request id (1 .. 2^53)        data[8]  nv
    data[2]  description id                data[9]  nj
    data[3]  N: knots                      data[10] C: contacts (the description's, in its order)
    data[4]  dt (s; 0: continuous only)    data[11] omit: bit k leaves record section k out
    data[5]  t0: sec (knot 0's time)       data[12] restitution e in [0, 1] of the touchdowns' impacts
    data[6]  t0: nanosec
    data[13 + k S ...]: knot k = q (nq), v (nv), tau (nj), active (C, 1.0 / 0.0), forces (F)

F is the sum of the contacts' dims with ``contact_mode: forces`` (their forces as inputs), else 0.
The node also reads format 1: the same without data[12] (``data_offset`` = 12), restitution 0.

Answer ``data`` (``layout.dim = [(label, n, n)]``, label ``horizon_answer``, or
``horizon_error: <reason>`` for an answer without knots)::

    data[0]  format (ANSWER_FORMAT)        data[4]  N: knots that follow (0 with an error)
    data[1]  the request id                data[5]  1 + the index of the knot that failed, else 0
    data[2]  the description id            data[6 + 2k], data[7 + 2k]: offset, length of knot k's record
    data[3]  status (STATUS_*)

Knot k's record is a linearization record (format and layout of ``linearization/record``) whose
seq is k + 1 and whose stamp is t0 + k dt; its sections' offsets count from its own first value.
With dt > 0 and rigid contacts, the record of a touchdown knot (a contact active at k and not at
k - 1) also holds reset, v_plus, impulses and dimpulses_dz (sva_linearizer.linearize_horizon's).
"""
from __future__ import annotations

import array
from dataclasses import dataclass

import numpy as np

from .compute import knot_sections
from .record import SECTIONS, RecordDescription, decode_record, encode_records, record_size

TOPIC_REQUEST = "linearization/horizon/request"
TOPIC_ANSWER = "linearization/horizon/answer"
REQUEST_FORMAT = 2
ANSWER_FORMAT = 1
REQUEST_HEADER = ("format", "request_id", "description", "knots", "dt", "t0_sec", "t0_nanosec", "nq", "nv", "nj",
                  "contacts", "omit", "restitution")
REQUEST_HEADER_SIZE = len(REQUEST_HEADER)
#: the header's size per request format the node reads (format 1: no restitution, e = 0)
_HEADER_SIZES = {1: REQUEST_HEADER_SIZE - 1, REQUEST_FORMAT: REQUEST_HEADER_SIZE}
ANSWER_HEADER_SIZE = 6
#: status of an answer: the knots follow; the request was refused (nothing computed); a knot's
#: linearization failed (a singular mass matrix or contact set, an overflow: no knot is returned);
#: the request waited behind newer ones while the node was busy and was not computed
STATUS_OK, STATUS_BAD_REQUEST, STATUS_KNOT_FAILED, STATUS_SUPERSEDED = 0, 1, 2, 3
#: the most knots a request may hold (the answer of 256 solo12 knots is about 8 MB)
MAX_KNOTS = 256
_NS = 1_000_000_000
_ID_LIMIT = 2 ** 53


class BadRequest(ValueError):
    """A request the node refuses: ``request_id`` (0 if it could not be read) and the reason."""

    def __init__(self, request_id: int, reason: str):
        super().__init__(reason)
        self.request_id = request_id


@dataclass
class HorizonRequest:
    """A decoded request: the knots in the description's order, the schedule and the forces."""
    request_id: int
    description_id: int
    dt: float
    t0_ns: int
    q: np.ndarray          # (N, nq)
    v: np.ndarray          # (N, nv)
    tau: np.ndarray        # (N, nj)
    active: np.ndarray     # (N, C) bool
    forces: np.ndarray     # (N, F)
    omit: frozenset        # section names left out of the answer's records
    restitution: float = 0.0   # e of the touchdowns' impacts

    @property
    def knots(self) -> int:
        return self.q.shape[0]


def _omit_mask(omit) -> int:
    unknown = [s for s in omit if s not in SECTIONS]
    if unknown:
        raise ValueError(f"omit: unknown section(s) {', '.join(unknown)} (the record's: {', '.join(SECTIONS)})")
    return sum(1 << SECTIONS.index(s) for s in set(omit))


def input_force_size(description: RecordDescription) -> int:
    """F: the values per knot of the input forces (contact_mode forces: every contact's dims)."""
    if description.contact_mode != "forces":
        return 0
    return sum(int(c["dim"]) for c in description.contacts)


def encode_request(request_id: int, description: RecordDescription, q, v, tau, dt: float = 0.0, active=None,
                   forces=None, t0_ns: int = 0, omit=(), restitution: float = 0.0) -> tuple[np.ndarray, int, int]:
    """A request's data for the knots q (N, nq), v (N, nv), tau (N, nj) in the description's joint
    order; active (N, C) (None: every contact at every knot); forces (N, F) (contact_mode forces);
    restitution: e of the impacts at the touchdowns. -> (data, N, S) for :func:`request_msg`."""
    q, v, tau = (np.atleast_2d(np.asarray(x, dtype=np.float64)) for x in (q, v, tau))
    N, C, F = q.shape[0], len(description.contacts), input_force_size(description)
    active = np.ones((N, C)) if active is None else np.asarray(active, dtype=np.float64).reshape(N, C)
    forces = np.zeros((N, F)) if forces is None else np.asarray(forces, dtype=np.float64).reshape(N, F)
    if not (q.shape == (N, description.nq) and v.shape == (N, description.nv) and tau.shape == (N, description.nj)):
        raise ValueError(f"encode_request: q, v, tau must be ({N}, {description.nq}), ({N}, {description.nv}), "
                         f"({N}, {description.nj}); got {q.shape}, {v.shape}, {tau.shape}")
    if not 0 < int(request_id) < _ID_LIMIT:
        raise ValueError(f"encode_request: the request id must be an integer from 1 to 2^53 - 1, got {request_id}")
    sec, nanosec = divmod(int(t0_ns), _NS)
    head = [REQUEST_FORMAT, int(request_id), description.id, N, float(dt), sec, nanosec, description.nq,
            description.nv, description.nj, C, _omit_mask(omit), float(restitution)]
    knots = np.hstack([q, v, tau, active, forces])
    return np.concatenate([np.asarray(head, dtype=np.float64), knots.reshape(-1)]), N, knots.shape[1]


def request_msg(types, data: np.ndarray, knots: int, stride: int):
    """std_msgs/Float64MultiArray of a request: dims ("knots", N, N*S), ("values", S, S), offset 13."""
    values = array.array("d")
    values.frombytes(np.ascontiguousarray(data, dtype="<f8").tobytes())
    dims = [types.MultiArrayDimension(label="knots", size=knots, stride=knots * stride),
            types.MultiArrayDimension(label="values", size=stride, stride=stride)]
    return types.Float64MultiArray(layout=types.MultiArrayLayout(dim=dims, data_offset=REQUEST_HEADER_SIZE),
                                   data=values)


def _whole(x: float, what: str, request_id: int, lo: int, hi: int) -> int:
    if not (np.isfinite(x) and x == int(x) and lo <= x <= hi):
        raise BadRequest(request_id, f"{what} must be a whole number from {lo} to {hi}, got {x:g}")
    return int(x)


def decode_request(msg, description: RecordDescription | None, max_knots: int = MAX_KNOTS) -> HorizonRequest:
    """A request message -> HorizonRequest, checked against the node's current description:
    BadRequest (with the request id when it could be read) naming the first problem."""
    x = np.asarray(msg.data, dtype=np.float64).reshape(-1)
    rid = 0
    if x.size >= 2 and np.isfinite(x[1]) and x[1] == int(x[1]) and 0 < x[1] < _ID_LIMIT:
        rid = int(x[1])
    if x.size < 1 or x[0] not in _HEADER_SIZES:
        raise BadRequest(rid, f"format {x[0] if x.size else float('nan'):g}, the node reads formats "
                              f"{', '.join(str(f) for f in _HEADER_SIZES)}")
    H = _HEADER_SIZES[int(x[0])]
    if x.size < H:
        raise BadRequest(rid, f"{x.size} values, shorter than the request's header ({H})")
    if rid == 0:
        raise BadRequest(0, f"the request id must be a whole number from 1 to 2^53 - 1, got {x[1]:g}")
    if description is None:
        raise BadRequest(rid, "the node has no robot model yet")
    desc_id = _whole(x[2], "the description id", rid, 0, _ID_LIMIT)
    if desc_id != description.id:
        raise BadRequest(rid, f"description {desc_id}: the node's description is {description.id} (re-read "
                              f"linearization/description)")
    N = _whole(x[3], "N (knots)", rid, 0, _ID_LIMIT)
    if not 1 <= N <= max_knots:
        raise BadRequest(rid, f"N = {N} knots: a request holds 1 to {max_knots}")
    dt = float(x[4])
    if not (np.isfinite(dt) and 0.0 <= dt <= 10.0):
        raise BadRequest(rid, f"dt = {dt:g}: expected 0 (continuous only) or a step up to 10 s")
    sec = _whole(x[5], "t0 sec", rid, 0, 2 ** 40)
    nanosec = _whole(x[6], "t0 nanosec", rid, 0, _NS - 1)
    sizes = tuple(_whole(x[7 + i], name, rid, 0, 1 << 20) for i, name in enumerate(("nq", "nv", "nj")))
    model_sizes = (description.nq, description.nv, description.nj)
    if sizes != model_sizes:
        raise BadRequest(rid, f"nq, nv, nj = {sizes}: the model's are {model_sizes}")
    C = _whole(x[10], "C (contacts)", rid, 0, 1 << 20)
    frames = [c["frame"] for c in description.contacts]
    if C != len(frames):
        raise BadRequest(rid, f"C = {C} active columns: the node has {len(frames)} contacts"
                              + (f" ({', '.join(frames)})" if frames else ""))
    mask = _whole(x[11], "omit", rid, 0, (1 << len(SECTIONS)) - 1)
    e = float(x[12]) if H > 12 else 0.0
    if not (np.isfinite(e) and 0.0 <= e <= 1.0):
        raise BadRequest(rid, f"restitution = {e:g}: expected a number in [0, 1]")
    F = input_force_size(description)
    nq, nv, nj = sizes
    S = nq + nv + nj + C + F
    dims = list(getattr(msg.layout, "dim", []))
    if (len(dims) != 2 or [d.label for d in dims] != ["knots", "values"] or int(dims[0].size) != N
            or int(dims[1].size) != S or int(msg.layout.data_offset) != H):
        raise BadRequest(rid, f"layout: expected dims ('knots', {N}), ('values', {S}) and data_offset {H}")
    if x.size != H + N * S:
        raise BadRequest(rid, f"{x.size} values: {N} knots of {S} (q {nq}, v {nv}, tau {nj}, active {C}, forces "
                              f"{F}) and the header make {H + N * S}")
    K = x[H:].reshape(N, S)
    bad = ~np.isfinite(K)
    if bad.any():
        k, j = (int(i) for i in np.argwhere(bad)[0])
        raise BadRequest(rid, f"knot {k}: value {j} is {K[k, j]} (NaN or infinite)")
    o = nq + nv + nj
    active = K[:, o:o + C]
    off = (active != 0.0) & (active != 1.0)
    if off.any():
        k, j = (int(i) for i in np.argwhere(off)[0])
        raise BadRequest(rid, f"knot {k}: active value of contact '{frames[j]}' is {active[k, j]:g} (1.0: active, "
                              f"0.0: inactive)")
    omit = frozenset(s for i, s in enumerate(SECTIONS) if mask >> i & 1)
    return HorizonRequest(rid, desc_id, dt, sec * _NS + nanosec, K[:, :nq].copy(), K[:, nq:nq + nv].copy(),
                          K[:, nq + nv:o].copy(), active == 1.0, K[:, o + C:].copy(), omit, e)


def error_answer(request_id: int, description_id: int, status: int, bad_knot: int | None = None) -> np.ndarray:
    """The data of an answer without knots (status STATUS_BAD_REQUEST or STATUS_KNOT_FAILED)."""
    return np.array([ANSWER_FORMAT, request_id, description_id, status, 0, 0 if bad_knot is None else bad_knot + 1],
                    dtype=np.float64)


def answer_msg(types, data, error: str | None = None):
    """std_msgs/Float64MultiArray of an answer: one dim labelled ``horizon_answer``, or
    ``horizon_error: <reason>`` (one line) for an answer without knots. ``data``: an
    array.array('d') (taken as it is, as :func:`encode_answer` gives it) or float64 values."""
    if isinstance(data, array.array) and data.typecode == "d":
        values = data
    else:
        values = array.array("d")
        values.frombytes(np.ascontiguousarray(data, dtype="<f8").tobytes())
    n = len(values)
    label = "horizon_answer" if error is None else "horizon_error: " + " ".join(str(error).split())
    return types.Float64MultiArray(
        layout=types.MultiArrayLayout(dim=[types.MultiArrayDimension(label=label, size=n, stride=n)], data_offset=0),
        data=values)


@dataclass
class HorizonAnswer:
    """A decoded answer: the request id, the status and error (None when ok), the knot that failed
    (or None), and the knots' records (:class:`.record.Record`, knot k's seq is k + 1)."""
    request_id: int
    description_id: int
    status: int
    error: str | None
    bad_knot: int | None
    knots: list

    @property
    def ok(self) -> bool:
        return self.status == STATUS_OK

    def stacked(self, section: str) -> np.ndarray:
        """One section of every knot stacked (N, ...); sections whose size varies over the knots
        (the forces under a contact schedule) are returned per knot instead: use ``knots``."""
        return np.stack([getattr(r, section) for r in self.knots])


def answer_request_id(msg) -> int:
    """The request id an answer echoes (0 if it has none)."""
    data = msg.data
    return int(data[1]) if len(data) >= ANSWER_HEADER_SIZE else 0


def decode_answer(msg, description: RecordDescription) -> HorizonAnswer:
    """An answer message -> HorizonAnswer (records decoded against the description whose id it
    names); ValueError when it is not an answer of this format or its tables do not fit."""
    x = np.asarray(msg.data, dtype=np.float64).reshape(-1)
    if x.size < ANSWER_HEADER_SIZE or x[0] != ANSWER_FORMAT:
        raise ValueError(f"linearization/horizon/answer: not an answer of format {ANSWER_FORMAT}")
    rid, desc_id, status, N, bad = (int(v) for v in x[1:ANSWER_HEADER_SIZE])
    label = msg.layout.dim[0].label if len(msg.layout.dim) else ""
    error = label[len("horizon_error: "):] if label.startswith("horizon_error: ") else None
    if status != STATUS_OK:
        return HorizonAnswer(rid, desc_id, status, error or f"status {status}", bad - 1 if bad else None, [])
    if desc_id != description.id:
        raise ValueError(f"linearization/horizon/answer: description {desc_id}, the reader has {description.id}")
    if x.size < ANSWER_HEADER_SIZE + 2 * N:
        raise ValueError(f"linearization/horizon/answer: {x.size} values, shorter than its knot table")
    knots = []
    for k in range(N):
        off, n = int(x[ANSWER_HEADER_SIZE + 2 * k]), int(x[ANSWER_HEADER_SIZE + 2 * k + 1])
        if off < ANSWER_HEADER_SIZE + 2 * N or off + n > x.size:
            raise ValueError(f"linearization/horizon/answer: knot {k} at {off} with {n} values does not fit")
        knots.append(decode_record(x[off:off + n], description))
    return HorizonAnswer(rid, desc_id, status, None, None, knots)


def encode_answer(request_id: int, description_id: int, request: HorizonRequest, h, contact_mode: str | None,
                  n_loop_rows: int, nv: int, nj: int) -> array.array:
    """The answer's data (status ok) for ``request`` from the horizon ``h`` (:class:`sva_linearizer.Horizon`)
    the node computed for it (its contacts: the configured ones, rigid or with their forces as inputs
    per ``contact_mode``, then the loops, whose ``n_loop_rows`` rows close ``h.forces``), as the
    array.array the message will carry: the header, the knot table, then the N records.

    Knot k's record holds what the node's record holds for a joint state at that knot: the active
    contacts' forces (rigid) or input forces and B's columns (forces) only, in configured order, then
    the loops'; seq k + 1, stamp t0 + k dt. The knots with one layout (the same active contacts, a
    touchdown or not) are encoded at once, their records side by side in the answer (the knot table
    says where each knot's record is), straight into the message's buffer."""
    q = request.q.copy()
    if q.shape[1] == nv + 1:                 # a floating base: the quaternion as the State holds it
        q[:, 3:7] /= np.linalg.norm(q[:, 3:7], axis=1, keepdims=True)
    N = request.knots
    stamps = request.t0_ns + np.rint(np.arange(N) * request.dt * _NS).astype(np.int64)
    touchdown = h.touchdown if h.touchdown is not None else np.zeros(N, dtype=bool)
    groups: dict = {}                        # the knots by their active contacts and touchdown: one layout each
    for k in range(N):
        groups.setdefault((tuple(request.active[k]), bool(touchdown[k])), []).append(k)
    encoded = []
    for (on, _), ks in groups.items():
        ks = np.array(ks, dtype=np.intp)
        parts, nw, m = knot_sections(h, ks, on, contact_mode != "forces", nj, n_loop_rows, request.dt > 0.0,
                                     request.forces[ks])
        parts.update(q=q[ks], v=request.v[ks], tau=request.tau[ks])
        for name in request.omit:
            parts.pop(name, None)
        encoded.append((ks, nw, m, parts, record_size(parts, len(ks))))
    head = ANSWER_HEADER_SIZE + 2 * N
    values = array.array("d", [0.0]) * (head + sum(len(ks) * n for ks, _, _, _, n in encoded))
    data = np.frombuffer(values, dtype=np.float64)
    data[:ANSWER_HEADER_SIZE] = (ANSWER_FORMAT, request_id, description_id, STATUS_OK, N, 0)
    o = head
    for ks, nw, m, parts, n in encoded:
        rows = data[o:o + len(ks) * n].reshape(len(ks), n)
        encode_records(description_id, ks + 1, stamps[ks], nv, nj, nw, m, request.dt, parts, lambda K, n_: rows)
        data[ANSWER_HEADER_SIZE + 2 * ks] = o + n * np.arange(len(ks))
        data[ANSWER_HEADER_SIZE + 2 * ks + 1] = n
        o += len(ks) * n
    return values
