"""The linearizer node's logic, written once for every transport (rclpy or plain DDS).

:class:`LinearizerNode` takes a *transport* (see :mod:`sva_linearizer.ros.transport`) and the
node parameters. It

* holds the model, built from the ``robot_description`` parameter (URDF XML), else ``urdf_path``,
  else ``robot`` (a name known to :mod:`sva_linearizer.robots`), else from the robot_description
  topic (std_msgs/String, reliable + transient-local, as robot_state_publisher publishes it; a new
  description replaces the model, a malformed one is reported and ignored);
* subscribes ``joint_states`` (sensor_msgs/JointState, mapped by joint name; ``effort`` is the
  joint torque tau, all zeros when ``effort`` is empty) and, for a floating base, ``odom``
  (nav_msgs/Odometry: pose of the base in the world frame, twist in the base frame per REP 105,
  i.e. exactly the body twist [v_lin; w] of the library's ``v``);
* for every joint state it gets to (subscription depth 1, so a slow node drops to the newest state
  instead of queueing; ``max_rate`` limits further by input stamp), computes A and B with
  :func:`sva_linearizer.linearize` and publishes ``linearization/A``, ``linearization/B`` and the
  pair record ``linearization/stamp`` (see :mod:`sva_linearizer.ros.messages` for the pairing).

Bad input never produces output: NaN/inf values, unknown/missing/duplicate joint names, arrays of
the wrong length, a quaternion whose norm is off by more than ``quaternion_tolerance``, odometry
whose stamp is more than ``max_odom_age`` from the joint state's, stamps older than the previous
accepted one (out of order), a missing or malformed robot description. Each such sample is
dropped with a warning that names the problem (at most one per problem kind per ``warn_period``
seconds, with a count of the suppressed ones) and the node keeps running.

Stamps: a zero header stamp means "unstamped" and the receive time is used instead. Odometry is
matched to a joint state by stamp: the buffered odometry sample nearest in time is used, and it must
lie within ``max_odom_age`` seconds of the joint state's stamp. A stamp that goes back by more than
``time_reset_threshold`` seconds is taken as a clock reset (e.g. a restarted simulation or bag):
the node forgets its history and carries on; a smaller step back is "out of order" and dropped.
"""
from __future__ import annotations

import math
import time
from collections import deque

import numpy as np

import sva_linearizer as sl

from .messages import (TOPIC_A, TOPIC_B, TOPIC_STAMP, crc32_hex, make_time, matrix_payload,
                       matrix_to_msg, pair_frame_id, stamp_to_ns)

NODE_NAME = "sva_linearizer"

#: Parameter name -> default. These are also the keys of config/<robot>.yaml.
DEFAULT_PARAMETERS = {
    "robot_description": "",      # URDF XML (takes precedence)
    "urdf_path": "",              # path to a URDF file
    "robot": "",                  # a robot name known to sva_linearizer.robots (e.g. solo12)
    "robot_description_topic": "/robot_description",  # used when none of the above is set
    "floating_base": "auto",      # true: SE(3) base from odom; false: fixed base, no odom;
                                  # auto: the named robot's default, else true
    "gravity": [0.0, 0.0, -9.81],  # world frame
    "max_rate": 0.0,              # Hz, by input stamp; 0: every joint state the node gets to
    "max_odom_age": 0.1,          # s, |joint state stamp - odom stamp| allowed
    "quaternion_tolerance": 1e-3,  # |norm - 1| allowed (then normalised); beyond: rejected
    "time_reset_threshold": 1.0,  # s; a larger step back in stamps is a clock reset
    "warn_period": 2.0,           # s between two warnings of the same kind; 0: no throttling
    "ignore_unknown_joints": False,  # true: names not in the model are ignored instead of rejected
    "joint_states_topic": "joint_states",
    "odom_topic": "odom",
}

