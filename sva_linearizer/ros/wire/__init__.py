# SPDX-License-Identifier: BSD-3-Clause
"""What travels between the node and its peers, whatever carries it (imports no other part of ros/):

    messages.py   stamps, matrices as Float64MultiArray, the input messages, the message type list
    qos.py        the QoS profiles of the node's topics
    cdr.py        one-pass CDR codecs of JointState, Odometry, Float64MultiArray
    dds_types.py  the ROS 2 messages as Cyclone DDS IDL structs (ROS 2 CDR on the wire)
"""
