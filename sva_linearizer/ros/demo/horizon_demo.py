# SPDX-License-Identifier: BSD-3-Clause
"""``sva-linearizer demo --control --horizon N``: a model-predictive controller in another process
closes the loop through the node's horizon topics (docs/ros.md, "An MPC on the horizon").

Three processes on loopback DDS, as in ``demo --control``: the node, the simulated robot (``sim
--mode control``: Pinocchio's dynamics, in lockstep with the commands) and this one. Each period
this process takes the measured state from the node's record of it (``linearization/record``),
sends its predicted trajectory as a horizon request (N knots, the contact schedule, dt = the loop's
period) with :class:`~sva_linearizer.ros.client.horizon_client.HorizonClient`, takes one Riccati
step along the knots of the answer (:class:`.mpc.HorizonMPC`) and publishes the torques on
``effort_controller/commands``. The tasks and their bounds are in :mod:`.tasks`:

- an arm (``--robot ur5``) tracks the fast reference; the one-step controller (:class:`.control.RecordLQR`,
  as ``demo --control`` runs it) runs the same task first (``--no-baseline`` skips it); both errors
  are printed, and the MPC's must be within :func:`.tasks.mpc_arm_bound` and at most half the
  one-step's;
- a quadruped shifts its weight, lifts a foot for 0.5 s and puts it down (the simulator and the
  knots follow the same schedule); its bounds are :data:`.tasks.QUADRUPED_BOUNDS`.

``corrupt_horizon`` (one of :data:`.mpc.HORIZON_CORRUPTIONS`) damages every answer (or request):
the loop must then fail. Exit code 0 when every bound is met.
"""
from __future__ import annotations

import re
import sys
import time

import numpy as np

#: record sections the controller does not read: left out of the answers
OMIT = ("A", "B", "nu_dot", "forces", "dforces_dz", "dforces_dtau")
#: the MPC's cost: on z's positions (pose and joints) and velocities, on the torques' change from
#: one knot to the next (from the running torque at knot 0): tracking first, the torque free
MPC_COST = {"q": 1.0e3, "v": 1.0e-2, "tau_rate": 1.0e-8}
#: a loop is given up (FAILED) when its error passes these (the robot is lost), or when nothing
#: comes for NO_ANSWER_S
LOST = {"joint_rad": 1.0, "base_m": 0.05}
NO_ANSWER_S = 20.0


class LoopFailed(RuntimeError):
    pass


class _OneStep:
    """RecordLQR behind the loop's interface (the baseline), on reference(t) (t from the loop's start)."""

    name = "one-step controller (RecordLQR)"

    def __init__(self, reference, Q, R):
        from .control import RecordLQR

        self.start = None
        self.lqr = RecordLQR(lambda t: reference(t - self.start), Q, R)   # RecordLQR: the records' clock

    def begin(self, rec, t):
        if self.start is None:
            self.start = rec.stamp_ns * 1e-9 - t
        return self.lqr.command(rec)

    def poll(self):
        return None


class _Horizon:
    """HorizonMPC behind the loop's interface: begin sends the request, poll steps on the answer."""

    def __init__(self, mpc, client, dt, corrupt, lift_index=None):
        self.mpc, self.client, self.dt, self.corrupt = mpc, client, dt, corrupt
        self.name = f"horizon MPC ({mpc.N} knot{'s' if mpc.N != 1 else ''})"
        self.future, self.rec, self.sent = None, None, 0.0
        self.round_trip_ms, self.lift_index = [], lift_index
        self.knots_off = 0          # answers' knots with the lifted foot inactive
        self.knots_seen = 0
        self.records_off = 0        # the node's per-state records with the lifted foot inactive

    def begin(self, rec, t):
        if self.lift_index is not None and rec.active is not None and rec.active[self.lift_index] == 0.0:
            self.records_off += 1
        Q, V, T, active = self.mpc.knots(rec.q, rec.v, t, rec.tau)
        if self.corrupt == "schedule_ignored" and active is not None:
            active = np.ones_like(active)
        self.rec, self.sent = rec, time.monotonic()
        self.future = self.client.request(Q, V, T, dt=self.dt, active=active, t0_ns=rec.stamp_ns, omit=OMIT)
        return None

    def poll(self):
        from .mpc import corrupt_knots

        if self.future is None:
            return None
        if not self.future.done():
            if time.monotonic() - self.sent > NO_ANSWER_S:
                raise LoopFailed(f"no answer to a horizon request within {NO_ANSWER_S:g} s")
            return None
        answer, self.future = self.future.answer, None
        self.round_trip_ms.append((time.monotonic() - self.sent) * 1e3)
        if not answer.ok:
            raise LoopFailed(f"the node answered the horizon request with status {answer.status}: {answer.error}")
        if self.lift_index is not None:
            self.knots_seen += len(answer.knots)
            self.knots_off += sum(1 for r in answer.knots if r.active is not None and r.active[self.lift_index] == 0.0)
        return self.mpc.step(corrupt_knots(answer.knots, self.corrupt), self.rec.tau)


