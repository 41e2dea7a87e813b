# SPDX-License-Identifier: BSD-3-Clause
"""Where a cold compile's time goes: `sva-linearizer compile --report`.

Runs the warm-up of every compile group in a fresh process with an empty numba cache (a temporary
folder), in that one process (SVA_LINEARIZER_COMPILE_JOBS=1: the CPU time of a compile, which
`sva-linearizer compile` spreads over the machine's cores), and records each compilation unit numba
builds (one per dispatcher and signature) from
numba's events: its own time (nested compiles of the kernels it calls subtracted), the part of it
spent holding the LLVM lock (LLVM's optimisation and machine-code generation, of the unit and of
the kernels linked into it), the rest being numba's front end (bytecode analysis, typing, IR
inlining, lowering to LLVM IR). Then, from the finished libraries, how many units each kernel's
machine code is linked into: LLVM optimises and generates code for a linked kernel once per unit
that links it.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import time

from .._child import python_command


def _record() -> dict:
    """In the measuring process: compile everything, return the measurements."""
    from numba.core import event

    from .. import _cache
    from ..warmup import ensure_compiled

    units = []
    local = threading.local()

    class Recorder(event.Listener):
        def on_start(self, ev):
            stack = getattr(local, "stack", None)
            if stack is None:
                stack = local.stack = []
            if ev.kind == "numba:compile":
                d = ev.data["dispatcher"]
                stack.append({"name": getattr(d.py_func, "__qualname__", "?"),
                              "module": getattr(d.py_func, "__module__", "?"),
                              "t0": time.perf_counter(), "nested": 0.0, "llvm": 0.0,
                              "group": getattr(d, "compile_group", "?")})
            elif ev.kind == "numba:llvm_lock" and stack:
                local.llvm_depth = getattr(local, "llvm_depth", 0) + 1
                if local.llvm_depth == 1:
                    local.llvm_t0 = time.perf_counter()

        def on_end(self, ev):
            stack = getattr(local, "stack", [])
            if ev.kind == "numba:compile" and stack:
                fr = stack.pop()
                total = time.perf_counter() - fr["t0"]
                own = total - fr["nested"]
                units.append({"name": fr["name"], "module": fr["module"], "group": fr["group"],
                              "seconds": own, "llvm": fr["llvm"], "front_end": own - fr["llvm"]})
                if stack:
                    stack[-1]["nested"] += total
            elif ev.kind == "numba:llvm_lock" and stack and getattr(local, "llvm_depth", 0) > 0:
                local.llvm_depth -= 1
                if local.llvm_depth == 0:
                    stack[-1]["llvm"] += time.perf_counter() - local.llvm_t0

    rec = Recorder()
    event.register("numba:compile", rec)
    event.register("numba:llvm_lock", rec)
    t0 = time.perf_counter()
    stages = {}
    for g in _cache.GROUPS:
        t = time.perf_counter()
        ensure_compiled(g, verbose=False, force=True)
        stages[g] = time.perf_counter() - t
    total = time.perf_counter() - t0

    # which kernels' machine code each unit's library links (transitively)
    names = {}
    for d in _cache.DISPATCHERS:
        for cres in d.overloads.values():
            names[id(cres.library)] = d.py_func.__qualname__
    linked = {}
    for d in _cache.DISPATCHERS:
        for cres in d.overloads.values():
            seen, todo = set(), list(getattr(cres.library, "_linking_libraries", ()))
            while todo:
                lib = todo.pop()
                if id(lib) in seen:
                    continue
                seen.add(id(lib))
                todo.extend(getattr(lib, "_linking_libraries", ()))
            for i in seen:
                if i in names:
                    linked.setdefault(names[i], set()).add(d.py_func.__qualname__)
    return {"total": total, "stages": stages, "units": units,
            "linked": {k: sorted(v) for k, v in linked.items()}}


def measure() -> dict:
    """Run _record in a fresh process on an empty numba cache; its measurements."""
    with tempfile.TemporaryDirectory(prefix="sva-linearizer-compile-report-") as folder:
        env = dict(os.environ, NUMBA_CACHE_DIR=folder, SVA_LINEARIZER_QUIET="1",
                   SVA_LINEARIZER_COMPILE="wait", SVA_LINEARIZER_COMPILE_JOBS="1")  # every unit here
        code = ("import json, sys; from sva_linearizer.tools.compile_report import _record; "
                "json.dump(_record(), sys.stdout)")
        out = subprocess.run(python_command(code), env=env, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"the measuring process failed:\n{out.stderr[-3000:]}")
        return json.loads(out.stdout)


def format_report(r: dict, top: int = 25) -> str:
    units = sorted(r["units"], key=lambda u: -u["seconds"])
    fe = sum(u["front_end"] for u in units)
    llvm = sum(u["llvm"] for u in units)
    lines = [f"cold compile of every group: {r['total']:.1f} s ("
             + ", ".join(f"{g} {s:.1f} s" for g, s in r["stages"].items()) + ")",
             f"{len(units)} compilation units: numba front end {fe:.1f} s, LLVM {llvm:.1f} s",
             "", f"{'unit (kernel)':<34} {'group':<15} {'own s':>7} {'front':>7} {'LLVM':>7} {'links':>5}",
             f"{'-' * 34} {'-' * 15} {'-' * 7} {'-' * 7} {'-' * 7} {'-' * 5}"]
    links = {}
    for k, units_linking in r["linked"].items():
        for u in units_linking:
            links[u] = links.get(u, 0) + 1
    for u in units[:top]:
        lines.append(f"{u['name'][:34]:<34} {u['group']:<15} {u['seconds']:7.1f} {u['front_end']:7.1f} "
                     f"{u['llvm']:7.1f} {links.get(u['name'], 0):5d}")
    rest = units[top:]
    if rest:
        lines.append(f"{f'({len(rest)} more)':<34} {'':<15} {sum(u['seconds'] for u in rest):7.1f} "
                     f"{sum(u['front_end'] for u in rest):7.1f} {sum(u['llvm'] for u in rest):7.1f}")
    lines += ["", "kernels whose machine code is linked into several units (LLVM optimises and "
              "generates it once in each):"]
    for k, v in sorted(r["linked"].items(), key=lambda kv: -len(kv[1])):
        if len(v) > 1:
            lines.append(f"  {k}: {len(v)} units ({', '.join(v)})")
    return "\n".join(lines)
