"""Transport-independent message helpers: stamps, matrices as Float64MultiArray, and A/B pairing.

Everything here works on *any* object with the ROS 2 field names: rclpy messages, the Cyclone DDS
IDL structs of :mod:`sva_linearizer.ros.dds_types`, or plain namespaces in tests. Messages are built
through a ``types`` namespace that has the ROS class names (``types.Float64MultiArray`` ...), which
each transport provides.

Pairing A and B with their input (for users: docs/ros.md, "Pairing A and B with their input")
-----------------------------------------------------------------------------------------------
For every accepted joint state the node publishes three messages, in this order:

1. ``linearization/A``: std_msgs/Float64MultiArray, A row-major,
   ``layout.dim = [("rows", r, r*c), ("cols", c, c)]``, ``data_offset = 0``;
2. ``linearization/B``: the same for B;
   (with rigid contacts then ``linearization/forces``, ``/dforces_dz``, ``/dforces_dtau``, below);
3. ``linearization/stamp``: std_msgs/Header, the *commit record* of the pair:
   ``stamp`` = the stamp of the joint state the pair was computed from (the receive time when
   that stamp is zero) and ``frame_id = "seq=<n> A=<crc32 of A> B=<crc32 of B>"``, where ``n``
   counts published pairs from 1 and each crc32 is the IEEE CRC-32 (zlib's) of the matrix's
   ``data`` as little-endian float64 bytes (8 lowercase hex digits), i.e. of the exact payload
   the A or B message carries.

A and B keep the standard layout with no room for an id, and DDS orders samples only per topic,
so the pairing is *content-addressed*: a subscriber keeps the last few A and B messages it got,
and when a stamp record arrives (or an A or B after it), it takes the A and the B whose CRC-32s
the record names. That needs no ordering across topics, survives drops on any of the three
topics (a pair with a missing part is never completed, never mixed with another), and late
joiners. Two buffered messages with the same CRC-32 but different content would be needed to
pair wrongly (probability about depth * 2**-32 per pair); identical content is interchangeable.
:class:`Pairer` implements this for Python subscribers; in C++ it is ``crc32()`` from zlib over
``data.data()``, ``data.size() * 8`` bytes. Consumers that only want "the latest A and B" may ignore
the stamp topic.

With contacts configured, the record goes on with space-separated ``key=value`` fields, so that a
planner can tell what B's columns and the force rows are (see :func:`pair_frame_id`)::

    seq=7 A=<crc> B=<crc> mode=rigid contacts=FL_FOOT:3,FR_FOOT:3 F=<crc> dFdz=<crc> dFdtau=<crc>
    seq=8 A=<crc> B=<crc> mode=forces contacts=left_sole_link:6,right_sole_link:6

``contacts`` lists the active contacts (frame:dimension) in the configured order, the order in
which their components stack in the forces and in B's extra columns; it is empty when none is
active. ``mode=rigid``: the ``linearization/forces`` (m x 1), ``/dforces_dz`` (m x 2nv) and
``/dforces_dtau`` (m x nj) messages of the pair are named by their CRC-32s ``F``, ``dFdz``,
``dFdtau`` (they belong to the pair like A and B). ``mode=forces``: B is [B_tau | B_f], nj + m
columns. Readers must ignore keys they do not know (later fields may be added).
"""
from __future__ import annotations

import array
import re
import zlib
from collections import OrderedDict, deque
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

#: Every ROS 2 message type the package sends or receives, nested types included. Each transport
#: exposes them by short name (``types.JointState``) with the ROS 2 field names.
ROS_TYPES = (
    "builtin_interfaces/msg/Time", "std_msgs/msg/Header", "std_msgs/msg/String",
    "std_msgs/msg/MultiArrayDimension", "std_msgs/msg/MultiArrayLayout", "std_msgs/msg/Float64MultiArray",
    "sensor_msgs/msg/JointState", "geometry_msgs/msg/Point", "geometry_msgs/msg/Vector3",
    "geometry_msgs/msg/Quaternion", "geometry_msgs/msg/Pose", "geometry_msgs/msg/PoseWithCovariance",
    "geometry_msgs/msg/Twist", "geometry_msgs/msg/TwistWithCovariance", "nav_msgs/msg/Odometry",
    "geometry_msgs/msg/Wrench", "geometry_msgs/msg/WrenchStamped",
)


