# SPDX-License-Identifier: BSD-3-Clause
"""``sva-linearizer bag``: recordings written by rosbags from known states, linearized into a
rosbag2 of the node's records.

The oracle is the node itself: the same messages, in the order rosbags' reader yields them (the
log time as the receive time and as the steady clock), fed to a LinearizerNode on the in-memory
transport; its records must equal the bag's bit for bit, section by section, and its drops by
reason the bag's. rosbags' own deserializer decodes what the node gets, the package's codec what
the bag tool reads. Then: the output is the same in this process, in chunks, in 2 worker processes
and on a Dask LocalCluster with 2 worker processes (a failed chunk retried); bad input gives one
line and exit code 2, and no output.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("rosbags", reason="the bag tool reads and writes rosbag2 with rosbags (pip install '.[bag]')")
pytest.importorskip("cyclonedds", reason="the in-memory transport's message classes come from the DDS "
                                        "transport's cyclonedds types (pip install 'sva_linearizer[dds]')")

import sva_linearizer as sl  # noqa: E402
from ros_helpers import bags  # noqa: E402
from ros_helpers.fake_transport import FakeTransport  # noqa: E402
from rosbags.rosbag2 import Reader  # noqa: E402
from sva_linearizer.robots import load_robot  # noqa: E402
from sva_linearizer.ros.bag import run as bag_run  # noqa: E402
from sva_linearizer.ros.bag.chunk import FAULT_ENV, SEQ_OFFSET, record_cdr  # noqa: E402
from sva_linearizer.ros.bag.recording import BagError  # noqa: E402
from sva_linearizer.ros.bag.run import linearize_bag  # noqa: E402
from sva_linearizer.ros.node.node import LinearizerNode  # noqa: E402
from sva_linearizer.ros.node.record import (RECORD_FORMAT, SECTIONS, RecordDescription, decode_record,  # noqa: E402
                                            record_msg)
from sva_linearizer.ros.wire import cdr  # noqa: E402

SEC = bags.SEC
MS = SEC // 1000
FEET = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
PARAMS = {"robot": "solo12", "contact_frames": FEET, "contact_references": ["world_aligned"], "dt": 0.01,
          "max_odom_age": 0.005, "warn_period": 0}


@pytest.fixture(scope="module")
def solo():
    return load_robot("solo12")


def _recording(model, n=240, seed=3):
    """n states of solo12 at 1 kHz on a trot-like contact schedule, the odometry of each logged with
    its joint state, half a millisecond later, three milliseconds later (after the joint state's
    wait: the nearest sample then, and out-of-order odometry where the delay ends), or not at all
    (a gap longer than max_odom_age: stale), and some messages the node drops."""
    rng = np.random.default_rng(seed)
    msgs, states = bags.stream(model, n, rng, feet=FEET, gait=True)
    out = []
    for topic, role, t, msg in msgs:
        k = int((msg.header.stamp.sec * SEC + msg.header.stamp.nanosec - 10 * SEC) // MS)
        if role == "odom":
            if 60 <= k < 120:
                t += MS // 2
            elif 150 <= k < 170:
                t += 3 * MS
            elif 200 <= k < 212 or k in (130, 131):
                continue
        out.append((topic, role, t, msg))
    names = list(model.joint_names)
    bad_t = 10 * SEC + 100 * MS + 50_000 + 300            # between states 100 and 101
    s = np.zeros(model.nj)
    nan = s.copy()
    nan[3] = np.nan
    out += [("/joint_states", "joint_states", bad_t, bags.joint_state(10 * SEC + 100 * MS + 400_000, names, nan)),
            ("/joint_states", "joint_states", bad_t + 10, bags.joint_state(10 * SEC + 100 * MS + 500_000,
                                                                         names[:-1] + ["nope"], s)),
            ("/joint_states", "joint_states", bad_t + 20, bags.joint_state(10 * SEC + 50 * MS, names, s)),
            ("/odom", "odom", bad_t + 30, bags.odometry(10 * SEC + 100 * MS + 600_000, [0, 0, 0], [0, 0, 0, 1.5],
                                                        np.zeros(6), child=model.base_name)),
            ("/contacts", "contacts", bad_t + 40, bags.contacts(10 * SEC + 100 * MS + 700_000, ["BODY"]))]
    return out, states


def _read_back(path):
    """(description JSON, [(log time, data array)]) of a bag tool's output, read by rosbags."""
    ts = bags.TS
    with Reader(path) as r:
        topics = {c.topic: c for c in r.connections}
        assert topics["/linearization/record"].msgtype == "std_msgs/msg/Float64MultiArray"
        descriptions = [ts.deserialize_cdr(raw, "std_msgs/msg/String").data
                        for _, _, raw in r.messages([topics["/linearization/description"]])]
        records = [(t, ts.deserialize_cdr(raw, "std_msgs/msg/Float64MultiArray"))
                   for _, t, raw in r.messages([topics["/linearization/record"]])]
    assert len(descriptions) == 1
    for _, msg in records:
        assert [(d.label, d.size, d.stride) for d in msg.layout.dim] == [("record", len(msg.data), len(msg.data))]
        assert msg.layout.data_offset == 0
    return descriptions[0], [(t, np.asarray(m.data)) for t, m in records]


