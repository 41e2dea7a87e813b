# SPDX-License-Identifier: BSD-3-Clause
"""Confining DDS traffic to 127.0.0.1, for both middlewares, on a domain of one's own: what the
tests, the demo, the benchmark and ``--loopback`` use.

* :func:`loopback_config` - Cyclone DDS configuration (the DDS transport);
* :func:`fastdds_loopback_profile` / :func:`fastdds_loopback_profile_path` - Fast DDS profile (rclpy);
* :func:`private_domain_id` - a ``ROS_DOMAIN_ID`` from the process id, to keep runs apart;
* :func:`loopback_vars` / :func:`loopback_env` - the environment variables that apply all of it to
  a child process.
"""
from __future__ import annotations

import os

from .cyclone_compat import CYCLONE_COMPATIBILITY


def loopback_config(max_participants: int = 50) -> str:
    """Cyclone DDS configuration confining traffic to 127.0.0.1 (no multicast, unicast discovery),
    with the Fast DDS compatibility element (:data:`.cyclone_compat.CYCLONE_COMPATIBILITY`).

    Suitable for ``CYCLONEDDS_URI`` (Cyclone accepts XML text there) or ``DdsTransport(config=...)``.
    """
    return ("<CycloneDDS><Domain Id=\"any\"><General><Interfaces><NetworkInterface name=\"lo\"/>"
            "</Interfaces><AllowMulticast>false</AllowMulticast></General>"
            f"{CYCLONE_COMPATIBILITY}"
            "<Discovery><Peers><Peer address=\"127.0.0.1\"/></Peers>"
            "<ParticipantIndex>auto</ParticipantIndex>"
            f"<MaxAutoParticipantIndex>{int(max_participants)}</MaxAutoParticipantIndex>"
            "</Discovery></Domain></CycloneDDS>")


#: The Fast DDS loopback profiles shipped with the package (Fast DDS 3: Kilted and later; Fast DDS 2:
#: Humble, Iron, Jazzy), for a planner of one's own too: ``sva-linearizer loopback-env`` prints them.
_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "data")
FASTDDS_PROFILE = os.path.join(_DATA, "fastdds_loopback.xml")
FASTDDS2_PROFILE = os.path.join(_DATA, "fastdds2_loopback.xml")


def fastdds_loopback_profile_path(fastdds2: bool = False) -> str:
    """The shipped Fast DDS profile (default participant profile): shared memory (4 MB segments)
    and one UDPv4 transport whitelisted to 127.0.0.1 (4 MB socket buffers), no builtin transports
    (no other interfaces), initial peer 127.0.0.1, writers' heartbeat every 100 ms. For Fast DDS 3,
    or with fastdds2 for Fast DDS 2, which names the heartbeat period ``heartbeatPeriod`` where
    Fast DDS 3 has ``heartbeat_period`` (each rejects the whole file with the other's name)."""
    return FASTDDS2_PROFILE if fastdds2 else FASTDDS_PROFILE


def fastdds_loopback_profile(fastdds2: bool = False) -> str:
    """The text of :func:`fastdds_loopback_profile_path`."""
    with open(fastdds_loopback_profile_path(fastdds2), encoding="utf-8") as f:
        return f.read()


def private_domain_id(seed: int | None = None) -> int:
    """A domain id in 1..232 derived from the process id (or seed), to keep test runs apart."""
    x = os.getpid() if seed is None else int(seed)
    return 1 + (x * 7919) % 232


def loopback_vars(domain_id: int) -> dict:
    """The variables that confine both middlewares to 127.0.0.1 on the given domain: Cyclone's
    loopback configuration, and for ROS 2 (Fast DDS) the loopback-only profile
    (:func:`fastdds_loopback_profile`) with ``ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET``.

    Not LOCALHOST: with rmw_fastrtps 9.3 (Kilted), ``LOCALHOST`` replaces the profile's transports
    with its own UDP transport, whose participant binds sockets to 0.0.0.0 and to the machine's
    other addresses; with ``SUBNET`` and this profile every socket is bound to 127.0.0.1
    (multicast discovery joined on lo only, unicast initial peer 127.0.0.1).
    Fast DDS 3 reads the profile from FASTDDS_DEFAULT_PROFILES_FILE, Fast DDS 2 from
    FASTRTPS_DEFAULT_PROFILES_FILE only, and each rejects the other's heartbeat tag: the variable
    of the installed version is set (fast_dds_2). test_ros_interop.py checks the sockets."""
    env = {"CYCLONEDDS_URI": loopback_config(), "ROS_DOMAIN_ID": str(int(domain_id)),
           "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET", "ROS_STATIC_PEERS": "",
           "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp",
           # the profile below is the only one Fast DDS reads: not also a DEFAULT_FASTDDS_PROFILES.xml
           # (Fast DDS 2: DEFAULT_FASTRTPS_PROFILES.xml) in the working directory
           "SKIP_DEFAULT_XML_FILE": "1"}
    if fast_dds_2():
        env["FASTRTPS_DEFAULT_PROFILES_FILE"] = fastdds_loopback_profile_path(fastdds2=True)
    else:
        env["FASTDDS_DEFAULT_PROFILES_FILE"] = fastdds_loopback_profile_path()
    return env


def fast_dds_2() -> bool:
    """Whether the ROS 2 here has Fast DDS 2 (Humble, Iron, Jazzy) rather than 3 (Kilted and
    later): ROS_DISTRO where a ROS 2 installation set it, else which wheel is installed (Jazzy's
    ros-fastrtps, Kilted's ros-fastdds)."""
    distro = os.environ.get("ROS_DISTRO", "").strip().lower()
    if distro:
        return distro in ("humble", "iron", "jazzy")
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("ros-fastrtps")
        return True
    except PackageNotFoundError:
        return False


def loopback_env(domain_id: int, base=None) -> dict:
    """Environment for a child process: loopback-only DDS (both middlewares) and the domain."""
    env = dict(os.environ if base is None else base)
    env.update(loopback_vars(domain_id))
    return env
