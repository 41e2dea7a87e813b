# SPDX-License-Identifier: BSD-3-Clause
"""Command line: ``node``, ``demo`` and ``bench-node`` subcommands, and the ``linearizer_node`` script.

The package's main CLI (``sva-linearizer``) registers these through :func:`add_subcommands`;
``python -m sva_linearizer.ros`` runs them standalone. ``linearizer_node`` (:func:`main_node`) is
the executable ``ros2 run`` and the launch file start: it takes ``--ros-args`` as any ROS 2 node.
"""
from __future__ import annotations

import argparse
import os
import sys

from .node.parameters import DEFAULT_PARAMETERS, NODE_NAME, PARAMETER_TYPES


def _add_parameter_arguments(p, model_default="the robot_description topic", transport=True):
    """The options that set the node's parameters (shared by ``node`` and ``bag``)."""
    src = p.add_argument_group(f"robot model (default: {model_default})")
    src.add_argument("--urdf", metavar="PATH", help="URDF file (sets the urdf_path parameter)")
    src.add_argument("--robot", metavar="NAME", help="a known robot, e.g. solo12, anymal_c, ur5, panda, "
                                                     "quadruped (sets the robot parameter)")
    p.add_argument("--config", metavar="FILE", help="ROS 2 parameter file, e.g. config/solo12.yaml")
    base = p.add_mutually_exclusive_group()
    base.add_argument("--floating-base", dest="floating_base", action="store_const", const=True, default=None,
                      help="SE(3) base, pose and twist from odom (default for legged robots)")
    base.add_argument("--fixed-base", dest="floating_base", action="store_const", const=False,
                      help="fixed base (default for arms)")
    if transport:
        p.add_argument("--transport", choices=("auto", "rclpy", "dds"), default="auto",
                       help="rclpy when ROS 2 is importable, else DDS via cyclonedds (default: auto)")
    p.add_argument("--param", "-P", action="append", default=[], metavar="NAME=VALUE",
                   help="set a node parameter (repeatable), e.g. --param max_rate=200.0; "
                        f"parameters: {', '.join(DEFAULT_PARAMETERS)}")


def _add_node_arguments(p):
    _add_parameter_arguments(p)
    p.add_argument("--domain-id", type=int, default=None,
                   help="domain id, both transports (default: ROS_DOMAIN_ID, else 0)")
    p.add_argument("--namespace", default="", help="node namespace (relative topics are resolved in it)")
    p.add_argument("--loopback", action="store_true",
                   help="confine traffic to 127.0.0.1, both transports (Cyclone's loopback configuration; "
                        "for rclpy the Fast DDS loopback profile)")
    p.add_argument("--duration", type=float, default=None, help="exit after this many seconds")


def _collect_parameters(args, ros_args):
    """-> (all parameters as this module reads them, those set by our own options only).

    With rclpy, ``--ros-args`` (and ``--config``, passed on as ``--params-file``) are read by rcl
    itself; only our own options become parameter overrides. The full set is still parsed here to
    report a bad parameter before any entity exists."""
    from .node.parameter_files import load_params_file, parse_ros_args, parse_value, ros_identity

    params, own = {}, {}
    name, namespace = ros_identity(ros_args, NODE_NAME, getattr(args, "namespace", "") or "")
    if args.config:
        params.update(load_params_file(args.config, name, namespace))
    params.update(parse_ros_args(ros_args, name, namespace))
    for item in args.param:
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--param expects NAME=VALUE, got {item!r}")
        own[name.strip()] = parse_value(value)
    if args.urdf:
        own.update(urdf_path=args.urdf, robot="", robot_description="")
    if args.robot:
        own.update(robot=args.robot, urdf_path="", robot_description="")
    if args.floating_base is not None:
        own["floating_base"] = args.floating_base
    params.update(own)
    return params, own


def _rcl_args(args, ros_args):
    """Arguments for rclpy.init: ``--config FILE`` becomes a ``--params-file`` before the user's."""
    ros_args = list(ros_args)
    extra = ["--params-file", args.config] if args.config else []
    if not extra:
        return ["linearizer_node", *ros_args]
    if ros_args and ros_args[0] == "--ros-args":
        return ["linearizer_node", "--ros-args", *extra, *ros_args[1:]]
    return ["linearizer_node", "--ros-args", *extra, "--", *ros_args]


