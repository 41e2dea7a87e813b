# SPDX-License-Identifier: BSD-3-Clause
"""ROS 2 interface of sva_linearizer: a node that streams A and B from joint states and odometry
(and, for a robot on its feet, the active contacts and contact forces).

The node and what it reads:

* :mod:`.node` - the node's logic, written once (model, validation, linearization, publishing);
* :mod:`.parameters` - the node's parameters: names, defaults, ROS 2 types, checks;
* :mod:`.parameter_files` - parameter files and ``--ros-args`` (for the DDS transport);
* :mod:`.launch_config` - what ``launch/linearizer.launch.py`` starts, decided without ``launch``;
* :mod:`.record` - the linearization record the node publishes, and its reader for consumers;
* :mod:`.horizon` - a planner's horizon request and the node's answer (the wire format);
  :mod:`.horizon_service` - the node's answers; :mod:`.horizon_client` - a planner's client;
* :mod:`.messages` - stamps, matrices as Float64MultiArray, the input messages;
* :mod:`.qos` - the QoS profiles of the node's topics;
* :mod:`.log` - stderr logging and throttled warnings.

The transports (how messages travel):

* :mod:`.transport` - the interface the node uses and :func:`~.transport.make_transport`;
* :mod:`.transport_rclpy` - a real rclpy node;
* :mod:`.transport_dds` - ROS 2's wire protocol through the ``cyclonedds`` package;
* :mod:`.prerequisites` - which transport can run here, and what is missing otherwise;
* :mod:`.dds_types` - ROS 2 messages as Cyclone DDS IDL structs (ROS 2 CDR on the wire);
* :mod:`.cdr` - one-pass CDR codecs of the hot types (JointState, Odometry, Float64MultiArray);
* :mod:`.cyclone_compat` - the Cyclone settings a Fast DDS (ROS 2) peer needs;
* :mod:`.loopback` - traffic confined to 127.0.0.1 on a private domain (tests, demo, bench).

Tools: :mod:`.cli` - the ``node``/``demo``/``bench-node`` commands; :mod:`.sim`, :mod:`.demo`,
:mod:`.bench` - simulated robot, self-contained demo, benchmark.

Nothing here imports rclpy or cyclonedds at import time; each transport imports its own.
"""
from .horizon import TOPIC_ANSWER, TOPIC_REQUEST, HorizonAnswer, decode_answer, encode_request
from .horizon_client import HorizonClient, HorizonFuture
from .messages import TOPIC_A, TOPIC_B
from .record import (SECTIONS, TOPIC_DESCRIPTION, TOPIC_POINT_JOINTS, TOPIC_POINT_ODOM, TOPIC_RECORD, Record,
                     RecordDescription, RecordReader, decode_record)

__all__ = ["TOPIC_A", "TOPIC_B", "TOPIC_RECORD", "TOPIC_DESCRIPTION", "TOPIC_POINT_JOINTS", "TOPIC_POINT_ODOM",
           "SECTIONS", "Record", "RecordDescription", "RecordReader", "decode_record", "TOPIC_REQUEST", "TOPIC_ANSWER",
           "HorizonAnswer", "HorizonClient", "HorizonFuture", "decode_answer", "encode_request"]
