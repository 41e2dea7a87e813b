# SPDX-License-Identifier: BSD-3-Clause
"""What ``launch/linearizer.launch.py`` starts, decided without ``launch``: the parameter file that
``robot:=`` or ``config:=`` names, checked, and the node's arguments.

The launch file calls :func:`resolve_launch` from an ``OpaqueFunction`` and hands
:meth:`NodeLaunch.node_arguments` to ``launch_ros.actions.Node``; everything that can go wrong
(a robot without a shipped config, a config file that does not exist or is not a parameter file
for this node) raises :class:`LaunchConfigError` with one line that lists the shipped configs,
which stops the launch.

Rules:

* ``config:=FILE`` (non-empty) wins over ``robot:=``; ``~`` is expanded; it must be a file.
* Otherwise ``robot:=NAME`` names ``<share>/sva_linearizer/config/NAME.yaml``, which must exist.
* The file must be a ROS 2 parameter file whose parameters for this node are all known and valid
  (the node's own checks); the launch then passes it as the node's only parameter file.
* ``namespace:=`` empty means none.
* ``use_sim_time:=true`` gives the node ROS time from ``/clock`` (its stamps and ages); true or false.
"""
from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass

import yaml

PACKAGE = "sva_linearizer"
EXECUTABLE = "linearizer_node"


class LaunchConfigError(ValueError):
    """A launch argument that names no usable parameter file (one-line message)."""


@dataclass(frozen=True)
class NodeLaunch:
    """The node the launch starts: its parameter file, namespace (None: none) and clock."""
    params_file: str
    namespace: str | None
    node_name: str = "sva_linearizer"
    use_sim_time: bool = False

    def node_arguments(self) -> dict:
        """Keyword arguments for ``launch_ros.actions.Node`` (Humble and newer)."""
        args = dict(package=PACKAGE, executable=EXECUTABLE, name=self.node_name,
                    parameters=[self.params_file, {"use_sim_time": self.use_sim_time}], output="screen",
                    emulate_tty=True)
        if self.namespace:
            args["namespace"] = self.namespace
        return args


def package_config_dir() -> pathlib.Path:
    """``<share>/sva_linearizer/config`` from the ament index; LaunchConfigError outside one."""
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
    except ImportError:
        raise LaunchConfigError("ament_index_python is not importable: source your ROS 2 setup "
                                "(rosdep key ament_index_python)") from None
    try:
        return pathlib.Path(get_package_share_directory(PACKAGE)) / "config"
    except (PackageNotFoundError, OSError):   # OSError: AMENT_PREFIX_PATH unset or empty
        raise LaunchConfigError(f"package {PACKAGE} is not in the ament index (AMENT_PREFIX_PATH): "
                                "build it with colcon and source install/setup.bash") from None


def shipped_configs(config_dir: str | os.PathLike) -> list[str]:
    """Names of the configs in ``config_dir`` (``NAME.yaml`` -> ``NAME``), sorted."""
    d = pathlib.Path(config_dir)
    if not d.is_dir():
        return []
    return sorted(p.stem for p in d.glob("*.yaml") if p.is_file())


def _choices(config_dir) -> str:
    names = shipped_configs(config_dir)
    return (f"shipped configs: {', '.join(names)} (robot:=NAME), or config:=/path/to/params.yaml"
            if names else f"no configs in {config_dir}; give config:=/path/to/params.yaml")


def check_params_file(path: str | os.PathLike, node_name: str = "sva_linearizer", namespace: str = "") -> dict:
    """The node's parameters from a parameter file, checked as the node checks them at start;
    LaunchConfigError naming the file and the problem."""
    from .parameter_files import load_params_file
    from .parameters import normalize_parameters

    try:
        params = load_params_file(path, node_name, namespace)
        normalize_parameters(params)
    except yaml.YAMLError as e:
        raise LaunchConfigError(f"config {path}: not a ROS 2 parameter file (YAML: "
                                f"{' '.join(str(e).split())})") from None
    except (OSError, ValueError) as e:
        raise LaunchConfigError(f"config {path}: {e}") from None
    return params


def resolve_launch(robot: str = "", config: str = "", namespace: str = "",
                   config_dir: str | os.PathLike | None = None, use_sim_time: str = "false") -> NodeLaunch:
    """The node a ``robot:=`` / ``config:=`` / ``namespace:=`` / ``use_sim_time:=`` launch starts
    (rules in the module docstring); ``config_dir`` defaults to the package's shared config directory."""
    robot, config, namespace = (robot or "").strip(), (config or "").strip(), (namespace or "").strip()
    sim_time = str(use_sim_time).strip().lower()
    if sim_time not in ("true", "false"):
        raise LaunchConfigError(f"use_sim_time:={use_sim_time}: expected true or false")
    if config:
        path = pathlib.Path(os.path.expanduser(config))
        if not path.is_file():
            d = config_dir if config_dir is not None else _config_dir_or_none()
            where = _choices(d) if d is not None else "give an existing ROS 2 parameter file"
            raise LaunchConfigError(f"config:={config}: no such file; {where}")
    else:
        d = pathlib.Path(config_dir) if config_dir is not None else package_config_dir()
        if not robot:
            raise LaunchConfigError(f"neither robot:= nor config:= given; {_choices(d)}")
        if os.sep in robot or robot.endswith(".yaml"):
            raise LaunchConfigError(f"robot:={robot} is a robot name, not a file; use config:={robot}")
        path = d / f"{robot}.yaml"
        if not path.is_file():
            raise LaunchConfigError(f"robot:={robot} has no config ({path} does not exist); {_choices(d)}")
    check_params_file(path, namespace=namespace)
    return NodeLaunch(str(path.absolute()), namespace or None, use_sim_time=sim_time == "true")


def _config_dir_or_none():
    try:
        return package_config_dir()
    except LaunchConfigError:
        return None
