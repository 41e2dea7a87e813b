# SPDX-License-Identifier: BSD-3-Clause
"""The node's input side, without a transport: message checks, pairing by stamp, drops by reason.

:class:`NodeInputs` takes the messages the node subscribes (joint states, odometry, contact sets,
contact forces), each with its receive time, in the order they arrive, and hands on each accepted
joint state with everything paired to it (:class:`Paired`: the point q, v, the torques, the
odometry sample, the active contacts and their forces) in the order the node linearizes them.
Whatever it drops is counted in ``rejected`` under the reason the node names (docs/ros.md,
"Pairing a joint state with its odometry"). The live node (:mod:`.node`) feeds it from its
subscriptions and its steady clock; ``sva-linearizer bag`` feeds it a recording's messages in
their logged order, the log time standing in for both clocks, so that one implementation decides
for both.

The only clock it reads is ``steady_ns()`` (the ``odom_wait`` of a joint state that waits for the
odometry of its own stamp); the only time-based decision that is not its own is ``skip`` (the
live node's share of a core while its kernels compile).
"""
from __future__ import annotations

from collections import deque

import numpy as np

from ..wire.messages import stamp_to_ns
from ..wire.qos import QOS_ODOM


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


class Paired:
    """An accepted joint state with what was paired to it, ready to linearize: ``stamp`` (ns),
    ``q``, ``v`` (flat, as State.from_vectors takes them: the odometry's base and the joints, or
    the joints alone), ``tau`` (nj), ``s``, ``r`` (the joints), ``odom`` (the odometry sample,
    None for a fixed base), ``active`` (the active sl.Contacts in configured order, None without
    contacts) and ``forces`` (their forces, ``contact_mode: forces``; else None)."""
    __slots__ = ("stamp", "q", "v", "tau", "s", "r", "odom", "active", "forces")

    def __init__(self, stamp, q, v, tau, s, r, odom, active, forces):
        self.stamp, self.q, self.v, self.tau, self.s, self.r = stamp, q, v, tau, s, r
        self.odom, self.active, self.forces = odom, active, forces


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


