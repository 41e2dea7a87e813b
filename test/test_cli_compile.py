# SPDX-License-Identifier: BSD-3-Clause
"""First run. A cold kernel group answers at once from the kernels' plain-Python form while it
compiles in a background process, then switches to the compiled code (_jit); the warm-up that
compiles a group (warmup.ensure_compiled: `sva-linearizer compile`, the background process,
SVA_LINEARIZER_COMPILE=wait) says once that it compiles, with progress, and is silent afterwards;
it is safe from threads and processes; the demo's child processes import the parent's copy of the
package (one numba cache).

The mechanics are tested with a stand-in kernel and warm-up stage in a private NUMBA_CACHE_DIR
(seconds); test_first_use_of_a_cold_cache runs the real thing in an empty cache: a user process
whose first calls answer from the plain form while every group compiles in the background (minutes
on 2 cores, started with the session beside the other tests: conftest.py)."""
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

from checkout import DECOY
from sva_linearizer import _cache, _jit

needs_numba = pytest.mark.skipif(not _jit.HAVE_NUMBA, reason="numba is not installed")

FAKE = r"""
import json, sys, threading, time
import sva_linearizer, sva_linearizer.warmup as j, sva_linearizer._cache as c
import fake_kernel                                 # one tiny kernel made by sva_linearizer's njit
calls = []
inner = []
def stage():
    calls.append(1)
    inner.append(j.ensure_compiled()["status"])   # a call from inside the warm-up returns at once
    fake_kernel.plus_one(1)                        # compiles on a cold cache, loads on a warm one
    time.sleep(float(sys.argv[1]))
j.WARMUP_STAGES[:] = [j.Stage("core", "stand-in stage", stage)]
res = []
ts = [threading.Thread(target=lambda: res.append(j.ensure_compiled()["status"])) for _ in range(4)]
for t in ts: t.start()
for t in ts: t.join()
print(json.dumps({"calls": len(calls), "inner": inner, "statuses": sorted(res), "warm": c.is_warm(),
                  "dirs": c.cache_dirs()}))
"""
KERNEL = "from sva_linearizer._jit import njit\n\n@njit\ndef plus_one(x):\n    return x + 1\n"


def _fake(cache, sleep=0.0, **env):
    src = pathlib.Path(cache).parent / "src"
    src.mkdir(parents=True, exist_ok=True)
    if not (src / "fake_kernel.py").exists():  # rewriting it would change its stamp: a cold cache
        (src / "fake_kernel.py").write_text(KERNEL)
    return subprocess.Popen([sys.executable, "-c", FAKE, str(sleep)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(src), **env))


def _result(p):
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1]), err


@needs_numba
def test_cold_cache_says_so_once_then_silent(tmp_path):
    r, err = _result(_fake(tmp_path / "cache"))
    assert r["calls"] == 1 and r["inner"] == ["skipped"]          # once, for 4 threads
    assert r["statuses"] == ["compiled", "warm", "warm", "warm"] and r["warm"]
    assert "sva_linearizer: compiling the numba kernels (once per machine" in err
    assert "[1/1] stand-in stage ... (" in err
    assert "done in " in err and f"cached in {r['dirs'][0]}" in err
    assert all(pathlib.Path(d).is_relative_to(tmp_path) for d in r["dirs"])
    assert (pathlib.Path(r["dirs"][0]) / _cache.MARKER_NAME.format(group="core")).is_file()
    r, err = _result(_fake(tmp_path / "cache"))                     # the next process: warm, silent
    assert r["calls"] == 0 and r["statuses"] == ["warm"] * 4 and err == ""


@needs_numba
def test_stale_marker_recompiles_everything(tmp_path):
    """A marker of other sources means a kernel file changed since the cache was filled. numba
    checks only a kernel's own file, so a cached pipeline would keep the old code of the kernels it
    holds from other files: the package's cache is dropped and everything compiles again, said."""
    r, _ = _result(_fake(tmp_path / "cache"))
    for d in r["dirs"]:     # what an edit of a kernel file leaves: markers of another cache key
        (pathlib.Path(d) / _cache.MARKER_NAME.format(group="core")).write_text(json.dumps({"key": "other"}))
        (pathlib.Path(d) / _cache.KEY_MARKER).write_text(json.dumps({"key": "other"}))
    r, err = _result(_fake(tmp_path / "cache"))
    assert r["calls"] == 1 and r["warm"] and "compiling the numba kernels" in err
    assert "[1/1] stand-in stage" in err
    r, err = _result(_fake(tmp_path / "cache"))                     # then warm and silent again
    assert r["calls"] == 0 and err == ""


