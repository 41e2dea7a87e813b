# SPDX-License-Identifier: BSD-3-Clause
"""A consumer of the node's linearization records on one of the package's transports: it subscribes
the description and the records and hands out :class:`~sva_linearizer.ros.node.record.Record`
objects (the record itself: :mod:`sva_linearizer.ros.node.record`)."""
from __future__ import annotations

import numpy as np

from ..node.record import TOPIC_DESCRIPTION, TOPIC_RECORD, RecordDescription, decode_record
from ..wire.qos import QOS_DESCRIPTION, QOS_OUTPUT


class RecordReader:
    """A consumer of the node's records on one of the package's transports (rclpy or DDS):
    subscribes ``linearization/description`` (transient local) and ``linearization/record``, and
    calls ``on_record(record, receive_time_ns)`` for each record, decoded against the description
    it names. A record whose description has not arrived yet is kept (the last few) until it does;
    one that does not decode is counted in ``bad`` and dropped, with its reason in ``last_error``."""

    def __init__(self, transport, on_record, qos_record=None, keep: int = 8):
        self.on_record = on_record
        self.description: RecordDescription | None = None
        self.bad = 0
        self.last_error = None
        self._waiting: list = []
        self._keep = keep
        self.readers = [
            transport.create_subscription(TOPIC_DESCRIPTION, "std_msgs/msg/String", self.add_description,
                                          QOS_DESCRIPTION),
            transport.create_subscription(TOPIC_RECORD, "std_msgs/msg/Float64MultiArray", self.add_record,
                                          qos_record or QOS_OUTPUT),
        ]

    @property
    def record_reader(self):
        """The subscription of the records (its writer appearing: the node is up)."""
        return self.readers[1]

    def add_description(self, msg, recv_ns=None):
        try:
            self.description = RecordDescription.from_json(msg.data)
        except (ValueError, KeyError, TypeError) as e:
            self.bad += 1
            self.last_error = f"linearization/description: {e}"
            return
        waiting, self._waiting = self._waiting, []
        for data, t in waiting:
            self.add_record_data(data, t)

    def add_record(self, msg, recv_ns=None):
        self.add_record_data(msg.data, recv_ns)

    def add_record_data(self, data, recv_ns=None):
        x = np.asarray(data, dtype=np.float64)
        if self.description is None or (x.size > 1 and int(x[1]) != self.description.id):
            self._waiting.append((x, recv_ns))
            del self._waiting[:-self._keep]
            return
        try:
            record = decode_record(x, self.description)
        except ValueError as e:
            self.bad += 1
            self.last_error = str(e)
            return
        self.on_record(record, recv_ns)
