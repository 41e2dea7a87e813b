# SPDX-License-Identifier: BSD-3-Clause
"""``sva-linearizer bench-node``: the node's sustained output rate and its latency over loopback DDS.

For each robot and input rate, three processes on a private loopback-only DDS domain:

* a publisher (``sim --mode random``): odom + joint_states at the target rate, each stamped with
  the wall clock just before it is written;
* the node (``node --transport dds``), exactly as a user runs it;
* this process: receives the node's linearization records (RecordReader) and takes
  latency = (time the record is decoded here) - (the joint state's stamp).

So the latency is end to end: publisher serialisation, DDS loopback, the node's validation,
linearization and serialisation of the record (and of the point and A, B beside it), DDS again,
and deserialisation in Python here. The output rate is records per second after a warm-up. When the
node is slower than the input
it takes the newest joint state waiting rather than queueing (the others: ``superseded``).

Where the node's time goes: ``node CPU/pair`` is the node process's CPU time (user + system, from
``/proc``; Linux only) in the measurement window divided by the records received in it, and ``node
linearize`` is the node's own mean wall time in :func:`sva_linearizer.linearize`; the difference
is the node's DDS work in Python (decoding joint states and every odometry sample, encoding and
writing the record, the point and A, B) and its validation.
"""
from __future__ import annotations

import os
import re
import sys
import time

import numpy as np

from ..client.record_reader import RecordReader
from ..transports.loopback import loopback_config, loopback_env, loopback_vars, private_domain_id
from ..transports.transport_dds import DdsTransport
from ..transports.transport_rclpy import RclpyTransport
from .demo import start_process, stop_process

# the node runs with the full record: the discrete part too (Ad, Bd, the predicted next state)
RECORD_DT = 0.01


