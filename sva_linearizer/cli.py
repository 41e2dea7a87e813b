# SPDX-License-Identifier: BSD-3-Clause
"""Command line: ``sva-linearizer linearize | plot | compile | bench | profile`` (and the ROS node
commands from sva_linearizer.ros: node, demo, bench-node).

``linearize`` prints the state it used, the meaning of z and w (with the joint order) and a summary
of A and B, and can save them with their labels (``--out``). Vectors are given as one argument of
numbers separated by commas or spaces; values may start with a minus sign (``--q -0.1,0.2,...``,
``--q=-0.1,0.2,...`` or ``--q "-0.1 0.2 ..."``).
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
import warnings

import numpy as np

from .labels import w_names, z_names

VECTOR_OPTIONS = ("--q", "--v", "--tau")
_NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:inf|nan)"
_NUMBER_LIST = re.compile(rf"^\s*(?:{_NUMBER})(?:\s*[,\s]\s*(?:{_NUMBER}))*\s*,?\s*$", re.IGNORECASE)


def join_vector_arguments(argv):
    """argv with ``--q -0.1,0.2`` (and ``--q -0.1 0.2 ...``) rewritten to ``--q=-0.1,0.2``: argparse
    takes an argument starting with '-' for an option, so the numbers after a vector option are
    gathered here, as long as they look like numbers."""
    out = []
    i = 0
    argv = list(argv)
    while i < len(argv):
        a = argv[i]
        if a in VECTOR_OPTIONS and i + 1 < len(argv) and _NUMBER_LIST.match(argv[i + 1]):
            j = i + 1
            vals = []
            while j < len(argv) and _NUMBER_LIST.match(argv[j]):
                vals.append(argv[j].strip().rstrip(","))
                j += 1
            out.append(f"{a}={','.join(vals)}")
            i = j
            continue
        out.append(a)
        i += 1
    return out


def _floats(text, what, size, meaning):
    try:
        x = np.array([float(t) for t in text.replace(",", " ").split()], dtype=float)
    except ValueError:
        raise ValueError(f"--{what}: expected numbers separated by commas or spaces, got {text!r}") from None
    if x.shape != (size,):
        raise ValueError(f"--{what}: expected {size} numbers ({meaning}), got {x.size}")
    return x


def _check_source(args):
    """The cheap checks of --urdf/--robot, before anything compiles or loads."""
    if args.urdf is not None:
        if not args.urdf.strip():
            raise ValueError("--urdf: empty path (leave --urdf out for the bundled quadruped)")
        if not os.path.isfile(args.urdf.strip()):
            raise ValueError(f"--urdf: no such file: {args.urdf}")
    if args.robot is not None and not args.robot.strip():
        raise ValueError("--robot: empty name")


def _load_model(args):
    from . import load_urdf
    from .robots import load_robot

    _check_source(args)
    validate = not args.no_validate
    if args.urdf is not None:
        path = args.urdf.strip()
        return load_urdf(path, floating_base=args.floating_base, validate=validate)
    return load_robot(args.robot or "quadruped", floating_base=args.floating_base, validate=validate)


def _base_choice(model, args) -> str:
    """'floating base' or 'fixed base', with why: the option given, the URDF's root link, or the
    named robot's default."""
    from .urdf import floating_by_default

    base = "floating base" if model.floating_base else "fixed base"
    if args.floating_base is not None:
        why = "--floating-base" if args.floating_base else "--fixed-base"
    elif args.urdf is not None:
        other = "--fixed-base" if model.floating_base else "--floating-base"
        why = f"{floating_by_default(model.base_name)[1]}; {other} to change it"
    else:
        why = f"the default of robot '{args.robot or 'quadruped'}'"
    return f"{base} ({why})"


def z_ordering(model):
    """One line saying what z and w are."""
    nj = model.nj
    if model.floating_base:
        return (f"z = [z_H (6: pose H -> H exp(z_H^), lin-ang), s ({nj}), v (6: base body twist, lin-ang), "
                f"r ({nj})], w = tau ({nj})")
    return f"z = [s ({nj}), r ({nj})], w = tau ({nj})"


