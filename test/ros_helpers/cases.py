# SPDX-License-Identifier: BSD-3-Clause
"""Checks shared by the real-middleware tests (test_ros_dds.py, test_ros_rclpy.py,
test_ros_interop.py): each takes a started Harness, so the same check runs on every pairing of
node transport and peer."""
import zlib

import numpy as np

import sva_linearizer as sl
from fd_tools import e_max
from ros_helpers.oracle import pinocchio_oracle
from sva_linearizer.robots import robot_urdf_path

SEC = 1_000_000_000


def random_input(model, rng):
    s = rng.uniform(-1.0, 1.0, model.nj)
    r = rng.normal(size=model.nj)
    tau = rng.normal(size=model.nj) * 2.0
    quat = rng.normal(size=4)
    quat /= np.linalg.norm(quat)
    odom = (rng.normal(size=3), quat, rng.normal(size=6)) if model.floating_base else None
    return s, r, tau, odom


def shuffled(model, rng, s, r, tau):
    perm = rng.permutation(model.nj)
    names = [model.joint_names[i] for i in perm]
    return names, s[perm], r[perm], tau[perm]


def flat(model, s, r, odom):
    if model.floating_base:
        return np.concatenate([odom[0], odom[1], s]), np.concatenate([odom[2], r])
    return s, r


def check_A_B(h, robot, floating, n=3, t0=100, oracle=True, contacts=None, dt=0.0):
    """n shuffled, stamped states (with odometry for a floating base) -> the node's record: A, B and
    the drift nu_dot equal the library's and Pinocchio's (e_max <= 1e-8), its point is the state
    sent (in the model's joint order) and its stamp the input's. contacts: the node's (all active,
    rigid): the library's A, B and forces with them (no Pinocchio). dt: the node's `dt` parameter:
    Ad, Bd and the predicted next state equal the library's."""
    path = robot_urdf_path(robot)
    model = sl.load_urdf(path, floating_base=floating)
    rng = np.random.default_rng(zlib.crc32(robot.encode()))
    for k in range(n):
        s, r, tau, odom = random_input(model, rng)
        names, s_m, r_m, tau_m = shuffled(model, rng, s, r, tau)
        stamp = (t0 + k) * SEC + 12345

        def send():
            h.send(stamp, names, s_m, r_m, tau_m, odom)
        send()
        pair = h.wait_pair(stamp, resend=send)
        q, v = flat(model, s, r, odom)
        lin = sl.linearize(model, sl.State.from_vectors(model, q, v), tau, contacts=contacts)
        assert pair.A.shape == (2 * model.nv, 2 * model.nv) and pair.B.shape == (2 * model.nv, model.nj)
        assert e_max(pair.A, lin.A) <= 1e-8 and e_max(pair.B, lin.B) <= 1e-8
        assert e_max(pair.nu_dot, lin.nu_dot) <= 1e-8
        assert pair.joint_names == tuple(model.joint_names) and pair.stamp_ns == stamp
        np.testing.assert_allclose(pair.q, q, rtol=0, atol=1e-15)
        np.testing.assert_array_equal(pair.v, v)
        np.testing.assert_array_equal(pair.tau, tau)
        if contacts:
            assert e_max(pair.forces, lin.forces) <= 1e-8
        if dt:
            d = sl.linearize(model, sl.State.from_vectors(model, q, v), tau, contacts=contacts, dt=dt)
            nxt = sl.next_state(model, sl.State.from_vectors(model, q, v), d.nu_dot, dt)
            assert pair.dt == dt and e_max(pair.Ad, d.Ad) <= 1e-8 and e_max(pair.Bd, d.Bd) <= 1e-8
            np.testing.assert_allclose(pair.q_next, nxt.q, rtol=0, atol=1e-12)
            np.testing.assert_allclose(pair.v_next, nxt.v, rtol=1e-12, atol=1e-12)
        else:
            assert pair.dt == 0.0 and pair.Ad is None and pair.q_next is None
        if oracle and not contacts:
            o = pinocchio_oracle(path, model, q, v, tau)
            assert e_max(pair.A, o.A) <= 1e-8, f"A vs Pinocchio: e_max {e_max(pair.A, o.A):.2e}"
            assert e_max(pair.B, o.B) <= 1e-8, f"B vs Pinocchio: e_max {e_max(pair.B, o.B):.2e}"
            assert e_max(pair.nu_dot, o.nu_dot) <= 1e-8, f"nu_dot vs Pinocchio: {e_max(pair.nu_dot, o.nu_dot):.2e}"