def _same(a, b) -> bool:
    """Two snapshots (nested tuples and lists of stamps, numbers, strings and arrays) hold the same
    values, arrays compared exactly."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape
                and np.array_equal(a, b))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


class NodeInputs:
    """The node's input side (module docstring), for ``params`` (normalized, :mod:`.parameters`)
    and the configured ``contacts`` (sl.Contact).

    ``log``: info / warning (the lines said once); ``steady_ns()``: the clock of the odometry wait;
    ``now_ns()``: the node's clock, the stamp of a message that came without one and no receive time;
    ``emit(paired)``: called with each :class:`Paired` joint state, oldest first, its result the
    one ``on_joint_state`` / ``on_odom`` return; ``on_reject(key, text)``: after a drop is counted
    (the node warns and counts it in its diagnostics); ``skip()``: True to leave a joint state out
    before its values are read (counted by the caller); ``timer``: the steady timer (reset /
    cancel) that releases joint states whose wait is over, armed while some wait."""

    def __init__(self, params: dict, contacts, *, log, steady_ns, now_ns, emit, on_reject=None, skip=None,
                 timer=None):
        p = self.params = params
        self.contacts = contacts
        self.log, self.steady_ns, self.now_ns, self.emit = log, steady_ns, now_ns, emit
        self.on_reject, self.skip, self.timer = on_reject, skip, timer
        self._timer_armed = False
        self.model = None
        self.base_frame = None
        self.rejected: dict = {}
        self.last_problem = None
        self._last_stamp = None
        self._odom = StampedBuffer("odom", "odometry", "max_odom_age",
                                   "odom: no valid odometry yet (a floating base needs odom)", QOS_ODOM["depth"])
        self._waiting: deque = deque()     # joint states waiting for their odometry (_Waiting)
        self._perm_cache: dict = {}
        self._index = {}
        self._said_empty: set = set()      # JointState fields already reported empty (said once)
        # the buffered contact sets (tuples of bools in configuration order) and forces (per frame)
        self._contact_index = {c.frame: i for i, c in enumerate(contacts)}
        self._contact_sets = StampedBuffer("contacts", "contact set", "max_contacts_age",
                                           "contacts: no contact set yet")
        self._contact_set_seen = False     # any valid contact set ever: from then on one is required
        self._forces = {c.frame: StampedBuffer("contact_forces", "force", "max_contacts_age",
                                               f"contact_forces: no force for contact '{c.frame}' yet")
                        for c in contacts}
        for buf in self._buffers():
            buf.reset_threshold = p["time_reset_threshold"]

    def _buffers(self):
        return (self._odom, self._contact_sets, *self._forces.values())

    def set_model(self, model, base_frame: str) -> None:
        """A new model (the node's first, or one from the description topic): joint states are read
        against it; those that waited for odometry are forgotten, and the order of stamps starts
        again."""
        self.model, self.base_frame = model, base_frame
        self._index = {n: i for i, n in enumerate(model.joint_names)}
        self._perm_cache.clear()
        self._waiting.clear()
        self._last_stamp = None

    # ---------------------------------------------------------------- helpers
    def reject(self, key, text):
        """Count a drop under its reason and hand it to ``on_reject``."""
        self.rejected[key] = self.rejected.get(key, 0) + 1
        self.last_problem = text
        if self.on_reject is not None:
            self.on_reject(key, text)

    def _stamp(self, header, recv_ns):
        ns = stamp_to_ns(header.stamp)
        if ns == 0:
            ns = recv_ns if recv_ns is not None else self.now_ns()
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
        if child != self.base_frame:
            return self.reject("odom_frame", f"odom: child_frame_id '{child}' is not the base frame "
                                             f"'{self.base_frame}' (the twist must be the base's, in its axes; "
                                             f"set base_frame if the URDF's root link is not it)")
        if self.params["odom_frame"] and frame != self.params["odom_frame"]:
            return self.reject("odom_frame", f"odom: header.frame_id '{frame}' is not odom_frame "
                                             f"'{self.params['odom_frame']}'")
        stamp = self._stamp(msg.header, recv_ns)
        position, orientation = msg.pose.pose.position, msg.pose.pose.orientation
        linear, angular = msg.twist.twist.linear, msg.twist.twist.angular
        values = _vec(position.x, position.y, position.z, orientation.x, orientation.y, orientation.z,
                      orientation.w, linear.x, linear.y, linear.z, angular.x, angular.y, angular.z)
        p, quat, twist = values[0:3], values[3:7], values[7:13]
        if not np.isfinite(values).all():
            what = next(w for w, arr in (("pose.position", p), ("pose.orientation", quat), ("twist", twist))
                        if not np.all(np.isfinite(arr)))
            return self.reject("odom_nonfinite", f"odom: {what} has NaN or infinite values")
        norm = float(np.linalg.norm(quat))
        if abs(norm - 1.0) > self.params["quaternion_tolerance"]:
            return self.reject("odom_quaternion", f"odom: quaternion norm {norm:.6g} is not unit")
        kind, text = self._odom.add(_Odom(stamp, p, quat / norm, twist, (msg.header.frame_id, msg.child_frame_id)))
        if kind == "order":
            return self.reject("odom_order", text)
        if kind == "reset":
            self.log.warning(text)
        if self._waiting:
            return self.pair_waiting()
        return None

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
            return self.reject("contacts_names", "contacts: unknown contact " + ", ".join(
                f"'{n}'" for n in unknown[:5]) + f" (configured: {configured})")
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            return self.reject("contacts_names", f"contacts: duplicate contact '{dup}'")
        if flags.size not in (0, len(names)):
            return self.reject("contacts_values", f"contacts: position has {flags.size} entries for "
                                                  f"{len(names)} names (empty, or 1.0/0.0 per name)")
        bad = [(n, f) for n, f in zip(names, flags) if f not in (0.0, 1.0)]
        if bad:
            return self.reject("contacts_values", f"contacts: position of '{bad[0][0]}' is {bad[0][1]} "
                                                  f"(1.0: active, 0.0: inactive)")
        active = [False] * len(self.contacts)
        for k, n in enumerate(names):
            active[self._contact_index[n]] = bool(flags[k]) if flags.size else True
        kind, text = self._contact_sets.add(_Sample(stamp, tuple(active)))
        if kind == "order":
            return self.reject("contacts_order", text)
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
            return self.reject("contact_forces_names", f"contact_forces: unknown contact '{frame}' "
                                                       f"(configured: {configured})")
        f, t = msg.wrench.force, msg.wrench.torque
        w = _vec(f.x, f.y, f.z, t.x, t.y, t.z)[:self.contacts[i].dim]
        if not np.all(np.isfinite(w)):
            return self.reject("contact_forces_nonfinite", f"contact_forces: wrench of '{frame}' has NaN "
                                                           f"or infinite values")
        kind, text = self._forces[frame].add(_Sample(stamp, w))
        if kind == "order":
            return self.reject("contact_forces_order", text)
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
    def on_joint_state(self, msg, recv_ns=None):
        p = self.params
        model = self.model
        if model is None:
            return self.reject("no_model", "joint_states: no robot model yet (waiting for robot_description)")
        stamp = self._stamp(msg.header, recv_ns)
        last = self._last_stamp
        if last is not None and stamp < last:
            back = (last - stamp) * 1e-9
            if back <= p["time_reset_threshold"]:
                return self.reject("joint_states_order", f"joint_states: stamp older than previous "
                                                         f"(out of order, {back * 1e3:.3g} ms back)")
            self.log.warning(f"joint_states: time jumped back by {back:.3g} s; treating it as a clock reset")
            for buf in self._buffers():
                buf.clear()
            self._waiting.clear()
            last = self._last_stamp = None
        if last is not None and p["max_rate"] > 0 and (stamp - last) * 1e-9 < 1.0 / p["max_rate"]:
            self.rejected["rate_limited"] = self.rejected.get("rate_limited", 0) + 1
            return None
        if self.skip is not None and self.skip():
            return None

        names = list(msg.name)
        perm = self._permutation(names)
        if isinstance(perm, str):
            return self.reject("joint_states_names", perm)
        n = len(names)
        # s, r, tau: joint positions, velocities, torques in model order (the library's names)
        s = self._field(msg.position, "position", n, perm)
        empty_ok = p["allow_empty_velocity_effort"]
        r = self._field(msg.velocity, "velocity", n, perm, allow_empty=empty_ok) if not isinstance(s, str) else s
        tau = self._field(msg.effort, "effort", n, perm, allow_empty=empty_ok) if not isinstance(r, str) else r
        if isinstance(tau, str):
            return self.reject("joint_states_values", tau)

        self._last_stamp = stamp     # accepted: a later joint state must not be older
        if not model.floating_base:
            return self._pair(stamp, s, r, tau)
        self._waiting.append(_Waiting(stamp, s, r, tau, self.steady_ns() + int(p["odom_wait"] * 1e9)))
        return self.pair_waiting()

    # ------------------------------------------------- pairing with odometry
    def pair_waiting(self, flush: bool = False):
        """Hand on the waiting joint states, oldest first, once their odometry is settled: a sample
        of their own stamp or a later one has arrived (odometry comes in stamp order, so nothing
        nearer can follow), or their ``odom_wait`` is over (``flush``: every one, now). Each then
        takes the odometry of its own stamp if there is one, else the nearest within
        ``max_odom_age``. -> the last result of ``emit`` (None if none was handed on)."""
        result, now = None, None
        while self._waiting:
            w = self._waiting[0]
            newest = self._odom.newest_stamp()
            if (not flush and (newest is None or newest < w.stamp)
                    and len(self._waiting) <= MAX_WAITING):
                now = self.steady_ns() if now is None else now
                if now < w.deadline:
                    break
            self._waiting.popleft()
            result = self._pair(w.stamp, w.s, w.r, w.tau)
        timer = self.timer
        if timer is not None and bool(self._waiting) != self._timer_armed:
            self._timer_armed = bool(self._waiting)
            if self._waiting:
                timer.reset()           # armed only when the first joint state starts to wait: a reset
            else:                       # on every arrival would put its firing off indefinitely
                timer.cancel()
        return result

    def next_deadline(self) -> int | None:
        """The steady time (ns) at which the oldest waiting joint state's wait ends, None if none waits."""
        return self._waiting[0].deadline if self._waiting else None

    def _pair(self, stamp, s, r, tau):
        """An accepted joint state with the odometry (floating base) and the contacts of its stamp
        -> emit(Paired), or the drop counted under its reason."""
        p, model = self.params, self.model
        odom = None
        if model.floating_base:
            odom, err = self._odom.nearest(stamp, p["max_odom_age"])
            if err is not None:
                return self.reject("odom_" + err[0], err[1])
            q = np.concatenate([odom.p, odom.quat, s])
            v = np.concatenate([odom.twist, r])
        else:
            q, v = s, r
        active = forces = None
        if self.contacts:
            active, forces, err = self._active_contacts(stamp)
            if err is not None:
                return self.reject(*err)
        return self.emit(Paired(stamp, q, v, tau, s, r, odom, active, forces))

    # ------------------------------------------------- the pairing state
    def snapshot(self):
        """What decides how later messages are checked and paired, as plain values: the joint states
        that wait, the last accepted stamp, whether a contact set came, and of each buffer the
        samples a later joint state can still be paired with (those from the newest one at or
        before the oldest stamp that can still ask: the last accepted one or a waiting one; a
        later joint state is not older, and the samples before are never looked at). Equal
        snapshots check and pair the same later messages the same way (:func:`same_snapshot`);
        :meth:`restore` sets one."""
        stamps = [w.stamp for w in self._waiting] + ([self._last_stamp] if self._last_stamp is not None else [])
        oldest = min(stamps) if stamps else None

        def tail(buf):
            items = list(buf.items)
            if oldest is not None:
                before = [i for i, x in enumerate(items) if x.stamp <= oldest]
                if before:
                    items = items[before[-1]:]
            return items

        odom = tuple((o.stamp, o.p, o.quat, o.twist, o.frames) for o in tail(self._odom))
        waiting = tuple((w.stamp, w.s, w.r, w.tau, w.deadline) for w in self._waiting)
        sets = tuple((x.stamp, x.value) for x in tail(self._contact_sets))
        forces = tuple((f, tuple((x.stamp, x.value) for x in tail(b))) for f, b in self._forces.items())
        return (odom, waiting, sets, self._contact_set_seen, forces, self._last_stamp)

    def restore(self, snap) -> None:
        """The pairing state of a :meth:`snapshot` (taken with the same parameters and model)."""
        odom, waiting, sets, seen, forces, last = snap
        self._odom.items.clear()
        self._odom.items.extend(_Odom(*o) for o in odom)
        self._waiting.clear()
        self._waiting.extend(_Waiting(*w) for w in waiting)
        self._contact_sets.items.clear()
        self._contact_sets.items.extend(_Sample(*x) for x in sets)
        self._contact_set_seen = seen
        for f, items in forces:
            self._forces[f].items.clear()
            self._forces[f].items.extend(_Sample(*x) for x in items)
        self._last_stamp = last


def same_snapshot(a, b) -> bool:
    """Whether two :meth:`NodeInputs.snapshot` values are equal (arrays compared exactly)."""
    return _same(a, b)
