# SPDX-License-Identifier: BSD-3-Clause
"""An in-memory transport with the interface of sva_linearizer.ros.transports.transport (for in-process tests)."""
from sva_linearizer.ros.wire import dds_types
from sva_linearizer.ros.wire.messages import types_namespace


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


class _SteadyTimer:
    def __init__(self, transport, period_s, callback):
        self.transport, self.period_ns, self.callback, self.due = transport, int(period_s * 1e9), callback, None

    def reset(self):
        self.due = self.transport.steady + self.period_ns

    def cancel(self):
        self.due = None


class FakeTransport:
    name = "fake"

    def __init__(self):
        self.types = types_namespace(dds_types.BY_ROS_NAME)
        self.logger = _Logger()
        self.published = {}
        self.subs = {}
        self.qos = {}
        self.clock_ns = 1_000_000_000
        self.steady = 0                # the steady clock (ns): advance() moves it and runs the timers due
        self.timers = []
        self.steady_timers = []

    def now_ns(self):
        return self.clock_ns

    def create_publisher(self, topic, type_name, qos):
        self.qos[topic] = (type_name, qos)
        return _Pub(self, topic)

    def create_subscription(self, topic, type_name, callback, qos, superseded=None):
        self.qos[topic] = (type_name, qos)
        self.subs[topic] = callback
        if superseded is not None:
            self.superseded = superseded        # a test calls it as the transport would

    def create_timer(self, period_s, callback):
        self.timers.append((period_s, callback))

    def dispatch_waiting(self, subscription):
        return 0                              # deliver() runs the callbacks at once: nothing waits

    def steady_ns(self):
        return self.steady

    def create_steady_timer(self, period_s, callback):
        timer = _SteadyTimer(self, period_s, callback)
        self.steady_timers.append(timer)
        return timer

    def advance(self, seconds):
        """Let `seconds` of steady time pass, running each steady timer whenever it is due."""
        end = self.steady + int(seconds * 1e9)
        self._run_due(lambda due: due <= end)
        self.steady = end

    def run_timers_before(self, ns):
        """Run each steady timer due before steady time ``ns`` (exact nanoseconds), then set the clock to ``ns``
        (a timer due at ``ns`` itself runs later, after what arrives at ``ns``)."""
        self._run_due(lambda due: due < ns)
        self.steady = ns

    def _run_due(self, is_due):
        """Run the steady timers, earliest first, while one has a due time that ``is_due``, each at
        its due time (the steady clock set to it)."""
        while True:
            due = [t for t in self.steady_timers if t.due is not None and is_due(t.due)]
            if not due:
                return
            t = min(due, key=lambda t: t.due)
            self.steady = t.due
            t.due += t.period_ns
            t.callback()

    def deliver(self, topic, msg, recv_ns=None):
        return self.subs[topic](msg, self.clock_ns if recv_ns is None else recv_ns)

    def count(self, topic="linearization/record"):
        return len(self.published.get(topic, []))
