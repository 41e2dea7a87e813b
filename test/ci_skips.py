# SPDX-License-Identifier: BSD-3-Clause
"""Under CI, a skipped test fails the run: CI installs every oracle and peer the suite uses
(Pinocchio, example-robot-data, cyclonedds, rclpy, matplotlib, rosbags, colcon), so a test that
skips because one of them is missing would hide a check that did not run. The only skips allowed
are those whose reason is one of CI_MAY_SKIP: parts of ROS 2 that no package index serves
(launch, launch_ros, launch_testing), which the tests run where a ROS 2 installation has them.

A skip raised while a test module is imported (a module-level `pytest.skip` or `importorskip`)
fails a CI run whatever its reason, those of CI_MAY_SKIP included: on a machine with ROS 2,
launch_testing's pytest plugin imports every test module while collecting, and such a skip skips
the other files with it where collection_guard.py does not stand in between. So the tests that
may skip in CI skip inside a test (test_ros_launch.py).

CI is the CI environment variable ("true", "1" or "yes"), as `.ci/run` runs. Every skip is listed
with its reason at the end of the run (`-rs` lists them too); those CI does not allow are listed
again under their own heading, and the exit status is 1. A pytest plugin (conftest.py imports
its hooks; `-p ci_skips` loads it elsewhere)."""
from __future__ import annotations

import os
import re

import pytest

# reasons of the skips CI allows: importorskip's own message, or the suite's "<name> (ROS 2) is not installed"
_NOT_SERVED = "launch|launch_ros|launch_testing|launch_testing_ros"
CI_MAY_SKIP = (re.compile(rf"^(?:{_NOT_SERVED}) \(ROS 2\) is not installed$"),
               re.compile(rf"^could not import '(?:{_NOT_SERVED})': No module named '(?:{_NOT_SERVED})'$"))

_skips: list = []   # (test id, reason, raised at import)


def under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def allowed(reason: str, at_import: bool = False) -> bool:
    return not at_import and any(p.match(reason.strip()) for p in CI_MAY_SKIP)


def _reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        reason = longrepr[2]
    else:
        reason = str(longrepr)
    return reason[len("Skipped: "):] if reason.startswith("Skipped: ") else reason


def _record(report, at_import: bool) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        _skips.append((report.nodeid, _reason(report), at_import))


def pytest_collectreport(report):
    _record(report, at_import=True)     # a collector skipped: a module (or a directory) at import


def pytest_runtest_logreport(report):
    _record(report, at_import=False)


def pytest_sessionfinish(session, exitstatus):
    if under_ci() and any(not allowed(r, i) for _, r, i in _skips) and session.exitstatus in (
            pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _skips:
        return
    tr = terminalreporter
    tr.section("skipped tests, with their reasons")
    for nodeid, reason, at_import in _skips:
        tr.line(f"{nodeid}: {reason}" + (" (at import)" if at_import else ""))
    refused = [(n, r, i) for n, r, i in _skips if not allowed(r, i)]
    if under_ci() and refused:
        tr.section("skips CI does not allow (a dependency CI installs is missing, or a skip at import)", red=True)
        for nodeid, reason, at_import in refused:
            tr.line(f"{nodeid}: {reason}" + (" (at import: skip inside the tests instead)" if at_import else ""),
                    red=True)