@needs_numba
def test_quiet_env_compiles_silently_and_no_jit_does_nothing(tmp_path):
    r, err = _result(_fake(tmp_path / "q" / "cache", SVA_LINEARIZER_QUIET="1"))
    assert r["calls"] == 1 and r["warm"] and err == ""
    r, err = _result(_fake(tmp_path / "n" / "cache", SVA_LINEARIZER_NO_JIT="1"))
    assert r["calls"] == 0 and r["statuses"] == ["skipped"] * 4 and err == ""


# stand-in stages for the compile spread over worker processes: each compiles a kernel of its own
# (k1..k4: numba caches kernels of a module file) and logs (stage, pid, start, end, signatures);
# "ccc" comes after "a" and "bb"; "bad" fails in its workers only
KERNELS = "".join(f"@njit\ndef k{i}(x):\n    return x + {i}\n" for i in range(1, 5))
STAGES = r"""
import json, os, sys, time
import sva_linearizer.warmup as j
from sva_linearizer._jit import njit
LOG = os.environ["STAGE_LOG"]
""" + KERNELS + r"""
def make(name, fails_in_worker=False):
    kernel = (k1, k2, k3, k4)[len(name) - 1]
    def run():
        t0 = time.time()
        if fails_in_worker and j._warming_thread is not None and os.getpid() != int(os.environ["PARENT"]):
            raise RuntimeError("no compiler in this worker")
        kernel(1.0)
        time.sleep(1.0)
        with open(LOG, "a") as fh:
            fh.write(json.dumps([name, os.getpid(), t0, time.time(), len(kernel.signatures)]) + "\n")
    return run
j.WARMUP_STAGES[:] = [j.Stage("core", "a", make("a")), j.Stage("core", "bb", make("bb")),
                      j.Stage("core", "ccc", make("ccc"), ("a", "bb")),
                      j.Stage("core", "bad", make("dddd", fails_in_worker=True))]
j._STAGE_MAIN = ("import sys, stand_in_stages; from sva_linearizer.warmup import run_stage; "
                 "sys.exit(run_stage(sys.argv[1]))")
"""
WORKERS = r"""
import json, os
os.environ["PARENT"] = str(os.getpid())
import stand_in_stages, sva_linearizer.warmup as j
r = j.ensure_compiled("core")
print(json.dumps({"status": r["status"], "failures": r["failures"], "parent": os.getpid()}))
"""


@needs_numba
def test_a_cold_compile_spreads_its_stages_over_worker_processes(tmp_path):
    """SVA_LINEARIZER_COMPILE_JOBS=2: the group's stages run in worker processes, two at a time,
    each once the stages it comes `after` are done; then this process runs every stage itself,
    its kernels loaded from the cache the workers filled. A stage that fails in its worker runs
    here, and the progress lines say so."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "stand_in_stages.py").write_text(STAGES)
    log = tmp_path / "stages.log"
    r = subprocess.run([sys.executable, "-c", WORKERS], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(src),
                                STAGE_LOG=str(log), SVA_LINEARIZER_COMPILE_JOBS="2"))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["status"] == "compiled" and out["failures"] == []
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    workers = {name: (pid, t0, t1) for name, pid, t0, t1, _ in rows if pid != out["parent"]}
    here = [name for name, pid, *_ in rows if pid == out["parent"]]
    assert sorted(workers) == ["a", "bb", "ccc"] and len({w[0] for w in workers.values()}) == 3
    assert workers["ccc"][1] >= max(workers["a"][2], workers["bb"][2])            # after a and bb
    spans = sorted(w[1:] for w in workers.values())
    assert not any(spans[i][1] > spans[i + 2][0] for i in range(len(spans) - 2))   # two at a time
    assert here == ["a", "bb", "ccc", "dddd"]                   # then all of them here, in order
    assert "in 2 processes" in r.stderr and "its worker failed (RuntimeError: no compiler" in r.stderr
    assert "] ccc (" in r.stderr and "] ccc ..." not in r.stderr    # compiled by a worker, loaded here
    assert "[4/4] bad ..." in r.stderr                                # compiled here


ROUTE = r"""
import json, sys, threading
import numpy as np
import sva_linearizer, sva_linearizer._jit as j, sva_linearizer._cache as c
import fake_kernel
done = threading.Event()
class Proc:                                        # stands in for the background compile process
    pid = 0
    def wait(self):
        done.wait()
        return 0
