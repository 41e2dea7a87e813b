# SPDX-License-Identifier: BSD-3-Clause
"""A missing part skips its own tests only, never the collection of the others, also under a
plugin that imports every test module while collecting, as launch_testing's pytest plugin does on
a machine with ROS 2 (collection_guard.py). CI has no launch_testing (not on PyPI): EAGER, below,
does what its plugin's collection hook does (launch_testing 1.0.7, 3.4.3, 3.7.1: hooks.py,
find_launch_test_entrypoint), and nothing else."""
import os
import pathlib
import re
import subprocess
import sys

from packaging.requirements import Requirement

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
EAGER = '''
"""launch_testing's pytest_pycollect_makemodule, its import only: every test module is imported to
look for a generate_test_description; whatever the import raises but a SyntaxError leaves the hook."""
import pytest
from _pytest.pathlib import import_path

NEW = tuple(int(p) for p in pytest.__version__.split(".")[:2]) >= (8, 1)


def pytest_pycollect_makemodule(module_path, parent):
    try:
        import_path(module_path, root=None, **({"consider_namespace_packages": False} if NEW else {}))
    except SyntaxError:
        pass
    return None
'''
PLAIN = "def test_plain():\n    assert 1 + 1 == 2\n"
SKIPS_AT_IMPORT = ("import pytest\npytest.importorskip('a_part_that_is_not_installed', reason='a part is missing')\n\n"
                   "def test_never():\n    pass\n")


def _pytest(args, cwd, plugin_dir, extra_path=()):
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["PYTHONPATH"] = os.pathsep.join([str(plugin_dir), *map(str, extra_path)]
                                        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    # the real plugins, where a ROS 2 machine has them, stay out: EAGER stands for them
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "eager",
                           "-p", "no:launch_testing", "-p", "no:launch_ros", *args],
                          capture_output=True, text=True, timeout=300, env=env, cwd=cwd)


def test_a_skip_at_import_skips_its_own_file_only(tmp_path):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "eager.py").write_text(EAGER)
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_plain.py").write_text(PLAIN)
    (suite / "test_missing_part.py").write_text(SKIPS_AT_IMPORT)

    # the failure mode: the skip leaves EAGER's hook and takes the directory with it
    r = _pytest(["."], suite, plugins)
    assert r.returncode == 5 and "1 skipped" in r.stdout and "passed" not in r.stdout, r.stdout

    (suite / "conftest.py").write_text("from collection_guard import pytest_pycollect_makemodule  # noqa: F401\n")
    r = _pytest(["."], suite, plugins, [HERE])
    assert r.returncode == 0 and "1 passed, 1 skipped" in r.stdout, r.stdout
    assert "SKIPPED [1] test_missing_part.py:2: a part is missing" in r.stdout, r.stdout
    r = _pytest(["test_plain.py"], suite, plugins, [HERE])    # pytest >= 8 collects the siblings too
    assert r.returncode == 0 and "1 passed" in r.stdout and "skipped" not in r.stdout, r.stdout


def test_the_launch_test_skips_inside_a_test(tmp_path):
    """The suite itself (its conftest, test_ros_launch.py): with a part of the launch test missing, or
    launch_testing's plugin not loaded (as here), the launch test skips inside its one plain test, and
    the other files run."""
    (tmp_path / "eager.py").write_text(EAGER)
    r = _pytest(["test/test_ros_launch.py", "test/test_layering.py"], ROOT, tmp_path)
    assert r.returncode == 0 and " passed, 1 skipped" in r.stdout, r.stdout
    listed = r.stdout.split("skipped tests, with their reasons")[1]
    assert "test/test_ros_launch.py::test_launch_file_under_launch_testing: " in listed, r.stdout
    assert "(at import)" not in listed, r.stdout


def test_the_pytest_range_loads_launch_testings_plugin():
    """pytest 9.1 refuses the plugin of launch_testing up to Jazzy's 3.4.11, Kilted's 3.8.8 and every
    Humble release (docs/ros.md): the `test` extra stops below it, and CI's pin lies in its range."""
    extra = re.search(r'"test": \[([^\]]*)\]', (ROOT / "setup.py").read_text()).group(1)
    spec = next(r.specifier for r in map(Requirement, re.findall(r'"([^"]+)"', extra)) if r.name == "pytest")
    pin = re.search(r"^pytest==(\S+)", (ROOT / "requirements-ci-base.txt").read_text(), re.M).group(1)
    assert pin in spec and "7.0.1" in spec and "9.0.3" in spec, (spec, pin)
    assert "9.1.0" not in spec and "9.2.0" not in spec, spec
