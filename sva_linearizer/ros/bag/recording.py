# SPDX-License-Identifier: BSD-3-Clause
"""The input recording: opening a rosbag2 (a folder with metadata.yaml, or one .mcap or .db3 file)
with ``rosbags``, the topics the node's parameters name, and each message decoded as the node
receives it.

Every problem with the recording itself is a :class:`BagError`, one line naming it: a path that
does not exist, a storage format rosbags does not read, a file that is truncated or corrupt, a
topic the parameters name that the recording lacks or holds with another type.
"""
from __future__ import annotations

import os
import struct

import numpy as np

from ..wire import cdr

#: The inputs the node subscribes, by role: the parameter that names the topic, and its type.
ROLES = {
    "joint_states": ("joint_states_topic", "sensor_msgs/msg/JointState"),
    "odom": ("odom_topic", "nav_msgs/msg/Odometry"),
    "contacts": ("contacts_topic", "sensor_msgs/msg/JointState"),
    "contact_forces": ("contact_forces_topic", "geometry_msgs/msg/WrenchStamped"),
}
DESCRIPTION_TYPE = "std_msgs/msg/String"


class BagError(Exception):
    """A problem with the recording or the output, in one line (the command exits with code 2)."""


def rosbags_modules():
    """rosbags' reader and writer modules, or BagError saying how to install them."""
    try:
        import rosbags.rosbag2 as rosbag2
        from rosbags.typesys import Stores, get_typestore
    except ImportError as e:
        raise BagError(f"reading and writing rosbag2 needs the rosbags package ({e}): "
                       f"pip install 'sva_linearizer[bag]' (or pip install rosbags)") from None
    return rosbag2, Stores, get_typestore


def open_reader(path: str):
    """An open rosbags Reader of ``path``, or BagError naming what is wrong with it."""
    rosbag2, _, _ = rosbags_modules()
    if not os.path.exists(path):
        raise BagError(f"{path}: no such file or folder")
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, "metadata.yaml")):
        raise BagError(f"{path}: a folder without metadata.yaml is not a rosbag2 recording")
    try:
        reader = rosbag2.Reader(path)
    except rosbag2.ReaderError as e:
        raise BagError(f"{path}: not a rosbag2 recording this command reads ({e}; it reads rosbag2 "
                       f"folders, .mcap and .db3 files)") from None
    try:
        reader.open()
    except Exception as e:
        raise BagError(f"{path}: cannot be read, truncated or corrupt? ({type(e).__name__}: {' '.join(str(e).split())})"
                       ) from None
    return reader


def resolve(name: str, namespace: str = "") -> str:
    """A topic name as the node resolves it in its namespace: absolute names stay, relative ones
    go under ``/namespace``."""
    if name.startswith("/"):
        return name
    ns = namespace.strip("/")
    return f"/{ns}/{name}" if ns else f"/{name}"


def input_topics(reader, params: dict, namespace: str, floating_base: bool, path: str) -> dict:
    """role -> (absolute topic, its connections in the recording) for the inputs the node with
    ``params`` subscribes. BagError when the recording lacks the joint states, the odometry of a
    floating base or the contact forces the node needs (every state would be dropped), or holds a
    topic with another type than the node's; the contact sets may be absent (the node then keeps
    ``contacts_default_active``)."""
    wanted = ["joint_states"]
    if floating_base:
        wanted.append("odom")
    if params["contact_frames"]:
        wanted.append("contacts")
        if params["contact_mode"] == "forces":
            wanted.append("contact_forces")
    by_topic: dict = {}
    for c in reader.connections:
        by_topic.setdefault(c.topic, []).append(c)
    out = {}
    for role in wanted:
        param, type_name = ROLES[role]
        topic = resolve(params[param], namespace)
        conns = by_topic.get(topic, [])
        if not conns:
            if role == "contacts":
                continue
            present = ", ".join(f"{t} ({cs[0].msgtype})" for t, cs in sorted(by_topic.items())) or "none"
            raise BagError(f"{path} has no topic {topic} (the {param} parameter: the node's {type_name} "
                           f"input); topics in the recording: {present}")
        other = sorted({c.msgtype for c in conns if c.msgtype != type_name})
        if other:
            raise BagError(f"{path}: topic {topic} holds {', '.join(other)}, the node reads {type_name} there "
                           f"(the {param} parameter)")
        out[role] = (topic, conns)
    return out


