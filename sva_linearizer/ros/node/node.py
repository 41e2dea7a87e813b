# SPDX-License-Identifier: BSD-3-Clause
"""The linearizer node's logic, written once for every transport (rclpy or plain DDS).

:class:`LinearizerNode` takes a *transport* (see :mod:`sva_linearizer.ros.transports.transport`) and the
node parameters (names, defaults and checks in :mod:`sva_linearizer.ros.node.parameters`). It

* holds the model, built from the ``robot_description`` parameter (URDF XML), else ``urdf_path``,
  else ``robot`` (a name known to :mod:`sva_linearizer.robots`), else from the robot_description
  topic (std_msgs/String, reliable + transient-local, as robot_state_publisher publishes it; a new
  description replaces the model, a malformed one is reported and ignored); a model named by a
  parameter that cannot be built raises :class:`ModelLoadError` (the node does not start);
* subscribes ``joint_states`` (sensor_msgs/JointState, mapped by joint name: ``position``
  required, ``velocity`` and ``effort`` (the joint torque tau) may be empty as ROS 2 allows, and are
  then zero, said once in the log; ``allow_empty_velocity_effort: false`` drops such messages
  instead) and, for a floating base, ``odom``
  (nav_msgs/Odometry: pose of the base in the world frame, twist in the base frame per REP 105,
  i.e. exactly the body twist [v_lin; w] of the library's ``v``);
* for every joint state it gets to (a busy node takes the newest waiting and counts the others as
  ``superseded``, so it drops to the newest state
  instead of queueing; ``max_rate`` limits further by input stamp), linearizes it as one knot of
  :func:`sva_linearizer.linearize_horizon` (:mod:`.compute`, with ``dt`` > 0 also Ad, Bd and the
  next state; ``sva-linearizer bag`` computes a recording's states in batches through the same
  code, with the same bits) and publishes the linearization record ``linearization/record``: A,
  B, the point, the drift and
  the rest in one message (:mod:`sva_linearizer.ros.node.record`; its names in
  ``linearization/description``), then, for tools and consumers of the matrices alone, the point as
  ``linearization/point/joint_state`` and ``/odom`` (``publish_point``) and ``linearization/A``,
  ``/B`` (``publish_a_b``);
* with ``contact_frames`` set (parallel arrays ``contact_kinds``, ``contact_references``,
  ``contact_offsets``, ``contact_baumgarte_kp``/``_kd``: one entry per contact, one for all, or
  none), linearizes with the contacts active at the joint state's stamp: the active set comes on
  ``contacts`` (sensor_msgs/JointState, ``name`` the active contact frames, ``position`` empty or
  1.0/0.0 per name; ``contacts_default_active`` until the first one), paired by stamp like
  odometry. ``contact_mode`` rigid: KKT contacts, and the forces and their derivatives in the
  record; forces: the contact forces are inputs (``contact_forces``, geometry_msgs/WrenchStamped
  per contact, ``frame_id`` its frame, paired by stamp), B = [B_tau | B_f]. The record says which
  contacts were active.

Bad input never produces output: NaN/inf values, unknown/missing/duplicate joint names, arrays of
the wrong length, a quaternion whose norm is off by more than ``quaternion_tolerance``, odometry
whose stamp is more than ``max_odom_age`` from the joint state's, stamps older than the previous
accepted one (out of order), a missing or malformed robot description. Each such sample is
dropped with a warning that names the problem (at most one per problem kind per ``warn_period``
seconds, with a count of the suppressed ones) and the node keeps running.

The input side (message checks, pairing by stamp, drops by reason) is :class:`.inputs.NodeInputs`,
which the node feeds from its subscriptions; ``sva-linearizer bag`` feeds it a recording.

Stamps: a zero header stamp means "unstamped" and the receive time is used instead. Odometry is
matched to a joint state by stamp: the buffered odometry sample nearest in time is used, and it must
lie within ``max_odom_age`` seconds of the joint state's stamp (:class:`StampedBuffer`; contact sets
and contact forces the same way, within ``max_contacts_age``). A stamp that goes back by more than
``time_reset_threshold`` seconds is taken as a clock reset (e.g. a restarted simulation or bag):
the node forgets its history and carries on; a smaller step back is "out of order" and dropped.
"""
from __future__ import annotations

import os
import time
import uuid

import numpy as np

import sva_linearizer as sl
from sva_linearizer._jit import group_state, on_ready

