# SPDX-License-Identifier: BSD-3-Clause
"""How messages travel: thin adapters that give the node a middleware (imports wire/ and node/; the
rclpy transport declares the node's parameters):

    transport.py        the interface the node uses; make_transport picks and builds one
    transport_rclpy.py  RclpyTransport: a real rclpy node, typed parameters, raw odometry decoding
    transport_dds.py    DdsTransport: ROS 2's wire protocol on the ``cyclonedds`` package
    prerequisites.py    which transport can run here; one-line errors naming what is missing
    cyclone_compat.py   the Cyclone settings a Fast DDS (ROS 2) peer needs
    loopback.py         both middlewares confined to 127.0.0.1 on a private domain (tests, demo, bench)
"""