def run_node(args, ros_args=()) -> int:
    """Build the transport and the node, spin until SIGINT/SIGTERM (or --duration), exit 0."""
    from .node.node import LinearizerNode
    from .node.parameter_files import ros_identity
    from .node.parameters import normalize_parameters
    from .transports.loopback import loopback_config, loopback_vars
    from .transports.prerequisites import choose_transport
    from .transports.transport import make_transport

    try:
        params, own = _collect_parameters(args, list(ros_args))
        checked = normalize_parameters(params)  # report a bad parameter before any entity exists
        kind = choose_transport(args.transport)  # what it needs is there, or exit 2 saying what is not
        refused = sorted(k for k in params if k.startswith("qos_overrides."))
        if refused and kind != "rclpy":
            raise ValueError(f"QoS overrides ({', '.join(refused)}) are applied by rclpy only: run the node with "
                             "--transport rclpy (ROS 2), or drop them")
        overrides = None
        if kind == "rclpy":
            from rclpy.parameter import Parameter
            overrides = [Parameter(k, value=checked[k]) for k in own if k in checked]
        if args.loopback:   # both middlewares on 127.0.0.1 (Fast DDS reads these at rclpy.init)
            os.environ.update({k: v for k, v in loopback_vars(args.domain_id if args.domain_id is not None
                                                              else int(os.environ.get("ROS_DOMAIN_ID") or 0)).items()
                               if k != "ROS_DOMAIN_ID"})
        name, namespace = ros_identity(list(ros_args), NODE_NAME, args.namespace or "")
        transport = make_transport(kind, name if kind != "rclpy" else NODE_NAME, domain_id=args.domain_id,
                                   config=loopback_config() if args.loopback else None,
                                   namespace=namespace if kind != "rclpy" else args.namespace,
                                   args=_rcl_args(args, ros_args), parameter_overrides=overrides)
    except (ValueError, RuntimeError, OSError) as e:
        print(f"sva-linearizer node: {e}", file=sys.stderr)
        return 2
    try:
        if kind == "rclpy":
            params = transport.get_parameters(DEFAULT_PARAMETERS, PARAMETER_TYPES)
        elif params.get("use_sim_time") in (True, "true", "True"):
            transport.use_sim_time()            # rclpy's time source does this itself
        node = LinearizerNode(transport, params)
        if kind == "rclpy":
            transport.publish_parameters(node.params)   # read back: the values in use
        transport.logger.info(f"transport {transport.name}; publishing {', '.join(node.output_topics[:-1])} "
                              f"and {node.output_topics[-1]}")
        _quiet_gc()
        transport.spin(args.duration)
        node.close()
        _log_after_spin(transport, node.summary())
    except KeyboardInterrupt:  # SIGINT before spinning started (e.g. during the warm-up)
        pass
    except ValueError as e:
        transport.logger.error(str(e))
        return 2
    finally:
        transport.close()
    return 0


def _quiet_gc():
    """Keep the cyclic garbage collector's full collections short. Once the node is up, the
    process holds ~120,000 tracked objects (the model, numba, the middleware), all of which live as
    long as the node; a full collection walks them all, tens of milliseconds, a pause that shows
    as a latency spike when one happens. gc.freeze() moves them out of the collector's sight (a
    full collection then takes ~0.01 ms). Full collections are rare, so this removes rare spikes
    rather than raising the mean rate (docs/ros.md, "Node performance")."""
    import gc

    gc.collect()
    gc.freeze()


def _log_after_spin(transport, text):
    try:  # rclpy's logging may already be finalised by a signal-triggered shutdown
        transport.logger.info(text)
    except Exception:
        print(text, file=sys.stderr)


def _cmd_node(args):
    return run_node(args, getattr(args, "ros_args", ()))


def _reporting_errors(name, fn):
    """Run fn() -> int; a RuntimeError/ValueError (missing cyclonedds, unknown robot) -> message, 2."""
    try:
        return fn()
    except (RuntimeError, ValueError) as e:
        print(f"sva-linearizer {name}: {e}", file=sys.stderr)
        return 2


