# SPDX-License-Identifier: BSD-3-Clause
"""The linearization record: everything a planner needs about one input state, in ONE message.

For every joint state it accepts, the node publishes one ``linearization/record``
(std_msgs/Float64MultiArray). One DDS sample is delivered whole or not at all, so a consumer never
sees parts of two records, whatever the middleware drops. Its ``data`` begins with a fixed header
and a table of contents, then the sections (docs/ros.md, "The linearization record", is the
definition a consumer in any language is written from):

    data[0]  format (RECORD_FORMAT)        data[6]  nj: joints
    data[1]  description id                data[7]  nw: columns of B (nj, plus m with forces as inputs)
    data[2]  seq (1, 2, ... per node)      data[8]  m: rows of the constraint forces (contacts, loops)
    data[3]  stamp: sec                    data[9]  dt (0: continuous time only)
    data[4]  stamp: nanosec                data[10] S: number of sections (len(SECTIONS))
    data[5]  nv                            data[11 + 2k], data[12 + 2k]: offset and length of SECTIONS[k]

The sections follow the table of contents back to back, in table order, from data[HEADER_SIZE]:
the message holds HEADER_SIZE + the sum of the lengths values. A section that is absent (not
computed, left out by the ``record_omit`` parameter, or of length 0 such as the forces with no
contact active) has offset and length 0. Matrices are row-major. The names a record refers to
(joint names in column order, the configured contacts, the base frame, the z and w orderings)
change only with the model and the configuration: they are in ``linearization/description``
(std_msgs/String holding JSON, transient local like robot_description), whose ``id`` the records
carry in data[1].

:func:`decode_record` turns a ``data`` array into a :class:`Record`; a consumer on one of the
package's transports subscribes both with :class:`sva_linearizer.ros.client.record_reader.RecordReader`.
"""
from __future__ import annotations

import array
import json
import math
from dataclasses import dataclass, field

import numpy as np

RECORD_FORMAT = 3
TOPIC_RECORD = "linearization/record"
TOPIC_DESCRIPTION = "linearization/description"
# the point the record was computed at, as standard messages for tools (rviz, plotters, echo)
TOPIC_POINT_JOINTS = "linearization/point/joint_state"
TOPIC_POINT_ODOM = "linearization/point/odom"

HEADER = ("format", "description", "seq", "stamp_sec", "stamp_nanosec", "nv", "nj", "nw", "m", "dt",
          "sections")
#: The sections, in the order of the table of contents; sizes with nq = nv + 1 (floating base) or nv
#: (fixed base), C = the number of configured contacts:
#:   q (nq), v (nv), tau (nj): the point (flat vectors as State.from_vectors takes them);
#:   active (C): 1.0 / 0.0 per configured contact; input_forces (nw - nj): the forces the node was given
#:   (contact_mode forces); nu_dot (nv): the acceleration at the point (the drift's lower half);
#:   A (2nv x 2nv), B (2nv x nw); Ad, Bd (with dt > 0); q_next (nq), v_next (nv): the state the
#:   step of dt predicts from the point (sva_linearizer.next_state); forces (m), dforces_dz (m x 2nv),
#:   dforces_dtau (m x nj): the constraint forces (the active rigid contacts', then the loops') and
#:   their derivatives; odom_stamp (2: sec, nanosec): the stamp of the odometry sample that gave the
#:   point's base pose and twist (floating base), equal to the record's stamp when it was paired
#:   exactly; reset (2nv x 2nv), v_plus (nv), impulses (m), dimpulses_dz (m x 2nv): only in a horizon
#:   answer's record of a touchdown knot (rigid contacts, dt > 0): the impact where the step from the
#:   previous knot lands (sva_linearizer.linearize_horizon's touchdown sections; the impulses in the
#:   rows of ``forces``). New sections go at the end, so that the offsets of the others keep their
#:   place in the table.
SECTIONS = ("q", "v", "tau", "active", "input_forces", "nu_dot", "A", "B", "Ad", "Bd", "q_next", "v_next",
            "forces", "dforces_dz", "dforces_dtau", "odom_stamp", "reset", "v_plus", "impulses", "dimpulses_dz")
