# SPDX-License-Identifier: BSD-3-Clause
"""Real-DDS test harness: the node as a separate process, a publisher/receiver in the test process,
both on a private loopback-only domain and a private namespace. Everything is time-bounded and the
node is always stopped (SIGTERM, then SIGKILL).

``node_transport`` is the node's (``dds``: Cyclone, ``rclpy``: ROS 2 on Fast DDS) and ``peer`` the
test side's: ``dds`` (Cyclone via the package's DdsTransport) or ``rclpy`` (a real rclpy node via
RclpyTransport, Fast DDS), so the same checks run rclpy-rclpy and across vendors."""
import itertools
import os
import re
import shutil
import sys
import time

from sva_linearizer.ros.demo.demo import start_process, stop_process
from sva_linearizer.ros.wire.messages import contacts_msg, joint_state_msg, odometry_msg, wrench_msg
from sva_linearizer.ros.node.node import QOS_DESCRIPTION, QOS_STATE_PUB
from sva_linearizer.ros.transports.loopback import loopback_config, loopback_env, loopback_vars, private_domain_id
from sva_linearizer.ros.client.record_reader import RecordReader
from sva_linearizer.ros.transports.transport_dds import DdsTransport

_counter = itertools.count(1)


def node_command(transport, node_args, namespace="", script=False):
    """The node's command line: ``python -m sva_linearizer.ros node ...`` or, with script=True, the
    installed ``linearizer_node`` executable (node_args then may hold ``--ros-args ...``)."""
    if script:
        exe = os.path.join(os.path.dirname(sys.executable), "linearizer_node")
        if not os.path.exists(exe):
            exe = shutil.which("linearizer_node")
        assert exe, "linearizer_node is not installed"
        cmd = [exe]
    else:
        cmd = [sys.executable, "-m", "sva_linearizer.ros", "node"]
    cmd += ["--transport", transport]
    if namespace:
        cmd += ["--namespace", namespace]
    return cmd + list(node_args)


class NodeProcess:
    def __init__(self, node_args, domain, namespace, transport="dds", script=False, command=None, env=None):
        cmd = command if command is not None else node_command(transport, node_args, namespace, script)
        self.proc = start_process(cmd, loopback_env(domain, env), "", echo=False)

    @property
    def lines(self):
        return self.proc.lines

    def find(self, pattern, start=0):
        rx = re.compile(pattern)
        for i in range(start, len(self.lines)):
            if rx.search(self.lines[i]):
                return i
        return None

    def alive(self):
        return self.proc.poll() is None

    def stop(self, timeout=15.0):
        return stop_process(self.proc, timeout)

    def output(self):
        return "\n".join(self.lines)


def make_peer(kind, name, domain, namespace=""):
    """The test side's transport on the private loopback domain: ``dds`` or ``rclpy``."""
    if kind == "dds":
        return DdsTransport(name, domain_id=domain, config=loopback_config(), namespace=namespace)
    from sva_linearizer.ros.transports.transport_rclpy import RclpyTransport

    # Fast DDS reads its transport settings from the environment when the participant is created
    os.environ.update({k: v for k, v in loopback_vars(domain).items() if k != "ROS_DOMAIN_ID"})
    return RclpyTransport(name, namespace=namespace, domain_id=domain, handle_signals=False,
                          args=["sva_test"])