from sva_linearizer.labels import z_names

from ..wire.messages import TOPIC_A, TOPIC_B, joint_state_msg, make_time, matrix_to_msg, odometry_msg
from ..wire.qos import (QOS_CONTACTS, QOS_DESCRIPTION, QOS_FORCES, QOS_ODOM, QOS_OUTPUT, QOS_STATE,  # noqa: F401
                        QOS_STATE_PUB)
from .compute import RecordComputer
from .horizon_service import HorizonService
from .inputs import MAX_WAITING, NodeInputs, Paired, StampedBuffer  # noqa: F401 (the node's input side)
from .log import Throttle
from .parameters import contact_specs, loop_specs, normalize_parameters
from .record import TOPIC_DESCRIPTION, TOPIC_POINT_JOINTS, TOPIC_POINT_ODOM, TOPIC_RECORD, description_json, record_msg

# While numba compiles the kernels in a background process and they run as plain Python, the
# node's linearizations take at most this share of one core's time: it skips the joint states
# that arrive before then, so that the compile gets the rest of the machine and the node reaches
# full speed sooner (about 7 Hz with a quadruped's four contacts on a 2.5 GHz core).
PLAIN_DUTY = 0.25


# /diagnostics, as diagnostic_aggregator and rqt_robot_monitor read it, about once a second
TOPIC_DIAGNOSTICS = "/diagnostics"
DIAGNOSTICS_PERIOD_S = 1.0
_KERNEL_STATES = {"ready": "compiled", "loading": "compiled", "compiling": "compiling", "plain": "plain"}


def _node_name(transport) -> str:
    """The node's fully qualified name (/namespace/name), as diagnostics name their source."""
    node = getattr(transport, "node", None)
    if node is not None and hasattr(node, "get_fully_qualified_name"):
        return node.get_fully_qualified_name()
    ns = getattr(transport, "namespace", "").strip("/")
    name = getattr(transport, "node_name", "sva_linearizer")
    return f"/{ns}/{name}" if ns else f"/{name}"


class _Window:
    """What happened since the last diagnostics report."""
    __slots__ = ("start_ns", "inputs", "dropped", "skipped", "superseded", "latencies")

    def __init__(self, start_ns):
        self.start_ns, self.inputs, self.dropped, self.skipped, self.superseded = start_ns, 0, 0, 0, 0
        self.latencies = []


class ModelLoadError(ValueError):
    """The model the node's parameters name cannot be built (one-line message)."""