def _cpu_seconds(pid):
    """User + system CPU time of a process from /proc (Linux); None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _receiver(kind, domain):
    if kind == "dds":
        return DdsTransport("sva_linearizer_bench", domain_id=domain, config=loopback_config())
    os.environ.update({k: v for k, v in loopback_vars(domain).items() if k != "ROS_DOMAIN_ID"})
    return RclpyTransport("sva_linearizer_bench", domain_id=domain, handle_signals=False,
                          args=["sva_linearizer_bench"])


def cpu_plan(pin=True):
    """(node CPUs, other CPUs) or None: the node gets the last CPU this process may use, the
    publisher and the receiver (this process) the others."""
    if not pin or not hasattr(os, "sched_getaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    return {cpus[-1]}, set(cpus[:-1])


def bench_case(robot, rate, seconds=10.0, warmup=2.0, case_index=0, transport="dds", pin=True):
    """One robot at one input rate -> dict with input_hz, output_hz, p50, p99 (ms), linearize,
    cpu_per_pair (ms of node CPU time per output pair, nan where /proc is unavailable).

    ``transport``: the node's, the publisher's and the receiver's (dds or rclpy). ``pin``: the node
    runs on a CPU of its own (children inherit this process's affinity at start; see
    :func:`cpu_plan`), so its numbers are not those of a node waiting for a core."""
    domain = private_domain_id(os.getpid() + 17 * (case_index + 1))
    env = loopback_env(domain)
    py = sys.executable
    plan = cpu_plan(pin)
    own_affinity = os.sched_getaffinity(0) if plan else None
    if plan:
        os.sched_setaffinity(0, plan[0])          # the node inherits the node's CPU ...
    try:
        node = start_process([py, "-m", "sva_linearizer.ros", "node", "--robot", robot, "--transport", transport,
                              "--param", f"dt={RECORD_DT}",
                              "--param", "warn_period=5.0"], env, "", echo=False)
    finally:
        if plan:
            os.sched_setaffinity(0, plan[1])      # ... everything else the others
    pub = None
    recs = []
    receiver = None
    try:
        receiver = _receiver(transport, domain)
        reader = RecordReader(receiver, lambda rec, recv_ns: recs.append((recv_ns, rec.stamp_ns)))
        if not receiver.wait_for_writers(reader.record_reader, 120.0):
            raise RuntimeError(f"node did not come up: {node.lines[-5:]}")
        pub = start_process([py, "-m", "sva_linearizer.ros", "sim", "--robot", robot, "--rate", str(rate),
                             "--seconds", str(seconds + warmup + 1.0), "--mode", "random",
                             "--transport", transport], env, "", echo=False)
        deadline = time.monotonic() + seconds + warmup + 60.0
        while not recs and time.monotonic() < deadline and pub.poll() is None:
            receiver.spin_once(0.1)
        if not recs:
            raise RuntimeError(f"no output; node: {node.lines[-5:]}, publisher: {pub.lines[-5:]}")
        t_start = time.time_ns() + int(warmup * 1e9)
        t_end = t_start + int(seconds * 1e9)
        while time.time_ns() < t_start and pub.poll() is None:
            receiver.spin_once(0.05)
        cpu0 = _cpu_seconds(node.pid)
        while time.time_ns() < t_end and pub.poll() is None:
            receiver.spin_once(0.05)
        cpu1 = _cpu_seconds(node.pid)
        t_end = min(t_end, time.time_ns())
        pub.wait(30)
    finally:
        if pub is not None:
            stop_process(pub)
        stop_process(node)
        if receiver is not None:
            receiver.close()
        if own_affinity:
            os.sched_setaffinity(0, own_affinity)
    window = [(r, s) for r, s in recs if t_start <= r < t_end]
    lat = np.array([(r - s) * 1e-6 for r, s in window])
    sent = re.search(r"\(([\d.]+) Hz, target", "\n".join(pub.lines))
    mean = re.search(r"mean linearize ([\d.]+ ms)", "\n".join(node.lines))
    return dict(robot=robot, rate=rate, transport=transport, input_hz=float(sent.group(1)) if sent else float("nan"),
                output_hz=len(window) / max((t_end - t_start) * 1e-9, 1e-9),
                p50=float(np.percentile(lat, 50)) if lat.size else float("nan"),
                p99=float(np.percentile(lat, 99)) if lat.size else float("nan"),
                max=float(lat.max()) if lat.size else float("nan"),
                linearize=mean.group(1) if mean else "?", node_log=list(node.lines),
                cpu_per_pair=((cpu1 - cpu0) * 1e3 / len(window)
                              if window and cpu0 is not None and cpu1 is not None else float("nan")))


#: the feet of the horizon case's node (its contact schedule: a trot over them)
HORIZON_FEET = {"solo12": ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"),
                "go2": ("FL_foot", "FR_foot", "RL_foot", "RR_foot")}


def trot_schedule(N: int, period: int = 8):
    """A trot over four feet (FL, FR, HL, HR order): diagonal pairs alternating every `period` knots."""
    first = (np.arange(N) // period) % 2 == 0
    return np.stack([first, ~first, ~first, first], axis=1)


def bench_horizon_case(robot="solo12", rate=500.0, knots=50, request_hz=50.0, seconds=10.0, warmup=2.0,
                       case_index=0, transport="rclpy", pin=True):
    """The per-state stream at ``rate`` Hz and, beside it, a planner (this process, the package's
    HorizonClient) sending requests of ``knots`` knots with a trot schedule and dt at ``request_hz``,
    each as soon as the one before is answered or its period has passed -> dict: the stream's
    input_hz, output_hz, the requests sent and answered (and how: ok, refused, superseded), the
    round trip request -> answer decoded (rt_p50, rt_p99, rt_max, ms) and the node's CPU per second."""
    from sva_linearizer.robots import load_robot

    from ..client.horizon_client import HorizonClient

    feet = HORIZON_FEET.get(robot)
    if feet is None:
        raise ValueError(f"bench-node --horizon: no feet known for '{robot}' (known: {', '.join(HORIZON_FEET)})")
    model = load_robot(robot)
    domain = private_domain_id(os.getpid() + 31 * (case_index + 1))
    env = loopback_env(domain)
    py = sys.executable
    plan = cpu_plan(pin)
    own_affinity = os.sched_getaffinity(0) if plan else None
    if plan:
        os.sched_setaffinity(0, plan[0])
    try:
        node = start_process([py, "-m", "sva_linearizer.ros", "node", "--robot", robot, "--transport", transport,
                              "--param", f"dt={RECORD_DT}", "--param", f"contact_frames=[{','.join(feet)}]",
                              "--param", "contact_references=[world_aligned]",
                              "--param", "warn_period=5.0"], env, "", echo=False)
    finally:
        if plan:
            os.sched_setaffinity(0, plan[1])
    pub = receiver = None
    recs, trips, statuses = [], [], {}
    try:
        receiver = _receiver(transport, domain)
        reader = RecordReader(receiver, lambda rec, recv_ns: recs.append(recv_ns))
        client = HorizonClient(receiver)
        if not receiver.wait_for_writers(reader.record_reader, 120.0) or not client.wait_for_node(60.0):
            raise RuntimeError(f"node did not come up: {node.lines[-5:]}")
        rng = np.random.default_rng(3)
        Q = np.zeros((knots, model.nq))
        for k in range(knots):
            quat = rng.normal(size=4)
            Q[k, 3:7] = quat / np.linalg.norm(quat)
            Q[k, 7:] = rng.uniform(-1, 1, model.nj)
        V, T = rng.normal(size=(knots, model.nv)), rng.normal(size=(knots, model.nj))
        schedule = trot_schedule(knots)
        client.request(Q, V, T, RECORD_DT, schedule).result(120.0)       # the first: kernels warm
        pub = start_process([py, "-m", "sva_linearizer.ros", "sim", "--robot", robot, "--rate", str(rate),
                             "--seconds", str(seconds + warmup + 1.0), "--mode", "random",
                             "--transport", transport], env, "", echo=False)
        deadline = time.monotonic() + 120.0
        while not recs and time.monotonic() < deadline and pub.poll() is None:
            receiver.spin_once(0.05)
        t_start = time.monotonic() + warmup
        t_end = t_start + seconds
        period = 1.0 / request_hz
        future, next_send = None, time.monotonic()
        cpu0 = None
        while time.monotonic() < t_end and pub.poll() is None:
            now = time.monotonic()
            if cpu0 is None and now >= t_start:
                cpu0, n0, t0 = _cpu_seconds(node.pid), len(recs), now
            if future is not None and future.done():
                if future.sent_ns >= t_start * 1e9 - 1:
                    trips.append((future.received_ns - future.sent_ns) * 1e-6)
                    statuses[future.answer.status] = statuses.get(future.answer.status, 0) + 1
                future = None
            if future is None and now >= next_send:
                future = client.request(Q, V, T, RECORD_DT, schedule)
                future.sent_ns = time.monotonic_ns()
                next_send = max(next_send + period, now)
            receiver.spin_once(0.0005)
        cpu1, n1, t1 = _cpu_seconds(node.pid), len(recs), time.monotonic()
        pub.wait(30)
    finally:
        if pub is not None:
            stop_process(pub)
        stop_process(node)
        if receiver is not None:
            receiver.close()
        if own_affinity:
            os.sched_setaffinity(0, own_affinity)
    sent = re.search(r"\(([\d.]+) Hz, target", "\n".join(pub.lines)) if pub is not None else None
    rt = np.array(trips) if trips else np.array([np.nan])
    span = max(t1 - t0, 1e-9)
    return dict(robot=robot, rate=rate, knots=knots, request_hz=request_hz, transport=transport,
                input_hz=float(sent.group(1)) if sent else float("nan"), output_hz=(n1 - n0) / span,
                requests=len(trips), answered=statuses.get(0, 0), other=sum(v for k, v in statuses.items() if k),
                rt_p50=float(np.percentile(rt, 50)), rt_p99=float(np.percentile(rt, 99)), rt_max=float(np.max(rt)),
                node_cpu=(cpu1 - cpu0) / span if cpu0 is not None and cpu1 is not None else float("nan"))