def check_bad_inputs(h, robot="solo12"):
    """Every bad-input case: the node warns naming the problem, publishes nothing for the bad
    sample, keeps running and answers the next good one. The node must run with warn_period=0
    and max_odom_age=0.2."""
    model = sl.load_urdf(robot_urdf_path(robot), floating_base=True)
    rng = np.random.default_rng(7)
    bad_stamps = []
    t = [200 * SEC]

    def next_stamp():
        t[0] += SEC
        return t[0]

    def good():
        s, r, tau, odom = random_input(model, rng)
        names, s_m, r_m, tau_m = shuffled(model, rng, s, r, tau)
        stamp = next_stamp()

        def send():
            h.send(stamp, names, s_m, r_m, tau_m, odom)
        send()
        h.wait_pair(stamp, resend=send)

    def bad(pattern, mutate):
        s, r, tau, odom = random_input(model, rng)
        names, s_m, r_m, tau_m = shuffled(model, rng, s, r, tau)
        stamp = next_stamp()
        start = len(h.node.lines)

        def send():
            bad_stamps.append(mutate(stamp, list(names), s_m.copy(), r_m.copy(), tau_m.copy(), odom))
        send()
        h.wait_log(pattern, start, resend=send)
        good()

    def nan_position(st, n, s, r, tau, o):
        s[3] = np.nan
        h.send(st, n, s, r, tau, o)
        return st

    def inf_velocity(st, n, s, r, tau, o):
        r[0] = np.inf
        h.send(st, n, s, r, tau, o)
        return st

    def inf_effort(st, n, s, r, tau, o):
        tau[5] = -np.inf
        h.send(st, n, s, r, tau, o)
        return st

    def nan_odom(st, n, s, r, tau, o):
        h.send(st, n, s, r, tau, (o[0], o[1], np.r_[np.nan, o[2][1:]]))
        return st

    def unknown_joint(st, n, s, r, tau, o):
        h.send(st, n + ["foo"], np.r_[s, 0.0], np.r_[r, 0.0], np.r_[tau, 0.0], o)
        return st

    def missing_joint(st, n, s, r, tau, o):
        h.send(st, n[1:], s[1:], r[1:], tau[1:], o)
        return st

    def duplicate_joint(st, n, s, r, tau, o):
        h.send(st, n[:-1] + [n[0]], s, r, tau, o)
        return st

    def wrong_length(st, n, s, r, tau, o):
        h.send(st, n, s, r[:-1], tau, o)
        return st

    def non_unit_quaternion(st, n, s, r, tau, o):
        h.send(st, n, s, r, tau, (o[0], np.array([0.0, 0.0, 0.0, 1.3]), o[2]))
        return st

    def stale_odom(st, n, s, r, tau, o):
        h.send_odom(st, o)                      # valid odometry at st ...
        h.send(st + SEC // 2, n, s, r, tau)     # ... and a joint state 0.5 s later (max 0.2 s)
        return st + SEC // 2

    def out_of_order(st, n, s, r, tau, o):
        last = st - SEC                         # the last published stamp (good() before)
        h.send(last - 10_000_000, n, s, r, tau, o)
        return last - 10_000_000

    good()
    bad(r"joint_states: position of '\w+' is nan", nan_position)
    bad(r"joint_states: velocity of '\w+' is inf", inf_velocity)
    bad(r"joint_states: effort of '\w+' is -inf", inf_effort)
    bad(r"odom: twist has NaN", nan_odom)
    bad(r"joint_states: unknown joint 'foo'", unknown_joint)
    bad(r"joint_states: missing joint '\w+'", missing_joint)
    bad(r"joint_states: duplicate joint '\w+'", duplicate_joint)
    bad(r"joint_states: velocity has 11 entries for 12 names", wrong_length)
    bad(r"odom: quaternion norm 1.3 is not unit", non_unit_quaternion)
    bad(r"odom: stale \(age 0.5 s > max 0.2 s\)", stale_odom)
    bad(r"joint_states: stamp older than previous \(out of order", out_of_order)
    assert h.node.alive()
    published = {p.stamp_ns for p in h.pairs}
    assert not published & set(bad_stamps), "an A/B was published for a bad sample"


def check_description_topic(h, robot="ur5", t0=300):
    """The node was started without a model and with robot_description_topic=robot_description
    (relative, in the harness's namespace) after h published the URDF (transient local): it builds
    the model from it and its A equals the library's."""
    path = robot_urdf_path(robot)
    model = sl.load_urdf(path, floating_base=False)
    h.wait_log(r"model from topic: \d+ joints, fixed base", timeout=120.0)
    h.wait_ready()
    rng = np.random.default_rng(3)
    s, r, tau, _ = random_input(model, rng)

    def send():
        h.send(t0 * SEC, model.joint_names, s, r, tau)
    send()
    pair = h.wait_pair(t0 * SEC, resend=send)
    lin = sl.linearize(model, sl.State.from_vectors(model, s, r), tau)
    assert e_max(pair.A, lin.A) <= 1e-8 and e_max(pair.B, lin.B) <= 1e-8


FEET = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]


