# SPDX-License-Identifier: BSD-3-Clause
"""A simulated robot that publishes joint_states and odom (for the demo and the benchmark).

``dynamics`` mode integrates the robot's own forward dynamics (ABAmb, semi-implicit Euler on
SE(3) x R^n, no contacts: a floating base is in free flight) under a joint PD controller tracking
slow sinusoids, and publishes the state with the current wall-clock stamp. ``random`` mode cycles
through random valid states (what the benchmark uses: the node's cost does not depend on where the
states come from, and the publisher then costs almost nothing). ``standing`` mode (a quadruped,
see :data:`STANDING_FEET`) publishes the robot standing still on its four feet
(:func:`standing_state`), and the active contact set (all four feet) on ``contacts``.
"""
from __future__ import annotations

import math
import signal
import sys
import time

import numpy as np

import sva_linearizer as sl
from sva_linearizer.spatial import matrix_to_quat, se3_exp

from ..wire.messages import contacts_msg, joint_state_msg, odometry_msg


class SimRobot:
    """Free-flying (or fixed-base) robot under joint PD control; state advanced by :meth:`advance`."""

    def __init__(self, model, dt=0.002, seed=0):
        self.model, self.dt = model, float(dt)
        nj = model.nj
        rng = np.random.default_rng(seed)
        self.phase = rng.uniform(0, 2 * math.pi, nj)
        self.t = 0.0
        self.s, self.r = np.zeros(nj), np.zeros(nj)
        self.R, self.p, self.v = np.eye(3), np.array([0.0, 0.0, 0.5]), np.zeros(6)
        Minv = sl.inverse_mass_matrix(model, self.state())
        m_eff = 1.0 / np.diag(Minv)[model.nv - nj:]    # effective inertia seen by each joint
        w = 2 * math.pi * 2.0                            # 2 Hz closed-loop bandwidth
        self.kp, self.kd = m_eff * w * w, m_eff * 2 * 0.7 * w
        self.tau = np.zeros(nj)

    def state(self):
        if self.model.floating_base:
            return sl.State(self.model, R=self.R, p=self.p, s=self.s, v_base=self.v, r=self.r)
        return sl.State(self.model, s=self.s, r=self.r)

    def advance(self, duration):
        """Integrate ``duration`` seconds in steps of at most dt."""
        n = max(1, int(round(duration / self.dt)))
        h = duration / n
        for _ in range(n):
            s_ref = 0.3 * np.sin(2 * math.pi * 0.5 * self.t + self.phase)
            self.tau = self.kp * (s_ref - self.s) - self.kd * self.r
            acc = sl.forward_dynamics(self.model, self.state(), self.tau)
            nb = self.model.nv - self.model.nj
            self.r = self.r + h * acc[nb:]
            self.s = self.s + h * self.r
            if nb:
                self.v = self.v + h * acc[:6]
                dR, dp = se3_exp(h * self.v)               # H <- H exp(h v^)
                self.p = self.p + self.R @ dp
                self.R = self.R @ dR
            self.t += h

    @property
    def quat(self):
        return matrix_to_quat(self.R)


#: The feet of the quadrupeds the demo can stand (point contacts), in the order of config/<robot>.yaml.
STANDING_FEET = {
    "solo12": ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"],
    "quadruped": ["LF_foot", "RF_foot", "LH_foot", "RH_foot"],
}


def standing_posture(model) -> np.ndarray:
    """Joint positions of a quadruped standing on bent legs (Solo's SRDF "straight_standing":
    hip flexion +-0.8, knee -+1.6, front legs one way, hind legs the other); joints named
    <leg>_HAA / _HFE / _KFE with the leg FL, FR, HL, HR or LF, RF, LH, RH."""
    s = np.zeros(model.nj)
    for j, name in enumerate(model.joint_names):
        leg, _, joint = name.partition("_")
        front = leg in ("FL", "FR", "LF", "RF")
        if joint == "HFE":
            s[j] = 0.8 if front else -0.8
        elif joint == "KFE":
            s[j] = -1.6 if front else 1.6
    return s


def _contact_jacobian(model, state, c):
    """The contact's rows Jc (dim x nv, z coordinates) in its reference frame (zero offset)."""
    J = sl.frame_jacobian(model, state, c.frame, reference="local")
    if np.any(c.offset != 0.0):
        raise ValueError("standing_state: contacts with an offset are not supported")
    if c.reference == "world_aligned":
        R, _ = sl.frame_placement(model, state, c.frame)
        J = np.vstack([R @ J[:3], R @ J[3:]])
    return J[:c.dim]