def run_horizon_bench(robots=("solo12",), rate=500.0, knots=50, request_hz=50.0, seconds=10.0, out=None,
                      transports=("rclpy",), pin=True) -> int:
    """bench-node --horizon: the rows of :func:`bench_horizon_case`."""
    out = out or sys.stdout
    plan = cpu_plan(pin)
    load = os.getloadavg()
    print(f"bench-node --horizon {knots}: a planner (this process) requests {knots} knots with a trot schedule at "
          f"{request_hz:g} Hz beside the per-state stream at {rate:g} Hz; {cpu_model()}, load average "
          f"{load[0]:.2f}; " + (f"node pinned to CPU {sorted(plan[0])}, publisher and planner to CPU "
                                f"{sorted(plan[1])}" if plan else "no CPU pinning"), file=out, flush=True)
    print(f"{'transport':<9} {'robot':<8} {'stream in':>9} {'stream out':>10} {'requests':>8} {'answered':>8} "
          f"{'rt p50':>8} {'rt p99':>8} {'rt max':>8} {'node CPU':>9}", file=out, flush=True)
    code = 0
    for i, (transport, robot) in enumerate((t, r) for t in transports for r in robots):
        try:
            r = bench_horizon_case(robot, rate, knots, request_hz, seconds, case_index=i, transport=transport,
                                   pin=pin)
        except RuntimeError as e:
            print(f"{transport:<9} {robot:<8} failed: {e}", file=out, flush=True)
            code = 1
            continue
        print(f"{transport:<9} {robot:<8} {r['input_hz']:>7.0f}Hz {r['output_hz']:>8.0f}Hz {r['requests']:>8} "
              f"{r['answered']:>8} {r['rt_p50']:>6.2f}ms {r['rt_p99']:>6.2f}ms {r['rt_max']:>6.1f}ms "
              f"{r['node_cpu'] * 100:>8.0f}%", file=out, flush=True)
    return code


