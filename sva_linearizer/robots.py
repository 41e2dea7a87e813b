# SPDX-License-Identifier: BSD-3-Clause
"""Named robots: the package's own quadruped and robots of the ``example-robot-data`` package.

    model = load_robot("solo12")                  # default base: floating for legged robots
    path = robot_urdf_path("panda")               # pathlib.Path of the URDF

``KNOWN_ROBOTS`` maps a name to (URDF path relative to example-robot-data's ``robots`` directory,
default ``floating_base``). Legged robots and humanoids default to a floating base; arms and
wheeled mobile manipulators (pr2, tiago) to a fixed base. ``quadruped`` is bundled with this
package (``sva_linearizer/data/quadruped.urdf``) and needs nothing else.

Not every URDF describes good dynamics:

* ``icub``: the neck links are point masses whose centres of mass lie on the ``neck_roll`` axis at
  q = 0, so the mass matrix is singular at that configuration (not in general; the model loads).
  ``icub_reduced`` does not have this problem.
* ``romeo_laas_small``: links ``body``, ``LHipPitch_link`` and ``RHipPitch_link`` have indefinite
  inertia tensors (physically impossible) and the grippers are massless, so ``load_robot`` raises
  a ValueError naming ``body``. ``load_robot("romeo_laas_small", validate=False)`` loads it as
  Pinocchio does, with one warning per invalid link/joint; forward dynamics and the linearization
  then fail at run time (the mass matrix is singular everywhere: massless grippers), while
  ``mass_matrix`` and the inverse dynamics compute. ``romeo_small`` is fine.

example-robot-data (``pip install example-robot-data``, or the ROS package) is found through the
``EXAMPLE_ROBOT_DATA_DIR`` environment variable when it is set (its ``robots`` directory, or the
directory above it), otherwise as ``<entry>/cmeel.prefix/share/example-robot-data/robots`` for an
entry of ``sys.path`` or ``site.getsitepackages()`` (the pip wheel), or as
``<prefix>/share/example-robot-data/robots`` for a prefix of ``AMENT_PREFIX_PATH`` (ROS 2).
"""
from __future__ import annotations

import os
import pathlib
import site
import sys

__all__ = ["KNOWN_ROBOTS", "BUNDLED_ROBOTS", "ROBOT_NAMES", "robot_urdf_path", "default_floating_base",
           "load_robot", "example_robot_data_dir"]

# name -> (URDF path under example-robot-data's robots/ directory, default floating_base)
KNOWN_ROBOTS: dict[str, tuple[str, bool]] = {
    # quadrupeds
    "solo12": ("solo_description/robots/solo12.urdf", True),
    "solo8": ("solo_description/robots/solo.urdf", True),
    "anymal_b": ("anymal_b_simple_description/robots/anymal.urdf", True),
    "anymal_c": ("anymal_c_simple_description/urdf/anymal.urdf", True),
    "hyq": ("hyq_description/robots/hyq_no_sensors.urdf", True),
    "go1": ("go1_description/urdf/go1.urdf", True),
    "go2": ("go2_description/urdf/go2.urdf", True),
    "a1": ("a1_description/urdf/a1.urdf", True),
    "b1": ("b1_description/urdf/b1.urdf", True),
    "laikago": ("laikago_description/urdf/laikago.urdf", True),
    # bipeds and humanoids
    "bolt": ("bolt_description/robots/bolt.urdf", True),
    "icub": ("icub_description/robots/icub.urdf", True),
    "icub_reduced": ("icub_description/robots/icub_reduced.urdf", True),
    "romeo_small": ("romeo_description/urdf/romeo_small.urdf", True),
    "romeo_laas_small": ("romeo_description/urdf/romeo_laas_small.urdf", True),
    "talos": ("talos_data/robots/talos_reduced.urdf", True),
    "talos_full": ("talos_data/robots/talos_full_v2.urdf", True),
    "g1_29dof": ("g1_description/urdf/g1_29dof_rev_1_0.urdf", True),
    # arms
    "ur3": ("ur_description/urdf/ur3_robot.urdf", False),
    "ur5": ("ur_description/urdf/ur5_robot.urdf", False),
    "ur10": ("ur_description/urdf/ur10_robot.urdf", False),
    "panda": ("panda_description/urdf/panda.urdf", False),
    "kinova": ("kinova_description/robots/kinova.urdf", False),
    "z1": ("z1_description/urdf/z1.urdf", False),
    "xarm7": ("xarm_description/urdf/xarm7.urdf", False),
    "double_pendulum": ("double_pendulum_description/urdf/double_pendulum.urdf", False),
    # mobile manipulators
    "pr2": ("pr2_description/urdf/pr2.urdf", False),
    "tiago": ("tiago_description/robots/tiago.urdf", False),
    "baxter": ("baxter_description/urdf/baxter.urdf", False),
}

