# SPDX-License-Identifier: BSD-3-Clause
"""The DDS transport: ROS 2's wire protocol spoken directly through the ``cyclonedds`` package
(PyPI), no ROS 2 installation needed. Its interface is the one :mod:`.transport` describes.

On the wire: topic ``rt/<name>`` (a relative name gets the namespace, default none), type
``pkg::msg::dds_::Type_`` (:mod:`sva_linearizer.ros.wire.dds_types`), XCDR1 little-endian, domain from ``ROS_DOMAIN_ID``
(default 0), Cyclone configuration from ``CYCLONEDDS_URI`` or the ``config`` argument, always
preceded by :data:`.cyclone_compat.CYCLONE_COMPATIBILITY` (what a Fast DDS peer needs). A ROS 2
system on the same domain sees its topics (``ros2 topic echo`` works), though not the node itself
(``ros2 node list`` relies on rmw-specific discovery data).

``cyclonedds`` is imported when a transport is built, not with this module.
"""
from __future__ import annotations

import os
import signal
import threading
import time

from ..node.log import StderrLogger, Throttle
from ..wire.messages import types_namespace
from .cyclone_compat import default_cyclone_config
from .prerequisites import TransportUnavailable


def dds_topic_name(topic: str, namespace: str = "") -> str:
    """ROS 2 topic name -> DDS topic name (``rt/`` prefix, relative names in the namespace)."""
    if topic.startswith("/"):
        full = topic
    else:
        ns = namespace.strip("/")
        full = f"/{ns}/{topic}" if ns else f"/{topic}"
    return "rt" + full


class _DdsPublisher:
    """What create_publisher returns: ``publish(msg)`` over a Cyclone DataWriter."""

    def __init__(self, writer):
        self.writer = writer

    def publish(self, msg):
        self.writer.write(msg)


class _DdsTimer:
    """A timer of :class:`DdsTransport`: ``callback`` every ``period`` seconds from ``due`` (the
    monotonic time of the next call; None: cancelled)."""
    __slots__ = ("period", "callback", "due")

    def __init__(self, period_s, callback):
        self.period, self.callback, self.due = float(period_s), callback, None

    def reset(self):
        self.due = time.monotonic() + self.period

    def cancel(self):
        self.due = None