def run_horizon_demo(knots=10, seconds=None, robot=None, rate=100.0, plant=None, corrupt_horizon=None, baseline=True,
                     out=None, startup_timeout=120.0) -> int:
    """The demo of the module docstring; seconds: the loop's length in the robot's time (default:
    3 s for an arm, the quadruped task's end + 0.2 s)."""
    from sva_linearizer.robots import load_robot

    from ..client.horizon_client import HorizonClient
    from ..client.record_reader import RecordReader
    from ..transports.loopback import loopback_config, loopback_env, private_domain_id
    from ..transports.transport_dds import DdsTransport
    from ..wire.qos import QOS_OUTPUT
    from . import tasks
    from .demo import COST, _stop_all, arm_bound, control_node_args, default_demo_robot, start_process, stop_process
    from .mpc import HORIZON_CORRUPTIONS, HorizonMPC
    from .plant import pin
    from .sim import STANDING_FEET, TOPIC_COMMANDS, initial_state

    out = out or sys.stdout
    robot = robot or default_demo_robot()
    plant = plant or ("pinocchio" if pin is not None else "package")
    if corrupt_horizon is not None and corrupt_horizon not in HORIZON_CORRUPTIONS:
        raise ValueError(f"unknown horizon corruption {corrupt_horizon!r} (one of {', '.join(HORIZON_CORRUPTIONS)})")
    model = load_robot(robot)
    feet = STANDING_FEET.get(robot) if model.floating_base else None
    if model.floating_base and not feet:
        raise ValueError(f"demo --control --horizon: '{robot}' has a floating base but no known feet "
                         f"(known: {', '.join(STANDING_FEET)})")
    if knots < 1:
        raise ValueError(f"demo --control --horizon N: N must be at least 1, got {knots}")
    dt = 1.0 / rate
    task_end = tasks.SHIFT_BACK[1] + 0.2
    if seconds is None:
        seconds = task_end if feet else 3.0
    if feet and seconds < task_end:
        raise ValueError(f"demo --control --horizon: the quadruped's task takes {task_end:g} s (--seconds)")
    if not feet and seconds < 1.5:
        raise ValueError("demo --control --horizon: the arm's errors count after 1 s: --seconds 1.5 at least")
    nv = model.nv
    q0, _, _ = initial_state(model, feet)
    if feet:
        plan = tasks.QuadrupedPlan(model, q0, feet, dt, seconds + (knots + 2) * dt)
        what = (f"shifts its weight ({plan.shift[0] * 1e3:+.1f}, {plan.shift[1] * 1e3:+.1f}) mm from "
                f"{tasks.SHIFT[0]:g} to {tasks.SHIFT[1]:g} s, lifts {tasks.LIFT_FOOT} {tasks.FOOT_HEIGHT * 1e3:g} mm "
                f"from {tasks.LIFT[0]:g} to {tasks.LIFT[1]:g} s, puts it down, shifts back from "
                f"{tasks.SHIFT_BACK[0]:g} to {tasks.SHIFT_BACK[1]:g} s")
    else:
        what = f"tracks each joint's {tasks.FAST_SWING:g} rad {tasks.FAST_HZ:g} Hz swing"
    print(f"demo --control --horizon {knots}: robot '{robot}' {what}; plant: {plant}; loop at {rate:g} Hz "
          f"(knots and node dt = {dt:g} s)" + (f"; horizon corrupted: {corrupt_horizon}" if corrupt_horizon else ""),
          file=out, flush=True)
    domain = private_domain_id()
    env = loopback_env(domain)
    node = start_process([sys.executable, "-m", "sva_linearizer.ros", "node", *control_node_args(robot, feet, dt)],
                         env, "  [node] ")
    transport = DdsTransport("sva_linearizer_mpc", domain_id=domain, config=loopback_config())
    pub = transport.create_publisher(TOPIC_COMMANDS, "std_msgs/msg/Float64MultiArray", QOS_OUTPUT)
    inbox = {"rec": None, "after_ns": -1}

    def on_record(rec, recv_ns):
        if rec.stamp_ns > inbox["after_ns"]:
            inbox["rec"] = rec

    Q_mpc = np.diag([MPC_COST["q"]] * nv + [MPC_COST["v"]] * nv)
    R_mpc = np.eye(model.nj) * MPC_COST["tau_rate"]
    results, code, sims = {}, 1, []
    try:
        reader = RecordReader(transport, on_record)
        client = HorizonClient(transport)
        if not client.wait_for_node(startup_timeout) or not transport.wait_for_writers(reader.record_reader, 10.0):
            raise RuntimeError("the node did not come up (see its output above)")
        sim_cmd = [sys.executable, "-m", "sva_linearizer.ros", "sim", "--mode", "control", "--robot", robot, "--rate",
                   str(rate), "--seconds", str(seconds + 1.0), "--plant", plant]

        def loop(ctrl, error, sim_extra=()):
            sim = start_process(sim_cmd + list(sim_extra), env, "  [sim]  ")
            sims.append(sim)
            log = _run_loop(transport, pub, inbox, ctrl, error, sim, node, seconds, startup_timeout, out)
            stop_process(sim)
            inbox["after_ns"] = max(inbox["after_ns"], log.get("last_ns", -1))
            inbox["rec"] = None
            time.sleep(0.3)                        # the pump thread prints the simulator's last lines
            log["sim_lines"] = list(sim.lines)
            return log

        if feet:
            ctrl = _Horizon(HorizonMPC(knots, dt, plan.reference, Q_mpc, R_mpc, True, schedule=plan.schedule),
                            client, dt, corrupt_horizon, lift_index=feet.index(tasks.LIFT_FOOT))
            results["mpc"] = loop(ctrl, _quadruped_error(plan), ["--push-force", "0", "--lift",
                                                                f"{tasks.LIFT_FOOT}:{tasks.LIFT[0]}:{tasks.LIFT[1]}"])
            code = _quadruped_verdict(results["mpc"], ctrl, out)
        else:
            task = tasks.arm_reference(q0, tasks.FAST_SWING, tasks.FAST_HZ)
            if baseline:
                one = _OneStep(task, np.diag([COST["q"]] * nv + [COST["v"]] * nv), np.eye(model.nj) * COST["tau"])
                results["one"] = loop(one, _arm_error(task))
            mpc_ref = tasks.arm_reference(q0, tasks.FAST_SWING, tasks.FAST_HZ, dt=dt)
            ctrl = _Horizon(HorizonMPC(knots, dt, mpc_ref, Q_mpc, R_mpc, False), client, dt, corrupt_horizon)
            results["mpc"] = loop(ctrl, _arm_error(task))
            code = _arm_verdict(results, rate, ctrl, arm_bound(rate, tasks.FAST_SWING, tasks.FAST_HZ),
                                tasks.mpc_arm_bound(rate), out)
    except KeyboardInterrupt:
        code = 130
    finally:
        _stop_all((*sims, node), transport)
    return code


