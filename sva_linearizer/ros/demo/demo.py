# SPDX-License-Identifier: BSD-3-Clause
"""``sva-linearizer demo``: a simulated robot, the node and a live echo of its records, on loopback DDS.

Three processes on a private DDS domain confined to 127.0.0.1: the simulated robot (by default
Solo-12 standing still on its four feet, or the bundled quadruped when example-robot-data is not
installed; it publishes joint_states, odom and the active contact set), the node (``sva-linearizer
node --transport dds`` with the four feet as world-aligned point contacts), and this one, which
reads the node's linearization records (:class:`~sva_linearizer.ros.client.record_reader.RecordReader`) and
prints sizes, stamp, latency, a few eigenvalues of A and the contact forces for a few seconds;
then everything is stopped and the demo exits. A robot with
no known feet (``--robot ur5``) runs as before: free motion under a joint PD controller.

Child processes run the very package this process imported (``_child.module_command``), not
one that happens to be importable from the current directory (a checkout), so the demo, its
children and the installed commands share one numba cache. In a cold cache the demo decides the core and
contact kernel groups first, so that they compile in one background process while every process
answers from the plain-Python kernels; the node switches to the compiled ones when they are ready.
"""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import numpy as np

from ..._child import same_package
from ..client.record_reader import RecordReader
from ..transports.loopback import loopback_config, loopback_env, private_domain_id
from ..transports.transport_dds import DdsTransport
from ..wire.qos import QOS_OUTPUT


def _pump(stream, sink, prefix, echo):
    for line in iter(stream.readline, ""):
        sink.append(line.rstrip("\n"))
        if echo:
            print(f"{prefix}{line.rstrip()}", flush=True)


def start_process(cmd, env, prefix, echo=True):
    """Child process with stdout+stderr collected (and echoed with a prefix) by a thread.
    ``[sys.executable, "-m", "sva_linearizer...", ...]`` runs this process's copy of the package
    (``_child.module_command``)."""
    proc = subprocess.Popen(same_package(cmd), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            bufsize=1)
    proc.lines = []
    threading.Thread(target=_pump, args=(proc.stdout, proc.lines, prefix, echo), daemon=True).start()
    return proc


def stop_process(proc, timeout=10.0):
    """SIGTERM, then SIGKILL after ``timeout``; returns the exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)
    return proc.returncode


def _stop_all(procs, transport) -> None:
    """Stop the demo's children, close its transport, let the pump threads print the last lines."""
    for proc in procs:
        if proc is not None:
            stop_process(proc)
    transport.close()
    time.sleep(0.2)


def default_demo_robot() -> str:
    """solo12 when example-robot-data is installed, else the bundled quadruped."""
    from sva_linearizer.robots import robot_urdf_path

    try:
        robot_urdf_path("solo12")
        return "solo12"
    except (ValueError, OSError):
        return "quadruped"


