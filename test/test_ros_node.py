# SPDX-License-Identifier: BSD-3-Clause
"""The node's logic in-process (transport-independent), with an in-memory transport."""
import numpy as np
import pytest

pytest.importorskip("cyclonedds", reason="the in-memory transport's message classes come from the DDS "
                                        "transport's cyclonedds types (pip install 'sva_linearizer[dds]')")

import sva_linearizer as sl  # noqa: E402
from ros_helpers.fake_transport import FakeTransport  # noqa: E402
from sva_linearizer.ros.node.log import Throttle  # noqa: E402
from sva_linearizer.ros.wire.messages import joint_state_msg, msg_to_matrix, odometry_msg, stamp_to_ns  # noqa: E402
from sva_linearizer.ros.node.node import LinearizerNode, ModelLoadError  # noqa: E402
from sva_linearizer.ros.node.parameters import normalize_parameters  # noqa: E402
from sva_linearizer.ros.node.record import RecordDescription, decode_record  # noqa: E402

SEC = 1_000_000_000


class Robot:
    """A node on a fake transport plus helpers to feed it."""

    def __init__(self, params):
        self.T = FakeTransport()
        self.node = LinearizerNode(self.T, params)
        self.model = self.node.model
        self.rng = np.random.default_rng(0)
        self.t = 10 * SEC

    def state(self):
        m, rng = self.model, self.rng
        quat = rng.normal(size=4)
        return dict(s=rng.uniform(-1, 1, m.nj), r=rng.normal(size=m.nj), tau=rng.normal(size=m.nj),
                    p=rng.normal(size=3), quat=quat / np.linalg.norm(quat), twist=rng.normal(size=6))

    def send(self, x=None, stamp=None, names=None, odom=True, odom_stamp=None, **override):
        x = dict(x or self.state())
        x.update(override)
        if stamp is None:
            self.t += SEC // 100
            stamp = self.t
        self.t = max(self.t, stamp, odom_stamp or 0)
        T = self.T
        if odom and self.model.floating_base:
            T.deliver("odom", odometry_msg(T.types, stamp if odom_stamp is None else odom_stamp,
                                           x["p"], x["quat"], x["twist"]))
        names = list(self.model.joint_names) if names is None else names
        idx = [self.model.joint_names.index(n) if n in self.model.joint_names else 0 for n in names]
        tau = x["tau"][idx] if len(x["tau"]) else []
        r = x["r"][idx] if len(x["r"]) else []
        T.deliver("joint_states", joint_state_msg(T.types, stamp, names, x["s"][idx], r, tau))
        T.advance(0.01)      # time passes: a joint state waiting for its odometry goes on without it
        return x, stamp

    def expected(self, x):
        m = self.model
        if m.floating_base:
            q, v = np.r_[x["p"], x["quat"], x["s"]], np.r_[x["twist"], x["r"]]
        else:
            q, v = x["s"], x["r"]
        tau = x["tau"] if len(x["tau"]) else np.zeros(m.nj)
        return sl.linearize(m, sl.State.from_vectors(m, q, v), tau)

    def count(self):
        return self.T.count()

    def record(self, k=-1):
        """The k-th published record, decoded against the description published last."""
        desc = RecordDescription.from_json(self.T.published["linearization/description"][-1].data)
        return decode_record(self.T.published["linearization/record"][k].data, desc)

    def warnings(self):
        return self.T.logger.warnings()


@pytest.fixture
def solo():
    return Robot({"robot": "solo12", "warn_period": 0, "max_odom_age": 0.1})


def test_shuffled_joint_states_give_library_A_B_with_standard_layout():
    rb = Robot({"robot": "solo12", "warn_period": 0, "publish_point": True})
    x = rb.state()
    names = list(np.array(rb.model.joint_names)[rb.rng.permutation(rb.model.nj)])
    _, stamp = rb.send(x, names=names)
    lin = rb.expected(x)
    A_msg, B_msg = rb.T.published["linearization/A"][0], rb.T.published["linearization/B"][0]
    for msg, M in ((A_msg, lin.A), (B_msg, lin.B)):
        r, c = M.shape
        assert [(d.label, d.size, d.stride) for d in msg.layout.dim] == [("rows", r, r * c), ("cols", c, c)]
        assert msg.layout.data_offset == 0 and len(msg.data) == r * c
        np.testing.assert_array_equal(msg_to_matrix(msg), M)   # row-major, bit-exact
    # the record: the same A and B with the point they were computed at and the drift, bit-exact
    rec = rb.record()
    assert rec.stamp_ns == stamp and rec.seq == 1 and rec.joint_names == tuple(rb.model.joint_names)
    st = sl.State.from_vectors(rb.model, np.r_[x["p"], x["quat"], x["s"]], np.r_[x["twist"], x["r"]])
    for got, want in ((rec.q, st.q), (rec.v, st.v), (rec.tau, x["tau"]), (rec.nu_dot, lin.nu_dot),
                      (rec.A, lin.A), (rec.B, lin.B), (rec.f0, np.r_[st.v, lin.nu_dot])):
        np.testing.assert_array_equal(got, want)
    assert rec.Ad is None and rec.q_next is None and rec.forces is None and rec.dt == 0.0
    # the point for tools, with the input's stamp
    js, od = rb.T.published["linearization/point/joint_state"][0], rb.T.published["linearization/point/odom"][0]
    assert stamp_to_ns(js.header.stamp) == stamp == stamp_to_ns(od.header.stamp)
    assert list(js.name) == list(rb.model.joint_names)
    np.testing.assert_array_equal(np.r_[list(js.position), list(js.velocity), list(js.effort)],
                                  np.r_[x["s"], x["r"], x["tau"]])
    assert rb.T.qos["joint_states"][1]["depth"] == 100          # newest wins; the rest counted as superseded


def test_fixed_base_has_no_odom_and_empty_effort_means_zero_torque():
    rb = Robot({"robot": "ur5", "warn_period": 0})
    assert not rb.model.floating_base and "odom" not in rb.T.subs   # auto: ur5 is an arm
    x = rb.state()
    x["tau"] = np.array([])
    rb.send(x)
    np.testing.assert_array_equal(msg_to_matrix(rb.T.published["linearization/B"][0]), rb.expected(x).B)
    np.testing.assert_array_equal(msg_to_matrix(rb.T.published["linearization/A"][0]), rb.expected(x).A)


