# SPDX-License-Identifier: BSD-3-Clause
"""The node's answers to a planner's horizon requests (:mod:`.horizon` holds the wire format).

The node subscribes ``linearization/horizon/request`` and publishes ``linearization/horizon/answer``.
Requests are answered on a worker thread of their own, in arrival order, so that the per-state
stream goes on beside them: the horizon's compiled kernels release the GIL, and the joint states'
callbacks run meanwhile. A request that waits while two newer ones wait behind it is answered with
STATUS_SUPERSEDED (a planner wants the answer to its newest trajectory). A bad request is answered
with its id and the reason, and the node keeps running; a request is never answered in part.
"""
from __future__ import annotations

import threading
import time
from collections import deque

import numpy as np

import sva_linearizer as sl

from ..wire.qos import QOS_OUTPUT, QOS_REQUEST
from .horizon import (STATUS_BAD_REQUEST, STATUS_KNOT_FAILED, STATUS_SUPERSEDED, TOPIC_ANSWER, TOPIC_REQUEST,
                      BadRequest, HorizonRequest, answer_msg, decode_request, encode_answer, error_answer)
from .record import RecordDescription

#: requests that may wait for the worker; an older one waiting beyond this is superseded
MAX_WAITING_REQUESTS = 2


class HorizonService:
    """Answers horizon requests for a :class:`.node.LinearizerNode` (its model, description,
    contacts, loops and contact mode at the time each request is taken)."""

    def __init__(self, node, transport):
        self.node = node
        self.transport = transport
        self.counts = {"answered": 0, "refused": 0, "failed": 0, "superseded": 0}
        self.latencies_ms: list = []          # receipt -> answer published, since the last report
        self._queue: deque = deque()
        self._cv = threading.Condition()
        self._stop = False
        self._pub = transport.create_publisher(TOPIC_ANSWER, "std_msgs/msg/Float64MultiArray", QOS_OUTPUT)
        transport.create_subscription(TOPIC_REQUEST, "std_msgs/msg/Float64MultiArray", self.on_request, QOS_REQUEST)
        self._thread = threading.Thread(target=self._run, name="sva_linearizer_horizon", daemon=True)
        self._thread.start()

    def close(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify()
        self._thread.join(5.0)

    # --------------------------------------------------------------- intake
    def on_request(self, msg, recv_ns=None) -> None:
        """A request arrived (the transport's thread): queued for the worker."""
        superseded = []
        with self._cv:
            self._queue.append((msg, time.perf_counter()))
            while len(self._queue) > MAX_WAITING_REQUESTS:
                superseded.append(self._queue.popleft()[0])
            self._cv.notify()
        for old in superseded:
            rid = _request_id(old)
            self.counts["superseded"] += 1
            self._answer(error_answer(rid, self._description_id(), STATUS_SUPERSEDED),
                         f"request {rid} superseded by newer requests while the node was busy")

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._stop:
                    self._cv.wait()
                if self._stop:
                    return
                msg, t0 = self._queue.popleft()
            try:
                self.answer(msg)
            except Exception as e:   # a bug must not end the worker: said, and the next request goes on
                self.node.log.error(f"horizon request: {type(e).__name__}: {e}")
            self.latencies_ms.append((time.perf_counter() - t0) * 1e3)

    # --------------------------------------------------------------- answer
    def _description_id(self) -> int:
        return self.node.description_id if self.node.model is not None else 0

    def _answer(self, data: np.ndarray, error: str | None = None) -> None:
        self._pub.publish(answer_msg(self.node._types, data, error))

    def answer(self, msg) -> None:
        """Decode, compute and publish the answer to one request (the worker's thread)."""
        node = self.node
        model, text = node.model, node.description_text
        description = RecordDescription.from_json(text) if text else None
        try:
            req = decode_request(msg, description)
        except BadRequest as e:
            self.counts["refused"] += 1
            node.warn("horizon_request", f"horizon request {e.request_id}: refused: {e}")
            self._answer(error_answer(e.request_id, self._description_id(), STATUS_BAD_REQUEST), str(e))
            return
        try:
            h = self._linearize(model, req)
            data = encode_answer(req.request_id, description.id, req, h,
                                 node.params["contact_mode"] if node.contacts else None,
                                 sum(lp.dim for lp in node.loops), model.nv, model.nj)
        except sl.linearization.KnotError as e:
            self.counts["failed"] += 1
            node.warn("horizon_request", f"horizon request {req.request_id}: {e}")
            self._answer(error_answer(req.request_id, description.id, STATUS_KNOT_FAILED, e.knot), str(e))
            return
        self._answer(data)
        self.counts["answered"] += 1

    def _linearize(self, model, req: HorizonRequest):
        node = self.node
        dt = req.dt or None
        if node.contacts and node.params["contact_mode"] == "forces":
            forces, o = [], 0
            for c in node.contacts:
                forces.append((c, req.forces[:, o:o + c.dim]))
                o += c.dim
            return sl.linearize_horizon(model, req.q, req.v, req.tau, dt, contacts=node.loops, forces=forces,
                                        active=req.active, restitution=req.restitution)
        return sl.linearize_horizon(model, req.q, req.v, req.tau, dt, contacts=list(node.contacts) + node.loops,
                                    active=req.active, restitution=req.restitution)


def _request_id(msg) -> int:
    data = msg.data
    try:
        x = float(data[1])
    except (IndexError, TypeError, ValueError):
        return 0
    return int(x) if np.isfinite(x) and x == int(x) and 0 < x < 2 ** 53 else 0