def run_demo(seconds=5.0, robot=None, rate=100.0, startup_timeout=120.0, out=None) -> int:
    from .sim import STANDING_FEET

    out = out or sys.stdout
    robot = robot or default_demo_robot()
    feet = STANDING_FEET.get(robot)
    domain = private_domain_id()
    env = loopback_env(domain)
    py = sys.executable
    what = (f"standing on four point contacts ({', '.join(feet)}, world-aligned)" if feet
            else "free motion under joint PD control, no contacts")
    print(f"demo: robot '{robot}', {what}; DDS domain {domain} on loopback (127.0.0.1, no multicast); "
          f"joint_states at {rate:g} Hz for {seconds:g} s", file=out, flush=True)
    weight = None
    if feet:
        import sva_linearizer as sl
        from sva_linearizer._jit import decide_groups
        from sva_linearizer.robots import load_robot

        decide_groups("core", "contacts")   # a cold cache: the node's kernels compile in one process

        model = load_robot(robot)
        # the base's gravity wrench at rest, level: its z force is the robot's weight
        weight = abs(sl.extended_inverse_dynamics(model, sl.State(model), np.zeros(model.nv))[2])
    transport = DdsTransport("sva_linearizer_echo", domain_id=domain, config=loopback_config())
    node_args = ["--robot", robot, "--transport", "dds", "--param", "warn_period=1.0"]
    if feet:
        node_args += ["--param", f"contact_frames=[{', '.join(feet)}]",
                      "--param", "contact_references=world_aligned"]
    node = start_process([py, "-m", "sva_linearizer.ros", "node", *node_args], env, "  [node] ")
    sim = None
    stats = {"n": 0, "last_print": 0.0, "lat": [], "first": None}

    def on_record(rec, recv_ns):
        now = time.monotonic()
        stats["n"] += 1
        stats["lat"].append((recv_ns - rec.stamp_ns) * 1e-6)
        if stats["first"] is None:
            stats["first"] = now
        if now - stats["last_print"] >= 0.5:
            stats["last_print"] = now
            ev = np.linalg.eigvals(rec.A)
            ev = ev[np.argsort(-ev.real)][:4]
            evs = ", ".join(f"{e.real:+.3g}{e.imag:+.3g}j" if abs(e.imag) > 1e-9 else f"{e.real:+.3g}"
                            for e in ev)
            print(f"[echo] seq {rec.seq:5d}  stamp {rec.stamp_ns * 1e-9:.3f}  A {rec.A.shape[0]}x"
                  f"{rec.A.shape[1]}  B {rec.B.shape[0]}x{rec.B.shape[1]}  latency "
                  f"{stats['lat'][-1]:.2f} ms  eig(A), largest real parts: {evs}", file=out, flush=True)
            if rec.forces is not None and rec.contacts:
                starts = np.cumsum([0] + [dim for _, dim in rec.contacts])[:-1]
                fz = [rec.forces[k + 2] for k in starts]       # world_aligned: z is vertical
                print("[echo]        contact forces on the robot, world z (N): "
                      + ", ".join(f"{frame} {f:.2f}" for (frame, _), f in zip(rec.contacts, fz))
                      + f"; sum {sum(fz):.2f} N" + (f" (weight m g = {weight:.2f} N)" if weight else "")
                      + f"; dforces_dz {rec.dforces_dz.shape[0]}x{rec.dforces_dz.shape[1]}",
                      file=out, flush=True)

    code = 1
    try:
        reader = RecordReader(transport, on_record)
        print("demo: starting the node",
              file=out, flush=True)
        if not transport.wait_for_writers(reader.record_reader, startup_timeout):
            raise RuntimeError("the node did not come up (see its output above)")
        sim = start_process([py, "-m", "sva_linearizer.ros", "sim", "--robot", robot, "--rate", str(rate),
                             "--mode", "standing" if feet else "dynamics"], env, "  [sim]  ")
        deadline = time.monotonic() + startup_timeout
        while stats["first"] is None and time.monotonic() < deadline:
            transport.spin_once(0.1)
            if node.poll() is not None or sim.poll() is not None:
                break
        if stats["first"] is None:
            print("demo: no record arrived (see the node's output above)", file=out, flush=True)
        else:
            end = stats["first"] + seconds
            while time.monotonic() < end and node.poll() is None:
                transport.spin_once(min(0.1, max(0.0, end - time.monotonic())))
            n, dt = stats["n"], time.monotonic() - stats["first"]
            lat = np.array(stats["lat"])
            print(f"demo: {n} records in {dt:.1f} s ({n / dt:.1f} Hz); latency joint state -> record "
                  f"p50 {np.percentile(lat, 50):.2f} ms, p99 {np.percentile(lat, 99):.2f} ms; "
                  f"records that did not decode {reader.bad}", file=out, flush=True)
            code = 0 if n > 0 else 1
    except KeyboardInterrupt:
        code = 130
    finally:
        _stop_all((sim, node), transport)
    print(f"demo: done (node exit code {node.returncode})", file=out, flush=True)
    return code


#: The closed-loop demo's reference for an arm: each joint swings by ARM_SWING rad at ARM_HZ
#: around where it started; its costs (Q on the position and velocity errors, R on the torque).
ARM_SWING, ARM_HZ = 0.3, 0.5
COST = {"q": 1.0e3, "v": 1.0, "tau": 1.0e-3}
#: The verdict's bounds (docs/ros.md, "A controller on the record"). Arm: the largest joint error
#: after the first second, at most half of what the reference moves in one period at its fastest
#: (ARM_SWING 2 pi ARM_HZ / rate / 2): a loop that mispredicts one period's motion (the drift) lags
#: by about a whole one. Quadruped: the base's distance from where it stood and its tilt, averaged
#: over the last half second, and the largest distance while it is pushed.
BOUNDS = {"base_offset_m": 0.001, "base_tilt_rad": 0.005, "push_peak_m": 0.02}


def arm_bound(rate: float, swing: float = ARM_SWING, hz: float = ARM_HZ) -> float:
    return swing * 2 * np.pi * hz / rate / 2