def _raw_records(path):
    """[(topic, log time, raw bytes)] of a bag, in order."""
    with Reader(path) as r:
        return [(c.topic, t, bytes(raw)) for c, t, raw in r.messages()]


def _node_records(params, bag_path):
    """The node's records for the messages of ``bag_path`` in the order rosbags' reader yields them,
    each delivered at its log time (receive time and steady clock), decoded by rosbags."""
    T = FakeTransport()
    node = LinearizerNode(T, params)
    with Reader(bag_path) as r:
        for conn, t, raw in r.messages():
            msg = bags.TS.deserialize_cdr(raw, conn.msgtype)
            T.run_timers_before(t)
            T.clock_ns = t
            T.deliver(conn.topic.lstrip("/"), msg, recv_ns=t)
    T.run_timers_before(2 ** 62)              # the end: every joint state that waits goes on
    desc = T.published["linearization/description"][-1].data
    return node, desc, [np.asarray(m.data) for m in T.published.get("linearization/record", [])]


def _same_records(node_desc, node_data, bag_desc, bag_data):
    nd, bd = RecordDescription.from_json(node_desc), RecordDescription.from_json(bag_desc)
    for key in ("joint_names", "floating_base", "base_frame", "z", "contacts", "contact_mode", "dt", "sections"):
        assert nd.raw[key] == bd.raw[key], key
    assert len(node_data) == len(bag_data)
    for a, b in zip(node_data, bag_data):
        assert a[0] == b[0] and a[1] == nd.id and b[1] == bd.id
        assert np.array_equal(a[2:], b[2:])                         # every value after the id, bit for bit
        ra, rb = decode_record(a, nd), decode_record(b, bd)
        assert (ra.seq, ra.stamp_ns, ra.nw, ra.m, ra.contacts) == (rb.seq, rb.stamp_ns, rb.nw, rb.m, rb.contacts)
        for name in SECTIONS:
            x, y = getattr(ra, name), getattr(rb, name)
            assert (x is None) == (y is None), name
            if x is not None:
                assert np.array_equal(x, y), name


@pytest.fixture(scope="module")
def recording(solo, tmp_path_factory):
    folder = tmp_path_factory.mktemp("bag")
    msgs, states = _recording(solo)
    path = str(folder / "in")
    bags.write_bag(path, msgs)
    counts = {}
    for _, role, _, _ in msgs:
        counts[role] = counts.get(role, 0) + 1
    return path, states, counts


def test_the_records_equal_the_nodes_for_the_same_messages_bit_for_bit(recording, tmp_path):
    path, states, counts = recording
    node, node_desc, node_data = _node_records(PARAMS, path)
    out = str(tmp_path / "out")
    summary = linearize_bag(path, out, PARAMS, chunk_states=64, batch=16)
    bag_desc, bag = _read_back(out)
    _same_records(node_desc, node_data, bag_desc, [d for _, d in bag])
    # what the node drops, the bag drops under the same reasons; each record is a state sent
    assert summary.dropped == node.rejected
    assert {"joint_states_values", "joint_states_names", "joint_states_order", "odom_quaternion", "odom_order",
            "odom_stale", "contacts_names"} <= set(summary.dropped)
    assert summary.records == len(bag) == node.published > 200
    assert summary.pairing == node.pairing and summary.pairing["nearest"] > 10
    assert summary.read == counts and counts["joint_states"] == 243
    # the records are of the states sent, in stamp order, at the log time the node would publish each
    by_stamp = {st[0]: st for st in states}
    desc = RecordDescription.from_json(bag_desc)
    last = 0
    for t, data in bag:
        rec = decode_record(data, desc)
        stamp, q, v, tau, active = by_stamp[rec.stamp_ns]
        assert rec.stamp_ns >= last and t >= rec.stamp_ns
        last = rec.stamp_ns
        np.testing.assert_array_equal(rec.tau, tau)
        np.testing.assert_array_equal(rec.active, np.asarray(active, dtype=float))
        if rec.odom_stamp_ns == rec.stamp_ns:
            np.testing.assert_allclose(rec.q, q, rtol=0, atol=1e-15)
            np.testing.assert_array_equal(rec.v, v)


