# SPDX-License-Identifier: BSD-3-Clause
"""A progress bar on a terminal: states done of the recording's, the rate and the time left, on
one line rewritten in place (only when the stream is a terminal)."""
from __future__ import annotations

import sys
import time


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """``update(done)`` redraws ``[####....] done/total states  rate states/s  time left``;
    ``close()`` ends the line. A stream that is not a terminal gets nothing."""

    def __init__(self, total: int, stream=None, width: int = 30):
        self.stream = stream if stream is not None else sys.stderr
        self.total, self.width = max(int(total), 0), width
        self.active = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.monotonic()
        self._drawn = False

    def update(self, done: int) -> None:
        if not self.active:
            return
        elapsed = max(time.monotonic() - self.start, 1e-9)
        rate = done / elapsed
        frac = min(done / self.total, 1.0) if self.total else 1.0
        filled = int(frac * self.width)
        left = _clock((self.total - done) / rate) if rate > 0 and done < self.total else "-"
        line = (f"[{'#' * filled}{'.' * (self.width - filled)}] {done:,}/{self.total:,} states  "
                f"{rate:,.0f} states/s  {left} left")
        self.stream.write("\r" + line + "\033[K")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self.active and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