def types_namespace(by_ros_name):
    """``{"pkg/msg/Type": cls}`` -> a namespace with the classes by short name (``ns.JointState``):
    the ``types`` a transport provides."""
    return SimpleNamespace(**{name.rsplit("/", 1)[1]: cls for name, cls in by_ros_name.items()})


TOPIC_A = "linearization/A"
TOPIC_B = "linearization/B"
TOPIC_STAMP = "linearization/stamp"
# rigid contacts: the contact forces at the linearization point and their derivatives
TOPIC_FORCES = "linearization/forces"
TOPIC_DFORCES_DZ = "linearization/dforces_dz"
TOPIC_DFORCES_DTAU = "linearization/dforces_dtau"

_NS = 1_000_000_000


def stamp_to_ns(stamp) -> int:
    """builtin_interfaces/Time -> integer nanoseconds."""
    return int(stamp.sec) * _NS + int(stamp.nanosec)


def ns_to_sec_nanosec(ns: int):
    sec, nanosec = divmod(int(ns), _NS)
    return sec, nanosec


def make_time(types, ns: int):
    sec, nanosec = ns_to_sec_nanosec(ns)
    return types.Time(sec=sec, nanosec=nanosec)


def matrix_payload(M) -> bytes:
    """The bytes a Float64MultiArray of M carries: row-major little-endian float64."""
    return np.ascontiguousarray(M, dtype="<f8").tobytes()


def crc32_hex(payload: bytes) -> str:
    return f"{zlib.crc32(payload) & 0xFFFFFFFF:08x}"


def data_crc32(data) -> str:
    """CRC-32 of a received Float64MultiArray's ``data`` (list, array.array or ndarray)."""
    return crc32_hex(np.asarray(data, dtype="<f8").tobytes())


def matrix_to_msg(types, M, payload: bytes | None = None):
    """std_msgs/Float64MultiArray with layout [("rows", r, r*c), ("cols", c, c)], offset 0."""
    rows, cols = M.shape
    data = array.array("d")
    data.frombytes(matrix_payload(M) if payload is None else payload)
    layout = types.MultiArrayLayout(
        dim=[types.MultiArrayDimension(label="rows", size=rows, stride=rows * cols),
             types.MultiArrayDimension(label="cols", size=cols, stride=cols)],
        data_offset=0)
    return types.Float64MultiArray(layout=layout, data=data)


def msg_to_matrix(msg) -> np.ndarray:
    """Inverse of :func:`matrix_to_msg`; raises ValueError for any other layout."""
    dims = list(msg.layout.dim)
    if len(dims) != 2 or dims[0].label != "rows" or dims[1].label != "cols":
        raise ValueError("Float64MultiArray: expected dims ('rows', 'cols')")
    rows, cols = int(dims[0].size), int(dims[1].size)
    if int(msg.layout.data_offset) != 0 or int(dims[0].stride) != rows * cols or int(dims[1].stride) != cols:
        raise ValueError("Float64MultiArray: expected a dense row-major layout with data_offset 0")
    data = np.asarray(msg.data, dtype=float)
    if data.size != rows * cols:
        raise ValueError(f"Float64MultiArray: {data.size} values for a {rows}x{cols} matrix")
    return data.reshape(rows, cols)


def pair_frame_id(seq: int, crc_a: str, crc_b: str, mode: str | None = None, contacts=(),
                  crc_forces: dict | None = None) -> str:
    """The pair record's frame_id. ``mode`` (None: no contacts configured, the record is the
    plain ``seq= A= B=``), ``contacts`` [(frame, dim)] active, ``crc_forces`` {"F", "dFdz",
    "dFdtau": crc} for rigid contacts."""
    text = f"seq={seq} A={crc_a} B={crc_b}"
    if mode is not None:
        text += f" mode={mode} contacts=" + ",".join(f"{f}:{d}" for f, d in contacts)
    for key in ("F", "dFdz", "dFdtau"):
        if crc_forces and key in crc_forces:
            text += f" {key}={crc_forces[key]}"
    return text


