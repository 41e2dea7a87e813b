"""Suite-wide set-up: the cold compile of test_cli_compile.py's
test_compile_covers_what_a_robot_uses runs beside the rest of the suite.

That test runs `sva-linearizer compile` in an empty numba cache (its own folder), then checks that
a fresh process using a robot compiles nothing more. The compile alone takes ~13 min on a 2-core
2 GHz machine, a third of the suite, while the rest of the suite mostly keeps at most one core
busy (one pytest process; the ROS tests wait on DDS). So when that test is among the tests
selected, its compile starts as soon as the selection is known, in a background process with its
own cache folder, and the test waits for it and checks its result as before (the same
subprocess, the same assertions). It is stopped at the end of the session if it still runs.
"""
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

COLD_COMPILE_TEST = "test_compile_covers_what_a_robot_uses"
_cold = {}   # "dir": the empty cache folder; "proc": the background `compile`; "out", "err": its logs


def _start_cold_compile():
    folder = tempfile.mkdtemp(prefix="sva-linearizer-cold-cache-")
    out, err = os.path.join(folder, "compile.out"), os.path.join(folder, "compile.err")
    cache = os.path.join(folder, "cache")
    os.makedirs(cache)
    with open(out, "w") as fo, open(err, "w") as fe:
        proc = subprocess.Popen([sys.executable, "-m", "sva_linearizer.cli", "compile"], stdout=fo,
                                stderr=fe, text=True, env=dict(os.environ, NUMBA_CACHE_DIR=cache))
    _cold.update(dir=folder, cache=cache, proc=proc, out=out, err=err)


def pytest_collection_finish(session):
    """Start the cold compile once the selection (after -k, -m, deselection) is final."""
    from sva_linearizer import _jit

    if _jit.HAVE_NUMBA and any(item.name == COLD_COMPILE_TEST for item in session.items):
        _start_cold_compile()


def pytest_sessionfinish(session, exitstatus):
    proc = _cold.get("proc")
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()
    if "dir" in _cold:
        shutil.rmtree(_cold["dir"], ignore_errors=True)


@pytest.fixture
def cold_compile():
    """(cache folder, return code, stdout, stderr) of `sva-linearizer compile` run in an empty
    numba cache: the background run started with the session, waited for here (started now if
    the session did not start it)."""
    if "proc" not in _cold:
        _start_cold_compile()
    proc = _cold["proc"]
    try:
        proc.wait(timeout=1800)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("sva-linearizer compile in an empty cache ran past 30 min")
    with open(_cold["out"]) as fo, open(_cold["err"]) as fe:
        return _cold["cache"], proc.returncode, fo.read(), fe.read()