def build_model(source: str, value: str, p: dict, floating_base, contacts, loops):
    """The model a node builds from ``source`` (robot_description, urdf_path, robot or topic) and
    its ``value``, with the parameters ``p`` (gravity, mimic), ``floating_base`` as given (True,
    False, or None: the URDF decides) and the configured contacts and loops, whose frames it must
    have -> (model, None), or (None, the problem in one line)."""
    try:
        if source == "robot":
            from sva_linearizer.robots import robot_urdf_path
            value = str(robot_urdf_path(value))
        elif source == "robot_description" and not value.strip():
            raise ValueError("empty string")
        model = sl.load_urdf(value, floating_base=floating_base, gravity=p["gravity"], mimic=p["mimic"])
        known = set(model.frame_names)
        unknown = [c.frame for c in contacts if c.frame not in known]
        unknown += [f for lp in loops for f in (lp.frame_a, lp.frame_b) if f not in known]
        if unknown:
            raise ValueError("contact_frames: " + ", ".join(f"'{f}'" for f in unknown)
                             + " not a frame (link) of this model")
    except Exception as e:  # any parser/model error: report, keep what we had
        what = {"topic": "robot_description (topic)",
                "robot_description": "robot_description (parameter)"}.get(source, source)
        text = " ".join(str(e).split())
        if "example-robot-data" in text:
            distro = os.environ.get("ROS_DISTRO") or "<distro>"
            text += (f"; with ROS 2: rosdep key example-robot-data "
                     f"(sudo apt install ros-{distro}-example-robot-data)")
        return None, f"{what}: cannot build a model ({type(e).__name__}: {text})"
    return model, None


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
        self._floating_base = p["floating_base"]    # as given: True, False, or None (the URDF decides)
        self._given = {k for k, v in (parameters or {}).items() if v is not None and v != "auto"}
        self.log = transport.logger
        self.warn = Throttle(self.log.warning, p["warn_period"])
        on_ready(lambda group, seconds: self.log.info(
            f"the compiled {group} kernels are in use ({seconds:.0f} s after the first call): full speed"))
        self.model = None
        self._base_frame = None
        self.run = uuid.uuid4().hex         # this run's identifier, in the description: seq restarts with it
        # the descriptions' ids: from a random start, so that no record of another run of the node
        # names this run's description (a restarted node's records are not decoded against the old one)
        self.description_id = int(self.run[:8], 16) % (2 ** 31 - 2)
        self.seq = 0
        self.published = 0
        self.compute_s = 0.0
        self._window = _Window(transport.now_ns())
        self._plain_until = 0.0     # perf_counter time before which joint states are skipped (PLAIN_DUTY)
        self._wait_timer = None            # steady timer while some wait (odom_wait / 2)
        self.pairing = {"exact": 0, "nearest": 0}   # records by the odometry they took
        # contacts: the configured ones (sl.Contact, frames checked when the model is built)
        self.contacts = contact_specs(p)
        self.loops = loop_specs(p)
        # the input side: message checks, pairing by stamp, drops by reason (inputs.py)
        self.inputs = NodeInputs(p, self.contacts, log=self.log, steady_ns=transport.steady_ns,
                                 now_ns=transport.now_ns, emit=self._on_paired, on_reject=self._on_reject,
                                 skip=self._skip_while_compiling)
        self._computer = None       # the records of the model in use (compute.py)

        self._types = transport.types
        self._omit = set(p["record_omit"])
        # the record's names first: a model loaded now publishes them (transient local, as
        # robot_description), and so does every model that replaces it
        self._pub_description = transport.create_publisher(TOPIC_DESCRIPTION, "std_msgs/msg/String",
                                                           QOS_DESCRIPTION)
        source = None
        for key in ("robot_description", "urdf_path", "robot"):
            if p[key]:
                source = key
                break
        if source is not None:
            problem = self._load_model(source, p[source])
            if problem is not None:   # a model the parameters name must load: no waiting for a topic
                raise ModelLoadError(problem)
        # endpoints after the model (and the kernels' warm-up): once they are visible, it is ready
        self._pub_point = None
        if p["publish_point"]:
            self._pub_point = (
                transport.create_publisher(TOPIC_POINT_JOINTS, "sensor_msgs/msg/JointState", QOS_OUTPUT),
                transport.create_publisher(TOPIC_POINT_ODOM, "nav_msgs/msg/Odometry", QOS_OUTPUT)
                if p["floating_base"] else None)
        self._pub_a = self._pub_b = None
        if p["publish_a_b"]:
            self._pub_a = transport.create_publisher(TOPIC_A, "std_msgs/msg/Float64MultiArray", QOS_OUTPUT)
            self._pub_b = transport.create_publisher(TOPIC_B, "std_msgs/msg/Float64MultiArray", QOS_OUTPUT)
        self.output_topics = ([TOPIC_POINT_JOINTS] if self._pub_point else []) + (
            [TOPIC_POINT_ODOM] if self._pub_point and self._pub_point[1] else []) + (
            [TOPIC_A, TOPIC_B] if self._pub_a else []) + [TOPIC_DESCRIPTION, TOPIC_RECORD]
        self._pub_diagnostics = transport.create_publisher(TOPIC_DIAGNOSTICS, "diagnostic_msgs/msg/DiagnosticArray",
                                                           QOS_OUTPUT)
        # a planner's horizon requests, answered on a worker thread of their own
        self.horizon = HorizonService(self, transport)
        # the record last: its writer's appearance tells a subscriber that the node is ready
        self._pub_record = transport.create_publisher(TOPIC_RECORD, "std_msgs/msg/Float64MultiArray", QOS_OUTPUT)
        transport.create_timer(DIAGNOSTICS_PERIOD_S, self.publish_diagnostics)
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
        self._odom_sub = None
        if p["floating_base"] is not False:   # true, or decided by the description still to come
            self._odom_sub = transport.create_subscription(p["odom_topic"], "nav_msgs/msg/Odometry",
                                                           self.inputs.on_odom, QOS_ODOM)
            if p["odom_wait"] > 0:
                self._wait_timer = self.inputs.timer = transport.create_steady_timer(p["odom_wait"] / 2,
                                                                                     self._on_wait_timer)
        if self.contacts:
            transport.create_subscription(p["contacts_topic"], "sensor_msgs/msg/JointState",
                                          self.inputs.on_contacts, QOS_CONTACTS)
            if p["contact_mode"] == "forces":
                transport.create_subscription(p["contact_forces_topic"], "geometry_msgs/msg/WrenchStamped",
                                              self.inputs.on_contact_force, QOS_FORCES)
        transport.create_subscription(p["joint_states_topic"], "sensor_msgs/msg/JointState",
                                      self.on_joint_state, QOS_STATE, superseded=self.on_superseded)

    # ------------------------------------------------------------------ model
    def _load_model(self, source, value) -> str | None:
        """Build the model from ``source`` (robot_description, urdf_path, robot or topic) and warm
        it up -> None, or the problem in one line (the model in use, if any, stays)."""
        p = self.params
        model, problem = build_model(source, value, p, self._floating_base, self.contacts, self.loops)
        if problem is not None:
            return problem
        # warm-up: the first linearization loads the compiled kernels (a warm numba cache) or, on
        # a fresh install, starts their compile in a background process and runs them as plain
        # Python meanwhile - decided now rather than on the first joint state
        t0 = time.perf_counter()
        try:
            sl.linearize(model, sl.State(model), np.zeros(model.nj))
        except Exception as e:
            self.log.warning(f"model from {source}: linearization at the zero state failed "
                             f"({type(e).__name__}: {e}); states will be tried as they come")
        if self.contacts or self.loops:
            # the contact kernels too; the zero state may be singular for the contact set (a
            # straight leg), which is no reason to warn: only the compilation is wanted here
            try:
                z = sl.State(model)
                if p["contact_mode"] == "rigid":
                    sl.linearize(model, z, np.zeros(model.nj), contacts=self.contacts + self.loops)
                else:
                    sl.linearize(model, z, np.zeros(model.nj), contacts=self.loops or None,
                                 forces=[(c, np.zeros(c.dim)) for c in self.contacts])
            except Exception:
                pass
        try:    # and the horizon's, through which the records are computed (compute.py), one knot
            z = sl.State(model)
            one = (z.q[None], z.v[None], np.zeros((1, model.nj)))
            if p["contact_mode"] == "rigid" or not self.contacts:
                sl.linearize_horizon(model, *one, p["dt"] or None, contacts=self.contacts + self.loops)
            else:
                sl.linearize_horizon(model, *one, p["dt"] or None, contacts=self.loops,
                                     forces=[(c, np.zeros(c.dim)) for c in self.contacts])
        except Exception:
            pass
        warm = time.perf_counter() - t0
        self.model = model
        self._base_frame = p["base_frame"] or model.base_name
        self.description_id += 1
        self._description = description_json(
            self.description_id, model, z_names(model), self.contacts, p["contact_mode"], p["dt"],
            sorted(self._omit), self._base_frame, self.loops, self.run)
        self._pub_description.publish(self._types.String(data=self._description))
        self.inputs.set_model(model, self._base_frame)
        self._computer = RecordComputer(model, self.contacts, self.loops, p["contact_mode"], p["dt"], self._omit,
                                        self.description_id)
        p["floating_base"] = model.floating_base          # the value in use (read back as a parameter)
        if source == "topic" and self._floating_base is None and hasattr(self.transport, "publish_parameters"):
            self.transport.publish_parameters({"floating_base": model.floating_base})
        self.log.info(f"model from {source}: {model.nj} joints, {self._base_choice(source, model)}, nv = {model.nv}; "
                      f"A is {2 * model.nv}x{2 * model.nv}, B is {2 * model.nv}x{model.nj}"
                      + (f" (warm-up {warm:.1f} s)" if warm > 1.0 else ""))
        plain = [g for g in ("core", "contacts") if group_state(g) in ("compiling", "plain")]
        if plain:
            self.log.info("the " + " and ".join(plain) + " kernels run as plain Python (milliseconds "
                          "per linearization) while numba compiles them in a background process, "
                          "once per machine; the node publishes meanwhile, using at most "
                          f"{PLAIN_DUTY:.0%} of one core (the compile gets the rest), and says when "
                          "it reaches full speed")
        if self.contacts:
            self.log.info(f"contacts ({p['contact_mode']}): " + ", ".join(
                f"{c.frame} ({c.kind}, {c.reference})" for c in self.contacts)
                + f"; {'all' if p['contacts_default_active'] else 'none'} active until a contact set "
                  f"arrives on {p['contacts_topic']}")
        return None

    @property
    def description_text(self) -> str | None:
        """The JSON of the description in use (linearization/description), None without a model."""
        return self._description if self.model is not None else None

    def close(self) -> None:
        """Stop the horizon requests' worker (the transport is closed by its owner)."""
        self.horizon.close()

    def _base_choice(self, source, model) -> str:
        """'floating base' or 'fixed base', with why (for the log line of a new model)."""
        from sva_linearizer.urdf import floating_by_default

        base = "floating base" if model.floating_base else "fixed base"
        if self._floating_base is None:
            other = "false" if model.floating_base else "true"
            return f"{base} ({floating_by_default(model.base_name)[1]}; floating_base: {other} to change it)"
        if source == "robot" and "floating_base" not in self._given:
            return f"{base} (the default of robot '{self.params['robot']}')"
        return f"{base} (floating_base: {'true' if model.floating_base else 'false'})"

    def on_robot_description(self, msg, recv_ns=None):
        problem = self._load_model("topic", msg.data)
        if problem is not None:
            self._reject("robot_description", problem)

    # ---------------------------------------------------------------- inputs
    @property
    def rejected(self) -> dict:
        """Inputs dropped, by reason (the input side's count, with the node's own reasons)."""
        return self.inputs.rejected

    @property
    def last_problem(self) -> str | None:
        return self.inputs.last_problem

    def _reject(self, key, text):
        self.inputs.reject(key, text)       # counted there, then _on_reject

    def _on_reject(self, key, text):
        self._window.dropped += 1
        self.warn(key, text)

    def _skip_while_compiling(self) -> bool:
        """While the kernels compile (plain Python), a joint state that comes before the last
        linearization's time / PLAIN_DUTY has passed is left out, counted as while_compiling."""
        if self._plain_until and time.perf_counter() < self._plain_until:
            self.rejected["while_compiling"] = self.rejected.get("while_compiling", 0) + 1
            self._window.skipped += 1
            return True
        return False

    def on_superseded(self, n: int) -> None:
        """n joint states waited in the subscription's queue behind a newer one and were left out
        when the node took the newest (it was busy): counted as ``superseded``, no warning."""
        self.rejected["superseded"] = self.rejected.get("superseded", 0) + n
        self._window.inputs += n
        self._window.superseded += n

    def on_joint_state(self, msg, recv_ns=None):
        self._window.inputs += 1
        return self.inputs.on_joint_state(msg, recv_ns)

    def _on_wait_timer(self):
        """The steady timer while joint states wait for their odometry: those whose wait is over go,
        after the odometry already in the subscription's queue (a node held up by its machine may
        run this timer before the odometry that arrived in the meantime)."""
        self.transport.dispatch_waiting(self._odom_sub)
        self.inputs.pair_waiting()

    # ------------------------------------------------------ linearization
    def _on_paired(self, st: Paired):
        """Linearize a paired joint state (compute.py: the horizon call with this one knot) and
        publish its record -> (A, B), or None when it was dropped."""
        t0 = time.perf_counter()
        out = self._computer.compute([st])[0]
        if out.error is not None:
            return self._reject("linearize", out.error)
        seconds = time.perf_counter() - t0
        self.compute_s += seconds
        compiling = any(group_state(g) == "compiling"       # the groups a horizon call may use
                        for g in (("core", "batch", "contacts", "contacts_batch") if st.active or self.loops
                                  else ("core", "batch")))
        self._plain_until = t0 + seconds / PLAIN_DUTY if compiling else 0.0
        if st.odom is not None:
            self.pairing["exact" if st.odom.stamp == st.stamp else "nearest"] += 1
        self._publish(st, out)
        return out.A, out.B

    def _publish(self, st: Paired, out):
        """The record, then the point and A, B (the record's parts for tools and simple consumers)."""
        types, model, stamp = self._types, self.model, st.stamp
        self.seq += 1
        out.data[2] = self.seq
        self._pub_record.publish(record_msg(types, out.data))
        if self._pub_point is not None:
            self._pub_point[0].publish(joint_state_msg(types, stamp, model.joint_names, st.s, st.r, st.tau))
            if self._pub_point[1] is not None:
                odom = st.odom
                self._pub_point[1].publish(odometry_msg(types, stamp, odom.p, odom.quat, odom.twist, *odom.frames))
        if self._pub_a is not None:
            self._pub_a.publish(matrix_to_msg(types, out.A))
            self._pub_b.publish(matrix_to_msg(types, out.B))
        self.published += 1
        self._window.latencies.append((self.transport.now_ns() - stamp) * 1e-6)

    def publish_diagnostics(self) -> None:
        """/diagnostics (diagnostic_msgs/DiagnosticArray), every DIAGNOSTICS_PERIOD_S: the rates, the
        latency (input stamp to publication, the node's clock) and the drops since the last one, the
        drops by reason since the start, the kernels' state, the model and the transport. Level
        ERROR without a model, WARN while the kernels compile or when inputs were dropped, else OK."""
        T = self._types
        now = self.transport.now_ns()
        w, self._window = self._window, _Window(now)
        span = max((now - w.start_ns) * 1e-9, 1e-9)
        lat = np.array(w.latencies) if w.latencies else None
        groups = ("core", "contacts") if self.contacts or self.loops else ("core",)
        kernels = {g: _KERNEL_STATES.get(group_state(g), "not used yet") for g in groups}
        model = self.model
        values = {
            "model": (f"{model.name}: {model.nj} joints, {'floating' if model.floating_base else 'fixed'} base, "
                      f"nv {model.nv}") if model is not None else "none",
            "transport": getattr(self.transport, "name", "?"),
            "kernels": ", ".join(f"{g} {st}" for g, st in kernels.items()),
            "input rate (Hz)": f"{w.inputs / span:.1f}",
            "output rate (Hz)": f"{len(w.latencies) / span:.1f}",
            "latency p50 (ms)": f"{np.percentile(lat, 50):.2f}" if lat is not None else "n/a",
            "latency p99 (ms)": f"{np.percentile(lat, 99):.2f}" if lat is not None else "n/a",
            "dropped since the last report": str(w.dropped),
            "skipped while compiling since the last report": str(w.skipped),
            "superseded since the last report": str(w.superseded),
            "records published": str(self.published),
            "dropped by reason": ", ".join(f"{k} {v}" for k, v in sorted(self.rejected.items())) or "none",
            "odometry pairing": self._pairing_text(),
            "horizon requests": self._horizon_text(),
            "last problem": self.last_problem or "none",
        }
        if model is None:
            level, message = "ERROR", "no robot model"
        elif any(st == "compiling" for st in kernels.values()):
            level, message = "WARN", "kernels compiling: plain Python, reduced rate"
        elif w.dropped:
            level, message = "WARN", f"{w.dropped} inputs dropped: {self.last_problem}"
        else:
            level, message = "OK", "ok"
        level = getattr(T.DiagnosticStatus, level)       # the message's own constant (an int or a byte)
        status = T.DiagnosticStatus(level=level, name=f"{_node_name(self.transport)}: linearizer",
                                    message=message, hardware_id=model.name if model is not None else "",
                                    values=[T.KeyValue(key=k, value=v) for k, v in values.items()])
        self._pub_diagnostics.publish(T.DiagnosticArray(header=T.Header(stamp=make_time(T, now), frame_id=""),
                                                        status=[status]))

    def _horizon_text(self) -> str:
        """The horizon requests since the start, and the answers' time since the last report."""
        c = self.horizon.counts
        lat, self.horizon.latencies_ms = self.horizon.latencies_ms, []
        text = ", ".join(f"{k} {v}" for k, v in c.items())
        return text + (f"; answer p50 {np.percentile(lat, 50):.2f} ms, max {max(lat):.2f} ms" if lat else "")

    def _pairing_text(self) -> str:
        """How the records took their odometry: of its own stamp (exact) or the nearest sample."""
        if self.model is None or not self.model.floating_base:
            return "none (fixed base)"
        return f"exact {self.pairing['exact']}, nearest {self.pairing['nearest']}"

    def summary(self) -> str:
        rej = ", ".join(f"{k} {v}" for k, v in sorted(self.rejected.items())) or "none"
        mean = f"{self.compute_s / self.published * 1e3:.3g} ms" if self.published else "n/a"
        pairing = f"; odometry {self._pairing_text()}" if self.model is not None and self.model.floating_base else ""
        horizon = (f"; horizon requests: {self._horizon_text()}"
                   if self.horizon is not None and any(self.horizon.counts.values()) else "")
        return f"published {self.published} records (mean linearize {mean}){pairing}; dropped: {rej}{horizon}"
