# SPDX-License-Identifier: BSD-3-Clause
"""Every public function raises or returns finite numbers, and never narrows an input silently.

The functions are found from the package's public names (sva_linearizer.__all__) and called with
arguments chosen by parameter name (ARGUMENTS), so a new public function is covered as soon as it
is exported; one with a parameter this table does not know fails here until it is added.

1. At a state whose velocities overflow float64 in the dynamics (v ~ 1e160, 1e200), on a
   fixed-base arm (ur5) and a quadruped standing on four point feet (solo12): each call raises
   ValueError or returns only finite numbers.
2. Complex inputs with a non-zero imaginary part, strings and object arrays raise TypeError or
   ValueError naming the argument (numpy would drop the imaginary part with only a warning).
3. A seeded fuzz of shapes, dtypes, non-finite entries, read-only and strided arrays: each call
   raises TypeError/ValueError or returns only finite numbers.
"""
import inspect
import re
import warnings

import numpy as np
import pytest

import sva_linearizer as sl
from sva_linearizer.robots import example_robot_data_dir, load_robot, robot_urdf_path

if example_robot_data_dir() is None:
    pytest.skip("ur5 and solo12 come from example-robot-data: pip install example-robot-data",
                allow_module_level=True)

FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")

# the public names that are not functions of (model, state, ...) numbers
CLASSES = {"Centroidal", "Contact", "CoupledModel", "Data", "Horizon", "Impact", "Inertia", "Joint", "Linearization",
           "Loop", "Model", "SecondOrderDerivatives", "State"}


