# SPDX-License-Identifier: BSD-3-Clause
"""launch/linearizer.launch.py without ROS 2's launch: the decisions it delegates to
sva_linearizer.ros.node.launch_config, and the launch file itself run against stand-ins for the few
launch / launch_ros names it may use (those Humble's launch 1.0 and launch_ros 0.19 have)."""
import ast
import importlib.util
import pathlib
import re
import sys
import types

import pytest

from sva_linearizer.ros.node.launch_config import LaunchConfigError, NodeLaunch, resolve_launch, shipped_configs

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFIG_DIR = ROOT / "config"
LAUNCH_FILE = ROOT / "launch" / "linearizer.launch.py"
SHIPPED = sorted(p.name[:-len(".yaml")] for p in CONFIG_DIR.iterdir() if p.name.endswith(".yaml"))

# What the launch file may import: names present in launch 1.0.x (Humble), 3.4.x (Jazzy), 3.8.x
# (Kilted) and launch_ros 0.19 / 0.26 / 0.28 alike (checked against their sources).
PORTABLE = {"launch": {"LaunchDescription"}, "launch.actions": {"DeclareLaunchArgument", "OpaqueFunction"},
            "launch.substitutions": {"LaunchConfiguration"}, "launch_ros.actions": {"Node"}}


def _console_script(name):
    """The module:function setup.py registers for a console script (read from setup.py's text)."""
    m = re.search(rf'"{name} = ([\w.]+):(\w+)"', (ROOT / "setup.py").read_text())
    assert m, name
    return m.group(1), m.group(2)


def test_shipped_configs_are_the_yaml_files():
    assert shipped_configs(CONFIG_DIR) == SHIPPED
    assert shipped_configs(ROOT / "no_such_dir") == []


def test_robot_names_its_shipped_config():
    plan = resolve_launch(robot="ur5", config_dir=CONFIG_DIR)
    assert pathlib.Path(plan.params_file) == (CONFIG_DIR / "ur5.yaml").absolute()
    args = plan.node_arguments()
    assert args["package"] == "sva_linearizer" and args["parameters"] == [plan.params_file, {"use_sim_time": False}]
    assert args["name"] == "sva_linearizer" and "namespace" not in args
    # the executable is the console script that runs the node
    assert _console_script(args["executable"]) == ("sva_linearizer.ros.cli", "main_node")


def test_namespace_and_config_override():
    custom = CONFIG_DIR / "panda.yaml"
    plan = resolve_launch(robot="ur5", config=str(custom), namespace=" robot1 ", config_dir=CONFIG_DIR)
    assert plan == NodeLaunch(str(custom.absolute()), "robot1")
    assert plan.node_arguments()["namespace"] == "robot1"


def test_use_sim_time_reaches_the_node():
    plan = resolve_launch(robot="quadruped", config_dir=CONFIG_DIR, use_sim_time=" True ")
    assert plan.use_sim_time and plan.node_arguments()["parameters"][1] == {"use_sim_time": True}
    with pytest.raises(LaunchConfigError, match="use_sim_time:=maybe: expected true or false"):
        resolve_launch(robot="quadruped", config_dir=CONFIG_DIR, use_sim_time="maybe")


@pytest.mark.parametrize("robot", ["bogus", "go1", ""])
def test_robot_without_config_stops_with_the_shipped_list(robot):
    with pytest.raises(LaunchConfigError) as e:
        resolve_launch(robot=robot, config_dir=CONFIG_DIR)
    text = str(e.value)
    assert "\n" not in text and ", ".join(SHIPPED) in text
    if robot:
        assert f"robot:={robot}" in text


def test_missing_config_file_stops_with_the_shipped_list(tmp_path):
    with pytest.raises(LaunchConfigError) as e:
        resolve_launch(robot="ur5", config=str(tmp_path / "nope.yaml"), config_dir=CONFIG_DIR)
    text = str(e.value)
    assert "nope.yaml: no such file" in text and ", ".join(SHIPPED) in text and "\n" not in text


def test_robot_given_a_path_says_use_config():
    with pytest.raises(LaunchConfigError, match="use config:="):
        resolve_launch(robot=str(CONFIG_DIR / "ur5.yaml"), config_dir=CONFIG_DIR)