started, loaded, told = [], [], []
j.start_background_compile = lambda groups: started.append(groups) or Proc()
j.is_warm = lambda group="core": bool(started) and done.is_set()
j.compile_running = lambda: False
j.set_compiler(None, lambda group: loaded.append(fake_kernel.plus_one(41)))
j.on_ready(lambda group, seconds: told.append(group))
first = fake_kernel.plus_one(1)                    # cold: the plain form answers, nothing compiles
plain = [j.group_state("core"), len(fake_kernel.plus_one.signatures), fake_kernel.halve(np.ones(2)).tolist()]
done.set()                                         # the background compile is over
ok = j.wait_until_compiled("core", timeout=60)
second = fake_kernel.plus_one(2)
print(json.dumps({"first": first, "plain": plain, "started": started, "ok": ok, "loaded": loaded,
                  "told": told, "second": second, "state": j.group_state("core"),
                  "compiled": len(fake_kernel.plus_one.signatures)}))
"""


@needs_numba
def test_cold_group_answers_from_the_plain_form_then_switches(tmp_path):
    """The first call of a cold group starts its background compile and returns the plain form's
    result without compiling; when the compile is done the group's kernels are loaded (the
    loader) and calls run compiled; on_ready callbacks are told. (The background process is a
    stand-in here: test_first_use_of_a_cold_cache runs the real one.)"""
    src = tmp_path / "src"
    src.mkdir()
    (src / "fake_kernel.py").write_text(KERNEL + "\n\n@njit\ndef halve(x):\n    return x * 0.5\n")
    r = subprocess.run([sys.executable, "-c", ROUTE], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(src),
                                SVA_LINEARIZER_COMPILE="background"))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["first"] == 2 and out["plain"] == ["compiling", 0, [0.5, 0.5]]
    assert out["started"] == [["core"]] and "compile in the background" in r.stderr
    assert out["ok"] and out["loaded"] == [42] and out["told"] == ["core"]
    assert out["second"] == 3 and out["state"] == "ready" and out["compiled"] == 1
    assert "are in use" in r.stderr


GATHER = r"""
import json, threading, time
import sva_linearizer._jit as j
done = threading.Event()
class Proc:                                        # stands in for the background compile process
    def poll(self):
        return 0 if done.is_set() else None
    def wait(self):
        done.wait()
        return 0
started = []
j.start_background_compile = lambda groups: started.append(list(groups)) or Proc()
j.is_warm = lambda group="core": done.is_set() and any(group in s for s in started)
j.compile_running = lambda: False
j.set_compiler(None, lambda group: None)
states = [j._compiled("contacts"), j._compiled("core")]   # one call decides both, as a call with contacts
time.sleep(3 * j.GATHER_S)
first = [list(s) for s in started]
done.set()
print(json.dumps({"states": states, "first": first, "started": started,
                  "ok": [j.wait_until_compiled(g, timeout=30) for g in ("core", "contacts")]}))
