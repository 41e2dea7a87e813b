# SPDX-License-Identifier: BSD-3-Clause
"""linearize_batch's lockstep groups (sva_linearizer/_lanes.py, linearization/batch.py): the lane
type's arithmetic against numpy lane by lane, helpers inlined by numba on numbers and by LLVM on
lanes, every robot's batch against its states one at a time (with and without dt, a last group
filled up), failing states inside a group, and the vector instructions in the compiled batch
kernel."""
from __future__ import annotations

import math

import numpy as np
import pytest

import sva_linearizer as sl
from sva_linearizer._jit import HAVE_NUMBA, compiled, decide_groups
from sva_linearizer._lanes import lane_width
from sva_linearizer.robots import KNOWN_ROBOTS, load_robot
from sva_linearizer.tools.samples import random_states

needs_numba = pytest.mark.skipif(not HAVE_NUMBA, reason="lanes are numba's (without it a batch runs state by state)")


@needs_numba
@pytest.mark.parametrize("width", [2, 4, 8])
def test_lane_arithmetic_is_numpys_lane_by_lane(width):
    import numba

    from sva_linearizer._lanes import aligned_empty, all_lanes, any_lane, as_lanes, where

    @numba.njit
    def kernel(X, Y, OUT, FLAGS, tag):
        x, y, out = as_lanes(X, tag), as_lanes(Y, tag), as_lanes(OUT, tag)
        a, b = x[0], y[0]
        out[0] = a * b + 2.0 * a - b / 3.0
        out[1] = -a + 1
        out[2] = math.sqrt(abs(a))
        out[3] = math.sin(a) + np.cos(b)
        out[4] = max(a, b) - min(a, 0.5)
        out[5] = where(a > b, a, b * 2.0)
        out[6] = 0.0
        out[6] += a
        out[6] *= b
        FLAGS[0] = any_lane(a > b)
        FLAGS[1] = all_lanes(a > b)
        FLAGS[2] = all_lanes(math.isfinite(b))
        FLAGS[3] = any_lane(a != a)

    rng = np.random.default_rng(3)
    X, Y, OUT = (aligned_empty(s, width) for s in ((1, width), (1, width), (7, width)))
    X[:], Y[:] = rng.normal(size=(1, width)), rng.normal(size=(1, width))
    flags = np.zeros(4, dtype=np.bool_)
    kernel(X, Y, OUT, flags, (0.0,) * width)
    a, b = X[0], Y[0]
    ref = [a * b + 2.0 * a - b / 3.0, -a + 1, np.sqrt(np.abs(a)), np.sin(a) + np.cos(b),
           np.maximum(a, b) - np.minimum(a, 0.5), np.where(a > b, a, 2.0 * b), a * b]
    np.testing.assert_allclose(OUT, np.array(ref), rtol=1e-15, atol=1e-15)
    assert list(flags) == [np.any(a > b), np.all(a > b), True, False]
    Y[0, width - 1] = np.inf
    kernel(X, Y, OUT, flags, (0.0,) * width)
    assert not flags[2]


@needs_numba
@pytest.mark.parametrize("width", [2, 4, 8])
def test_copy_out_writes_each_lane_to_its_state(width):
    """copy_out against numpy's de-interleave: matrices smaller than a block, of whole blocks and
    with a remainder, whole groups and a last group part full, states in any order, and outputs
    with more columns than the lanes' matrix (those columns untouched)."""
    import numba

    from sva_linearizer._lanes import aligned_empty, as_lanes, copy_out

    @numba.njit
    def kernel(XL, OX, idx, lo, hi, tag):
        copy_out(XL, as_lanes(XL, tag), OX, idx, lo, hi)

    rng = np.random.default_rng(5)
    tag = (0.0,) * width
    for rows, cols, extra in ((1, 1, 0), (1, 3, 0), (3, 5, 0), (12, 12, 0), (12, 6, 0), (7, 11, 0),
                              (70, 70, 0), (70, 29, 3), (6, 2 * width + 1, 2), (5, width, 1)):
        XL = aligned_empty((rows, cols, width), width)
        XL[:] = rng.normal(size=XL.shape)
        N = 3 * width
        idx = rng.permutation(N).astype(np.int64)
        for lo, hi in ((width, 2 * width), (2 * width, 2 * width + max(1, width - 1))):
            OX = np.full((N, rows, cols + extra), np.nan)
            kernel(XL, OX, idx, lo, hi, tag)
            for p in range(N):
                i = idx[p]
                if lo <= p < hi:
                    assert np.array_equal(OX[i, :, :cols], XL[..., p - lo]), (rows, cols, extra, lo, hi, p)
                    assert np.isnan(OX[i, :, cols:]).all()
                else:
                    assert np.isnan(OX[i]).all()


