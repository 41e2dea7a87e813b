"""A simulated robot that publishes joint_states and odom (for the demo and the benchmark).

``dynamics`` mode integrates the robot's own forward dynamics (ABAmb, semi-implicit Euler on
SE(3) x R^n, no contacts: a floating base is in free flight) under a joint PD controller tracking
slow sinusoids, and publishes the state with the current wall-clock stamp. ``random`` mode cycles
through random valid states (what the benchmark uses: the node's cost does not depend on where the
states come from, and the publisher then costs almost nothing).
"""
from __future__ import annotations

import math
import signal
import sys
import time

import numpy as np

import sva_linearizer as sl
from sva_linearizer.spatial import matrix_to_quat, se3_exp

from .messages import joint_state_msg, odometry_msg


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

    from .node import QOS_STATE_PUB
    from .transport import make_transport

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
            if pub_odom is not None:
                pub_odom.publish(odometry_msg(T, stamp, p, quat, tw))
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