"""


@needs_numba
def test_groups_decided_together_compile_in_one_background_process(tmp_path):
    """The groups a process decides to compile in the background within GATHER_S of each other
    (a first call with contacts decides core and contacts) go to one background process, whose
    workers take the stages of both: not one process per group, one after the other."""
    r = subprocess.run([sys.executable, "-c", GATHER], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
                                SVA_LINEARIZER_COMPILE="background"))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["states"] == [False, False] and out["ok"] == [True, True]
    assert out["first"] == [["core", "contacts"]] and out["started"] == out["first"]


ONE_SHOT = r"""
import sys
import sva_linearizer._jit as j
import fake_kernel
j.start_background_compile = lambda groups: open(sys.argv[1], "w").write(",".join(groups)) and None
j.is_warm = lambda group="core": False
j.compile_running = lambda: sys.argv[2] == "another compile runs"
print(fake_kernel.plus_one(1))                     # then the process ends at once
"""


@needs_numba
@pytest.mark.parametrize("other", ["no other compile", "another compile runs"])
def test_a_process_that_ends_at_once_still_starts_the_compile(tmp_path, other):
    """A one-shot command (`sva-linearizer linearize`) ends within GATHER_S of its first call,
    before its watcher would start the background compile, and a node may be stopped while
    another process compiles (its watcher waiting for that one): the compile of its cold groups
    starts as the process exits (waiting for the cache's lock, if another compile holds it)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "fake_kernel.py").write_text(KERNEL)
    started = tmp_path / "started"
    r = subprocess.run([sys.executable, "-c", ONE_SHOT, str(started), other], capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
                                                        PYTHONPATH=str(src), SVA_LINEARIZER_COMPILE="background"))
    assert r.returncode == 0 and r.stdout.split() == ["2"], r.stderr
    assert started.read_text() == "core"


HOLD = ("import sys, time, sva_linearizer, sva_linearizer._cache as c; "
        "lock = c.FileLock(c.cache_dirs()[0]); lock.acquire(); print('held', flush=True); time.sleep(60)")
RUNNING = "import sva_linearizer, sva_linearizer._cache as c; print(c.compile_running())"


@needs_numba
def test_a_running_compile_is_seen_by_other_processes(tmp_path):
    """A process whose cold group would compile first looks whether another process compiles into
    the cache (it holds the cache's lock): then it waits for that one instead of starting a
    compile of its own (_jit._watch)."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    holder = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "held"
        r = subprocess.run([sys.executable, "-c", RUNNING], capture_output=True, text=True, timeout=300, env=env)
        assert r.stdout.strip() == "True", r.stderr
    finally:
        holder.kill()
        holder.wait()
    r = subprocess.run([sys.executable, "-c", RUNNING], capture_output=True, text=True, timeout=300, env=env)
    assert r.stdout.strip() == "False", r.stderr


WAIT_WITH_WORKERS = r"""
import threading
import sva_linearizer, sva_linearizer._jit as j
import fake_kernel
def compile_group(group):             # a warm-up whose stage hands work to another thread
    out = []
    t = threading.Thread(target=lambda: out.append(fake_kernel.plus_one(1)))
    t.start()
    t.join()
    assert out == [2]
j.set_compiler(compile_group, None)
print(fake_kernel.plus_one(2), j.group_state("core"), len(fake_kernel.plus_one.signatures))
"""


@needs_numba
def test_wait_policy_warm_up_may_use_other_threads(tmp_path):
    """SVA_LINEARIZER_COMPILE=wait: the warm-up runs outside the lock that decides a group's state,
    so a stage whose work runs on other threads (linearize_batch's workers) that call the group's
    kernels completes instead of deadlocking."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "fake_kernel.py").write_text(KERNEL)
    r = subprocess.run([sys.executable, "-c", WAIT_WITH_WORKERS], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(src),
                                SVA_LINEARIZER_COMPILE="wait"))
    assert r.returncode == 0 and r.stdout.split() == ["3", "ready", "1"], r.stderr


FIRST_BATCH = r"""
import threading
import numpy as np
import sva_linearizer as sl, sva_linearizer._jit as j
from sva_linearizer.robots import load_robot
seen = []
def compile_group(group):             # a stand-in warm-up: says where it ran, compiles nothing
    seen.append([group, threading.current_thread() is threading.main_thread()])
    raise RuntimeError("stand-in warm-up")
j.set_compiler(compile_group, None)
j._state["core"] = "plain"            # the model's load check runs plain: nothing to compile
m = load_robot("quadruped")
Q = np.zeros((4, m.nq)); Q[:, 6] = 1.0
for kw in ({}, {"contacts": [sl.Contact("LF_foot")]}):
    try:
        sl.linearize_batch(m, Q, np.zeros((4, m.nv)), np.zeros((4, m.nj)), **kw)
    except RuntimeError:
        pass
import json
print(json.dumps(seen))
"""


