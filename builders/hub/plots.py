"""A subset config's picture (`scores.png`): the score histogram with every level's cut
marked (entropy, max), or the dial of the `familiarity` strategy (the Familiarity of windows
along its ranking, with the levels' windows).

    histogram_png(scores, {"low": [t], "medium": [t0, t1], "high": [t]}, "entropy e")
    dial_png(curve, {"low": (first, last, familiarity), ...})

The PNG bytes depend only on the inputs: an Agg canvas of fixed size and dpi, matplotlib's
default style whatever the user's rc file says, fixed margins, and no `Software` metadata.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from builders.deferred import np

_COLOURS = {"low": "#1a9850", "medium": "#fdae61", "high": "#d73027"}


@contextmanager
def figure(width: float, height: float, out: list[bytes]) -> Iterator[Any]:
    """A matplotlib Figure drawn as the module docstring says; its PNG bytes are appended to
    `out` when the block ends."""
    import matplotlib.style
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.style.context("default"):
        fig = Figure(figsize=(width, height), dpi=100)
        FigureCanvasAgg(fig)
        yield fig
        buf = io.BytesIO()
        fig.savefig(buf, format="png", metadata={"Software": None})
    out.append(buf.getvalue())


def histogram_png(
    scores: Sequence[float] | np.ndarray,
    thresholds: Mapping[str, Sequence[float]],
    symbol: str,
    *,
    level: str | None = None,
    title: str | None = None,
    sides: Mapping[str, str] | None = None,
) -> bytes:
    """PNG bytes of the score histogram with every level's threshold(s) as vertical lines, and
    the region `level` keeps shaded (`sides`: level -> "ge", "le" or "between"); `symbol`
    names the score on the axis ("entropy e", "max similarity m")."""
    s = np.asarray(scores, dtype=np.float64)
    png: list[bytes] = []
    with figure(7.0, 3.9, png) as fig:
        ax = fig.add_subplot(1, 1, 1)
        ax.hist(s, bins=50, color="#7f8c9b", edgecolor="white", linewidth=0.4, log=True)
        lo, hi = (float(s.min()), float(s.max())) if s.size else (0.0, 1.0)
        if level is not None and sides and level in sides and level in thresholds:
            own = [float(x) for x in thresholds[level]]
            span = {"ge": (own[0], hi), "le": (lo, own[0])}.get(sides[level], (own[0], own[-1]))
            ax.axvspan(*span, color=_COLOURS.get(level, "black"), alpha=0.12, linewidth=0)
        for lv, ts in thresholds.items():
            this = level is None or lv == level
            cut = " to ".join(f"{float(t):.3g}" for t in ts)
            for i, t in enumerate(ts):
                ax.axvline(
                    float(t),
                    color=_COLOURS.get(lv, "black"),
                    linestyle="-" if this else "--",
                    linewidth=2.0 if this else 1.2,
                    label=f"{lv} shift cut ({cut})" if i == 0 else None,
                )
        ax.set_xlabel(f"label score ({symbol})")
        ax.set_ylabel("training labels (log)")
        ax.set_title(
            title or f"{symbol.split()[0]} scores of {s.size:,} training labels", fontsize=10
        )
        if thresholds:
            ax.legend(fontsize=8, loc="upper right", frameon=False)
        fig.subplots_adjust(left=0.1, right=0.98, bottom=0.13, top=0.86)  # fixed: fast
    return png[0]


def score_plot_title(
    source: str, strategy: str, n_scores: int, benchmarks: Sequence[str], model: str, level: str
) -> str:
    """The histogram's title: what was scored, against what, with which model."""
    against = ", ".join(benchmarks) if len(benchmarks) <= 3 else f"{len(benchmarks)} benchmarks"
    return (
        f"{source}: {n_scores:,} {strategy} scores vs {against}\n"
        f"({model}; shaded: the {level} label-shift level)"
    )


def dial_png(
    curve: Sequence[tuple[int, float]],
    windows: Mapping[str, tuple[int, int, float]],
    *,
    level: str | None = None,
    title: str | None = None,
    targets: Mapping[str, float | None] | None = None,
    written: Mapping[str, float] | None = None,
) -> bytes:
    """PNG bytes of the `familiarity` strategy's dial: `curve` (window start in mentions, its
    Familiarity), every level's window (first mention, mention after the last, Familiarity)
    shaded, `level`'s drawn solid, its `targets` marked; the legend gives the `written`
    levels' Familiarity (whole sentences, not quite the window's)."""
    points = sorted(curve)
    png: list[bytes] = []
    with figure(7.0, 3.9, png) as fig:
        ax = fig.add_subplot(1, 1, 1)
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(
                xs,
                ys,
                color="#7f8c9b",
                linewidth=1.0,
                marker=".",
                markersize=3,
                label="a window starting here",
            )
        for lv, window in windows.items():
            mine = (targets or {}).get(lv), (written or {}).get(lv)
            _draw_window(ax, lv, window, level in (None, lv), *mine)
        ax.set_xlabel("window start in the familiarity ranking (mentions)")
        ax.set_ylabel("Familiarity (union macro)")
        ax.set_title(title or "Familiarity along the ranking", fontsize=10)
        ax.legend(fontsize=8, loc="upper right", frameon=False)
        fig.subplots_adjust(left=0.1, right=0.98, bottom=0.13, top=0.86)
    return png[0]


def _draw_window(
    ax: Any,
    level: str,
    window: tuple[int, int, float],
    this: bool,
    target: float | None,
    written: float | None,
) -> None:
    """One level's window on the dial: shaded, its Familiarity a line across it, its target a
    cross at its start; the window's beside the written Familiarity where they differ."""
    start, stop, value = window
    shown = f"{value:.3f}"
    if written is not None and f"{written:.3f}" != shown:
        shown = f"{written:.3f}, planned {shown}"
    colour = _COLOURS.get(level, "black")
    ax.axvspan(start, stop, color=colour, alpha=0.18 if this else 0.07, linewidth=0)
    ax.hlines(
        value,
        start,
        stop,
        color=colour,
        linewidth=2.0 if this else 1.2,
        linestyle="-" if this else "--",
        label=f"{level} shift ({shown})",
    )
    if target is not None:
        ax.plot([start], [target], marker="x", color=colour, markersize=7)
