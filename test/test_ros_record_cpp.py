# SPDX-License-Identifier: BSD-3-Clause
"""docs/ros.md's C++ recipe for the linearization record, compiled and run: test/cpp/record_consumer.cpp
(written from the docs: the table of contents, Eigen row-major maps) reads records the node published
and prints what a planner uses; it must agree with the Python reader to the last bit. Needs a C++
compiler and Eigen (libeigen3-dev; .ci/run installs it)."""
import os
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

pytest.importorskip("cyclonedds", reason="the in-memory transport's message classes come from cyclonedds")

from ros_helpers.fake_transport import FakeTransport  # noqa: E402
from sva_linearizer.ros.wire.messages import joint_state_msg, odometry_msg  # noqa: E402
from sva_linearizer.ros.node.node import LinearizerNode  # noqa: E402
from sva_linearizer.ros.node.record import RecordDescription, decode_record  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
EIGEN = "/usr/include/eigen3"


def _build(tmp_path_factory, name):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None or not os.path.isdir(EIGEN):
        pytest.skip("needs a C++ compiler and Eigen (apt install g++ libeigen3-dev)")
    exe = tmp_path_factory.mktemp("cpp") / name
    r = subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Werror", f"-I{EIGEN}",
                        str(HERE / "cpp" / f"{name}.cpp"), "-o", str(exe)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return exe


@pytest.fixture(scope="module")
def consumer(tmp_path_factory):
    return _build(tmp_path_factory, "record_consumer")


@pytest.fixture(scope="module")
def horizon_client(tmp_path_factory):
    return _build(tmp_path_factory, "horizon_client")


