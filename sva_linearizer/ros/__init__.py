"""ROS 2 interface of sva_linearizer: a node that streams A and B from joint states and odometry
(and, for a robot on its feet, the active contacts and contact forces).

* :mod:`.node` - the node's logic, written once (model, validation, linearization, publishing);
* :mod:`.transport` - the transports: rclpy, or plain DDS via the ``cyclonedds`` package;
* :mod:`.dds_types` - ROS 2 messages as Cyclone DDS IDL structs (ROS 2 CDR on the wire);
* :mod:`.cdr` - one-pass CDR codecs of the hot types (JointState, Odometry, Float64MultiArray);
* :mod:`.messages` - stamps, matrices as Float64MultiArray and the A/B pairing scheme;
* :mod:`.params` - ROS 2 parameter files; :mod:`.cli` - the ``node``/``demo``/``bench-node`` commands;
* :mod:`.sim`, :mod:`.demo`, :mod:`.bench` - simulated robot, self-contained demo, benchmark.

Nothing here imports rclpy or cyclonedds at import time; each transport imports its own.
"""
from .messages import (TOPIC_A, TOPIC_B, TOPIC_DFORCES_DTAU, TOPIC_DFORCES_DZ, TOPIC_FORCES, TOPIC_STAMP, Pair,
                       Pairer, PairRecord, parse_pair_record)

__all__ = ["TOPIC_A", "TOPIC_B", "TOPIC_STAMP", "TOPIC_FORCES", "TOPIC_DFORCES_DZ", "TOPIC_DFORCES_DTAU", "Pair",
           "Pairer", "PairRecord", "parse_pair_record"]