def _vec(x):
    """Compact text of a vector: 'all 0 (3)' when every entry is equal, else the numbers."""
    x = np.asarray(x, dtype=float)
    if x.size == 0:
        return "()"
    if np.all(x == x[0]):
        return f"all {x[0]:.6g} ({x.size})"
    return "(" + ", ".join(f"{e:.6g}" for e in x) + ")"


def _state_lines(model, q, v, tau, given):
    tag = {k: ("" if given[k] else "  [default]") for k in given}
    if model.floating_base:
        nj = model.nj
        lines = [f"q  position p {_vec(q[0:3])}, quaternion xyzw {_vec(q[3:7])}, s {_vec(q[7:7 + nj])}"
                 + tag["q"],
                 f"v  base body twist v_lin {_vec(v[0:3])}, w {_vec(v[3:6])}, r {_vec(v[6:])}" + tag["v"]]
    else:
        lines = [f"q  s {_vec(q)}" + tag["q"], f"v  r {_vec(v)}" + tag["v"]]
    lines.append(f"tau {_vec(tau)}" + tag["tau"])
    return lines


def _check_out_path(path):
    """The file np.savez will write (it appends .npz); a clear error if its folder is missing."""
    if not path.strip():
        raise ValueError("--out: empty path")
    target = path if path.endswith(".npz") else path + ".npz"
    folder = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(folder):
        raise ValueError(f"--out: folder {os.path.dirname(target) or folder!r} does not exist")
    if os.path.isdir(target):
        raise ValueError(f"--out: {target!r} is a folder")
    return target


def _state_vectors(args, model):
    """(q, v, tau, given) from --q, --v, --tau (defaults: identity base pose, zeros); given says
    which were given."""
    nq, nv, nj = model.nq, model.nv, model.nj
    given = {"q": args.q is not None, "v": args.v is not None, "tau": args.tau is not None}
    if model.floating_base:
        mq, mv = f"p(3), quaternion x y z w(4), s({nj})", f"body twist v_lin w (6), r({nj})"
    else:
        mq, mv = f"s({nj})", f"r({nj})"
    if given["q"]:
        q = _floats(args.q, "q", nq, mq)
    else:
        q = np.zeros(nq)
        if model.floating_base:
            q[6] = 1.0  # identity quaternion (x, y, z, w)
    v = _floats(args.v, "v", nv, mv) if given["v"] else np.zeros(nv)
    tau = _floats(args.tau, "tau", nj, f"joint torques ({nj})") if given["tau"] else np.zeros(nj)
    return q, v, tau, given