@needs_numba
def test_a_batch_decides_its_kernels_before_its_workers_run(tmp_path):
    """linearize_batch decides how its kernels run (with SVA_LINEARIZER_COMPILE=wait: runs the
    warm-up) in the calling thread before handing states to its worker threads: a warm-up run from
    a pool's worker would hand its own batch to that pool and wait for itself."""
    r = subprocess.run([sys.executable, "-c", FIRST_BATCH], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
                                SVA_LINEARIZER_COMPILE="wait", SVA_LINEARIZER_NUM_THREADS="2"))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == [["batch", True], ["contacts_batch", True]]


@needs_numba
def test_never_policy_keeps_the_plain_forms(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "fake_kernel.py").write_text(KERNEL)
    code = ("import fake_kernel, sva_linearizer._jit as j; "
            "print(fake_kernel.plus_one(1), j.group_state('core'), len(fake_kernel.plus_one.signatures))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(src),
                                SVA_LINEARIZER_COMPILE="never"))
    assert r.returncode == 0 and r.stdout.split() == ["2", "plain", "0"], r.stderr
    assert not list((tmp_path / "cache").rglob("*.nbi")) if (tmp_path / "cache").exists() else True


@needs_numba
def test_two_processes_compile_once(tmp_path):
    first = _fake(tmp_path / "cache", sleep=3.0)
    time.sleep(1.5)                      # the first one holds the lock (its import takes ~1 s)
    second = _fake(tmp_path / "cache")
    r1, err1 = _result(first)
    r2, err2 = _result(second)
    results = sorted([(r1, err1), (r2, err2)], key=lambda x: -x[0]["calls"])
    (ra, erra), (rb, errb) = results
    assert ra["calls"] == 1 and rb["calls"] == 0, (err1, err2)
    assert "waited" in rb["statuses"] and "another process is compiling the kernels" in errb


def test_compile_command_without_numba():
    r = subprocess.run([sys.executable, "-m", "sva_linearizer.cli", "compile"], capture_output=True,
                       text=True, timeout=300, env=dict(os.environ, SVA_LINEARIZER_NO_JIT="1"))
    assert r.returncode == 0 and "nothing to compile" in r.stdout


CHILD_IMPORT = "import sva_linearizer, sys; print(sva_linearizer.__file__)"


def _decoys(tmp_path):
    """Two other `sva_linearizer` packages, one in the folder returned (a checkout's root, the
    working directory) and one on the PYTHONPATH returned; importing either writes to the log."""
    cwd, path = tmp_path / "checkout", tmp_path / "pythonpath"
    for folder in (cwd, path):
        (folder / "sva_linearizer" / "ros").mkdir(parents=True)
        (folder / "sva_linearizer" / "__init__.py").write_text(DECOY)
        (folder / "sva_linearizer" / "ros" / "__init__.py").write_text("")
    return cwd, path, tmp_path / "decoys.log"


