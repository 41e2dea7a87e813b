# SPDX-License-Identifier: BSD-3-Clause
"""Plain little-endian CDR (XCDR1, ROS 2's wire format) for the node's hot message types, in one
pass with ``struct`` and ``array``: JointState and Odometry (decode and encode), Float64MultiArray
(encode and decode). No DDS library needed: the DDS transport uses these inside its cyclonedds
types (:mod:`.dds_types`), the rclpy transport to decode odometry from the raw bytes.

Decoders take a namespace ``T`` of message classes called with keyword arguments (the DDS structs,
or :data:`LIGHT`'s plain attribute objects); encoders read attributes of any message object.
Truncated or malformed input raises ValueError (or struct.error / UnicodeDecodeError).
"""
import array as pyarray
import struct
import sys
from types import SimpleNamespace

# The cyclonedds package (de)serialises field by field in Python, several times slower than one
# pass (an Odometry carries two 36-element covariances, an A up to thousands of doubles), which at
# 1 kHz is most of the DDS node's time per pair (docs/ros.md, "Node performance"). For the hot
# types - JointState and Odometry in, Float64MultiArray out and back in the receivers - these
# functions do the same plain little-endian CDR (XCDR1) with struct and array in one pass.
# Anything else (big endian, XCDR2, a buffer argument) takes the generic path; test_ros_cdr.py
# checks both ways against the generic code and against rosbags.
_HEAD_LE = b"\x00\x01\x00\x00"
_U32 = struct.Struct("<I")
_TIME = struct.Struct("<iI")
_ODOM_TAIL = struct.Struct("<85d")    # pose (7), covariance (36), twist (6), covariance (36)
_LITTLE = sys.byteorder == "little"

#: Plain attribute objects for decoded messages (the node only reads attributes): what the rclpy
#: transport's raw odometry subscription hands to the node instead of building rclpy messages.
LIGHT = SimpleNamespace(**{n: SimpleNamespace for n in (
    "Time", "Header", "JointState", "Point", "Quaternion", "Pose", "PoseWithCovariance", "Vector3", "Twist",
    "TwistWithCovariance", "Odometry", "MultiArrayDimension", "MultiArrayLayout", "Float64MultiArray")})


def _a4(o):
    return (o + 3) & ~3                 # offsets are absolute; the payload starts at 4


def _a8(o):
    return ((o - 4 + 7) & ~7) + 4


def _need(b, end):
    if end > len(b):
        raise ValueError("CDR: truncated sample")


def _get_str(b, o):
    o = _a4(o)
    _need(b, o + 4)
    n = _U32.unpack_from(b, o)[0]
    o += 4
    _need(b, o + n)
    if n == 0:
        return "", o
    if b[o + n - 1] != 0:
        raise ValueError("CDR: string without terminating NUL")
    return bytes(b[o:o + n - 1]).decode("utf-8"), o + n


def _get_f64seq(b, o):
    o = _a4(o)
    _need(b, o + 4)
    n = _U32.unpack_from(b, o)[0]
    o += 4
    out = pyarray.array("d")
    if n:
        o = _a8(o)
        _need(b, o + 8 * n)
        out.frombytes(bytes(b[o:o + 8 * n]))
        o += 8 * n
    return out, o


def _get_header(b, o, T):
    _need(b, o + 8)
    sec, nanosec = _TIME.unpack_from(b, o)
    frame_id, o = _get_str(b, o + 8)
    return T.Header(stamp=T.Time(sec=sec, nanosec=nanosec), frame_id=frame_id), o


class _Out:
    """Little-endian CDR writer (absolute offsets, payload from 4)."""
    __slots__ = ("parts", "n")

    def __init__(self):
        self.parts, self.n = [_HEAD_LE], 4

    def pad(self, k):
        p = (-(self.n - 4)) % k
        if p:
            self.parts.append(b"\x00" * p)
            self.n += p

    def raw(self, data):
        self.parts.append(data)
        self.n += len(data)

    def u32(self, v):
        self.pad(4)
        self.raw(_U32.pack(v))

    def str(self, text):
        data = text.encode("utf-8") + b"\x00"
        self.u32(len(data))
        self.raw(data)

    def header(self, h):
        self.pad(4)
        self.raw(_TIME.pack(h.stamp.sec, h.stamp.nanosec))
        self.str(h.frame_id)

    def f64seq(self, values):
        if not (isinstance(values, pyarray.array) and values.typecode == "d"):
            values = pyarray.array("d", values)
        self.u32(len(values))
        if len(values):
            self.pad(8)
            self.raw(values.tobytes())

    def bytes(self):
        return b"".join(self.parts)


