# SPDX-License-Identifier: BSD-3-Clause
"""The examples' --plot option: error norms over time, on a log scale (needs matplotlib)."""
from __future__ import annotations

import numpy as np


def save_time_plot(path: str, t: np.ndarray, curves: dict[str, np.ndarray], title: str,
                   ylabel: str = "|z|") -> None:
    """One line per curve against the time t (s), the y axis logarithmic; PNG, SVG or PDF by the
    file name's suffix."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise SystemExit("--plot needs matplotlib: pip install matplotlib") from None
    fig = Figure(figsize=(7.0, 4.0), layout="constrained")
    ax = fig.add_subplot()
    for (label, y), style in zip(curves.items(), ("-", "--", ":", "-.")):
        ax.semilogy(t[:len(y)], y, style, label=label)
    ax.set_xlabel("t (s)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", lw=0.3)
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=120)
    print(f"saved    {path}")