def control_node_args(robot: str, feet, dt: float) -> list:
    """The node's arguments in the closed-loop demos: DDS, dt = the loop's period, a quadruped's
    feet as world-aligned point contacts with the plant's Baumgarte gains."""
    from .sim import BAUMGARTE

    args = ["--robot", robot, "--transport", "dds", "--param", "warn_period=1.0", "--param", f"dt={dt}"]
    if feet:
        args += ["--param", f"contact_frames=[{', '.join(feet)}]", "--param", "contact_references=world_aligned",
                 "--param", f"contact_baumgarte_kp={BAUMGARTE[0]}", "--param", f"contact_baumgarte_kd={BAUMGARTE[1]}"]
    return args


def run_control_demo(seconds=5.0, robot=None, rate=100.0, plant=None, corrupt_record=None, out=None,
                     startup_timeout=120.0) -> int:
    """``sva-linearizer demo --control``: the node, a simulated robot taking torque commands (the
    plant: Pinocchio when installed, else the package's own dynamics) and, in this process, a
    controller (control.RecordLQR) that reads only the node's records and sends torques. A
    quadruped stands and is pushed; an arm tracks a moving joint reference. Prints the push, the
    errors as they go, the loop's rate and latency, and the verdict against BOUNDS (exit code 0
    when met). corrupt_record: one of control.CORRUPTIONS, applied to every record before the
    controller sees it (the loop must then fail)."""
    from sva_linearizer.robots import load_robot

    from .control import RecordLQR, corrupt
    from .plant import pin
    from .sim import STANDING_FEET, TOPIC_COMMANDS

    out = out or sys.stdout
    robot = robot or default_demo_robot()
    plant = plant or ("pinocchio" if pin is not None else "package")
    model = load_robot(robot)
    feet = STANDING_FEET.get(robot) if model.floating_base else None
    if model.floating_base and not feet:
        raise ValueError(f"demo --control: '{robot}' has a floating base but no known feet "
                         f"(known: {', '.join(STANDING_FEET)}); an arm or a standing quadruped")
    domain = private_domain_id()
    env = loopback_env(domain)
    dt = 1.0 / rate
    task = ("standing on four point contacts, pushed sideways" if feet
            else f"tracking each joint's {ARM_SWING:g} rad {ARM_HZ:g} Hz swing")
    print(f"demo --control: robot '{robot}', {task}; plant: {plant}; loop at {rate:g} Hz (node dt = {dt:g} s)"
          + (f"; records corrupted: {corrupt_record}" if corrupt_record else ""), file=out, flush=True)
    node = start_process([sys.executable, "-m", "sva_linearizer.ros", "node", *control_node_args(robot, feet, dt)],
                         env, "  [node] ")
    transport = DdsTransport("sva_linearizer_controller", domain_id=domain, config=loopback_config())
    pub = transport.create_publisher(TOPIC_COMMANDS, "std_msgs/msg/Float64MultiArray", QOS_OUTPUT)
    nv = model.nv
    Q = np.diag([COST["q"]] * nv + [COST["v"]] * nv)
    R = np.eye(model.nj) * COST["tau"]
    start = {}

    def reference(t):
        q0 = start["q"]
        if feet:
            return q0, np.zeros(nv)
        w = 2 * np.pi * ARM_HZ
        x = t - start["t"]
        return q0 + ARM_SWING * np.sin(w * x), np.full(nv, ARM_SWING * w) * np.cos(w * x)

    ctrl = RecordLQR(reference, Q, R)
    log = {"wall": [], "err": [], "t": [], "n": 0, "failed": None, "last_print": 0.0}

    def on_record(rec, recv_ns):
        if log["failed"]:
            return
        if not start:
            start.update(q=rec.q.copy(), v=rec.v.copy(), t=rec.stamp_ns * 1e-9)
        t = rec.stamp_ns * 1e-9 - start["t"]
        used = corrupt(rec, corrupt_record) if corrupt_record else rec
        try:
            tau = ctrl.command(used)
        except (ValueError, np.linalg.LinAlgError) as e:
            log["failed"] = f"{type(e).__name__}: {e}"
            print(f"demo --control: the controller cannot use the record: {log['failed']}", file=out, flush=True)
            return
        if not np.all(np.isfinite(tau)):
            log["failed"] = "the controller's torques are not finite"
            return
        pub.publish(transport.types.Float64MultiArray(
            layout=transport.types.MultiArrayLayout(dim=[], data_offset=0), data=[float(x) for x in tau]))
        log["wall"].append(time.monotonic())
        log["n"] += 1
        q_ref, _ = reference(rec.stamp_ns * 1e-9)
        if feet:
            from .control import state_minus
            z = state_minus(rec.q, rec.v, q_ref, np.zeros(nv), True)
            err = (float(np.linalg.norm(rec.q[:3] - q_ref[:3])), float(np.linalg.norm(z[3:6])))
        else:
            err = (float(np.max(np.abs(rec.q - q_ref))), 0.0)
        log["t"].append(t)
        log["err"].append(err)
        if t - log["last_print"] >= 0.25:
            log["last_print"] = t
            what = (f"base offset {err[0] * 1e3:7.2f} mm, tilt {err[1] * 1e3:6.2f} mrad" if feet
                    else f"largest joint error {err[0] * 1e3:7.2f} mrad")
            print(f"[control] t {t:5.2f} s  {what}  |tau| {np.linalg.norm(tau):7.2f} N m", file=out, flush=True)

    code = 1
    sim = None
    try:
        reader = RecordReader(transport, on_record)
        if not transport.wait_for_writers(reader.record_reader, startup_timeout):
            raise RuntimeError("the node did not come up (see its output above)")
        sim = start_process([sys.executable, "-m", "sva_linearizer.ros", "sim", "--mode", "control", "--robot", robot,
                             "--rate", str(rate), "--seconds", str(seconds + 1.0), "--plant", plant], env, "  [sim]  ")
        deadline = time.monotonic() + startup_timeout
        while not start and time.monotonic() < deadline and node.poll() is None and sim.poll() is None:
            transport.spin_once(0.1)
        # the loop's own time (the simulator's clock: slower than the wall's on a busy machine)
        deadline = time.monotonic() + 20 * seconds + 60.0
        while (start and (not log["t"] or log["t"][-1] < seconds) and time.monotonic() < deadline
               and node.poll() is None and sim.poll() is None and not log["failed"]):
            transport.spin_once(0.05)
        code = _control_verdict(log, feet, seconds, rate, out)
        if sim.poll() is None:
            stop_process(sim)
        sim.wait(10)
    except KeyboardInterrupt:
        code = 130
    finally:
        _stop_all((sim, node), transport)
    return code


