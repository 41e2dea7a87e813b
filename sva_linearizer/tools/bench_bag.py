# SPDX-License-Identifier: BSD-3-Clause
"""`sva-linearizer bench-bag`: the speed of `sva-linearizer bag` end to end.

Writes a recording (MCAP) of Solo-12 at 1 kHz: per state a joint state, its odometry and its
contact set (the four feet on a trot-like schedule), random valid states; then linearizes it as
``sva-linearizer bag --robot solo12`` with the four feet as world-aligned point contacts and
``dt`` = 0.01 s (the full record: the point, the drift, A, B, Ad, Bd, the next state, the forces
and their derivatives), in this process and in worker processes, and prints the states per
second end to end (read, pair, linearize, write), per worker, the CPU time per state (this process
and its workers) and where the time goes.
``--profile``: the in-process run under cProfile, its functions by their own time.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

import numpy as np

FEET = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
PARAMS = {"robot": "solo12", "contact_frames": FEET, "contact_references": ["world_aligned"], "dt": 0.01}


def write_recording(path: str, states: int, rate: float = 1000.0, seed: int = 0) -> None:
    """A rosbag2 (MCAP) of ``states`` Solo-12 states at ``rate``: /joint_states, /odom and /contacts
    of each, stamped with the state's time and logged 50 us later."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    from sva_linearizer.robots import load_robot
    from sva_linearizer.ros.wire import cdr
    from sva_linearizer.ros.wire.messages import contacts_msg, joint_state_msg, odometry_msg

    model = load_robot("solo12")
    ts = get_typestore(Stores.ROS2_JAZZY)
    T = cdr.LIGHT
    rng = np.random.default_rng(seed)
    period = int(round(1e9 / rate))
    with Writer(path, version=8, storage_plugin=StoragePlugin.MCAP) as w:
        c_js = w.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=ts)
        c_odom = w.add_connection("/odom", "nav_msgs/msg/Odometry", typestore=ts)
        c_contacts = w.add_connection("/contacts", "sensor_msgs/msg/JointState", typestore=ts)
        for k in range(states):
            stamp = 10 ** 18 + k * period
            phase = (k // 50) % 3         # all four feet down, one diagonal lifted, the other
            lifted = {1: (0, 3), 2: (1, 2)}.get(phase, ())
            down = [f for i, f in enumerate(FEET) if i not in lifted]
            quat = rng.normal(size=4)
            quat /= np.linalg.norm(quat)
            w.write(c_contacts, stamp + 49_000, cdr.encode_joint_state(contacts_msg(T, stamp, down)))
            w.write(c_odom, stamp + 50_000, cdr.encode_odometry(odometry_msg(
                T, stamp, rng.normal(size=3) * 0.1, quat, rng.normal(size=6), child_frame_id=model.base_name)))
            w.write(c_js, stamp + 50_000, cdr.encode_joint_state(joint_state_msg(
                T, stamp, model.joint_names, rng.uniform(-0.8, 0.8, model.nj), rng.normal(size=model.nj),
                rng.normal(size=model.nj))))


def _cpu() -> float:
    """CPU seconds (user + system) of this process and of its children that ended (the workers)."""
    import resource

    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def run(states: int = 30000, workers=(1, 2), folder: str | None = None, profile: bool = False) -> int:
    from sva_linearizer.ros.bag.run import linearize_bag

    own = folder is None
    folder = folder or tempfile.mkdtemp(prefix="sva-linearizer-bench-bag-")
    try:
        recording = os.path.join(folder, "recording")
        if not os.path.exists(recording):
            t0 = time.perf_counter()
            write_recording(recording, states)
            print(f"recording: {states:,} states of solo12 at 1 kHz (joint states, odometry, contact sets) in "
                  f"{time.perf_counter() - t0:.1f} s: {recording}")
        print(f"linearizing as `sva-linearizer bag {recording} --robot solo12` with the four feet (world-aligned "
              f"point contacts) and dt 0.01: the full record; load average {os.getloadavg()[0]:.2f} at the start")
        print(f"{'workers':>8} {'states':>8} {'wall s':>7} {'start s':>8} {'states/s':>9} {'per worker':>11} "
              f"{'CPU/state':>10}   time per state")
        for n in workers:
            out = os.path.join(folder, f"out-{n}")
            shutil.rmtree(out, ignore_errors=True)
            cpu0 = _cpu()
            s = linearize_bag(recording, out, PARAMS, workers=n)
            cpu = (_cpu() - cpu0) / s.states * 1e6
            rate = s.states / s.wall_s
            us = ", ".join(f"{k} {v / s.states * 1e6:.0f} us" for k, v in s.seconds.items())
            print(f"{n:>8} {s.states:>8,} {s.wall_s:>7.1f} {s.start_s:>8.1f} {rate:>9,.0f} {rate / n:>11,.0f} "
                  f"{cpu:>7.0f} us   {us}")
            shutil.rmtree(out, ignore_errors=True)
        print(f"load average {os.getloadavg()[0]:.2f} at the end")
        if profile:
            import cProfile
            import pstats

            out = os.path.join(folder, "out-profile")
            shutil.rmtree(out, ignore_errors=True)
            pr = cProfile.Profile()
            pr.enable()
            linearize_bag(recording, out, PARAMS)
            pr.disable()
            shutil.rmtree(out, ignore_errors=True)
            pstats.Stats(pr, stream=sys.stdout).sort_stats("tottime").print_stats(25)
    finally:
        if own:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


def cmd_bench_bag(args) -> int:
    workers = tuple(int(x) for x in str(args.workers).split(","))
    return run(states=args.states, workers=workers, folder=args.folder, profile=args.profile)


def add_subcommand(sub) -> None:
    p = sub.add_parser("bench-bag", help="the speed of `sva-linearizer bag` end to end on a Solo-12 recording",
                       description=__doc__.split("\n\n")[1])
    p.add_argument("--states", type=int, default=30000, help="states in the recording (default 30000: 30 s at 1 kHz)")
    p.add_argument("--workers", default="1,2", help="comma-separated worker counts (default 1,2; 1: this process)")
    p.add_argument("--folder", default=None,
                   help="keep the recording in this folder (and reuse it when it is there); default: a temporary one")
    p.add_argument("--profile", action="store_true", help="also profile the in-process run (cProfile, by own time)")
    p.set_defaults(func=cmd_bench_bag)
