# SPDX-License-Identifier: BSD-3-Clause
"""numba's on-disk cache of this package's kernels: where it is, which sources it was compiled
from, which compile groups it holds, and the lock that lets one process at a time fill it.

Knows no algorithm: the kernels are the dispatchers registered in DISPATCHERS (by _jit.njit).

numba caches each kernel next to its source (``__pycache__``) or under ``NUMBA_CACHE_DIR``, and
invalidates an entry only when the kernel's own file changes; a pipeline's machine code also
holds the kernels it calls from other files. So the cache as a whole is stamped with a key over
every kernel file (cache_key), a cache of another key is emptied before it is filled again
(claim_cache), and each compile group that has been compiled completely leaves a marker
(`sva_linearizer.compiled-<group>.json`) carrying that key (is_warm). A group whose compile failed
leaves `sva_linearizer.failed-<group>.json` with that key, the failed stage and the error
(write_failure, failure): no process starts that compile again for the same key, and an explicit
`sva-linearizer compile` clears it. The background compile runs in a child process that imports
this copy of the package (_child), whatever the working directory holds.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time

from ._child import python_command

# every dispatcher made by _jit.njit, in definition order
DISPATCHERS: list = []

GROUPS = ("core", "batch", "contacts", "contacts_batch", "second_order", "impacts", "centroidal")
MARKER_NAME = "sva_linearizer.compiled-{group}.json"
FAILED_NAME = "sva_linearizer.failed-{group}.json"
KEY_MARKER = "sva_linearizer.cache-key.json"
LOCK_NAME = "sva_linearizer.compile.lock"


# the package's folders of kernels (tools/ measures them from outside and holds none)
KERNEL_FOLDERS = ("", "algorithms", "linearization")
# modules of the kernel folders that no kernel reads (drivers of the library, run in Python only,
# and every folder's __init__.py): editing them leaves the compiled cache valid
PYTHON_ONLY = frozenset({"_cache.py", "_child.py", "cli.py", "labels.py", "robots.py", "urdf.py"})


def _sources():
    """The source files holding kernels, in order (numba invalidates a file's cache entries when its
    modification time or size changes): every module of KERNEL_FOLDERS but those in PYTHON_ONLY,
    whether imported yet or not (some are imported on first use: the key must not depend on
    that), then those of any other module that made a kernel with this njit."""
    here = os.path.dirname(os.path.abspath(__file__))
    seen = []
    for sub in KERNEL_FOLDERS:
        folder = os.path.join(here, sub)
        try:
            seen += sorted(os.path.join(folder, f) for f in os.listdir(folder)
                           if f.endswith(".py") and f != "__init__.py"
                           and not (sub == "" and f in PYTHON_ONLY))
        except OSError:  # pragma: no cover - a zipped or stripped install
            pass
    for d in DISPATCHERS:
        path = getattr(getattr(d, "py_func", None), "__code__", None)
        path = path.co_filename if path is not None else None
        if path and path not in seen:
            seen.append(path)
    return seen


def cache_dirs():
    """The folders numba caches this package's kernels in (one per source folder), in order."""
    dirs = []
    for d in DISPATCHERS:
        try:
            path = d._cache._cache_path  # numba's locator: __pycache__, NUMBA_CACHE_DIR, user cache
        except AttributeError:  # pragma: no cover - another numba version: fall back to the source
            path = os.path.join(os.path.dirname(d.py_func.__code__.co_filename), "__pycache__")
        if path not in dirs:
            dirs.append(path)
    return dirs


def cache_key():
    """What a warm cache must match: numba and Python versions, this machine's CPU as numba targets
    it, and every kernel source file's path, modification time and size (numba's own stamp)."""
    h = hashlib.sha256()
    try:
        import numba
        version = numba.__version__
    except ImportError:  # pragma: no cover - without numba there is no cache to key
        version = "-"
    parts = [version, sys.version,
             sys.implementation.cache_tag or ""]
    try:
        import llvmlite.binding as llvm
        parts.append(llvm.get_host_cpu_name())
    except Exception:  # pragma: no cover - a missing/older llvmlite: the key just omits the CPU
        pass
    for path in _sources():
        try:
            st = os.stat(path)
            parts.append(f"{path}|{st.st_mtime}|{st.st_size}")
        except OSError:
            parts.append(f"{path}|missing")
    for p in parts:
        h.update(p.encode("utf-8", "replace"))
        h.update(b"\0")
    return h.hexdigest()


def groups(group: str) -> list:
    """The compile groups `group` names ("all": every one)."""
    if group == "all":
        return list(GROUPS)
    if group not in GROUPS:
        raise ValueError(f"unknown compile group {group!r} (one of {', '.join(GROUPS)}, all)")
    return [group]


def is_warm(group="core"):
    """True when every cache folder carries the group's marker for the current cache key (its
    warm-up ran and nothing has changed since); group "all": every group. Cheap: a few stat()s."""
    key = cache_key()
    for g in groups(group):
        for folder in cache_dirs():
            try:
                with open(os.path.join(folder, MARKER_NAME.format(group=g))) as fh:
                    if json.load(fh).get("key") != key:
                        return False
            except (OSError, ValueError):
                return False
    return True




def cache_matches():
    """True when every cache folder was claimed for the current sources (see _claim_cache)."""
    key = cache_key()
    for folder in cache_dirs():
        try:
            with open(os.path.join(folder, KEY_MARKER)) as fh:
                if json.load(fh).get("key") != key:
                    return False
        except (OSError, ValueError):
            return False
    return True


