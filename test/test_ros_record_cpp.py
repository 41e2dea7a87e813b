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
from sva_linearizer.ros.messages import joint_state_msg, odometry_msg  # noqa: E402
from sva_linearizer.ros.node import LinearizerNode  # noqa: E402
from sva_linearizer.ros.record import RecordDescription, decode_record  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
EIGEN = "/usr/include/eigen3"


@pytest.fixture(scope="module")
def consumer(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None or not os.path.isdir(EIGEN):
        pytest.skip("needs a C++ compiler and Eigen (apt install g++ libeigen3-dev)")
    exe = tmp_path_factory.mktemp("cpp") / "record_consumer"
    r = subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Werror", f"-I{EIGEN}",
                        str(HERE / "cpp" / "record_consumer.cpp"), "-o", str(exe)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return exe


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