def _arm_error(reference):
    def error(rec, t):
        return (float(np.max(np.abs(rec.q - reference(t)[0]))),)
    return error


def _quadruped_error(plan):
    from .control import state_minus

    def error(rec, t):
        q_ref, v_ref = plan.reference(t)
        z = state_minus(rec.q, rec.v, q_ref, v_ref, True)
        return float(np.linalg.norm(rec.q[:3] - q_ref[:3])), float(np.linalg.norm(z[3:6]))
    return error


def _lost(err) -> bool:
    if not np.all(np.isfinite(err)):
        return True
    return err[0] > (LOST["joint_rad"] if len(err) == 1 else LOST["base_m"])


def _run_loop(transport, pub, inbox, ctrl, error, sim, node, seconds, startup_timeout, out) -> dict:
    """Records -> the controller -> torque commands, until the robot's time reaches ``seconds``;
    -> the log (t, err per record, the failure if any, the wall time)."""
    T = transport.types
    log = {"t": [], "err": [], "failed": None, "n": 0}
    start_ns, busy, last_at = None, False, time.monotonic()
    limit = startup_timeout
    next_print = 0.0
    t0_wall = None
    try:
        while True:
            transport.spin_once(0.002)
            if sim.poll() is not None or node.poll() is not None:
                log["failed"] = log["failed"] or "the simulator or the node stopped"
                break
            if not busy and inbox["rec"] is not None:
                rec, inbox["rec"] = inbox["rec"], None
                last_at, limit = time.monotonic(), NO_ANSWER_S
                if start_ns is None:
                    start_ns, t0_wall = rec.stamp_ns, time.monotonic()
                t = (rec.stamp_ns - start_ns) * 1e-9
                log["last_ns"] = rec.stamp_ns
                err = error(rec, t)
                log["t"].append(t)
                log["err"].append(err)
                if _lost(err):
                    raise LoopFailed(f"the robot is lost at t = {t:.2f} s (error {err[0]:.3g})")
                if t >= next_print:
                    next_print = t + 0.25
                    what = (f"largest joint error {err[0] * 1e3:8.3f} mrad" if len(err) == 1 else
                            f"base {err[0] * 1e3:6.2f} mm, {err[1] * 1e3:6.2f} mrad from the plan")
                    print(f"[control] {ctrl.name}: t {t:5.2f} s  {what}", file=out, flush=True)
                if t >= seconds - 1e-9:
                    break
                tau = ctrl.begin(rec, t)
                busy = tau is None
                if tau is not None:
                    _publish(pub, T, tau)
                    log["n"] += 1
            elif busy:
                tau = ctrl.poll()
                if tau is not None:
                    busy = False
                    _publish(pub, T, tau)
                    log["n"] += 1
            elif time.monotonic() - last_at > limit:
                raise LoopFailed(f"no record for {limit:g} s")
    except (LoopFailed, ValueError, np.linalg.LinAlgError) as e:
        log["failed"] = f"{type(e).__name__}: {e}" if not isinstance(e, LoopFailed) else str(e)
        print(f"demo --control --horizon: {ctrl.name}: {log['failed']}", file=out, flush=True)
    log["wall"] = time.monotonic() - t0_wall if t0_wall is not None else 0.0
    return log


