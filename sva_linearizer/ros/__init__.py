# SPDX-License-Identifier: BSD-3-Clause
"""ROS 2 interface of sva_linearizer: a node that streams A and B from joint states and odometry
(and, for a robot on its feet, the active contacts and contact forces), and answers a planner's
horizon. Its parts, each a folder, from the bottom up (a part imports only the parts before it):

    wire/        what travels: the ROS 2 messages, their QoS, CDR bytes, DDS types
    node/        the node with its record, its horizon answers and its parameters
    transports/  how it travels: make_transport, rclpy, plain DDS, what each needs, loopback
    client/      a consumer's side: RecordReader, HorizonClient
    demo/        the processes around the node in the demo and the bench: simulator, plant, controller
    cli.py       the ``node``/``demo``/``bench-node``/``sim`` commands and ``linearizer_node``

Nothing here imports rclpy or cyclonedds at import time; each transport imports its own.
The names below are the public ones (``from sva_linearizer.ros import RecordReader``).
"""
from .client.horizon_client import HorizonClient, HorizonFuture
from .client.record_reader import RecordReader
from .node.horizon import TOPIC_ANSWER, TOPIC_REQUEST, HorizonAnswer, decode_answer, encode_request
from .node.record import (SECTIONS, TOPIC_DESCRIPTION, TOPIC_POINT_JOINTS, TOPIC_POINT_ODOM, TOPIC_RECORD, Record,
                          RecordDescription, decode_record)
from .transports.transport import make_transport
from .wire.messages import TOPIC_A, TOPIC_B, msg_to_matrix

__all__ = ["TOPIC_A", "TOPIC_B", "TOPIC_RECORD", "TOPIC_DESCRIPTION", "TOPIC_POINT_JOINTS", "TOPIC_POINT_ODOM",
           "SECTIONS", "Record", "RecordDescription", "RecordReader", "decode_record", "TOPIC_REQUEST", "TOPIC_ANSWER",
           "HorizonAnswer", "HorizonClient", "HorizonFuture", "decode_answer", "encode_request", "make_transport",
           "msg_to_matrix"]