# Robots shipped inside this package: name -> (file under sva_linearizer/data, default floating_base)
BUNDLED_ROBOTS: dict[str, tuple[str, bool]] = {
    "quadruped": ("quadruped.urdf", True),
}

# Every name robot_urdf_path / load_robot accept.
ROBOT_NAMES: tuple[str, ...] = tuple(BUNDLED_ROBOTS) + tuple(KNOWN_ROBOTS)

_ERD_SUBDIR = pathlib.Path("share", "example-robot-data", "robots")
_ENV_VAR = "EXAMPLE_ROBOT_DATA_DIR"


def _candidate_dirs():
    """Directories that may be example-robot-data's robots/ directory, in search order."""
    entries = list(sys.path)
    try:
        entries += site.getsitepackages()
    except AttributeError:  # some embedded/virtualenv builds lack it
        pass
    for entry in entries:
        if entry:
            yield pathlib.Path(entry) / "cmeel.prefix" / _ERD_SUBDIR
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            yield pathlib.Path(prefix) / _ERD_SUBDIR


def example_robot_data_dir() -> pathlib.Path:
    """example-robot-data's ``robots`` directory; ValueError when it is not installed.

    ``EXAMPLE_ROBOT_DATA_DIR``, when set, is used and nothing else (its ``robots`` subdirectory if
    it has one, else the directory itself)."""
    env = os.environ.get(_ENV_VAR)
    if env:
        d = pathlib.Path(env).expanduser()
        for candidate in (d / "robots", d):
            if candidate.is_dir():
                return candidate
        raise ValueError(f"{_ENV_VAR}={env} is not a directory (it should be example-robot-data's "
                         "'robots' directory)")
    for d in _candidate_dirs():
        if d.is_dir():
            return d
    raise ValueError("example-robot-data was not found: `pip install example-robot-data` (or set "
                     f"{_ENV_VAR} to its 'robots' directory)")


def _unknown(name):
    return ValueError(f"unknown robot '{name}'; known robots: {', '.join(ROBOT_NAMES)}")


def robot_urdf_path(name) -> pathlib.Path:
    """Path of the URDF of a known robot (see KNOWN_ROBOTS and BUNDLED_ROBOTS)."""
    if name in BUNDLED_ROBOTS:
        return pathlib.Path(__file__).resolve().parent / "data" / BUNDLED_ROBOTS[name][0]
    if name not in KNOWN_ROBOTS:
        raise _unknown(name)
    path = example_robot_data_dir() / KNOWN_ROBOTS[name][0]
    if not path.is_file():
        raise ValueError(f"robot '{name}': {path} is missing from this example-robot-data installation "
                         "(upgrade it: `pip install -U example-robot-data`)")
    return path


def default_floating_base(name) -> bool:
    """Whether a known robot's base floats by default."""
    if name in BUNDLED_ROBOTS:
        return BUNDLED_ROBOTS[name][1]
    if name in KNOWN_ROBOTS:
        return KNOWN_ROBOTS[name][1]
    raise _unknown(name)


def load_robot(name, floating_base=None, gravity=(0.0, 0.0, -9.81), *, validate=True):
    """The Model of a known robot; floating_base=None uses the robot's default. ``validate``: as
    in :func:`sva_linearizer.urdf.load_urdf` (True: physically invalid dynamics are errors naming
    the link/joint; False: warnings, the model loads as Pinocchio's does)."""
    from .urdf import load_urdf

    if floating_base is None:
        floating_base = default_floating_base(name)
    return load_urdf(robot_urdf_path(name), floating_base=floating_base, gravity=gravity, validate=validate)