# QoS profiles, transport-neutral (reliability, durability, depth).
# The input subscriptions are best effort: in ROS 2 (DDS) a best-effort subscription matches both
# reliable and best-effort publishers, a reliable one only reliable publishers, and many drivers
# publish joint states with the sensor-data QoS (best effort). The node wants the newest sample
# anyway (depth 1), so reliable repair of a sample it would skip buys nothing.
QOS_STATE = dict(reliable=False, transient_local=False, depth=1)    # newest wins
QOS_ODOM = dict(reliable=False, transient_local=False, depth=10)
# What the package's own publishers of states use (simulator, tests): ROS 2's default profile.
QOS_STATE_PUB = dict(reliable=True, transient_local=False, depth=10)
QOS_DESCRIPTION = dict(reliable=True, transient_local=True, depth=1)  # as robot_state_publisher
QOS_OUTPUT = dict(reliable=True, transient_local=False, depth=10)


def _as_bool(v, name):
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "1", "yes", "on", "false", "0", "no", "off"):
        return v.strip().lower() in ("true", "1", "yes", "on")
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    raise ValueError(f"parameter {name}: expected true or false, got {v!r}")


def _as_float(v, name, minimum=0.0):
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"parameter {name}: expected a number, got {v!r}") from None
    if not math.isfinite(f) or f < minimum:
        raise ValueError(f"parameter {name}: expected a finite number >= {minimum}, got {v!r}")
    return f


def _ros_builtin(name):
    """Parameters every ROS 2 node has (launch files set them); not the node's own."""
    return name in ("use_sim_time", "start_type_description_service") or name.startswith("qos_overrides.")


def normalize_parameters(params: dict) -> dict:
    """Defaults filled in, types coerced and checked; raises ValueError naming a bad parameter.
    ROS 2's built-in parameters (use_sim_time, qos_overrides.*) are accepted and left out."""
    params = {k: v for k, v in params.items() if not _ros_builtin(k)}
    unknown = sorted(set(params) - set(DEFAULT_PARAMETERS))
    if unknown:
        raise ValueError(f"unknown parameter(s): {', '.join(unknown)} (known: {', '.join(DEFAULT_PARAMETERS)})")
    p = dict(DEFAULT_PARAMETERS)
    p.update({k: v for k, v in params.items() if v is not None})
    for k in ("robot_description", "urdf_path", "robot", "robot_description_topic",
              "joint_states_topic", "odom_topic"):
        if not isinstance(p[k], str):
            raise ValueError(f"parameter {k}: expected a string, got {p[k]!r}")
    if p["floating_base"] == "auto":
        p["floating_base"] = True
        if p["robot"] and not (p["robot_description"] or p["urdf_path"]):
            from sva_linearizer.robots import default_floating_base
            try:
                p["floating_base"] = default_floating_base(p["robot"])
            except ValueError:
                pass  # unknown name: reported when the model is built
    for k in ("floating_base", "ignore_unknown_joints"):
        p[k] = _as_bool(p[k], k)
    for k in ("max_rate", "max_odom_age", "quaternion_tolerance", "time_reset_threshold", "warn_period"):
        p[k] = _as_float(p[k], k)
    g = p["gravity"]
    try:
        g = [float(x) for x in g]
    except (TypeError, ValueError):
        g = None
    if g is None or len(g) != 3 or not all(math.isfinite(x) for x in g):
        raise ValueError(f"parameter gravity: expected 3 finite numbers, got {p['gravity']!r}")
    p["gravity"] = g
    return p


class Throttle:
    """At most one message per key per ``period`` seconds; reports how many were suppressed."""

    def __init__(self, emit, period, clock=time.monotonic):
        self.emit, self.period, self.clock = emit, period, clock
        self._last = {}
        self._suppressed = {}

    def __call__(self, key, text):
        now = self.clock()
        last = self._last.get(key)
        if self.period > 0 and last is not None and now - last < self.period:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return False
        n = self._suppressed.pop(key, 0)
        self._last[key] = now
        self.emit(text + (f" ({n} more like this suppressed)" if n else ""))
        return True