def _publish(pub, T, tau) -> None:
    if not np.all(np.isfinite(tau)):
        raise LoopFailed("the controller's torques are not finite")
    pub.publish(T.Float64MultiArray(layout=T.MultiArrayLayout(dim=[], data_offset=0), data=[float(x) for x in tau]))


def _loop_line(name, log, ctrl, out) -> None:
    n, wall = log["n"], max(log["wall"], 1e-9)
    t_end = log["t"][-1] if log["t"] else 0.0
    rt = getattr(ctrl, "round_trip_ms", None)
    extra = (f"; horizon request -> answer p50 {np.percentile(rt, 50):.1f} ms, p99 {np.percentile(rt, 99):.1f} ms"
             if rt else "")
    print(f"demo --control --horizon: {name}: {n} commands over {t_end:.2f} s of the robot's time in {wall:.2f} s "
          f"({n / wall:.1f} Hz){extra}", file=out, flush=True)


def _worst_after(log, t_from) -> float:
    t, err = np.array(log["t"]), np.array(log["err"])
    after = t >= t_from
    return float(err[after, 0].max()) if after.any() else float("inf")


def _complete(log, seconds_min) -> bool:
    return not log["failed"] and bool(log["t"]) and log["t"][-1] >= seconds_min


def _arm_verdict(results, rate, ctrl, one_bound, bound, out) -> int:
    one = results.get("one")
    if one is not None:
        _loop_line("one-step controller (RecordLQR)", one, None, out)
        if _complete(one, 1.0):
            w = _worst_after(one, 1.0)
            print(f"demo --control --horizon: one-step controller (RecordLQR): largest joint error after 1 s "
                  f"{w * 1e3:.3f} mrad (its bound, demo --control's: {one_bound * 1e3:.3g} mrad: "
                  f"{'met' if w <= one_bound else 'NOT met'})", file=out, flush=True)
        else:
            print(f"demo --control --horizon: one-step controller (RecordLQR): FAILED "
                  f"({one['failed'] or 'the loop did not run its time'})", file=out, flush=True)
    mpc = results["mpc"]
    _loop_line(ctrl.name, mpc, ctrl, out)
    if not _complete(mpc, 1.0):
        print(f"demo --control --horizon: {ctrl.name}: FAILED ({mpc['failed'] or 'the loop did not run its time'})",
              file=out, flush=True)
        return 1
    w = _worst_after(mpc, 1.0)
    ok = w <= bound
    half = ""
    if one is not None and _complete(one, 1.0):
        w1 = _worst_after(one, 1.0)
        ok = ok and w <= 0.5 * w1
        half = f"; {w / w1:.2f} of the one-step controller's (at most 0.5)"
    elif one is not None:
        ok = False
        half = "; the one-step controller's loop did not complete"
    print(f"demo --control --horizon: {ctrl.name}: largest joint error after 1 s {w * 1e3:.3f} mrad (bound "
          f"{bound * 1e3:.3g} mrad{half}): {'met' if ok else 'NOT met'}", file=out, flush=True)
    return 0 if ok else 1