def description_from_recording(reader, topic: str, path: str) -> str:
    """The first robot description (std_msgs/String) logged on ``topic``, for a node whose
    parameters name no model: BagError when there is none."""
    conns = [c for c in reader.connections if c.topic == topic and c.msgtype == DESCRIPTION_TYPE]
    if not conns:
        raise BagError(f"{path}: no robot model: the parameters name none (robot_description, urdf_path, "
                       f"robot) and the recording has no {topic} ({DESCRIPTION_TYPE})")
    for _, _, raw in reader.messages(conns):
        return typestore().deserialize_cdr(raw, DESCRIPTION_TYPE).data
    raise BagError(f"{path}: no robot model: {topic} holds no message")


_TYPESTORE = None


def typestore():
    """rosbags' ROS 2 message types (the generic CDR codec, for the messages cdr.py does not decode)."""
    global _TYPESTORE
    if _TYPESTORE is None:
        _, Stores, get_typestore = rosbags_modules()
        _TYPESTORE = get_typestore(Stores.ROS2_JAZZY)
    return _TYPESTORE


class _JointStates:
    """sensor_msgs/JointState in plain little-endian CDR, as cdr.decode_joint_state decodes it, for a
    stream whose joint names repeat: the names of the message before are taken again when their
    bytes are the same (a recording's joint states name the same joints message after message),
    and the arrays are views of the message's bytes."""

    def __init__(self):
        self._names_raw, self._names = b"", None

    def __call__(self, b):
        T = cdr.LIGHT
        header, o = cdr._get_header(b, 4, T)
        o = cdr._a4(o)
        raw = self._names_raw
        if raw and b[o:o + len(raw)] == raw:
            names, o = self._names, o + len(raw)
        else:
            start = o
            cdr._need(b, o + 4)
            n = cdr._U32.unpack_from(b, o)[0]
            o += 4
            cdr._need(b, o + 4 * n)
            names = []
            for _ in range(n):
                name, o = cdr._get_str(b, o)
                names.append(name)
            self._names_raw, self._names = bytes(b[start:o]), names
        arrays = []
        for _ in range(3):
            o = cdr._a4(o)
            cdr._need(b, o + 4)
            n = cdr._U32.unpack_from(b, o)[0]
            o += 4
            if n:
                o = cdr._a8(o)
                cdr._need(b, o + 8 * n)
            arrays.append(np.frombuffer(b, dtype="<f8", count=n, offset=o))
            o += 8 * n
        return T.JointState(header=header, name=names, position=arrays[0], velocity=arrays[1], effort=arrays[2])


_POSE_TWIST = struct.Struct("<7d288x6d")     # pose (7), its covariance (36, skipped), twist (6)


def _odometry(b):
    """nav_msgs/Odometry in plain little-endian CDR, as cdr.decode_odometry decodes it but for the
    covariances, which the node does not read."""
    T = cdr.LIGHT
    header, o = cdr._get_header(b, 4, T)
    child, o = cdr._get_str(b, o)
    o = cdr._a8(o)
    cdr._need(b, o + cdr._ODOM_TAIL.size)
    v = _POSE_TWIST.unpack_from(b, o)
    pose = T.PoseWithCovariance(pose=T.Pose(position=T.Point(x=v[0], y=v[1], z=v[2]),
                                            orientation=T.Quaternion(x=v[3], y=v[4], z=v[5], w=v[6])))
    twist = T.TwistWithCovariance(twist=T.Twist(linear=T.Vector3(x=v[7], y=v[8], z=v[9]),
                                                angular=T.Vector3(x=v[10], y=v[11], z=v[12])))
    return T.Odometry(header=header, child_frame_id=child, pose=pose, twist=twist)


def decoder(role: str):
    """raw CDR bytes -> a message with the ROS 2 field names, as the node reads them: the package's
    one-pass codecs for joint states and odometry in plain little-endian CDR, rosbags' otherwise.
    Malformed bytes raise (ValueError, struct.error, ...)."""
    type_name = ROLES[role][1]
    fast = {"sensor_msgs/msg/JointState": _JointStates(), "nav_msgs/msg/Odometry": _odometry}
    one_pass = fast.get(type_name)

    def generic(raw):
        return typestore().deserialize_cdr(raw, type_name)

    if one_pass is None:
        return generic

    def decode(raw):
        if cdr.fast_in(raw):
            return one_pass(raw)
        return generic(raw)

    return decode
