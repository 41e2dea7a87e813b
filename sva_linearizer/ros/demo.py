"""``sva-linearizer demo``: a simulated robot, the node and a live echo of its records, on loopback DDS.

Three processes on a private DDS domain confined to 127.0.0.1: the simulated robot (by default
Solo-12 standing still on its four feet, or the bundled quadruped when example-robot-data is not
installed; it publishes joint_states, odom and the active contact set), the node (``sva-linearizer
node --transport dds`` with the four feet as world-aligned point contacts), and this one, which
reads the node's linearization records (:class:`~sva_linearizer.ros.record.RecordReader`) and
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

from .._child import same_package
from .record import RecordReader
from .loopback import loopback_config, loopback_env, private_domain_id
from .transport_dds import DdsTransport


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
        for proc in (sim, node):
            if proc is not None:
                stop_process(proc)
        transport.close()
        time.sleep(0.2)  # let the pump threads print the children's last lines
    print(f"demo: done (node exit code {node.returncode})", file=out, flush=True)
    return code