def _control_verdict(log, feet, seconds, rate, out) -> int:
    """Print the loop's figures and the verdict against BOUNDS; 0 when met."""
    if log["failed"] or not log["t"]:
        print(f"demo --control: FAILED ({log['failed'] or 'no record arrived'})", file=out, flush=True)
        return 1
    t, err = np.array(log["t"]), np.array(log["err"])
    wall = max(log["wall"][-1] - log["wall"][0], 1e-9)
    print(f"demo --control: {log['n']} records -> torque commands over {t[-1]:.2f} s of the robot's time in "
          f"{wall:.2f} s ({log['n'] / wall:.1f} Hz); the simulator's round trip below", file=out, flush=True)
    if t[-1] < 0.9 * seconds:
        print(f"demo --control: FAILED (the loop ran {t[-1]:.1f} of {seconds:g} s)", file=out, flush=True)
        return 1
    if feet:
        tail = t >= t[-1] - 0.5
        offset, tilt = float(err[tail, 0].mean()), float(err[tail, 1].mean())
        peak = float(err[:, 0].max())
        ok = (offset <= BOUNDS["base_offset_m"] and tilt <= BOUNDS["base_tilt_rad"]
              and peak <= BOUNDS["push_peak_m"] and np.all(np.isfinite(err)))
        print(f"demo --control: push recovery: largest base offset {peak * 1e3:.2f} mm (bound "
              f"{BOUNDS['push_peak_m'] * 1e3:g}); over the last 0.5 s offset {offset * 1e3:.3f} mm (bound "
              f"{BOUNDS['base_offset_m'] * 1e3:g}), tilt {tilt * 1e3:.3f} mrad "
              f"(bound {BOUNDS['base_tilt_rad'] * 1e3:g}): "
              f"{'met' if ok else 'NOT met'}", file=out, flush=True)
    else:
        after = t >= 1.0
        worst = float(err[after, 0].max()) if after.any() else float("inf")
        ok = worst <= arm_bound(rate)
        print(f"demo --control: tracking: largest joint error after 1 s {worst * 1e3:.3f} mrad (bound "
              f"{arm_bound(rate) * 1e3:.3g}): {'met' if ok else 'NOT met'}", file=out, flush=True)
    return 0 if ok else 1