def cmd_linearize(args):
    import sva_linearizer as sl
    from ._jit import HAVE_NUMBA, group_state

    out_path = _check_out_path(args.out) if args.out is not None else None
    _check_source(args)
    t0 = time.perf_counter()
    model = _load_model(args)
    nv, nj = model.nv, model.nj
    q, v, tau, given = _state_vectors(args, model)
    state = sl.State.from_vectors(model, q, v)
    t1 = time.perf_counter()
    lin = sl.linearize(model, state, tau)
    t3 = time.perf_counter()
    M = sl.mass_matrix(model, state)
    ev = np.linalg.eigvals(lin.A)
    ev = ev[np.argsort(-ev.real)]
    pad = " " * 11
    print(f"model      {model.name}: {_base_choice(model, args)}, nj={nj}, nv={nv}, mass {model.total_mass():.3f} kg")
    print("joints     " + ", ".join(model.joint_names) + "  (this order in s, r, tau)")
    print("state      " + f"\n{pad}".join(_state_lines(model, q, v, tau, given)))
    print(f"z, w       z_dot = A z + B w, {z_ordering(model)}")
    print(f"A          {lin.A.shape[0]} x {lin.A.shape[1]}    B  {lin.B.shape[0]} x {lin.B.shape[1]}")
    print(f"cond(M)    {np.linalg.cond(M):.4g}")
    print("eig(A)     largest real parts: " + ", ".join(f"{e.real:.4g}{e.imag:+.4g}j" for e in ev[:6]))
    if not HAVE_NUMBA:
        how = "plain Python (numba is not installed)"
    elif group_state("core") == "ready":
        how = "compiled"
    else:
        how = "plain Python: the compiled kernels are being built in the background, once per machine"
    print(f"time       load {1e3 * (t1 - t0):.1f} ms, linearize {1e3 * (t3 - t1):.1f} ms ({how})")
    if out_path is not None:
        try:
            np.savez(out_path, A=lin.A, B=lin.B, q=q, v=v, tau=tau, nu_dot=lin.nu_dot,
                     z_names=np.array(z_names(model)), w_names=np.array(w_names(model)),
                     joint_names=np.array(model.joint_names), floating_base=model.floating_base,
                     z_ordering=np.array(z_ordering(model)), model=np.array(model.name))
        except OSError as e:
            raise ValueError(f"--out: cannot write {out_path}: {e.strerror or e}") from None
        print(f"saved      {out_path}: A, B, q, v, tau, nu_dot, z_names, w_names, joint_names, "
              "floating_base, z_ordering, model")
    return 0


def cmd_compile(args):
    from ._cache import GROUPS, cache_dirs, failure, failure_reason, is_warm
    from ._jit import HAVE_NUMBA
    from .warmup import ensure_compiled

    if not HAVE_NUMBA:
        print("sva-linearizer compile: numba is not installed (or SVA_LINEARIZER_NO_JIT is set): the "
              "kernels run as plain Python, nothing to compile")
        return 0
    if args.report:
        from .tools.compile_report import format_report, measure

        print("sva-linearizer compile --report: compiling every kernel group in a fresh process with "
              "an empty numba cache (minutes) ...", file=sys.stderr, flush=True)
        print(format_report(measure()))
        return 0
    if args.status:
        warm = {g: is_warm(g) for g in GROUPS}
        failed = {g: failure(g) for g in GROUPS if not warm[g]}
        failed = {g: f for g, f in failed.items() if f is not None}
        print(", ".join(f"{g}: {'warm' if w else 'failed' if g in failed else 'cold'}" for g, w in warm.items())
              + f" (cache: {', '.join(cache_dirs())})")
        for g, f in failed.items():
            print(f"{g}: failed: {failure_reason(f)} (package {f.get('version', '?')}, "
                  f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(f.get('time', 0)))}); its kernels run as "
                  "plain Python; `sva-linearizer compile` tries again")
        return 3 if failed else 0 if all(warm.values()) else 1
    r = ensure_compiled("all", verbose=True, force=True)
    if r["failures"]:
        print("sva-linearizer compile: failed stages:\n  " + "\n  ".join(r["failures"]), file=sys.stderr)
        return 1
    print(f"compiled kernels ready ({r['seconds']:.1f} s), cache: {', '.join(r['cache_dirs'])}")
    return 0


def _add_state_options(lp):
    """--urdf/--robot, the base switches, --no-validate, --q, --v, --tau."""
    src = lp.add_mutually_exclusive_group()
    src.add_argument("--urdf", metavar="PATH", help="URDF file")
    src.add_argument("--robot", help="robot name (bundled 'quadruped', or example-robot-data: solo12, "
                                     "anymal_c, ur5, panda, ...); default: the bundled quadruped")
    base = lp.add_mutually_exclusive_group()
    base.add_argument("--floating-base", dest="floating_base", action="store_const", const=True, default=None,
                      help="SE(3) base (default for legged robots, and for --urdf unless its root link is "
                           "'world')")
    base.add_argument("--fixed-base", dest="floating_base", action="store_const", const=False,
                      help="weld the root link to the world (default for arms, and for --urdf whose root "
                           "link is 'world')")
    lp.add_argument("--no-validate", action="store_true",
                    help="physically invalid dynamics (negative mass, indefinite inertia, a massless "
                         "subtree) load with warnings instead of errors, as in Pinocchio")
    lp.add_argument("--q", metavar="NUMBERS",
                    help="configuration: p(3) quaternion x y z w(4) s(nj) (floating) or s(nj) (fixed); "
                         "default: identity pose, s = 0")
    lp.add_argument("--v", metavar="NUMBERS",
                    help="velocity: base body twist v_lin w (6) r(nj) (floating) or r(nj); default 0")
    lp.add_argument("--tau", metavar="NUMBERS", help="joint torques (nj); default 0")