@pytest.mark.parametrize("text,needle", [
    ("/**:\n  ros__parameters:\n    robot: ur5\n    max_rat: 1.0\n", "unknown parameter(s): max_rat"),
    ("/**:\n  ros__parameters:\n    robot: ur5\n    max_odom_age: -1.0\n", "max_odom_age"),
    ("/**:\n  robot: ur5\n", "ros__parameters"),
    ("/**: [unclosed\n", "not a ROS 2 parameter file"),
])
def test_a_config_that_does_not_check_stops_the_launch(tmp_path, text, needle):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(LaunchConfigError) as e:
        resolve_launch(config=str(f), config_dir=CONFIG_DIR)
    assert needle in str(e.value) and str(f) in str(e.value) and "\n" not in str(e.value)


def test_every_shipped_config_resolves():
    for name in SHIPPED:
        assert resolve_launch(robot=name, config_dir=CONFIG_DIR).params_file.endswith(f"/{name}.yaml")


def test_launch_file_imports_only_portable_names():
    tree = ast.parse(LAUNCH_FILE.read_text())
    imported = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module.split(".")[0] in ("launch", "launch_ros"):
            imported.setdefault(node.module, set()).update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            assert not any(a.name.split(".")[0] in ("launch", "launch_ros") for a in node.names)
    for module, names in imported.items():
        assert names <= PORTABLE.get(module, set()), (module, names - PORTABLE.get(module, set()))


class _Stand:
    """Stand-ins for the launch names the launch file uses: they record what they are given."""

    class LaunchDescription:
        def __init__(self, entities):
            self.entities = list(entities)

    class DeclareLaunchArgument:
        def __init__(self, name, default_value=None, description=""):
            self.name, self.default_value = name, default_value

    class OpaqueFunction:
        def __init__(self, function):
            self.function = function

    class LaunchConfiguration:
        def __init__(self, name):
            self.name = name

        def perform(self, context):
            return context[self.name]

    class Node:
        def __init__(self, **kwargs):
            self.kwargs = kwargs


@pytest.fixture
def launch_file(monkeypatch):
    """The launch file loaded against the stand-ins, the package's config dir as its share."""
    mods = {"launch": ["LaunchDescription"], "launch.actions": ["DeclareLaunchArgument", "OpaqueFunction"],
            "launch.substitutions": ["LaunchConfiguration"], "launch_ros": [], "launch_ros.actions": ["Node"]}
    for name, attrs in mods.items():
        m = types.ModuleType(name)
        for a in attrs:
            setattr(m, a, getattr(_Stand, a))
        monkeypatch.setitem(sys.modules, name, m)
    import sva_linearizer.ros.node.launch_config as lc
    monkeypatch.setattr(lc, "package_config_dir", lambda: CONFIG_DIR)
    spec = importlib.util.spec_from_file_location("linearizer_launch", LAUNCH_FILE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(mod, **given):
    ld = mod.generate_launch_description()
    context = {a.name: a.default_value for a in ld.entities if isinstance(a, _Stand.DeclareLaunchArgument)}
    context.update(given)
    (opaque,) = [e for e in ld.entities if isinstance(e, _Stand.OpaqueFunction)]
    return opaque.function(context)


def test_launch_file_defaults_to_the_bundled_quadruped(launch_file):
    """The default needs nothing but the package (the other configs need example-robot-data)."""
    (node,) = _run(launch_file)
    assert node.kwargs["parameters"] == [str((CONFIG_DIR / "quadruped.yaml").absolute()), {"use_sim_time": False}]
    assert node.kwargs["package"] == "sva_linearizer" and "namespace" not in node.kwargs


def test_launch_file_passes_robot_namespace_and_sim_time(launch_file):
    (node,) = _run(launch_file, robot="ur5", namespace="robot1", use_sim_time="true")
    assert node.kwargs["parameters"] == [str((CONFIG_DIR / "ur5.yaml").absolute()), {"use_sim_time": True}]
    assert node.kwargs["namespace"] == "robot1"


def test_launch_file_stops_on_unknown_robot(launch_file):
    with pytest.raises(LaunchConfigError, match="shipped configs: " + ", ".join(SHIPPED)):
        _run(launch_file, robot="bogus")


@pytest.mark.parametrize("prefix", [None, "empty"])
def test_outside_an_ament_index_the_error_says_how_to_get_in(monkeypatch, tmp_path, prefix):
    pytest.importorskip("ament_index_python", reason="ament_index_python (ROS 2) is not installed")
    from sva_linearizer.ros.node.launch_config import package_config_dir

    if prefix is None:
        monkeypatch.delenv("AMENT_PREFIX_PATH", raising=False)
    else:
        monkeypatch.setenv("AMENT_PREFIX_PATH", str(tmp_path))
    with pytest.raises(LaunchConfigError, match="not in the ament index .*source install/setup.bash"):
        package_config_dir()
    with pytest.raises(LaunchConfigError, match="not in the ament index"):
        resolve_launch(robot="ur5")
