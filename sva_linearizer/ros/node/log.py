# SPDX-License-Identifier: BSD-3-Clause
"""Logging for the node and the transports: ROS-looking lines on stderr for the DDS transport
(:class:`StderrLogger`), and :class:`Throttle`, which keeps a repeated warning to one line per
period."""
from __future__ import annotations

import sys
import time


class StderrLogger:
    """ROS-looking log lines on stderr: ``[WARN] [1700000000.123456] [sva_linearizer]: text``."""

    def __init__(self, name, stream=None):
        self.name = name
        self.stream = stream

    def _emit(self, level, text):
        stream = self.stream or sys.stderr
        stream.write(f"[{level}] [{time.time():.6f}] [{self.name}]: {text}\n")
        stream.flush()

    def info(self, text):
        self._emit("INFO", text)

    def warning(self, text):
        self._emit("WARN", text)

    def error(self, text):
        self._emit("ERROR", text)


class Throttle:
    """At most one message per key per ``period`` seconds; reports how many were suppressed."""

    def __init__(self, emit, period, clock=time.monotonic):
        self.emit, self.period, self.clock = emit, period, clock
        self._last = {}
        self._suppressed = {}

    def __call__(self, key, text):
        now = self.clock()
        last = self._last.get(key)
        if self.period > 0 and last is not None and now - last < self.period:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return False
        n = self._suppressed.pop(key, 0)
        self._last[key] = now
        self.emit(text + (f" ({n} more like this suppressed)" if n else ""))
        return True
