# SPDX-License-Identifier: BSD-3-Clause
"""The node's answers to a planner's horizon requests, in-process (the wire format of
sva_linearizer.ros.node.horizon, the worker of horizon_service): each knot's record equals what
linearize gives at that knot with the contacts the request activates there; a bad request gets an
answer with its id naming the problem, never knots; the per-state stream goes on."""
import time

import numpy as np
import pytest

pytest.importorskip("cyclonedds", reason="the in-memory transport's message classes come from the DDS "
                                        "transport's cyclonedds types (pip install 'sva_linearizer[dds]')")

import sva_linearizer as sl  # noqa: E402
from fd_tools import e_max  # noqa: E402
from ros_helpers.fake_transport import FakeTransport  # noqa: E402
from sva_linearizer.ros.node.horizon import (MAX_KNOTS, STATUS_BAD_REQUEST, STATUS_KNOT_FAILED, TOPIC_ANSWER,  # noqa: E402
                                        TOPIC_REQUEST, decode_answer, encode_request, request_msg)
from sva_linearizer.ros.wire.messages import joint_state_msg, odometry_msg  # noqa: E402
from sva_linearizer.ros.node.node import LinearizerNode  # noqa: E402
from sva_linearizer.robots import load_robot  # noqa: E402
from sva_linearizer.ros.demo.bench import trot_schedule  # noqa: E402
from sva_linearizer.ros.node.record import RecordDescription  # noqa: E402

FEET = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]


class Planner:
    """A node on the in-memory transport and a planner's side of the horizon topics."""

    def __init__(self, params):
        self.T = FakeTransport()
        self.node = LinearizerNode(self.T, dict(params, warn_period=0))
        self.model = self.node.model
        self.description = RecordDescription.from_json(self.T.published["linearization/description"][-1].data)

    def request(self, rid, q, v, tau, dt=0.0, active=None, forces=None, msg=None, omit=(), restitution=0.0):
        if msg is None:
            data, n, s = encode_request(rid, self.description, q, v, tau, dt, active, forces, t0_ns=5_000_000_000,
                                        omit=omit, restitution=restitution)
            msg = request_msg(self.T.types, data, n, s)
        before = len(self.T.published.get(TOPIC_ANSWER, []))
        self.T.deliver(TOPIC_REQUEST, msg)
        end = time.monotonic() + 60.0
        while len(self.T.published.get(TOPIC_ANSWER, [])) == before and time.monotonic() < end:
            time.sleep(0.002)
        answers = self.T.published[TOPIC_ANSWER][before:]
        assert len(answers) == 1
        return decode_answer(answers[0], self.description), answers[0]

    def close(self):
        self.node.close()


def knots(model, N, rng):
    Q = np.zeros((N, model.nq))
    for i in range(N):
        quat = rng.normal(size=4)
        Q[i, :3], Q[i, 3:7] = rng.normal(size=3), quat / np.linalg.norm(quat)
        Q[i, 7:] = rng.uniform(-1, 1, model.nj)
    return Q, rng.normal(size=(N, model.nv)), rng.normal(size=(N, model.nj))


def test_the_answer_holds_each_knot_as_linearize_gives_it_with_the_schedule():
    p = Planner({"robot": "solo12", "contact_frames": FEET, "contact_references": ["world_aligned"],
                 "contact_baumgarte_kp": [100.0], "contact_baumgarte_kd": [20.0]})
    try:
        rng = np.random.default_rng(1)
        N, dt = 12, 0.02
        Q, V, T = knots(p.model, N, rng)
        active = trot_schedule(N, 4)
        ans, msg = p.request(77, Q, V, T, dt, active)
        assert ans.ok and ans.request_id == 77 and len(ans.knots) == N and msg.layout.dim[0].label == "horizon_answer"
        for k, rec in enumerate(ans.knots):
            assert rec.seq == k + 1 and rec.stamp_ns == 5_000_000_000 + round(k * dt * 1e9)
            act = [c for c, a in zip(p.node.contacts, active[k]) if a]
            st = sl.State.from_vectors(p.model, Q[k], V[k])
            lin = sl.linearize(p.model, st, T[k], contacts=act, dt=dt)
            nxt = sl.next_state(p.model, st, lin.nu_dot, dt)
            assert rec.contacts == tuple((c.frame, 3) for c in act) and rec.m == 6
            for got, want in ((rec.A, lin.A), (rec.B, lin.B), (rec.Ad, lin.Ad), (rec.Bd, lin.Bd),
                              (rec.nu_dot, lin.nu_dot), (rec.forces, lin.forces), (rec.dforces_dz, lin.dforces_dz),
                              (rec.q_next, nxt.q), (rec.v_next, nxt.v)):
                assert e_max(got, want) <= 1e-12 * max(1.0, np.max(np.abs(want)))
            np.testing.assert_allclose(rec.q, st.q, rtol=0, atol=1e-15)
            assert rec.odom_stamp is None
        # sections left out on request
        ans, _ = p.request(78, Q, V, T, dt, active, omit=("A", "B"))
        assert ans.ok and ans.knots[0].A is None and ans.knots[0].Ad is not None
        # the per-state stream goes on beside it
        p.T.deliver("joint_states", joint_state_msg(p.T.types, 10**9, p.model.joint_names, Q[0, 7:], V[0, 6:], T[0]))
    finally:
        p.close()


