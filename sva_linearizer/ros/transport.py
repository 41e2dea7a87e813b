"""Two transports behind one small interface: rclpy, and plain DDS through ``cyclonedds`` (PyPI).

The interface (what :class:`sva_linearizer.ros.node.LinearizerNode` uses)::

    transport.types                       # message classes by ROS name: JointState, Odometry, Header,
                                          # Time, String, Float64MultiArray, MultiArrayLayout, ...
    transport.logger                      # .info / .warning / .error (str)
    transport.now_ns() -> int             # the node's clock
    transport.create_publisher(topic, "pkg/msg/Type", qos) -> obj with .publish(msg)
    transport.create_subscription(topic, "pkg/msg/Type", callback, qos)   # callback(msg, recv_ns)
    transport.spin()                      # until SIGINT/SIGTERM or transport.stop()
    transport.close()

``qos`` is a dict ``reliable`` (bool), ``transient_local`` (bool), ``depth`` (int, keep-last).

:class:`DdsTransport` speaks the ROS 2 wire protocol itself: topic ``rt/<name>`` (a relative name
gets the namespace, default none), type ``pkg::msg::dds_::Type_``, XCDR1 little-endian, domain from
``ROS_DOMAIN_ID`` (default 0), Cyclone configuration from ``CYCLONEDDS_URI`` or the ``config``
argument. A ROS 2 system on the same domain sees its topics (``ros2 topic echo`` works), though
not the node itself (``ros2 node list`` relies on rmw-specific discovery data).

:func:`make_transport` picks rclpy when it is importable and DDS otherwise (``kind="auto"``).
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
import types as _pytypes

from .messages import ROS_TYPES


def types_namespace(by_ros_name):
    """``{"pkg/msg/Type": cls}`` -> a namespace with the classes by short name (``ns.JointState``)."""
    return _pytypes.SimpleNamespace(**{name.rsplit("/", 1)[1]: cls for name, cls in by_ros_name.items()})


# ----------------------------------------------------------------------------------- loopback
def loopback_config(max_participants: int = 50) -> str:
    """Cyclone DDS configuration confining traffic to 127.0.0.1 (no multicast, unicast discovery).

    Suitable for ``CYCLONEDDS_URI`` (Cyclone accepts XML text there) or ``DdsTransport(config=...)``.
    """
    return ("<CycloneDDS><Domain Id=\"any\"><General><Interfaces><NetworkInterface name=\"lo\"/>"
            "</Interfaces><AllowMulticast>false</AllowMulticast></General>"
            "<Discovery><Peers><Peer address=\"127.0.0.1\"/></Peers>"
            "<ParticipantIndex>auto</ParticipantIndex>"
            f"<MaxAutoParticipantIndex>{int(max_participants)}</MaxAutoParticipantIndex>"
            "</Discovery></Domain></CycloneDDS>")


def private_domain_id(seed: int | None = None) -> int:
    """A domain id in 1..232 derived from the process id (or seed), to keep test runs apart."""
    x = os.getpid() if seed is None else int(seed)
    return 1 + (x * 7919) % 232


def loopback_env(domain_id: int, base=None) -> dict:
    """Environment for a child process: loopback-only Cyclone and the given ROS_DOMAIN_ID."""
    env = dict(os.environ if base is None else base)
    env["CYCLONEDDS_URI"] = loopback_config()
    env["ROS_DOMAIN_ID"] = str(int(domain_id))
    return env


# ------------------------------------------------------------------------------------ logging
class StderrLogger:
    """ROS-looking log lines on stderr: ``[WARN] [1700000000.123456] [sva_linearizer]: text``."""

    def __init__(self, name, stream=None):
        self.name = name
        self.stream = stream

    def _emit(self, level, text):
        stream = self.stream or sys.stderr
        stream.write(f"[{level}] [{time.time():.6f}] [{self.name}]: {text}\n")
        stream.flush()

    def info(self, text):
        self._emit("INFO", text)

    def warning(self, text):
        self._emit("WARN", text)

    def error(self, text):
        self._emit("ERROR", text)


# ---------------------------------------------------------------------------------------- DDS
def dds_topic_name(topic: str, namespace: str = "") -> str:
    """ROS 2 topic name -> DDS topic name (``rt/`` prefix, relative names in the namespace)."""
    if topic.startswith("/"):
        full = topic
    else:
        ns = namespace.strip("/")
        full = f"/{ns}/{topic}" if ns else f"/{topic}"
    return "rt" + full


class _DdsPublisher:
    def __init__(self, writer):
        self.writer = writer

    def publish(self, msg):
        self.writer.write(msg)


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
            raise RuntimeError(f"the DDS transport needs the cyclonedds package ({e}): "
                               "pip install cyclonedds, or install sva_linearizer[dds]") from None

        from . import dds_types

        if domain_id is None:
            domain_id = int(os.environ.get("ROS_DOMAIN_ID", "0") or 0)
        self.domain_id = int(domain_id)
        self.namespace = namespace
        self.node_name = node_name
        self.logger = logger or StderrLogger(node_name)
        self._domain = Domain(self.domain_id, config) if config is not None else None
        self.participant = DomainParticipant(self.domain_id)
        self._by_name = dds_types.BY_ROS_NAME
        self.types = types_namespace(self._by_name)
        self._waitset = WaitSet(self.participant)
        self._topics = {}
        self._subs = []
        self._writers = []
        self._stop = threading.Event()
        from .node import Throttle
        self._warn = Throttle(self.logger.warning, 2.0)

    @staticmethod
    def _qos(qos):
        from cyclonedds.qos import Policy, Qos
        from cyclonedds.util import duration

        rel = (Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=100))
               if qos.get("reliable", True) else Policy.Reliability.BestEffort)
        dur = Policy.Durability.TransientLocal if qos.get("transient_local") else Policy.Durability.Volatile
        return Qos(rel, dur, Policy.History.KeepLast(int(qos.get("depth", 10))),
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
        return time.time_ns()

    def create_publisher(self, topic, type_name, qos):
        from cyclonedds.pub import DataWriter

        w = DataWriter(self.participant, self._topic(topic, type_name), qos=self._qos(qos))
        self._writers.append(w)
        return _DdsPublisher(w)

    def create_subscription(self, topic, type_name, callback, qos):
        from cyclonedds.core import InstanceState, ReadCondition, SampleState, ViewState
        from cyclonedds.sub import DataReader

        reader = DataReader(self.participant, self._topic(topic, type_name), qos=self._qos(qos))
        cond = ReadCondition(reader, SampleState.Any | ViewState.Any | InstanceState.Any)
        self._waitset.attach(cond)
        self._subs.append((topic, reader, cond, callback, max(1, int(qos.get("depth", 10)))))
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

    def spin_once(self, timeout_s=0.1):
        """Wait up to timeout_s for data and dispatch it; returns the number of samples handled."""
        from cyclonedds.util import duration

        self._waitset.wait(duration(seconds=timeout_s))
        handled = 0
        for topic, reader, cond, callback, depth in self._subs:
            try:
                samples = reader.take(N=depth)
            except Exception as e:  # undecodable sample: report, drop, keep running
                self._warn(("decode", topic), f"{topic}: dropped a sample that could not be decoded ({e})")
                continue
            now = time.time_ns()
            for msg in samples:
                if not getattr(msg.sample_info, "valid_data", True) or not hasattr(msg, "__idl__"):
                    continue
                handled += 1
                try:
                    callback(msg, now)
                except Exception as e:  # a bug must not take the node down silently
                    self._warn(("callback", topic), f"{topic}: callback failed: {type(e).__name__}: {e}")
        return handled

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
        for _, reader, cond, _, _ in self._subs:
            try:
                self._waitset.detach(cond)
            except Exception:
                pass
        self._subs.clear()
        self._writers.clear()
        self._topics.clear()
        self.participant = None
        self._waitset = None
        self._domain = None


# -------------------------------------------------------------------------------------- rclpy
def rclpy_available() -> bool:
    try:
        import rclpy  # noqa: F401
        import sensor_msgs.msg  # noqa: F401
        import nav_msgs.msg  # noqa: F401
        import std_msgs.msg  # noqa: F401
    except ImportError:
        return False
    return True


def require_rclpy():
    if not rclpy_available():
        raise RuntimeError("transport rclpy requested but rclpy (ROS 2) is not importable; "
                           "source your ROS 2 setup or use --transport dds")


class RclpyTransport:
    """Thin adapter over a real rclpy node (ROS 2 Humble or newer)."""

    name = "rclpy"

    def __init__(self, node_name="sva_linearizer", args=None, parameter_overrides=None, namespace=""):
        import importlib

        import rclpy
        from rclpy.node import Node

        self._rclpy = rclpy
        self._own_context = not rclpy.ok()
        if self._own_context:
            rclpy.init(args=args)
        self.node = Node(node_name, namespace=namespace or None,
                         parameter_overrides=parameter_overrides or [])
        self.logger = self.node.get_logger()   # RcutilsLogger: info / warning / error
        self._by_name = {}
        for name in ROS_TYPES:
            pkg, _, typ = name.split("/")
            self._by_name[name] = getattr(importlib.import_module(f"{pkg}.msg"), typ)
        self.types = types_namespace(self._by_name)

    def get_parameters(self, defaults: dict) -> dict:
        """Declare every parameter (dynamically typed) and return the values rclpy resolved."""
        from rcl_interfaces.msg import ParameterDescriptor

        out = {}
        for name, default in defaults.items():
            desc = ParameterDescriptor(dynamic_typing=True)
            out[name] = self.node.declare_parameter(name, default, desc).value
        return out

    def _qos(self, qos):
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

        return QoSProfile(
            history=HistoryPolicy.KEEP_LAST, depth=int(qos.get("depth", 10)),
            reliability=ReliabilityPolicy.RELIABLE if qos.get("reliable", True) else ReliabilityPolicy.BEST_EFFORT,
            durability=DurabilityPolicy.TRANSIENT_LOCAL if qos.get("transient_local") else DurabilityPolicy.VOLATILE)

    def now_ns(self):
        return self.node.get_clock().now().nanoseconds

    def create_publisher(self, topic, type_name, qos):
        return self.node.create_publisher(self._by_name[type_name], topic, self._qos(qos))

    def create_subscription(self, topic, type_name, callback, qos):
        def cb(msg):
            callback(msg, self.now_ns())
        return self.node.create_subscription(self._by_name[type_name], topic, cb, self._qos(qos))

    def spin(self, duration_s=None):
        from rclpy.executors import ExternalShutdownException

        try:
            if duration_s is None:
                self._rclpy.spin(self.node)
            else:
                end = time.monotonic() + duration_s
                while self._rclpy.ok() and time.monotonic() < end:
                    self._rclpy.spin_once(self.node, timeout_sec=0.1)
        except (KeyboardInterrupt, ExternalShutdownException):
            pass

    def stop(self):
        self.node.context.try_shutdown()

    def close(self):
        context = self.node.context
        self.node.destroy_node()
        if self._own_context:
            context.try_shutdown()


def make_transport(kind="auto", node_name="sva_linearizer", **kwargs):
    """``kind``: "auto" (rclpy if importable, else DDS), "rclpy" or "dds"."""
    if kind not in ("auto", "rclpy", "dds"):
        raise ValueError(f"transport must be auto, rclpy or dds, got {kind!r}")
    if kind == "auto":
        kind = "rclpy" if rclpy_available() else "dds"
    if kind == "rclpy":
        require_rclpy()
        return RclpyTransport(node_name, args=kwargs.get("args"),
                              parameter_overrides=kwargs.get("parameter_overrides"),
                              namespace=kwargs.get("namespace", ""))
    return DdsTransport(node_name, domain_id=kwargs.get("domain_id"), config=kwargs.get("config"),
                        namespace=kwargs.get("namespace", ""))