def fast_in(data, has_header=True, use_version_2=None):
    """Whether a serialized sample is plain little-endian CDR (XCDR1) with its header."""
    return _LITTLE and has_header and not use_version_2 and bytes(data[:2]) == b"\x00\x01"


def fast_out(buffer, little_endian, use_version_2):
    return _LITTLE and buffer is None and not use_version_2 and little_endian


def decode_joint_state(b, T=LIGHT):
    """sensor_msgs/JointState from CDR bytes (with the 4-byte header), built with T's classes."""
    header, o = _get_header(b, 4, T)
    o = _a4(o)
    _need(b, o + 4)
    n = _U32.unpack_from(b, o)[0]
    o += 4
    _need(b, o + 4 * n)
    names = []
    for _ in range(n):
        name, o = _get_str(b, o)
        names.append(name)
    position, o = _get_f64seq(b, o)
    velocity, o = _get_f64seq(b, o)
    effort, o = _get_f64seq(b, o)
    return T.JointState(header=header, name=names, position=position, velocity=velocity, effort=effort)


def encode_joint_state(m):
    w = _Out()
    w.header(m.header)
    w.u32(len(m.name))
    for name in m.name:
        w.str(name)
    w.f64seq(m.position)
    w.f64seq(m.velocity)
    w.f64seq(m.effort)
    return w.bytes()


def decode_odometry(b, T=LIGHT):
    """nav_msgs/Odometry from CDR bytes (with the 4-byte header), built with T's classes."""
    header, o = _get_header(b, 4, T)
    child, o = _get_str(b, o)
    o = _a8(o)
    _need(b, o + _ODOM_TAIL.size)
    v = _ODOM_TAIL.unpack_from(b, o)
    pose = T.PoseWithCovariance(pose=T.Pose(position=T.Point(x=v[0], y=v[1], z=v[2]),
                                            orientation=T.Quaternion(x=v[3], y=v[4], z=v[5], w=v[6])),
                                covariance=list(v[7:43]))
    twist = T.TwistWithCovariance(twist=T.Twist(linear=T.Vector3(x=v[43], y=v[44], z=v[45]),
                                                angular=T.Vector3(x=v[46], y=v[47], z=v[48])),
                                  covariance=list(v[49:85]))
    return T.Odometry(header=header, child_frame_id=child, pose=pose, twist=twist)


def encode_odometry(m):
    w = _Out()
    w.header(m.header)
    w.str(m.child_frame_id)
    w.pad(8)
    p, q = m.pose.pose.position, m.pose.pose.orientation
    t = m.twist.twist
    pc, tc = list(m.pose.covariance), list(m.twist.covariance)
    if len(pc) != 36 or len(tc) != 36:
        raise ValueError("Odometry: covariances must have 36 entries")
    w.raw(_ODOM_TAIL.pack(p.x, p.y, p.z, q.x, q.y, q.z, q.w, *pc,
                          t.linear.x, t.linear.y, t.linear.z, t.angular.x, t.angular.y, t.angular.z, *tc))
    return w.bytes()


def decode_f64multiarray(b, T=LIGHT):
    """std_msgs/Float64MultiArray from CDR bytes (``data`` an array.array('d'))."""
    o = 4
    _need(b, o + 4)
    n = _U32.unpack_from(b, o)[0]
    o += 4
    dims = []
    for _ in range(n):
        label, o = _get_str(b, o)
        o = _a4(o)
        _need(b, o + 8)
        size, stride = struct.unpack_from("<II", b, o)
        o += 8
        dims.append(T.MultiArrayDimension(label=label, size=size, stride=stride))
    o = _a4(o)
    _need(b, o + 4)
    data_offset = _U32.unpack_from(b, o)[0]
    data, o = _get_f64seq(b, o + 4)
    return T.Float64MultiArray(layout=T.MultiArrayLayout(dim=dims, data_offset=data_offset), data=data)


def encode_f64multiarray(m):
    w = _Out()
    w.u32(len(m.layout.dim))
    for d in m.layout.dim:
        w.str(d.label)
        w.u32(d.size)
        w.u32(d.stride)
    w.u32(m.layout.data_offset)
    w.f64seq(m.data)
    return w.bytes()