def _bad(p, rid, mutate, pattern, status=STATUS_BAD_REQUEST):
    rng = np.random.default_rng(rid)
    Q, V, T = knots(p.model, 3, rng)
    data, n, s = encode_request(rid, p.description, Q, V, T, 0.01)
    msg = request_msg(p.T.types, data, n, s)
    mutate(msg)
    ans, raw = p.request(rid, None, None, None, msg=msg)
    assert not ans.ok and ans.status == status and ans.knots == [] and ans.request_id == rid
    assert pattern in ans.error, ans.error
    assert raw.layout.dim[0].label.startswith("horizon_error: ")
    return ans


def test_a_bad_request_gets_an_answer_naming_the_problem_and_the_node_goes_on():
    p = Planner({"robot": "solo12", "contact_frames": FEET})
    try:
        def setv(i, x):
            return lambda m: m.data.__setitem__(i, x)
        _bad(p, 11, setv(13 + 5, float("nan")), "knot 0: value 5 is nan")
        _bad(p, 12, setv(10, 3.0), "C = 3 active columns: the node has 4 contacts (FL_FOOT, FR_FOOT, HL_FOOT, HR_FOOT)")
        _bad(p, 13, setv(2, p.description.id + 1), f"the node's description is {p.description.id}")
        _bad(p, 14, setv(8, 17.0), "nq, nv, nj = (19, 17, 12)")
        S = 19 + 18 + 12 + 4
        _bad(p, 15, setv(13 + S + 19 + 18 + 12 + 1, 0.5), "knot 1: active value of contact 'FR_FOOT' is 0.5")
        _bad(p, 16, lambda m: m.data.pop(), "values: 3 knots of")
        _bad(p, 17, setv(4, -1.0), "dt = -1")

        def zero_knots(m):
            m.data[3] = 0.0
            m.layout.dim[0].size = 0
            del m.data[13:]
        _bad(p, 18, zero_knots, "N = 0 knots: a request holds 1 to")

        def too_many(m):
            m.data[3] = MAX_KNOTS + 1.0
        _bad(p, 19, too_many, f"N = {MAX_KNOTS + 1} knots")
        # a knot whose linearization fails: the knot named, no knots returned
        rng = np.random.default_rng(5)
        Q, V, T = knots(p.model, 4, rng)
        V[2] *= 1e200
        ans, _ = p.request(20, Q, V, T * 1e200, 0.01)
        assert ans.status == STATUS_KNOT_FAILED and ans.bad_knot is not None and ans.knots == []
        assert f"knot {ans.bad_knot}" in ans.error
        # and a good one after all that
        Q, V, T = knots(p.model, 2, rng)
        ans, _ = p.request(21, Q, V, T, 0.01)
        assert ans.ok and len(ans.knots) == 2
        assert p.node.horizon.counts["refused"] == 9 and p.node.horizon.counts["answered"] == 1
    finally:
        p.close()


@pytest.mark.parametrize("node_transport", ["rclpy", "dds"])
def test_a_planner_in_another_process_gets_its_horizon_over_ros2(node_transport):
    """The node as its own process (rclpy or DDS transport), a real rclpy planner with the package's
    HorizonClient: the answer's knots equal linearize_horizon's here; a refused request is answered
    with its id; the node's per-state records go on meanwhile."""
    pytest.importorskip("rclpy", reason="the planner is a real rclpy node (pip install '.[ros]')")
    from ros_helpers.cases import SEC, random_input
    from ros_helpers.dds_harness import Harness
    from sva_linearizer.ros import HorizonClient

    h = Harness(["--robot", "solo12", "--floating-base", "--param", "warn_period=0",
                 "--param", "contact_frames=[FL_FOOT,FR_FOOT,HL_FOOT,HR_FOOT]",
                 "--param", "contact_references=[world_aligned]"], node_transport=node_transport, peer="rclpy")
    try:
        h.wait_ready()
        client = HorizonClient(h.transport)
        assert client.wait_for_node(30.0), "the node's request reader or description never came"
        model = load_robot("solo12")
        rng = np.random.default_rng(7)
        N, dt = 50, 0.01
        Q, V, T = knots(model, N, rng)
        active = trot_schedule(N, 8)
        answer = client.request(Q, V, T, dt, active).result(timeout=60.0)
        assert answer.ok and len(answer.knots) == N, answer.error
        feet = [sl.Contact(f, reference="world_aligned") for f in FEET]
        ref = sl.linearize_horizon(model, Q, V, T, dt, contacts=feet, active=active)
        for k, rec in enumerate(answer.knots):
            assert e_max(rec.Ad, ref.Ad[k]) <= 1e-9 and e_max(rec.Bd, ref.Bd[k]) <= 1e-9
            assert e_max(rec.q_next, ref.q_next[k]) <= 1e-12 and rec.seq == k + 1
        bad = client.request(Q[:2], V[:2] * np.nan, T[:2], dt).result(timeout=60.0)
        assert not bad.ok and bad.status == STATUS_BAD_REQUEST and "NaN" in bad.error
        # the per-state stream beside it
        s, r, tau, odom = random_input(model, rng)
        stamp = 300 * SEC
        h.send(stamp, list(model.joint_names), s, r, tau, odom)
        h.wait_pair(stamp, resend=lambda: h.send(stamp, list(model.joint_names), s, r, tau, odom))
    finally:
        h.close()


