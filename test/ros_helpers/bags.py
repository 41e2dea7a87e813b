# SPDX-License-Identifier: BSD-3-Clause
"""Recordings for the bag tests, written by rosbags (its writer and its own CDR serializer, not the
package's codecs) from known states, and the same messages as the package's message objects, to
feed a node on the in-memory transport in the same order."""
from __future__ import annotations

import numpy as np
from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

SEC = 1_000_000_000
TS = get_typestore(Stores.ROS2_JAZZY)
TYPES = {"joint_states": "sensor_msgs/msg/JointState", "odom": "nav_msgs/msg/Odometry",
         "contacts": "sensor_msgs/msg/JointState", "contact_forces": "geometry_msgs/msg/WrenchStamped",
         "robot_description": "std_msgs/msg/String"}


def _time(ns):
    return TS.types["builtin_interfaces/msg/Time"](sec=int(ns // SEC), nanosec=int(ns % SEC))


def _header(ns, frame=""):
    return TS.types["std_msgs/msg/Header"](stamp=_time(ns), frame_id=frame)


def joint_state(stamp, names, position, velocity=(), effort=()):
    return TS.types["sensor_msgs/msg/JointState"](
        header=_header(stamp), name=list(names), position=np.asarray(position, dtype=np.float64),
        velocity=np.asarray(velocity, dtype=np.float64), effort=np.asarray(effort, dtype=np.float64))


def odometry(stamp, p, quat, twist, frame="odom", child="base_link"):
    T = TS.types
    pose = T["geometry_msgs/msg/PoseWithCovariance"](
        pose=T["geometry_msgs/msg/Pose"](position=T["geometry_msgs/msg/Point"](x=p[0], y=p[1], z=p[2]),
                                         orientation=T["geometry_msgs/msg/Quaternion"](
                                             x=quat[0], y=quat[1], z=quat[2], w=quat[3])),
        covariance=np.zeros(36))
    vec = T["geometry_msgs/msg/Vector3"]
    twist = T["geometry_msgs/msg/TwistWithCovariance"](
        twist=T["geometry_msgs/msg/Twist"](linear=vec(x=twist[0], y=twist[1], z=twist[2]),
                                           angular=vec(x=twist[3], y=twist[4], z=twist[5])),
        covariance=np.zeros(36))
    return T["nav_msgs/msg/Odometry"](header=_header(stamp, frame), child_frame_id=child, pose=pose, twist=twist)


def contacts(stamp, frames, flags=()):
    return joint_state(stamp, frames, flags)


def wrench(stamp, frame, force, torque=(0.0, 0.0, 0.0)):
    T = TS.types
    vec = T["geometry_msgs/msg/Vector3"]
    return T["geometry_msgs/msg/WrenchStamped"](
        header=_header(stamp, frame),
        wrench=T["geometry_msgs/msg/Wrench"](force=vec(x=force[0], y=force[1], z=force[2]),
                                             torque=vec(x=torque[0], y=torque[1], z=torque[2])))


def description(text):
    return TS.types["std_msgs/msg/String"](data=text)


_QOS = Qos(QosHistory.KEEP_LAST, 10, QosReliability.RELIABLE, QosDurability.VOLATILE, QosTime(0, 0),
           QosTime(0, 0), QosLiveliness.AUTOMATIC, QosTime(0, 0), False)


def write_bag(path, messages, storage="mcap", raw=None):
    """A rosbag2 folder at ``path`` holding ``messages``: (topic, role, log time, message) in any
    order (rosbags stores them; readers yield them by log time). ``raw``: (topic, role, log time,
    bytes) written as they are (a malformed message)."""
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    with Writer(path, version=9, storage_plugin=plugin) as w:
        conns = {}

        def conn(topic, role):
            if topic not in conns:
                conns[topic] = w.add_connection(topic, TYPES[role], typestore=TS, offered_qos_profiles=[_QOS])
            return conns[topic]
        for topic, role, t, msg in messages:
            w.write(conn(topic, role), int(t), TS.serialize_cdr(msg, TYPES[role]))
        for topic, role, t, data in raw or ():
            w.write(conn(topic, role), int(t), bytes(data))
    return path


def stream(model, n, rng, t0=10 * SEC, period=SEC // 1000, feet=(), gait=False, odom_delay=0, recv_delay=50_000,
           names=None):
    """n states of ``model`` at 1/period, each a joint state, its odometry (floating base) and, with
    ``feet``, the contact set (a trot-like schedule with ``gait``, else all feet down), all stamped
    with the state's time and logged ``recv_delay`` later (the odometry ``odom_delay`` later still).
    -> (messages for write_bag, the states [(stamp, q, v, tau, active)])."""
    msgs, states = [], []
    names = list(model.joint_names) if names is None else names
    for k in range(n):
        stamp = t0 + k * period
        s = rng.uniform(-0.8, 0.8, model.nj)
        r = rng.normal(size=model.nj)
        tau = rng.normal(size=model.nj)
        active = [True] * len(feet)
        if gait and feet:
            phase = (k // 50) % 3          # both pairs down, one diagonal up, the other
            active = [not (phase == 1 and i in (0, 3)) and not (phase == 2 and i in (1, 2)) for i in range(len(feet))]
        if feet:
            msgs.append(("/contacts", "contacts", stamp + recv_delay - 1000,
                         contacts(stamp, [f for f, a in zip(feet, active) if a])))
        if model.floating_base:
            quat = rng.normal(size=4)
            quat /= np.linalg.norm(quat)
            p, twist = rng.normal(size=3), rng.normal(size=6)
            msgs.append(("/odom", "odom", stamp + recv_delay + odom_delay,
                         odometry(stamp, p, quat, twist, child=model.base_name)))
            q, v = np.r_[p, quat, s], np.r_[twist, r]
        else:
            q, v = s, r
        idx = [list(model.joint_names).index(x) for x in names]
        msgs.append(("/joint_states", "joint_states", stamp + recv_delay,
                     joint_state(stamp, names, s[idx], r[idx], tau[idx])))
        states.append((stamp, q, v, tau, active))
    return msgs, states


def light(msg, role):
    """A rosbags message as the in-memory transport's messages (the package's types), to feed the node."""
    from sva_linearizer.ros.wire import cdr

    data = TS.serialize_cdr(msg, TYPES[role])
    if role in ("joint_states", "contacts"):
        return cdr.decode_joint_state(data)
    if role == "odom":
        return cdr.decode_odometry(data)
    return msg