def test_each_record_equals_the_library_at_its_point(recording, tmp_path):
    """The bag's records against sl.linearize and sl.next_state at the records' own points."""
    path, _, _ = recording
    out = str(tmp_path / "out")
    linearize_bag(path, out, PARAMS)
    text, records = _read_back(out)
    desc = RecordDescription.from_json(text)
    model = load_robot("solo12")
    feet = {f: sl.Contact(f, reference="world_aligned") for f in FEET}
    for _, data in records[::17]:
        rec = decode_record(data, desc)
        st = sl.State.from_vectors(model, rec.q, rec.v)
        lin = sl.linearize(model, st, rec.tau, contacts=[feet[f] for f, _ in rec.contacts], dt=0.01)
        nxt = sl.next_state(model, st, lin.nu_dot, 0.01)
        for got, want in ((rec.A, lin.A), (rec.B, lin.B), (rec.Ad, lin.Ad), (rec.Bd, lin.Bd),
                          (rec.nu_dot, lin.nu_dot), (rec.forces, lin.forces), (rec.q_next, nxt.q),
                          (rec.v_next, nxt.v)):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(want).max()))


def test_a_state_gives_the_same_bits_in_any_horizon_call(solo):
    """What the one implementation rests on: linearize_horizon computes each knot on its own, so a
    state's sections have the same bits alone, in a batch, in another order or with other states
    (lane groups filled differently)."""
    rng = np.random.default_rng(5)
    N = 13
    Q = np.array([np.r_[rng.normal(size=3), (lambda x: x / np.linalg.norm(x))(rng.normal(size=4)),
                        rng.uniform(-0.8, 0.8, solo.nj)] for _ in range(N)])
    V, T = rng.normal(size=(N, solo.nv)), rng.normal(size=(N, solo.nj))
    feet = [sl.Contact(f, reference="world_aligned") for f in FEET]
    active = rng.uniform(size=(N, 4)) < 0.7
    whole = sl.linearize_horizon(solo, Q, V, T, 0.01, contacts=feet, active=active)
    perm = rng.permutation(N)
    shuffled = sl.linearize_horizon(solo, Q[perm], V[perm], T[perm], 0.01, contacts=feet, active=active[perm])
    names = ("nu_dot", "A", "B", "Ad", "Bd", "q_next", "v_next", "forces", "dforces_dz", "dforces_dtau")
    for i in range(N):
        alone = sl.linearize_horizon(solo, Q[i:i + 1], V[i:i + 1], T[i:i + 1], 0.01, contacts=feet,
                                     active=active[i:i + 1])
        j = int(np.flatnonzero(perm == i)[0])
        for name in names:
            assert np.array_equal(getattr(whole, name)[i], getattr(alone, name)[0]), (name, i)
            assert np.array_equal(getattr(whole, name)[i], getattr(shuffled, name)[j]), (name, i)


def test_a_state_that_fails_to_linearize_is_dropped_alone(recording, tmp_path, monkeypatch):
    """A knot the horizon refuses is the node's `linearize` drop, in the bag as in the node; the
    other states of its batch get their records."""
    real = sl.linearize_horizon
    bad_tau = None

    def refusing(model, q, v, tau, dt=None, **kw):
        hit = [i for i, t in enumerate(np.asarray(tau)) if np.array_equal(t, bad_tau)]
        if hit:
            raise ValueError(f"linearize_horizon: knot {hit[0]}: refused for the test")
        return real(model, q, v, tau, dt, **kw)

    path, states, counts = recording
    bad_tau = states[77][3]
    monkeypatch.setattr(sl, "linearize_horizon", refusing)
    node, node_desc, node_data = _node_records(PARAMS, path)
    out = str(tmp_path / "out")
    summary = linearize_bag(path, out, PARAMS, batch=32)
    bag_desc, bag = _read_back(out)
    _same_records(node_desc, node_data, bag_desc, [d for _, d in bag])
    assert summary.dropped["linearize"] == node.rejected["linearize"] == 1
    assert "refused for the test" in summary.examples["linearize"]