@needs_numba
def test_a_branch_on_lanes_does_not_compile():
    """A comparison of lanes has no truth value: a kernel cannot take one lane's branch for all."""
    import numba

    from sva_linearizer._lanes import aligned_empty, as_lanes

    @numba.njit
    def kernel(X, tag):
        x = as_lanes(X, tag)
        return 1 if x[0] > 0.0 else 0

    with pytest.raises(numba.core.errors.TypingError):
        kernel(aligned_empty((1, 4), 4), (0.0,) * 4)


@needs_numba
def test_helpers_are_compiled_once_per_signature_and_inlined_by_llvm():
    """The package's helpers (njit's inline="always", _jit.HELPER_OPTIONS) are compiled once per
    signature, on numbers and on lanes, and LLVM inlines them even where its own cost model would
    not (a 6x6 product, called twice): the callers' optimised code calls no helper. Same numbers
    both ways."""
    import numba

    from sva_linearizer._jit import HELPER_OPTIONS
    from sva_linearizer._lanes import aligned_empty, as_lanes

    @numba.njit(**HELPER_OPTIONS)
    def accumulate(a, b, out):
        for i in range(6):
            for j in range(6):
                acc = out[i, j]
                for k in range(6):
                    acc += a[i, k] * b[k, j]
                out[i, j] = acc

    @numba.njit
    def on_numbers(X):
        accumulate(X[0], X[1], X[2])
        accumulate(X[2], X[0], X[1])

    @numba.njit
    def lanes_kernel(x):
        accumulate(x[0], x[1], x[2])
        accumulate(x[2], x[0], x[1])

    @numba.njit
    def on_lanes(X, tag):
        lanes_kernel(as_lanes(X, tag))

    rng = np.random.default_rng(3)
    X = rng.normal(size=(3, 6, 6))
    expected = X.copy()
    expected[2] += expected[0] @ expected[1]
    expected[1] += expected[2] @ expected[0]
    on_numbers(X)
    np.testing.assert_allclose(X, expected, rtol=1e-14, atol=1e-14)
    XL = aligned_empty((3, 6, 6, 4), 4)
    XL[...] = rng.normal(size=XL.shape)
    expected = XL.copy()
    for lane in range(4):
        e = expected[..., lane]
        e[2] += e[0] @ e[1]
        e[1] += e[2] @ e[0]
    on_lanes(XL, (0.0,) * 4)
    np.testing.assert_allclose(XL, expected, rtol=1e-14, atol=1e-14)
    assert sorted(str(sig[0].dtype) for sig in accumulate.signatures) == ["Lanes4", "float64"]
    for caller in (on_numbers, lanes_kernel):
        for module in caller.inspect_llvm().values():     # the optimised module, helpers linked
            calls = [line for line in module.splitlines() if " call " in line and "accumulate" in line]
            assert calls == [], calls[:2]


def _batch_ready():
    decide_groups("batch")
    return compiled("batch")


# every bundled robot that loads (romeo_laas_small's URDF has non-physical inertias: test_urdf)
LOADABLE = sorted(set(KNOWN_ROBOTS) - {"romeo_laas_small"})


