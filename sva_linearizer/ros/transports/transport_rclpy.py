# SPDX-License-Identifier: BSD-3-Clause
"""The rclpy transport: a real ROS 2 node (Humble or newer) behind the interface :mod:`.transport`
describes; parameters declared with their ROS 2 types (:mod:`sva_linearizer.ros.node.parameters`).

rclpy and the message packages are imported when a transport is built, not with this module.
"""
from __future__ import annotations

import signal
import struct
import threading
import time

from ..node.log import Throttle
from ..node.parameters import PARAMETER_DESCRIPTIONS, PARAMETER_RANGES, typed_parameter_value
from ..wire.cdr import decode_joint_state, decode_odometry
from ..wire.messages import ROS_TYPES, types_namespace


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
        """Set the parameters to the values in use (in their declared types), then make them
        read-only, with their descriptions and (numbers) ranges: ``ros2 param describe`` shows
        them, and a change is refused (the node reads its parameters once, at start)."""
        from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor
        from rclpy.parameter import Parameter

        types = getattr(self, "_param_types", {})
        params = []
        values = {k: v for k, v in values.items() if v is not None}   # not decided yet: stays unset, writable
        for k, v in values.items():
            if not self.node.has_parameter(k):
                continue
            if k in types:
                params.append(Parameter(k, _rclpy_type(types[k]), typed_parameter_value(k, v, types[k])))
            else:
                params.append(Parameter(k, value=v))
        self.node.set_parameters(params)
        for k, kind in types.items():
            if not self.node.has_parameter(k) or k not in values:
                continue
            ptype = _rclpy_type(kind)
            desc = ParameterDescriptor(name=k, type=ptype.value, description=PARAMETER_DESCRIPTIONS.get(k, ""),
                                       read_only=True)
            if k in PARAMETER_RANGES:
                lo, hi = PARAMETER_RANGES[k]
                desc.floating_point_range = [FloatingPointRange(from_value=lo, to_value=hi, step=0.0)]
            self.node.set_descriptor(k, desc)
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
        """A publisher whose QoS the user may override (``qos_overrides.<topic>.publisher.<policy>``
        parameters: reliability, durability, history, depth)."""
        return self.node.create_publisher(self._by_name[type_name], topic, self._qos(qos),
                                          qos_overriding_options=_overridable())

    def create_subscription(self, topic, type_name, callback, qos, raw_decode=None, superseded=None):
        """``raw_decode``: None (the default: rclpy messages, except sensor_msgs/JointState and
        nav_msgs/Odometry, see below), True or False. With it, the subscription takes the
        serialized bytes and decodes them with :mod:`sva_linearizer.ros.wire.cdr` into plain attribute objects: rclpy
        builds a received message as Python objects with checked setters (an Odometry is ten),
        about twenty times the cost of the one-pass decode and a large share of the node's time
        per state at 1 kHz (docs/ros.md, "Node performance"). A sample that does not decode is
        dropped with a warning.

        ``superseded``: a callable; the subscription then hands ``callback`` only the newest of the
        samples waiting in its queue when it takes one, and calls ``superseded(n)`` with the number
        of older ones it took and left out (replaced by a newer sample before they were used)."""
        now = self.now_ns     # the node's clock: ROS time from /clock with use_sim_time
        decoder = {"nav_msgs/msg/Odometry": decode_odometry,
                   "sensor_msgs/msg/JointState": decode_joint_state}.get(type_name)
        raw = not (raw_decode is False or (raw_decode is None and decoder is None))
        if raw and decoder is None:
            raise ValueError(f"no raw decoder for {type_name}")
        warn = Throttle(self.logger.warning, 2.0)
        sub = None

        def newest(data):
            """The newest sample waiting behind `data` (its queue drained), counting the others."""
            left_out = 0
            while True:
                with sub.handle:
                    taken = sub.handle.take_message(sub.msg_type, sub.raw)
                if taken is None:
                    break
                data, left_out = taken[0], left_out + 1
            if left_out:
                superseded(left_out)
            return data

        def cb(data):
            if superseded is not None:
                data = newest(data)
            if raw:
                try:
                    data = decoder(memoryview(data))
                except (ValueError, struct.error, UnicodeDecodeError) as e:
                    warn(("decode", topic), f"{topic}: dropped a sample that could not be decoded ({e})")
                    return
            callback(data, now())
        sub = self.node.create_subscription(self._by_name[type_name], topic, cb, self._qos(qos), raw=raw,
                                            qos_overriding_options=_overridable())
        return sub

    def dispatch_waiting(self, subscription) -> int:
        """Take the samples waiting in a subscription's queue now and run its callback on each, ahead
        of the executor (which then finds them gone); -> how many."""
        n = 0
        while True:
            with subscription.handle:
                taken = subscription.handle.take_message(subscription.msg_type, subscription.raw)
            if taken is None:
                return n
            subscription.callback(taken[0])
            n += 1

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

    def create_timer(self, period_s, callback):
        """callback() every period_s seconds of the node's clock, from the spinning thread."""
        return self.node.create_timer(period_s, callback)

    def steady_ns(self):
        return time.monotonic_ns()

    def create_steady_timer(self, period_s, callback):
        """callback() every period_s seconds of the steady clock (not /clock), from the spinning
        thread, once started: created cancelled; ``reset()`` starts it, ``cancel()`` stops it."""
        from rclpy.clock import Clock, ClockType

        timer = self.node.create_timer(period_s, callback, clock=Clock(clock_type=ClockType.STEADY_TIME))
        timer.cancel()
        return timer

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


def _overridable():
    """rclpy's QoS overriding options: the policies ROS 2 lets a user override by parameter."""
    from rclpy.qos_overriding_options import QoSOverridingOptions

    return QoSOverridingOptions.with_default_policies()


def _rclpy_type(kind: str):
    """rclpy's Parameter.Type for a type name of :data:`sva_linearizer.ros.node.parameters.PARAMETER_TYPES`."""
    from rclpy.parameter import Parameter

    return {"string": Parameter.Type.STRING, "bool": Parameter.Type.BOOL, "double": Parameter.Type.DOUBLE,
            "string_array": Parameter.Type.STRING_ARRAY, "double_array": Parameter.Type.DOUBLE_ARRAY}[kind]
