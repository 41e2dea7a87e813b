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
  instead of queueing; ``max_rate`` limits further by input stamp), linearizes with
  :func:`sva_linearizer.linearize` (with ``dt`` > 0 also Ad, Bd and :func:`sva_linearizer.next_state`)
  and publishes the linearization record ``linearization/record``: A, B, the point, the drift and
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
from collections import deque

import numpy as np

import sva_linearizer as sl
from sva_linearizer._jit import group_state, on_ready

from sva_linearizer.labels import z_names

from ..wire.messages import TOPIC_A, TOPIC_B, joint_state_msg, make_time, matrix_to_msg, odometry_msg, stamp_to_ns
from ..wire.qos import (QOS_CONTACTS, QOS_DESCRIPTION, QOS_FORCES, QOS_ODOM, QOS_OUTPUT, QOS_STATE,  # noqa: F401
                        QOS_STATE_PUB)
from .horizon_service import HorizonService
from .log import Throttle
from .parameters import contact_specs, loop_specs, normalize_parameters
from .record import (TOPIC_DESCRIPTION, TOPIC_POINT_JOINTS, TOPIC_POINT_ODOM, TOPIC_RECORD, description_json,
                     encode_record, record_msg, stamp_section)

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


class _Odom:
    """One odometry sample: base position ``p`` (3), unit quaternion ``quat`` (x, y, z, w) and
    body twist ``twist`` [v_lin; w] (6), all in the library's conventions; ``frames`` its
    (frame_id, child_frame_id)."""
    __slots__ = ("stamp", "p", "quat", "twist", "frames")

    def __init__(self, stamp, p, quat, twist, frames=("", "")):
        self.stamp, self.p, self.quat, self.twist, self.frames = stamp, p, quat, twist, frames


class _Waiting:
    """A checked joint state that waits for the odometry of its own stamp (floating base): its
    stamp, joint positions ``s``, velocities ``r``, torques ``tau`` (model order) and the steady
    clock time (ns) after which it takes the nearest odometry instead."""
    __slots__ = ("stamp", "s", "r", "tau", "deadline")

    def __init__(self, stamp, s, r, tau, deadline):
        self.stamp, self.s, self.r, self.tau, self.deadline = stamp, s, r, tau, deadline


# joint states waiting for their odometry at most: beyond, the oldest takes the nearest sample now
MAX_WAITING = 64


class _Sample:
    """One stamped input value for a :class:`StampedBuffer` (a contact set, a contact's force)."""
    __slots__ = ("stamp", "value")

    def __init__(self, stamp, value):
        self.stamp, self.value = stamp, value