@pytest.mark.parametrize("robot", LOADABLE)
def test_every_robots_batch_is_its_states_one_by_one(robot):
    """Two full groups and a last one filled up, with and without dt: within 1e-12 (relative to the
    largest entry) of linearize on each state."""
    model = load_robot(robot)
    L = lane_width() if _batch_ready() else 1
    N = 2 * L + 3
    Q, V, T = random_states(model, N, seed=5)
    A, B = sl.linearize_batch(model, Q, V, T)
    Ad, Bd = sl.linearize_batch(model, Q, V, T, dt=0.004)
    for i in range(N):
        lin = sl.linearize(model, sl.State.from_vectors(model, Q[i], V[i]), T[i], dt=0.004)
        for ours, ref in ((A[i], lin.A), (B[i], lin.B), (Ad[i], lin.Ad), (Bd[i], lin.Bd)):
            np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12 * np.abs(ref).max())


def test_a_failing_state_inside_a_group():
    """A group with a bad state is computed state by state: the others keep their exact results and
    the error names the first bad one, wherever it sits in its group."""
    model = load_robot("solo12")
    L = lane_width() if _batch_ready() else 1
    N = 3 * L + 1
    Q, V, T = random_states(model, N, seed=6)
    A, B = sl.linearize_batch(model, Q, V, T)
    for bad in {1, L + L // 2, N - 1}:
        Qb = Q.copy()
        Qb[bad, 8] = np.inf
        with pytest.raises(ValueError, match=f"state {bad}: q: entry 8"):
            sl.linearize_batch(model, Qb, V, T)
    Tb = T.copy()
    Tb[L + 1, 2] = 1e308        # finite input, an overflowing result
    with pytest.raises(ValueError, match=f"state {L + 1}: the linearization overflowed"):
        sl.linearize_batch(model, Q, V, Tb)
    np.testing.assert_array_equal(sl.linearize_batch(model, Q, V, T)[0], A)   # nothing left behind


def _contacts_batch_ready():
    decide_groups("contacts_batch")
    return compiled("contacts_batch")


FEET = {"solo12": ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"), "go2": ("FL_foot", "FR_foot", "RL_foot", "RR_foot")}


@pytest.mark.parametrize("reference", ["local", "world_aligned"])
@pytest.mark.parametrize("robot", ["solo12", "go2", "talos"])
def test_a_batch_with_contacts_is_its_states_one_by_one(robot, reference):
    """Rigid contacts (three point feet of a quadruped, the last foot's force an input given per
    state; a humanoid's two 6d soles) in lockstep groups, two full and one filled up: A, B and with
    dt= Ad, Bd within 1e-12 (relative to the largest entry) of linearize(contacts=, forces=, dt=)
    on each state."""
    model = load_robot(robot)
    L = lane_width() if _contacts_batch_ready() else 1
    N = 2 * L + 3
    Q, V, T = random_states(model, N, seed=7)
    if robot == "talos":
        contacts = [sl.Contact(f, "6d", reference) for f in ("left_sole_link", "right_sole_link")]
        forces = None
    else:
        contacts = [sl.Contact(f, "point", reference) for f in FEET[robot][:3]]
        F = np.random.default_rng(7).normal(scale=20.0, size=(N, 3))
        forces = [(sl.Contact(FEET[robot][3], "point", reference), F)]
    A, B = sl.linearize_batch(model, Q, V, T, contacts=contacts, forces=forces)
    Ad, Bd = sl.linearize_batch(model, Q, V, T, contacts=contacts, forces=forces, dt=0.01)
    for i in range(N):
        fi = [(forces[0][0], F[i])] if forces else None
        lin = sl.linearize(model, sl.State.from_vectors(model, Q[i], V[i]), T[i], contacts=contacts, forces=fi,
                           dt=0.01)
        for ours, ref in ((A[i], lin.A), (B[i], lin.B), (Ad[i], lin.Ad), (Bd[i], lin.Bd)):
            np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12 * np.abs(ref).max())


def test_a_failing_state_inside_a_group_with_contacts():
    """A group with contacts and a bad state is computed state by state, with and without dt: the
    error names the state, and the group's other states get linearize's results (out=; within
    1e-12: the BLAS products' last bits depend on where their operands lie)."""
    model = load_robot("solo12")
    L = lane_width() if _contacts_batch_ready() else 1
    N = 3 * L + 1
    Q, V, T = random_states(model, N, seed=8)
    contacts = [sl.Contact(f, "point") for f in FEET["solo12"]]
    A, B = sl.linearize_batch(model, Q, V, T, contacts=contacts)
    for dt in (None, 0.01):
        for bad in {1, L + L // 2, N - 1}:
            Vb = V.copy()
            Vb[bad, 7] = np.nan
            out = (np.zeros_like(A), np.zeros_like(B))
            with pytest.raises(ValueError, match=f"state {bad}: v: entry 7"):
                sl.linearize_batch(model, Q, Vb, T, contacts=contacts, dt=dt, out=out)
            other = bad ^ 1 if bad ^ 1 < N else bad - 1     # in bad's group (groups start at multiples of L)
            lin = sl.linearize(model, sl.State.from_vectors(model, Q[other], V[other]), T[other],
                               contacts=contacts, dt=dt)
            for ours, ref in ((out[0][other], lin.A if dt is None else lin.Ad),
                              (out[1][other], lin.B if dt is None else lin.Bd)):
                np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    with pytest.raises(ValueError, match=r"state 0: the linearization overflowed float64 \(Ad, Bd"):
        sl.linearize_batch(model, Q, V, T, contacts=contacts, dt=1e300)
    np.testing.assert_array_equal(sl.linearize_batch(model, Q, V, T, contacts=contacts)[0], A)


@needs_numba
def test_while_the_lane_groups_compile_a_batch_runs_the_compiled_one_state_pipeline(monkeypatch):
    """While the batch and contacts_batch groups are not compiled (their background compile
    running), linearize_batch calls the compiled one-state entry points state by state from
    Python: no kernel runs its plain-Python form (hundreds of times slower), with or without
    contacts and dt, and each result is linearize's."""
    from sva_linearizer import _jit

    model = load_robot("solo12")
    N = 5
    Q, V, T = random_states(model, N, seed=9)
    contacts = [sl.Contact(f, "point") for f in FEET["solo12"]]
    cases = ({}, {"dt": 0.01}, {"contacts": contacts}, {"contacts": contacts, "dt": 0.01})
    refs = [[sl.linearize(model, sl.State.from_vectors(model, Q[i], V[i]), T[i], **kw) for i in range(N)]
            for kw in cases]            # (the core and contacts groups compiled: SVA_LINEARIZER_COMPILE=wait)
    plain = []
    real = _jit._plain_call
    monkeypatch.setattr(_jit, "_plain_call", lambda d: plain.append((d.py_func.__name__, d.compile_group)) or real(d))
    monkeypatch.setitem(_jit._state, "batch", "plain")
    monkeypatch.setitem(_jit._state, "contacts_batch", "plain")
    for kw, lins in zip(cases, refs):
        A, B = sl.linearize_batch(model, Q, V, T, **kw)
        for i, lin in enumerate(lins):
            for ours, ref in ((A[i], lin.Ad if "dt" in kw else lin.A), (B[i], lin.Bd if "dt" in kw else lin.B)):
                np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    assert plain == []


@needs_numba
def test_the_lane_pipeline_computes_with_vector_instructions():
    """The pipeline compiled on lanes does its double-precision arithmetic in full-width vector
    instructions, where the one-state pipeline's is scalar (counted in the machine code, compiled
    afresh in a child process: `sva-linearizer profile --asm`)."""
    from sva_linearizer.tools.profile import vector_instruction_counts

    width = lane_width()
    counts = vector_instruction_counts(width)
    one, lanes = counts["one_state"], counts["lanes"]
    full = {2: "xmm", 4: "ymm", 8: "zmm"}[width]
    assert one["scalar"] > 1000 and one["scalar"] > 10 * one["zmm"], one
    assert lanes[full] > 0.8 * one["scalar"] and lanes["scalar"] < 0.02 * lanes[full], counts