_FRAME_RE = re.compile(r"^seq=(\d+) A=([0-9a-f]{8}) B=([0-9a-f]{8})((?: [A-Za-z_]\w*=\S*)*)$")


def parse_pair_frame_id(frame_id: str):
    """-> (seq, crc_a, crc_b); ValueError if frame_id is not a pair record."""
    r = parse_pair_record(frame_id)
    return r.seq, r.crc_a, r.crc_b


@dataclass
class PairRecord:
    """A parsed pair record: ``contacts`` [(frame, dim)] active (empty without contacts),
    ``mode`` "rigid" / "forces" / None, ``crcs`` the CRC-32s by key (A, B and F, dFdz, dFdtau)."""
    seq: int
    crc_a: str
    crc_b: str
    mode: str | None
    contacts: tuple
    crcs: dict


def parse_pair_record(frame_id: str) -> PairRecord:
    """The pair record's fields; ValueError if frame_id is not a pair record."""
    m = _FRAME_RE.match(frame_id)
    if not m:
        raise ValueError(f"not an A/B pair record: {frame_id!r}")
    fields = dict(kv.split("=", 1) for kv in m.group(4).split())
    contacts = []
    for item in filter(None, fields.get("contacts", "").split(",")):
        frame, sep, dim = item.rpartition(":")
        if not sep or not dim.isdigit():
            raise ValueError(f"pair record: bad contacts entry {item!r}")
        contacts.append((frame, int(dim)))
    crcs = {"A": m.group(2), "B": m.group(3)}
    for key in ("F", "dFdz", "dFdtau"):
        if key in fields:
            if not re.fullmatch(r"[0-9a-f]{8}", fields[key]):
                raise ValueError(f"pair record: bad {key} checksum {fields[key]!r}")
            crcs[key] = fields[key]
    return PairRecord(int(m.group(1)), m.group(2), m.group(3), fields.get("mode"), tuple(contacts), crcs)


@dataclass
class Pair:
    """A completed pair: A, B and, with rigid contacts, the forces (m,) and their derivatives;
    ``contacts`` [(frame, dim)] active, ``mode`` as in the record (None without contacts)."""
    seq: int
    stamp_ns: int
    A: np.ndarray
    B: np.ndarray
    mode: str | None = None
    contacts: tuple = ()
    forces: np.ndarray | None = None
    dforces_dz: np.ndarray | None = None
    dforces_dtau: np.ndarray | None = None


_PARTS = ("A", "B", "F", "dFdz", "dFdtau")


