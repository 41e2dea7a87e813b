# SPDX-License-Identifier: BSD-3-Clause
"""What bounds a horizon's time per state (`sva-linearizer profile --horizon`): linearize_batch's
lockstep groups taken apart, each part timed on its own at the rate the batch runs it, one thread.

- batch:    linearize_batch(model, Q, V, T, out=(A, B)), the whole call;
- pipeline: the lane kernel without its outputs: each group's q, v, tau interleaved and
            linearize_state on the lanes' workspace (A and B stay in the lanes);
- copy-out: the lanes' A and B written to each state's arrays (`_lanes.copy_out`), nothing else;
- memcpy:   numpy copying the same bytes (N states' A and B) from one array to another;
- Python:   linearize_batch minus one call of the lane kernel's entry on all N states (the
            arguments' checks, the output and workspace lookups, the call);
- Pinocchio: computeABADerivatives in a Python loop on its own Data (the bench's baseline).

Each is the best of `runs` timing runs of `number` calls, per state; the parts run in turn."""
from __future__ import annotations

import os
import time

import numpy as np

PARTS = ("batch", "pipeline", "copy-out", "memcpy", "Python", "Pinocchio")


def _kernels():
    """The two lane kernels of the measurement, compiled here (numba is required)."""
    import numba

    from .._jit import FASTMATH
    from .._lanes import as_lanes, copy_out, interleave
    from ..layout import views
    from ..linearization.continuous import linearize_state

    opts = dict(nogil=True, error_model="numpy", fastmath=FASTMATH)

    @numba.njit(**opts)
    def pipeline(ib, fbl, tag, Q, V, TAU, idx, lo, hi, QL, VL, TL, AL, BL):
        ml, dl, _ = views(ib, as_lanes(fbl, tag))
        q, v, tau = as_lanes(QL, tag), as_lanes(VL, tag), as_lanes(TL, tag)
        A, B = as_lanes(AL, tag), as_lanes(BL, tag)
        width, failed = len(tag), 0
        for g in range(lo, hi, width):
            interleave(Q, QL, idx, g, min(hi, g + width))
            interleave(V, VL, idx, g, min(hi, g + width))
            interleave(TAU, TL, idx, g, min(hi, g + width))
            failed += linearize_state(ml, dl, q, v, tau, A, B, 0.0, A, B) != 0
        return failed

    @numba.njit(**opts)
    def copy_outputs(tag, idx, lo, hi, AL, BL, OA, OB):
        A, B = as_lanes(AL, tag), as_lanes(BL, tag)
        width = len(tag)
        for g in range(lo, hi, width):
            copy_out(AL, A, OA, idx, g, min(hi, g + width))
            copy_out(BL, B, OB, idx, g, min(hi, g + width))

    return pipeline, copy_outputs


def _best_us(fn, runs: int, number: int) -> float:
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best * 1e6