def test_children_import_the_parents_package(tmp_path):
    """From a folder holding another `sva_linearizer` (a checkout next to an installed copy), with
    another one on PYTHONPATH, `python -m` imports the other one (its own numba cache: a second
    compile); _child's commands import this process's copy."""
    from sva_linearizer import _child

    cwd, path, log = _decoys(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(path), DECOY_LOG=str(log))
    plain = subprocess.run([sys.executable, "-m", "sva_linearizer.ros", "sim", "--help"], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=300)
    assert "decoy package imported" in plain.stderr          # what a plain child does
    log.unlink()
    cmd = _child.module_command("sva_linearizer.ros", "sim", "--help")
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "--rate" in r.stdout, r.stderr
    # the demo and bench-node start their `-m sva_linearizer...` commands the same way
    assert _child.same_package([sys.executable, "-m", "sva_linearizer.ros", "node"]) == \
        _child.module_command("sva_linearizer.ros", "node")
    assert _child.same_package(["other", "-m", "x"]) == ["other", "-m", "x"]
    import sva_linearizer
    r = subprocess.run(_child.python_command(CHILD_IMPORT), cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.stdout.strip() == os.path.abspath(sva_linearizer.__file__), r.stderr
    assert not log.exists()


# The real warm-up and background compile with two stand-in stages (each compiles a tiny kernel
# of this module; STAGE_RAISES=<name>: that stage raises, in every process), logged per process
REAL_STAGES = r"""
import json, os, sys
import sva_linearizer.warmup as w, sva_linearizer._cache as c
from sva_linearizer._jit import njit

@njit
def k1(x):
    return x + 1

@njit
def k2(x):
    return x + 2

def make(name, kernel):
    def run():
        if os.environ.get("STAGE_RAISES") == name:
            raise RuntimeError(f"stand-in stage {name} cannot compile\nits last line: no compiler here")
        kernel(1.0)
        with open(os.environ["STAGE_LOG"], "a") as fh:
            fh.write(json.dumps([name, os.getpid()]) + "\n")
    return run

w.WARMUP_STAGES[:] = [w.Stage("core", "one", make("one", k1)), w.Stage("core", "two", make("two", k2))]
_HERE = "import sys, stand_in_stages; "
w._STAGE_MAIN = _HERE + "from sva_linearizer.warmup import run_stage; sys.exit(run_stage(sys.argv[1]))"
c._BACKGROUND_MAIN = os.environ.get("BACKGROUND_MAIN") or (
    _HERE + "from sva_linearizer.warmup import main; sys.exit(main(sys.argv[1:]))")
"""
# a user process: its first kernel call starts the background compile, from a working directory
# holding another sva_linearizer (argv[1]) and with another one first on PYTHONPATH (argv[2])
USER = r"""
import json, os, sys
import stand_in_stages
import sva_linearizer._jit as j, sva_linearizer._cache as c
os.chdir(sys.argv[1])
os.environ["PYTHONPATH"] = sys.argv[2] + os.pathsep + os.environ["PYTHONPATH"]
first = stand_in_stages.k1(1.0)
ok = j.wait_until_compiled("core", timeout=240)
second = stand_in_stages.k1(2.0)
print(json.dumps({"first": first, "second": second, "ok": ok, "state": j.group_state("core"), "pid": os.getpid(),
                  "warm": c.is_warm("core"), "compiled": len(stand_in_stages.k1.signatures),
                  "failure": c.failure("core")}))
"""
STATUS = "import sys, stand_in_stages; from sva_linearizer.cli import main; sys.exit(main(sys.argv[1:]))"


def _stand_in(tmp_path, **env):
    """(run(code, *args) -> CompletedProcess, stage log): processes on a private cache with the
    stand-in stages importable and the decoys in place."""
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "stand_in_stages.py").write_text(REAL_STAGES)
    cwd, path, decoy_log = _decoys(tmp_path)
    log = tmp_path / "stages.log"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(src), STAGE_LOG=str(log),
               DECOY_LOG=str(decoy_log), SVA_LINEARIZER_COMPILE="background", SVA_LINEARIZER_COMPILE_JOBS="2",
               **env)

    def run(code, *args, **more):
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600,
                              cwd=tmp_path, env=dict(env, **more))

    def user(**more):
        r = run(USER, str(cwd), str(path), **more)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr

    return run, user, log, decoy_log


def _rows(log):
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@needs_numba
def test_the_background_compile_lands_in_the_callers_cache(tmp_path):
    """The real background compile and its stage workers (_cache.start_background_compile,
    warmup._compile_in_workers; two stand-in stages), started by a process whose working directory
    holds another sva_linearizer and whose PYTHONPATH names a third: they import the caller's copy
    (neither decoy is ever imported), compile into its cache, and the caller's calls switch to the
    compiled code."""
    run, user, log, decoy_log = _stand_in(tmp_path)
    out, err = user()
    assert not decoy_log.exists(), decoy_log.read_text()
    assert out["first"] == 2.0 and out["ok"] and out["warm"] and out["failure"] is None, (out, err)
    assert out["state"] == "ready" and out["compiled"] == 1 and out["second"] == 3.0, out
    pids = {name: {pid for n, pid in _rows(log) if n == name} for name in ("one", "two")}
    others = (pids["one"] | pids["two"]) - {out["pid"]}
    assert out["pid"] in pids["one"] and len(others) >= 3, pids   # two workers, the background process
    assert "compiled core kernels are in use" in err
    r = run(STATUS, "compile", "--status")    # warm for the caller's copy (the other groups: never used)
    assert r.returncode == 1 and r.stdout.startswith("core: warm, batch: cold"), r.stdout + r.stderr
    out, err = user()                         # the next process: warm, silent
    assert out["ok"] and out["compiled"] == 1 and err == "", err
    assert not decoy_log.exists()