class Pairer:
    """Pairs linearization/A, linearization/B and linearization/stamp messages (see module doc),
    and with rigid contacts linearization/forces, /dforces_dz and /dforces_dtau.

    Feed every received message to :meth:`add_A`, :meth:`add_B`, :meth:`add_stamp` (and
    :meth:`add_forces`, :meth:`add_dforces_dz`, :meth:`add_dforces_dtau`); each returns the list of
    pairs it completed (in sequence order). Memory is bounded by ``depth`` per topic.
    """

    def __init__(self, depth: int = 16):
        self.depth = depth
        self._stores = {k: OrderedDict() for k in _PARTS}
        self._pending: deque = deque()
        self.lost = 0  # stamp records dropped before their A and B arrived

    def _put(self, key, msg):
        store = self._stores[key]
        crc = data_crc32(msg.data)
        store[crc] = msg
        store.move_to_end(crc)
        return self._complete()

    def _trim(self):
        for store in self._stores.values():
            while len(store) > self.depth:
                store.popitem(last=False)
        while len(self._pending) > self.depth:
            self._pending.popleft()
            self.lost += 1

    def add_A(self, msg):
        return self._put("A", msg)

    def add_B(self, msg):
        return self._put("B", msg)

    def add_forces(self, msg):
        return self._put("F", msg)

    def add_dforces_dz(self, msg):
        return self._put("dFdz", msg)

    def add_dforces_dtau(self, msg):
        return self._put("dFdtau", msg)

    def add_stamp(self, header):
        self._pending.append((parse_pair_record(header.frame_id), stamp_to_ns(header.stamp)))
        return self._complete()

    def _complete(self):
        done, keep = [], deque()
        for rec, stamp in self._pending:
            msgs = {k: self._stores[k].get(crc) for k, crc in rec.crcs.items()}
            if any(m is None for m in msgs.values()):
                keep.append((rec, stamp))
                continue
            mats = {k: msg_to_matrix(m) for k, m in msgs.items()}
            F = mats.get("F")
            done.append(Pair(rec.seq, stamp, mats["A"], mats["B"], rec.mode, rec.contacts,
                             None if F is None else F.reshape(-1), mats.get("dFdz"), mats.get("dFdtau")))
        self._pending = keep
        self._trim()
        done.sort(key=lambda p: p.seq)
        return done


def _floats(x):
    out = array.array("d")
    out.frombytes(np.ascontiguousarray(x, dtype=float).tobytes())
    return out


def joint_state_msg(types, stamp_ns, names, position, velocity, effort=(), frame_id=""):
    """sensor_msgs/JointState from arrays (any iterable of floats)."""
    return types.JointState(header=types.Header(stamp=make_time(types, stamp_ns), frame_id=frame_id),
                            name=list(names), position=_floats(position), velocity=_floats(velocity),
                            effort=_floats(effort))


def contacts_msg(types, stamp_ns, frames, flags=None, frame_id=""):
    """The active contact set as sensor_msgs/JointState: ``name`` the contact frames; ``position``
    empty (every listed contact active) or one 1.0 (active) / 0.0 (inactive) per name."""
    return types.JointState(header=types.Header(stamp=make_time(types, stamp_ns), frame_id=frame_id),
                            name=list(frames), position=_floats([] if flags is None else flags),
                            velocity=_floats([]), effort=_floats([]))


def wrench_msg(types, stamp_ns, frame, force, torque=(0.0, 0.0, 0.0)):
    """geometry_msgs/WrenchStamped: a contact force (on the robot) in the contact's reference
    frame, ``header.frame_id`` the contact's frame name."""
    V = types.Vector3
    f, t = [float(x) for x in force], [float(x) for x in torque]
    return types.WrenchStamped(header=types.Header(stamp=make_time(types, stamp_ns), frame_id=frame),
                               wrench=types.Wrench(force=V(x=f[0], y=f[1], z=f[2]),
                                                   torque=V(x=t[0], y=t[1], z=t[2])))


def odometry_msg(types, stamp_ns, p, quat_xyzw, body_twist, frame_id="odom", child_frame_id="base_link"):
    """nav_msgs/Odometry: base pose in the world, twist [v_lin; w] in the base (child) frame."""
    P, Q, V = types.Point, types.Quaternion, types.Vector3
    pose = types.Pose(position=P(x=float(p[0]), y=float(p[1]), z=float(p[2])),
                      orientation=Q(x=float(quat_xyzw[0]), y=float(quat_xyzw[1]),
                                    z=float(quat_xyzw[2]), w=float(quat_xyzw[3])))
    t = [float(x) for x in body_twist]
    twist = types.Twist(linear=V(x=t[0], y=t[1], z=t[2]), angular=V(x=t[3], y=t[4], z=t[5]))
    return types.Odometry(header=types.Header(stamp=make_time(types, stamp_ns), frame_id=frame_id),
                          child_frame_id=child_frame_id,
                          pose=types.PoseWithCovariance(pose=pose, covariance=[0.0] * 36),
                          twist=types.TwistWithCovariance(twist=twist, covariance=[0.0] * 36))
