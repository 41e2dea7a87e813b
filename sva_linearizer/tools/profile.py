# SPDX-License-Identifier: BSD-3-Clause
"""`sva-linearizer profile`: where one linearization's time goes, stage by stage, and how far each
stage runs from the machine's floating-point peak.

Stages of the pipeline `linearize_state` (linearization/continuous.py), in order:

    prepare      input checks, joint transforms (jcalc), base R and gravity          kinematics.py
    EIDAmb bias  EIDAmb at nu_dot = 0 with the velocities: h(q, nu) (Table 4.1)        eidamb.py
    IMMAmb       M^-1 (Table 4.7 / 4.6)                                               immamb.py
    nu_dot       S tau - h and nu_dot = M^-1 (S tau - h)                              constrained_dynamics.py
    EIDAmb acc   EIDAmb again at the consistent acceleration (accelerations only)     eidamb.py
    IDSVA        the EIDAmb derivatives D (Tables 4.2-4.5 as IDSVA)                    eidamb_derivatives.py
    assembly     -M^-1 D (SIMD tiles over D's support), B = M^-1 S, -ad(v), the        assembly.py,
                 finiteness check                                                     sparse_product.py
    dispatch     the call from Python into linearize_entry_data's compiled code, as linearize
                 makes it (argument unboxing; _jit.direct: without numba's type dispatch)
    Python       sl.linearize around that call (checks, Data, the result object)

Time: each stage runs `reps` times inside one compiled loop on a Data prepared at a random state
(each stage rereads only what the earlier stages left), so the per-call overhead of Python does
not enter a stage's figure; the stages that the pipeline runs as one inlined function are timed
whole and the inner stages subtracted (nu_dot = free_acceleration - EIDAmb bias - IMMAmb;
assembly = linearize_at - EIDAmb acc - IDSVA). Best of several runs.

Floating-point operations: counted, not estimated. A child process runs the same kernels as plain
Python (SVA_LINEARIZER_NO_JIT=1: the numba-free path is the same source) on buffers of a float
subclass that counts every +, -, *, / (a fused multiply-add counts 2; comparisons, negations,
sqrt and copies count 0), stage by stage in the same decomposition.

Peak: the core's double-precision peak at its nominal clock (/proc/cpuinfo), for a core with two
FMA units: scalar 4 flop/cycle, and 4 x the SIMD width in doubles for vectors (Intel AVX-512: 8;
AVX2, and AMD's AVX-512 before Zen 5, executed as two 256-bit halves: 4).
"""
from __future__ import annotations

import json
import os
import subprocess
import time

import numpy as np

from .._child import python_command
from .samples import random_states


STAGES = ("prepare", "EIDAmb bias", "IMMAmb", "nu_dot", "EIDAmb acc", "IDSVA", "assembly")


# ---- compiled loops: one stage `reps` times on the buffers ------------------------------------

def _loops():
    """The profile's compiled loop, compiled in this process (not cached: a tool's kernel stays out
    of the package's cache), with the package's compile options."""
    from .._jit import FASTMATH, HAVE_NUMBA
    if not HAVE_NUMBA:
        raise RuntimeError("the profile times the compiled kernels: it needs numba")
    import numba

    from ..algorithms.eidamb import eidamb, set_base_acceleration
    from ..algorithms.eidamb_derivatives import eidamb_derivatives
    from ..algorithms.immamb import immamb
    from ..algorithms.kinematics import prepare
    from ..layout import views
    from ..algorithms.constrained_dynamics import free_acceleration
    from ..linearization.assembly import linearize_at
    from ..linearization.continuous import linearize_state

    @numba.njit(nogil=True, error_model="numpy", fastmath=FASTMATH)
    def stage_loop(ib, fb, q, vel, tau, A, B, which, reps):
        m, d, _ = views(ib, fb)
        s = 0
        for _ in range(reps):
            if which == 0:
                s += prepare(m, d, q, vel, tau)
            elif which == 1:
                for i in range(m.nv):
                    d.nu_dot[i] = 0.0
                set_base_acceleration(m, d, d.nu_dot)
                eidamb(m, d, vel, d.nu_dot, m.nb > 0)
            elif which == 2:
                s += immamb(m, d)
            elif which == 3:
                s += free_acceleration(m, d, vel, tau)
            elif which == 4:
                set_base_acceleration(m, d, d.nu_dot)
                eidamb(m, d, vel, d.nu_dot, m.nb < 0)
            elif which == 5:
                eidamb_derivatives(m, d)
            elif which == 6:
                s += linearize_at(m, d, vel, A, B, 0.0, A, B)
            else:
                s += linearize_state(m, d, q, vel, tau, A, B, 0.0, A, B)
        return s

    return stage_loop


