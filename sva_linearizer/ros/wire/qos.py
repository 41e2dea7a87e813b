# SPDX-License-Identifier: BSD-3-Clause
"""The QoS profiles of the node's topics, transport-neutral (reliability, durability, depth)."""

# The input subscriptions are best effort: in ROS 2 (DDS) a best-effort subscription matches both
# reliable and best-effort publishers, a reliable one only reliable publishers, and many drivers
# publish joint states with the sensor-data QoS (best effort). The node wants the newest sample
# anyway, so reliable repair of a sample it would skip buys nothing.
# joint states: newest wins. The node takes the newest waiting sample and counts the others it
# leaves out (superseded); the depth lets it see them (a depth of 1 would replace them unseen): 0.1 s
# at 1 kHz, what a node held up by its machine may find waiting
QOS_STATE = dict(reliable=False, transient_local=False, depth=100)
# odometry is paired by stamp (the joint state's own, else the nearest): every sample counts, so the
# queue holds 0.1 s at 1 kHz, what a node held up by its machine may take at once
QOS_ODOM = dict(reliable=False, transient_local=False, depth=100)
QOS_CONTACTS = dict(reliable=False, transient_local=False, depth=10)
QOS_FORCES = dict(reliable=False, transient_local=False, depth=32)  # one sample per contact and stamp
# What the package's own publishers of states use (simulator, tests): ROS 2's default profile.
QOS_STATE_PUB = dict(reliable=True, transient_local=False, depth=10)
QOS_DESCRIPTION = dict(reliable=True, transient_local=True, depth=1)  # as robot_state_publisher
QOS_OUTPUT = dict(reliable=True, transient_local=False, depth=10)
# a planner's horizon requests: reliable (a request is answered, not skipped), a few may wait
QOS_REQUEST = dict(reliable=True, transient_local=False, depth=10)
