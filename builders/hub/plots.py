"""The score histogram of a subset config, with every level's thresholds marked (`scores.png`).

    render_histogram(scores, {"low": [t], "medium": [t0, t1], "high": [t]}, strategy, path)

The PNG bytes depend only on the scores and thresholds: an Agg canvas of fixed size and dpi,
matplotlib's default style whatever the user's rc file says, fixed margins, and no `Software`
metadata.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np


def histogram_png(
    scores: Sequence[float] | np.ndarray,
    thresholds: Mapping[str, Sequence[float]],
    strategy: str,
    *,
    level: str | None = None,
    title: str | None = None,
    sides: Mapping[str, str] | None = None,
) -> bytes:
    """PNG bytes of the score histogram with every level's threshold(s) as vertical lines, and
    the region `level` keeps shaded (`sides`: level -> "ge", "le" or "between").

    The same input gives the same bytes: an Agg canvas of fixed size and dpi, matplotlib's
    default style whatever the user's rc file says, and no `Software` metadata.
    """
    import matplotlib.style
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    s = np.asarray(scores, dtype=np.float64)
    colours = {"low": "#1a9850", "medium": "#fdae61", "high": "#d73027"}
    symbol = "entropy e" if strategy == "entropy" else "max similarity m"
    with matplotlib.style.context("default"):
        fig = Figure(figsize=(7.0, 3.9), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        ax.hist(s, bins=50, color="#7f8c9b", edgecolor="white", linewidth=0.4, log=True)
        lo, hi = (float(s.min()), float(s.max())) if s.size else (0.0, 1.0)
        if level is not None and sides and level in sides and level in thresholds:
            own = [float(x) for x in thresholds[level]]
            span = {"ge": (own[0], hi), "le": (lo, own[0])}.get(sides[level], (own[0], own[-1]))
            ax.axvspan(*span, color=colours.get(level, "black"), alpha=0.12, linewidth=0)
        for lv, ts in thresholds.items():
            this = level is None or lv == level
            cut = " to ".join(f"{float(t):.3g}" for t in ts)
            for i, t in enumerate(ts):
                ax.axvline(
                    float(t),
                    color=colours.get(lv, "black"),
                    linestyle="-" if this else "--",
                    linewidth=2.0 if this else 1.2,
                    label=f"{lv} shift cut ({cut})" if i == 0 else None,
                )
        ax.set_xlabel(f"label score ({symbol})")
        ax.set_ylabel("training labels (log)")
        ax.set_title(title or f"{strategy} scores of {s.size:,} training labels", fontsize=10)
        if thresholds:
            ax.legend(fontsize=8, loc="upper right", frameon=False)
        fig.subplots_adjust(left=0.1, right=0.98, bottom=0.13, top=0.86)  # fixed: fast
        buf = io.BytesIO()
        fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def score_plot_title(
    source: str, strategy: str, n_scores: int, benchmarks: Sequence[str], model: str, level: str
) -> str:
    """The histogram's title: what was scored, against what, with which model."""
    against = ", ".join(benchmarks) if len(benchmarks) <= 3 else f"{len(benchmarks)} benchmarks"
    return (
        f"{source}: {n_scores:,} {strategy} scores vs {against}\n"
        f"({model}; shaded: the {level} label-shift level)"
    )


def render_histogram(
    scores: Sequence[float] | np.ndarray,
    thresholds: Mapping[str, Sequence[float]],
    strategy: str,
    path: Path,
    *,
    level: str | None = None,
    title: str | None = None,
    sides: Mapping[str, str] | None = None,
) -> Path:
    """Write `histogram_png(...)` to `path` (the subset's own level drawn solid, its region
    shaded)."""
    data = histogram_png(scores, thresholds, strategy, level=level, title=title, sides=sides)
    Path(path).write_bytes(data)
    return Path(path)