def _decompose(raw):
    """Per-stage figures from the raw ones (indices as in stage_loop; 7 = the whole pipeline)."""
    return {"prepare": raw[0], "EIDAmb bias": raw[1], "IMMAmb": raw[2],
            "nu_dot": raw[3] - raw[1] - raw[2], "EIDAmb acc": raw[4], "IDSVA": raw[5],
            "assembly": raw[6] - raw[4] - raw[5]}


def time_stages(model, reps: int = 200, runs: int = 15, seed: int = 0) -> dict:
    """Microseconds per call (best of `runs` runs: on a shared machine the least disturbed run is
    the most reproducible figure) of each stage, of the whole compiled pipeline ("kernel"), of
    numba's dispatch into it and of the Python around it (sl.linearize with data=)."""
    import sva_linearizer as sl

    from ..linearization.continuous import _ENTRY_DATA

    linearize_entry_data = _ENTRY_DATA.code or _ENTRY_DATA.get()   # the compiled call, as linearize makes it
    stage_loop = _loops()
    Q, V, T = random_states(model, 1, seed)
    state = sl.State.from_vectors(model, Q[0], V[0])
    q, v, tau = state.q, state.v, T[0]
    d = sl.Data(model)
    A, B = d.A, d.B
    if linearize_entry_data(d.ib, d.fb, q, v, tau, 0.0) != 0:
        raise ValueError("profile: the random state failed to linearize")
    runs_us = {k: [] for k in range(8)}
    entry, python = [], []
    for k in range(8):
        stage_loop(d.ib, d.fb, q, v, tau, A, B, k, 1)   # compile / warm
    for _ in range(runs):
        for k in (0, 1, 2, 3, 4, 5, 6, 7):
            linearize_entry_data(d.ib, d.fb, q, v, tau, 0.0)   # the state every stage expects
            t = time.perf_counter()
            stage_loop(d.ib, d.fb, q, v, tau, A, B, k, reps)
            runs_us[k].append(1e6 * (time.perf_counter() - t) / reps)
        t = time.perf_counter()
        for _ in range(reps):
            linearize_entry_data(d.ib, d.fb, q, v, tau, 0.0)
        entry.append(1e6 * (time.perf_counter() - t) / reps)
        t = time.perf_counter()
        for _ in range(reps):
            sl.linearize(model, state, tau, data=d)
        python.append(1e6 * (time.perf_counter() - t) / reps)
    raw = {k: float(np.min(x)) for k, x in runs_us.items()}
    out = _decompose(raw)
    out["kernel"] = raw[7]
    out["dispatch"] = float(np.min(entry)) - raw[7]
    out["Python"] = float(np.min(python)) - float(np.min(entry))
    out["linearize"] = float(np.min(python))
    return out


# ---- counted flops (run in a child process without numba) ---------------------------------------

_COUNT = [0]


class _Counted(np.float64):
    """A float whose arithmetic counts itself in _COUNT (see the module docstring). A subclass of
    numpy's float64, so that it wins over both float and np.float64 operands (Python tries a
    subclass's reflected operator first): values from np.sin, np.sqrt etc. stay counted when they
    meet a counted one."""
    __slots__ = ()

    def _op(f):  # noqa: N805 - a decorator factory used in the class body
        def op(a, b):
            if not isinstance(b, (float, int)):
                return NotImplemented
            _COUNT[0] += 1
            return _Counted(f(float(a), float(b)))
        return op

    __add__ = _op(lambda a, b: a + b)
    __radd__ = _op(lambda a, b: b + a)
    __sub__ = _op(lambda a, b: a - b)
    __rsub__ = _op(lambda a, b: b - a)
    __mul__ = _op(lambda a, b: a * b)
    __rmul__ = _op(lambda a, b: b * a)
    __truediv__ = _op(lambda a, b: a / b)
    __rtruediv__ = _op(lambda a, b: b / a)
    del _op

    def __neg__(self):
        return _Counted(-float(self))


def _counted(a):
    out = np.empty(a.shape, dtype=object)
    out.flat[:] = [_Counted(x) for x in a.flat]
    return out