@pytest.fixture(scope="module")
def reference(recording, tmp_path_factory):
    """The output of one pass in this process."""
    path, _, _ = recording
    out = str(tmp_path_factory.mktemp("ref") / "out")
    summary = linearize_bag(path, out, PARAMS)
    return out, summary


def _same_output(a, b):
    ra, rb = _raw_records(a), _raw_records(b)
    assert len(ra) == len(rb) and ra == rb
    name_a, name_b = os.path.basename(a), os.path.basename(b)
    assert name_a == name_b
    for f in (f"{name_a}.mcap", "metadata.yaml"):
        with open(os.path.join(a, f), "rb") as x, open(os.path.join(b, f), "rb") as y:
            assert x.read() == y.read(), f


def test_the_output_is_the_same_in_any_chunks(recording, reference, tmp_path, monkeypatch):
    path, _, _ = recording
    ref, ref_summary = reference
    out = str(tmp_path / "out")
    summary = linearize_bag(path, out, PARAMS, chunk_states=37, batch=5)
    assert summary.chunks >= 6 and summary.reruns == 0
    _same_output(ref, out)
    assert summary.dropped == ref_summary.dropped and summary.pairing == ref_summary.pairing


def test_two_worker_processes_give_the_same_output(recording, reference, tmp_path, monkeypatch):
    """Chunks with their warm-up in 2 spawned processes; with no warm-up at all every chunk's start
    differs from the state the one before ended with, and each is run again from that state: the
    same output either way."""
    path, _, _ = recording
    ref, _ = reference
    (tmp_path / "a").mkdir()
    summary = linearize_bag(path, str(tmp_path / "a" / "out"), PARAMS, workers=2, chunk_states=50)
    assert summary.workers == 2 and summary.chunks >= 4
    _same_output(ref, str(tmp_path / "a" / "out"))
    monkeypatch.setattr(bag_run, "MAX_WARMUP_S", 0.0)
    (tmp_path / "b").mkdir()
    summary = linearize_bag(path, str(tmp_path / "b" / "out"), PARAMS, workers=2, chunk_states=50)
    assert summary.reruns == summary.chunks - 1
    _same_output(ref, str(tmp_path / "b" / "out"))


def test_a_worker_process_that_dies_is_replaced_and_its_chunk_run_again(recording, reference, tmp_path,
                                                                         monkeypatch):
    path, _, _ = recording
    ref, _ = reference
    marker = tmp_path / "failed-once"
    monkeypatch.setenv(FAULT_ENV, f"2:{marker}:exit")
    (tmp_path / "o").mkdir()
    linearize_bag(path, str(tmp_path / "o" / "out"), PARAMS, workers=2, chunk_states=50)
    assert marker.exists()
    _same_output(ref, str(tmp_path / "o" / "out"))


def test_a_dask_cluster_with_two_worker_processes_gives_the_same_output(recording, reference, tmp_path,
                                                                        monkeypatch):
    distributed = pytest.importorskip("distributed", reason="--dask needs dask.distributed "
                                                            "(pip install '.[dask]')")
    path, _, _ = recording
    ref, _ = reference
    marker = tmp_path / "failed-once"
    monkeypatch.setenv(FAULT_ENV, f"1:{marker}")          # the workers inherit it: chunk 1 fails once
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, silence_logs=40) as cluster:
        (tmp_path / "o").mkdir()
        summary = linearize_bag(path, str(tmp_path / "o" / "out"), PARAMS, dask=cluster.scheduler_address,
                                chunk_states=50)
    assert marker.exists() and summary.workers == 2 and "Dask" in summary.where
    _same_output(ref, str(tmp_path / "o" / "out"))


