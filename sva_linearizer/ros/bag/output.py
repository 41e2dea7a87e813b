# SPDX-License-Identifier: BSD-3-Clause
"""The output recording: a rosbag2 (MCAP by default, or sqlite3) written with rosbags' writer,
holding ``linearization/description`` (std_msgs/String, the node's JSON) and
``linearization/record`` (std_msgs/Float64MultiArray, the node's records) with the node's QoS, so
that ``ros2 bag play`` feeds any consumer of the node.

It is written under a temporary name beside the output (``.<name>.partial-<pid>/``) and renamed to
the output's name once it is complete: an output folder that exists is a whole one.
"""
from __future__ import annotations

import mmap
import os
import shutil
import struct
import tempfile
import time

from ..node.record import TOPIC_DESCRIPTION, TOPIC_RECORD
from ..wire.qos import QOS_DESCRIPTION, QOS_OUTPUT
from .chunk import SEQ_OFFSET
from .recording import BagError, resolve, rosbags_modules, typestore

#: The rosbag2 metadata version written: 8, which ROS 2 Iron and later read (Humble reads none of
#: rosbags' versions, 8 or 9, directly: `ros2 bag reindex` there).
BAG_VERSION = 8
_SEQ = struct.Struct("<d")


def _qos(q: dict):
    """The node's QoS of a publisher as rosbags' offered QoS profile."""
    from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime

    zero = QosTime(0, 0)
    return Qos(QosHistory.KEEP_LAST, q["depth"],
               QosReliability.RELIABLE if q["reliable"] else QosReliability.BEST_EFFORT,
               QosDurability.TRANSIENT_LOCAL if q["transient_local"] else QosDurability.VOLATILE,
               zero, zero, QosLiveliness.AUTOMATIC, zero, False)


class RecordWriter:
    """Writes the description, then the records in the order given, numbering them (seq 1, 2, ...),
    into a rosbag2 at ``path`` (which must not exist) with ``storage`` "mcap" or "sqlite3";
    ``close()`` renames the finished recording to ``path``, ``abort()`` removes what was written."""

    def __init__(self, path: str, storage: str = "mcap", namespace: str = ""):
        rosbag2, _, _ = rosbags_modules()
        path = os.path.abspath(path)
        if os.path.lexists(path):
            raise BagError(f"{path} exists: the output must be a new folder (remove it, or choose another --out)")
        parent, name = os.path.split(path)
        if not os.path.isdir(parent):
            raise BagError(f"{parent}: no such folder for the output")
        plugins = {"mcap": rosbag2.StoragePlugin.MCAP, "sqlite3": rosbag2.StoragePlugin.SQLITE3}
        if storage not in plugins:
            raise BagError(f"--storage {storage}: expected mcap or sqlite3")
        self.path, self.storage = path, storage
        try:
            self._tmp = tempfile.mkdtemp(prefix=f".{name}.partial-{os.getpid()}-", dir=parent)
        except OSError as e:
            raise BagError(f"{parent}: cannot write the output there ({e.strerror})") from None
        self._writing = os.path.join(self._tmp, name)
        self.spool = os.path.join(self._tmp, "chunks")       # worker processes leave their records here
        os.mkdir(self.spool)
        self.writer = rosbag2.Writer(self._writing, version=BAG_VERSION, storage_plugin=plugins[storage])
        self.writer.open()
        ts = typestore()
        self._description = self.writer.add_connection(resolve(TOPIC_DESCRIPTION, namespace), "std_msgs/msg/String",
                                                       typestore=ts, offered_qos_profiles=[_qos(QOS_DESCRIPTION)])
        self._record = self.writer.add_connection(resolve(TOPIC_RECORD, namespace), "std_msgs/msg/Float64MultiArray",
                                                  typestore=ts, offered_qos_profiles=[_qos(QOS_OUTPUT)])
        self._string = ts.types["std_msgs/msg/String"]
        self.seq = 0
        self.seconds = 0.0              # spent writing records
        self._queue = self._thread = self._error = None

    def background(self) -> None:
        """From now on :meth:`records` hands the records to a thread of their own, which writes them in
        order while the caller computes the next (the file's writes release the GIL); ``close``
        waits for it."""
        import queue
        import threading

        self._queue = queue.Queue(maxsize=8)
        self._thread = threading.Thread(target=self._drain, name="sva_linearizer_bag_writer", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self._error is None:
                try:
                    self._write(*item)
                except BaseException as e:          # said by close(); the records after it are dropped
                    self._error = e

    def description(self, text: str, log_time: int) -> None:
        self.writer.write(self._description, log_time, typestore().serialize_cdr(self._string(data=text),
                                                                                   "std_msgs/msg/String"))

    def records(self, messages, log_times) -> None:
        """Records (serialized, writable buffers) and their log times, numbered on (in the writing
        thread after :meth:`background`)."""
        if self._queue is not None:
            if self._error is not None:
                self._raise()
            self._queue.put((list(messages), log_times))
        else:
            self._write(messages, log_times)

    def _write(self, messages, log_times) -> None:
        t0 = time.perf_counter()
        write, conn, pack = self.writer.write, self._record, _SEQ.pack_into
        for msg, t in zip(messages, log_times):
            self.seq += 1
            pack(msg, SEQ_OFFSET, float(self.seq))
            write(conn, int(t), msg)
        self.seconds += time.perf_counter() - t0

    def _stop(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = self._queue = None

    def _raise(self):
        e = self._error
        if isinstance(e, OSError):
            raise BagError(f"{self.path}: writing the output failed ({e})") from None
        raise e

    def chunk(self, res) -> None:
        """A chunk's records (chunk.ChunkResult: its payload or its spool file, which is removed)."""
        if len(res.offsets) < 2:          # none, or written as they were computed (this process)
            return
        if res.spool is not None:
            with open(res.spool, "rb") as f:
                buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)    # private: seq written in place
            os.remove(res.spool)
        else:
            buf = res.payload
        view = memoryview(buf)
        o = res.offsets
        try:
            self.records((view[o[k]:o[k + 1]] for k in range(len(o) - 1)), res.log_times)
        finally:
            view.release()
            if res.spool is not None:
                buf.close()

    def close(self) -> None:
        self._stop()
        if self._error is not None:
            self._raise()
        self.writer.close()
        os.rename(self._writing, self.path)
        shutil.rmtree(self._tmp, ignore_errors=True)

    def abort(self) -> None:
        self._error = self._error or RuntimeError("aborted")
        self._stop()
        try:
            self.writer.abort()
        except Exception:
            pass
        shutil.rmtree(self._tmp, ignore_errors=True)