_SIM_LIFT = re.compile(r"highest ([-\d.]+) mm above where it stood, ([-\d.]+) mm from it at touchdown, ([-\d.]+) mm "
                       r"at the end; smallest normal force on a foot in contact while it was up ([-\d.infa]+) N, on "
                       r"any foot over the last 0.1 s ([-\d.infa]+) N")


def _quadruped_verdict(log, ctrl, out) -> int:
    from . import tasks

    B = tasks.QUADRUPED_BOUNDS
    _loop_line(ctrl.name, log, ctrl, out)
    if not _complete(log, tasks.SHIFT_BACK[1]):
        print(f"demo --control --horizon: {ctrl.name}: FAILED ({log['failed'] or 'the loop did not run its time'})",
              file=out, flush=True)
        return 1
    err = np.array(log["err"])
    base, tilt = float(err[:, 0].max()), float(err[:, 1].max())
    print(f"demo --control --horizon: the knots of the answers with {tasks.LIFT_FOOT} off the ground: "
          f"{ctrl.knots_off} of {ctrl.knots_seen}; the node's records of the measured states: {ctrl.records_off} "
          f"(the schedule: {tasks.LIFT[0]:g} to {tasks.LIFT[1]:g} s)", file=out, flush=True)
    m = next((_SIM_LIFT.search(line) for line in reversed(log["sim_lines"]) if _SIM_LIFT.search(line)), None)
    if m is None:
        print("demo --control --horizon: FAILED (the simulator did not report the lifted foot)", file=out, flush=True)
        return 1
    high, touchdown, end, fz_up, fz_end = (float(x) for x in m.groups())
    checks = [
        (f"base within {base * 1e3:.2f} mm of its plan (bound {B['base_m'] * 1e3:g})", base <= B["base_m"]),
        (f"rotation from the plan at most {tilt * 1e3:.2f} mrad (bound {B['tilt_rad'] * 1e3:g})",
         tilt <= B["tilt_rad"]),
        (f"{tasks.LIFT_FOOT} lifted {high:.1f} mm (at least {B['lift_min_m'] * 1e3:g})",
         high * 1e-3 >= B["lift_min_m"]),
        (f"put down {touchdown:.2f} mm from where it stood, {end:.2f} mm at the end (at most "
         f"{B['touchdown_m'] * 1e3:g})", max(touchdown, end) * 1e-3 <= B["touchdown_m"]),
        (f"normal forces on the feet in contact while it was up at least {fz_up:.2f} N, on all four over the last "
         f"0.1 s {fz_end:.2f} N (above {B['normal_force_min_n']:g})", min(fz_up, fz_end) > B["normal_force_min_n"]),
        (f"knots with {tasks.LIFT_FOOT} off the ground: {ctrl.knots_off}, records: {ctrl.records_off}",
         ctrl.knots_off > 0 and ctrl.records_off > 0),
    ]
    ok = all(c for _, c in checks)
    print("demo --control --horizon: " + "; ".join(f"{text}: {'met' if c else 'NOT met'}" for text, c in checks)
          + f". The quadruped's task: {'met' if ok else 'NOT met'}", file=out, flush=True)
    return 0 if ok else 1
