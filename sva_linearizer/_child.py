# SPDX-License-Identifier: BSD-3-Clause
"""Command lines for the Python child processes the package starts (compiles, stage workers, the
demo's processes, the measuring tools), such that each child imports exactly this copy of
sva_linearizer.

``python -c CODE`` and ``python -m MODULE`` put the working directory first on ``sys.path``, and
PYTHONPATH comes before the installed packages: a child started from a checkout's root (or with a
PYTHONPATH naming one) would import that other copy, whose numba cache is another one. The
commands built here run a prelude first that removes the working directory from ``sys.path`` and
loads the package from this copy's folder under its own name, so that every later
``import sva_linearizer...`` in the child resolves to this copy's modules whatever the working
directory and PYTHONPATH hold. Knows no algorithm.
"""
from __future__ import annotations

import os
import sys

# this copy's package folder (the folder of this file)
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

# The prelude: argv[1] is the package folder (popped, so that the child's own code sees its
# arguments from argv[1] on as usual).
PRELUDE = (
    "import importlib.util, os, sys; sys.path[:] = [p for p in sys.path if p not in ('', os.getcwd())]; "
    "_d = sys.argv.pop(1); _s = importlib.util.spec_from_file_location("
    "'sva_linearizer', os.path.join(_d, '__init__.py'), submodule_search_locations=[_d]); "
    "_m = importlib.util.module_from_spec(_s); sys.modules['sva_linearizer'] = _m; _s.loader.exec_module(_m)")


def python_command(code: str, *args: str) -> list[str]:
    """``[python, -c, prelude; code, <this package's folder>, *args]``: runs `code` with this process's
    interpreter and this copy of the package; `code` reads its arguments from ``sys.argv[1:]``."""
    return [sys.executable, "-c", f"{PRELUDE}\n{code}", PACKAGE_DIR, *args]


def module_command(module: str, *args: str) -> list[str]:
    """The command line running ``python -m <module> args`` with this process's interpreter and this
    copy of the package (`module` is sva_linearizer or one of its modules)."""
    return python_command("import runpy; runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)",
                          module, *args)


def same_package(cmd: list[str]) -> list[str]:
    """``[sys.executable, '-m', 'sva_linearizer...', ...]`` -> module_command(...); others unchanged."""
    cmd = list(cmd)
    if (len(cmd) >= 3 and cmd[0] == sys.executable and cmd[1] == "-m"
            and (cmd[2] == "sva_linearizer" or cmd[2].startswith("sva_linearizer."))):
        return module_command(cmd[2], *cmd[3:])
    return cmd