@pytest.mark.parametrize("params", [{"robot": "ur5", "dt": 0.0}, {"robot": "solo12", "dt": 0.01}])
def test_the_cpp_recipe_reads_what_the_node_publishes(consumer, tmp_path, params):
    T = FakeTransport()
    node = LinearizerNode(T, dict(params, warn_period=0))
    m = node.model
    rng = np.random.default_rng(4)
    stamp = 1_795_000_000_123_456_789
    if m.floating_base:
        quat = rng.normal(size=4)
        T.deliver("odom", odometry_msg(T.types, stamp, rng.normal(size=3), quat / np.linalg.norm(quat),
                                       rng.normal(size=6)))
    T.deliver("joint_states", joint_state_msg(T.types, stamp, m.joint_names, rng.uniform(-1, 1, m.nj),
                                              rng.normal(size=m.nj), rng.normal(size=m.nj)))
    msg = T.published["linearization/record"][-1]
    desc = RecordDescription.from_json(T.published["linearization/description"][-1].data)
    rec = decode_record(msg.data, desc)
    path = tmp_path / "record.bin"
    path.write_bytes(np.asarray(msg.data, dtype="<f8").tobytes())
    r = subprocess.run([str(consumer), str(path), str(desc.id)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    got = dict(line.split(" ", 1) for line in r.stdout.strip().splitlines())
    nv = m.nv
    head = got["seq"].split(" ")              # <seq> stamp_ns <ns> nv <nv> nw <nw> m <m> dt <dt>
    assert [int(head[i]) for i in (0, 2, 4, 6, 8)] == [rec.seq, stamp, nv, rec.nw, rec.m]
    assert float(head[10]) == rec.dt
    a10, _, a_last = got["A[1][0]"].split(" ")   # "<A[1][0]> A[2nv-1][nv] <value>"
    # %.17g prints a double exactly: equality, not closeness
    assert float(a10) == rec.A[1, 0] and float(a_last) == rec.A[2 * nv - 1, nv]
    assert float(got[f"B[{2 * nv - 2}][1]"]) == rec.B[2 * nv - 2, 1]
    assert float(got[f"nu_dot[{nv - 1}]"]) == rec.nu_dot[nv - 1]
    assert float(got["trace(A)"]) == pytest.approx(float(np.trace(rec.A)), rel=1e-14, abs=1e-14)
    if rec.Ad is not None:
        assert float(got[f"Ad[0][{nv}]"]) == rec.Ad[0, nv]
    else:
        assert f"Ad[0][{nv}]" not in got
    if m.floating_base:
        assert rec.odom_stamp_ns == stamp
        assert got["odom_stamp_ns"] == f"{rec.odom_stamp_ns} (the joint state's own stamp)"
    else:
        assert "odom_stamp_ns" not in got and rec.odom_stamp is None
    # a record of another description is refused, not misread
    r = subprocess.run([str(consumer), str(path), str(desc.id + 1)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "not a record of this format and description" in r.stdout


def test_the_cpp_horizon_recipe_builds_a_request_and_reads_the_answer(horizon_client, tmp_path):
    """The request the C++ client builds is, value for value, the one encode_request builds; the
    node answers it, and the C++ client reads every knot's record (its slice, the record recipe) as
    the Python reader does, to the last bit."""
    import time

    from sva_linearizer.ros.node.horizon import TOPIC_ANSWER, TOPIC_REQUEST, decode_answer, encode_request, request_msg

    T = FakeTransport()
    feet = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
    node = LinearizerNode(T, {"robot": "solo12", "warn_period": 0, "contact_frames": feet})
    try:
        m = node.model
        desc = RecordDescription.from_json(T.published["linearization/description"][-1].data)
        rng = np.random.default_rng(9)
        N, dt = 6, 0.01
        Q = np.zeros((N, m.nq))
        for k in range(N):
            quat = rng.normal(size=4)
            Q[k, 3:7], Q[k, 7:] = quat / np.linalg.norm(quat), rng.uniform(-1, 1, m.nj)
        V, TAU = rng.normal(size=(N, m.nv)), rng.normal(size=(N, m.nj))
        active = np.array([[k % 2, 1 - k % 2, 1 - k % 2, k % 2] for k in range(N)], dtype=float)
        knots = tmp_path / "knots.bin"
        knots.write_bytes(np.hstack([Q, V, TAU, active]).astype("<f8").tobytes())
        req_file = tmp_path / "request.bin"
        r = subprocess.run([str(horizon_client), "request", str(knots), str(N), str(m.nq), str(m.nv), str(m.nj), "4",
                            "123", str(desc.id), str(dt), str(req_file), "0.25"], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        S = m.nq + m.nv + m.nj + 4
        assert r.stdout.split() == ["layout", "knots", str(N), str(N * S), "values", str(S), str(S), "offset", "13"]
        data = np.frombuffer(req_file.read_bytes(), dtype="<f8")
        want, n, s = encode_request(123, desc, Q, V, TAU, dt, active, restitution=0.25)
        np.testing.assert_array_equal(data, want)
        T.deliver(TOPIC_REQUEST, request_msg(T.types, data, n, s))
        end = time.monotonic() + 60
        while TOPIC_ANSWER not in T.published and time.monotonic() < end:
            time.sleep(0.005)
        msg = T.published[TOPIC_ANSWER][0]
        ans = decode_answer(msg, desc)
        assert ans.ok and len(ans.knots) == N
        ans_file = tmp_path / "answer.bin"
        ans_file.write_bytes(np.asarray(msg.data, dtype="<f8").tobytes())
        r = subprocess.run([str(horizon_client), "answer", str(ans_file), "123", str(desc.id)], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        lines = r.stdout.strip().splitlines()
        assert lines[0] == f"knots {N}"
        nv = m.nv
        for k, (line, rec) in enumerate(zip(lines[1:], ans.knots)):
            f = line.split()
            got = dict(zip(f[2::2], f[3::2]))
            assert int(got["seq"]) == k + 1 and int(got["stamp_ns"]) == rec.stamp_ns and int(got["m"]) == rec.m == 6
            assert float(got[f"Ad[1][{nv}]"]) == rec.Ad[1, nv] and float(got[f"Bd[{2 * nv - 1}][0]"]) == rec.Bd[-1, 0]
            assert float(got["q_next[0]"]) == rec.q_next[0] and float(got["forces[5]"]) == rec.forces[5]
            # every knot after the first lands a diagonal pair: a touchdown, its impact's sections
            assert (rec.reset is not None) == (k > 0) and ("reset[18][0]" in got) == (k > 0)
            if k > 0:
                assert float(got["reset[18][0]"]) == rec.reset[18, 0] and float(got["v_plus[0]"]) == rec.v_plus[0]
                assert float(got["impulses[0]"]) == rec.impulses[0]
        r = subprocess.run([str(horizon_client), "answer", str(ans_file), "124", str(desc.id)], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 1 and "not an answer to request 124" in r.stdout
    finally:
        node.close()