def check_standing_contacts(h, mode="rigid", t0=600):
    """The node runs solo12 with its four feet as world-aligned point contacts (config/solo12.yaml,
    warn_period=0) and contact_mode ``mode``. A standing solo12 (sim.standing_state) with all four
    feet active, then a moving state with three: A, B (and, rigid, forces, dforces_dz, dforces_dtau;
    forces: B's extra columns) equal sl.linearize's in this process (e_max <= 1e-12: the same code);
    the pair record names the active contacts. Then an unknown frame in the contact set: a warning
    naming it, nothing published for its stamp, and the next good sample is answered."""
    from sva_linearizer.ros.demo.sim import standing_state

    model = sl.load_urdf(robot_urdf_path("solo12"), floating_base=True)
    feet = [sl.Contact(f, reference="world_aligned") for f in FEET]
    q, v, tau, f_static = standing_state(model, feet)
    rng = np.random.default_rng(17)
    moving = (q + np.r_[np.zeros(7), rng.normal(size=model.nj) * 0.05], rng.normal(size=model.nv) * 0.3,
              tau + rng.normal(size=model.nj) * 0.1)
    cases = [(q, v, tau, FEET), (*moving, ["FL_FOOT", "HL_FOOT", "HR_FOOT"])]
    forces_in = {c.frame: f_static[3 * k:3 * k + 3] + rng.normal(size=3) for k, c in enumerate(feet)}
    for k, (q_k, v_k, tau_k, active) in enumerate(cases):
        stamp = (t0 + k) * SEC + 777
        names, s_m, r_m, tau_m = shuffled(model, rng, q_k[7:], v_k[6:], tau_k)
        odom = (q_k[0:3], q_k[3:7], v_k[0:6])

        def send():
            h.send_contacts(stamp, active)
            if mode == "forces":
                h.send_forces(stamp, [(f, forces_in[f]) for f in active])
            h.send(stamp, names, s_m, r_m, tau_m, odom)
        send()
        pair = h.wait_pair(stamp, resend=send)
        on = [c for c in feet if c.frame in active]
        state = sl.State.from_vectors(model, q_k, v_k)
        if mode == "rigid":
            lin = sl.linearize(model, state, tau_k, contacts=on)
            assert pair.B.shape == (2 * model.nv, model.nj)
            for got, ref in ((pair.forces, lin.forces), (pair.dforces_dz, lin.dforces_dz),
                             (pair.dforces_dtau, lin.dforces_dtau)):
                assert got.shape == ref.shape and e_max(got, ref) <= 1e-12
            if k == 0:    # standing still: the static forces, about m g / 4 up each
                assert e_max(pair.forces, f_static) <= 1e-9 and np.all(pair.forces[2::3] > 5.0)
        else:
            lin = sl.linearize(model, state, tau_k, forces=[(c, forces_in[c.frame]) for c in on])
            assert pair.B.shape == (2 * model.nv, model.nj + 3 * len(on)) and pair.forces is None
        assert e_max(pair.A, lin.A) <= 1e-12 and e_max(pair.B, lin.B) <= 1e-12
        assert pair.mode == mode and pair.contacts == tuple((f, 3) for f in FEET if f in active)

    # an unknown frame in the contact set: dropped with a warning; the joint state at its stamp
    # finds no contact set within max_contacts_age and is not answered
    stamp = (t0 + 5) * SEC
    start = len(h.node.lines)
    names, s_m, r_m, tau_m = shuffled(model, rng, q[7:], v[6:], tau)

    def send_bad():
        h.send_contacts(stamp, ["FL_FOOT", "LF_FOOT"])
        h.send(stamp, names, s_m, r_m, tau_m, (q[0:3], q[3:7], v[0:6]))
    send_bad()
    h.wait_log(r"contacts: unknown contact 'LF_FOOT' \(configured: FL_FOOT, FR_FOOT, HL_FOOT, HR_FOOT\)",
               start, resend=send_bad)
    h.wait_log(r"contacts: stale", start, resend=send_bad)
    stamp2 = stamp + SEC

    def send_good():
        h.send_contacts(stamp2, FEET)
        if mode == "forces":
            h.send_forces(stamp2, list(forces_in.items()))
        h.send(stamp2, names, s_m, r_m, tau_m, (q[0:3], q[3:7], v[0:6]))
    send_good()
    h.wait_pair(stamp2, resend=send_good)
    assert stamp not in {p.stamp_ns for p in h.pairs}, "an A/B was published for a bad contact set"