def test_sqlite3_in_and_out_and_one_mcap_file(solo, tmp_path):
    rng = np.random.default_rng(9)
    msgs, _ = bags.stream(solo, 40, rng, feet=FEET)
    bags.write_bag(str(tmp_path / "in_db"), msgs, storage="sqlite3")
    bags.write_bag(str(tmp_path / "in_mcap"), msgs)
    a = linearize_bag(str(tmp_path / "in_db"), str(tmp_path / "a"), PARAMS, storage="sqlite3")
    assert os.path.exists(tmp_path / "a" / "a.db3")
    mcap = str(tmp_path / "in_mcap" / "in_mcap.mcap")             # a file, not the folder
    b = linearize_bag(mcap, str(tmp_path / "b"), PARAMS)
    assert a.records == b.records == 40
    da, ra = _read_back(str(tmp_path / "a"))
    db, rb = _read_back(str(tmp_path / "b"))
    assert [t for t, _ in ra] == [t for t, _ in rb]
    for (_, x), (_, y) in zip(ra, rb):
        assert np.array_equal(x[2:], y[2:])


def test_the_output_is_a_rosbag2_with_the_nodes_topics_types_and_qos(reference):
    out, _ = reference
    with Reader(out) as r:
        conns = {c.topic: c for c in r.connections}
        assert set(conns) == {"/linearization/description", "/linearization/record"}
        desc, rec = conns["/linearization/description"], conns["/linearization/record"]
        assert desc.msgtype == "std_msgs/msg/String" and rec.msgtype == "std_msgs/msg/Float64MultiArray"
        (qd,), (qr,) = desc.ext.offered_qos_profiles, rec.ext.offered_qos_profiles
        assert (qd.reliability.name, qd.durability.name, qd.depth) == ("RELIABLE", "TRANSIENT_LOCAL", 1)
        assert (qr.reliability.name, qr.durability.name, qr.depth) == ("RELIABLE", "VOLATILE", 10)
        times = [t for _, t, _ in r.messages([desc])] + [t for _, t, _ in r.messages([rec])]
    assert times == sorted(times)                      # the description first, the records by log time
    parent = os.path.dirname(out)
    assert os.listdir(parent) == ["out"]               # nothing of the temporary name left


def test_the_records_serialization_is_the_nodes_message(solo):
    """record_cdr is the CDR of record_msg's Float64MultiArray (the package's codec, tested against
    rosbags), and seq lies where the writer numbers the records."""
    data = np.random.default_rng(1).normal(size=123)
    data[2] = 0.0
    assert record_cdr(data).tobytes() == cdr.encode_f64multiarray(record_msg(cdr.LIGHT, data))
    raw = bytearray(record_cdr(data).tobytes())
    raw[SEQ_OFFSET:SEQ_OFFSET + 8] = np.float64(7.0).tobytes()
    back = bags.TS.deserialize_cdr(bytes(raw), "std_msgs/msg/Float64MultiArray")
    assert back.data[2] == 7.0 and np.array_equal(np.delete(back.data, 2), np.delete(data, 2))


# ------------------------------------------------------------------ bad input and the command line
def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "sva_linearizer.cli", "bag", *args], capture_output=True, text=True,
                          env=dict(os.environ, SVA_LINEARIZER_QUIET="1", **(env or {})), timeout=600)


def test_the_command_line_linearizes_with_the_nodes_options_and_says_what_it_did(recording, reference, tmp_path):
    path, _, counts = recording
    ref, ref_summary = reference
    cfg = tmp_path / "p.yaml"
    cfg.write_text("/**:\n  ros__parameters:\n    robot: solo12\n    contact_frames: [FL_FOOT, FR_FOOT, HL_FOOT, "
                   "HR_FOOT]\n    contact_references: [world_aligned]\n    max_odom_age: 0.005\n")
    (tmp_path / "o").mkdir()
    out = str(tmp_path / "o" / "out")
    p = _cli(path, "--out", out, "--config", str(cfg), "--param", "dt=0.01", "--param", "warn_period=0")
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""                               # not a terminal: no progress bar
    lines = p.stdout.splitlines()
    assert lines[0].startswith(f"read 243 joint states ({counts['odom']} odom, {counts['contacts']} contacts) from "
                               f"{path}; wrote "
                               f"{ref_summary.records} records to {out} (mcap); dropped: ")
    assert "states/s on 1 worker (this process)" in lines[1]
    assert lines[2].startswith("per state: read ") and " linearize " in lines[2] and " write " in lines[2]
    assert any(line.startswith("  odom_stale: odom: stale (age ") for line in lines)
    _same_output(ref, out)
    q = _cli(path, "--out", str(tmp_path / "quiet"), "--config", str(cfg), "--quiet")
    assert q.returncode == 0 and q.stdout == "" and q.stderr == ""