class Case:
    """A robot at a state, with everything a public function may be called with."""

    def __init__(self, robot, scale, seed=0):
        self.model = m = load_robot(robot)
        rng = np.random.default_rng(seed)
        q = np.zeros(m.nq)
        if m.floating_base:
            quat = rng.normal(size=4)
            q[3:7] = quat / np.linalg.norm(quat)
        q[m.nq - m.nj:] = rng.uniform(-0.5, 0.5, m.nj)
        self.q, self.v = q, rng.normal(size=m.nv) * scale
        self.tau = rng.normal(size=m.nj)
        self.state = sl.State.from_vectors(m, self.q, self.v)
        self.frame = "FL_FOOT" if robot == "solo12" else m.joint_names[-1]
        self.contacts = [sl.Contact(f) for f in FEET] if robot == "solo12" else None
        self.robot = robot

    def arguments(self):
        """parameter name -> value, for every parameter a public function may have."""
        m, nx = self.model, 2 * self.model.nv
        A = np.full((nx, nx), 1e300)
        A[: nx // 2] = 0.0
        return {
            "model": m, "state": self.state, "tau": self.tau, "nu_dot": np.ones(m.nv),
            "r_ddot": np.ones(m.nj), "frame": self.frame, "q": self.q, "v": self.v,
            "data": sl.Data(m), "q_batch": self.q[None], "v_batch": self.v[None],
            "tau_batch": self.tau[None], "A": A, "B": np.full((nx, m.nj), 1e300), "dt": 1e10,
            "v_plus": np.full(6, 1e300) if m.floating_base else None,
            "path_or_xml": str(robot_urdf_path(self.robot)), "contacts": self.contacts or [],
        }


ARGUMENT_NAMES = {"model", "state", "tau", "nu_dot", "r_ddot", "frame", "q", "v", "data", "q_batch",
                  "v_batch", "tau_batch", "A", "B", "dt", "v_plus", "path_or_xml", "contacts"}
# linearize_horizon's q, v, tau are knots, one per row
BATCHED = {"q": "q_batch", "v": "v_batch", "tau": "tau_batch"}
# numeric inputs: what the error must name when they are not real numbers
NUMERIC = {"tau": "tau", "nu_dot": "nu_dot", "r_ddot": "r_ddot", "q": "q", "v": "v",
           "q_batch": "q", "v_batch": "v", "tau_batch": "tau", "A": "A", "B": "B", "v_plus": "v_plus"}


def public_functions():
    out = []
    for name in sl.__all__:
        obj = getattr(sl, name)
        if name in CLASSES or not callable(obj) or name.startswith("__"):
            continue
        out.append((name, obj))
    return out


def call_args(fn, args, contacts=None):
    """Positional arguments (the required ones, by name) and keywords (contacts, when accepted)."""
    params = inspect.signature(fn).parameters
    pos, kw = [], {}
    for p in params.values():
        if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            assert p.name in ARGUMENT_NAMES, (
                f"{fn.__name__}: parameter {p.name!r} unknown to this test: add it to Case.arguments")
            pos.append(BATCHED.get(p.name, p.name) if fn is sl.linearize_horizon else p.name)
    if "contacts" in params and contacts and "contacts" not in pos:
        kw["contacts"] = contacts
    if fn is sl.discretize and args.get("v_plus") is not None:
        pos.append("v_plus")
    return pos, kw


def finite_numbers(x):
    """Every float array reachable from a result (arrays, tuples, a Linearization's fields)."""
    if isinstance(x, np.ndarray):
        return x.dtype.kind not in "fc" or bool(np.all(np.isfinite(x)))
    if isinstance(x, (tuple, list)):
        return all(finite_numbers(y) for y in x)
    if isinstance(x, sl.Linearization):
        return all(finite_numbers(getattr(x, k)) for k in ("A", "B", "nu_dot", "Minv", "D", "Ad", "Bd",
                                                             "forces", "dforces_dz", "dforces_dtau")
                   if getattr(x, k, None) is not None)
    if isinstance(x, (sl.Impact, sl.Centroidal)):
        return all(finite_numbers(getattr(x, k)) for k in x.__slots__ if getattr(x, k) is not None)
    if isinstance(x, sl.SecondOrderDerivatives):
        return all(finite_numbers(getattr(x, k)) for k in ("d2tau_dq2", "d2tau_dnu2", "d2tau_dq_dnu", "dM_dq"))
    if isinstance(x, float):
        return np.isfinite(x)
    return True


def call(fn, pos, kw, args):
    with warnings.catch_warnings():
        warnings.simplefilter("error", np.exceptions.ComplexWarning if hasattr(np, "exceptions")
                              else np.ComplexWarning)
        warnings.simplefilter("ignore", RuntimeWarning)      # the plain-Python kernels' overflow
        return fn(*[args[n] for n in pos], **kw)


def test_every_public_function_is_covered():
    names = {n for n, _ in public_functions()}
    assert {"linearize", "forward_dynamics", "rneamb", "frame_jacobian", "discretize"} <= names
    for _, fn in public_functions():
        call_args(fn, dict.fromkeys(ARGUMENT_NAMES))      # asserts every parameter is known


@pytest.mark.parametrize("robot", ["ur5", "solo12"])
@pytest.mark.parametrize("scale", [1e160, 1e200])
def test_overflowing_state_raises_or_is_finite(robot, scale):
    case = Case(robot, scale)
    args = case.arguments()
    raised = []
    for name, fn in public_functions():
        for contacts in ((None, case.contacts) if case.contacts else (None,)):
            pos, kw = call_args(fn, args, contacts)
            try:
                out = call(fn, pos, kw, args)
            except ValueError as e:
                assert "nan" not in str(e).lower() or "overflow" in str(e), (name, str(e))
                raised.append(name)
                continue
            assert finite_numbers(out), f"{name} (contacts={bool(kw)}) returned non-finite numbers"
    # the dynamics at such a state really overflow: the functions that compute them said so
    assert {"linearize", "forward_dynamics", "extended_inverse_dynamics",
            "extended_inverse_dynamics_derivatives", "extended_inverse_dynamics_second_derivatives",
            "rneamb", "discretize"} <= set(raised)


@pytest.mark.parametrize("robot", ["ur5", "solo12"])
def test_overflow_error_names_what_and_where(robot):
    case = Case(robot, 1e160)
    for fn, arg in ((sl.forward_dynamics, case.tau), (sl.extended_inverse_dynamics, np.ones(case.model.nv)),
                    (sl.rneamb, np.ones(case.model.nj))):
        with pytest.raises(ValueError, match=rf"{fn.__name__} overflowed float64: .* of (the base|body '\w+') "
                                             r"are not finite.*largest \|entry\|"):
            call(fn, ["m", "s", "x"], {}, {"m": case.model, "s": case.state, "x": arg})


@pytest.mark.parametrize("robot", ["ur5", "solo12"])
def test_non_real_inputs_raise_naming_the_argument(robot):
    case = Case(robot, 1.0)
    for name, fn in public_functions():
        args = case.arguments()
        pos, kw = call_args(fn, args)
        for p in pos:
            if p not in NUMERIC or args[p] is None:
                continue
            x = np.asarray(args[p])
            for bad, kind in ((x + 1j, "complex"), (x.astype(str), "string"), (x.astype(object), "object")):
                bad_args = dict(args, **{p: bad})
                with pytest.raises((TypeError, ValueError)) as e:
                    call(fn, pos, kw, bad_args)
                assert re.search(rf"\b{NUMERIC[p]}\b", str(e.value)), (name, p, kind, str(e.value))
    # a complex vector with zero imaginary parts is exact: accepted, the same result
    lin = sl.linearize(case.model, case.state, case.tau.astype(complex))
    np.testing.assert_array_equal(lin.A, sl.linearize(case.model, case.state, case.tau).A)
    with pytest.raises(ValueError, match=r"\bv\b.*complex"):
        sl.State.from_vectors(case.model, case.q, case.v + 1j)
    with pytest.raises(ValueError, match=r"\bq\b.*complex"):
        sl.State.from_vectors(case.model, case.q + 1j, case.v)
    with pytest.raises(ValueError, match="dt"):
        sl.linearize(case.model, case.state, case.tau, dt="0.01")
    with pytest.raises(ValueError, match="gravity.*complex"):
        sl.Model(gravity=(0, 0, -9.81j))
    with pytest.raises(TypeError, match="offset"):
        sl.Contact("x", offset=("0", "0", "0"))


def _mutations(rng, x):
    """A few wrong or unusual versions of a numeric input x."""
    x = np.asarray(x, dtype=float)
    k = int(rng.integers(0, 10))
    if k == 0:
        return rng.normal(size=x.shape[:-1] + (x.shape[-1] + int(rng.choice([-1, 1])),))   # wrong size
    if k == 1:
        y = x.copy()
        y.reshape(-1)[int(rng.integers(0, y.size))] = rng.choice([np.nan, np.inf, -np.inf])
        return y
    if k == 2:
        return x.astype(np.float32)
    if k == 3:
        return np.round(x).astype(np.int64)
    if k == 4:
        y = x.copy()
        y.flags.writeable = False
        return y
    if k == 5:
        return np.repeat(x, 2, axis=-1)[..., ::2]                 # strided view, same values
    if k == 6:
        return x.tolist()
    if k == 7:
        return x.astype(complex) + (1j if rng.random() < 0.5 else 0.0)
    if k == 8:
        return x * 10.0 ** float(rng.uniform(100, 300))
    return x[..., None]                                            # an extra axis


@pytest.mark.parametrize("robot", ["ur5", "solo12"])
def test_fuzz_raises_or_is_finite(robot):
    rng = np.random.default_rng(20261125 if robot == "ur5" else 7)
    case = Case(robot, 1.0)
    functions = public_functions()
    calls = 0
    for _ in range(1000):
        if calls == 150:
            break
        name, fn = functions[int(rng.integers(0, len(functions)))]
        args = case.arguments()
        contacts = case.contacts if rng.random() < 0.3 else None
        pos, kw = call_args(fn, args, contacts)
        numeric = [p for p in pos if p in NUMERIC and args[p] is not None]
        if not numeric:
            continue
        p = numeric[int(rng.integers(0, len(numeric)))]
        with np.errstate(all="ignore"):
            args[p] = _mutations(rng, args[p])
        calls += 1
        try:
            out = call(fn, pos, kw, args)
        except (TypeError, ValueError):
            continue
        assert finite_numbers(out), f"{name}({p} mutated) returned non-finite numbers"
    assert calls == 150