def check_position_only(h, robot, floating, t0=300):
    """JointState as ROS 2 defines it: ``velocity`` and ``effort`` may be empty. Position-only
    messages (twice), then one with velocity and no effort: A and B equal the library's at zero
    joint velocity / zero torque, and the node says once per field that it takes it as zero."""
    model = sl.load_urdf(robot_urdf_path(robot), floating_base=floating)
    rng = np.random.default_rng(zlib.crc32(b"position-only" + robot.encode()))
    start = len(h.node.lines)
    zero = np.zeros(model.nj)
    for k, with_velocity in enumerate((False, False, True)):
        s, r, tau, odom = random_input(model, rng)
        names, s_m, r_m, _ = shuffled(model, rng, s, r, tau)
        r_sent = r_m if with_velocity else []
        stamp = (t0 + k) * SEC + 777

        def send():
            h.send(stamp, names, s_m, r_sent, [], odom)
        send()
        pair = h.wait_pair(stamp, resend=send)
        q, v = flat(model, s, r if with_velocity else zero, odom)
        lin = sl.linearize(model, sl.State.from_vectors(model, q, v), zero)
        assert e_max(pair.A, lin.A) <= 1e-8 and e_max(pair.B, lin.B) <= 1e-8
    said = [ln for ln in h.node.lines[start:] if "is empty; taking it as zero" in ln]
    assert len(said) == 2 and any("velocity" in ln for ln in said) and any("effort" in ln for ln in said), said