def test_position_only_joint_states_are_zero_velocity_and_torque_said_once():
    rb = Robot({"robot": "solo12", "warn_period": 0})
    for _ in range(3):
        x = rb.state()
        x["r"], x["tau"] = np.array([]), np.array([])
        rb.send(x)
        expected = rb.expected(dict(x, r=np.zeros(rb.model.nj)))
        np.testing.assert_array_equal(msg_to_matrix(rb.T.published["linearization/A"][-1]), expected.A)
        np.testing.assert_array_equal(msg_to_matrix(rb.T.published["linearization/B"][-1]), expected.B)
    assert rb.count() == 3 and rb.warnings() == []
    said = [t for lvl, t in rb.T.logger.lines if "is empty; taking it as zero" in t]
    assert len(said) == 2 and said[0].startswith("joint_states: velocity")
    assert said[1].startswith("joint_states: effort")


@pytest.mark.parametrize("empty", ["velocity", "effort"])
def test_empty_velocity_or_effort_dropped_when_not_allowed(empty):
    rb = Robot({"robot": "ur5", "warn_period": 0, "allow_empty_velocity_effort": False})
    x = rb.state()
    x["r" if empty == "velocity" else "tau"] = np.array([])
    rb.send(x)
    assert rb.count() == 0
    assert rb.warnings()[-1].startswith(f"joint_states: {empty} is empty (allow_empty_velocity_effort is false")
    rb.send()
    assert rb.count() == 1


def test_empty_position_is_dropped():
    rb = Robot({"robot": "ur5", "warn_period": 0})
    x = rb.state()
    rb.T.deliver("joint_states", joint_state_msg(rb.T.types, rb.t + SEC, rb.model.joint_names, [], x["r"], x["tau"]))
    assert rb.count() == 0 and "joint_states: position has 0 entries for 6 names" in rb.warnings()[-1]


def _bad_then_good(rb, pattern, send_bad):
    n, w = rb.count(), len(rb.warnings())
    send_bad()
    assert rb.count() == n, "published from bad data"
    new = rb.warnings()[w:]
    assert any(pattern in text for text in new), new
    x, _ = rb.send()
    assert rb.count() == n + 1
    np.testing.assert_array_equal(msg_to_matrix(rb.T.published["linearization/A"][-1]), rb.expected(x).A)