class StampedBuffer:
    """The last few samples of one input, paired with a joint state by stamp: the sample nearest in
    time, which must lie within a maximum age of it (either direction). One pairing rule for every
    input that comes with its own stamp: odometry, the contact set, each contact's force.

    ``what`` prefixes the messages (the topic's role: "odom", "contacts", ...), ``noun`` names the
    samples ("odometry"), ``age_param`` the parameter holding the maximum age, ``missing`` the text
    when there is no sample at all."""

    reset_threshold = 1.0   # s; the node sets its time_reset_threshold

    def __init__(self, what: str, noun: str, age_param: str, missing: str, maxlen: int = 32):
        self.what, self.noun, self.age_param, self.missing = what, noun, age_param, missing
        self.items: deque = deque(maxlen=maxlen)

    def __len__(self):
        return len(self.items)

    def clear(self):
        self.items.clear()

    def add(self, sample):
        """Buffer a sample (an object with ``stamp``) -> (None, None) if added; ("order", text) for
        a stamp older than the newest (not added); ("reset", text) for a step back beyond
        ``reset_threshold`` seconds (set by the node), a clock reset: the buffer was cleared, then
        the sample added."""
        if self.items and sample.stamp < self.items[-1].stamp:
            back = (self.items[-1].stamp - sample.stamp) * 1e-9
            if back <= self.reset_threshold:
                return "order", (f"{self.what}: stamp older than previous (out of order, "
                                 f"{back * 1e3:.3g} ms back)")
            self.items.clear()
            self.items.append(sample)
            return "reset", f"{self.what}: time jumped back by {back:.3g} s; clearing the {self.noun} buffer"
        self.items.append(sample)
        return None, None

    def newest_stamp(self) -> int | None:
        """The newest buffered sample's stamp (samples are buffered in stamp order), or None."""
        return self.items[-1].stamp if self.items else None

    def nearest(self, stamp: int, max_age: float):
        """-> (sample, None), or (None, (kind, text)) with kind "missing" or "stale". The samples are
        in stamp order: the search runs from the newest back to the first one at or before `stamp`
        (of two samples equally near, the earlier)."""
        best = None
        for o in reversed(self.items):
            if best is None or abs(o.stamp - stamp) <= abs(best.stamp - stamp):
                best = o
            if o.stamp <= stamp:
                break
        if best is None:
            return None, ("missing", self.missing)
        age = (stamp - best.stamp) * 1e-9
        if abs(age) > max_age:
            if age >= 0:
                text = f"{self.what}: stale (age {age:.3g} s > max {max_age:.3g} s)"
            else:
                text = (f"{self.what}: stamp {-age:.3g} s ahead of the joint state "
                        f"(> {self.age_param} {max_age:.3g} s)")
            return None, ("stale", text)
        return best, None