@needs_numba
def test_a_failed_compile_is_remembered(tmp_path):
    """A stage that raises in the background compile: the caller says why (the stage and the
    exception's last line) and keeps answering from the plain forms; `compile --status` shows
    "failed: <reason>" and exits 3; a later process does not start the compile again; an explicit
    `sva-linearizer compile` tries again and, once it succeeds, the cache is warm."""
    run, user, log, decoy_log = _stand_in(tmp_path, STAGE_RAISES="two")
    out, err = user()
    reason = "two: RuntimeError: its last line: no compiler here"
    assert out["first"] == 2.0 and out["second"] == 3.0 and not out["ok"] and out["state"] == "plain", out
    assert out["failure"]["stage"] == "two" and out["compiled"] == 0, out
    assert f"the background compile of the core kernels failed ({reason}" in err, err
    r = run(STATUS, "compile", "--status")
    assert r.returncode == 3, r.stdout + r.stderr
    assert r.stdout.startswith("core: failed, ") and f"\ncore: failed: {reason} (package " in r.stdout, r.stdout
    rows = len(_rows(log))
    out, err = user()                         # later: plain at once, said, nothing started
    assert out["first"] == 2.0 and not out["ok"] and out["state"] == "plain", out
    assert f"the compile of the core kernels failed on this machine ({reason})" in err, err
    assert "compile in the background" not in err and len(_rows(log)) == rows
    r = run(STATUS, "compile", STAGE_RAISES="")          # explicit: tries again
    assert r.returncode == 0, r.stdout + r.stderr
    r = run(STATUS, "compile", "--status")
    assert r.returncode == 0 and r.stdout.startswith("core: warm, ") and "\ncore: failed" not in r.stdout, r.stdout
    out, err = user(STAGE_RAISES="")
    assert out["ok"] and out["compiled"] == 1 and err == "", err
    assert not decoy_log.exists()


@needs_numba
def test_a_compile_that_ends_without_a_word_is_remembered(tmp_path):
    """A background compile process that exits (here with code 0) without compiling the group is a
    failure too, judged by what is in the caller's cache, not by the exit code: remembered, so
    that the next process does not start it again."""
    run, user, log, _ = _stand_in(tmp_path, BACKGROUND_MAIN="import sys; sys.exit(0)")
    out, err = user()
    assert not out["ok"] and out["state"] == "plain" and out["second"] == 3.0, out
    assert out["failure"]["error"] == "it ended with exit code 0 without compiling the core kernels", out
    out, err = user()
    assert "failed on this machine" in err and "compile in the background" not in err, err
    assert _rows(log) == []