@pytest.mark.parametrize("case", ["missing_topic", "wrong_type", "truncated", "corrupt", "unknown_format",
                                  "not_a_bag", "no_input", "output_exists", "bad_parameter"])
def test_bad_input_is_one_line_exit_code_2_and_no_output(case, solo, tmp_path):
    rng = np.random.default_rng(2)
    msgs, _ = bags.stream(solo, 30, rng, feet=FEET)
    good = str(tmp_path / "good")
    bags.write_bag(good, msgs)
    mcap = os.path.join(good, "good.mcap")
    args, expect = [good], None
    if case == "missing_topic":
        bags.write_bag(str(tmp_path / "in"), [m for m in msgs if m[1] != "odom"])
        args, expect = [str(tmp_path / "in")], "has no topic /odom (the odom_topic parameter"
    elif case == "wrong_type":
        bags.write_bag(str(tmp_path / "in"), [m for m in msgs if m[1] != "odom"]
                       + [("/odom", "robot_description", 11 * SEC, bags.description("x"))])
        args = [str(tmp_path / "in")]
        expect = "topic /odom holds std_msgs/msg/String, the node reads nav_msgs/msg/Odometry"
    elif case == "truncated":
        shutil.copy(mcap, tmp_path / "t.mcap")
        with open(tmp_path / "t.mcap", "r+b") as f:
            f.truncate(os.path.getsize(mcap) * 2 // 3)
        args, expect = [str(tmp_path / "t.mcap")], "cannot be read, truncated or corrupt?"
    elif case == "corrupt":
        data = bytearray(open(mcap, "rb").read())
        data[:64] = b"not an MCAP header" * 3 + b"0123456789"
        (tmp_path / "c.mcap").write_bytes(bytes(data))
        args, expect = [str(tmp_path / "c.mcap")], "cannot be read, truncated or corrupt?"
    elif case == "unknown_format":
        (tmp_path / "x.bag").write_bytes(b"#ROSBAG V2.0\n" + bytes(100))
        args, expect = [str(tmp_path / "x.bag")], "not a rosbag2 recording this command reads"
    elif case == "not_a_bag":
        (tmp_path / "folder").mkdir()
        args, expect = [str(tmp_path / "folder")], "a folder without metadata.yaml is not a rosbag2 recording"
    elif case == "no_input":
        args, expect = [str(tmp_path / "nothing")], "no such file or folder"
    elif case == "output_exists":
        (tmp_path / "out").mkdir()
        expect = "exists: the output must be a new folder"
    elif case == "bad_parameter":
        args, expect = [good, "--param", "max_odom_age=-1"], "parameter max_odom_age: expected a number"
    before = set(os.listdir(tmp_path))
    p = _cli(*args, "--out", str(tmp_path / "out"), "--robot", "solo12", "--param",
             "contact_frames=[FL_FOOT, FR_FOOT, HL_FOOT, HR_FOOT]")
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stdout == "" and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert p.stderr.startswith("sva-linearizer bag: ") and expect in p.stderr, p.stderr
    assert set(os.listdir(tmp_path)) == before          # no output, nothing half-written left


def test_a_message_that_does_not_decode_is_a_drop_by_reason(solo, tmp_path):
    rng = np.random.default_rng(4)
    msgs, _ = bags.stream(solo, 20, rng, feet=FEET)
    bags.write_bag(str(tmp_path / "in"), msgs, raw=[("/joint_states", "joint_states", 10 * SEC + 5 * MS + 10,
                                                    b"\x00\x01\x00\x00\xff\xff")])
    summary = linearize_bag(str(tmp_path / "in"), str(tmp_path / "out"), PARAMS)
    assert summary.dropped == {"joint_states_malformed": 1} and summary.records == 20


def test_without_model_parameters_the_recordings_robot_description_is_the_model(solo, tmp_path):
    from sva_linearizer.robots import robot_urdf_path

    rng = np.random.default_rng(6)
    msgs, _ = bags.stream(solo, 10, rng)
    urdf = open(robot_urdf_path("solo12")).read()
    bags.write_bag(str(tmp_path / "in"), msgs + [("/robot_description", "robot_description", 9 * SEC,
                                                  bags.description(urdf))])
    summary = linearize_bag(str(tmp_path / "in"), str(tmp_path / "out"), {"floating_base": True})
    assert summary.records == 10
    with pytest.raises(BagError, match="no robot model: the parameters name none"):
        bags.write_bag(str(tmp_path / "in2"), msgs)
        linearize_bag(str(tmp_path / "in2"), str(tmp_path / "out2"), {})


def test_the_recordings_decoders_read_what_the_packages_codec_reads():
    """The bag tool's JointState decoder (the names of the message before taken again when their
    bytes repeat) and Odometry decoder (no covariances) against cdr.py's one-pass codecs, on
    messages serialized by rosbags: names that repeat, change length and order, empty arrays."""
    from sva_linearizer.ros.bag.recording import decoder

    js, od = decoder("joint_states"), decoder("odom")
    rng = np.random.default_rng(8)
    seqs = [["a", "bb", "ccc"], ["a", "bb", "ccc"], ["a", "bb", "ccd"], ["abcd", "e"], ["abcd", "e"], []]
    for k, names in enumerate(seqs * 2):
        n = len(names)
        vel = rng.normal(size=n) if k % 3 else []
        msg = bags.joint_state(k * SEC + 7, names, rng.normal(size=n), vel, rng.normal(size=n) if k % 2 else [])
        raw = bags.TS.serialize_cdr(msg, "sensor_msgs/msg/JointState")
        got, want = js(raw), cdr.decode_joint_state(raw)
        assert got.header.stamp.sec == want.header.stamp.sec and got.header.stamp.nanosec == want.header.stamp.nanosec
        assert list(got.name) == list(want.name) == names
        for f in ("position", "velocity", "effort"):
            assert np.array_equal(np.asarray(getattr(got, f)), np.asarray(getattr(want, f)))
    for k in range(5):
        q = rng.normal(size=4)
        msg = bags.odometry(k * SEC + 3, rng.normal(size=3), q, rng.normal(size=6), frame="odom" * k, child="b" * k)
        raw = bags.TS.serialize_cdr(msg, "nav_msgs/msg/Odometry")
        got, want = od(raw), cdr.decode_odometry(raw)
        assert (got.header.frame_id, got.child_frame_id) == (want.header.frame_id, want.child_frame_id)
        for a, b in ((got.pose.pose.position, want.pose.pose.position),
                     (got.pose.pose.orientation, want.pose.pose.orientation),
                     (got.twist.twist.linear, want.twist.twist.linear),
                     (got.twist.twist.angular, want.twist.twist.angular)):
            assert vars(a) == vars(b)
    with pytest.raises(ValueError):
        js(bags.TS.serialize_cdr(bags.joint_state(5, ["a"], [1.0]), "sensor_msgs/msg/JointState")[:-4])


def test_a_run_that_fails_halfway_leaves_no_output(recording, tmp_path, monkeypatch):
    """Chunk 2 fails in this process after chunks 0 and 1 were written (by the writing thread): the
    error comes out and neither the output nor its temporary folder is left."""
    path, _, _ = recording
    monkeypatch.setenv(FAULT_ENV, f"2:{tmp_path / 'marker'}")
    (tmp_path / "o").mkdir()
    with pytest.raises(RuntimeError, match="fails once"):
        linearize_bag(path, str(tmp_path / "o" / "out"), PARAMS, chunk_states=40)
    assert os.listdir(tmp_path / "o") == []


def test_the_progress_bar_draws_on_a_terminal_only():
    import io

    from sva_linearizer.ros.bag.progress import Progress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty, pipe = Tty(), io.StringIO()
    for stream in (tty, pipe):
        p = Progress(1000, stream=stream, width=10)
        p.update(250)
        p.update(1000)
        p.close()
    assert pipe.getvalue() == ""
    lines = tty.getvalue().split("\r")
    assert lines[1].startswith("[##........] 250/1,000 states ") and " states/s " in lines[1] and " left" in lines[1]
    assert lines[2].startswith("[##########] 1,000/1,000 states ") and tty.getvalue().endswith("\n")


def test_forces_as_inputs_and_loops_give_the_nodes_records_too(solo, tmp_path):
    """contact_mode forces (the contacts' wrenches on contact_forces, paired by stamp) and a closed
    loop: the bag's records equal the node's bit for bit, and the node's drops (a force missing)."""
    rng = np.random.default_rng(11)
    feet = ["FL_FOOT", "FR_FOOT"]
    msgs, _ = bags.stream(solo, 60, rng, feet=feet, gait=False)
    for k in range(60):
        stamp = 10 * SEC + k * MS
        for i, f in enumerate(feet):
            if k == 30 and i == 1:
                continue                                   # no force for FR_FOOT at this state: stale (0.1 ms)
            msgs.append(("/contact_forces", "contact_forces", stamp + 50_000 - 500,
                         bags.wrench(stamp, f, rng.normal(size=3) * 5, rng.normal(size=3))))
    def lifted(m):          # the contact sets of states 20-24: FL_FOOT alone
        stamp = m[3].header.stamp.sec * SEC + m[3].header.stamp.nanosec
        return (m[0], m[1], m[2], bags.contacts(stamp, feet[:1]))
    msgs = [lifted(m) if m[1] == "contacts" and 20 <= (m[2] - 10 * SEC) // MS < 25 else m for m in msgs]
    path = str(tmp_path / "in")
    bags.write_bag(path, msgs)
    params = {"robot": "solo12", "contact_frames": feet, "contact_kinds": ["point", "6d"], "contact_mode": "forces",
              "contact_references": ["world_aligned"], "max_contacts_age": 0.0001, "dt": 0.01, "warn_period": 0,
              "loop_frames_a": ["HL_FOOT"], "loop_frames_b": ["HR_FOOT"], "loop_kinds": ["point"]}
    node, node_desc, node_data = _node_records(params, path)
    summary = linearize_bag(path, str(tmp_path / "out"), params, batch=7)
    bag_desc, bag = _read_back(str(tmp_path / "out"))
    _same_records(node_desc, node_data, bag_desc, [d for _, d in bag])
    assert summary.dropped == node.rejected == {"contact_forces_stale": 1}
    desc = RecordDescription.from_json(bag_desc)
    widths = {decode_record(d, desc).nw for _, d in bag}
    assert widths == {12 + 3, 12 + 3 + 6} and summary.records == 59


def test_a_pairing_state_that_crosses_chunks_gives_the_same_output(recording, tmp_path):
    """max_rate: which joint states go through depends on the last one that did, however far back;
    a chunk's warm-up may settle on another, and the chunk is then run again from the exact state:
    the output of 2 worker processes is the one pass's."""
    path, _, _ = recording
    params = dict(PARAMS, max_rate=300.0)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one = linearize_bag(path, str(tmp_path / "a" / "out"), params)
    two = linearize_bag(path, str(tmp_path / "b" / "out"), params, workers=2, chunk_states=50)
    _same_output(str(tmp_path / "a" / "out"), str(tmp_path / "b" / "out"))
    assert one.dropped == two.dropped and one.dropped["rate_limited"] > 100


def test_records_encoded_together_equal_records_encoded_one_by_one():
    """encode_records (the bag's groups) against encode_record (the node's one record), and
    against the record's definition read back by decode_record."""
    from sva_linearizer.ros.node.record import encode_record, encode_records

    rng = np.random.default_rng(12)
    K = 5
    parts = {"q": rng.normal(size=(K, 19)), "v": rng.normal(size=(K, 18)), "tau": rng.normal(size=(K, 12)),
             "active": np.ones((K, 4), dtype=bool), "input_forces": np.zeros((K, 0)),
             "A": rng.normal(size=(K, 36, 36)), "B": rng.normal(size=(K, 36, 12)), "forces": rng.normal(size=(K, 12)),
             "odom_stamp": rng.normal(size=(K, 2))}
    stamps = [int(x) for x in rng.integers(0, 2 ** 62, K)]
    together = encode_records(7, np.arange(1, K + 1), stamps, 18, 12, 12, 12, 0.0, parts)
    for k in range(K):
        alone = encode_record(7, k + 1, stamps[k], 18, 12, 12, 12, 0.0, {n: x[k] for n, x in parts.items()})
        assert np.array_equal(together[k], alone)
    desc = RecordDescription.from_json(json.dumps({
        "format": RECORD_FORMAT, "id": 7, "joint_names": [f"j{i}" for i in range(12)], "floating_base": True,
        "base_frame": "b",
        "nq": 19, "nv": 18, "nj": 12, "z": [], "contacts": [{"frame": f"f{i}", "dim": 3} for i in range(4)],
        "dt": 0.0}))
    rec = decode_record(together[3], desc)
    assert rec.seq == 4 and rec.stamp_ns == stamps[3] and rec.input_forces is None and rec.Ad is None
    for name in ("q", "v", "tau", "A", "B", "forces", "odom_stamp"):
        assert np.array_equal(getattr(rec, name), parts[name][3]), name
    assert np.array_equal(rec.active, np.ones(4))
