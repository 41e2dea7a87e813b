# SPDX-License-Identifier: BSD-3-Clause
"""A peer process for the pairing tests: publishes joint states (shuffled joint order) and odometry
with the same stamp at a fixed rate, in a chosen order, and logs what it sent.

    python stamp_stream.py --peer rclpy --domain D --namespace NS --robot solo12 --rate 1000
        --seconds 3 --order odom_first|joints_first [--no-odom-every K] --log FILE

The odometry of a stamp carries the stamp in its base position: p = (odom_tag(stamp), 0, 0), so a
record shows which odometry sample gave its base. Each line of the log is "<stamp> <1|0>": the
stamp of a joint state and whether odometry of that stamp was sent. The last line of stdout is
"stream: sent N joint states in T s".
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ros_helpers.dds_harness import make_peer  # noqa: E402
from sva_linearizer.robots import load_robot  # noqa: E402
from sva_linearizer.ros.wire.messages import joint_state_msg, odometry_msg  # noqa: E402
from sva_linearizer.ros.node.node import QOS_STATE_PUB  # noqa: E402


def odom_tag(stamp_ns: int) -> float:
    """The base x position the stream gives the odometry of a stamp: its fraction of a second."""
    return (stamp_ns % 1_000_000_000) / 1e9


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", default="rclpy")
    ap.add_argument("--domain", type=int, required=True)
    ap.add_argument("--namespace", default="")
    ap.add_argument("--robot", default="solo12")
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--order", choices=("odom_first", "joints_first"), default="odom_first")
    ap.add_argument("--no-odom-every", type=int, default=0, help="every K-th stamp has no odometry")
    ap.add_argument("--log", required=True)
    a = ap.parse_args(argv)
    model = load_robot(a.robot, floating_base=True)
    rng = np.random.default_rng(5)
    table = []
    for _ in range(64):
        quat = rng.normal(size=4)
        perm = rng.permutation(model.nj)
        table.append((quat / np.linalg.norm(quat), rng.normal(size=6), [model.joint_names[i] for i in perm],
                      rng.uniform(-1, 1, model.nj), rng.normal(size=model.nj), rng.normal(size=model.nj)))
    T = make_peer(a.peer, "sva_stamp_stream", a.domain, a.namespace)
    types = T.types
    pub_js = T.create_publisher("joint_states", "sensor_msgs/msg/JointState", QOS_STATE_PUB)
    pub_odom = T.create_publisher("odom", "nav_msgs/msg/Odometry", QOS_STATE_PUB)
    ok = T.wait_for_readers(pub_js, 60.0) and T.wait_for_readers(pub_odom, 60.0)
    if not ok:
        print("stream: the node's subscriptions never matched", flush=True)
        return 1
    time.sleep(0.5)
    period = 1.0 / a.rate
    sent, lines = 0, []
    t0 = time.monotonic()
    next_t = t0
    while time.monotonic() - t0 < a.seconds:
        quat, twist, names, s, r, tau = table[sent % len(table)]
        stamp = time.time_ns()
        with_odom = not (a.no_odom_every and sent % a.no_odom_every == a.no_odom_every - 1)
        js = joint_state_msg(types, stamp, names, s, r, tau)
        odom = odometry_msg(types, stamp, np.array([odom_tag(stamp), 0.0, 0.0]), quat, twist,
                            child_frame_id=model.base_name) if with_odom else None
        if odom is not None and a.order == "odom_first":
            pub_odom.publish(odom)
        pub_js.publish(js)
        if odom is not None and a.order == "joints_first":
            pub_odom.publish(odom)
        lines.append(f"{stamp} {int(with_odom)}")
        sent += 1
        next_t += period
        delay = next_t - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    elapsed = time.monotonic() - t0
    with open(a.log, "w", encoding="ascii") as f:
        f.write("\n".join(lines) + "\n")
    time.sleep(0.5)          # let the last samples leave before the participant goes
    T.close()
    print(f"stream: sent {sent} joint states in {elapsed:.3f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
