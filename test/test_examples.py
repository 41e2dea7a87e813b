# SPDX-License-Identifier: BSD-3-Clause
"""The closed-loop examples (examples/*.py) run as a user runs them, and fail when A or B is wrong.

Each example designs a controller on sva_linearizer's A and B and closes the loop around Pinocchio
(an independent simulator); it exits 0 only when the loop is stable and behaves as the linear model
predicts. Here each runs in a fresh process, with example-robot-data's robots and with the bundled
quadruped (example-robot-data hidden), and then with a linearization corrupted on purpose (a
transposed or sign-flipped block of A, a sign-flipped B, applied to the continuous A and B before
the discretization; d(nu_dot)/dnu is zero at rest, so its transpose is tried on the moving arm
only): the example must then report the failure itself (exit code 1 and its FAILED line), which
shows that its checks can see such a mistake.
"""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import sva_linearizer

pytest.importorskip("pinocchio")

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
PACKAGE_ROOT = pathlib.Path(sva_linearizer.__file__).resolve().parent.parent
SCRIPTS = ["arm_lqr.py", "quadruped_balance.py", "arm_tracking.py"]
TIMEOUT_S = 1500     # seconds: a few when the kernels are compiled or run as plain Python; more
                     # if SVA_LINEARIZER_COMPILE=wait (the suite's) meets a cold cache

# Runs an example with sl.linearize / sl.linearize_batch wrapped to corrupt A and B (argv[1]).
CORRUPTING_RUNNER = r'''
import os, runpy, sys
import numpy as np
import sva_linearizer as sl

kind, script = sys.argv[1], sys.argv[2]


def corrupt(A, B):
    nv = A.shape[0] // 2
    if kind == "transpose_A_vq":        # d(nu_dot)/dq transposed
        A[nv:, :nv] = A[nv:, :nv].T.copy()
    elif kind == "negate_A_vq":         # d(nu_dot)/dq with the wrong sign
        A[nv:, :nv] *= -1.0
    elif kind == "transpose_A_vv":      # d(nu_dot)/dnu transposed (zero at rest: moving robots only)
        A[nv:, nv:] = A[nv:, nv:].T.copy()
    elif kind == "negate_B":            # B with the wrong sign
        B[nv:] *= -1.0
    else:
        raise SystemExit(f"unknown corruption {kind}")


linearize, linearize_batch = sl.linearize, sl.linearize_batch


def bad_linearize(model, state, tau, **kw):
    dt = kw.pop("dt", None)
    lin = linearize(model, state, tau, **kw)
    A, B = lin.A.copy(), lin.B.copy()
    corrupt(A, B)
    lin.A, lin.B = A, B
    if dt is not None:
        v_plus = np.asarray(state.v)[:6] + dt * lin.nu_dot[:6] if model.floating_base else None
        lin.Ad, lin.Bd = sl.discretize(A, B, dt, v_plus)
    return lin


def bad_linearize_batch(model, Q, V, T, **kw):
    dt = kw.pop("dt", None)
    A, B = (X.copy() for X in linearize_batch(model, Q, V, T, **kw))
    for i in range(A.shape[0]):
        corrupt(A[i], B[i])
    if dt is None:
        return A, B
    assert not model.floating_base
    return sl.discretize(A, B, dt)


sl.linearize, sl.linearize_batch = bad_linearize, bad_linearize_batch
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
sys.argv = [script]
runpy.run_path(script, run_name="__main__")
'''


def run(args, hide_robot_data=False):
    env = dict(os.environ)
    # the example imports the package as a user's script does; this copy of it, whatever the cwd
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    if hide_robot_data:
        env["EXAMPLE_ROBOT_DATA_DIR"] = str(ROOT / "no-such-example-robot-data")
    return subprocess.run([sys.executable] + args, capture_output=True, text=True, env=env,
                          timeout=TIMEOUT_S, cwd=str(EXAMPLES))


@pytest.mark.parametrize("hide_robot_data", [False, True], ids=["example-robot-data", "bundled"])
@pytest.mark.parametrize("script", SCRIPTS)
def test_example_loop_is_stable(script, hide_robot_data):
    if not hide_robot_data:
        from sva_linearizer.robots import example_robot_data_dir

        try:
            example_robot_data_dir()
        except ValueError:
            pytest.skip("example-robot-data is not installed")
    p = run([str(EXAMPLES / script)], hide_robot_data)
    assert p.returncode == 0, f"{script} exited {p.returncode}\n{p.stdout}\n{p.stderr}"
    robot = p.stdout.split()[1].rstrip(":")
    assert robot in (("quadruped",) if hide_robot_data else ("ur5", "solo12")), p.stdout
    assert "\nresult   " in p.stdout and "FAILED" not in p.stdout, p.stdout
    assert "cost " in p.stdout and "error " in p.stdout, p.stdout


CORRUPTIONS = ([(s, kind) for s in SCRIPTS for kind in ("transpose_A_vq", "negate_A_vq", "negate_B")]
               + [("arm_tracking.py", "transpose_A_vv")])


@pytest.mark.parametrize("script,kind", CORRUPTIONS)
def test_example_detects_a_wrong_linearization(tmp_path, script, kind):
    runner = tmp_path / "corrupting_runner.py"
    runner.write_text(CORRUPTING_RUNNER)
    p = run([str(runner), kind, str(EXAMPLES / script)])
    assert p.returncode == 1 and "FAILED" in p.stdout, (
        f"{script} with {kind}: exit code {p.returncode}\n{p.stdout}\n{p.stderr}")
    assert "Traceback" not in p.stderr, p.stderr


def test_the_examples_state_error_is_the_packages_z():
    """examples/plant.py's state_error (Pinocchio's log6 of H_ref^-1 H) inverts the package's pose
    perturbation H = H_ref exp(z_H^) (sva_linearizer.spatial.se3_exp) and its joint and velocity
    perturbations, for a large perturbation (where a position-and-quaternion difference is wrong)."""
    from sva_linearizer.spatial import matrix_to_quat, quat_to_matrix, se3_exp

    sys.path.insert(0, str(EXAMPLES))
    try:
        from plant import state_error
    finally:
        sys.path.remove(str(EXAMPLES))
    rng = np.random.default_rng(5)
    nj = 4
    quat = rng.normal(size=4)
    q_ref = np.r_[rng.normal(size=3), quat / np.linalg.norm(quat), rng.normal(size=nj)]
    v_ref = rng.normal(size=6 + nj)
    z = np.r_[rng.normal(size=3), 0.8 * rng.normal(size=3), rng.normal(size=nj), rng.normal(size=6 + nj)]
    R_ref, p_ref = quat_to_matrix(q_ref[3:7]), q_ref[:3]
    dR, dp = se3_exp(z[:6])
    q = np.r_[p_ref + R_ref @ dp, matrix_to_quat(R_ref @ dR), q_ref[7:] + z[6:6 + nj]]
    v = v_ref + z[6 + nj:]
    assert np.allclose(state_error(q, v, q_ref, v_ref, floating_base=True), z, atol=1e-12)
    assert not np.allclose(q[:3] - q_ref[:3], z[:3], atol=1e-3)    # not a difference of positions


@pytest.mark.parametrize("script", SCRIPTS)
def test_example_plot_option(tmp_path, script):
    """--plot FILE saves the error over time as a figure (matplotlib), and the run still passes its
    own verdict (over its default duration, which the verdict's bounds are made for)."""
    pytest.importorskip("matplotlib")
    out = tmp_path / "errors.png"
    p = run([str(EXAMPLES / script), "--plot", str(out)])
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"saved    {out}" in p.stdout, p.stdout + p.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