def horizon_bounds(robot: str, horizon: int = 64, runs: int = 15, number: int = 10, seed: int = 0) -> dict:
    """The parts' times per state (us) for `robot` on a horizon of random states, one thread:
    {"robot", "nv", "lanes", "horizon", "out_kb" (A and B per state, 1000 bytes), part: us for each
    of PARTS (Pinocchio: None without it), "ratio": {part: part / Pinocchio for each of PARTS (None
    without Pinocchio)}}."""
    import sva_linearizer as sl

    from .._jit import wait_until_compiled
    from .._lanes import LaneExtras, lane_width
    from ..data import get_data
    from ..linearization.batch import FreeLanes, _lane_workspace
    from ..robots import load_robot, robot_urdf_path
    from .samples import pinocchio_model, random_states

    model = load_robot(robot)
    if not wait_until_compiled("batch"):       # (compiles the group first where it is cold)
        raise ValueError("profile --horizon: the batch kernels are not compiled (numba is missing, or "
                         "their compile failed: `sva-linearizer compile --status`)")
    old = os.environ.get("SVA_LINEARIZER_NUM_THREADS")
    os.environ["SVA_LINEARIZER_NUM_THREADS"] = "1"
    try:
        pipeline, copy_outputs = _kernels()
        Q, V, T = random_states(model, horizon, seed)
        nv, nj, N = model.nv, model.nj, horizon
        OA, OB = np.empty((N, 2 * nv, 2 * nv)), np.empty((N, 2 * nv, nj))
        d = get_data(model)
        width = lane_width()
        ws = _lane_workspace(d, 0, width, False)
        tag = (0.0,) * width
        idx = np.arange(N, dtype=np.int64)
        QL, VL, TL, AL, BL = ws.arrays[:5]
        status = np.zeros(N, dtype=np.int64)
        run = FreeLanes(d, width, 0.0, Q, V, T, idx, OA, OB, LaneExtras.none(), status, 1)
        entry_args = run._args(run.ws[0], 0, N)
        SA, SB = np.random.default_rng(seed).normal(size=OA.shape), np.ones(OB.shape)
        fns = {
            "batch": lambda: sl.linearize_batch(model, Q, V, T, out=(OA, OB)),
            "pipeline": lambda lo=0, hi=N: pipeline(d.ib, ws.fb, tag, Q, V, T, idx, lo, hi, QL, VL, TL, AL, BL),
            "copy-out": lambda lo=0, hi=N: copy_outputs(tag, idx, lo, hi, AL, BL, OA, OB),
            "memcpy": lambda: (np.copyto(OA, SA), np.copyto(OB, SB)),
            "entry": lambda: run.entry(*entry_args),
        }
        try:
            pin, pm, pd = pinocchio_model(robot_urdf_path(robot), model.floating_base, model)
            TF = np.hstack([np.zeros((N, nv - nj)), T])

            def pinocchio():
                for i in range(N):
                    pin.computeABADerivatives(pm, pd, Q[i], V[i], TF[i])
            fns["Pinocchio"] = pinocchio
        except ImportError:
            pass
        for fn in fns.values():
            fn()
        _check_parts(robot, fns, OA, OB, width)
        times = {k: [] for k in fns}
        for _ in range(3):                  # the parts take turns, three rounds; each part's best
            for k, fn in fns.items():
                times[k].append(_best_us(fn, max(1, runs // 3), number) / N)
        us = {k: min(v) for k, v in times.items()}
        us["Python"] = max(0.0, us["batch"] - us.pop("entry"))
        pin_us = us.get("Pinocchio")
        out = {"robot": robot, "nv": nv, "lanes": width, "horizon": N,
               "out_kb": 8 * (OA[0].size + OB[0].size) / 1e3,
               "ratio": {k: (us[k] / pin_us if pin_us and k in us else None) for k in PARTS}}
        out.update({k: us.get(k) for k in PARTS})
        return out
    finally:
        if old is None:
            del os.environ["SVA_LINEARIZER_NUM_THREADS"]
        else:
            os.environ["SVA_LINEARIZER_NUM_THREADS"] = old


def _check_parts(robot, fns, OA, OB, width) -> None:
    """The parts compute what the batch does: the pipeline then the copy-out, group by group, give
    every state's A and B of linearize_batch (within 1e-12 of each matrix's largest entry: the
    measurement's kernel is a compilation of its own, which may contract a * b + c differently)."""
    fns["batch"]()
    A0, B0 = OA.copy(), OB.copy()
    OA[:], OB[:] = np.nan, np.nan
    for g in range(0, OA.shape[0], width):
        hi = min(OA.shape[0], g + width)
        if fns["pipeline"](g, hi):
            raise RuntimeError(f"profile --horizon: a lockstep group of {robot}'s random states failed")
        fns["copy-out"](g, hi)
    for name, X, X0 in (("A", OA, A0), ("B", OB, B0)):
        scale = np.abs(X0).max(axis=(1, 2), keepdims=True)
        if not np.all(np.abs(X - X0) <= 1e-12 * scale):
            raise RuntimeError(f"profile --horizon: {robot}'s pipeline and copy-out differ from linearize_batch "
                               f"in {name}")


def print_bounds(rows: list) -> None:
    print("a horizon per state, one thread (us; in brackets: over Pinocchio's bare loop): the whole batch, "
          "the lane pipeline alone, the copy-out alone, numpy copying the same bytes, the Python around "
          "the lane kernel")
    head = f"{'robot':<12}{'nv':>4}{'L':>3}{'A,B KB':>8} |" + "".join(f"{p:>17}" for p in PARTS)
    print(head)
    print("-" * len(head))
    for r in rows:
        cells = []
        for p in PARTS:
            v, q = r[p], r["ratio"][p]
            cells.append(f"{'-':>17}" if v is None else f"{v:8.2f}{f' ({q:.3f})' if q else '':>9}")
        print(f"{r['robot']:<12}{r['nv']:>4}{r['lanes']:>3}{r['out_kb']:>8.1f} |" + "".join(cells))