def run_bench(robots=("solo12", "g1_29dof"), rates=(500.0, 1000.0), seconds=10.0, out=None,
              transports=("dds",), pin=True) -> int:
    out = out or sys.stdout
    from sva_linearizer.robots import load_robot

    plan = cpu_plan(pin)
    where = (f"node pinned to CPU {sorted(plan[0])}, publisher and receiver to CPU {sorted(plan[1])}"
             if plan else "no CPU pinning")
    print(f"bench-node: publisher, node and receiver in separate processes on loopback; {where}; "
          f"{seconds:g} s per case after a warm-up", file=out, flush=True)
    header = (f"{'transport':<9} {'robot':<10} {'nv':>3} {'A':>7} {'target':>7} {'input':>8} {'output':>8} "
              f"{'lat p50':>8} {'lat p99':>8} {'lat max':>8} {'node linearize':>15} {'node CPU/pair':>14}")
    print(header, file=out, flush=True)
    code = 0
    i = 0
    for transport in transports:
        if transport not in ("dds", "rclpy"):
            raise ValueError(f"bench-node: transport must be dds or rclpy, got {transport!r}")
        for robot in robots:
            nv = load_robot(robot).nv
            for rate in rates:
                try:
                    r = bench_case(robot, rate, seconds=seconds, case_index=i, transport=transport, pin=pin)
                except RuntimeError as e:
                    print(f"{transport:<9} {robot:<10} {rate:g} Hz: failed: {e}", file=out, flush=True)
                    code = 1
                    continue
                finally:
                    i += 1
                print(f"{transport:<9} {robot:<10} {nv:>3} {2 * nv:>3}x{2 * nv:<3} {rate:>5g}Hz "
                      f"{r['input_hz']:>6.0f}Hz {r['output_hz']:>6.0f}Hz {r['p50']:>6.2f}ms {r['p99']:>6.2f}ms "
                      f"{r['max']:>6.1f}ms {r['linearize']:>15} {r['cpu_per_pair']:>11.2f} ms",
                      file=out, flush=True)
    return code


