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
    # and, for tests and tools: spin_once(timeout_s), wait_for_readers(pub), wait_for_writers(sub)

``qos`` is a dict ``reliable`` (bool), ``transient_local`` (bool), ``depth`` (int, keep-last).

:class:`DdsTransport` speaks the ROS 2 wire protocol itself: topic ``rt/<name>`` (a relative name
gets the namespace, default none), type ``pkg::msg::dds_::Type_``, XCDR1 little-endian, domain from
``ROS_DOMAIN_ID`` (default 0), Cyclone configuration from ``CYCLONEDDS_URI`` or the ``config``
argument, always preceded by :data:`CYCLONE_COMPATIBILITY` (what a Fast DDS peer needs). A ROS 2
system on the same domain sees its topics (``ros2 topic echo`` works), though not the node itself
(``ros2 node list`` relies on rmw-specific discovery data).

:class:`RclpyTransport` is a real rclpy node (see its docstring for signals, spinning, parameters).

:func:`make_transport` builds the one :func:`.prerequisites.choose_transport` picks (``kind="auto"``:
rclpy when it imports, else DDS; what is missing for it is an error, never a switch to the other).
"""
from __future__ import annotations

import os
import signal
import struct
import sys
import threading
import time
import types as _pytypes

from .messages import ROS_TYPES
from .prerequisites import TransportUnavailable, choose_transport


def types_namespace(by_ros_name):
    """``{"pkg/msg/Type": cls}`` -> a namespace with the classes by short name (``ns.JointState``)."""
    return _pytypes.SimpleNamespace(**{name.rsplit("/", 1)[1]: cls for name, cls in by_ros_name.items()})


# ----------------------------------------------------------------------------------- loopback
#: Cyclone: ignore the XTypes type information that eProsima's Fast DDS (RTPS vendor id 1.15)
#: announces. Cyclone rejects Fast DDS's type objects for every type with a sequence (JointState,
#: Odometry, Float64MultiArray: "ddsi_xt_type_add_typeobj with invalid type object") and then
#: matches none of them; with this element, endpoints of that vendor match by type name (as
#: ROS 2's rmw layer does) and the CDR bytes are the same. Only 1.15 is listed: Cyclone-Cyclone
#: (1.16) matching keeps its full type check. See the README (Transports) for what it costs.
#: GenerateKeyhash: Fast DDS only acts on a discovery "dispose" (an endpoint or participant
#: leaving) that carries a key hash, which Cyclone leaves out by default; without it a Fast DDS
#: peer keeps a deleted Cyclone node's endpoints until the lease expires (10 s). ROS 2 topics
#: have no keys, so user data is unchanged.
CYCLONE_COMPATIBILITY = ("<Compatibility><IgnoreTypeInformation>1.15</IgnoreTypeInformation>"
                         "</Compatibility><Internal><GenerateKeyhash>true</GenerateKeyhash></Internal>")


def default_cyclone_config(environ=None) -> str:
    """The DDS transport's configuration when none is given: the Fast DDS compatibility element,
    then ``CYCLONEDDS_URI`` (a user's settings come later and win where they overlap)."""
    env = os.environ if environ is None else environ
    base = f'<CycloneDDS><Domain Id="any">{CYCLONE_COMPATIBILITY}</Domain></CycloneDDS>'
    user = env.get("CYCLONEDDS_URI", "").strip()
    return f"{base},{user}" if user else base


def loopback_config(max_participants: int = 50) -> str:
    """Cyclone DDS configuration confining traffic to 127.0.0.1 (no multicast, unicast discovery),
    with the Fast DDS compatibility element (:data:`CYCLONE_COMPATIBILITY`).

    Suitable for ``CYCLONEDDS_URI`` (Cyclone accepts XML text there) or ``DdsTransport(config=...)``.
    """
    return ("<CycloneDDS><Domain Id=\"any\"><General><Interfaces><NetworkInterface name=\"lo\"/>"
            "</Interfaces><AllowMulticast>false</AllowMulticast></General>"
            f"{CYCLONE_COMPATIBILITY}"
            "<Discovery><Peers><Peer address=\"127.0.0.1\"/></Peers>"
            "<ParticipantIndex>auto</ParticipantIndex>"
            f"<MaxAutoParticipantIndex>{int(max_participants)}</MaxAutoParticipantIndex>"
            "</Discovery></Domain></CycloneDDS>")


def fastdds_loopback_profile() -> str:
    """Fast DDS XML profile (default participant profile) with one transport: UDPv4 whitelisted
    to 127.0.0.1, no builtin transports (no shared memory, no other interfaces)."""
    return """<?xml version="1.0" encoding="UTF-8"?>
<dds xmlns="http://www.eprosima.com">
  <profiles>
    <transport_descriptors>
      <transport_descriptor>
        <transport_id>sva_udp_loopback</transport_id>
        <type>UDPv4</type>
        <interfaceWhiteList><address>127.0.0.1</address></interfaceWhiteList>
      </transport_descriptor>
    </transport_descriptors>
    <participant profile_name="sva_loopback" is_default_profile="true">
      <rtps>
        <builtin>
          <initialPeersList>
            <locator><udpv4><address>127.0.0.1</address></udpv4></locator>
          </initialPeersList>
        </builtin>
        <userTransports><transport_id>sva_udp_loopback</transport_id></userTransports>
        <useBuiltinTransports>false</useBuiltinTransports>
      </rtps>
    </participant>
    <data_writer profile_name="sva_writer" is_default_profile="true">
      <times>
        <heartbeat_period><sec>0</sec><nanosec>100000000</nanosec></heartbeat_period>
      </times>
    </data_writer>
  </profiles>
</dds>
"""


_PROFILE_DIR = None


def fastdds_loopback_profile_path() -> str:
    """A file with :func:`fastdds_loopback_profile` (written once per process, in a private
    temporary directory removed at exit)."""
    global _PROFILE_DIR
    import atexit
    import shutil
    import tempfile

    if _PROFILE_DIR is None or not os.path.isdir(_PROFILE_DIR):
        _PROFILE_DIR = tempfile.mkdtemp(prefix="sva_fastdds_")
        atexit.register(shutil.rmtree, _PROFILE_DIR, True)
    path = os.path.join(_PROFILE_DIR, "fastdds_loopback.xml")
    if not os.path.exists(path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(fastdds_loopback_profile())
    return path


def private_domain_id(seed: int | None = None) -> int:
    """A domain id in 1..232 derived from the process id (or seed), to keep test runs apart."""
    x = os.getpid() if seed is None else int(seed)
    return 1 + (x * 7919) % 232


def loopback_vars(domain_id: int) -> dict:
    """The variables that confine both middlewares to 127.0.0.1 on the given domain: Cyclone's
    loopback configuration, and for ROS 2 (Fast DDS) the loopback-only profile
    (:func:`fastdds_loopback_profile`) with ``ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET``.

    Not LOCALHOST: with Kilted's rmw_fastrtps (9.3.3), ``LOCALHOST`` replaces the profile's
    transports with its own UDP transport, and the participant then binds sockets to 0.0.0.0 and
    to the machine's other addresses (seen with ``ss -uanp``); with ``SUBNET`` and this profile
    every socket is bound to 127.0.0.1 (multicast discovery joined on lo only, unicast initial
    peer 127.0.0.1). test_ros_interop.py checks the sockets."""
    profile = fastdds_loopback_profile_path()
    return {"CYCLONEDDS_URI": loopback_config(), "ROS_DOMAIN_ID": str(int(domain_id)),
            "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET", "ROS_STATIC_PEERS": "",
            "FASTDDS_DEFAULT_PROFILES_FILE": profile,
            "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp"}


def loopback_env(domain_id: int, base=None) -> dict:
    """Environment for a child process: loopback-only DDS (both middlewares) and the domain."""
    env = dict(os.environ if base is None else base)
    env.update(loopback_vars(domain_id))
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
            raise TransportUnavailable(f"the DDS transport needs the cyclonedds package ({e}): "
                                       "pip install 'sva_linearizer[dds]' (or pip install cyclonedds)") from None

        from . import dds_types

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
        """Delete every entity now, the participant and the domain last: Cyclone then tells its
        peers that the participant left (an SPDP dispose), so its endpoints leave their graphs at
        once instead of after the lease duration (10 s)."""
        if self.participant is None:
            return
        for _, reader, cond, _, _ in self._subs:
            try:
                self._waitset.detach(cond)
            except Exception:
                pass
        entities = ([cond for _, _, cond, _, _ in self._subs] + [r for _, r, _, _, _ in self._subs]
                    + list(self._writers) + list(self._topics.values()) + [self._waitset, self.participant])
        if self._domain is not None:
            entities.append(self._domain)
        for e in entities:
            _dds_delete(e)
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


# -------------------------------------------------------------------------------------- rclpy
class RclpyTransport:
    """Thin adapter over a real rclpy node (ROS 2 Humble or newer).

    * Its own context (``rclpy.init`` with ``domain_id``, default ROS_DOMAIN_ID) and rclpy's signal
      handlers off: SIGINT/SIGTERM only set a stop flag, so :meth:`spin`
      returns with the context still valid and the node can log its summary through rosout
      before :meth:`close` shuts everything down (no "publisher's context is invalid").
    * :meth:`spin` is a plain loop over one executor's ``spin_once`` (the events executor where
      rclpy has it, ``rclpy.experimental.EventsExecutor``, else the single-threaded one).
    * Parameters: :meth:`get_parameters` declares them all, each with its type; after the node has
      resolved them, :meth:`publish_parameters` writes the values in use back (so the parameter
      service reads ``floating_base: true``, not ``auto``) and from then on refuses changes (the
      node reads its parameters once, at start).
    """

    name = "rclpy"

    def __init__(self, node_name="sva_linearizer", args=None, parameter_overrides=None, namespace="",
                 domain_id=None, handle_signals=True, executor="auto"):
        import importlib

        import rclpy
        from rclpy.context import Context
        from rclpy.node import Node

        try:
            from rclpy.signals import SignalHandlerOptions
            no_signals = dict(signal_handler_options=SignalHandlerOptions.NO)
        except ImportError:  # Humble: rclpy.init has no signal_handler_options
            no_signals = {}
        self._rclpy = rclpy
        self.context = Context()
        init = dict(args=args, context=self.context, **no_signals)
        if domain_id is not None:
            init["domain_id"] = int(domain_id)
        rclpy.init(**init)
        self.node = Node(node_name, namespace=namespace or None, context=self.context,
                         parameter_overrides=parameter_overrides or [])
        self.logger = self.node.get_logger()   # RcutilsLogger: info / warning / error
        self._by_name = {}
        for name in ROS_TYPES:
            pkg, _, typ = name.split("/")
            self._by_name[name] = getattr(importlib.import_module(f"{pkg}.msg"), typ)
        self.types = types_namespace(self._by_name)
        self._stop = threading.Event()
        self._handle_signals = handle_signals
        self._frozen = False
        self.executor = self._make_executor(executor)
        self.executor.add_node(self.node)

    def _make_executor(self, kind):
        if kind in ("auto", "events"):
            try:
                from rclpy.experimental import EventsExecutor
                return EventsExecutor(context=self.context)
            except ImportError:
                if kind == "events":
                    raise
        from rclpy.executors import SingleThreadedExecutor
        return SingleThreadedExecutor(context=self.context)

    # ------------------------------------------------------------ parameters
    def get_parameters(self, defaults: dict, types: dict) -> dict:
        """Declare every parameter statically typed (``types``: name -> string, bool, double,
        string_array, double_array) and return the values in effect: the override (parameter file,
        ``-p``, ``parameter_overrides``) converted to the declared type, else the default. An
        empty list in a parameter file reaches rclpy as "not set" and takes the default; an
        unset ``floating_base`` (auto) stays unset until :meth:`publish_parameters`.
        ValueError names a parameter whose value does not have its type."""
        from rcl_interfaces.msg import ParameterDescriptor
        from rclpy.parameter import Parameter

        from .node import typed_parameter_value

        out, values = {}, []
        for name, default in defaults.items():
            kind = types[name]
            # the override as rcl parsed it (public API: a dynamically typed declaration, then gone)
            given = self.node.declare_parameter(name, None, ParameterDescriptor(dynamic_typing=True)).value
            self.node.undeclare_parameter(name)
            value = typed_parameter_value(name, default if given is None else given, kind)
            ptype = _rclpy_type(kind)
            self.node.declare_parameter(name, ptype, ParameterDescriptor(name=name, type=ptype.value),
                                        ignore_override=True)
            if value is not None:
                values.append(Parameter(name, ptype, value))
            out[name] = default if value is None else value
        self.node.set_parameters(values)
        self._param_types = dict(types)
        return out

    def publish_parameters(self, values: dict) -> None:
        """Set the parameters to the values in use (in their declared types), then refuse any
        later change."""
        from rcl_interfaces.msg import SetParametersResult
        from rclpy.parameter import Parameter

        from .node import typed_parameter_value

        types = getattr(self, "_param_types", {})
        params = []
        for k, v in values.items():
            if not self.node.has_parameter(k):
                continue
            if k in types:
                params.append(Parameter(k, _rclpy_type(types[k]), typed_parameter_value(k, v, types[k])))
            else:
                params.append(Parameter(k, value=v))
        self.node.set_parameters(params)

        def refuse(params):
            if not self._frozen:
                return SetParametersResult(successful=True)
            return SetParametersResult(successful=False, reason="sva_linearizer reads its parameters "
                                                                "once at start; restart the node to change them")
        self.node.add_on_set_parameters_callback(refuse)
        self._frozen = True

    # ------------------------------------------------------------ endpoints
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

    def create_subscription(self, topic, type_name, callback, qos, raw_decode=None):
        """``raw_decode``: None (the default: rclpy messages, except nav_msgs/Odometry, see below),
        True or False. With it, the subscription takes the serialized bytes and decodes them with
        :mod:`.cdr` into plain attribute objects: rclpy builds an Odometry as ten Python message
        objects with checked setters, 0.19 ms per sample measured (0.01 ms this way), which was a
        large part of the node's time per pair at 1 kHz. A sample that does not decode is dropped
        with a warning."""
        now = time.time_ns    # the node's clock is the system clock (no use_sim_time support)
        from . import cdr

        decoder = {"nav_msgs/msg/Odometry": cdr.decode_odometry}.get(type_name)
        if raw_decode is False or (raw_decode is None and decoder is None):
            def cb(msg):
                callback(msg, now())
            return self.node.create_subscription(self._by_name[type_name], topic, cb, self._qos(qos))
        if decoder is None:
            raise ValueError(f"no raw decoder for {type_name}")
        from .node import Throttle
        warn = Throttle(self.logger.warning, 2.0)

        def raw_cb(data):
            try:
                msg = decoder(memoryview(data))
            except (ValueError, struct.error, UnicodeDecodeError) as e:
                warn(("decode", topic), f"{topic}: dropped a sample that could not be decoded ({e})")
                return
            callback(msg, now())
        return self.node.create_subscription(self._by_name[type_name], topic, raw_cb, self._qos(qos), raw=True)

    def _wait(self, count, timeout_s):
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if count() > 0:
                return True
            self.spin_once(0.02)
        return count() > 0

    def wait_for_readers(self, publisher, timeout_s=10.0):
        """Wait until a publisher has a matched subscription; returns whether it has."""
        return self._wait(publisher.get_subscription_count, timeout_s)

    def wait_for_writers(self, subscription, timeout_s=10.0):
        """Wait until a subscription has a publisher on its topic; returns whether it has."""
        return self._wait(lambda: self.node.count_publishers(subscription.topic_name), timeout_s)

    # ------------------------------------------------------------ spinning
    def spin_once(self, timeout_s=0.1):
        """Wait up to timeout_s and run what is ready (after shutdown: nothing)."""
        try:
            self.executor.spin_once(timeout_sec=timeout_s)
        except Exception:
            if self.context.ok():
                raise
            return 0
        return 1

    def spin(self, duration_s=None):
        """Dispatch until SIGINT/SIGTERM, :meth:`stop`, or ``duration_s`` seconds."""
        handlers = {}
        if self._handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                handlers[sig] = signal.signal(sig, lambda *_: self.stop())
        end = None if duration_s is None else time.monotonic() + duration_s
        try:
            while not self._stop.is_set() and self.context.ok() and (end is None or time.monotonic() < end):
                self.spin_once(0.1 if end is None else max(0.0, min(0.1, end - time.monotonic())))
        finally:
            for sig, h in handlers.items():
                signal.signal(sig, h)

    def stop(self):
        """Ask :meth:`spin` to return (within its 0.1 s wait; safe from a signal handler)."""
        self._stop.set()

    def close(self):
        if self.node is None:
            return
        try:
            self.executor.shutdown(timeout_sec=1.0)
        except Exception:
            pass
        self.node.destroy_node()
        self.node = None
        self.context.try_shutdown()


def _rclpy_type(kind: str):
    """rclpy's Parameter.Type for a type name of ``PARAMETER_TYPES``."""
    from rclpy.parameter import Parameter

    return {"string": Parameter.Type.STRING, "bool": Parameter.Type.BOOL, "double": Parameter.Type.DOUBLE,
            "string_array": Parameter.Type.STRING_ARRAY, "double_array": Parameter.Type.DOUBLE_ARRAY}[kind]


def make_transport(kind="auto", node_name="sva_linearizer", **kwargs):
    """``kind``: "auto" (rclpy if it imports, else DDS), "rclpy" or "dds"; TransportUnavailable
    (one line: what is missing, how to install it) when the chosen transport cannot run."""
    kind = choose_transport(kind)
    if kind == "rclpy":
        return RclpyTransport(node_name, args=kwargs.get("args"),
                              parameter_overrides=kwargs.get("parameter_overrides"),
                              namespace=kwargs.get("namespace", ""), domain_id=kwargs.get("domain_id"))
    return DdsTransport(node_name, domain_id=kwargs.get("domain_id"), config=kwargs.get("config"),
                        namespace=kwargs.get("namespace", ""))

