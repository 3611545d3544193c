"""Levels at a chosen Familiarity: windows over the familiarity ranking (METHOD.md section 8).

    dial = Dial(ranking, sims_zd, size, k=1000, weighting="zipf")
    placed = place(dial, ("low", "medium", "high"), targets=None, min_gap=0.05)

A level of `size` mentions is a window of the ranking: the labels from a start position on,
each with its usable mentions (at most K), the last one cut to make the size exact. Windows
near the front are familiar (they hold the labels that make the benchmark familiar), windows
near the back are not. Levels are disjoint windows in order, low first; `place` picks their
starts so that each level's Familiarity (union macro) is nearest its target and consecutive
levels differ by at least `min_gap`. Without targets, low is the most familiar window, high
the least familiar one, and medium the one between them nearest the middle of the two.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from builders.errors import BuildersError
from builders.shift.coverage import Ranking
from builders.shift.familiarity import closed_form

#: Starts evaluated on the first look over the ranking, then per zoom around each start the
#: search chose (until neighbouring starts are adjacent).
GRID = 64
ZOOM = 16
#: A level within this share of the tolerance of its goal is not looked at closer.
ZOOM_UNTIL = 0.25
#: Each size the search tries is this share of the one before (from the largest that fits).
SIZE_STEP = 0.9


class Unreachable(BuildersError):
    """No placement of the levels at this size meets the targets and the gaps."""

    def __init__(self, message: str, low: float, high: float):
        super().__init__(message)
        self.low, self.high = low, high  # the Familiarity range windows of this size span


@dataclass(frozen=True)
class Placement:
    """One level's window: its labels, the mentions taken of each, its planned Familiarity."""

    level: str
    start: int
    stop: int
    offset: int  # mentions of the ranking before the window
    size: int
    labels: np.ndarray = field(repr=False)
    take: np.ndarray = field(repr=False)
    familiarity: float
    target: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The window for build.json: ranking positions, mentions, planned Familiarity."""
        return {
            "level": self.level,
            "ranking": [self.start, self.stop],
            "mentions": [self.offset, self.offset + self.size],
            "planned_familiarity": self.familiarity,
            "target": self.target,
        }


class Dial:
    """Windows of one size over a ranking, and their Familiarity (computed once each)."""

    def __init__(
        self,
        ranking: Ranking,
        sims_zd: np.ndarray,
        size: int,
        *,
        k: int,
        weighting: str,
        min_labels: int = 1,
        ranked: bool = False,
    ):
        """`sims_zd`: the (Z, D) similarities, or with `ranked` the `ranked_sims` of them
        (one matrix for every size tried)."""
        self.ranking, self.size = ranking, int(size)
        self.k, self.weighting, self.min_labels = k, weighting, min_labels
        self.sims = sims_zd if ranked else ranked_sims(sims_zd, ranking)  # windows: slices
        self.take_all = ranking.usable[ranking.order]
        self.cum = np.concatenate([[0], np.cumsum(self.take_all)])
        self.total = int(self.cum[-1])
        # the last start with `size` mentions after it
        self.last = int(np.searchsorted(self.cum, self.total - self.size, side="right")) - 1
        self._memo: dict[int, float] = {}

    def stop(self, start: int) -> int:
        """The position after the window's last label."""
        return int(np.searchsorted(self.cum, self.cum[start] + self.size, side="left"))

    def window(self, start: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(label indices, mentions taken of each, stop) of the window starting at `start`."""
        stop = self.stop(start)
        labels = self.ranking.order[start:stop]
        take = self.take_all[start:stop].copy()
        take[-1] -= int(self.cum[stop] - self.cum[start]) - self.size
        return labels, take, stop

    def familiarity(self, start: int) -> float:
        """The union macro of the window starting at `start`."""
        if start not in self._memo:
            _, take, stop = self.window(start)
            ties = np.arange(stop - start)  # equal values sum alike in any order
            f = closed_form(self.sims[:, start:stop], take, ties, self.k, self.weighting)
            self._memo[start] = float(np.sort(f).mean())
        return self._memo[start]

    def labels_at(self, start: int) -> int:
        """How many labels the window starting at `start` holds."""
        return self.stop(start) - start

    def evaluated(self) -> dict[int, float]:
        """Every start whose Familiarity was computed, with it."""
        return dict(self._memo)

    def fits(self, n: int) -> bool:
        """Whether `n` windows fit one after another."""
        return _fits(self.cum, self.size, n)

    def span(self) -> tuple[float, float]:
        """(least, most) Familiarity of the windows computed so far."""
        values = self.evaluated().values()
        return (min(values), max(values)) if values else (0.0, 0.0)

    def placement(self, level: str, start: int, target: float | None) -> Placement:
        labels, take, stop = self.window(start)
        offset = int(self.cum[start])
        fam = self.familiarity(start)
        return Placement(level, start, stop, offset, self.size, labels, take, fam, target)


def ranked_sims(sims_zd: np.ndarray, ranking: Ranking) -> np.ndarray:
    """The similarities clipped at 0 (what `familiarity` checks on every call), with the
    columns of the ranked labels in ranking order, contiguous: a window is a slice."""
    return np.ascontiguousarray(np.maximum(sims_zd[:, ranking.order], 0))


def largest_size(ranking: Ranking, n_levels: int, smallest: int) -> int:
    """The largest size at which `n_levels` windows fit one after another (0 if not even
    `smallest` does)."""
    cum = np.concatenate([[0], np.cumsum(ranking.usable[ranking.order])])
    lo, hi = smallest, int(cum[-1]) // max(n_levels, 1)
    if hi < lo or not _fits(cum, lo, n_levels):
        return 0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if _fits(cum, mid, n_levels) else (lo, mid - 1)
    return lo


def _fits(cum: np.ndarray, size: int, n: int) -> bool:
    """Whether `n` windows of `size` fit one after another (`cum`: the ranking's cumulative
    usable mentions)."""
    start = 0
    for _ in range(n):
        if cum[-1] - cum[start] < size:
            return False
        start = int(np.searchsorted(cum, cum[start] + size, side="left"))
    return True


def place(
    dial: Dial,
    levels: Sequence[str],
    targets: Sequence[float] | None,
    min_gap: float,
    tolerance: float,
) -> list[Placement]:
    """Disjoint windows for `levels` (easy to hard), nearest their targets, consecutive levels
    at least `min_gap` apart.

    Without targets, low aims at the most familiar window, high at the least familiar one,
    and medium at the middle of the two. The search looks at `GRID` starts spread over the
    ranking, then zooms in around the starts it chose.

    Raises:
        Unreachable: when no placement brings every level within `tolerance` of its target
            (with targets) with the gaps kept.
    """
    if not dial.fits(len(levels)):
        raise Unreachable(f"{len(levels)} levels of {dial.size:,} mentions do not fit", 0.0, 0.0)
    starts = _grid(dial)
    goal = _goals(dial, starts, levels, targets)
    chosen = _search(dial, starts, goal, min_gap)
    while chosen is not None:  # zoom in around the levels not yet close to their goal
        near = [
            _between(starts, c)
            for c, t in zip(chosen, goal, strict=True)
            if abs(dial.familiarity(c) - t) > tolerance * ZOOM_UNTIL
        ]
        if all(x.size == 0 for x in near):
            break
        starts = np.unique(np.concatenate([starts, *near]))
        chosen = _search(dial, starts, goal, min_gap)
    bound = tolerance if targets is not None else None
    placed = _search(dial, starts, goal, min_gap, bound)
    if placed is None:
        low, high = dial.span()
        errors = None
        if chosen is not None:
            errors = [abs(dial.familiarity(s) - t) for s, t in zip(chosen, goal, strict=True)]
        raise Unreachable(_why(levels, goal, min_gap, dial.size, low, high, errors), low, high)
    given = list(targets) if targets is not None else [None] * len(levels)
    return [dial.placement(lv, s, t) for lv, s, t in zip(levels, placed, given, strict=True)]


def _goals(
    dial: Dial, starts: np.ndarray, levels: Sequence[str], targets: Sequence[float] | None
) -> list[float]:
    """The targets, or low at the most familiar window, high at the least, medium between."""
    if targets is not None:
        return list(targets)
    values = [dial.familiarity(int(s)) for s in starts if dial.labels_at(int(s)) >= dial.min_labels]
    top, bottom = (max(values), min(values)) if values else (0.0, 0.0)
    ends = {"low": top, "high": bottom, "medium": (top + bottom) / 2}
    return [ends[lv] for lv in levels]


def _grid(dial: Dial) -> np.ndarray:
    """`GRID` starts spread evenly over the ranking's mentions, with both ends."""
    offsets = np.linspace(0, dial.cum[dial.last], GRID)
    starts = np.searchsorted(dial.cum, offsets, side="left")
    return np.unique(np.clip(np.concatenate([[0, dial.last], starts]), 0, dial.last))


def _between(starts: np.ndarray, start: int) -> np.ndarray:
    """Up to `ZOOM` starts not yet looked at between `start`'s neighbours in `starts`."""
    i = int(np.searchsorted(starts, start))
    lo = int(starts[max(i - 1, 0)])
    hi = int(starts[min(i + 1, starts.size - 1)])
    every = np.setdiff1d(np.arange(lo, hi + 1), starts)
    if every.size > ZOOM:
        every = every[np.linspace(0, every.size - 1, ZOOM).astype(int)]
    return every


def _search(
    dial: Dial,
    starts: np.ndarray,
    goal: Sequence[float],
    min_gap: float,
    bound: float | None = None,
) -> list[int] | None:
    """Starts for the levels in order (windows disjoint, gaps kept) with the smallest sum of
    distances to the goals, each distance at most `bound` when one is given; None when no
    such starts exist. Ties go to the earlier starts."""
    stops = np.array([dial.stop(s) for s in starts])
    fam = np.full(starts.size, np.nan)
    cost = np.full(starts.size, np.inf)
    back: list[np.ndarray] = []
    for lv, target in enumerate(goal):
        # only starts with room for the levels before and after them, and labels enough
        room = (dial.cum[starts] >= dial.size * lv) & (
            dial.total - dial.cum[starts] >= dial.size * (len(goal) - lv)
        )
        room &= stops - starts >= dial.min_labels
        for i in np.flatnonzero(room & np.isnan(fam)):
            fam[i] = dial.familiarity(int(starts[i]))
        err = np.where(room, np.abs(fam - target), np.inf)
        if bound is not None:
            err[err > bound] = np.inf
        if lv == 0:
            cost, prev = err, np.full(starts.size, -1)
        else:
            ok = (stops[:, None] <= starts[None, :]) & (fam[:, None] - fam[None, :] >= min_gap)
            via = np.where(ok, cost[:, None], np.inf)
            prev = via.argmin(axis=0)  # the first of equal costs: the earliest start
            cost = via.min(axis=0) + err
        back.append(prev)
    if not np.isfinite(cost).any():
        return None
    at = int(cost.argmin())
    out = [at]
    for prev in reversed(back[1:]):
        at = int(prev[at])
        out.append(at)
    return [int(starts[i]) for i in reversed(out)]


def _why(
    levels: Sequence[str],
    goal: Sequence[float],
    min_gap: float,
    size: int,
    low: float,
    high: float,
    errors: Sequence[float] | None = None,
) -> str:
    wanted = ", ".join(f"{lv} {t:.3f}" for lv, t in zip(levels, goal, strict=True))
    text = f"levels of {size:,} mentions reach Familiarity {low:.3f} to {high:.3f} on this corpus"
    if errors is not None:
        worst = max(range(len(errors)), key=lambda i: errors[i])
        return (
            f"{text}; {levels[worst]} cannot come within the tolerance of its target "
            f"(asked {wanted}; it misses by {errors[worst]:.3f})"
        )
    return f"{text}: no disjoint levels of that size at {wanted} at least {min_gap:g} apart"


def choose(
    ranking: Ranking,
    sims_zd: np.ndarray,
    levels: Sequence[str],
    *,
    targets: Sequence[float] | None,
    min_gap: float,
    tolerance: float,
    size: int | None,
    smallest: int,
    k: int,
    weighting: str,
    min_labels: int = 1,
) -> tuple[Dial, list[Placement]]:
    """The levels' windows at `size` mentions each, or (size None) at the largest size that
    gives them: every target within `tolerance` (without targets, medium within it of the
    middle of low and high), consecutive levels at least `min_gap` apart.

    Sizes are tried from the largest that fits down the `_ladder`; a size whose first,
    second and last windows already rule the levels out (Familiarity falls along the
    ranking) is passed over after three windows. Without targets, when no size puts medium
    in the middle, the largest size that keeps the gaps is used.

    Raises:
        Unreachable: naming the Familiarity range the sizes tried reach.
    """
    top = largest_size(ranking, len(levels), max(smallest, 1))
    if top == 0 or (size is not None and size > top):
        raise Unreachable(_too_big(ranking, len(levels), size, smallest, top, k), 0.0, 0.0)
    search = _Search(ranking, ranked_sims(sims_zd, ranking), levels, targets, min_gap, tolerance)
    search.dial_options = {"k": k, "weighting": weighting, "min_labels": min_labels}
    sizes = [size] if size is not None else _ladder(top, smallest)
    found = search.largest(sizes, prescreen=size is None)
    if found is None:
        raise search.refusal(sizes)
    return found


class _Search:
    """The size search of `choose`: what it tried, and why a size did not do."""

    def __init__(
        self,
        ranking: Ranking,
        ranked: np.ndarray,
        levels: Sequence[str],
        targets: Sequence[float] | None,
        min_gap: float,
        tolerance: float,
    ):
        self.ranking, self.ranked, self.levels = ranking, ranked, list(levels)
        self.targets, self.min_gap, self.tolerance = targets, min_gap, tolerance
        self.dial_options: dict[str, Any] = {}
        self.spans: list[tuple[float, float]] = []
        self.errors: list[Unreachable] = []

    def dial(self, size: int) -> Dial:
        return Dial(self.ranking, self.ranked, size, ranked=True, **self.dial_options)

    def place(self, dial: Dial, targets: Sequence[float] | None) -> list[Placement] | None:
        try:
            return place(dial, self.levels, targets, self.min_gap, self.tolerance)
        except Unreachable as e:
            self.errors.append(e)
            self.spans.append((e.low, e.high))
            return None

    def largest(self, sizes: Sequence[int], prescreen: bool) -> tuple[Dial, list[Placement]] | None:
        """The first size (largest first) that gives the levels asked for."""
        skipped: list[int] = []
        with_gaps: tuple[Dial, list[Placement]] | None = None
        for n in sizes:
            dial = self.dial(n)
            if prescreen and not _promising(dial, self.levels, self.targets, self.tolerance):
                self.spans.append(dial.span())
                skipped.append(n)
                continue
            placed = self.place(dial, self.targets)
            if placed is None:
                continue
            if self.targets is not None or _balanced(placed, self.tolerance):
                return dial, placed
            with_gaps = with_gaps or (dial, placed)
        if with_gaps is None and self.targets is None:
            # medium off the middle is still better than nothing: the sizes passed over
            for n in skipped:
                dial = self.dial(n)
                placed = self.place(dial, None)
                if placed is not None:
                    return dial, placed
        return with_gaps

    def refusal(self, sizes: Sequence[int]) -> Unreachable:
        if len(sizes) == 1 and self.errors:
            return self.errors[0]
        low, high = min(lo for lo, _ in self.spans), max(hi for _, hi in self.spans)
        span = f"{sizes[-1]:,} to {sizes[0]:,}" if len(sizes) > 1 else f"{sizes[0]:,}"
        if self.targets is None:
            wanted = f"at least {self.min_gap:g} apart"
        else:
            asked = ", ".join(
                f"{lv} {t:.3f}" for lv, t in zip(self.levels, self.targets, strict=True)
            )
            wanted = (
                f"at {asked} (each within {self.tolerance:g}, consecutive levels at least "
                f"{self.min_gap:g} apart)"
            )
        return Unreachable(
            f"no level size gives disjoint {'/'.join(self.levels)} levels {wanted}: levels of "
            f"{span} mentions reach Familiarity {low:.3f} to {high:.3f} on this corpus",
            low,
            high,
        )


def _too_big(ranking: Ranking, n: int, size: int | None, smallest: int, top: int, k: int) -> str:
    asked = f"{size:,}" if size is not None else f"at least {smallest:,}"
    return (
        f"{n} disjoint levels of {asked} mentions need more usable mentions than the corpus "
        f"has ({int(ranking.usable.sum()):,}, at most K = {k:,} of a label"
        + (f"; the largest size that fits is {top:,}" if top else "")
        + ")"
    )


def _promising(
    dial: Dial, levels: Sequence[str], targets: Sequence[float] | None, tolerance: float
) -> bool:
    """Whether the first window, the one right after it and the last leave the levels
    possible, Familiarity falling along the ranking: low no higher than the first window,
    medium no higher than the one after low, high no lower than the last."""
    front = dial.familiarity(0)
    after = dial.familiarity(min(dial.stop(0), dial.last))
    back = dial.familiarity(dial.last)
    if targets is None:
        if not {"low", "medium", "high"} <= set(levels):
            return True
        return after >= (front + back) / 2 - tolerance
    ceiling = {"low": front, "medium": after if "low" in levels else front, "high": front}
    return all(
        t <= ceiling[lv] + tolerance and (lv != "high" or t >= back - tolerance)
        for lv, t in zip(levels, targets, strict=True)
    )


def _balanced(placed: list[Placement], tolerance: float) -> bool:
    """Without targets: medium within `tolerance` of the middle of low and high."""
    by = {p.level: p.familiarity for p in placed}
    if not {"low", "medium", "high"} <= set(by):
        return True
    return abs(by["medium"] - (by["low"] + by["high"]) / 2) <= tolerance


def _ladder(top: int, smallest: int) -> list[int]:
    """Sizes from `top` down: by `SIZE_STEP` to a third of it, then by `SIZE_STEP` squared
    (a few dozen sizes at most, each once)."""
    sizes: list[int] = []
    n = float(top)
    while int(n) >= smallest:
        if not sizes or int(n) < sizes[-1]:
            sizes.append(int(n))
        n *= SIZE_STEP if n > top / 3 else SIZE_STEP**2
    return sizes