def standing_state(model, contacts, s=None):
    """The robot standing still on its contacts: base level (identity orientation) at the height
    that puts the contact frames' mean height at z = 0, joints at ``s`` (default
    :func:`standing_posture`), zero velocity, and the joint torques tau that hold it with the
    smallest contact forces (least norm) balancing gravity.
    -> (q, v, tau, forces) in the library's flat conventions; forces stacked as ``contacts``, each
    in its reference frame, on the robot. With these tau, the rigid-contact dynamics give zero
    acceleration and exactly these forces."""
    nj, nv = model.nj, model.nv
    s = standing_posture(model) if s is None else np.asarray(s, dtype=float)
    quat = np.array([0.0, 0.0, 0.0, 1.0])
    state = sl.State.from_vectors(model, np.r_[0.0, 0.0, 0.0, quat, s], np.zeros(nv))
    height = -np.mean([sl.frame_placement(model, state, c.frame)[1][2] for c in contacts])
    q = np.r_[0.0, 0.0, height, quat, s]
    state = sl.State.from_vectors(model, q, np.zeros(nv))
    h = sl.extended_inverse_dynamics(model, state, np.zeros(nv))   # gravity: [base wrench; joints]
    Jc = np.vstack([_contact_jacobian(model, state, c) for c in contacts])
    nb = nv - nj
    # M nu_dot + h = S tau + Jc^T f with nu_dot = 0: the base rows fix f (least norm), the rest tau
    f = np.linalg.lstsq(Jc[:, :nb].T, h[:nb], rcond=None)[0]
    tau = h[nb:] - Jc[:, nb:].T @ f
    return q, np.zeros(nv), tau, f


