# SPDX-License-Identifier: BSD-3-Clause
"""ROS 2 message types as Cyclone DDS (PyPI ``cyclonedds``) IDL structs.

ROS 2 maps ``pkg/msg/Type`` to the DDS type ``pkg::msg::dds_::Type_`` and serialises it as plain
(XCDR1) CDR, little-endian on these machines. The classes below mirror the ROS 2 Humble/Jazzy message
definitions field by field, with the ROS field names, so that the node's logic reads them exactly
like rclpy messages (``msg.header.stamp.sec``, ``msg.name``, ``msg.position`` ...). The test suite
checks their bytes against the ``rosbags`` package's ROS 2 Humble serialiser.

Only the types the node and its tools send or receive are defined here.
"""

from dataclasses import dataclass, field
from types import SimpleNamespace

from cyclonedds.idl import IdlStruct
from cyclonedds.idl._support import Endianness
from cyclonedds.idl.types import array, byte, float64, int32, sequence, uint32

from . import cdr
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


@dataclass
class Wrench(IdlStruct, typename="geometry_msgs::msg::dds_::Wrench_"):
    force: Vector3 = field(default_factory=Vector3)
    torque: Vector3 = field(default_factory=Vector3)


@dataclass
class WrenchStamped(IdlStruct, typename="geometry_msgs::msg::dds_::WrenchStamped_"):
    header: Header = field(default_factory=Header)
    wrench: Wrench = field(default_factory=Wrench)


@dataclass
class Clock(IdlStruct, typename="rosgraph_msgs::msg::dds_::Clock_"):
    clock: Time = field(default_factory=Time)


@dataclass
class KeyValue(IdlStruct, typename="diagnostic_msgs::msg::dds_::KeyValue_"):
    key: str = ""
    value: str = ""


@dataclass
class DiagnosticStatus(IdlStruct, typename="diagnostic_msgs::msg::dds_::DiagnosticStatus_"):
    OK, WARN, ERROR, STALE = 0, 1, 2, 3           # the message's constants (rclpy's are bytes)
    level: byte = 0
    name: str = ""
    message: str = ""
    hardware_id: str = ""
    values: sequence[KeyValue] = field(default_factory=list)


@dataclass
class DiagnosticArray(IdlStruct, typename="diagnostic_msgs::msg::dds_::DiagnosticArray_"):
    header: Header = field(default_factory=Header)
    status: sequence[DiagnosticStatus] = field(default_factory=list)


# ----------------------------------------------------------------------------------- fast codecs
# JointState, Odometry and Float64MultiArray, the hot types, take the one-pass codecs of
# :mod:`sva_linearizer.ros.wire.cdr` instead of cyclonedds' field-by-field Python ones (see there).
def _install_fast_codec(cls, decode, encode):
    generic_deserialize = cls.deserialize.__func__
    generic_serialize = cls.serialize

    def deserialize(klass, data, has_header=True, use_version_2=None):
        if klass is cls and cdr.fast_in(data, has_header, use_version_2):
            return decode(memoryview(data), _THIS)
        return generic_deserialize(klass, data, has_header=has_header, use_version_2=use_version_2)

    def serialize(self, buffer=None, endianness=None, use_version_2=None):
        if type(self) is cls and cdr.fast_out(buffer, endianness in (None, Endianness.Little), use_version_2):
            return encode(self)
        return generic_serialize(self, buffer=buffer, endianness=endianness, use_version_2=use_version_2)

    cls.deserialize = classmethod(deserialize)
    cls.serialize = serialize
    cls.generic_deserialize = classmethod(generic_deserialize)
    cls.generic_serialize = generic_serialize


_THIS = SimpleNamespace(**{n: globals()[n] for n in (
    "Time", "Header", "JointState", "Point", "Quaternion", "Pose", "PoseWithCovariance", "Vector3", "Twist",
    "TwistWithCovariance", "Odometry", "MultiArrayDimension", "MultiArrayLayout", "Float64MultiArray")})
_install_fast_codec(JointState, cdr.decode_joint_state, cdr.encode_joint_state)
_install_fast_codec(Odometry, cdr.decode_odometry, cdr.encode_odometry)
_install_fast_codec(Float64MultiArray, cdr.decode_f64multiarray, cdr.encode_f64multiarray)


#: ROS 2 type name ("pkg/msg/Type") -> IDL class, for every type the package sends or receives.
BY_ROS_NAME = {name: globals()[name.rsplit("/", 1)[1]] for name in ROS_TYPES}