@needs_numba
def test_first_use_of_a_cold_cache(cold_compile):
    """A user process in an empty cache (conftest.py's cold_compile: the bundled quadruped, one
    state, a batch, contacts, a batch with contacts): each group's first call answers at once from
    the plain form while the group compiles in a background process; the process then waits for
    the compiled code, which gives the same numbers. Then a fresh process using all of it finds
    every kernel cached (it writes no new cache file and says nothing) and the cache is warm."""
    env, dirs, returncode, stdout, stderr = cold_compile
    private = "NUMBA_CACHE_DIR" in env and env["NUMBA_CACHE_DIR"] != os.environ.get("NUMBA_CACHE_DIR")
    assert returncode == 0, stderr
    r = json.loads(stdout.strip().splitlines()[-1])
    assert r["first_state"] == "compiling" and r["plain_states"] == ["compiling"] * 3, r
    assert r["first_s"] < 60, r           # plain Python: tens of ms a call, no compile before it
    assert all(r["ready"].values()), (r, stderr)
    assert r["rel_diff"] <= 1e-12 and r["rel_diff_contacts"] <= 1e-12, r
    assert stderr.count("compile in the background") == 4, stderr

    def cache_files():
        return {p: p.stat().st_mtime_ns for d in dirs for p in pathlib.Path(d).rglob("*.nb*")}

    files = cache_files()
    assert files
    r = subprocess.run([sys.executable, "-c", USE_EVERYTHING], capture_output=True, text=True,
                       timeout=900, env=env)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    after = cache_files()
    assert after == files, sorted(set(map(str, after)) ^ set(map(str, files)))
    r = subprocess.run([sys.executable, "-m", "sva_linearizer.cli", "compile", "--status"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.stdout.startswith("core: warm, batch: warm, contacts: warm, contacts_batch: warm, "), r.stdout
    if private:   # the user process used every group but these: they stay cold
        assert r.returncode == 1 and "second_order: cold, impacts: cold, centroidal: cold (cache: " in r.stdout, \
            r.stdout


# what test_first_use_of_a_cold_cache's fresh process runs on the warm cache
USE_EVERYTHING = """
import numpy as np, sva_linearizer as sl
from sva_linearizer.robots import load_robot
for fb in (True, False):
    m = load_robot('quadruped', floating_base=fb)
    q = np.zeros(m.nq); q[6 if fb else 0] = 1.0
    st = sl.State.from_vectors(m, q, np.ones(m.nv))
    sl.linearize(m, st, np.ones(m.nj)); sl.forward_dynamics(m, st, np.ones(m.nj))
    sl.linearize_batch(m, np.tile(q, (3, 1)), np.ones((3, m.nv)), np.ones((3, m.nj)))
m = load_robot('quadruped')
q = np.zeros(m.nq); q[6] = 1.0
feet = [sl.Contact(f) for f in ('LF_foot', 'RF_foot', 'LH_foot', 'RH_foot')]
st = sl.State.from_vectors(m, q, np.ones(m.nv))
sl.linearize(m, st, np.ones(m.nj), contacts=feet)
sl.linearize_batch(m, np.tile(q, (3, 1)), np.ones((3, m.nv)), np.ones((3, m.nj)), contacts=feet)
"""


@needs_numba
def test_an_unannounced_compile_is_reported(tmp_path):
    """A kernel compiled outside the warm-up (a group whose warm-up is done, but a kernel or an
    argument type it does not cover) still says so, with its time; from the cache, nothing is
    said."""
    (tmp_path / "extra_kernel.py").write_text(
        "from sva_linearizer._jit import njit\n\n@njit\ndef plus_one(x):\n    return x + 1\n")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(tmp_path))
    code = ("import sva_linearizer._jit as j; j.mark_ready('core'); "
            "import extra_kernel; print(extra_kernel.plus_one(1))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "2", r.stderr
    assert "sva_linearizer: compiling kernel plus_one (not in numba's cache yet" in r.stderr
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and r.stderr == ""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(env, NUMBA_CACHE_DIR=str(tmp_path / "cache2"), SVA_LINEARIZER_QUIET="1"))
    assert r.returncode == 0 and r.stderr == ""


@needs_numba
def test_compile_status_on_a_cold_cache(tmp_path):
    r = subprocess.run([sys.executable, "-m", "sva_linearizer.cli", "compile", "--status"], capture_output=True,
                       text=True, timeout=300, env=dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path)))
    assert r.returncode == 1 and r.stdout.startswith(
        "core: cold, batch: cold, contacts: cold, contacts_batch: cold, second_order: cold, impacts: cold, "
        "centroidal: cold (cache: ")
    assert str(tmp_path) in r.stdout and r.stderr == ""


def test_compile_jobs_reads_its_variable(monkeypatch):
    """SVA_LINEARIZER_COMPILE_JOBS: a whole number (at least 1); unset: the usable CPUs, at most 8."""
    from sva_linearizer import warmup

    monkeypatch.setenv(warmup.JOBS_ENV, "3")
    assert warmup.compile_jobs() == 3
    monkeypatch.setenv(warmup.JOBS_ENV, "0")
    assert warmup.compile_jobs() == 1
    monkeypatch.setenv(warmup.JOBS_ENV, "two")
    with pytest.raises(ValueError, match="SVA_LINEARIZER_COMPILE_JOBS must be a whole number"):
        warmup.compile_jobs()
    monkeypatch.delenv(warmup.JOBS_ENV)
    assert 1 <= warmup.compile_jobs() <= min(8, os.cpu_count() or 1)