def count_flops(model, seed: int = 0) -> dict:
    """Floating-point operations of each stage (plain-Python kernels on counting floats; call in a
    process with SVA_LINEARIZER_NO_JIT=1, see flops_in_child)."""
    from .. import _jit
    if _jit.HAVE_NUMBA:
        raise RuntimeError("count_flops runs the plain-Python kernels: set SVA_LINEARIZER_NO_JIT=1")
    import sva_linearizer as sl

    from ..algorithms.eidamb import eidamb, set_base_acceleration
    from ..algorithms.eidamb_derivatives import eidamb_derivatives
    from ..algorithms.immamb import immamb
    from ..algorithms.kinematics import prepare
    from ..layout import views_py
    from ..algorithms.constrained_dynamics import free_acceleration
    from ..linearization.assembly import linearize_at
    from ..linearization.continuous import linearize_state

    Q, V, T = random_states(model, 1, seed)
    state = sl.State.from_vectors(model, Q[0], V[0])
    d = sl.Data(model)
    fb = _counted(d.fb)
    q, v, tau = _counted(state.q), _counted(state.v), _counted(T[0])
    A = _counted(np.zeros((2 * model.nv, 2 * model.nv)))
    B = _counted(np.zeros((2 * model.nv, model.nj)))
    m, w, _ = views_py(d.ib, fb)

    def counted(fn):
        before = _COUNT[0]
        fn()
        return _COUNT[0] - before

    def bias_pass():
        for i in range(m.nv):
            w.nu_dot[i] = 0.0            # as free_acceleration sets it (a constant is not counted)
        set_base_acceleration(m, w, w.nu_dot)
        eidamb(m, w, v, w.nu_dot, True)

    def acc_pass():
        set_base_acceleration(m, w, w.nu_dot)
        eidamb(m, w, v, w.nu_dot, False)

    raw = {}
    raw[0] = counted(lambda: prepare(m, w, q, v, tau))
    raw[1] = counted(bias_pass)
    raw[2] = counted(lambda: immamb(m, w))
    raw[3] = counted(lambda: free_acceleration(m, w, v, tau))
    raw[4] = counted(acc_pass)
    raw[5] = counted(lambda: eidamb_derivatives(m, w))
    raw[6] = counted(lambda: linearize_at(m, w, v, A, B, 0.0, A, B))
    raw[7] = counted(lambda: linearize_state(m, w, q, v, tau, A, B, 0.0, A, B))
    out = _decompose(raw)
    out["kernel"] = raw[7]
    return out