def test_a_touchdown_knot_carries_the_impact_and_the_others_do_not():
    """A trot through the node with restitution 0.5: the records of the knots where a pair lands
    hold reset, v_plus, impulses, dimpulses_dz equal to linearize_horizon's (format 3); the other
    knots' records and the per-state stream have none; a record of another format is refused; a
    request of format 1 (no restitution) is read with e = 0; a restitution outside [0, 1] is refused."""
    from sva_linearizer.ros.node.horizon import REQUEST_HEADER_SIZE
    from sva_linearizer.ros.node.record import RECORD_FORMAT, decode_record

    p = Planner({"robot": "solo12", "contact_frames": FEET, "contact_references": ["world_aligned"],
                 "dt": 0.01})
    try:
        rng = np.random.default_rng(3)
        N, dt = 24, 0.01
        Q, V, T = knots(p.model, N, rng)
        active = trot_schedule(N, 8)
        feet = [sl.Contact(f, reference="world_aligned") for f in FEET]
        for e in (0.5, 0.0):
            if e:
                ans, msg = p.request(90, Q, V, T, dt, active, restitution=e)
            else:                       # format 1: the header without the restitution
                data, n, s = encode_request(91, p.description, Q, V, T, dt, active, t0_ns=5_000_000_000)
                data = np.delete(data, REQUEST_HEADER_SIZE - 1)
                data[0] = 1.0
                msg = request_msg(p.T.types, data, n, s)
                msg.layout.data_offset = REQUEST_HEADER_SIZE - 1
                ans, msg = p.request(91, None, None, None, msg=msg)
            assert ans.ok, ans.error
            ref = sl.linearize_horizon(p.model, Q, V, T, dt, contacts=feet, active=active, restitution=e)
            assert np.flatnonzero(ref.touchdown).tolist() == [8, 16]
            for k, rec in enumerate(ans.knots):
                if not ref.touchdown[k]:
                    assert rec.reset is None and rec.v_plus is None and rec.impulses is None
                    assert rec.dimpulses_dz is None
                    continue
                held = np.concatenate([np.arange(r.start, r.stop) for r, a in zip(ref.rows, active[k]) if a])
                for got, want in ((rec.reset, ref.reset[k]), (rec.v_plus, ref.v_plus[k]),
                                  (rec.impulses, ref.impulses[k, held]),
                                  (rec.dimpulses_dz, ref.dimpulses_dz[k, held])):
                    assert got is not None and e_max(got, want) <= 1e-12 * max(1.0, np.max(np.abs(want)))
                landing = sl.State.from_vectors(p.model, ref.q_next[k - 1], ref.v_next[k - 1])
                imp = sl.linearize_impact(p.model, landing, [c for c, a in zip(feet, active[k]) if a], e)
                assert e_max(rec.reset, imp.jacobian) <= 1e-12 * max(1.0, np.max(np.abs(imp.jacobian)))
        raw = np.asarray(msg.data, dtype=np.float64)
        off, n = int(raw[6 + 2 * 8]), int(raw[7 + 2 * 8])
        rec = raw[off:off + n].copy()
        assert rec[0] == RECORD_FORMAT == 3 and rec[10] == 20
        rec[0] = 2.0
        with pytest.raises(ValueError, match="format 2 with 20 sections, this reader knows format 3"):
            decode_record(rec, p.description)
        _bad(p, 92, lambda m: m.data.__setitem__(12, 1.5), "restitution = 1.5")
        _bad(p, 93, lambda m: m.data.__setitem__(0, 7.0), "format 7, the node reads formats 1, 2")
        # the per-state stream: no touchdown sections, whatever contacts act
        p.T.deliver("odom", odometry_msg(p.T.types, 10**9, Q[0, :3], Q[0, 3:7], V[0, :6]))
        p.T.deliver("joint_states", joint_state_msg(p.T.types, 10**9, p.model.joint_names, Q[0, 7:], V[0, 6:], T[0]))
        end = time.monotonic() + 60.0
        while not p.T.published.get("linearization/record") and time.monotonic() < end:
            time.sleep(0.002)
        streamed = decode_record(p.T.published["linearization/record"][-1].data, p.description)
        assert streamed.Ad is not None and streamed.reset is None and streamed.impulses is None
    finally:
        p.close()
