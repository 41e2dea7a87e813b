# SPDX-License-Identifier: BSD-3-Clause
"""Suite-wide set-up.

The suite runs compiled kernels: SVA_LINEARIZER_COMPILE=wait makes the first call of a cold
kernel group compile it in the test process (once; the cache is shared by every later process)
instead of answering from the plain-Python form while it compiles in the background.

test_cli_compile.py's test_first_use_of_a_cold_cache runs a user process on an empty numba cache,
whose kernel groups compile in the background: minutes. So when that test is among the tests
selected, its process starts as soon as the selection is known and the test waits for it and
checks its result; it is stopped at the end of the session if it still runs.

Under CI a skipped test fails the run, unless its reason is one that ci_skips.py allows (parts of
ROS 2 that no package index serves), and so does a test module that skips at import.
A test module that skips or fails at import does so alone, also under launch_testing's pytest
plugin, which imports every test module while collecting (collection_guard.py).
Which empty cache: when the suite's own cache is cold at the start (a fresh clone, as in CI), the
suite's own, so that its kernels compile once for both (the suite's first compiled calls wait
for the user process's background compile, or it for theirs: one cache lock); else a folder of
its own, compiled for that test alone.
"""
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

import ci_skips
from ci_skips import pytest_collectreport, pytest_runtest_logreport, pytest_terminal_summary  # noqa: F401 (hooks)
from collection_guard import pytest_pycollect_makemodule  # noqa: F401 (hook)

os.environ.setdefault("SVA_LINEARIZER_COMPILE", "wait")

COLD_COMPILE_TEST = "test_first_use_of_a_cold_cache"

# the user process of test_first_use_of_a_cold_cache (stdout: one line of JSON)
FIRST_USE = """
import json, time
import numpy as np
import sva_linearizer as sl, sva_linearizer._jit as j
from sva_linearizer.robots import load_robot
t0 = time.perf_counter()
m = load_robot('quadruped')
rng = np.random.default_rng(3)
q = np.zeros(m.nq); q[6] = 1.0; q[7:] = rng.uniform(-0.5, 0.5, m.nj)
v, tau = rng.normal(size=m.nv), rng.normal(size=m.nj)
st = sl.State.from_vectors(m, q, v)
A_plain = sl.linearize(m, st, tau).A.copy()
out = {"first_s": time.perf_counter() - t0, "first_state": j.group_state("core")}
feet = [sl.Contact(f) for f in ('LF_foot', 'RF_foot', 'LH_foot', 'RH_foot')]
Q, V, T = np.tile(q, (3, 1)), np.tile(v, (3, 1)), np.tile(tau, (3, 1))
sl.linearize_batch(m, Q, V, T)
Ac_plain = sl.linearize(m, st, tau, contacts=feet).A.copy()
sl.linearize_batch(m, Q, V, T, contacts=feet)
out["plain_states"] = [j.group_state(g) for g in ("batch", "contacts", "contacts_batch")]
out["ready"] = {g: j.wait_until_compiled(g, timeout=3000) for g in ("core", "batch", "contacts", "contacts_batch")}
A = sl.linearize(m, st, tau).A
Ac = sl.linearize(m, st, tau, contacts=feet).A
out["rel_diff"] = float(np.max(np.abs(A - A_plain)) / np.max(np.abs(A)))
out["rel_diff_contacts"] = float(np.max(np.abs(Ac - Ac_plain)) / np.max(np.abs(Ac)))
print(json.dumps(out))
"""
_cold = {}   # "dir": logs (and the private cache); "env", "cache_dirs"; "proc": the user process; "out", "err"
TOKEN_ENV = "SVA_LINEARIZER_TEST_COLD_CACHE"   # marks the user process and the compiles it starts


def _start_cold_compile():
    import importlib

    from sva_linearizer import _cache

    importlib.import_module("sva_linearizer.warmup")   # every kernel module: cache_dirs() names every folder

    folder = tempfile.mkdtemp(prefix="sva-linearizer-cold-cache-")
    out, err = os.path.join(folder, "compile.out"), os.path.join(folder, "compile.err")
    env = dict(os.environ, SVA_LINEARIZER_COMPILE="background", **{TOKEN_ENV: folder})
    if any(_cache.is_warm(g) for g in _cache.GROUPS) or _cache.compile_running():
        cache = os.path.join(folder, "cache")
        os.makedirs(cache)
        env["NUMBA_CACHE_DIR"] = cache
        dirs = [cache]
    else:                     # the suite's cache is cold: share it (module docstring)
        dirs = _cache.cache_dirs()
    with open(out, "w") as fo, open(err, "w") as fe:
        proc = subprocess.Popen([sys.executable, "-c", FIRST_USE], stdout=fo, stderr=fe, text=True, env=env)
    _cold.update(dir=folder, env=env, cache_dirs=dirs, proc=proc, out=out, err=err)


def pytest_configure(config):
    # launch_testing's mark (test_ros_launch.py), known where launch_testing's plugin is not loaded too
    config.addinivalue_line("markers", "launch_test: launch_testing's launch test entry point")


def pytest_collection_finish(session):
    """Start the cold compile once the selection (after -k, -m, deselection) is final."""
    from sva_linearizer import _jit

    if _jit.HAVE_NUMBA and any(item.name == COLD_COMPILE_TEST for item in session.items):
        _start_cold_compile()


def _background_compiles(token):
    """The pids of the processes the user process started (background compiles run in sessions of
    their own, their workers with them): they carry its TOKEN_ENV."""
    pids = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if f"{TOKEN_ENV}={token}".encode() in fh.read().split(b"\0"):
                    pids.append(int(entry))
        except (OSError, ValueError):
            continue
    return pids


def pytest_sessionfinish(session, exitstatus):
    ci_skips.pytest_sessionfinish(session, exitstatus)
    proc = _cold.get("proc")
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()
    for pid in _background_compiles(_cold["dir"]) if "dir" in _cold else ():
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    if "dir" in _cold:
        shutil.rmtree(_cold["dir"], ignore_errors=True)


@pytest.fixture
def cold_compile():
    """(env, cache folders, return code, stdout, stderr) of the FIRST_USE process run on an empty
    numba cache: started with the session, waited for here (started now if the session did not).
    env: the environment it ran in (its NUMBA_CACHE_DIR, if any)."""
    if "proc" not in _cold:
        _start_cold_compile()
    proc = _cold["proc"]
    try:
        proc.wait(timeout=1800)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("the first use of an empty cache ran past 30 min")
    with open(_cold["out"]) as fo, open(_cold["err"]) as fe:
        return _cold["env"], _cold["cache_dirs"], proc.returncode, fo.read(), fe.read()
