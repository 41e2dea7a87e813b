"""Minimal stand-ins for rclpy and the ROS 2 message packages, shaped after their public API
(rclpy.init/ok/spin/spin_once, Node.declare_parameter/create_publisher/create_subscription/
get_logger/get_clock/context, rclpy.qos, rclpy.parameter.Parameter, ParameterDescriptor), so that the
rclpy adapter's glue runs on machines without ROS 2. Message classes are the DDS IDL structs, which
have the ROS field names and keyword constructors like rclpy messages."""
import sys
import time
import types

from sva_linearizer.ros import dds_types as D


class _Enum:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class QoSProfile:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class Parameter:
    def __init__(self, name, type_=None, value=None):
        self.name, self.value = name, value


class ParameterDescriptor:
    def __init__(self, dynamic_typing=False):
        self.dynamic_typing = dynamic_typing


class ExternalShutdownException(Exception):
    pass


class _Logger:
    def __init__(self, lines):
        self.lines = lines

    def info(self, t):
        self.lines.append(("INFO", t))

    def warning(self, t):
        self.lines.append(("WARN", t))

    def error(self, t):
        self.lines.append(("ERROR", t))


class _Context:
    def __init__(self, state):
        self.state = state

    def try_shutdown(self):
        self.state["ok"] = False


class _Publisher:
    def __init__(self, node, topic):
        self.node, self.topic = node, topic

    def publish(self, msg):
        self.node.published.setdefault(self.topic, []).append(msg)


class Node:
    instances = []

    def __init__(self, node_name, *, namespace=None, parameter_overrides=None, **kw):
        self.name, self.namespace = node_name, namespace
        self.overrides = {p.name: p for p in (parameter_overrides or [])}
        self.declared, self.published, self.subs, self.pub_qos = {}, {}, {}, {}
        self.log_lines = []
        self.context = _Context(_STATE)
        Node.instances.append(self)

    def declare_parameter(self, name, value=None, descriptor=None):
        assert descriptor is not None and descriptor.dynamic_typing
        p = Parameter(name, value=self.overrides[name].value if name in self.overrides else value)
        self.declared[name] = p
        return p

    def get_logger(self):
        return _Logger(self.log_lines)

    def get_clock(self):
        now = types.SimpleNamespace(nanoseconds=time.time_ns())
        return types.SimpleNamespace(now=lambda: now)

    def create_publisher(self, msg_type, topic, qos):
        self.pub_qos[topic] = (msg_type, qos)
        return _Publisher(self, topic)

    def create_subscription(self, msg_type, topic, callback, qos):
        self.subs[topic] = (msg_type, callback, qos)
        return object()

    def destroy_node(self):
        self.destroyed = True


_STATE = {"ok": False, "init_args": None}


def install(monkeypatch):
    """Put the fake modules into sys.modules for the duration of a test."""
    _STATE.update(ok=False, init_args=None)
    Node.instances.clear()

    def init(args=None):
        _STATE.update(ok=True, init_args=args)

    def spin_once(node, timeout_sec=None):
        time.sleep(min(timeout_sec or 0.0, 0.01))

    def spin(node):
        raise ExternalShutdownException()

    mods = {
        "rclpy": dict(init=init, ok=lambda: _STATE["ok"], spin=spin, spin_once=spin_once),
        "rclpy.node": dict(Node=Node),
        "rclpy.qos": dict(QoSProfile=QoSProfile, HistoryPolicy=_Enum(KEEP_LAST="keep_last"),
                          ReliabilityPolicy=_Enum(RELIABLE="reliable", BEST_EFFORT="best_effort"),
                          DurabilityPolicy=_Enum(TRANSIENT_LOCAL="transient_local", VOLATILE="volatile")),
        "rclpy.executors": dict(ExternalShutdownException=ExternalShutdownException),
        "rclpy.parameter": dict(Parameter=Parameter),
        "rcl_interfaces": {}, "rcl_interfaces.msg": dict(ParameterDescriptor=ParameterDescriptor),
        "builtin_interfaces": {}, "builtin_interfaces.msg": dict(Time=D.Time),
        "std_msgs": {}, "std_msgs.msg": dict(Float64MultiArray=D.Float64MultiArray, Header=D.Header,
                                             MultiArrayDimension=D.MultiArrayDimension,
                                             MultiArrayLayout=D.MultiArrayLayout, String=D.String),
        "sensor_msgs": {}, "sensor_msgs.msg": dict(JointState=D.JointState),
        "nav_msgs": {}, "nav_msgs.msg": dict(Odometry=D.Odometry),
        "geometry_msgs": {}, "geometry_msgs.msg": {k: getattr(D, k) for k in (
            "Point", "Pose", "PoseWithCovariance", "Quaternion", "Twist", "TwistWithCovariance", "Vector3")},
    }
    for name, attrs in mods.items():
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, m)
    for name in mods:
        if "." in name:
            parent, child = name.rsplit(".", 1)
            monkeypatch.setattr(sys.modules[parent], child, sys.modules[name], raising=False)
    return _STATE