HEADER_SIZE = len(HEADER) + 2 * len(SECTIONS)
_NS = 1_000_000_000


def encode_record(description_id: int, seq: int, stamp_ns: int, nv: int, nj: int, nw: int, m: int, dt: float,
                  parts: dict, alloc=np.empty) -> np.ndarray:
    """The record's ``data``: `parts` maps section names to arrays (absent or None: left out);
    ``alloc(n)`` gives the float64 array of n values it is written into (e.g. a view of the message
    that will carry it). The one-record case of :func:`encode_records`."""
    batched = {name: None if x is None else np.asarray(x)[None] for name, x in parts.items()}
    return encode_records(description_id, [seq], [stamp_ns], nv, nj, nw, m, dt, batched,
                          lambda K, n: alloc(n).reshape(1, n))[0]


def record_size(parts: dict, K: int = 1) -> int:
    """The values of one record whose sections are ``parts`` (as :func:`encode_records` takes them,
    K records' rows stacked)."""
    return HEADER_SIZE + sum(np.size(x) // K for x in parts.values() if x is not None and K)


def encode_records(description_id: int, seqs, stamps_ns, nv: int, nj: int, nw: int, m: int, dt: float,
                   parts: dict, alloc=None) -> np.ndarray:
    """K records of one layout (the same sizes: one model, one active contact set), row k for
    ``seqs[k]``, ``stamps_ns[k]``: `parts` maps section names to (K, ...) arrays, row k of each
    record k's section (absent or None: left out) -> (K, n) ``data``; ``alloc(K, n)`` gives the
    (K, n) float64 array they are written into (rows may be strided: views of K messages)."""
    K = len(stamps_ns)
    toc, flat, o = [], [], HEADER_SIZE
    for name in SECTIONS:
        x = parts.get(name)
        n = 0 if x is None else np.size(x) // K if K else 0
        if n == 0:
            toc += (0, 0)
            continue
        toc += (o, n)
        flat.append(np.reshape(x, (K, n)))
        o += n
    out = np.empty((K, o)) if alloc is None else alloc(K, o)
    stamps = np.asarray(stamps_ns, dtype=np.int64).reshape(K)
    head = out[:, :HEADER_SIZE]
    head[:] = [RECORD_FORMAT, description_id, 0, 0, 0, nv, nj, nw, m, dt, len(SECTIONS)] + toc
    head[:, 2] = seqs
    head[:, 3], head[:, 4] = np.divmod(stamps, _NS)
    if flat:
        np.concatenate(flat, axis=1, out=out[:, HEADER_SIZE:], casting="same_kind")
    return out


def stamp_section(stamp_ns: int) -> np.ndarray:
    """A stamp as the record holds it (section odom_stamp): [sec, nanosec], both exact in float64."""
    return np.array(divmod(int(stamp_ns), _NS), dtype=np.float64)


def record_msg(types, data: np.ndarray):
    """std_msgs/Float64MultiArray of a record's data: one dimension ("record", n, n), offset 0."""
    values = array.array("d")
    values.frombytes(np.ascontiguousarray(data, dtype="<f8").tobytes())
    n = len(values)
    return types.Float64MultiArray(
        layout=types.MultiArrayLayout(dim=[types.MultiArrayDimension(label="record", size=n, stride=n)],
                                      data_offset=0),
        data=values)


@dataclass
class RecordDescription:
    """What ``linearization/description`` says (see :func:`description_json`)."""
    id: int
    joint_names: tuple
    floating_base: bool
    base_frame: str
    nq: int
    nv: int
    nj: int
    z_names: tuple
    contact_mode: str | None
    contacts: tuple        # ({"frame", "kind", "dim", "reference", "offset", "baumgarte"}, ...)
    dt: float
    omitted: tuple
    raw: dict = field(repr=False, default_factory=dict)
    loops: tuple = ()      # ({"frame_a", "frame_b", "kind", "dim", "reference", ...}, ...): always active
    run: str = ""          # the node run that publishes it: another run restarts seq (and id) at 1

    @classmethod
    def from_json(cls, text: str) -> "RecordDescription":
        d = json.loads(text)
        if d.get("format") != RECORD_FORMAT:
            raise ValueError(f"linearization/description: format {d.get('format')!r}, this reader knows "
                             f"{RECORD_FORMAT}")
        return cls(int(d["id"]), tuple(d["joint_names"]), bool(d["floating_base"]), d["base_frame"],
                   int(d["nq"]), int(d["nv"]), int(d["nj"]), tuple(d["z"]), d.get("contact_mode"),
                   tuple(d.get("contacts", ())), float(d["dt"]), tuple(d.get("omitted", ())), d,
                   tuple(d.get("loops", ())), str(d.get("run", "")))


def description_json(description_id: int, model, z_names, contacts=(), contact_mode=None, dt=0.0,
                     omitted=(), base_frame: str | None = None, loops=(), run: str = "") -> str:
    """The JSON text of ``linearization/description`` for a model and the node's configuration
    (base_frame: the odometry's child frame, default the model's root link; run: the node run's
    identifier, new at each start)."""
    nq = model.nv + 1 if model.floating_base else model.nv
    return json.dumps({
        "format": RECORD_FORMAT, "id": int(description_id), "run": run,
        "joint_names": list(model.joint_names), "floating_base": bool(model.floating_base),
        "base_frame": base_frame or model.base_name,
        "nq": nq, "nv": model.nv, "nj": model.nj,
        "z": list(z_names),
        "contact_mode": contact_mode if contacts else None,
        "contacts": [{"frame": c.frame, "kind": c.kind, "dim": c.dim, "reference": c.reference,
                      "offset": [float(x) for x in c.offset], "baumgarte": [float(x) for x in c.baumgarte]}
                     for c in contacts],
        "loops": [{"frame_a": lp.frame_a, "frame_b": lp.frame_b, "kind": lp.kind, "dim": lp.dim,
                   "reference": lp.reference, "offset_a": [float(x) for x in lp.offset_a],
                   "offset_b": [float(x) for x in lp.offset_b], "axis": [float(x) for x in lp.axis],
                   "baumgarte": [float(x) for x in lp.baumgarte]} for lp in loops],
        "dt": float(dt), "sections": list(SECTIONS), "omitted": list(omitted),
    })


@dataclass
class Record:
    """One decoded record. The point: ``q``, ``v``, ``tau`` (flat, as State.from_vectors), the
    active contacts ``contacts`` [(frame, dim)] in the order their components stack, and with
    forces as inputs ``input_forces``; the drift ``nu_dot`` (``f0`` = [v; nu_dot], so that
    z_dot = f0 + A dz + B dw); ``A``, ``B``; with dt > 0 ``Ad``, ``Bd``, ``q_next``, ``v_next``;
    with rigid contacts ``forces``, ``dforces_dz``, ``dforces_dtau``; with a floating base
    ``odom_stamp`` ([sec, nanosec] of the odometry used, ``odom_stamp_ns``); in a horizon answer's
    touchdown knot ``reset``, ``v_plus``, ``impulses``, ``dimpulses_dz``. A section left out is None."""
    seq: int
    stamp_ns: int
    description: RecordDescription
    nv: int
    nj: int
    nw: int
    m: int
    dt: float
    contacts: tuple
    q: np.ndarray | None = None
    v: np.ndarray | None = None
    tau: np.ndarray | None = None
    active: np.ndarray | None = None
    input_forces: np.ndarray | None = None
    nu_dot: np.ndarray | None = None
    A: np.ndarray | None = None
    B: np.ndarray | None = None
    Ad: np.ndarray | None = None
    Bd: np.ndarray | None = None
    q_next: np.ndarray | None = None
    v_next: np.ndarray | None = None
    forces: np.ndarray | None = None
    dforces_dz: np.ndarray | None = None
    dforces_dtau: np.ndarray | None = None
    odom_stamp: np.ndarray | None = None
    reset: np.ndarray | None = None
    v_plus: np.ndarray | None = None
    impulses: np.ndarray | None = None
    dimpulses_dz: np.ndarray | None = None

    @property
    def odom_stamp_ns(self) -> int | None:
        """The stamp (ns) of the odometry sample that gave the point's base (floating base), else None;
        equal to ``stamp_ns`` when the joint state was paired with the odometry of its own stamp."""
        if self.odom_stamp is None:
            return None
        return int(self.odom_stamp[0]) * _NS + int(self.odom_stamp[1])

    @property
    def joint_names(self) -> tuple:
        return self.description.joint_names

    @property
    def mode(self) -> str | None:
        return self.description.contact_mode

    @property
    def loops(self) -> tuple:
        """The loops [(frame_a, frame_b, dim)], always active; their forces follow the contacts'."""
        return tuple((lp["frame_a"], lp["frame_b"], int(lp["dim"])) for lp in self.description.loops)

    @property
    def f0(self) -> np.ndarray | None:
        """z_dot at the point: [v; nu_dot] (2nv)."""
        if self.v is None or self.nu_dot is None:
            return None
        return np.concatenate([self.v, self.nu_dot])


def _shapes(description: RecordDescription, nv: int, nj: int, nw: int, m: int) -> dict:
    n2, nq = 2 * nv, description.nq
    return {"q": (nq,), "v": (nv,), "tau": (nj,), "active": (len(description.contacts),), "input_forces": (nw - nj,),
            "nu_dot": (nv,), "A": (n2, n2), "B": (n2, nw), "Ad": (n2, n2), "Bd": (n2, nw), "q_next": (nq,),
            "v_next": (nv,), "forces": (m,), "dforces_dz": (m, n2), "dforces_dtau": (m, nj), "odom_stamp": (2,),
            "reset": (n2, n2), "v_plus": (nv,), "impulses": (m,), "dimpulses_dz": (m, n2)}


def decode_record(data, description: RecordDescription) -> Record:
    """A record's ``data`` (any sequence of float64) -> :class:`Record`; ValueError when it is not
    a record of this format and description, or its table of contents does not fit its sizes."""
    x = np.asarray(data, dtype=np.float64).reshape(-1)
    if x.size < HEADER_SIZE:
        raise ValueError(f"linearization/record: {x.size} values, shorter than the header ({HEADER_SIZE})")
    head = dict(zip(HEADER, x[:len(HEADER)]))
    if head["format"] != RECORD_FORMAT or head["sections"] != len(SECTIONS):
        raise ValueError(f"linearization/record: format {head['format']:g} with {head['sections']:g} sections, "
                         f"this reader knows format {RECORD_FORMAT} with {len(SECTIONS)}")
    if int(head["description"]) != description.id:
        raise ValueError(f"linearization/record: description {head['description']:g}, the reader has "
                         f"{description.id}")
    nv, nj, nw, m = (int(head[k]) for k in ("nv", "nj", "nw", "m"))
    if (nv, nj) != (description.nv, description.nj):
        raise ValueError(f"linearization/record: nv {nv}, nj {nj} against the description's "
                         f"{description.nv}, {description.nj}")
    shapes = _shapes(description, nv, nj, nw, m)
    parts = {}
    for k, name in enumerate(SECTIONS):
        off, n = int(x[len(HEADER) + 2 * k]), int(x[len(HEADER) + 2 * k + 1])
        if n == 0:
            continue
        shape = shapes[name]
        if n != math.prod(shape) or off < HEADER_SIZE or off + n > x.size:
            raise ValueError(f"linearization/record: section {name} at {off} with {n} values does not fit "
                             f"a {shape} in {x.size} values")
        parts[name] = x[off:off + n].reshape(shape)
    contacts = ()
    if "active" in parts:
        contacts = tuple((c["frame"], int(c["dim"])) for c, on in zip(description.contacts, parts["active"])
                         if on)
    sec, nanosec = int(head["stamp_sec"]), int(head["stamp_nanosec"])
    return Record(int(head["seq"]), sec * _NS + nanosec, description, nv, nj, nw, m, float(head["dt"]), contacts,
                  **parts)