def random_states(model, n=64, seed=1):
    """n random valid (p, quat, twist, s, r, tau) tuples."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        q = rng.normal(size=4)
        out.append((rng.normal(size=3), q / np.linalg.norm(q), rng.normal(size=6),
                    rng.uniform(-1, 1, model.nj), rng.normal(size=model.nj), rng.normal(size=model.nj)))
    return out


def _raise_interrupt(*_):
    raise KeyboardInterrupt


def run_sim_publisher(robot="quadruped", rate=100.0, seconds=None, mode="dynamics", transport=None,
                      wait_for_node_s=30.0, out=sys.stdout, kind="dds") -> int:
    """Publish odom (floating base) then joint_states at ``rate`` Hz, stamped with wall time."""
    from sva_linearizer.robots import load_robot

    from ..node.node import QOS_STATE_PUB
    from ..transports.transport import make_transport

    model = load_robot(robot)
    own = transport is None
    if own:
        signal.signal(signal.SIGTERM, _raise_interrupt)
    if own:
        transport = make_transport(kind, "sva_linearizer_sim", args=["sva_linearizer_sim"])
    T = transport.types
    pub_js = transport.create_publisher("joint_states", "sensor_msgs/msg/JointState", QOS_STATE_PUB)
    pub_odom = (transport.create_publisher("odom", "nav_msgs/msg/Odometry", QOS_STATE_PUB)
                if model.floating_base else None)
    names = list(model.joint_names)
    period = 1.0 / rate
    sim = SimRobot(model) if mode == "dynamics" else None
    table = random_states(model) if mode == "random" else None
    pub_contacts = None
    if mode == "standing":
        feet = STANDING_FEET.get(robot)
        if feet is None:
            raise ValueError(f"sim --mode standing: no feet known for '{robot}' "
                             f"(known: {', '.join(STANDING_FEET)})")
        q, v, tau, _ = standing_state(model, [sl.Contact(f) for f in feet])
        table = [(q[0:3], q[3:7], v[0:6], q[7:], v[6:], tau)]
        pub_contacts = transport.create_publisher("contacts", "sensor_msgs/msg/JointState", QOS_STATE_PUB)
    if hasattr(transport, "wait_for_readers"):
        transport.wait_for_readers(pub_js, wait_for_node_s)
    sent, late, k = 0, 0, 0
    t0 = time.monotonic()
    next_t = t0
    try:
        while seconds is None or time.monotonic() - t0 < seconds:
            if sim is not None:
                sim.advance(period)
                p, quat, tw, s, r, tau = sim.p, sim.quat, sim.v, sim.s, sim.r, sim.tau
            else:
                p, quat, tw, s, r, tau = table[k % len(table)]
            k += 1
            stamp = time.time_ns()
            if pub_contacts is not None:
                pub_contacts.publish(contacts_msg(T, stamp, feet))
            if pub_odom is not None:
                pub_odom.publish(odometry_msg(T, stamp, p, quat, tw, child_frame_id=model.base_name))
            pub_js.publish(joint_state_msg(T, stamp, names, s, r, tau))
            sent += 1
            next_t += period
            delay = next_t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -5 * period:    # fell behind: do not burst to catch up
                late += 1
                next_t = time.monotonic()
    except KeyboardInterrupt:
        pass
    finally:
        elapsed = time.monotonic() - t0
        print(f"sim: sent {sent} joint states in {elapsed:.2f} s ({sent / max(elapsed, 1e-9):.1f} Hz, "
              f"target {rate:g} Hz, {late} schedule resets)", file=out, flush=True)
        if own:
            transport.close()
    return 0


#: The topic of the joint torque commands: as ros2_control's effort controllers
#: (effort_controllers/JointGroupEffortController, forward_command_controller) take them:
#: std_msgs/Float64MultiArray, one value per joint in the controller's joint order (here the
#: model's: linearization/description's joint_names).
TOPIC_COMMANDS = "effort_controller/commands"
BAUMGARTE = (100.0, 20.0)   # (Kp, Kd) of the feet's contact corrector, in the plant and the node's config


def arm_posture(model) -> np.ndarray:
    """A bent arm away from its singular stretched pose: 0.4 rad on every other joint."""
    return np.array([0.4 * ((j % 2) * 2 - 1) * (j % 3 != 0) for j in range(model.nj)])


def initial_state(model, feet):
    """(q, v, tau) the control demo starts from: standing still on the feet (standing_state), or
    the arm at arm_posture held against gravity (tau = the gravity torques)."""
    if feet:
        q, v, tau, _ = standing_state(model, [sl.Contact(f) for f in feet])
        return q, v, tau
    s = arm_posture(model)
    st = sl.State(model, s=s)
    return s, np.zeros(model.nv), sl.extended_inverse_dynamics(model, st, np.zeros(model.nv))[-model.nj:]


def make_plant(kind: str, robot: str, model, q0, feet):
    """The simulated robot: "pinocchio" (independent of this package) or "package" (its own dynamics)."""
    from sva_linearizer.robots import robot_urdf_path

    from .plant import MISSING, PackagePlant, Plant, pin

    if kind == "pinocchio":
        if pin is None:
            raise ValueError(MISSING)
        plant = Plant(robot_urdf_path(robot), list(model.joint_names), model.floating_base, tuple(model.gravity))
    elif kind == "package":
        plant = PackagePlant(model)
    else:
        raise ValueError(f"plant must be pinocchio or package, got {kind!r}")
    if feet:
        plant.add_point_contacts(q0, feet, *BAUMGARTE)
    return plant


def run_sim_control(robot="quadruped", rate=100.0, seconds=10.0, plant="pinocchio", push_at=1.0,
                    push_force=0.5, push_seconds=0.1, transport=None, kind="dds", out=sys.stdout,
                    command_timeout_s=2.0, startup_timeout_s=60.0, lift=None) -> int:
    """The robot in a lockstep loop with a controller elsewhere, as a ros2_control loop with a
    synchronous controller runs it: each period k it publishes its state (odom, the contact set,
    then joint_states with ``effort`` = the torques of the period before), stamped with its own
    clock (t0 + k / rate, the wall clock at the start), waits for the torque command that answers
    it on ``effort_controller/commands`` (up to ``command_timeout_s``; then it keeps the last one
    and counts the period late), and integrates the period with it (10 substeps), at most in real
    time. The loop opens on the first answer: until it comes (up to ``startup_timeout_s``) the first
    state is published again every :data:`RESEND_S`, as a sample sent before both ends of a
    best-effort topic have matched each other is lost. A quadruped stands on its feet (rigid point
    contacts with a Baumgarte corrector) and is pushed ``push_at`` s into the loop by a horizontal
    force of ``push_force`` times its weight on the base for ``push_seconds`` (0: no push).
    lift = (foot, t_off, t_on): that foot's contact is off during the periods from t_off to t_on
    (s into the loop; tasks.lift_schedule's rule): the plant holds the robot on the other feet,
    the contact set published on ``contacts`` says so (the node's records follow it), and the foot's
    contact holds again, at the point where it stood, from t_on; prints how high the foot went, how
    far from where it stood it was at touchdown and at the end, and the smallest normal force on a
    foot in contact while it was up and over the last 0.1 s. Prints the loop's round trip (state
    out -> command in)."""
    from sva_linearizer.robots import load_robot

    from ..node.node import QOS_STATE_PUB
    from ..transports.transport import make_transport

    model = load_robot(robot)
    feet = STANDING_FEET.get(robot) if model.floating_base else None
    if model.floating_base and not feet:
        raise ValueError(f"sim --mode control: no feet known for '{robot}' (known: {', '.join(STANDING_FEET)})")
    q, v, tau = initial_state(model, feet)
    sim = make_plant(plant, robot, model, q, feet)
    schedule, lifted = None, None
    if lift is not None:
        from .tasks import lift_schedule

        if not feet or lift[0] not in feet:
            raise ValueError(f"sim --lift: '{lift[0]}' is not one of the robot's feet ({', '.join(feet or [])})")
        schedule = lift_schedule(feet, lift[0], (lift[1], lift[2]), 1.0 / rate)
        from collections import deque

        lifted = {"i": feet.index(lift[0]), "high": 0.0, "touchdown": None, "fz_up": np.inf,
                  "recent": deque(maxlen=max(1, int(round(0.1 * rate))))}
    flags = [True] * len(feet) if feet else None
    own = transport is None
    if own:
        signal.signal(signal.SIGTERM, _raise_interrupt)
        transport = make_transport(kind, "sva_linearizer_sim", args=["sva_linearizer_sim"])
    T = transport.types
    pub_js = transport.create_publisher("joint_states", "sensor_msgs/msg/JointState", QOS_STATE_PUB)
    pub_odom = transport.create_publisher("odom", "nav_msgs/msg/Odometry", QOS_STATE_PUB) if feet else None
    pub_contacts = transport.create_publisher("contacts", "sensor_msgs/msg/JointState", QOS_STATE_PUB) if feet else None
    latest = {"tau": None, "n": 0, "bad": 0, "at": 0.0}

    def on_command(msg, recv_ns):
        x = np.asarray(msg.data, dtype=float)
        if x.shape != (model.nj,) or not np.all(np.isfinite(x)):
            latest["bad"] += 1
            return
        latest.update(tau=x, n=latest["n"] + 1, at=time.monotonic())

    transport.create_subscription(TOPIC_COMMANDS, "std_msgs/msg/Float64MultiArray", on_command, QOS_STATE_PUB)
    if hasattr(transport, "wait_for_readers"):
        transport.wait_for_readers(pub_js, 60.0)
    names = list(model.joint_names)
    weight = -float(model.gravity[2]) * _total_mass(model)
    period = 1.0 / rate
    steps = int(round(seconds * rate)) if seconds is not None else None
    t0_ns = time.time_ns()
    round_trip, late, k, pushed = [], 0, 0, False

    def publish_state(stamp):
        if feet:
            pub_contacts.publish(contacts_msg(T, stamp, feet, None if schedule is None else
                                              [1.0 if f else 0.0 for f in flags]))
            pub_odom.publish(odometry_msg(T, stamp, q[0:3], q[3:7], v[0:6], child_frame_id=model.base_name))
            pub_js.publish(joint_state_msg(T, stamp, names, q[7:], v[6:], tau))
        else:
            pub_js.publish(joint_state_msg(T, stamp, names, q, v, tau))

    start = time.monotonic()
    code = 0
    try:
        while steps is None or k < steps:
            stamp = t0_ns + int(round(k * period * 1e9))
            if schedule is not None:
                new_flags = list(schedule(k * period))
                if new_flags != flags:
                    if new_flags[lifted["i"]] and lifted["touchdown"] is None:
                        lifted["touchdown"] = float(np.linalg.norm(sim.contact_offsets(q)[lifted["i"]]))
                    flags = new_flags
                    sim.set_active(flags)
            before, sent_at = latest["n"], time.monotonic()
            publish_state(stamp)
            if k == 0:
                sent_at = _open_loop(transport, latest, publish_state, stamp, startup_timeout_s)
                start = time.monotonic()
            limit = sent_at + command_timeout_s
            while latest["n"] == before and time.monotonic() < limit:
                transport.spin_once(0.005)
            if latest["n"] == before:
                late += 1
            else:
                round_trip.append((latest["at"] - sent_at) * 1e3)
                tau = latest["tau"]
            wrench = None
            t = k * period
            if feet and push_force and push_at <= t < push_at + push_seconds:
                if not pushed:
                    print(f"sim: push: {push_force * weight:.1f} N along the world y axis on the base for "
                          f"{push_seconds:g} s at t = {t:.2f} s", file=out, flush=True)
                    pushed = True
                R = sl.State.from_vectors(model, q, v).R
                wrench = np.r_[R.T @ np.array([0.0, push_force * weight, 0.0]), np.zeros(3)]
            q, v = sim.step(q, v, tau, period, 10, base_wrench=wrench)
            k += 1
            if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
                print(f"sim: the robot's state is no longer finite after {k * period:.2f} s: stopping", file=out,
                      flush=True)
                code = 1
                break
            if lifted is not None:
                _lift_stats(lifted, sim, q, flags)
            while (left := start + k * period - time.monotonic()) > 0:
                transport.spin_once(min(left, 0.005))
    except KeyboardInterrupt:
        pass
    finally:
        rt = np.array(round_trip) if round_trip else np.array([np.nan])
        print(f"sim: {plant} plant, {k} periods of {period * 1e3:g} ms in {time.monotonic() - start:.1f} s; "
              f"{latest['n']} torque commands, {late} periods without one, {latest['bad']} refused; round trip "
              f"state -> command p50 {np.percentile(rt, 50):.2f} ms, p99 {np.percentile(rt, 99):.2f} ms",
              file=out, flush=True)
        if lifted is not None:
            end = float(np.linalg.norm(sim.contact_offsets(q)[lifted["i"]]))
            td, recent = lifted["touchdown"], min(lifted["recent"], default=np.nan)
            print(f"sim: {lift[0]} off the ground from {lift[1]:.2f} s to {lift[2]:.2f} s: highest "
                  f"{lifted['high'] * 1e3:.1f} mm above where it stood, "
                  + (f"{td * 1e3:.2f} mm from it at touchdown" if td is not None else "not put down")
                  + f", {end * 1e3:.2f} mm at the end; smallest normal force on a foot in contact while it was up "
                  f"{lifted['fz_up']:.2f} N, on any foot over the last 0.1 s {recent:.2f} N",
                  file=out, flush=True)
        if own:
            transport.close()
    return code


def _lift_stats(lifted, sim, q, flags) -> None:
    """After a period of sim --lift: the lifted foot's height, the normal forces on the feet in
    contact (world z: the contacts are world-aligned) while it is up and over the last 0.1 s."""
    i = lifted["i"]
    fz = sim.contact_forces()[:, 2] if len(sim.contacts) else np.zeros(0)
    low = float(fz.min()) if fz.size else -np.inf
    if not flags[i]:
        lifted["high"] = max(lifted["high"], float(sim.contact_offsets(q)[i, 2]))
        lifted["fz_up"] = min(lifted["fz_up"], low)
    lifted["recent"].append(low if all(flags) else -np.inf)


RESEND_S = 0.1  # the first state's resend period while the loop opens


def _open_loop(transport, latest, publish_state, stamp, timeout_s) -> float:
    """Publish the first state every RESEND_S until a command answers it (or timeout_s passes).
    If it was sent more than once, the answers to the copies still on their way are taken before
    the loop starts: each copy was sent before the first answer came, so its own answer comes
    within one more such wait (answer time - first send), plus RESEND_S. Returns when the last
    copy was sent."""
    before, first_sent = latest["n"], time.monotonic()
    sent_at, limit, resent = first_sent, first_sent + timeout_s, False
    while latest["n"] == before and time.monotonic() < limit:
        transport.spin_once(0.005)
        if latest["n"] == before and time.monotonic() >= sent_at + RESEND_S:
            sent_at, resent = time.monotonic(), True
            publish_state(stamp)
    if resent and latest["n"] != before:
        answered_at = latest["at"]
        until = min(answered_at + (answered_at - first_sent) + RESEND_S, limit)
        while time.monotonic() < until:
            transport.spin_once(0.005)
    return sent_at


def _total_mass(model) -> float:
    """The robot's mass: the base wrench of gravity at rest, level, over |g|."""
    h = sl.extended_inverse_dynamics(model, sl.State(model), np.zeros(model.nv))
    g = float(np.linalg.norm(model.gravity))
    return float(np.linalg.norm(h[:3])) / g if model.floating_base and g > 0 else 0.0