def _rss_kib(pid):
    """Resident set size of a process in KiB from /proc (Linux); None elsewhere."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def cpu_model() -> str:
    """The CPU's model name (what ``lscpu | grep 'Model name'`` shows), from /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def _mib(kib):
    return "n/a" if kib is None else f"{kib / 1024:.1f} MiB"


def run_soak(robot: str = "solo12", rate: float = 1000.0, seconds: float = 3600.0, transport: str = "dds",
             pin: bool = True, report_every: float = 60.0, warmup: float = 30.0, out=None) -> int:
    """The node fed at ``rate`` Hz for ``seconds`` (after ``warmup`` s), publisher, node and
    receiver in separate processes as in :func:`bench_case`. Reports the node's resident memory
    (at the first record, at the start and end of the measured span, every ``report_every`` s),
    the joint states sent, the pairs the node completed, the pairs received complete, and the pairs
    lost (completed by the node, never received complete). Exit code 0 when no pair was lost and
    the node's memory at the end is within 1% of the start, else 1."""
    out = out or sys.stdout
    if transport not in ("dds", "rclpy"):
        raise ValueError(f"bench-node: transport must be dds or rclpy, got {transport!r}")
    domain = private_domain_id(os.getpid() + 7)
    env = loopback_env(domain)
    py = sys.executable
    plan = cpu_plan(pin)
    load0 = os.getloadavg()
    print(f"bench-node --soak: {robot} at {rate:g} Hz over {transport}, {seconds:g} s after a {warmup:g} s "
          f"warm-up; {cpu_model()}, {os.cpu_count()} CPUs, load average {load0[0]:.2f} {load0[1]:.2f} "
          f"{load0[2]:.2f}; " + (f"node pinned to CPU {sorted(plan[0])}, publisher and receiver to CPU "
                                 f"{sorted(plan[1])}" if plan else "no CPU pinning"), file=out, flush=True)
    own_affinity = os.sched_getaffinity(0) if plan else None
    if plan:
        os.sched_setaffinity(0, plan[0])
    try:
        node = start_process([py, "-m", "sva_linearizer.ros", "node", "--robot", robot, "--transport", transport,
                              "--param", f"dt={RECORD_DT}",
                              "--param", "warn_period=60.0"], env, "", echo=False)
    finally:
        if plan:
            os.sched_setaffinity(0, plan[1])
    got = {"pairs": 0, "max_seq": 0}
    missing = {}  # seq -> seconds since start when a later pair completed first (removed if it comes)
    t_run = time.monotonic()

    def on_pair(pair, recv_ns):
        got["pairs"] += 1
        if missing.pop(pair.seq, None) is None and pair.seq > got["max_seq"] + 1:
            now = time.monotonic() - t_run
            for k in range(got["max_seq"] + 1, min(pair.seq, got["max_seq"] + 1 + 10_000)):
                missing[k] = now
        got["max_seq"] = max(got["max_seq"], pair.seq)

    pub = receiver = None
    samples = []
    try:
        receiver = _receiver(transport, domain)
        reader = RecordReader(receiver, on_pair)
        if not receiver.wait_for_writers(reader.record_reader, 300.0):
            raise RuntimeError(f"node did not come up: {node.lines[-5:]}")
        pub = start_process([py, "-m", "sva_linearizer.ros", "sim", "--robot", robot, "--rate", str(rate),
                             "--seconds", str(seconds + warmup + 1.0), "--mode", "random",
                             "--transport", transport], env, "", echo=False)
        deadline = time.monotonic() + 120.0
        while not got["pairs"] and time.monotonic() < deadline and pub.poll() is None:
            receiver.spin_once(0.1)
        if not got["pairs"]:
            raise RuntimeError(f"no output; node: {node.lines[-5:]}, publisher: {pub.lines[-5:]}")
        rss_first = _rss_kib(node.pid)
        t0 = time.monotonic()
        while time.monotonic() < t0 + warmup and pub.poll() is None:
            receiver.spin_once(0.05)
        start = (time.monotonic(), _rss_kib(node.pid), got["pairs"])
        samples.append(start)
        next_report = start[0] + report_every
        end_t = start[0] + seconds
        while time.monotonic() < end_t and pub.poll() is None:
            receiver.spin_once(0.05)
            now = time.monotonic()
            if now >= next_report:
                samples.append((now, _rss_kib(node.pid), got["pairs"]))
                t, rss, n = samples[-1]
                dt = t - samples[-2][0]
                print(f"  {t - start[0]:7.0f} s  node RSS {_mib(rss)}  records received {n}  "
                      f"({(n - samples[-2][2]) / max(dt, 1e-9):.0f} Hz)  load {os.getloadavg()[0]:.2f}",
                      file=out, flush=True)
                next_report += report_every
        samples.append((time.monotonic(), _rss_kib(node.pid), got["pairs"]))
        # keep taking pairs while the publisher finishes, then the in-flight ones: the output
        # readers keep the last 10 samples, so a receiver that stops spinning loses pairs
        deadline = time.monotonic() + 60.0
        while pub.poll() is None and time.monotonic() < deadline:
            receiver.spin_once(0.05)
        drain = time.monotonic() + 3.0
        while time.monotonic() < drain:
            receiver.spin_once(0.05)
    finally:
        if pub is not None:
            stop_process(pub)
        node_rc = stop_process(node)
        if receiver is not None:
            receiver.close()
        if own_affinity:
            os.sched_setaffinity(0, own_affinity)
    time.sleep(0.3)   # the node's last lines (its summary) reach node.lines
    node_text = "\n".join(node.lines)
    published = re.search(r"published (\d+) records", node_text)
    dropped = re.search(r"dropped: (.*)$", node_text, re.M)
    sent = re.search(r"sim: sent (\d+) joint states in ([\d.]+) s", "\n".join(pub.lines))
    completed = int(published.group(1)) if published else None
    lost = None if completed is None else completed - got["pairs"]
    (t_a, rss_a, n_a), (t_b, rss_b, n_b) = samples[0], samples[-1]
    rss_in = [s[1] for s in samples if s[1] is not None]
    change = (rss_b - rss_a) / rss_a * 100.0 if rss_a and rss_b else float("nan")
    load1 = os.getloadavg()
    print(f"node resident memory: {_mib(rss_first)} at the first record, {_mib(rss_a)} at the start, "
          f"{_mib(rss_b)} at the end ({change:+.2f}%), min {_mib(min(rss_in) if rss_in else None)}, "
          f"max {_mib(max(rss_in) if rss_in else None)} over {t_b - t_a:.0f} s", file=out)
    print(f"joint states sent: {sent.group(1) if sent else '?'} in {sent.group(2) if sent else '?'} s; "
          f"records published by the node: {completed if completed is not None else '?'}; records received "
          f"whole: {got['pairs']} (highest seq {got['max_seq']}); lost: "
          f"{lost if lost is not None else '?'}; output {(n_b - n_a) / max(t_b - t_a, 1e-9):.0f} Hz in the "
          f"measured span", file=out)
    print(f"inputs the node did not turn into records (it drops to the newest joint state when busy): "
          f"{int(sent.group(1)) - completed if sent and completed is not None else '?'}; node's rejects: "
          f"{dropped.group(1) if dropped else '?'}; node exit code {node_rc}; load average at the end "
          f"{load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}", file=out, flush=True)
    if missing or reader.bad:
        shown = ", ".join(f"{k} ({t:.0f} s)" for k, t in sorted(missing.items())[:20])
        print(f"records never received (seq, seconds since start): {shown or 'none recorded'}"
              + (f" and {len(missing) - 20} more" if len(missing) > 20 else "")
              + f"; records that did not decode: {reader.bad}", file=out, flush=True)
    ok = lost == 0 and abs(change) <= 1.0
    print(f"goal (memory flat within 1%, no published record lost): {'met' if ok else 'NOT met'}", file=out,
          flush=True)
    return 0 if ok else 1
