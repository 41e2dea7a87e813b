"""Command line: `sva-linearizer linearize ...` (and the ROS node commands from sva_linearizer.ros)."""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def _floats(text, what):
    try:
        return np.array([float(x) for x in text.replace(",", " ").split()], dtype=float)
    except ValueError:
        raise ValueError(f"--{what}: expected numbers separated by spaces or commas, got {text!r}") from None


def _load_model(args):
    from . import load_urdf
    from .robots import load_robot

    floating = False if args.fixed_base else None  # None: the robot's usual base
    if args.urdf:
        return load_urdf(args.urdf, floating_base=True if floating is None else floating)
    return load_robot(args.robot or "quadruped", floating_base=floating)


def cmd_linearize(args):
    from . import State, linearize, mass_matrix

    t0 = time.perf_counter()
    model = _load_model(args)
    nq, nv, nj = model.nq, model.nv, model.nj
    if args.q is not None:
        q = _floats(args.q, "q")
    else:
        q = np.zeros(nq)
        if model.floating_base:
            q[6] = 1.0  # identity quaternion (x, y, z, w)
    v = _floats(args.v, "v") if args.v is not None else np.zeros(nv)
    tau = _floats(args.tau, "tau") if args.tau is not None else np.zeros(nj)
    state = State.from_vectors(model, q, v)
    t1 = time.perf_counter()
    lin = linearize(model, state, tau)
    t2 = time.perf_counter()
    M = mass_matrix(model, state)
    ev = np.linalg.eigvals(lin.A)
    ev = ev[np.argsort(-ev.real)]
    base = "floating" if model.floating_base else "fixed"
    print(f"model      {model.name}: {base} base, nj={nj}, nv={nv}, mass {model.total_mass():.3f} kg")
    print(f"A          {lin.A.shape[0]} x {lin.A.shape[1]}    B  {lin.B.shape[0]} x {lin.B.shape[1]}")
    print(f"cond(M)    {np.linalg.cond(M):.4g}")
    print("eig(A)     largest real parts: " + ", ".join(f"{e.real:.4g}{e.imag:+.4g}j" for e in ev[:6]))
    print(f"time       load {1e3 * (t1 - t0):.1f} ms, linearize {1e3 * (t2 - t1):.1f} ms (first call "
          "includes JIT compilation unless cached)")
    if args.out:
        np.savez(args.out, A=lin.A, B=lin.B, q=q, v=v, tau=tau, nu_dot=lin.nu_dot,
                 joint_names=np.array(model.joint_names), floating_base=model.floating_base)
        print(f"saved      A, B, q, v, tau, nu_dot, joint_names to {args.out}")
    return 0


def build_parser():
    p = argparse.ArgumentParser(prog="sva-linearizer",
                                description="Exact singularity-free linearization of robot dynamics (A, B).")
    sub = p.add_subparsers(dest="command", required=True)
    lp = sub.add_parser("linearize", help="linearize one state and print a summary")
    src = lp.add_mutually_exclusive_group()
    src.add_argument("--urdf", help="URDF file")
    src.add_argument("--robot", help="robot name (bundled 'quadruped', or example-robot-data: solo12, "
                                     "anymal_c, ur5, panda, ...); default: the bundled quadruped")
    lp.add_argument("--fixed-base", action="store_true", help="weld the root link to the world")
    lp.add_argument("--q", help="configuration: [p(3) quat x y z w(4)] s (floating) or s")
    lp.add_argument("--v", help="velocity: [body twist v_lin w (6)] r (floating) or r")
    lp.add_argument("--tau", help="joint torques (nj)")
    lp.add_argument("--out", help="save A, B (and the state) to this .npz file")
    lp.set_defaults(func=cmd_linearize)
    from .bench import add_subcommand as add_bench

    add_bench(sub)
    try:
        from .ros.cli import add_subcommands
    except ImportError:  # pragma: no cover - the ROS part is optional at import time
        add_subcommands = None
    if add_subcommands is not None:
        add_subcommands(sub)
    return p


def main(argv=None):
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    ros_args = []
    if "--ros-args" in argv:  # `sva-linearizer node ... --ros-args -p x:=1` as for linearizer_node
        i = argv.index("--ros-args")
        argv, ros_args = argv[:i], argv[i:]
    args = parser.parse_args(argv)
    args.ros_args = ros_args
    try:
        return args.func(args)
    except ValueError as e:
        print(f"sva-linearizer: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