def cmd_plot(args):
    import sva_linearizer as sl
    from .tools.plot import check_output, plot_linearization, require_matplotlib, unstable

    out = check_output(args.out)
    _check_source(args)
    try:
        require_matplotlib()              # before any work: a clear error when it is missing
    except ImportError as e:
        raise ValueError(str(e)) from None
    model = _load_model(args)
    q, v, tau, _ = _state_vectors(args, model)
    state = sl.State.from_vectors(model, q, v)
    frames = [f.strip() for f in (args.contacts or "").split(",") if f.strip()]
    contacts = [sl.Contact(f, kind="point", reference="world_aligned") for f in frames]
    lin = sl.linearize(model, state, tau, contacts=contacts or None, dt=args.dt)
    A, B = (lin.Ad, lin.Bd) if args.dt is not None else (lin.A, lin.B)
    base = "floating" if model.floating_base else "fixed"
    title = (f"{model.name} ({base} base"
             + (f", point contacts {', '.join(frames)}" if frames else "") + f"): {z_ordering(model)}")
    ev = plot_linearization(A, B, z_names(model), w_names(model), out, title=title,
                            discrete=args.dt is not None, dt=args.dt)
    n_bad = int(np.sum(unstable(ev, args.dt is not None)))
    what = "outside the unit circle" if args.dt is not None else "with a positive real part"
    a, b = ("Ad", "Bd") if args.dt is not None else ("A", "B")
    print(f"saved {out}: {a} {A.shape[0]}x{A.shape[1]} ({int(np.count_nonzero(A))} nonzero), "
          f"{b} {B.shape[0]}x{B.shape[1]} ({int(np.count_nonzero(B))} nonzero), {n_bad} eigenvalues of "
          f"{a} {what} (beyond the rounding of repeated eigenvalues)")
    return 0