class DdsTransport:
    """ROS 2 wire-compatible transport on the ``cyclonedds`` Python package (no ROS 2 needed).

    One thread does everything: :meth:`spin` waits on a WaitSet and calls the subscription
    callbacks in the order the subscriptions were created (the node subscribes odom before
    joint_states, so odometry that arrived in the same wake-up is seen first).
    """

    name = "dds"

    def __init__(self, node_name="sva_linearizer", domain_id=None, config=None, namespace="", logger=None):
        try:
            from cyclonedds.core import WaitSet
            from cyclonedds.domain import Domain, DomainParticipant
        except ImportError as e:
            raise TransportUnavailable(f"the DDS transport needs the cyclonedds package ({e}): "
                                       "pip install 'sva_linearizer[dds]' (or pip install cyclonedds)") from None

        from ..wire.dds_types import BY_ROS_NAME

        if domain_id is None:
            domain_id = int(os.environ.get("ROS_DOMAIN_ID", "0") or 0)
        self.domain_id = int(domain_id)
        self.namespace = namespace
        self.node_name = node_name
        self.logger = logger or StderrLogger(node_name)
        # always an explicit configuration: the default one adds the Fast DDS compatibility
        # element to whatever CYCLONEDDS_URI says
        self._domain = Domain(self.domain_id, config if config is not None else default_cyclone_config())
        self.participant = DomainParticipant(self.domain_id)
        self._by_name = BY_ROS_NAME
        self.types = types_namespace(self._by_name)
        self._waitset = WaitSet(self.participant)
        self._topics = {}
        self._subs = []        # (topic, reader, read condition, callback, depth, superseded), in creation order
        self._timers = []      # _DdsTimer
        self._sim_time_ns = None   # with use_sim_time: the last /clock
        self._writers = []
        self._stop = threading.Event()
        self._warn = Throttle(self.logger.warning, 2.0)

    @staticmethod
    def _qos(qos):
        from cyclonedds.qos import Policy, Qos
        from cyclonedds.util import duration

        reliability = (Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=100))
                       if qos.get("reliable", True) else Policy.Reliability.BestEffort)
        durability = (Policy.Durability.TransientLocal if qos.get("transient_local")
                      else Policy.Durability.Volatile)
        return Qos(reliability, durability, Policy.History.KeepLast(int(qos.get("depth", 10))),
                   Policy.DataRepresentation(use_cdrv0_representation=True))

    def _topic(self, topic, type_name):
        from cyclonedds.topic import Topic

        dds_name = dds_topic_name(topic, self.namespace)
        cls = self._by_name[type_name]
        key = (dds_name, cls)
        if key not in self._topics:
            self._topics[key] = Topic(self.participant, dds_name, cls)
        return self._topics[key]

    def now_ns(self):
        """The node's clock: the system clock, or with use_sim_time the last /clock (0 before one)."""
        return self._sim_time_ns if self._sim_time_ns is not None else time.time_ns()

    def use_sim_time(self):
        """ROS time from /clock (rosgraph_msgs/Clock), as rclpy's time source does with use_sim_time."""
        self._sim_time_ns = 0

        def on_clock(msg, recv_ns):
            self._sim_time_ns = int(msg.clock.sec) * 1_000_000_000 + int(msg.clock.nanosec)
        self.create_subscription("/clock", "rosgraph_msgs/msg/Clock", on_clock,
                                 dict(reliable=False, transient_local=False, depth=1))

    def create_publisher(self, topic, type_name, qos):
        from cyclonedds.pub import DataWriter

        writer = DataWriter(self.participant, self._topic(topic, type_name), qos=self._qos(qos))
        self._writers.append(writer)
        return _DdsPublisher(writer)

    def create_subscription(self, topic, type_name, callback, qos, superseded=None):
        """``superseded``: a callable; ``callback`` then gets only the newest of the samples taken
        together, and ``superseded(n)`` the number of older ones left out (replaced by a newer
        sample before they were used)."""
        from cyclonedds.core import InstanceState, ReadCondition, SampleState, ViewState
        from cyclonedds.sub import DataReader

        reader = DataReader(self.participant, self._topic(topic, type_name), qos=self._qos(qos))
        cond = ReadCondition(reader, SampleState.Any | ViewState.Any | InstanceState.Any)
        self._waitset.attach(cond)
        self._subs.append((topic, reader, cond, callback, max(1, int(qos.get("depth", 10))), superseded))
        return reader

    @staticmethod
    def _wait(count, timeout_s):
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if count() > 0:
                return True
            time.sleep(0.02)
        return count() > 0

    def wait_for_readers(self, publisher, timeout_s=10.0):
        """Wait until a publisher has a matched reader; returns whether it has."""
        return self._wait(lambda: len(publisher.writer.get_matched_subscriptions()), timeout_s)

    def wait_for_writers(self, reader, timeout_s=10.0):
        """Wait until a subscription (the reader create_subscription returned) has a matched writer."""
        return self._wait(lambda: len(reader.get_matched_publications()), timeout_s)

    def create_timer(self, period_s, callback):
        """callback() every period_s seconds (monotonic clock), from spin_once."""
        timer = _DdsTimer(period_s, callback)
        timer.reset()
        self._timers.append(timer)
        return timer

    def steady_ns(self):
        return time.monotonic_ns()

    def create_steady_timer(self, period_s, callback):
        """callback() every period_s seconds of the monotonic clock, from spin_once, once started:
        created cancelled; ``reset()`` starts it, ``cancel()`` stops it."""
        timer = _DdsTimer(period_s, callback)
        self._timers.append(timer)
        return timer

    def _run_timers(self):
        now = time.monotonic()
        for timer in self._timers:
            if timer.due is not None and now >= timer.due:
                timer.due = max(timer.due + timer.period, now)
                try:
                    timer.callback()
                except Exception as e:  # a bug must not take the node down silently
                    self._warn(("timer", id(timer)), f"timer callback failed: {type(e).__name__}: {e}")

    def _next_due(self):
        due = [t.due for t in self._timers if t.due is not None]
        return min(due) if due else None

    def spin_once(self, timeout_s=0.1):
        """Wait up to timeout_s for data and dispatch it; returns the number of samples handled."""
        from cyclonedds.util import duration

        if self._timers:
            self._run_timers()
            due = self._next_due()
            if due is not None:
                timeout_s = max(0.0, min(timeout_s, due - time.monotonic()))
        self._waitset.wait(duration(seconds=timeout_s))
        return sum(self._dispatch(entry) for entry in self._subs)

    def _dispatch(self, entry) -> int:
        """Take one subscription's waiting samples and run its callback on them; -> how many."""
        topic, reader, cond, callback, depth, superseded = entry
        try:
            samples = reader.take(N=depth)
        except Exception as e:  # undecodable sample: report, drop, keep running
            self._warn(("decode", topic), f"{topic}: dropped a sample that could not be decoded ({e})")
            return 0
        now = self.now_ns()
        samples = [m for m in samples if getattr(m.sample_info, "valid_data", True) and hasattr(m, "__idl__")]
        if superseded is not None and len(samples) > 1:
            superseded(len(samples) - 1)
            samples = samples[-1:]
        for msg in samples:
            try:
                callback(msg, now)
            except Exception as e:  # a bug must not take the node down silently
                self._warn(("callback", topic), f"{topic}: callback failed: {type(e).__name__}: {e}")
        return len(samples)

    def dispatch_waiting(self, reader) -> int:
        """Take the samples waiting in a subscription's reader now and run its callback on each
        (what spin_once does for every subscription); -> how many."""
        return sum(self._dispatch(entry) for entry in self._subs if entry[1] is reader)

    def spin(self, duration_s=None):
        """Dispatch until SIGINT/SIGTERM, :meth:`stop`, or ``duration_s`` seconds."""
        handlers = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                handlers[sig] = signal.signal(sig, lambda *_: self._stop.set())
        end = None if duration_s is None else time.monotonic() + duration_s
        try:
            while not self._stop.is_set() and (end is None or time.monotonic() < end):
                self.spin_once(0.1 if end is None else max(0.0, min(0.1, end - time.monotonic())))
        finally:
            for sig, h in handlers.items():
                signal.signal(sig, h)

    def stop(self):
        self._stop.set()

    def close(self):
        """Delete every entity now, the participant and the domain last: Cyclone then tells its
        peers that the participant left (an SPDP dispose), so its endpoints leave their graphs at
        once instead of after the lease duration (10 s)."""
        if self.participant is None:
            return
        for _, reader, cond, _, _, _ in self._subs:
            try:
                self._waitset.detach(cond)
            except Exception:
                pass
        entities = ([cond for _, _, cond, _, _, _ in self._subs] + [r for _, r, _, _, _, _ in self._subs]
                    + list(self._writers) + list(self._topics.values()) + [self._waitset, self.participant])
        if self._domain is not None:
            entities.append(self._domain)
        for entity in entities:
            _dds_delete(entity)
        self._subs.clear()
        self._writers.clear()
        self._topics.clear()
        self.participant = None
        self._waitset = None
        self._domain = None


def _dds_delete(entity):
    """dds_delete an entity now (the cyclonedds package otherwise deletes it when the Python object
    is collected, which for a participant may be never before exit) and make its __del__ a no-op."""
    from cyclonedds.core import Entity

    ref = getattr(entity, "_ref", None)
    if ref is None or Entity._entities.get(ref) is not entity:
        return
    del Entity._entities[ref]
    try:
        entity._delete(ref)
    except Exception:
        pass


