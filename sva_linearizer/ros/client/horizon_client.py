# SPDX-License-Identifier: BSD-3-Clause
"""A planner's side of the horizon topics, on any of the package's transports (rclpy or DDS).

    from sva_linearizer.ros import HorizonClient, make_transport

    t = make_transport("auto", "my_planner")
    client = HorizonClient(t)
    client.wait_for_node(10.0)                     # the description and the node's request reader
    future = client.request(q, v, tau, dt=0.01, active=schedule)    # (N, ...) arrays, model order
    answer = future.result(timeout=1.0)            # spins t while waiting; or request(..., callback=f)
    answer.knots[k].Ad, answer.stacked("Ad")       # the records of the knots (sva_linearizer.ros.node.record)

The knots are given in the order of the description's ``joint_names`` (its ``z``) and ``contacts``.
A refused request is an answer too: ``answer.ok`` is False and ``answer.error`` says why.
"""
from __future__ import annotations

import os
import threading
import time

from ..node.horizon import (TOPIC_ANSWER, TOPIC_REQUEST, HorizonAnswer, answer_request_id, decode_answer,
                            encode_request, request_msg)
from ..node.record import TOPIC_DESCRIPTION, RecordDescription
from ..wire.qos import QOS_DESCRIPTION, QOS_OUTPUT, QOS_REQUEST


class HorizonFuture:
    """The answer to one request, when it comes: ``done()``, ``result(timeout)``."""

    def __init__(self, client: HorizonClient, request_id: int, callback=None):
        self.client, self.request_id, self.callback = client, request_id, callback
        self.sent_ns = time.monotonic_ns()
        self.answer: HorizonAnswer | None = None
        self.received_ns: int | None = None
        self._event = threading.Event()

    def done(self) -> bool:
        return self._event.is_set()

    def _set(self, answer: HorizonAnswer) -> None:
        self.answer, self.received_ns = answer, time.monotonic_ns()
        self._event.set()
        if self.callback is not None:
            self.callback(answer)

    def result(self, timeout: float | None = None, spin: bool = True) -> HorizonAnswer:
        """The answer; with spin, the client's transport is spun meanwhile (call it from the thread
        that spins it, or pass spin=False when another thread does). TimeoutError after timeout s."""
        end = None if timeout is None else time.monotonic() + timeout
        while not self._event.is_set():
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"horizon request {self.request_id}: no answer within {timeout} s")
            if spin:
                self.client.transport.spin_once(0.01 if left is None else min(0.01, left))
            else:
                self._event.wait(0.01 if left is None else min(0.01, left))
        return self.answer


class HorizonClient:
    """Sends horizon requests and matches the answers to them by request id. Answers to other
    clients' requests (the topic is shared) are ignored."""

    def __init__(self, transport):
        self.transport = transport
        self.description: RecordDescription | None = None
        self.bad = 0
        self.last_error: str | None = None
        self._pending: dict[int, HorizonFuture] = {}
        self._lock = threading.Lock()
        self._next_id = int.from_bytes(os.urandom(4), "little") + 1     # ids of this client: from a random start
        self._pub = transport.create_publisher(TOPIC_REQUEST, "std_msgs/msg/Float64MultiArray", QOS_REQUEST)
        self.readers = [
            transport.create_subscription(TOPIC_DESCRIPTION, "std_msgs/msg/String", self._on_description,
                                          QOS_DESCRIPTION),
            transport.create_subscription(TOPIC_ANSWER, "std_msgs/msg/Float64MultiArray", self._on_answer, QOS_OUTPUT),
        ]

    def _on_description(self, msg, recv_ns=None) -> None:
        try:
            self.description = RecordDescription.from_json(msg.data)
        except (ValueError, KeyError, TypeError) as e:
            self.bad += 1
            self.last_error = f"linearization/description: {e}"

    def _on_answer(self, msg, recv_ns=None) -> None:
        rid = answer_request_id(msg)
        with self._lock:
            future = self._pending.pop(rid, None)
        if future is None:
            return                                   # another client's, or already answered
        try:
            answer = decode_answer(msg, self.description)
        except ValueError as e:
            self.bad += 1
            self.last_error = str(e)
            with self._lock:
                self._pending[rid] = future          # a later answer with this id may still decode
            return
        future._set(answer)

    def wait_for_node(self, timeout: float = 10.0) -> bool:
        """Spin until the node's description has arrived, its request reader is matched and its
        answer writer too (both topics are volatile: what is sent before the match is lost)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self._matched():
                return True
            self.transport.spin_once(0.02)
        return self._matched()

    def _matched(self) -> bool:
        T = self.transport
        return (self.description is not None and T.wait_for_readers(self._pub, 0.0)
                and T.wait_for_writers(self.readers[1], 0.0))

    def request(self, q, v, tau, dt: float = 0.0, active=None, forces=None, t0_ns: int = 0, omit=(),
                callback=None, restitution: float = 0.0) -> HorizonFuture:
        """Send the knots (N, nq), (N, nv), (N, nj) in the description's joint order; active (N, C)
        per contact of the description (None: all); forces (N, F) with contact_mode forces; dt: the
        step (0: continuous only); omit: record sections the answer leaves out; restitution: e of the
        impacts at the touchdowns. -> the future."""
        if self.description is None:
            raise RuntimeError("HorizonClient: no linearization/description yet (wait_for_node first)")
        with self._lock:
            rid = self._next_id
            self._next_id = 1 + self._next_id % (2 ** 53 - 2)
            future = self._pending[rid] = HorizonFuture(self, rid, callback)
        data, n, s = encode_request(rid, self.description, q, v, tau, dt, active, forces, t0_ns, omit,
                                    restitution)
        self._pub.publish(request_msg(self.transport.types, data, n, s))
        return future

    def pending(self) -> int:
        """Requests sent and not answered yet."""
        return len(self._pending)

