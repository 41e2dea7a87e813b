# SPDX-License-Identifier: BSD-3-Clause
"""Cross-vendor: the DDS transport (Cyclone, no ROS 2) and a real ROS 2 peer (rclpy on Fast DDS).

Both directions for every message type the node uses: JointState, Odometry and the robot
description (String, transient local) from rclpy into the Cyclone node, A/B (Float64MultiArray)
and the pair record (Header) from it back to rclpy; and the same from a Cyclone peer into the rclpy
node. Cyclone needs `<Compatibility><IgnoreTypeInformation>1.15</IgnoreTypeInformation>` for this
(Fast DDS's type objects for sequence types are rejected otherwise); the node's default and
loopback configurations have it. Loopback only, private domain, bounded, every process stopped.
"""
import signal
import time

import pytest

pytest.importorskip("rclpy", reason="the interop tests need ROS 2's rclpy (pip install '.[ros]')")
pytest.importorskip("cyclonedds", reason="the DDS transport needs the cyclonedds package")

from ros_helpers.cases import check_A_B, check_description_topic  # noqa: E402
from ros_helpers.dds_harness import Harness  # noqa: E402

PAIRS = [("dds", "rclpy"), ("rclpy", "dds")]   # (node transport, peer)


@pytest.mark.parametrize("node_transport,peer", PAIRS)
def test_states_in_A_B_out_across_vendors(node_transport, peer):
    """solo12 (JointState + Odometry) and ur5 (JointState only): A and B equal Pinocchio's."""
    for robot, floating in (("solo12", True), ("ur5", False)):
        flag = "--floating-base" if floating else "--fixed-base"
        h = Harness(["--robot", robot, flag, "--param", "warn_period=0", "--param", "max_odom_age=0.5"],
                    node_transport=node_transport, peer=peer)
        try:
            h.wait_ready()
            check_A_B(h, robot, floating, n=2)
        finally:
            h.close()


@pytest.mark.parametrize("node_transport,peer", PAIRS)
def test_robot_description_across_vendors(node_transport, peer):
    """The URDF published (reliable, transient local) by the other vendor before the node starts."""
    from sva_linearizer.robots import robot_urdf_path

    h = Harness(["--fixed-base", "--param", "robot_description_topic=robot_description"],
                node_transport=node_transport, peer=peer, start_node=False)
    try:
        h.send_description(open(robot_urdf_path("ur5")).read())
        h.spin(0.2)
        h.start()
        check_description_topic(h, "ur5")
    finally:
        h.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_dds_node_endpoints_leave_the_ros_graph_promptly(sig):
    """When the Cyclone node exits, rclpy sees its publishers and subscriptions go within 3 s
    (Cyclone's lease is 10 s: this needs the participant deleted, which sends a goodbye)."""
    h = Harness(["--robot", "ur5"], node_transport="dds", peer="rclpy")
    node = h.transport.node
    ns = h.namespace
    try:
        h.wait_ready()
        assert node.count_publishers(f"{ns}/linearization/A") == 1
        assert node.count_subscribers(f"{ns}/joint_states") == 1
        h.node.proc.send_signal(sig)
        assert h.node.proc.wait(30) == 0, h.node.output()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3.0:
            if (not node.get_publishers_info_by_topic(f"{ns}/linearization/A")
                    and not node.get_publishers_info_by_topic(f"{ns}/linearization/record")
                    and node.count_subscribers(f"{ns}/joint_states") == 0):
                break
            h.spin(0.05)
        gone = time.monotonic() - t0
        assert node.count_publishers(f"{ns}/linearization/A") == 0, f"still there after {gone:.1f} s"
        assert node.count_publishers(f"{ns}/linearization/record") == 0
        assert node.count_subscribers(f"{ns}/joint_states") == 0
    finally:
        h.close()


def _udp_bound_addresses(pid):
    """Local addresses of the UDP sockets a process has open (from /proc, Linux)."""
    import os

    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = []
    with open(f"/proc/{pid}/net/udp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                hexip = fields[1].split(":")[0]
                out.append(".".join(str(int(hexip[i:i + 2], 16)) for i in (6, 4, 2, 0)))
    return out


@pytest.mark.parametrize("node_transport,peer", PAIRS)
def test_every_socket_is_on_loopback(node_transport, peer):
    """Neither middleware binds a socket to one of the machine's other addresses: Fast DDS only to
    127.0.0.1 (and its multicast group on lo), Cyclone to 127.0.0.1 or the wildcard for receiving
    (it sends and announces only on lo)."""
    import os

    h = Harness(["--robot", "ur5"], node_transport=node_transport, peer=peer)
    try:
        h.wait_ready()
        for pid, kind in ((h.node.proc.pid, node_transport), (os.getpid(), peer)):
            addrs = _udp_bound_addresses(pid)
            assert addrs, pid
            allowed = {"127.0.0.1", "239.255.0.1"} | ({"0.0.0.0"} if kind == "dds" else set())
            assert set(addrs) <= allowed, (kind, addrs)
    finally:
        h.close()