BAD_CASES = {
    "nan position": ("joint_states: position of 'FL_KFE' is nan",
                     lambda rb: rb.send(s=np.r_[0, 0, np.nan, np.zeros(9)])),
    "inf velocity": ("joint_states: velocity of 'FL_HAA' is inf",
                     lambda rb: rb.send(r=np.r_[np.inf, np.zeros(11)])),
    "nan effort": ("joint_states: effort of 'HR_KFE' is nan", lambda rb: rb.send(tau=np.r_[np.zeros(11), np.nan])),
    "nan odom position": ("odom: pose.position has NaN", lambda rb: rb.send(p=np.array([0, np.nan, 0]))),
    "inf odom twist": ("odom: twist has NaN or infinite", lambda rb: rb.send(twist=np.r_[np.zeros(5), np.inf])),
    "unknown joint": ("joint_states: unknown joint 'foo'",
                      lambda rb: rb.send(names=list(rb.model.joint_names) + ["foo"],
                                         s=np.zeros(12), r=np.zeros(12), tau=np.zeros(12))),
    "missing joint": ("joint_states: missing joint 'HR_KFE'",
                      lambda rb: rb.send(names=list(rb.model.joint_names)[:-1])),
    "duplicate joint": ("joint_states: duplicate joint 'FL_HAA'",
                        lambda rb: rb.send(names=list(rb.model.joint_names) + ["FL_HAA"])),
    "short velocity": ("joint_states: velocity has 11 entries for 12 names",
                       lambda rb: rb.T.deliver("joint_states", joint_state_msg(
                           rb.T.types, rb.t + SEC, rb.model.joint_names, np.zeros(12), np.zeros(11)))),
    "non-unit quaternion": ("odom: quaternion norm 1.3 is not unit",
                            lambda rb: rb.send(quat=np.array([0, 0, 0, 1.3]))),
    "stale odom": ("odom: stale (age 0.5 s > max 0.1 s)",
                   lambda rb: rb.send(stamp=rb.t + SEC, odom_stamp=rb.t + SEC // 2)),
    "odom ahead": ("odom: stamp 0.3 s ahead of the joint state",
                   lambda rb: rb.send(stamp=rb.t + SEC, odom_stamp=rb.t + SEC + 3 * SEC // 10)),
    "out of order": ("joint_states: stamp older than previous (out of order, 5 ms back)",
                     lambda rb: rb.send(stamp=rb.t - 5_000_000, odom=False)),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_input_publishes_nothing_and_node_recovers(solo, case):
    pattern, send_bad = BAD_CASES[case]
    solo.send()
    if "odom" in case or "quaternion" in case:
        # the previous sample's (valid) odometry must be too old to stand in for the bad one
        solo.t += SEC
    _bad_then_good(solo, pattern, lambda: send_bad(solo))


def test_bad_odometry_is_never_used_but_recent_valid_odometry_is(solo):
    """A dropped odometry sample leaves the nearest valid one (within max_odom_age) in use."""
    x0, stamp0 = solo.send()
    x = solo.state()
    bad = dict(x, quat=np.array([0.0, 0.0, 0.0, 2.0]))
    n = solo.count()
    solo.send(bad, stamp=stamp0 + 20_000_000)           # 20 ms later, odometry rejected
    assert "quaternion norm 2 is not unit" in solo.warnings()[-1]
    assert solo.count() == n + 1                         # joint state paired with x0's odometry
    expected = solo.expected(dict(x, p=x0["p"], quat=x0["quat"], twist=x0["twist"]))
    np.testing.assert_array_equal(msg_to_matrix(solo.T.published["linearization/A"][-1]), expected.A)


def _odom(rb, stamp, x):
    rb.T.deliver("odom", odometry_msg(rb.T.types, stamp, x["p"], x["quat"], x["twist"]))


def _joints(rb, stamp, x):
    rb.T.deliver("joint_states", joint_state_msg(rb.T.types, stamp, rb.model.joint_names, x["s"], x["r"], x["tau"]))


def test_a_joint_state_waits_for_the_odometry_of_its_own_stamp(solo):
    """Odometry after the joint state, inside odom_wait: the record takes it (not the older sample
    already buffered) and says so in odom_stamp; the count of exact pairs grows, not nearest's."""
    x0, stamp0 = solo.send()
    x = solo.state()
    stamp = stamp0 + 1_000_000                       # 1 ms later
    n = solo.count()
    _joints(solo, stamp, x)
    assert solo.count() == n                         # waits: the odometry of its stamp may come
    solo.T.advance(0.001)                            # within odom_wait (2 ms by default)
    assert solo.count() == n
    _odom(solo, stamp, x)
    assert solo.count() == n + 1
    rec = solo.record()
    assert rec.stamp_ns == stamp and rec.odom_stamp_ns == stamp
    np.testing.assert_array_equal(rec.A, solo.expected(x).A)
    np.testing.assert_array_equal(rec.q[:3], x["p"])
    assert solo.node.pairing == {"exact": 2, "nearest": 0}


def test_without_odometry_of_its_stamp_a_joint_state_takes_the_nearest_after_the_wait(solo):
    """No odometry of its own stamp within odom_wait: the nearest sample within max_odom_age, named
    in the record's odom_stamp; a later odometry sample ends the wait at once (odometry comes in
    stamp order: nothing nearer can follow)."""
    x0, stamp0 = solo.send()
    x = solo.state()
    n = solo.count()
    stamp = stamp0 + 3_000_000
    _joints(solo, stamp, x)
    solo.T.advance(0.0015)
    assert solo.count() == n
    solo.T.advance(0.002)                             # the wait is over: the nearest (stamp0's)
    assert solo.count() == n + 1
    rec = solo.record()
    assert rec.odom_stamp_ns == stamp0 and rec.stamp_ns == stamp
    np.testing.assert_array_equal(rec.A, solo.expected(dict(x, p=x0["p"], quat=x0["quat"], twist=x0["twist"])).A)
    # a later sample arrives before the wait is over: paired at once, with the nearer of the two
    x1 = solo.state()
    _joints(solo, stamp + 1_000_000, x)
    _odom(solo, stamp + 1_400_000, x1)
    assert solo.count() == n + 2 and solo.record().odom_stamp_ns == stamp + 1_400_000
    assert solo.node.pairing == {"exact": 1, "nearest": 2}
    # odom_wait 0: no wait at all
    rb = Robot({"robot": "solo12", "warn_period": 0, "odom_wait": 0.0})
    xa, sa = rb.send()
    _joints(rb, sa + 1_000_000, rb.state())
    assert rb.count() == 2 and rb.record().odom_stamp_ns == sa


def test_joint_states_waiting_in_a_1khz_stream_are_each_paired_exactly(solo):
    """A 1 kHz stream whose odometry comes 0-3 ms after each joint state (several joint states wait
    at once): every record is computed from the odometry of its own stamp, in stamp order."""
    solo.send()
    n = solo.count()
    start = solo.t + SEC
    xs = [solo.state() for _ in range(40)]
    lag = 3                                            # odometry of stamp k arrives with joint state k + 3
    for k in range(len(xs) + lag):
        if k < len(xs):
            _joints(solo, start + k * 1_000_000, xs[k])
        if k >= lag:
            _odom(solo, start + (k - lag) * 1_000_000, xs[k - lag])
        solo.T.advance(0.0005)
    recs = [solo.record(i) for i in range(n, solo.count())]
    assert [r.stamp_ns for r in recs] == [start + k * 1_000_000 for k in range(len(xs))]
    assert all(r.odom_stamp_ns == r.stamp_ns for r in recs)
    for r, x in zip(recs, xs):
        np.testing.assert_array_equal(r.q[:3], x["p"])
        np.testing.assert_allclose(r.q[3:7], x["quat"], rtol=0, atol=1e-15)


def test_joint_states_left_out_for_a_newer_one_are_counted_as_superseded(solo):
    """The transport hands the node the newest of the joint states waiting and reports the others:
    they are inputs that gave no record, counted under `superseded` in the summary and in
    /diagnostics (input rate included), with no warning."""
    solo.send()
    solo.T.superseded(3)
    solo.send()
    assert solo.node.rejected == {"superseded": 3} and "superseded 3" in solo.node.summary()
    n_warn = len(solo.warnings())
    solo.T.clock_ns += 10**9
    solo.node.publish_diagnostics()
    values = {kv.key: kv.value for kv in solo.T.published["/diagnostics"][-1].status[0].values}
    assert values["superseded since the last report"] == "3" and values["dropped by reason"] == "superseded 3"
    assert float(values["input rate (Hz)"]) == pytest.approx(5.0, rel=0.01)       # 2 taken + 3 left out in 1 s
    assert len(solo.warnings()) == n_warn


def test_odom_out_of_order_is_dropped(solo):
    _, stamp = solo.send()
    n = solo.count()
    x = solo.state()
    solo.T.deliver("odom", odometry_msg(solo.T.types, stamp - 1_000_000, x["p"], x["quat"], x["twist"]))
    assert "odom: stamp older than previous (out of order" in solo.warnings()[-1]
    assert solo.count() == n


def test_no_odom_yet_and_no_model_yet():
    rb = Robot({"robot": "solo12", "warn_period": 0})
    rb.send(odom=False)
    assert rb.count() == 0 and "odom: no valid odometry yet" in rb.warnings()[-1]
    T = FakeTransport()
    node = LinearizerNode(T, {"warn_period": 0, "floating_base": False})
    assert node.model is None and "robot_description" in T.subs
    assert T.qos["robot_description"][1] == {"reliable": True, "transient_local": True, "depth": 1}
    T.deliver("joint_states", joint_state_msg(T.types, SEC, ["a"], [0.0], [0.0]))
    assert T.count() == 0 and "no robot model yet" in T.logger.warnings()[-1]


def test_a_description_rooted_at_world_is_a_fixed_base_unless_floating_base_says_otherwise():
    """ur5_robot.urdf (root link `world`, as MoveIt and Gazebo descriptions write arms) given as
    robot_description with no floating_base: a fixed base, no odometry wanted, and the log says
    which base and why; floating_base: true still floats it. From the topic: the same rule."""
    from sva_linearizer.robots import robot_urdf_path

    xml = robot_urdf_path("ur5").read_text()
    rb = Robot({"robot_description": xml, "warn_period": 0})
    assert rb.model.floating_base is False and rb.node.params["floating_base"] is False
    assert "odom" not in rb.T.subs
    info = [t for lvl, t in rb.T.logger.lines if lvl == "INFO" and t.startswith("model from")]
    assert "fixed base (the URDF's root link is 'world': the robot is fixed to the world; floating_base: " \
           "true to change it)" in info[-1]
    rb.send()
    assert rb.count() == 1 and rb.record().q.shape == (6,)
    assert not any("odometry" in w for w in rb.warnings())
    fl = Robot({"robot_description": xml, "warn_period": 0, "floating_base": True})
    assert fl.model.floating_base and "floating base (floating_base: true)" in fl.T.logger.lines[-1][1] + " ".join(
        t for _, t in fl.T.logger.lines)
    T = FakeTransport()
    node = LinearizerNode(T, {"warn_period": 0})
    assert node.params["floating_base"] is None and "odom" in T.subs      # undecided until the model comes
    T.deliver("robot_description", T.types.String(data=xml))
    assert node.model.floating_base is False and node.params["floating_base"] is False
    T.deliver("joint_states", joint_state_msg(T.types, SEC, node.model.joint_names, np.zeros(6), np.zeros(6)))
    assert T.count() == 1


def test_robot_description_topic_malformed_then_good_then_malformed():
    from sva_linearizer.robots import robot_urdf_path

    T = FakeTransport()
    node = LinearizerNode(T, {"warn_period": 0, "floating_base": False})
    for bad in ("", "<robot name='x'><link name='a'/>", "<robot name='x'><joint name='j' type='revolute'>"
                "<parent link='nope'/><child link='b'/></joint></robot>"):
        T.deliver("robot_description", T.types.String(data=bad))
        assert node.model is None
        assert "robot_description (topic): cannot build a model" in T.logger.warnings()[-1]
    T.deliver("robot_description", T.types.String(data=robot_urdf_path("ur5").read_text()))
    assert node.model is not None and node.model.nj == 6
    model = node.model
    T.deliver("robot_description", T.types.String(data="garbage"))
    assert node.model is model                                    # the good model stays
    rng = np.random.default_rng(0)
    T.deliver("joint_states", joint_state_msg(T.types, SEC, model.joint_names, rng.normal(size=6),
                                              rng.normal(size=6)))
    assert T.count() == 1


def test_a_model_named_by_a_parameter_must_load():
    """No waiting on the topic for a model the parameters name: the node does not start."""
    for params, needle in (({"robot_description": "<robot"}, "robot_description (parameter): cannot build a model"),
                           ({"urdf_path": "/no/such.urdf"}, "urdf_path: cannot build a model"),
                           ({"robot": "bogus"}, "robot: cannot build a model (ValueError: unknown robot 'bogus'")):
        T = FakeTransport()
        with pytest.raises(ModelLoadError) as e:
            LinearizerNode(T, dict(params, warn_period=0))
        assert str(e.value).startswith(needle) and "\n" not in str(e.value)
        assert T.subs == {} and T.published == {}


def test_zero_stamp_uses_receive_time_and_clock_reset_is_accepted():
    rb = Robot({"robot": "ur5", "warn_period": 0})
    rb.T.clock_ns = 123 * SEC
    rb.send(stamp=0)
    assert rb.record().stamp_ns == 123 * SEC
    rb.send(stamp=50 * SEC)              # 73 s back: a clock reset (sim restart), not "out of order"
    assert rb.count() == 2 and "treating it as a clock reset" in rb.warnings()[-1]


def test_max_rate_limits_by_stamp():
    rb = Robot({"robot": "ur5", "warn_period": 0, "max_rate": 100.0})
    for k in range(50):
        rb.send(stamp=SEC + k * 1_000_000)      # 1 kHz input, 50 ms
    assert rb.count() == 5 and rb.node.rejected["rate_limited"] == 45


def test_plain_kernels_take_a_bounded_share_of_a_core(monkeypatch):
    """While the kernels compile in the background (plain Python), the node skips the joint states
    that come before its last linearization's time / PLAIN_DUTY has passed; compiled, it takes
    each. A clock that advances 10 ms at each reading makes each linearization take 10 ms."""
    import types

    import sva_linearizer.ros.node.node as node_module

    now = [100.0]

    def perf_counter():
        now[0] += 0.01
        return now[0]

    rb = Robot({"robot": "ur5", "warn_period": 0})
    monkeypatch.setattr(node_module, "time", types.SimpleNamespace(perf_counter=perf_counter))
    monkeypatch.setattr(node_module, "group_state", lambda group: "compiling")
    for _ in range(20):
        rb.send()
    computed = rb.count()
    assert 20 * node_module.PLAIN_DUTY <= computed <= 20 * 0.4
    assert rb.node.rejected["while_compiling"] == 20 - computed
    monkeypatch.setattr(node_module, "group_state", lambda group: "ready")
    for _ in range(10):
        rb.send()
    assert rb.count() >= computed + 9      # at most one skipped: the last plain linearization's window


def test_ignore_unknown_joints_parameter():
    rb = Robot({"robot": "ur5", "warn_period": 0, "ignore_unknown_joints": True})
    x = rb.state()
    names = list(rb.model.joint_names) + ["gripper"]
    T = rb.T
    T.deliver("joint_states", joint_state_msg(T.types, SEC, names, np.r_[x["s"], 9.0], np.r_[x["r"], 9.0],
                                              np.r_[x["tau"], 9.0]))
    assert rb.count() == 1
    np.testing.assert_array_equal(msg_to_matrix(T.published["linearization/A"][0]), rb.expected(x).A)


def test_throttled_warnings_count_suppressed():
    out, now = [], [0.0]
    th = Throttle(out.append, 2.0, clock=lambda: now[0])
    for k in range(5):
        th("k", "odom: stale")
        now[0] += 0.1
    th("other", "joint_states: unknown joint 'foo'")
    now[0] = 3.0
    th("k", "odom: stale")
    assert out == ["odom: stale", "joint_states: unknown joint 'foo'", "odom: stale (4 more like this suppressed)"]


def test_parameters_are_checked():
    with pytest.raises(ValueError, match="unknown parameter"):
        normalize_parameters({"max_rat": 1.0})
    with pytest.raises(ValueError, match="max_odom_age"):
        normalize_parameters({"max_odom_age": -1})
    with pytest.raises(ValueError, match="gravity"):
        normalize_parameters({"gravity": [0, 0]})
    p = normalize_parameters({"robot": "panda", "gravity": [0, 0, -9], "floating_base": "auto"})
    assert p["floating_base"] is False and p["gravity"] == [0.0, 0.0, -9.0]
    assert normalize_parameters({"robot": "anymal_c"})["floating_base"] is True
    assert normalize_parameters({"floating_base": "false"})["floating_base"] is False


def test_discrete_record_with_the_predicted_state_and_omitted_sections():
    """dt > 0: the record holds Ad, Bd of the same call and the state next_state predicts; sections
    named in record_omit are left out (offset and length 0), the others decode as before."""
    rb = Robot({"robot": "solo12", "warn_period": 0, "dt": 0.005})
    x, stamp = rb.send()
    st = sl.State.from_vectors(rb.model, np.r_[x["p"], x["quat"], x["s"]], np.r_[x["twist"], x["r"]])
    lin = sl.linearize(rb.model, st, x["tau"], dt=0.005)
    nxt = sl.next_state(rb.model, st, lin.nu_dot, 0.005)
    rec = rb.record()
    assert rec.dt == 0.005 and rec.description.dt == 0.005
    for got, want in ((rec.A, lin.A), (rec.Ad, lin.Ad), (rec.Bd, lin.Bd), (rec.q_next, nxt.q), (rec.v_next, nxt.v)):
        np.testing.assert_array_equal(got, want)
    lean = Robot({"robot": "solo12", "warn_period": 0, "dt": 0.005, "record_omit": ["Ad", "Bd", "A"],
                  "publish_point": False, "publish_a_b": False})
    lean.send(x)
    rec = lean.record()
    assert rec.Ad is None and rec.Bd is None and rec.A is None and rec.description.omitted == ("A", "Ad", "Bd")
    np.testing.assert_array_equal(rec.B, lin.B)
    np.testing.assert_array_equal(rec.q_next, nxt.q)
    assert not any(t.startswith(("linearization/point", "linearization/A", "linearization/B"))
                   for t in lean.T.qos)
    with pytest.raises(ValueError, match="record_omit: unknown section"):
        normalize_parameters({"record_omit": ["C"]})


def test_the_record_keeps_the_quaternion_hemisphere_of_its_point():
    """Odometry with w < 0: the record's q keeps the quaternion as sent, and q_next is in its
    hemisphere (q . q_next >= 0), so q and q_next difference component by component."""
    rb = Robot({"robot": "solo12", "warn_period": 0, "dt": 0.01})
    for k in range(10):
        x = rb.state()
        x["quat"] = -x["quat"] if x["quat"][3] > 0 else x["quat"]      # w < 0
        rb.send(x)
        rec = rb.record()
        assert rec.q[6] < 0 and rec.q[3:7] @ rec.q_next[3:7] > 0.0
        np.testing.assert_allclose(rec.q[3:7], x["quat"], rtol=0, atol=1e-15)


def test_record_decoding_refuses_what_does_not_fit():
    """A record is decoded only against its own description and only when its table of contents
    fits its sizes: a truncated record, another description's or a section of the wrong size is a
    ValueError, never a silently wrong matrix."""
    rb = Robot({"robot": "ur5", "warn_period": 0})
    rb.send()
    desc = RecordDescription.from_json(rb.T.published["linearization/description"][-1].data)
    data = np.asarray(rb.T.published["linearization/record"][-1].data)
    assert decode_record(data, desc).seq == 1
    with pytest.raises(ValueError, match="does not fit"):
        decode_record(data[:-1], desc)
    other = data.copy()
    other[1] += 1
    with pytest.raises(ValueError, match="description"):
        decode_record(other, desc)
    bad = data.copy()
    k = 11 + 2 * 6                             # section A's (offset, length)
    bad[k + 1] -= 1
    with pytest.raises(ValueError, match="section A"):
        decode_record(bad, desc)


def test_floating_base_false_param_on_legged_robot():
    rb = Robot({"robot": "solo12", "floating_base": False, "warn_period": 0})
    assert not rb.model.floating_base and "odom" not in rb.T.subs
    x = rb.state()
    rb.send(x)
    assert rb.count() == 1 and rb.T.published["linearization/A"][0].layout.dim[0].size == 24


# ----------------------------------------------------------------------------------------- contacts
FEET = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]


def _feet(reference="world_aligned", kind="point"):
    return [sl.Contact(f, kind=kind, reference=reference) for f in FEET]


def _standing(rb, contacts):
    from sva_linearizer.ros.demo.sim import standing_state

    q, v, tau, f = standing_state(rb.model, contacts)
    return dict(p=q[0:3], quat=q[3:7], twist=v[0:6], s=q[7:], r=v[6:], tau=tau), f


def _lin(rb, x, **kw):
    m = rb.model
    return sl.linearize(m, sl.State.from_vectors(m, np.r_[x["p"], x["quat"], x["s"]], np.r_[x["twist"], x["r"]]),
                        x["tau"], **kw)


def _lanes_equal(got, want):
    """The node computes its records through linearize_horizon (its lockstep lanes, whose contact
    kernels round differently from linearize's): the library's numbers to rounding. Against the
    bag tool, which computes through the same call, they are equal bit for bit (test_bag.py)."""
    want = np.asarray(want)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10 * max(1.0, float(np.abs(want).max(initial=0.0))))


def _last(rb, topic):
    return msg_to_matrix(rb.T.published[topic][-1])


def _contacts(rb, stamp, frames, flags=None):
    from sva_linearizer.ros.wire.messages import contacts_msg

    rb.T.deliver("contacts", contacts_msg(rb.T.types, stamp, frames, flags))


def _wrench(rb, stamp, frame, f):
    from sva_linearizer.ros.wire.messages import wrench_msg

    rb.T.deliver("contact_forces", wrench_msg(rb.T.types, stamp, frame, f[:3], f[3:6] if len(f) > 3 else (0, 0, 0)))


@pytest.fixture
def standing():
    return Robot({"robot": "solo12", "warn_period": 0, "contact_frames": FEET,
                  "contact_references": "world_aligned"})


def test_rigid_contacts_default_active_publish_library_A_B_forces(standing):
    rb = standing
    assert "contacts" in rb.T.subs and "contact_forces" not in rb.T.subs
    x, f_static = _standing(rb, _feet())
    _, stamp = rb.send(x)
    lin = _lin(rb, x, contacts=_feet())
    _lanes_equal(_last(rb, "linearization/A"), lin.A)
    _lanes_equal(_last(rb, "linearization/B"), lin.B)
    rec = rb.record()
    _lanes_equal(rec.forces, lin.forces)
    _lanes_equal(rec.dforces_dz, lin.dforces_dz)
    _lanes_equal(rec.dforces_dtau, lin.dforces_dtau)
    _lanes_equal(rec.nu_dot, lin.nu_dot)
    np.testing.assert_allclose(lin.forces, f_static, atol=1e-9)
    assert np.allclose(lin.forces[2::3], lin.forces[2::3].mean(), rtol=0.05) and lin.forces[2] > 5.0  # ~ m g / 4
    assert rec.mode == "rigid" and rec.contacts == tuple((f, 3) for f in FEET) and rec.stamp_ns == stamp
    np.testing.assert_array_equal(rec.active, [1.0] * 4)
    assert [c["frame"] for c in rec.description.contacts] == FEET


def test_contact_set_selects_active_contacts_by_stamp(standing):
    rb = standing
    x, _ = _standing(rb, _feet())
    stamp = rb.t + SEC
    _contacts(rb, stamp, ["HR_FOOT", "FL_FOOT"])                      # any order: two feet
    rb.send(x, stamp=stamp)
    two = [c for c in _feet() if c.frame in ("FL_FOOT", "HR_FOOT")]  # configuration order
    _lanes_equal(_last(rb, "linearization/A"), _lin(rb, x, contacts=two).A)
    assert rb.record().contacts == (("FL_FOOT", 3), ("HR_FOOT", 3))
    # flags: 1.0 active, 0.0 inactive; nearest set within max_contacts_age (here 20 ms before)
    _contacts(rb, stamp + SEC, FEET, [1.0, 0.0, 1.0, 1.0])
    rb.send(x, stamp=stamp + SEC + 20_000_000)
    three = [c for c in _feet() if c.frame != "FR_FOOT"]
    _lanes_equal(_last(rb, "linearization/B"), _lin(rb, x, contacts=three).B)
    # none active: free flight, empty forces
    _contacts(rb, stamp + 2 * SEC, [])
    rb.send(x, stamp=stamp + 2 * SEC)
    _lanes_equal(_last(rb, "linearization/A"), _lin(rb, x).A)
    rec = rb.record()
    assert rec.contacts == () and rec.m == 0 and rec.forces is None and rec.dforces_dz is None
    np.testing.assert_array_equal(rec.active, [0.0] * 4)
    # once a contact set was seen, a joint state needs one within max_contacts_age
    n = rb.count()
    rb.send(x, stamp=stamp + 3 * SEC)
    assert rb.count() == n and "contacts: stale (age 1 s > max 0.1 s)" in rb.warnings()[-1]


def test_default_inactive_means_free_flight_until_a_contact_set():
    rb = Robot({"robot": "solo12", "warn_period": 0, "contact_frames": FEET, "contacts_default_active": False})
    x, _ = _standing(rb, _feet())
    rb.send(x)
    _lanes_equal(_last(rb, "linearization/A"), _lin(rb, x).A)
    _contacts(rb, rb.t + SEC, FEET)
    rb.send(x, stamp=rb.t + SEC)
    _lanes_equal(_last(rb, "linearization/A"), _lin(rb, x, contacts=_feet("local")).A)


BAD_CONTACTS = {
    "unknown contact": ("contacts: unknown contact 'foo' (configured: FL_FOOT, FR_FOOT, HL_FOOT, HR_FOOT)",
                        lambda rb, st: _contacts(rb, st, ["FL_FOOT", "foo"])),
    "duplicate contact": ("contacts: duplicate contact 'FL_FOOT'",
                          lambda rb, st: _contacts(rb, st, ["FL_FOOT", "FL_FOOT"])),
    "flag count": ("contacts: position has 1 entries for 2 names",
                   lambda rb, st: _contacts(rb, st, ["FL_FOOT", "FR_FOOT"], [1.0])),
    "flag value": ("contacts: position of 'FR_FOOT' is 0.5 (1.0: active, 0.0: inactive)",
                   lambda rb, st: _contacts(rb, st, ["FL_FOOT", "FR_FOOT"], [1.0, 0.5])),
    "out of order": ("contacts: stamp older than previous (out of order",
                     lambda rb, st: _contacts(rb, st - SEC - 1_000_000, FEET)),
}


@pytest.mark.parametrize("case", sorted(BAD_CONTACTS))
def test_bad_contact_set_publishes_nothing_and_node_recovers(standing, case):
    rb = standing
    pattern, send_bad = BAD_CONTACTS[case]
    x, _ = _standing(rb, _feet())
    _contacts(rb, rb.t + SEC, FEET)
    rb.send(x, stamp=rb.t + SEC)
    n, w = rb.count(), len(rb.warnings())
    stamp = rb.t + SEC                      # the good set above is 1 s old: too old to stand in
    send_bad(rb, stamp)
    rb.send(x, stamp=stamp)
    assert rb.count() == n, "published from a bad contact set"
    assert any(pattern in t for t in rb.warnings()[w:]), rb.warnings()[w:]
    _contacts(rb, stamp + SEC, FEET)
    rb.send(x, stamp=stamp + SEC)
    assert rb.count() == n + 1


def test_forces_as_inputs_give_B_with_force_columns():
    rb = Robot({"robot": "solo12", "warn_period": 0, "contact_frames": FEET, "contact_mode": "forces",
                "contact_kinds": ["point", "point", "6d", "point"],
                "contact_references": ["local", "world_aligned", "world_aligned", "local"]})
    assert "contact_forces" in rb.T.subs and "linearization/forces" not in rb.T.qos
    cs = [sl.Contact(f, kind=k, reference=r) for f, k, r in
          zip(FEET, ["point", "point", "6d", "point"], ["local", "world_aligned", "world_aligned", "local"])]
    x = rb.state()
    stamp = rb.t + SEC
    fs = [rb.rng.normal(size=c.dim) * 5 for c in cs]
    n = rb.count()
    rb.send(x, stamp=stamp)                                          # no forces yet
    assert rb.count() == n and "contact_forces: no force for contact 'FL_FOOT' yet" in rb.warnings()[-1]
    for c, f in zip(cs, fs):
        _wrench(rb, stamp - 5_000_000, c.frame, np.r_[f, [9.0, 9.0, 9.0]][:6])  # a point ignores torque
    rb.send(x, stamp=stamp + SEC // 100)
    lin = _lin(rb, x, forces=list(zip(cs, fs)))
    B = _last(rb, "linearization/B")
    assert B.shape == (36, 12 + 15)
    _lanes_equal(B, lin.B)
    _lanes_equal(_last(rb, "linearization/A"), lin.A)
    rec = rb.record()
    assert rec.mode == "forces" and rec.contacts == (("FL_FOOT", 3), ("FR_FOOT", 3), ("HL_FOOT", 6), ("HR_FOOT", 3))
    assert rec.forces is None and rec.nw == 12 + 15 and rec.m == 0       # m: constraint rows (none)
    np.testing.assert_array_equal(rec.input_forces, np.concatenate(fs))
    _lanes_equal(rec.B, lin.B)
    # bad force samples are dropped; a stale force stops the publication
    w = len(rb.warnings())
    _wrench(rb, stamp + SEC, "foo", [0, 0, 1])
    _wrench(rb, stamp + SEC, "FL_FOOT", [0, np.nan, 1])
    assert "contact_forces: unknown contact 'foo'" in rb.warnings()[w]
    assert "contact_forces: wrench of 'FL_FOOT' has NaN" in rb.warnings()[w + 1]
    n = rb.count()
    rb.send(x, stamp=stamp + SEC)
    assert rb.count() == n and "contact_forces: stale" in rb.warnings()[-1]


def test_contact_parameters_are_checked():
    base = {"contact_frames": FEET}
    for extra, pattern in (({"contact_kinds": ["point", "3d"]}, "contact_kinds: 2 values for 4 contact_frames"),
                           ({"contact_kinds": "3d"}, "contact_kinds: '3d' for contact 'FL_FOOT'"),
                           ({"contact_references": "world"}, "contact_references: 'world'"),
                           ({"contact_offsets": [0.0, 0.0]}, "contact_offsets: 2 values"),
                           ({"contact_baumgarte_kp": [1.0, 2.0]}, "contact_baumgarte_kp: 2 values"),
                           ({"contact_baumgarte_kd": ["x"]}, "contact_baumgarte_kd: expected a list of finite"),
                           ({"contact_mode": "soft"}, "contact_mode: expected rigid or forces"),
                           ({"contact_frames": FEET + ["FL_FOOT"]}, "'FL_FOOT' is listed twice"),
                           ({"contact_frames": ["a b"]}, "not a frame name")):
        with pytest.raises(ValueError, match=pattern.replace("(", r"\(")):
            normalize_parameters({**base, **extra})
    from sva_linearizer.ros.node.parameters import contact_specs

    cs = contact_specs(normalize_parameters({**base, "contact_offsets": [0.0, 0.0, 0.01],
                                             "contact_baumgarte_kp": 10.0, "contact_baumgarte_kd": [1, 2, 3, 4]}))
    assert [c.baumgarte for c in cs] == [(10.0, 1.0), (10.0, 2.0), (10.0, 3.0), (10.0, 4.0)]
    assert all(tuple(c.offset) == (0.0, 0.0, 0.01) and c.kind == "point" and c.reference == "local" for c in cs)
    # a frame the model lacks: the model is refused (named), the node does not start
    with pytest.raises(ModelLoadError, match="contact_frames: 'LF_FOOT' not a frame \\(link\\) of this model"):
        Robot({"robot": "solo12", "warn_period": 0, "contact_frames": ["FL_FOOT", "LF_FOOT"]})


def test_odometry_of_another_frame_is_dropped_naming_both():
    """Odometry's twist must be the base's in the base's axes: a child_frame_id other than the base
    frame (the URDF's root link, or base_frame) is dropped with a warning naming both; with
    odom_frame set, a header.frame_id other than it too. Nothing is published from them."""
    rb = Robot({"robot": "solo12", "warn_period": 0})
    T = rb.T
    x = rb.state()
    stamp = rb.t + SEC
    T.deliver("odom", odometry_msg(T.types, stamp, x["p"], x["quat"], x["twist"], child_frame_id="imu_link"))
    assert "odom: child_frame_id 'imu_link' is not the base frame 'base_link'" in rb.warnings()[-1]
    rb.send(x, stamp=stamp, odom=False)
    assert rb.count() == 0 and "odom: no valid odometry yet" in rb.warnings()[-1]
    rb.send(x, stamp=stamp + SEC)                                   # child base_link: accepted
    assert rb.count() == 1
    imu = Robot({"robot": "solo12", "warn_period": 0, "base_frame": "imu_link", "odom_frame": "odom"})
    T = imu.T
    T.deliver("odom", odometry_msg(T.types, stamp, x["p"], x["quat"], x["twist"], frame_id="map",
                                   child_frame_id="imu_link"))
    assert "odom: header.frame_id 'map' is not odom_frame 'odom'" in imu.warnings()[-1]
    T.deliver("odom", odometry_msg(T.types, stamp, x["p"], x["quat"], x["twist"], child_frame_id="imu_link"))
    imu.send(x, stamp=stamp, odom=False)
    assert imu.count() == 1


def test_diagnostics_report_rates_latency_drops_and_kernels():
    """/diagnostics about once a second: ERROR without a model; OK with the rates and latency of the
    records published since the last report; WARN, with the reason, when inputs were dropped."""
    T = FakeTransport()
    LinearizerNode(T, {"warn_period": 0})                    # no model: waits for the description topic
    (period, report), = T.timers
    assert period == 1.0 and T.qos["/diagnostics"][0] == "diagnostic_msgs/msg/DiagnosticArray"
    report()
    (st,) = T.published["/diagnostics"][-1].status
    assert st.level == 2 and st.message == "no robot model" and st.name == "/sva_linearizer: linearizer"
    rb = Robot({"robot": "ur5", "warn_period": 0})
    (_, report), = rb.T.timers
    rb.T.clock_ns = 20 * SEC
    report()                                                  # starts a window at 20 s
    for k in range(5):
        rb.T.clock_ns = 20 * SEC + (k + 1) * SEC // 10
        rb.send(stamp=rb.T.clock_ns - 2_000_000)              # 2 ms old when it arrives
    rb.T.clock_ns = 21 * SEC
    report()
    (st,) = rb.T.published["/diagnostics"][-1].status
    values = {kv.key: kv.value for kv in st.values}
    assert st.level == 0 and st.message == "ok", (st.message, values)
    assert values["input rate (Hz)"] == "5.0" and values["output rate (Hz)"] == "5.0"
    assert values["latency p50 (ms)"] == "2.00" and values["records published"] == "5"
    assert values["model"].startswith("ur5: 6 joints, fixed base") and values["transport"] == "fake"
    assert values["kernels"] in ("core compiled", "core compiling", "core plain")
    x = rb.state()
    x["s"] = x["s"].copy()
    x["s"][0] = np.nan
    rb.send(x)
    rb.T.clock_ns = 22 * SEC
    report()
    (st,) = rb.T.published["/diagnostics"][-1].status
    values = {kv.key: kv.value for kv in st.values}
    assert st.level == 1 and "NaN" in st.message and values["dropped since the last report"] == "1"
    assert "joint_states_values 1" in values["dropped by reason"]


def test_loops_from_parameters_enter_the_record():
    """loop_frames_a/_b (and the per-loop arrays): the loops are constraints beside the active
    contacts, always active; the record's forces are the contacts' then the loops', A, B and the
    forces those of sl.linearize with the same constraints, and the description lists the loops."""
    rb = Robot({"robot": "solo12", "warn_period": 0, "contact_frames": ["FR_FOOT"],
                "contact_references": "world_aligned", "loop_frames_a": ["FL_FOOT"],
                "loop_frames_b": ["HL_FOOT"], "loop_kinds": ["point"],
                "loop_baumgarte_kd": [2.0], "dt": 0.01})
    x, stamp = rb.send()
    st = sl.State.from_vectors(rb.model, np.r_[x["p"], x["quat"], x["s"]], np.r_[x["twist"], x["r"]])
    cons = [sl.Contact("FR_FOOT", reference="world_aligned"), sl.Loop("FL_FOOT", "HL_FOOT", baumgarte=(0.0, 2.0))]
    lin = sl.linearize(rb.model, st, x["tau"], contacts=cons, dt=0.01)
    rec = rb.record()
    assert rec.m == 6 and rec.contacts == (("FR_FOOT", 3),) and rec.loops == (("FL_FOOT", "HL_FOOT", 3),)
    for got, want in ((rec.A, lin.A), (rec.B, lin.B), (rec.forces, lin.forces), (rec.dforces_dz, lin.dforces_dz),
                      (rec.Ad, lin.Ad), (rec.nu_dot, lin.nu_dot)):
        _lanes_equal(got, want)
    with pytest.raises(ValueError, match="loop_frames_b: 0 frames for 1 loop_frames_a"):
        normalize_parameters({"loop_frames_a": ["a"]})
    with pytest.raises(ValueError, match="loop 1 .*kind must be one of"):
        normalize_parameters({"loop_frames_a": ["a"], "loop_frames_b": ["b"], "loop_kinds": ["hinge"]})
    with pytest.raises(ModelLoadError, match="'NO_SUCH' not a frame"):
        LinearizerNode(FakeTransport(), {"robot": "solo12", "loop_frames_a": ["NO_SUCH"], "loop_frames_b": ["FL_FOOT"]})


def test_mimic_parameter_couples_the_joints():
    """mimic: true: the model's joints are panda's independent ones (the mimic finger leaves the
    state); a joint state that also names the mimic joint (as robot_state_publisher's inputs do)
    is accepted, the record's A equals sl.linearize on the coupled model."""
    rb = Robot({"robot": "panda", "warn_period": 0, "mimic": True})
    assert "panda_finger_joint2" not in rb.model.joint_names and "panda_finger_joint1" in rb.model.joint_names
    x = rb.state()
    names = list(rb.model.joint_names) + ["panda_finger_joint2"]
    T = rb.T
    s = np.r_[x["s"], 0.01]
    T.deliver("joint_states", joint_state_msg(T.types, rb.t + SEC, names, s, np.r_[x["r"], 0.0],
                                              np.r_[x["tau"], 0.0]))
    assert rb.count() == 1, rb.warnings()
    np.testing.assert_array_equal(rb.record().A, rb.expected(x).A)
    assert rb.record().description.joint_names == tuple(rb.model.joint_names)
    with pytest.raises(ValueError, match="mimic: a model with coupled mimic joints takes no contacts or loops"):
        normalize_parameters({"mimic": True, "contact_frames": ["a"]})
