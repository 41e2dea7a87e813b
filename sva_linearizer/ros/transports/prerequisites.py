# SPDX-License-Identifier: BSD-3-Clause
"""What each transport needs, checked before anything starts, and the one-line errors that name
what is missing and how to install it.

There is no fallback from one transport to the other: ``auto`` means rclpy when ``rclpy``
imports (its message packages are then required too), else the DDS transport (``cyclonedds``
is then required). A ROS 2 install with message packages missing is an error, not a reason to
switch to plain DDS.
"""
from __future__ import annotations

import importlib
import os

#: ROS 2 packages whose Python messages the rclpy transport imports (package name = rosdep key).
RCLPY_MESSAGE_PACKAGES = ("builtin_interfaces", "std_msgs", "sensor_msgs", "geometry_msgs", "nav_msgs",
                          "diagnostic_msgs", "rosgraph_msgs", "rcl_interfaces")

TRANSPORTS = ("auto", "rclpy", "dds")


class TransportUnavailable(RuntimeError):
    """The transport asked for (or the one ``auto`` picks) cannot run here; one-line message."""


def _import_error(module: str) -> str | None:
    """None if ``module`` imports, else the ImportError's text."""
    try:
        importlib.import_module(module)
    except ImportError as e:
        return " ".join(str(e).split()) or type(e).__name__
    return None


def _apt(packages) -> str:
    distro = os.environ.get("ROS_DISTRO") or "<distro>"
    return "sudo apt install " + " ".join(f"ros-{distro}-{p.replace('_', '-')}" for p in packages)


def missing_message_packages() -> list[str]:
    """The ROS 2 message packages of :data:`RCLPY_MESSAGE_PACKAGES` that do not import."""
    return [p for p in RCLPY_MESSAGE_PACKAGES if _import_error(f"{p}.msg") is not None]


def choose_transport(kind: str = "auto") -> str:
    """``auto`` / ``rclpy`` / ``dds`` -> the transport to build ("rclpy" or "dds"), its
    prerequisites checked; TransportUnavailable says what is missing and how to install it."""
    if kind not in TRANSPORTS:
        raise ValueError(f"transport must be one of {', '.join(TRANSPORTS)}, got {kind!r}")
    if kind in ("auto", "rclpy"):
        err = _import_error("rclpy")
        if err is None:
            missing = missing_message_packages()
            if missing:
                raise TransportUnavailable(
                    f"rclpy (ROS 2) imports but the message package(s) {', '.join(missing)} do not: install "
                    f"them (rosdep keys {', '.join(missing)}; {_apt(missing)}), or run with --transport dds")
            return "rclpy"
        if kind == "rclpy":
            raise TransportUnavailable(f"transport rclpy: rclpy (ROS 2) does not import ({err}): source your "
                                       f"ROS 2 setup (rosdep key rclpy), or run with --transport dds")
    err = _import_error("cyclonedds.domain")
    if err is None:
        return "dds"
    if kind == "auto":
        raise TransportUnavailable(f"no transport: rclpy (ROS 2) does not import and the DDS transport needs "
                                   f"the cyclonedds package ({err}): source your ROS 2 setup (rosdep key "
                                   f"rclpy), or pip install 'sva_linearizer[dds]'")
    raise TransportUnavailable(f"the DDS transport needs the cyclonedds package ({err}): "
                               f"pip install 'sva_linearizer[dds]' (or pip install cyclonedds)")