class Harness:
    """Publishes joint_states/odom/robot_description and reads the node's records (``pairs``: the
    records received, in order).

    start_node=False: the node is started later by :meth:`start` (e.g. after a transient-local
    robot description was published). contacts=True: also publishers of the contact set
    (``contacts``) and of contact forces (``contact_forces``)."""

    def __init__(self, node_args, description_topic="robot_description", node_transport="dds", peer="dds",
                 start_node=True, script=False, state_qos=QOS_STATE_PUB, command=None, env=None, contacts=False):
        seed = os.getpid() * 31 + next(_counter)
        self.domain = private_domain_id(seed)
        self.namespace = f"/sva_test_{os.getpid()}_{seed % 100000}"
        self.node_args, self.node_transport, self.script = node_args, node_transport, script
        self.command = command(self.namespace) if callable(command) else command
        self.env = env
        self.transport = make_peer(peer, "sva_test_harness", self.domain, self.namespace)
        T = self.transport
        self.types = T.types
        self.pub_js = T.create_publisher("joint_states", "sensor_msgs/msg/JointState", state_qos)
        self.pub_odom = T.create_publisher("odom", "nav_msgs/msg/Odometry", state_qos)
        self.pub_desc = T.create_publisher(description_topic, "std_msgs/msg/String", QOS_DESCRIPTION)
        if contacts:
            self.pub_contacts = T.create_publisher("contacts", "sensor_msgs/msg/JointState", state_qos)
            self.pub_wrench = T.create_publisher("contact_forces", "geometry_msgs/msg/WrenchStamped", state_qos)
        self.pairs = []
        self.echo = RecordReader(T, lambda rec, recv_ns: self.pairs.append(rec))
        self.node = None
        if start_node:
            self.start()

    def start(self):
        self.node = NodeProcess(self.node_args, self.domain, self.namespace, self.node_transport, self.script,
                                self.command, self.env)

    def close(self):
        rc = self.node.stop() if self.node is not None else None
        self.transport.close()
        return rc

    def node_compiling(self):
        """The node says it is compiling kernels and has not said that it is done (the first start
        of an installed copy, whose numba cache is its own, compiles; the package announces it)."""
        lines = self.node.lines
        starts = [i for i, ln in enumerate(lines) if "sva_linearizer: compiling" in ln]
        return bool(starts) and not any("sva_linearizer: done in" in ln or "kernels ready" in ln
                                        for ln in lines[starts[-1]:])

    def wait_ready(self, timeout=120.0, need_js=True, compile_limit=900.0):
        """The node's output writers are matched (and its joint_states reader, if need_js), within
        `timeout` s; while the node is visibly compiling its kernels the wait goes on, to
        `compile_limit` s in all (a cold cache on a loaded 2-core machine: minutes)."""
        start = time.monotonic()
        end = start + timeout
        while True:
            ok = self.transport.wait_for_writers(self.echo.record_reader, max(0.0, end - time.monotonic()))
            if ok and need_js:
                ok = self.transport.wait_for_readers(self.pub_js, max(0.0, end - time.monotonic()))
            if ok or not self.node.alive() or time.monotonic() - start > compile_limit:
                break
            if self.node_compiling():
                end = time.monotonic() + 30.0          # still compiling: give it time, visibly bounded
                continue
            break
        assert ok, "node did not come up:\n" + self.node.output()
        self.spin(0.3)  # let the node's side of discovery settle too

    def spin(self, seconds):
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            self.transport.spin_once(min(0.05, left))

    def send_odom(self, stamp_ns, odom):
        p, quat, twist = odom
        self.pub_odom.publish(odometry_msg(self.types, stamp_ns, p, quat, twist))
        self.spin(0.05)

    def send_contacts(self, stamp_ns, frames, flags=None):
        """The active contact set (before the joint state it goes with)."""
        self.pub_contacts.publish(contacts_msg(self.types, stamp_ns, frames, flags))
        self.spin(0.05)

    def send_forces(self, stamp_ns, forces):
        """forces: [(frame, f (3 or 6))], one WrenchStamped each."""
        for frame, f in forces:
            f = list(f) + [0.0] * (6 - len(f))
            self.pub_wrench.publish(wrench_msg(self.types, stamp_ns, frame, f[:3], f[3:]))
        self.spin(0.05)

    def send(self, stamp_ns, names, s, r, tau=(), odom=None):
        """odom = (p, quat, twist) or None; odometry goes first."""
        if odom is not None:
            self.send_odom(stamp_ns, odom)
        self.pub_js.publish(joint_state_msg(self.types, stamp_ns, names, s, r, tau))

    def send_description(self, text):
        self.pub_desc.publish(self.types.String(data=text))

    def wait_pair(self, stamp_ns, timeout=20.0, resend=None):
        """The pair for stamp_ns; resend() is called again every 3 s while waiting (a sample
        written just before discovery completed may be lost)."""
        end = time.monotonic() + timeout
        next_resend = time.monotonic() + 3.0
        while time.monotonic() < end:
            for pair in self.pairs:
                if pair.stamp_ns == stamp_ns:
                    return pair
            self.transport.spin_once(0.05)
            if resend is not None and time.monotonic() > next_resend:
                resend()
                next_resend = time.monotonic() + 3.0
            assert self.node.alive(), "node died:\n" + self.node.output()
        raise AssertionError(f"no A/B for stamp {stamp_ns} within {timeout} s; node output:\n"
                             + self.node.output())

    def wait_log(self, pattern, start=0, timeout=20.0, resend=None):
        """Index of the first node log line from `start` matching pattern."""
        end = time.monotonic() + timeout
        next_resend = time.monotonic() + 3.0
        while time.monotonic() < end:
            i = self.node.find(pattern, start)
            if i is not None:
                return i
            self.transport.spin_once(0.05)
            if resend is not None and time.monotonic() > next_resend:
                resend()
                next_resend = time.monotonic() + 3.0
            assert self.node.alive(), "node died:\n" + self.node.output()
        raise AssertionError(f"node never logged /{pattern}/; output:\n" + self.node.output())