def claim_cache(dirs):
    """Drop the package's cached kernels (compiled from other sources) and mark the folders as
    holding this cache key's kernels from now on (compiled by a warm-up or lazily)."""
    drop_cache(dirs)
    write_markers(None, 0.0)


def write_markers(group, seconds):
    """The group's warm-up marker (group None: the cache-key marker) in every cache folder."""
    key = cache_key()
    for folder in cache_dirs():
        try:
            os.makedirs(folder, exist_ok=True)
            name = os.path.join(folder, KEY_MARKER if group is None else MARKER_NAME.format(group=group))
            tmp = f"{name}.{os.getpid()}.tmp"
            with open(tmp, "w") as fh:
                json.dump({"key": key, "seconds": round(seconds, 1), "time": time.time()}, fh)
            os.replace(tmp, name)
        except OSError:  # a read-only cache: numba could not cache either; say nothing more
            pass


def _package_version() -> str:
    try:
        from importlib.metadata import version
        return version("sva_linearizer")
    except Exception:  # noqa: BLE001 - not installed as a distribution (a bare checkout)
        return "unknown"


def write_failure(group: str, stage: str, error: str) -> None:
    """Remember that the group's compile failed for the current cache key: `stage` is the warm-up
    stage (or the process) that failed, `error` the exception's last line. Later processes find it
    (failure) and keep the group's plain forms instead of compiling again; a new cache key (another
    version of the package, numba or Python) or an explicit `sva-linearizer compile` tries again."""
    key = cache_key()
    for folder in cache_dirs():
        try:
            os.makedirs(folder, exist_ok=True)
            name = os.path.join(folder, FAILED_NAME.format(group=group))
            tmp = f"{name}.{os.getpid()}.tmp"
            with open(tmp, "w") as fh:
                json.dump({"key": key, "stage": stage, "error": error, "version": _package_version(),
                           "time": time.time()}, fh)
            os.replace(tmp, name)
        except OSError:
            pass


def failure(group: str) -> dict | None:
    """The group's failure record ({"stage", "error", "version", "time"}) for the current cache
    key, or None when its compile has not failed since the sources last changed."""
    key = cache_key()
    for folder in cache_dirs():
        try:
            with open(os.path.join(folder, FAILED_NAME.format(group=group))) as fh:
                record = json.load(fh)
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("key") == key:
            return record
    return None


def failure_reason(record: dict) -> str:
    """One line: the failed stage and the error."""
    return f"{record.get('stage', '?')}: {record.get('error', '?')}"


def clear_failure(group: str) -> None:
    for folder in cache_dirs():
        try:
            os.remove(os.path.join(folder, FAILED_NAME.format(group=group)))
        except OSError:
            pass


class FileLock:
    """An exclusive lock across processes (fcntl; a no-op where it is missing)."""

    def __init__(self, folder):
        self.path = os.path.join(folder, LOCK_NAME)
        self.fh = None

    def acquire(self, on_wait=None):
        try:
            import fcntl
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self.fh = open(self.path, "a")
        except (ImportError, OSError):
            self.fh = None
            return
        try:
            fcntl.flock(self.fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(self.fh, fcntl.LOCK_EX)

    def held_elsewhere(self) -> bool:
        """Whether another process holds the lock now (this one takes it and gives it back at once
        when it is free)."""
        try:
            import fcntl
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(self.path, "a") as fh:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    return True
                fcntl.flock(fh, fcntl.LOCK_UN)
        except (ImportError, OSError):
            pass
        return False

    def release(self):
        if self.fh is not None:
            try:
                import fcntl
                fcntl.flock(self.fh, fcntl.LOCK_UN)
            finally:
                self.fh.close()
                self.fh = None


def drop_cache(dirs):
    """Delete this package's compiled kernels from numba's cache before a cold warm-up. numba
    invalidates a kernel's cache entry only when the kernel's own source file changes, but a
    pipeline's machine code contains the kernels it calls from other files (linearize_state holds
    eidamb.py's EIDAmb): after an edit to eidamb.py the cached pipeline would still run the old
    code. The marker's key covers every kernel file, so a cold key means: compile everything."""
    for folder in dirs:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if name.endswith((".nbi", ".nbc")):
                try:
                    os.remove(os.path.join(folder, name))
                except OSError:
                    pass




LOG_NAME = "sva_linearizer.compile.log"
_BACKGROUND_MAIN = "import sys; from sva_linearizer.warmup import main; sys.exit(main(sys.argv[1:]))"


def log_path() -> str | None:
    """The file a background compile writes its progress to (in the first cache folder)."""
    dirs = cache_dirs()
    return os.path.join(dirs[0], LOG_NAME) if dirs else None


def compile_running() -> bool:
    """Whether a process is compiling into this cache now (it holds the cache's lock)."""
    dirs = cache_dirs()
    return bool(dirs) and FileLock(dirs[0]).held_elsewhere()


def start_background_compile(group_names) -> subprocess.Popen | None:
    """Start the warm-up's main (sva_linearizer.warmup.main) on the groups in a session of its own (it
    outlives this process: a command that exits after its first result leaves the compile running,
    and the next process finds the cache warm). The child imports this copy of the package
    (_child.python_command), whatever the working directory holds. The cache's file lock makes
    concurrent requests from several processes compile once. None when it cannot be started."""
    path = log_path()
    try:
        if path is not None:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        log = open(path, "a") if path is not None else subprocess.DEVNULL
    except OSError:
        log = subprocess.DEVNULL
    try:
        return subprocess.Popen(python_command(_BACKGROUND_MAIN, *group_names),
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True, close_fds=True)
    except OSError:
        return None
    finally:
        if log is not subprocess.DEVNULL:
            log.close()
