# SPDX-License-Identifier: BSD-3-Clause
"""The transport interface the node is written against, and :func:`make_transport`, which builds
one of the two implementations: :class:`.transport_rclpy.RclpyTransport` (a real rclpy node) or
:class:`.transport_dds.DdsTransport` (plain DDS through the ``cyclonedds`` package).

The interface (what :class:`sva_linearizer.ros.node.node.LinearizerNode` uses)::

    transport.types                       # message classes by ROS name: JointState, Odometry, Header,
                                          # Time, String, Float64MultiArray, MultiArrayLayout, ...
    transport.logger                      # .info / .warning / .error (str)
    transport.now_ns() -> int             # the node's clock
    transport.steady_ns() -> int          # a monotonic clock (time.monotonic_ns), for waits
    transport.create_timer(period_s, callback)          # every period_s of the node's clock
    transport.create_steady_timer(period_s, callback)   # -> timer with reset() / cancel(); created
                                          # cancelled, reset() starts it (steady clock, not /clock)
    transport.create_publisher(topic, "pkg/msg/Type", qos) -> obj with .publish(msg)
    transport.create_subscription(topic, "pkg/msg/Type", callback, qos)   # callback(msg, recv_ns)
        # superseded=f: callback gets the newest of the samples waiting, f(n) the number left out
    transport.dispatch_waiting(subscription) -> n   # run the callback on the samples waiting now
    transport.spin()                      # returns on SIGINT/SIGTERM or transport.stop()
    transport.close()
    # and, for tests and tools: spin_once(timeout_s), wait_for_readers(pub), wait_for_writers(sub)

``qos`` is a dict ``reliable`` (bool), ``transient_local`` (bool), ``depth`` (int, keep-last).
The rclpy transport also reads and publishes the node's parameters (``get_parameters``,
``publish_parameters``); with the DDS transport the command line does (:mod:`sva_linearizer.ros.node.parameter_files`).
"""
from __future__ import annotations

from .prerequisites import choose_transport
from .transport_dds import DdsTransport
from .transport_rclpy import RclpyTransport


def make_transport(kind="auto", node_name="sva_linearizer", **kwargs):
    """The transport :func:`.prerequisites.choose_transport` picks. ``kind``: "auto" (rclpy if it
    imports, else DDS), "rclpy" or "dds"; what is missing for the chosen one is a
    TransportUnavailable (one line: what is missing, how to install it), never a switch to the
    other."""
    kind = choose_transport(kind)
    if kind == "rclpy":
        return RclpyTransport(node_name, args=kwargs.get("args"),
                              parameter_overrides=kwargs.get("parameter_overrides"),
                              namespace=kwargs.get("namespace", ""), domain_id=kwargs.get("domain_id"))
    return DdsTransport(node_name, domain_id=kwargs.get("domain_id"), config=kwargs.get("config"),
                        namespace=kwargs.get("namespace", ""))
