# SPDX-License-Identifier: BSD-3-Clause
"""A test module that skips (or fails) at import skips (or fails) alone, also under a pytest plugin
that imports every test module while choosing its collector.

launch_testing's pytest plugin does that (launch_testing 1.0.7, 3.4.3 and 3.7.1 alike): its
pytest_pycollect_makemodule imports each file to look for a launch test's
generate_test_description. A skip raised by that import (a module-level `pytest.skip` or
`pytest.importorskip`: a missing Pinocchio, colcon, example-robot-data...) leaves the hook, and
pytest skips the directory being collected with it: "collected 0 items / 1 skipped", exit code 5,
or, for files named on the command line under pytest >= 8, exit code 4 and nothing run.

The hook wrapper below catches what the other implementations of the hook raised and answers with
pytest's own collector for the file instead, whose import then raises the same skip (or error)
again, reported for that file only. Nothing changes where no implementation raises.
A pytest plugin: conftest.py imports the hook; `-p collection_guard` loads it elsewhere.
"""
from __future__ import annotations

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_pycollect_makemodule(module_path, parent):
    outcome = yield
    try:
        outcome.get_result()
    except (Exception, pytest.skip.Exception, pytest.fail.Exception):
        if module_path.name == "__init__.py":   # a package (pytest 7): no stand-in here
            raise
        outcome.force_result(pytest.Module.from_parent(parent, path=module_path))
