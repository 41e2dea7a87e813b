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


def fastdds_loopback_profile(fastdds2: bool = False) -> str:
    """Fast DDS XML profile (default participant profile) with one transport: UDPv4 whitelisted
    to 127.0.0.1, no builtin transports (no shared memory, no other interfaces). For Fast DDS 3
    (Kilted), or with fastdds2 for Fast DDS 2 (Humble, Jazzy), which names the writers' heartbeat
    period ``heartbeatPeriod`` (each rejects the whole file with the other's name)."""
    heartbeat = "heartbeatPeriod" if fastdds2 else "heartbeat_period"
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<dds xmlns="http://www.eprosima.com">
  <profiles>
    <transport_descriptors>
      <transport_descriptor>
        <transport_id>sva_udp_loopback</transport_id>
        <type>UDPv4</type>
        <interfaceWhiteList><address>127.0.0.1</address></interfaceWhiteList>
      </transport_descriptor>
    </transport_descriptors>
    <participant profile_name="sva_loopback" is_default_profile="true">
      <rtps>
        <builtin>
          <initialPeersList>
            <locator><udpv4><address>127.0.0.1</address></udpv4></locator>
          </initialPeersList>
        </builtin>
        <userTransports><transport_id>sva_udp_loopback</transport_id></userTransports>
        <useBuiltinTransports>false</useBuiltinTransports>
      </rtps>
    </participant>
    <data_writer profile_name="sva_writer" is_default_profile="true">
      <times>
        <{heartbeat}><sec>0</sec><nanosec>100000000</nanosec></{heartbeat}>
      </times>
    </data_writer>
  </profiles>
</dds>
"""


_PROFILE_DIR = None   # this process's private directory for the Fast DDS profile file


def fastdds_loopback_profile_path(fastdds2: bool = False) -> str:
    """A file with :func:`fastdds_loopback_profile` (written once per process, in a private
    temporary directory removed at exit)."""
    global _PROFILE_DIR
    import atexit
    import shutil
    import tempfile

    if _PROFILE_DIR is None or not os.path.isdir(_PROFILE_DIR):
        _PROFILE_DIR = tempfile.mkdtemp(prefix="sva_fastdds_")
        atexit.register(shutil.rmtree, _PROFILE_DIR, True)
    path = os.path.join(_PROFILE_DIR, "fastdds2_loopback.xml" if fastdds2 else "fastdds_loopback.xml")
    if not os.path.exists(path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(fastdds_loopback_profile(fastdds2))
    return path


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
           "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp"}
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