def flops_in_child(robot: str, floating_base: bool | None = None) -> dict:
    """count_flops for a named robot, in a child process without numba."""
    code = ("import json, sys; from sva_linearizer.robots import load_robot; "
            "from sva_linearizer.tools.profile import count_flops; "
            f"m = load_robot({robot!r}{'' if floating_base is None else f', floating_base={floating_base}'}); "
            "print(json.dumps(count_flops(m)))")
    env = dict(os.environ, SVA_LINEARIZER_NO_JIT="1")
    r = subprocess.run(python_command(code), capture_output=True, text=True, env=env,
                       timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"profile: counting the flops of {robot} failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


# ---- vector instructions in the compiled pipeline ------------------------------------------------

_ASM_CHILD = """
import json, re, sys
import numpy as np
import numba
from sva_linearizer._jit import FASTMATH
from sva_linearizer._lanes import aligned_empty, as_lanes
from sva_linearizer.data import Data
from sva_linearizer.layout import views
from sva_linearizer.linearization.continuous import linearize_state
from sva_linearizer.robots import load_robot

width = int(sys.argv[1])
opts = dict(nogil=True, error_model="numpy", fastmath=FASTMATH)

@numba.njit(**opts)
def one_state(ib, fb, q, v, tau, A, B):
    m, d, _ = views(ib, fb)
    return linearize_state(m, d, q, v, tau, A, B, 0.0, A, B)

@numba.njit(**opts)
def lanes(ib, fb, q, v, tau, A, B, tag):
    m, d, _ = views(ib, as_lanes(fb, tag))
    return linearize_state(m, d, as_lanes(q, tag), as_lanes(v, tag), as_lanes(tau, tag), as_lanes(A, tag),
                           as_lanes(B, tag), 0.0, as_lanes(A, tag), as_lanes(B, tag))

model = load_robot("ur5")
d = Data(model)
nx, nj = 2 * model.nv, model.nj
one_state(d.ib, d.fb, np.zeros(model.nq), np.zeros(model.nv), np.zeros(nj), np.empty((nx, nx)), np.empty((nx, nj)))
L = [aligned_empty(s, width) for s in ((d.fb.size, width), (model.nq, width), (model.nv, width), (nj, width),
                                        (nx, nx, width), (nx, nj, width))]
for x in L:
    x[:] = 0.0
L[0][:] = d.fb[:, None]
lanes(*([d.ib] + L + [(0.0,) * width]))
pattern = re.compile(r"^\\s*(v?(?:fn?m(?:add|sub)\\d+|mul|add|sub|div)([ps])d)\\s+([^\\n]*)", re.M)
out = {}
for name, fn in (("one_state", one_state), ("lanes", lanes)):
    counts = {"scalar": 0, "xmm": 0, "ymm": 0, "zmm": 0}
    for op, kind, operands in pattern.findall(fn.inspect_asm(fn.signatures[0])):
        if kind == "s":
            counts["scalar"] += 1
        else:
            counts["zmm" if "zmm" in operands else "ymm" if "ymm" in operands else "xmm"] += 1
    out[name] = counts
print(json.dumps(out))
"""


def vector_instruction_counts(width: int) -> dict:
    """The double-precision arithmetic instructions (multiply, add, subtract, divide, fused
    multiply-add) in the machine code of the pipeline `linearize_state`, compiled for one state
    and for lanes of `width` states: {"one_state": counts, "lanes": counts}, counts = {"scalar": n,
    "xmm": n, "ymm": n, "zmm": n} by register width (xmm: 2 doubles, ymm: 4, zmm: 8). Compiled in a
    child process with an empty numba cache (numba shows no assembly for cached code): about two
    minutes on a 2-core machine."""
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        r = subprocess.run(python_command(_ASM_CHILD, str(width)), capture_output=True, text=True, env=env,
                           timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"profile --asm: compiling the pipeline failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


# ---- the machine ---------------------------------------------------------------------------------

def machine_peak() -> dict:
    """Nominal clock and double-precision peaks of one core (GFLOP/s), from /proc/cpuinfo; with
    the CPU's family and model and LLVM's name for it (what numba compiles for), since the
    ratios to Pinocchio depend on the CPU (machine_line)."""
    ghz, flags, name, family, model = None, set(), "unknown CPU", None, None
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                key, _, val = line.partition(":")
                key = key.strip()
                if key == "cpu MHz" and ghz is None:
                    ghz = float(val) / 1000.0
                elif key == "flags" and not flags:
                    flags = set(val.split())
                elif key == "model name" and name == "unknown CPU":
                    name = val.strip()
                elif key == "cpu family" and family is None:
                    family = int(val)
                elif key == "model" and model is None:
                    model = int(val)
    except (OSError, ValueError):
        pass
    try:
        import llvmlite.binding as llvm
        llvm_cpu = llvm.get_host_cpu_name()
    except Exception:  # pragma: no cover - no llvmlite (no numba): not needed for the figures
        llvm_cpu = "?"
    amd = "AMD" in name
    width = 8 if "avx512f" in flags and not amd else 4 if "avx2" in flags else 2
    if amd and family == 23 and model is not None and model < 0x30:
        width = 2     # Zen 1 / Zen+: 256-bit instructions run as two halves on 128-bit units
    fma = "fma" in flags
    per_cycle = 4 if fma else 2                     # two FMA units (2 flops each), or add + mul
    return {"cpu": name, "family": family, "model": model, "llvm_cpu": llvm_cpu, "ghz": ghz,
            "simd_doubles": width,
            "scalar_peak": None if ghz is None else ghz * per_cycle,
            "simd_peak": None if ghz is None else ghz * per_cycle * width}


def machine_line(peak: dict | None = None) -> str:
    """One line naming this machine's CPU, for the bench's and the profile's headers."""
    peak = peak or machine_peak()
    clock = f", {peak['ghz']:.2f} GHz" if peak["ghz"] else ""
    return (f"{peak['cpu']} (family {peak['family']}, model {peak['model']}; numba compiles for "
            f"{peak['llvm_cpu']}){clock}, {os.cpu_count()} CPUs")


# ---- the command ---------------------------------------------------------------------------------

def profile_robot(robot: str, reps: int, runs: int) -> dict:
    from ..robots import load_robot

    model = load_robot(robot)
    return {"robot": robot, "nv": model.nv, "time_us": time_stages(model, reps, runs),
            "flops": flops_in_child(robot)}


def print_profile(res: dict, peak: dict) -> None:
    t, f = res["time_us"], res["flops"]
    total = t["linearize"]
    print(f"\n{res['robot']} (nv = {res['nv']}): sl.linearize {total:.2f} us, "
          f"kernel {t['kernel']:.2f} us, {f['kernel']} flop")
    print(f"  {'stage':<12} {'us':>7} {'share':>6} {'flop':>9} {'GFLOP/s':>8} {'of scalar peak':>15}")
    for name in STAGES + ("dispatch", "Python"):
        us = t[name]
        fl = f.get(name)
        gf = fl / (us * 1e3) if fl and us > 0 else None
        of = f"{100 * gf / peak['scalar_peak']:.0f} %" if gf and peak["scalar_peak"] else "-"
        print(f"  {name:<12} {us:7.2f} {100 * us / total:5.0f}% {fl if fl is not None else '-':>9} "
              f"{'-' if gf is None else f'{gf:.2f}':>8} {of:>15}")
    gf = f["kernel"] / (t["kernel"] * 1e3)
    print(f"  {'kernel':<12} {t['kernel']:7.2f} {100 * t['kernel'] / total:5.0f}% {f['kernel']:>9} "
          f"{gf:8.2f} {100 * gf / peak['scalar_peak']:.0f} % (SIMD peak: "
          f"{100 * gf / peak['simd_peak']:.1f} %)" if peak["scalar_peak"] else "")


def cmd_profile(args) -> int:
    peak = machine_peak()
    print(machine_line(peak))
    print(f"one core's double peak at the nominal clock: "
          f"{peak['scalar_peak']:.1f} GFLOP/s scalar, {peak['simd_peak']:.1f} GFLOP/s with "
          f"{peak['simd_doubles']}-wide SIMD (2 FMA units assumed)" if peak["ghz"] else "CPU clock unknown")
    if args.horizon:
        from .horizon_bounds import horizon_bounds, print_bounds

        rows = [horizon_bounds(robot, args.horizon, args.runs) for robot in args.robots]
        print_bounds(rows)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"peak": peak, "horizon": rows}, fh, indent=1)
        return 0
    if args.asm:
        from .._lanes import lane_width

        width = lane_width()
        counts = vector_instruction_counts(width)
        print("double-precision multiply / add / subtract / divide / fused multiply-add instructions in the "
              "machine code of linearize_state (ur5's call; the code is the same for every robot):")
        for name, label in (("one_state", "one state"), ("lanes", f"lanes of {width} (linearize_batch)")):
            c = counts[name]
            print(f"  {label:<32} scalar {c['scalar']:>6}  xmm (2) {c['xmm']:>6}  ymm (4) {c['ymm']:>6}  "
                  f"zmm (8) {c['zmm']:>6}")
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"peak": peak, "width": width, "instructions": counts}, fh, indent=1)
        return 0
    results = []
    for robot in args.robots:
        res = profile_robot(robot, args.reps, args.runs)
        print_profile(res, peak)
        results.append(res)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"peak": peak, "robots": results}, fh, indent=1)
    return 0


def add_subcommand(sub) -> None:
    p = sub.add_parser("profile", help="time and flops of each stage of one linearization",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("robots", nargs="*", default=["solo12"], help="robot names (default: solo12)")
    p.add_argument("--reps", type=int, default=200, help="calls per timing run (default 200)")
    p.add_argument("--runs", type=int, default=15, help="timing runs; the best is printed (default 15)")
    p.add_argument("--json", metavar="FILE", help="also write the figures to this JSON file")
    p.add_argument("--asm", action="store_true",
                   help="instead: count the vector instructions in the pipeline's machine code, compiled for "
                        "one state and for linearize_batch's lanes (about two minutes)")
    p.add_argument("--horizon", type=int, default=0, metavar="N",
                   help="instead: a horizon of N states taken apart, per state on one thread: linearize_batch, "
                        "its lane pipeline alone, its copy-out alone, numpy copying the same bytes, its Python, "
                        "Pinocchio's bare loop")
    p.set_defaults(func=cmd_profile)