def _cmd_bag(args):
    """``sva-linearizer bag``: exit 0, or 2 with one line naming the problem."""
    from .bag.progress import Progress
    from .bag.recording import BagError
    from .bag.run import CHUNK_STATES, linearize_bag

    try:
        params, _ = _collect_parameters(args, list(getattr(args, "ros_args", ())))
        if args.dask and args.workers is not None:
            raise BagError("--workers and --dask: choose one (a Dask cluster has its own workers)")
        summary = linearize_bag(args.input, args.out, params, namespace=args.namespace or "",
                                workers=args.workers or 1, dask=args.dask, storage=args.storage,
                                chunk_states=args.chunk_states or CHUNK_STATES,
                                progress=None if args.quiet else Progress(0))
    except (BagError, ValueError) as e:
        print(f"sva-linearizer bag: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("sva-linearizer bag: interrupted (no output written)", file=sys.stderr)
        return 130
    if not args.quiet:
        print("\n".join(summary.lines()))
    return 0


def _cmd_demo(args):
    from .demo.demo import run_control_demo, run_demo

    if args.control and args.horizon:
        from .demo.horizon_demo import run_horizon_demo

        return _reporting_errors("demo", lambda: run_horizon_demo(
            knots=args.horizon, seconds=args.seconds, robot=args.robot, rate=args.rate, plant=args.plant,
            corrupt_horizon=args.corrupt_horizon, baseline=not args.no_baseline))
    if args.horizon or args.corrupt_horizon or args.no_baseline:
        print("sva-linearizer demo: --horizon, --corrupt-horizon and --no-baseline go with --control --horizon N",
              file=sys.stderr)
        return 2
    if args.control:
        return _reporting_errors("demo", lambda: run_control_demo(
            seconds=args.seconds, robot=args.robot, rate=args.rate, plant=args.plant,
            corrupt_record=args.corrupt_record))
    return _reporting_errors("demo", lambda: run_demo(seconds=args.seconds, robot=args.robot, rate=args.rate))


def _cmd_bench(args):
    from .demo.bench import run_bench, run_horizon_bench, run_soak

    if args.horizon:
        return _reporting_errors("bench-node", lambda: run_horizon_bench(
            robots=(args.robots or "solo12").split(","), rate=float(args.rates or 500.0), knots=args.horizon,
            request_hz=args.request_rate, seconds=args.seconds if args.seconds is not None else 10.0,
            transports=(args.transport or "rclpy").split(","), pin=not args.no_pin))

    if args.soak:
        robots = (args.robots or "solo12").split(",")
        rates = [float(r) for r in (args.rates or "1000").split(",")]
        transports = (args.transport or "dds").split(",")
        if len(robots) != 1 or len(rates) != 1 or len(transports) != 1:
            print("sva-linearizer bench-node --soak: one robot, one rate and one transport", file=sys.stderr)
            return 2
        return _reporting_errors("bench-node", lambda: run_soak(
            robot=robots[0], rate=rates[0], seconds=args.seconds if args.seconds is not None else 3600.0,
            transport=transports[0], pin=not args.no_pin, report_every=args.report_every, warmup=args.warmup))
    return _reporting_errors("bench-node", lambda: run_bench(
        robots=(args.robots or "solo12,g1_29dof").split(","),
        rates=[float(r) for r in (args.rates or "500,1000").split(",")],
        seconds=args.seconds if args.seconds is not None else 10.0,
        transports=(args.transport or "dds").split(","), pin=not args.no_pin))


def _cmd_sim(args):
    from .demo.sim import run_sim_control, run_sim_publisher

    if args.mode == "control":
        lift = None
        if args.lift:
            try:
                frame, t_off, t_on = args.lift.split(":")
                lift = (frame, float(t_off), float(t_on))
            except ValueError:
                print(f"sva-linearizer sim: --lift FRAME:T_OFF:T_ON, got {args.lift!r}", file=sys.stderr)
                return 2
        return _reporting_errors("sim", lambda: run_sim_control(robot=args.robot, rate=args.rate, seconds=args.seconds,
                                                                plant=args.plant, kind=args.transport,
                                                                push_force=args.push_force, lift=lift))
    return _reporting_errors("sim", lambda: run_sim_publisher(robot=args.robot, rate=args.rate,
                                                              seconds=args.seconds, mode=args.mode,
                                                              kind=args.transport))


def _cmd_loopback_env(args) -> int:
    import shlex

    from .transports.loopback import loopback_vars

    for name, value in loopback_vars(args.domain_id if args.domain_id is not None else 0).items():
        if name != "ROS_DOMAIN_ID" or args.domain_id is not None:
            print(f"export {name}={shlex.quote(value)}")
    return 0


def add_subcommands(subparsers):
    from .demo.control import CORRUPTIONS
    from .demo.mpc import HORIZON_CORRUPTIONS

    """Register ``node``, ``demo`` and ``bench-node`` (and the helper ``sim``) on an argparse
    subparsers object; each sets ``func(args) -> int``."""
    p = subparsers.add_parser("node", help="run the linearizer node (rclpy or plain DDS)",
                              description="Subscribe joint_states (+ odom) and publish the linearization "
                                          "record (linearization/record, with its names on "
                                          "linearization/description), the point and A, B.")
    _add_node_arguments(p)
    p.set_defaults(func=_cmd_node)

    g = subparsers.add_parser(
        "bag", help="linearize a rosbag2 recording (joint states, odometry, contacts) as the node would, into a "
                    "rosbag2 of its records",
        description="Read a rosbag2 recording (a folder, or one .mcap or .db3 file), pair its joint states with "
                    "their odometry and contact sets by stamp as the node does, and write the node's records "
                    "(linearization/record, linearization/description) into a new rosbag2: the node's parameters, "
                    "its drop reasons, its records bit for bit. In this process, in --workers processes, or on a "
                    "Dask cluster (--dask): the same output.")
    g.add_argument("input", metavar="INPUT", help="the recording: a rosbag2 folder, or a .mcap or .db3 file")
    g.add_argument("--out", "-o", required=True, metavar="OUTPUT", help="the rosbag2 folder to write (must not exist)")
    _add_parameter_arguments(g, model_default="the recording's robot_description topic", transport=False)
    g.add_argument("--namespace", default="", help="the node's namespace: relative topic names resolve in it")
    g.add_argument("--workers", type=int, default=None, metavar="N",
                   help="run the chunks of the recording in N processes of this machine (default 1: this process)")
    g.add_argument("--dask", metavar="ADDRESS", default=None,
                   help="run the chunks on a Dask distributed cluster, e.g. tcp://scheduler:8786 (pip install "
                        "'sva_linearizer[dask]'); the workers read INPUT at the same path")
    g.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap", help="the output's storage (default mcap)")
    g.add_argument("--chunk-states", type=int, default=None, metavar="N",
                   help="joint states per chunk (default 2000; the output does not depend on it)")
    g.add_argument("--quiet", "-q", action="store_true", help="no progress bar and no summary (errors only)")
    g.set_defaults(func=_cmd_bag)

    d = subparsers.add_parser("demo", help="simulated quadruped standing on four point contacts + node + "
                                           "live echo of A, B and the contact forces over loopback DDS, "
                                           "a few seconds, then exit")
    d.add_argument("--seconds", type=float, default=5.0, help="how long to echo (default 5)")
    d.add_argument("--robot", default=None,
                   help="robot to simulate (default: solo12 when example-robot-data is installed, else the "
                        "bundled quadruped; both stand on their feet; other robots move freely)")
    d.add_argument("--rate", type=float, default=100.0, help="joint_states rate in Hz (default 100)")
    d.add_argument("--control", action="store_true",
                   help="close the loop: a controller reading only the node's records sends torques to the "
                        "simulated robot (a quadruped stands and is pushed; --robot ur5: an arm tracks a moving "
                        "reference); exit code 0 when the recovery or tracking meets its bounds")
    d.add_argument("--plant", choices=("pinocchio", "package"), default=None,
                   help="--control: the simulated robot's dynamics (default: Pinocchio when installed)")
    d.add_argument("--corrupt-record", choices=CORRUPTIONS, default=None,
                   help="--control: damage every record before the controller uses it (the loop must fail)")
    d.add_argument("--horizon", type=int, default=0, metavar="N",
                   help="--control: a model-predictive controller that requests N knots of the node's horizon each "
                        "period and takes one Riccati step along them (an arm tracks a fast reference, beside "
                        "the one-step controller on the same task; a quadruped shifts its weight and lifts a foot)")
    d.add_argument("--corrupt-horizon", choices=HORIZON_CORRUPTIONS, default=None,
                   help="--control --horizon: damage every answer (or request) before the controller uses it "
                        "(the loop must fail)")
    d.add_argument("--no-baseline", action="store_true",
                   help="--control --horizon, an arm: do not run the one-step controller on the task first")
    d.set_defaults(func=_cmd_demo)

    b = subparsers.add_parser("bench-node", help="node output rate and latency over loopback DDS or ROS 2 "
                                                 "(publisher, node and receiver in separate processes)")
    b.add_argument("--robots", default=None, help="comma-separated robot names (default solo12,g1_29dof; "
                                                  "--soak: solo12)")
    b.add_argument("--rates", default=None, help="comma-separated input rates in Hz (default 500,1000; "
                                                 "--soak: 1000)")
    b.add_argument("--seconds", type=float, default=None,
                   help="measurement time per case (default 10; --soak: 3600)")
    b.add_argument("--soak", action="store_true",
                   help="one long run: the node's resident memory over time (start, end, every "
                        "--report-every s), joint states sent, pairs completed by the node, received "
                        "complete and lost; exit code 1 if a pair was lost or memory moved more than 1%%")
    b.add_argument("--report-every", type=float, default=60.0, help="--soak: seconds between progress lines")
    b.add_argument("--warmup", type=float, default=30.0,
                   help="--soak: seconds of output before the measured span starts (default 30)")
    b.add_argument("--transport", default=None,
                   help="the node's transport (and the publisher's and receiver's): dds, rclpy, or both "
                        "comma-separated (default dds; --horizon: rclpy)")
    b.add_argument("--horizon", type=int, default=0, metavar="N",
                   help="a planner requests N knots (a trot schedule, solo12's four feet) at --request-rate "
                        "beside the per-state stream at --rates (one rate, default 500): round trip and "
                        "stream rate (default transport rclpy)")
    b.add_argument("--request-rate", type=float, default=50.0, help="--horizon: requests per second (default 50)")
    b.add_argument("--no-pin", action="store_true",
                   help="do not pin the node to a core of its own (default: the node gets the last CPU, "
                        "publisher and receiver the others)")
    b.set_defaults(func=_cmd_bench)

    e = subparsers.add_parser("loopback-env", help="print the shell lines that confine a ROS 2 (Fast DDS) or "
                                                   "Cyclone process to 127.0.0.1, as --loopback does for the node",
                              description="Print `export NAME=VALUE` lines (for eval in a shell) that confine "
                                          "a process of your own (a planner, ros2 topic echo) to 127.0.0.1 the "
                                          "way `sva-linearizer node --loopback` confines the node: the shipped "
                                          "Fast DDS loopback profile, ROS_AUTOMATIC_DISCOVERY_RANGE and the "
                                          "Cyclone configuration. ROS_DOMAIN_ID is printed only with --domain-id.")
    e.add_argument("--domain-id", type=int, default=None, help="also set ROS_DOMAIN_ID")
    e.set_defaults(func=_cmd_loopback_env)

    s = subparsers.add_parser("sim", help="(helper) publish a simulated robot's joint_states and odom")
    s.add_argument("--robot", default="quadruped")
    s.add_argument("--rate", type=float, default=100.0)
    s.add_argument("--seconds", type=float, default=None)
    s.add_argument("--mode", choices=("dynamics", "random", "standing", "control"), default="dynamics",
                   help="dynamics: integrate the forward dynamics; random: random valid states; standing: a "
                        "quadruped standing still on its four feet, with the contact set on `contacts`; "
                        "control: integrate the torques commanded on effort_controller/commands")
    s.add_argument("--plant", choices=("pinocchio", "package"), default="pinocchio",
                   help="--mode control: the dynamics integrated")
    s.add_argument("--push-force", type=float, default=0.5,
                   help="--mode control, a quadruped: the push on its base 1 s into the loop, times its weight "
                        "(default 0.5; 0: none)")
    s.add_argument("--lift", default=None, metavar="FOOT:T_OFF:T_ON",
                   help="--mode control, a quadruped: FOOT's contact is off from T_OFF to T_ON (s into the loop), "
                        "on `contacts` too")
    s.add_argument("--transport", choices=("dds", "rclpy"), default="dds")
    s.set_defaults(func=_cmd_sim)


def build_parser(prog="python -m sva_linearizer.ros"):
    parser = argparse.ArgumentParser(prog=prog, description="sva_linearizer ROS 2 tools")
    sub = parser.add_subparsers(dest="command", required=True)
    add_subcommands(sub)
    return parser


def _split_ros_args(argv):
    """argv -> (our arguments, the ``--ros-args ...`` tail)."""
    argv = list(argv)
    if "--ros-args" in argv:
        i = argv.index("--ros-args")
        return argv[:i], argv[i:]
    return argv, []


def main(argv=None) -> int:
    ours, ros_args = _split_ros_args(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(ours)
    args.ros_args = ros_args
    return args.func(args)


def main_node(argv=None) -> int:
    """``linearizer_node``: the node with ROS 2 conventions (``--ros-args --params-file ...``)."""
    ours, ros_args = _split_ros_args(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="linearizer_node", description="sva_linearizer node")
    _add_node_arguments(parser)
    args = parser.parse_args(ours)
    return run_node(args, ros_args)
