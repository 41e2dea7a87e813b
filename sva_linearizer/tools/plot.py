# SPDX-License-Identifier: BSD-3-Clause
"""Pictures of a linearization: the sparsity of A and B with the blocks of z labelled, and the
eigenvalues of A in the complex plane (``sva-linearizer plot``).

Needs matplotlib (``pip install "sva_linearizer[plot]"``); it is imported only when a figure is
drawn, with the Agg renderer (no display needed), and nothing else in the package imports it.
"""
from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

FORMATS = (".png", ".svg", ".pdf")
MISSING = ("matplotlib is not installed: the plot command needs it "
           "(pip install \"sva_linearizer[plot]\", or pip install matplotlib)")


def require_matplotlib():
    """matplotlib's Figure class, or an ImportError saying how to install matplotlib."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError(MISSING) from None
    return Figure


def check_output(path: str) -> str:
    """The output path, or a ValueError: a known suffix, an existing folder."""
    if not path or not path.strip():
        raise ValueError("--out: empty path")
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in FORMATS:
        raise ValueError(f"--out: the file name must end in {', '.join(FORMATS)} (the format), got {path!r}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"--out: folder {os.path.dirname(path) or folder!r} does not exist")
    return path


def block_edges(names: Sequence[str]) -> list[tuple[int, int, str]]:
    """(start, stop, prefix) of each run of labels sharing the prefix before the first '.'
    ('z_H', 's', 'v', 'r', 'tau')."""
    runs: list[tuple[int, int, str]] = []
    for i, name in enumerate(names):
        prefix = name.split(".", 1)[0]
        if runs and runs[-1][2] == prefix:
            runs[-1] = (runs[-1][0], i + 1, prefix)
        else:
            runs.append((i, i + 1, prefix))
    return runs


def _sparsity(fig, ax, M, row_names, col_names, title):
    """log10 |M| over ten decades below its largest entry (smaller ones grey: rounding-level
    entries), the exact zeros blank, the blocks of z outlined and labelled."""
    import matplotlib

    mag = np.abs(M)
    nz = mag > 0
    img = np.full(M.shape, np.nan)
    img[nz] = np.log10(mag[nz])
    hi = float(np.nanmax(img)) if nz.any() else 0.0
    cmap = matplotlib.colormaps["viridis"].with_extremes(under="0.8")
    im = ax.imshow(img, cmap=cmap, vmin=hi - 10.0, vmax=hi, interpolation="nearest", aspect="equal")
    ax.set_facecolor("white")
    fig.colorbar(im, ax=ax, shrink=0.7, extend="min",
                 label="log10 |entry| (grey: 10 decades below the largest; blank: exactly 0)")
    for names, line in ((row_names, ax.axhline), (col_names, ax.axvline)):
        for start, _, _ in block_edges(names)[1:]:
            line(start - 0.5, color="0.3", lw=0.8)
    fs = max(3.0, min(8.0, 300.0 / max(M.shape)))
    ax.set_yticks(range(M.shape[0]), row_names, fontsize=fs)
    ax.set_xticks(range(M.shape[1]), col_names, fontsize=fs, rotation=90)
    ax.set_title(f"{title}: {M.shape[0]} x {M.shape[1]}, {int(nz.sum())} nonzero", fontsize=10)


def unstable(ev: np.ndarray, discrete: bool) -> np.ndarray:
    """Which eigenvalues are unstable: Re > tol (continuous) or |ev| > 1 + tol (discrete), with
    tol = 1e-6 max(1, max |ev|): the repeated zero eigenvalues of a floating base or of contact
    constraints (Jordan blocks) come out of a numerical eigensolver spread by far more than the
    rounding error, and are counted as the marginal eigenvalues they are."""
    tol = 1e-6 * max(1.0, float(np.max(np.abs(ev)))) if ev.size else 0.0
    return np.abs(ev) > 1.0 + tol if discrete else ev.real > tol


def _eigenvalues(ax, A, discrete, dt):
    ev = np.linalg.eigvals(A)
    if discrete:
        th = np.linspace(0, 2 * np.pi, 400)
        ax.plot(np.cos(th), np.sin(th), color="0.6", lw=0.8, label="unit circle")
        what = f"eigenvalues of Ad (dt = {dt:g} s)"
    else:
        ax.axvline(0.0, color="0.6", lw=0.8)
        what = "eigenvalues of A"
    bad = unstable(ev, discrete)
    ax.axhline(0.0, color="0.85", lw=0.5)
    ax.scatter(ev.real[~bad], ev.imag[~bad], s=18, marker="x", color="tab:blue",
               label=f"{int((~bad).sum())} stable or marginal")
    ax.scatter(ev.real[bad], ev.imag[bad], s=22, marker="x", color="tab:red",
               label=f"{int(bad.sum())} unstable")
    centre = 1.0 if discrete else 0.0
    tol = 1e-6 * max(1.0, float(np.max(np.abs(ev))))
    at = int(np.sum(np.abs(ev - centre) < np.sqrt(tol)))     # a Jordan block's spread ~ sqrt
    if at:
        ax.annotate(f"{at} within {np.sqrt(tol):.0e} of {centre:g}", (centre, 0.0), fontsize=8,
                    xytext=(6, 6), textcoords="offset points")
    ax.set_aspect("equal", adjustable="datalim")           # the complex plane, not two stretched axes
    ax.set_xlabel("Re")
    ax.set_ylabel("Im")
    ax.set_title(what, fontsize=10)
    ax.legend(fontsize=7, loc="best")
    ax.grid(True, lw=0.3)
    return ev


def plot_linearization(A: np.ndarray, B: np.ndarray, z_names: Sequence[str], w_names: Sequence[str],
                       path: str, title: str = "", discrete: bool = False,
                       dt: float | None = None) -> np.ndarray:
    """Draw the sparsity of A and B (rows labelled with z_names, B's columns with w_names, the
    blocks of z outlined) and the eigenvalues of A in the complex plane into one figure, saved to
    ``path`` (.png, .svg or .pdf; SVG text stays text). Returns the eigenvalues of A.
    discrete: A, B are Ad, Bd of a step dt (the eigenvalues then against the unit circle)."""
    A, B = np.asarray(A, dtype=float), np.asarray(B, dtype=float)
    n = A.shape[0]
    if A.shape != (n, n) or B.shape[0] != n or len(z_names) != n or len(w_names) != B.shape[1]:
        raise ValueError(f"plot_linearization: A {A.shape}, B {B.shape}, {len(z_names)} z names and "
                         f"{len(w_names)} w names do not fit together")
    Figure = require_matplotlib()
    import matplotlib

    side = 4.0 + 0.16 * n
    fig = Figure(figsize=(2 * side + 0.16 * B.shape[1] + 2.0, side + 1.0), layout="constrained")
    grid = fig.add_gridspec(1, 3, width_ratios=[n, max(B.shape[1], 1), 0.9 * n])
    a = "Ad" if discrete else "A"
    _sparsity(fig, fig.add_subplot(grid[0]), A, list(z_names), list(z_names), a)
    _sparsity(fig, fig.add_subplot(grid[1]), B, list(z_names), list(w_names), "Bd" if discrete else "B")
    ev = _eigenvalues(fig.add_subplot(grid[2]), A, discrete, dt)
    if title:
        fig.suptitle(title, fontsize=11)
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(path, dpi=150)
    return ev
