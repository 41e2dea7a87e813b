"""ROS 2 message types as Cyclone DDS (PyPI ``cyclonedds``) IDL structs.

ROS 2 maps ``pkg/msg/Type`` to the DDS type ``pkg::msg::dds_::Type_`` and serialises it as plain
(XCDR1) CDR, little-endian on these machines. The classes below mirror the ROS 2 Humble/Jazzy message
definitions field by field, with the ROS field names, so that the node's logic reads them exactly
like rclpy messages (``msg.header.stamp.sec``, ``msg.name``, ``msg.position`` ...). The test suite
checks their bytes against the ``rosbags`` package's ROS 2 Humble serialiser.

Only the types the node and its tools send or receive are defined here.
"""

import array as pyarray
import struct
import sys
from dataclasses import dataclass, field

from cyclonedds.idl import IdlStruct
from cyclonedds.idl._support import Endianness
from cyclonedds.idl.types import array, float64, int32, sequence, uint32

from .messages import ROS_TYPES


def _zeros36():
    return [0.0] * 36


@dataclass
class Time(IdlStruct, typename="builtin_interfaces::msg::dds_::Time_"):
    sec: int32 = 0
    nanosec: uint32 = 0


@dataclass
class Header(IdlStruct, typename="std_msgs::msg::dds_::Header_"):
    stamp: Time = field(default_factory=Time)
    frame_id: str = ""


@dataclass
class String(IdlStruct, typename="std_msgs::msg::dds_::String_"):
    data: str = ""


@dataclass
class MultiArrayDimension(IdlStruct, typename="std_msgs::msg::dds_::MultiArrayDimension_"):
    label: str = ""
    size: uint32 = 0
    stride: uint32 = 0


@dataclass
class MultiArrayLayout(IdlStruct, typename="std_msgs::msg::dds_::MultiArrayLayout_"):
    dim: sequence[MultiArrayDimension] = field(default_factory=list)
    data_offset: uint32 = 0


@dataclass
class Float64MultiArray(IdlStruct, typename="std_msgs::msg::dds_::Float64MultiArray_"):
    layout: MultiArrayLayout = field(default_factory=MultiArrayLayout)
    data: sequence[float64] = field(default_factory=list)


@dataclass
class JointState(IdlStruct, typename="sensor_msgs::msg::dds_::JointState_"):
    header: Header = field(default_factory=Header)
    name: sequence[str] = field(default_factory=list)
    position: sequence[float64] = field(default_factory=list)
    velocity: sequence[float64] = field(default_factory=list)
    effort: sequence[float64] = field(default_factory=list)


@dataclass
class Point(IdlStruct, typename="geometry_msgs::msg::dds_::Point_"):
    x: float64 = 0.0
    y: float64 = 0.0
    z: float64 = 0.0


@dataclass
class Vector3(IdlStruct, typename="geometry_msgs::msg::dds_::Vector3_"):
    x: float64 = 0.0
    y: float64 = 0.0
    z: float64 = 0.0


@dataclass
class Quaternion(IdlStruct, typename="geometry_msgs::msg::dds_::Quaternion_"):
    x: float64 = 0.0
    y: float64 = 0.0
    z: float64 = 0.0
    w: float64 = 1.0


@dataclass
class Pose(IdlStruct, typename="geometry_msgs::msg::dds_::Pose_"):
    position: Point = field(default_factory=Point)
    orientation: Quaternion = field(default_factory=Quaternion)


@dataclass
class PoseWithCovariance(IdlStruct, typename="geometry_msgs::msg::dds_::PoseWithCovariance_"):
    pose: Pose = field(default_factory=Pose)
    covariance: array[float64, 36] = field(default_factory=_zeros36)


@dataclass
class Twist(IdlStruct, typename="geometry_msgs::msg::dds_::Twist_"):
    linear: Vector3 = field(default_factory=Vector3)
    angular: Vector3 = field(default_factory=Vector3)


@dataclass
class TwistWithCovariance(IdlStruct, typename="geometry_msgs::msg::dds_::TwistWithCovariance_"):
    twist: Twist = field(default_factory=Twist)
    covariance: array[float64, 36] = field(default_factory=_zeros36)


@dataclass
class Odometry(IdlStruct, typename="nav_msgs::msg::dds_::Odometry_"):
    header: Header = field(default_factory=Header)
    child_frame_id: str = ""
    pose: PoseWithCovariance = field(default_factory=PoseWithCovariance)
    twist: TwistWithCovariance = field(default_factory=TwistWithCovariance)


