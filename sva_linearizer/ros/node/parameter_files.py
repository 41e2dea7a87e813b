# SPDX-License-Identifier: BSD-3-Clause
"""Reading the node's parameters from ROS 2 parameter files (``--params-file`` YAML) and from
``--ros-args``, for the DDS transport (with rclpy, ROS 2 reads them itself); what the values must
be is :mod:`.parameters`.

A parameter file maps a node name (or the wildcard ``/**``) to ``ros__parameters``::

    /**:
      ros__parameters:
        robot: solo12
        floating_base: true

With rclpy these files are read by ROS 2 itself; without it, :func:`load_params_file` applies the
same matching rules (wildcards first, then the node's own name) so that one file serves both.
"""
from __future__ import annotations

import fnmatch

import yaml


def _matches(key: str, node_name: str, namespace: str = "") -> bool:
    key = key.strip()
    full = "/" + "/".join(x for x in (namespace.strip("/"), node_name) if x)
    if key in ("/**", "**"):
        return True
    k = key if key.startswith("/") else "/" + key
    if k == full or k.lstrip("/") == node_name:
        return True
    pattern = k.replace("/**", "/*")
    return fnmatch.fnmatchcase(full, pattern)


def parse_params_yaml(text: str, node_name: str = "sva_linearizer", namespace: str = "", what="parameters") -> dict:
    """Parameters for ``node_name`` from a ROS 2 parameter file's text (wildcard entries first)."""
    data = yaml.safe_load(text)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{what}: expected a mapping of node names to ros__parameters")
    wild, own = {}, {}
    for key, body in data.items():
        if not isinstance(body, dict) or "ros__parameters" not in body:
            raise ValueError(f"{what}: entry {key!r} has no 'ros__parameters'")
        if not _matches(str(key), node_name, namespace):
            continue
        params = body["ros__parameters"] or {}
        if not isinstance(params, dict):
            raise ValueError(f"{what}: ros__parameters of {key!r} must be a mapping")
        (wild if "*" in str(key) else own).update(params)
    wild.update(own)
    return wild


def load_params_file(path, node_name: str = "sva_linearizer", namespace: str = "") -> dict:
    with open(path, encoding="utf-8") as f:
        return parse_params_yaml(f.read(), node_name, namespace, what=str(path))


def parse_value(text: str):
    """A parameter value as ROS 2 reads ``-p name:=value`` (YAML scalar or list)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def ros_identity(args, node_name: str = "sva_linearizer", namespace: str = "") -> tuple[str, str]:
    """The node's name and namespace after ``--ros-args -r __node:=NAME -r __ns:=/NS`` (ROS 2's
    remapping of a node's own name and namespace; the last one given wins), from the defaults."""
    in_ros = False
    for i, a in enumerate(args):
        if a == "--ros-args":
            in_ros = True
        elif a == "--":
            in_ros = False
        elif in_ros and a in ("-r", "--remap") and i + 1 < len(args):
            src, sep, dst = args[i + 1].partition(":=")
            if sep and src == "__node":
                node_name = dst
            elif sep and src == "__ns":
                namespace = dst
    return node_name, namespace


def parse_ros_args(args, node_name: str = "sva_linearizer", namespace: str = "") -> dict:
    """Parameters from ``--ros-args`` (``--params-file FILE``, ``-p name:=value``) for the DDS
    transport, parameter files matched against the node's name and namespace (ros_identity gives
    them after remapping); other ROS arguments (remapping, logging) are not parameters."""
    params = {}
    in_ros = False
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--ros-args":
            in_ros = True
        elif a == "--":
            in_ros = False
        elif in_ros and a == "--params-file" and i + 1 < len(args):
            params.update(load_params_file(args[i + 1], node_name, namespace))
            i += 1
        elif in_ros and a in ("-p", "--param") and i + 1 < len(args):
            name, sep, value = args[i + 1].partition(":=")
            if not sep:
                raise ValueError(f"--ros-args {a} expects name:=value, got {args[i + 1]!r}")
            params[name] = parse_value(value)
            i += 1
        elif in_ros and a in ("-r", "--remap", "--log-level", "-e", "--enclave") and i + 1 < len(args):
            i += 1
        i += 1
    return params