def build_parser():
    p = argparse.ArgumentParser(prog="sva-linearizer",
                                description="Exact singularity-free linearization of robot dynamics (A, B).")
    sub = p.add_subparsers(dest="command", required=True)
    lp = sub.add_parser(
        "linearize", help="linearize one state and print a summary",
        description="Linearize z_dot = A z + B w at one state and print the state, the meaning of z and w, "
                    "and a summary of A and B. Floating base: z = [z_H (6), s (nj), v (6), r (nj)]; "
                    "fixed base: z = [s, r]; w = tau; joints in the model's order (printed). Vectors: "
                    "numbers separated by commas or spaces, e.g. --q=-0.1,0.2,... or --q -0.1,0.2,...",
        epilog="--out saves A, B, q, v, tau, nu_dot and the labels z_names ('z_H.vx', ..., 's.<joint>', "
               "'v.vx', ..., 'r.<joint>'), w_names ('tau.<joint>'), joint_names, floating_base, z_ordering.")
    _add_state_options(lp)
    lp.add_argument("--out", metavar="FILE.npz", help="save A, B, the state and the labels to this .npz file")
    lp.set_defaults(func=cmd_linearize)
    cp = sub.add_parser("compile", help="compile the numba kernels now (once per machine; e.g. in a Dockerfile)",
                        description="Compile every kernel into numba's on-disk cache (a no-op when it is "
                                    "warm). Without it, the first call of a kernel group starts its compile "
                                    "in a background process and runs the same kernels as plain Python "
                                    "until it is done (SVA_LINEARIZER_COMPILE=wait: compile first).")
    cp.add_argument("--status", action="store_true",
                    help="only say whether the cache is warm (exit 0), cold (exit 1) or holds a failed compile "
                         "(exit 3, with the failed stage and error), and where it is")
    cp.add_argument("--report", action="store_true",
                    help="measure a cold compile in an empty cache (a fresh process; the cache in use is "
                         "untouched): per compilation unit, numba's front end against LLVM, and how many "
                         "units each kernel is linked into")
    cp.set_defaults(func=cmd_compile)
    pp = sub.add_parser(
        "plot", help="draw the sparsity of A and B and the eigenvalues of A (PNG/SVG/PDF; needs matplotlib)",
        description="Linearize at one state (the options of `linearize`) and draw the sparsity of A and B, "
                    "their rows and columns labelled with the blocks of z (z_H, s, v, r) and the joint "
                    "names, and the eigenvalues of A in the complex plane, into one figure.",
        epilog="Needs matplotlib: pip install \"sva_linearizer[plot]\". Example: sva-linearizer plot "
               "--robot solo12 --contacts FL_FOOT,FR_FOOT,HL_FOOT,HR_FOOT --out solo12.png")
    _add_state_options(pp)
    pp.add_argument("--contacts", metavar="FRAMES",
                    help="comma-separated frame names held as world-aligned point contacts (rigid, KKT): "
                         "A and B of the constrained dynamics")
    pp.add_argument("--dt", type=float, metavar="SECONDS",
                    help="draw Ad and Bd of the discrete step of this length (eigenvalues against the unit "
                         "circle) instead of A and B")
    pp.add_argument("--out", metavar="FILE", required=True, help="the figure: FILE.png, FILE.svg or FILE.pdf")
    pp.set_defaults(func=cmd_plot)
    from .tools.bench import add_subcommand as add_bench

    add_bench(sub)
    from .tools.profile import add_subcommand as add_profile

    add_profile(sub)
    from .tools.bench_bag import add_subcommand as add_bench_bag

    add_bench_bag(sub)
    try:
        from .ros.cli import add_subcommands
    except ImportError:  # pragma: no cover - the ROS part is optional at import time
        add_subcommands = None
    if add_subcommands is not None:
        add_subcommands(sub)
    return p


def _exit_on_broken_pipe():
    """stdout's reader went away (``sva-linearizer linearize | head -1``): no traceback, no second
    error when Python flushes stdout at exit; 141 = 128 + SIGPIPE, as a shell reports for `yes | head`."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141


def main(argv=None):
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    ros_args = []
    if "--ros-args" in argv:  # `sva-linearizer node ... --ros-args -p x:=1` as for linearizer_node
        i = argv.index("--ros-args")
        argv, ros_args = argv[:i], argv[i:]
    old_format = warnings.formatwarning
    warnings.formatwarning = _format_warning
    try:
        args = parser.parse_args(join_vector_arguments(argv))
        args.ros_args = ros_args
        code = args.func(args)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        return _exit_on_broken_pipe()
    except (ValueError, FileNotFoundError) as e:
        _flush_quietly()
        print(f"sva-linearizer: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        _flush_quietly()
        print("sva-linearizer: interrupted", file=sys.stderr)
        return 130
    finally:
        warnings.formatwarning = old_format


def _format_warning(message, category, filename, lineno, line=None):
    """Warnings (e.g. of load_urdf(validate=False)) as one line, without a source excerpt."""
    return f"sva-linearizer: warning: {message}\n"


def _flush_quietly():
    try:
        sys.stdout.flush()
    except (BrokenPipeError, OSError, ValueError):
        _exit_on_broken_pipe()


if __name__ == "__main__":
    sys.exit(main())