# ----------------------------------------------------------------------------------- fast codecs
# The cyclonedds package (de)serialises field by field in Python: decoding one Odometry (two
# 36-element covariances) took ~0.15 ms and encoding a 70x70 A ~0.12 ms, most of the DDS node's
# time per pair at 1 kHz. For the hot types - JointState and Odometry in, Float64MultiArray out and
# back in the receivers - these functions do the same plain little-endian CDR (XCDR1) with struct
# and array in one pass. Anything else (big endian, XCDR2, a buffer argument) takes the generic
# path; test_ros_cdr.py checks both ways against the generic code and against rosbags.
_HEAD_LE = b"\x00\x01\x00\x00"
_U32 = struct.Struct("<I")
_TIME = struct.Struct("<iI")
_ODOM_TAIL = struct.Struct("<85d")    # pose (7), covariance (36), twist (6), covariance (36)
_LITTLE = sys.byteorder == "little"


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


def _get_header(b, o):
    _need(b, o + 8)
    sec, nanosec = _TIME.unpack_from(b, o)
    frame_id, o = _get_str(b, o + 8)
    return Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id=frame_id), o


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


def _fast_in(data, has_header, use_version_2):
    return _LITTLE and has_header and not use_version_2 and bytes(data[:2]) == b"\x00\x01"


def _fast_out(buffer, endianness, use_version_2):
    return _LITTLE and buffer is None and not use_version_2 and endianness in (None, Endianness.Little)


def _joint_state_from_cdr(b):
    header, o = _get_header(b, 4)
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
    return JointState(header=header, name=names, position=position, velocity=velocity, effort=effort)


def _joint_state_to_cdr(m):
    w = _Out()
    w.header(m.header)
    w.u32(len(m.name))
    for name in m.name:
        w.str(name)
    w.f64seq(m.position)
    w.f64seq(m.velocity)
    w.f64seq(m.effort)
    return w.bytes()


def _odometry_from_cdr(b):
    header, o = _get_header(b, 4)
    child, o = _get_str(b, o)
    o = _a8(o)
    _need(b, o + _ODOM_TAIL.size)
    v = _ODOM_TAIL.unpack_from(b, o)
    pose = PoseWithCovariance(pose=Pose(position=Point(x=v[0], y=v[1], z=v[2]),
                                        orientation=Quaternion(x=v[3], y=v[4], z=v[5], w=v[6])),
                              covariance=list(v[7:43]))
    twist = TwistWithCovariance(twist=Twist(linear=Vector3(x=v[43], y=v[44], z=v[45]),
                                            angular=Vector3(x=v[46], y=v[47], z=v[48])),
                                covariance=list(v[49:85]))
    return Odometry(header=header, child_frame_id=child, pose=pose, twist=twist)


def _odometry_to_cdr(m):
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


def _f64multiarray_from_cdr(b):
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
        dims.append(MultiArrayDimension(label=label, size=size, stride=stride))
    o = _a4(o)
    _need(b, o + 4)
    data_offset = _U32.unpack_from(b, o)[0]
    data, o = _get_f64seq(b, o + 4)
    return Float64MultiArray(layout=MultiArrayLayout(dim=dims, data_offset=data_offset), data=data)


def _f64multiarray_to_cdr(m):
    w = _Out()
    w.u32(len(m.layout.dim))
    for d in m.layout.dim:
        w.str(d.label)
        w.u32(d.size)
        w.u32(d.stride)
    w.u32(m.layout.data_offset)
    w.f64seq(m.data)
    return w.bytes()


def _install_fast_codec(cls, decode, encode):
    generic_deserialize = cls.deserialize.__func__
    generic_serialize = cls.serialize

    def deserialize(klass, data, has_header=True, use_version_2=None):
        if klass is cls and _fast_in(data, has_header, use_version_2):
            return decode(memoryview(data))
        return generic_deserialize(klass, data, has_header=has_header, use_version_2=use_version_2)

    def serialize(self, buffer=None, endianness=None, use_version_2=None):
        if type(self) is cls and _fast_out(buffer, endianness, use_version_2):
            return encode(self)
        return generic_serialize(self, buffer=buffer, endianness=endianness, use_version_2=use_version_2)

    cls.deserialize = classmethod(deserialize)
    cls.serialize = serialize
    cls.generic_deserialize = classmethod(generic_deserialize)
    cls.generic_serialize = generic_serialize


_install_fast_codec(JointState, _joint_state_from_cdr, _joint_state_to_cdr)
_install_fast_codec(Odometry, _odometry_from_cdr, _odometry_to_cdr)
_install_fast_codec(Float64MultiArray, _f64multiarray_from_cdr, _f64multiarray_to_cdr)


#: ROS 2 type name ("pkg/msg/Type") -> IDL class, for every type the package sends or receives.
BY_ROS_NAME = {name: globals()[name.rsplit("/", 1)[1]] for name in ROS_TYPES}
