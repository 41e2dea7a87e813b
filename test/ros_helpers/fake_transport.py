# SPDX-License-Identifier: BSD-3-Clause
"""An in-memory transport with the interface of sva_linearizer.ros.transport (for in-process tests)."""
from sva_linearizer.ros import dds_types
from sva_linearizer.ros.messages import types_namespace


class _Logger:
    def __init__(self):
        self.lines = []

    def info(self, text):
        self.lines.append(("INFO", text))

    def warning(self, text):
        self.lines.append(("WARN", text))

    def error(self, text):
        self.lines.append(("ERROR", text))

    def warnings(self):
        return [t for lvl, t in self.lines if lvl == "WARN"]


class _Pub:
    def __init__(self, transport, topic):
        self.transport, self.topic = transport, topic

    def publish(self, msg):
        self.transport.published.setdefault(self.topic, []).append(msg)


class FakeTransport:
    name = "fake"

    def __init__(self):
        self.types = types_namespace(dds_types.BY_ROS_NAME)
        self.logger = _Logger()
        self.published = {}
        self.subs = {}
        self.qos = {}
        self.clock_ns = 1_000_000_000
        self.timers = []

    def now_ns(self):
        return self.clock_ns

    def create_publisher(self, topic, type_name, qos):
        self.qos[topic] = (type_name, qos)
        return _Pub(self, topic)

    def create_subscription(self, topic, type_name, callback, qos):
        self.qos[topic] = (type_name, qos)
        self.subs[topic] = callback

    def create_timer(self, period_s, callback):
        self.timers.append((period_s, callback))

    def deliver(self, topic, msg, recv_ns=None):
        return self.subs[topic](msg, self.clock_ns if recv_ns is None else recv_ns)

    def count(self, topic="linearization/record"):
        return len(self.published.get(topic, []))