def _vec(*xs):
    """Message fields -> a float numpy vector."""
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
        self.rejected: dict = {}
        self.last_problem = None
        self.compute_s = 0.0
        self._window = _Window(transport.now_ns())
        self._plain_until = 0.0     # perf_counter time before which joint states are skipped (PLAIN_DUTY)
        self._last_stamp = None
        self._odom = StampedBuffer("odom", "odometry", "max_odom_age",
                                   "odom: no valid odometry yet (a floating base needs odom)", QOS_ODOM["depth"])
        self._waiting: deque = deque()     # joint states waiting for their odometry (_Waiting)
        self._wait_timer = None            # steady timer while some wait (odom_wait / 2)
        self._wait_timer_armed = False
        self.pairing = {"exact": 0, "nearest": 0}   # records by the odometry they took
        self._perm_cache: dict = {}
        self._index = {}
        self._said_empty: set = set()      # JointState fields already reported empty (said once)
        # contacts: the configured ones (sl.Contact, frames checked when the model is built), the
        # buffered contact sets (tuples of bools in configuration order) and forces (per frame)
        self.contacts = contact_specs(p)
        self.loops = loop_specs(p)
        self._contact_index = {c.frame: i for i, c in enumerate(self.contacts)}
        self._contact_sets = StampedBuffer("contacts", "contact set", "max_contacts_age",
                                           "contacts: no contact set yet")
        self._contact_set_seen = False     # any valid contact set ever: from then on one is required
        self._forces = {c.frame: StampedBuffer("contact_forces", "force", "max_contacts_age",
                                               f"contact_forces: no force for contact '{c.frame}' yet")
                        for c in self.contacts}
        for buf in (self._odom, self._contact_sets, *self._forces.values()):
            buf.reset_threshold = p["time_reset_threshold"]

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
            self._odom_sub = transport.create_subscription(p["odom_topic"], "nav_msgs/msg/Odometry", self.on_odom,
                                                           QOS_ODOM)
            if p["odom_wait"] > 0:
                self._wait_timer = transport.create_steady_timer(p["odom_wait"] / 2, self._on_wait_timer)
        if self.contacts:
            transport.create_subscription(p["contacts_topic"], "sensor_msgs/msg/JointState", self.on_contacts,
                                          QOS_CONTACTS)
            if p["contact_mode"] == "forces":
                transport.create_subscription(p["contact_forces_topic"], "geometry_msgs/msg/WrenchStamped",
                                              self.on_contact_force, QOS_FORCES)
        transport.create_subscription(p["joint_states_topic"], "sensor_msgs/msg/JointState",
                                      self.on_joint_state, QOS_STATE, superseded=self.on_superseded)

    # ------------------------------------------------------------------ model
    def _load_model(self, source, value) -> str | None:
        """Build the model from ``source`` (robot_description, urdf_path, robot or topic) and warm
        it up -> None, or the problem in one line (the model in use, if any, stays)."""
        p = self.params
        try:
            if source == "robot":
                from sva_linearizer.robots import robot_urdf_path
                value = str(robot_urdf_path(value))
            elif source == "robot_description" and not value.strip():
                raise ValueError("empty string")
            model = sl.load_urdf(value, floating_base=self._floating_base, gravity=p["gravity"], mimic=p["mimic"])
            known = set(model.frame_names)
            unknown = [c.frame for c in self.contacts if c.frame not in known]
            unknown += [f for lp in self.loops for f in (lp.frame_a, lp.frame_b) if f not in known]
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
            return f"{what}: cannot build a model ({type(e).__name__}: {text})"
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
        warm = time.perf_counter() - t0
        self.model = model
        self._base_frame = p["base_frame"] or model.base_name
        self.description_id += 1
        self._description = description_json(
            self.description_id, model, z_names(model), self.contacts, p["contact_mode"], p["dt"],
            sorted(self._omit), self._base_frame, self.loops, self.run)
        self._pub_description.publish(self._types.String(data=self._description))
        self._index = {n: i for i, n in enumerate(model.joint_names)}
        self._perm_cache.clear()
        self._waiting.clear()
        self._last_stamp = None
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

    # ---------------------------------------------------------------- helpers
    def _reject(self, key, text):
        self.rejected[key] = self.rejected.get(key, 0) + 1
        self._window.dropped += 1
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
        coupled = getattr(self.model, "mimic", {})       # mimic joints follow their parents: not inputs
        unknown = [n for n in names if n not in self._index and n not in coupled]
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
        if arr.size == 0 and n > 0 and allow_empty:
            if name not in self._said_empty:
                self._said_empty.add(name)
                self.log.info(f"joint_states: {name} is empty; taking it as zero for every joint "
                              f"(said once; allow_empty_velocity_effort: false drops such messages)")
            return np.zeros(len(perm))
        if arr.size == 0 and n > 0 and name != "position":
            return (f"joint_states: {name} is empty (allow_empty_velocity_effort is false: "
                    f"velocity and effort are required)")
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
        frame, child = msg.header.frame_id, msg.child_frame_id
        if child != self._base_frame:
            return self._reject("odom_frame", f"odom: child_frame_id '{child}' is not the base frame "
                                              f"'{self._base_frame}' (the twist must be the base's, in its axes; "
                                              f"set base_frame if the URDF's root link is not it)")
        if self.params["odom_frame"] and frame != self.params["odom_frame"]:
            return self._reject("odom_frame", f"odom: header.frame_id '{frame}' is not odom_frame "
                                              f"'{self.params['odom_frame']}'")
        stamp = self._stamp(msg.header, recv_ns)
        position, orientation = msg.pose.pose.position, msg.pose.pose.orientation
        linear, angular = msg.twist.twist.linear, msg.twist.twist.angular
        p = _vec(position.x, position.y, position.z)
        quat = _vec(orientation.x, orientation.y, orientation.z, orientation.w)
        twist = _vec(linear.x, linear.y, linear.z, angular.x, angular.y, angular.z)
        for what, arr in (("pose.position", p), ("pose.orientation", quat), ("twist", twist)):
            if not np.all(np.isfinite(arr)):
                return self._reject("odom_nonfinite", f"odom: {what} has NaN or infinite values")
        norm = float(np.linalg.norm(quat))
        if abs(norm - 1.0) > self.params["quaternion_tolerance"]:
            return self._reject("odom_quaternion", f"odom: quaternion norm {norm:.6g} is not unit")
        kind, text = self._odom.add(_Odom(stamp, p, quat / norm, twist, (msg.header.frame_id, msg.child_frame_id)))
        if kind == "order":
            return self._reject("odom_order", text)
        if kind == "reset":
            self.log.warning(text)
        if self._waiting:
            self._pair_waiting()

    # --------------------------------------------------------------- contacts
    def on_contacts(self, msg, recv_ns=None):
        """The active contact set (sensor_msgs/JointState): ``name`` lists contact frames,
        ``position`` is empty (all listed active) or 1.0 / 0.0 per name; unlisted: inactive."""
        stamp = self._stamp(msg.header, recv_ns)
        names = list(msg.name)
        flags = np.asarray(msg.position, dtype=float).reshape(-1)
        unknown = [n for n in names if n not in self._contact_index]
        if unknown:
            configured = ", ".join(c.frame for c in self.contacts)
            return self._reject("contacts_names", "contacts: unknown contact " + ", ".join(
                f"'{n}'" for n in unknown[:5]) + f" (configured: {configured})")
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            return self._reject("contacts_names", f"contacts: duplicate contact '{dup}'")
        if flags.size not in (0, len(names)):
            return self._reject("contacts_values", f"contacts: position has {flags.size} entries for "
                                                   f"{len(names)} names (empty, or 1.0/0.0 per name)")
        bad = [(n, f) for n, f in zip(names, flags) if f not in (0.0, 1.0)]
        if bad:
            return self._reject("contacts_values", f"contacts: position of '{bad[0][0]}' is {bad[0][1]} "
                                                   f"(1.0: active, 0.0: inactive)")
        active = [False] * len(self.contacts)
        for k, n in enumerate(names):
            active[self._contact_index[n]] = bool(flags[k]) if flags.size else True
        kind, text = self._contact_sets.add(_Sample(stamp, tuple(active)))
        if kind == "order":
            return self._reject("contacts_order", text)
        if kind == "reset":
            self.log.warning(text)
        self._contact_set_seen = True

    def on_contact_force(self, msg, recv_ns=None):
        """A contact's force (geometry_msgs/WrenchStamped, frame_id = the contact frame, components
        in the contact's reference frame, acting on the robot); point contacts use the force only."""
        stamp = self._stamp(msg.header, recv_ns)
        frame = msg.header.frame_id
        i = self._contact_index.get(frame)
        if i is None:
            configured = ", ".join(c.frame for c in self.contacts)
            return self._reject("contact_forces_names", f"contact_forces: unknown contact '{frame}' "
                                                        f"(configured: {configured})")
        f, t = msg.wrench.force, msg.wrench.torque
        w = _vec(f.x, f.y, f.z, t.x, t.y, t.z)[:self.contacts[i].dim]
        if not np.all(np.isfinite(w)):
            return self._reject("contact_forces_nonfinite", f"contact_forces: wrench of '{frame}' has NaN "
                                                            f"or infinite values")
        kind, text = self._forces[frame].add(_Sample(stamp, w))
        if kind == "order":
            return self._reject("contact_forces_order", text)
        if kind == "reset":
            self.log.warning(text)

    def _active_contacts(self, stamp):
        """The contacts active at a joint state's stamp -> (active sl.Contacts, their input forces
        (mode forces) or None, None), or (None, None, (problem key, text))."""
        p = self.params
        if self._contact_set_seen:
            sample, err = self._contact_sets.nearest(stamp, p["max_contacts_age"])
            if err is not None:
                return None, None, ("contacts_" + err[0], err[1])
            active = [c for c, on in zip(self.contacts, sample.value) if on]
        else:
            active = list(self.contacts) if p["contacts_default_active"] else []
        if p["contact_mode"] != "forces":
            return active, None, None
        forces = []
        for c in active:
            sample, err = self._forces[c.frame].nearest(stamp, p["max_contacts_age"])
            if err is not None:
                return None, None, ("contact_forces_" + err[0], err[1])
            forces.append(sample.value)
        return active, forces, None

    # --------------------------------------------------------- joint states
    def on_superseded(self, n: int) -> None:
        """n joint states waited in the subscription's queue behind a newer one and were left out
        when the node took the newest (it was busy): counted as ``superseded``, no warning."""
        self.rejected["superseded"] = self.rejected.get("superseded", 0) + n
        self._window.inputs += n
        self._window.superseded += n

    def on_joint_state(self, msg, recv_ns=None):
        p = self.params
        model = self.model
        self._window.inputs += 1
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
            for buf in (self._odom, self._contact_sets, *self._forces.values()):
                buf.clear()
            self._waiting.clear()
            last = self._last_stamp = None
        if last is not None and p["max_rate"] > 0 and (stamp - last) * 1e-9 < 1.0 / p["max_rate"]:
            self.rejected["rate_limited"] = self.rejected.get("rate_limited", 0) + 1
            return None
        if self._plain_until and time.perf_counter() < self._plain_until:
            self.rejected["while_compiling"] = self.rejected.get("while_compiling", 0) + 1
            self._window.skipped += 1
            return None

        names = list(msg.name)
        perm = self._permutation(names)
        if isinstance(perm, str):
            return self._reject("joint_states_names", perm)
        n = len(names)
        # s, r, tau: joint positions, velocities, torques in model order (the library's names)
        s = self._field(msg.position, "position", n, perm)
        empty_ok = p["allow_empty_velocity_effort"]
        r = self._field(msg.velocity, "velocity", n, perm, allow_empty=empty_ok) if not isinstance(s, str) else s
        tau = self._field(msg.effort, "effort", n, perm, allow_empty=empty_ok) if not isinstance(r, str) else r
        if isinstance(tau, str):
            return self._reject("joint_states_values", tau)

        self._last_stamp = stamp     # accepted: a later joint state must not be older
        if not model.floating_base:
            return self._linearize(stamp, s, r, tau)
        self._waiting.append(_Waiting(stamp, s, r, tau, self.transport.steady_ns() + int(p["odom_wait"] * 1e9)))
        return self._pair_waiting()

    # ------------------------------------------------- pairing with odometry
    def _pair_waiting(self):
        """Linearize the waiting joint states, oldest first, once their odometry is settled: a sample
        of their own stamp or a later one has arrived (odometry comes in stamp order, so nothing
        nearer can follow), or their ``odom_wait`` is over. Each then takes the odometry of its own
        stamp if there is one, else the nearest within ``max_odom_age``. -> the last result of
        :meth:`_linearize` (None if none was linearized)."""
        result, now = None, None
        while self._waiting:
            w = self._waiting[0]
            newest = self._odom.newest_stamp()
            if (newest is None or newest < w.stamp) and len(self._waiting) <= MAX_WAITING:
                now = self.transport.steady_ns() if now is None else now
                if now < w.deadline:
                    break
            self._waiting.popleft()
            result = self._linearize(w.stamp, w.s, w.r, w.tau)
        timer = self._wait_timer
        if timer is not None and bool(self._waiting) != self._wait_timer_armed:
            self._wait_timer_armed = bool(self._waiting)
            if self._waiting:
                timer.reset()           # armed only when the first joint state starts to wait: a reset
            else:                       # on every arrival would put its firing off indefinitely
                timer.cancel()
        return result

    def _on_wait_timer(self):
        """The steady timer while joint states wait for their odometry: those whose wait is over go,
        after the odometry already in the subscription's queue (a node held up by its machine may
        run this timer before the odometry that arrived in the meantime)."""
        self.transport.dispatch_waiting(self._odom_sub)
        self._pair_waiting()

    # ------------------------------------------------------ linearization
    def _linearize(self, stamp, s, r, tau):
        """Linearize an accepted joint state at its stamp with the odometry (floating base) and the
        contacts paired to it, and publish the record -> (A, B), or None when it was dropped."""
        p, model = self.params, self.model
        odom = None
        if model.floating_base:
            odom, err = self._odom.nearest(stamp, p["max_odom_age"])
            if err is not None:
                return self._reject("odom_" + err[0], err[1])
            q = np.concatenate([odom.p, odom.quat, s])
            v = np.concatenate([odom.twist, r])
        else:
            q, v = s, r

        active = forces = None
        if self.contacts:
            active, forces, err = self._active_contacts(stamp)
            if err is not None:
                return self._reject(*err)

        t0 = time.perf_counter()
        dt = p["dt"]
        try:
            state = sl.State.from_vectors(model, q, v)
            if forces is not None:
                lin = sl.linearize(model, state, tau, contacts=self.loops or None, forces=list(zip(active, forces)),
                                   dt=dt or None)
            else:
                lin = sl.linearize(model, state, tau, contacts=list(active or ()) + self.loops, dt=dt or None)
            nxt = sl.next_state(model, state, lin.nu_dot, dt) if dt else None
        except Exception as e:
            return self._reject("linearize", f"linearization failed: {type(e).__name__}: {e}")
        parts = {"q": state.q, "v": state.v, "tau": tau, "nu_dot": lin.nu_dot, "A": lin.A, "B": lin.B}
        # the constraint forces: the active rigid contacts', then the loops' (always active)
        m = sum(lp.dim for lp in self.loops)
        if self.contacts:
            on = set(id(c) for c in active)
            parts["active"] = np.array([1.0 if id(c) in on else 0.0 for c in self.contacts])
            if forces is not None:
                parts["input_forces"] = np.concatenate(forces) if forces else np.zeros(0)
            else:
                m += sum(c.dim for c in active)
        if m:
            parts.update(forces=lin.forces, dforces_dz=lin.dforces_dz, dforces_dtau=lin.dforces_dtau)
        if nxt is not None:
            parts.update(Ad=lin.Ad, Bd=lin.Bd, q_next=nxt.q, v_next=nxt.v)
        if odom is not None:
            parts["odom_stamp"] = stamp_section(odom.stamp)
        for name in self._omit:
            parts.pop(name, None)
        # never a non-finite number out: the whole record or nothing
        bad = next((k for k, x in parts.items() if not np.all(np.isfinite(x))), None)
        if bad is not None:
            return self._reject("linearize", f"linearization: {bad} has NaN or infinite entries "
                                             f"(nothing published for this state)")
        seconds = time.perf_counter() - t0
        self.compute_s += seconds
        compiling = any(group_state(g) == "compiling"
                        for g in (("core", "contacts") if active or self.loops else ("core",)))
        self._plain_until = t0 + seconds / PLAIN_DUTY if compiling else 0.0
        if odom is not None:
            self.pairing["exact" if odom.stamp == stamp else "nearest"] += 1
        self._publish(stamp, model, parts, lin.B.shape[1], m, dt, odom, s, r, tau, lin)
        return lin.A, lin.B

    def _publish(self, stamp, model, parts, nw, m, dt, odom, s, r, tau, lin):
        """The record, then the point and A, B (the record's parts for tools and simple consumers)."""
        types = self._types
        self.seq += 1
        data = encode_record(self.description_id, self.seq, stamp, model.nv, model.nj, nw, m, dt, parts)
        self._pub_record.publish(record_msg(types, data))
        if self._pub_point is not None:
            self._pub_point[0].publish(joint_state_msg(types, stamp, model.joint_names, s, r, tau))
            if self._pub_point[1] is not None:
                self._pub_point[1].publish(odometry_msg(types, stamp, odom.p, odom.quat, odom.twist, *odom.frames))
        if self._pub_a is not None:
            self._pub_a.publish(matrix_to_msg(types, lin.A))
            self._pub_b.publish(matrix_to_msg(types, lin.B))
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
        return f"published {self.published} records (mean linearize {mean}){pairing}; dropped: {rej}"