class _Odom:
    __slots__ = ("stamp", "p", "quat", "twist")

    def __init__(self, stamp, p, quat, twist):
        self.stamp, self.p, self.quat, self.twist = stamp, p, quat, twist


def _vec(*xs):
    return np.array(xs, dtype=float)


class LinearizerNode:
    """Transport-independent node logic (see the module docstring).

    ``transport`` provides: ``types`` (message classes by ROS name), ``create_publisher(topic,
    type_name, qos)`` -> object with ``publish(msg)``, ``create_subscription(topic, type_name,
    callback, qos)`` with ``callback(msg, receive_time_ns)``, ``now_ns()`` and ``logger`` (``info``,
    ``warning``, ``error``).
    """

    def __init__(self, transport, parameters: dict | None = None):
        self.transport = transport
        self.params = p = normalize_parameters(parameters or {})
        self.log = transport.logger
        self.warn = Throttle(self.log.warning, p["warn_period"])
        self.model = None
        self.seq = 0
        self.published = 0
        self.rejected: dict = {}
        self.last_problem = None
        self.compute_s = 0.0
        self._last_stamp = None
        self._odom = deque(maxlen=32)
        self._perm_cache: dict = {}
        self._index = {}

        self._types = transport.types
        source = None
        for key in ("robot_description", "urdf_path", "robot"):
            if p[key]:
                source = key
                break
        if source is not None:
            self._load_model(source, p[source])
        # endpoints after the model (and the kernels' warm-up): once they are visible, it is ready
        self._pub_a = transport.create_publisher(TOPIC_A, "std_msgs/msg/Float64MultiArray", QOS_OUTPUT)
        self._pub_b = transport.create_publisher(TOPIC_B, "std_msgs/msg/Float64MultiArray", QOS_OUTPUT)
        self._pub_stamp = transport.create_publisher(TOPIC_STAMP, "std_msgs/msg/Header", QOS_OUTPUT)
        if self.model is None:
            if not p["robot_description_topic"]:
                self.log.error("no robot model: set robot_description, urdf_path, robot or "
                               "robot_description_topic")
            else:
                transport.create_subscription(p["robot_description_topic"], "std_msgs/msg/String",
                                              self.on_robot_description, QOS_DESCRIPTION)
                self.log.info(f"waiting for the robot description on {p['robot_description_topic']}")
        # odom before joint_states: a transport that dispatches in subscription order then sees
        # the odometry that arrived together with a joint state first
        if p["floating_base"]:
            transport.create_subscription(p["odom_topic"], "nav_msgs/msg/Odometry", self.on_odom, QOS_ODOM)
        transport.create_subscription(p["joint_states_topic"], "sensor_msgs/msg/JointState",
                                      self.on_joint_state, QOS_STATE)

    # ------------------------------------------------------------------ model
    def _load_model(self, source, value):
        p = self.params
        try:
            if source == "robot":
                from sva_linearizer.robots import robot_urdf_path
                value = str(robot_urdf_path(value))
            elif source == "robot_description" and not value.strip():
                raise ValueError("empty string")
            model = sl.load_urdf(value, floating_base=p["floating_base"], gravity=p["gravity"])
        except Exception as e:  # any parser/model error: report, keep what we had
            what = {"topic": "robot_description (topic)",
                    "robot_description": "robot_description (parameter)"}.get(source, source)
            self._reject("robot_description", f"{what}: cannot build a model ({type(e).__name__}: {e})")
            return False
        # warm-up: the first linearization compiles the kernels (numba, cached on disk; up to tens
        # of seconds on a fresh install) - better now than on the first joint state
        t0 = time.perf_counter()
        try:
            sl.linearize(model, sl.State(model), np.zeros(model.nj))
        except Exception as e:
            self.log.warning(f"model from {source}: linearization at the zero state failed "
                             f"({type(e).__name__}: {e}); states will be tried as they come")
        warm = time.perf_counter() - t0
        self.model = model
        self._index = {n: i for i, n in enumerate(model.joint_names)}
        self._perm_cache.clear()
        self._last_stamp = None
        self.log.info(f"model from {source}: {model.nj} joints, "
                      f"{'floating' if model.floating_base else 'fixed'} base, nv = {model.nv}; "
                      f"A is {2 * model.nv}x{2 * model.nv}, B is {2 * model.nv}x{model.nj}"
                      + (f" (warm-up {warm:.1f} s)" if warm > 1.0 else ""))
        return True

    def on_robot_description(self, msg, recv_ns=None):
        self._load_model("topic", msg.data)

    # ---------------------------------------------------------------- helpers
    def _reject(self, key, text):
        self.rejected[key] = self.rejected.get(key, 0) + 1
        self.last_problem = text
        self.warn(key, text)

    def _stamp(self, header, recv_ns):
        ns = stamp_to_ns(header.stamp)
        if ns == 0:
            ns = recv_ns if recv_ns is not None else self.transport.now_ns()
        return ns

    def _permutation(self, names):
        """Index into the message arrays for each model joint, or an error string."""
        key = tuple(names)
        perm = self._perm_cache.get(key)
        if perm is not None:
            return perm
        pos = {}
        for k, n in enumerate(names):
            if n in pos:
                return f"joint_states: duplicate joint '{n}'"
            pos[n] = k
        unknown = [n for n in names if n not in self._index]
        if unknown and not self.params["ignore_unknown_joints"]:
            return "joint_states: unknown joint " + ", ".join(f"'{n}'" for n in unknown[:5])
        missing = [n for n in self.model.joint_names if n not in pos]
        if missing:
            more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
            return "joint_states: missing joint " + ", ".join(f"'{n}'" for n in missing[:5]) + more
        perm = np.array([pos[n] for n in self.model.joint_names], dtype=np.intp)
        if len(self._perm_cache) > 16:
            self._perm_cache.clear()
        self._perm_cache[key] = perm
        return perm

    def _field(self, values, name, n, perm, allow_empty=False):
        arr = np.asarray(values, dtype=float).reshape(-1)
        if arr.size == 0 and allow_empty:
            return np.zeros(len(perm))
        if arr.size != n:
            return f"joint_states: {name} has {arr.size} entries for {n} names"
        out = arr[perm]
        bad = ~np.isfinite(out)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            return f"joint_states: {name} of '{self.model.joint_names[j]}' is {out[j]} (NaN or infinite)"
        return out

    # ------------------------------------------------------------------ odom
    def on_odom(self, msg, recv_ns=None):
        stamp = self._stamp(msg.header, recv_ns)
        pp, pq = msg.pose.pose.position, msg.pose.pose.orientation
        tl, ta = msg.twist.twist.linear, msg.twist.twist.angular
        p = _vec(pp.x, pp.y, pp.z)
        quat = _vec(pq.x, pq.y, pq.z, pq.w)
        twist = _vec(tl.x, tl.y, tl.z, ta.x, ta.y, ta.z)
        for what, arr in (("pose.position", p), ("pose.orientation", quat), ("twist", twist)):
            if not np.all(np.isfinite(arr)):
                return self._reject("odom_nonfinite", f"odom: {what} has NaN or infinite values")
        norm = float(np.linalg.norm(quat))
        if abs(norm - 1.0) > self.params["quaternion_tolerance"]:
            return self._reject("odom_quaternion", f"odom: quaternion norm {norm:.6g} is not unit")
        if self._odom and stamp < self._odom[-1].stamp:
            back = (self._odom[-1].stamp - stamp) * 1e-9
            if back <= self.params["time_reset_threshold"]:
                return self._reject("odom_order", f"odom: stamp older than previous (out of order, "
                                                  f"{back * 1e3:.3g} ms back)")
            self.log.warning(f"odom: time jumped back by {back:.3g} s; clearing the odometry buffer")
            self._odom.clear()
        self._odom.append(_Odom(stamp, p, quat / norm, twist))

    def _nearest_odom(self, stamp):
        best = None
        for o in self._odom:
            if best is None or abs(o.stamp - stamp) < abs(best.stamp - stamp):
                best = o
        return best

    # --------------------------------------------------------- joint states
    def on_joint_state(self, msg, recv_ns=None):
        p = self.params
        model = self.model
        if model is None:
            return self._reject("no_model", "joint_states: no robot model yet (waiting for robot_description)")
        stamp = self._stamp(msg.header, recv_ns)
        last = self._last_stamp
        if last is not None and stamp < last:
            back = (last - stamp) * 1e-9
            if back <= p["time_reset_threshold"]:
                return self._reject("joint_states_order", f"joint_states: stamp older than previous "
                                                          f"(out of order, {back * 1e3:.3g} ms back)")
            self.log.warning(f"joint_states: time jumped back by {back:.3g} s; treating it as a clock reset")
            self._odom.clear()
            last = self._last_stamp = None
        if last is not None and p["max_rate"] > 0 and (stamp - last) * 1e-9 < 1.0 / p["max_rate"]:
            self.rejected["rate_limited"] = self.rejected.get("rate_limited", 0) + 1
            return None

        names = list(msg.name)
        perm = self._permutation(names)
        if isinstance(perm, str):
            return self._reject("joint_states_names", perm)
        n = len(names)
        s = self._field(msg.position, "position", n, perm)
        r = self._field(msg.velocity, "velocity", n, perm) if not isinstance(s, str) else s
        tau = self._field(msg.effort, "effort", n, perm, allow_empty=True) if not isinstance(r, str) else r
        if isinstance(tau, str):
            return self._reject("joint_states_values", tau)

        if model.floating_base:
            odom = self._nearest_odom(stamp)
            if odom is None:
                return self._reject("odom_missing", "odom: no valid odometry yet (a floating base needs odom)")
            age = (stamp - odom.stamp) * 1e-9
            if abs(age) > p["max_odom_age"]:
                if age >= 0:
                    text = f"odom: stale (age {age:.3g} s > max {p['max_odom_age']:.3g} s)"
                else:
                    text = (f"odom: stamp {-age:.3g} s ahead of the joint state "
                            f"(> max_odom_age {p['max_odom_age']:.3g} s)")
                return self._reject("odom_stale", text)
            q = np.concatenate([odom.p, odom.quat, s])
            v = np.concatenate([odom.twist, r])
        else:
            q, v = s, r

        t0 = time.perf_counter()
        try:
            state = sl.State.from_vectors(model, q, v)
            lin = sl.linearize(model, state, tau)
        except Exception as e:
            return self._reject("linearize", f"linearization failed: {type(e).__name__}: {e}")
        A, B = lin.A, lin.B
        if not (np.all(np.isfinite(A)) and np.all(np.isfinite(B))):
            return self._reject("linearize", "linearization: A or B has NaN or infinite entries")
        self.compute_s += time.perf_counter() - t0
        self._publish(stamp, A, B)
        self._last_stamp = stamp
        return A, B

    def _publish(self, stamp, A, B):
        T = self._types
        pa, pb = matrix_payload(A), matrix_payload(B)
        self.seq += 1
        header = T.Header(stamp=make_time(T, stamp), frame_id=pair_frame_id(self.seq, crc32_hex(pa), crc32_hex(pb)))
        self._pub_a.publish(matrix_to_msg(T, A, pa))
        self._pub_b.publish(matrix_to_msg(T, B, pb))
        self._pub_stamp.publish(header)
        self.published += 1

    def summary(self) -> str:
        rej = ", ".join(f"{k} {v}" for k, v in sorted(self.rejected.items())) or "none"
        mean = f"{self.compute_s / self.published * 1e3:.3g} ms" if self.published else "n/a"
        return f"published {self.published} A/B pairs (mean linearize {mean}); dropped: {rej}"
