"""Levels at a chosen Familiarity: windows over the familiarity ranking (METHOD.md section 8).

    dial = Dial(ranking, [sims_zd, check_sims_zd], size, k=1000, weighting="zipf")
    placed = place(dial, ("low", "medium", "high"), targets=None, min_gap=0.05, tolerance=0.02)

A level of `size` mentions is a window of the ranking: the labels from a start position on,
each with its usable mentions (at most K), the last one cut to make the size exact. Levels are
disjoint windows in order, low first: `place` picks their starts, `choose` finds the largest
size at which `place` succeeds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from builders.deferred import np
from builders.errors import LevelsUnreachable as Unreachable
from builders.shift.coverage import Ranking
from builders.shift.familiarity import closed_form

#: Starts evaluated on the first look over the ranking, then per zoom around each start the
#: search chose (until neighbouring starts are adjacent).
GRID = 64
ZOOM = 16
#: A level within this share of the tolerance of its goal is not looked at closer.
ZOOM_UNTIL = 0.25
#: Levels with at most this many starts open to them (`_regions`) are searched at every
#: start: placement is then exact (a window costs well under a millisecond at that scale).
FULL_SCAN = 1024
#: The size search: sizes fall by this factor from the largest that fits until one places...
SIZE_STEP = 0.85
#: ...then bisection, until the size that places is within this share of one that does not.
SIZE_PRECISION = 0.01


@dataclass(frozen=True)
class Placement:
    """One level's window: its labels, the mentions taken of each, its planned Familiarity
    (under the build's model, then under each check model in `checks`)."""

    level: str
    start: int
    stop: int
    offset: int  # mentions of the ranking before the window
    size: int
    labels: np.ndarray = field(repr=False)
    take: np.ndarray = field(repr=False)
    familiarity: float
    target: float | None = None
    checks: tuple[float, ...] = ()

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
    """Windows of one size over a ranking, and their Familiarity under every model given
    (computed once per window)."""

    def __init__(
        self,
        ranking: Ranking,
        sims_zd: np.ndarray | Sequence[np.ndarray],
        size: int,
        *,
        k: int,
        weighting: str,
        min_labels: int = 1,
        ranked: bool = False,
        models: Sequence[str] = (),
    ):
        """`sims_zd`: the (Z, D) similarities, or one such matrix per model (the build's
        first: levels are aimed by it, and every model keeps the gaps); with `ranked`, the
        `ranked_sims` of them (one matrix for every size tried). `models` names them."""
        self.ranking, self.size = ranking, int(size)
        self.k, self.weighting, self.min_labels = k, weighting, min_labels
        mats = [sims_zd] if isinstance(sims_zd, np.ndarray) else list(sims_zd)
        self.sims = mats if ranked else [ranked_sims(m, ranking) for m in mats]  # windows: slices
        self.models = list(models) or [f"model {i + 1}" for i in range(len(mats))]
        self.take_all = ranking.usable[ranking.order]
        self.cum = np.concatenate([[0], np.cumsum(self.take_all)])
        self.total = int(self.cum[-1])
        # the last start with `size` mentions after it
        self.last = int(np.searchsorted(self.cum, self.total - self.size, side="right")) - 1
        self._memo: dict[int, np.ndarray] = {}

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

    def familiarities(self, start: int) -> np.ndarray:
        """The union macro of the window starting at `start` under each model."""
        if start not in self._memo:
            _, take, stop = self.window(start)
            self._memo[start] = np.array(
                [union_macro(s[:, start:stop], take, self.k, self.weighting) for s in self.sims]
            )
        return self._memo[start]

    def familiarity(self, start: int) -> float:
        """The union macro of the window starting at `start` under the build's model."""
        return float(self.familiarities(start)[0])

    def labels_at(self, start: int) -> int:
        """How many labels the window starting at `start` holds."""
        return self.stop(start) - start

    def evaluated(self) -> dict[int, float]:
        """Every start whose Familiarity was computed, with it (the build's model)."""
        return {s: float(f[0]) for s, f in self._memo.items()}

    def placement(self, level: str, start: int, target: float | None) -> Placement:
        labels, take, stop = self.window(start)
        offset = int(self.cum[start])
        fam, *checks = (float(f) for f in self.familiarities(start))
        return Placement(
            level, start, stop, offset, self.size, labels, take, fam, target, tuple(checks)
        )


def union_macro(sims_zd: np.ndarray, counts: np.ndarray, k: int, weighting: str) -> float:
    """The union macro Familiarity of labels with these similarities (already clipped at 0)
    and mention counts, ties by column order (equal values sum alike in any order)."""
    return float(np.sort(closed_form(sims_zd, counts, np.arange(counts.size), k, weighting)).mean())


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


def _fits(cum: np.ndarray, size: int, n: int, start: int = 0) -> bool:
    """Whether `n` windows of `size` fit one after another from `start` (`cum`: the ranking's
    cumulative usable mentions)."""
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
    """Disjoint windows for `levels` (easy to hard), nearest their targets (`_goals`) under
    the build's model, consecutive levels at least `min_gap` apart under every model of the
    dial: searched over the starts of `_grid`, then zooming in around the starts chosen.

    Raises:
        Unreachable: when no placement keeps the gaps (under every model) and, with targets,
            brings every level within `tolerance` of its own.
    """
    if not _fits(dial.cum, dial.size, len(levels)):
        raise Unreachable(f"{len(levels)} levels of {dial.size:,} mentions do not fit", 0.0, 0.0)
    starts = _grid(dial, len(levels))
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
        values = dial.evaluated().values()  # the windows computed so far
        low, high = (min(values), max(values)) if values else (0.0, 0.0)
        errors = None
        if chosen is not None:
            errors = [abs(dial.familiarity(s) - t) for s, t in zip(chosen, goal, strict=True)]
        text = _why(levels, goal, min_gap, dial.size, low, high, errors)
        alone = _search(dial, starts, goal, min_gap, bound, under=1) if len(dial.sims) > 1 else None
        if alone is not None:
            text = _why_models(dial, levels, alone, min_gap)
        raise Unreachable(text, low, high, alone=alone is not None)
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


def _grid(dial: Dial, n: int) -> np.ndarray:
    """The starts the levels can take (`_regions`): every one when there are at most
    `FULL_SCAN`, else `GRID` spread evenly over them by mentions, a share per level, with each
    level's first and last start (the first are the windows packed from the front)."""
    regions = _regions(dial, n)
    merged: list[list[int]] = []
    for first, last in sorted(regions):
        if merged and first <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    if sum(last - first + 1 for first, last in merged) <= FULL_SCAN:
        return np.concatenate([np.arange(first, last + 1) for first, last in merged])
    share = max(GRID // n, 2)
    points = [
        np.searchsorted(dial.cum, np.linspace(dial.cum[first], dial.cum[last], share), "left")
        for first, last in regions
    ]
    ends = [x for region in regions for x in region]
    return np.unique(np.concatenate([ends, *points]).astype(np.int64))


def _regions(dial: Dial, n: int) -> list[tuple[int, int]]:
    """Per level (easy to hard), the first and the last start it can take: after the levels
    before it packed from the front, and with room for itself and the levels after it."""
    out, first = [], 0
    for lv in range(n):
        lo, hi = first, dial.last  # the last start with room for the n - lv windows after it
        while lo < hi:
            mid = (lo + hi + 1) // 2
            fits = _fits(dial.cum, dial.size, n - lv, mid)
            lo, hi = (mid, hi) if fits else (lo, mid - 1)
        out.append((first, lo))
        first = dial.stop(first)
    return out


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
    under: int | None = None,
) -> list[int] | None:
    """Starts for the levels in order (windows disjoint, gaps kept under the first `under`
    models, all by default) with the smallest sum of distances to the goals under the
    build's model, each distance at most `bound` when one is given; None when no such starts
    exist. Ties go to the earlier starts."""
    stops = np.array([dial.stop(s) for s in starts])
    fam = np.full((len(dial.sims), starts.size), np.nan)
    cost = np.full(starts.size, np.inf)
    back: list[np.ndarray] = []
    for lv, target in enumerate(goal):
        # only starts with room for the levels before and after them, and labels enough
        room = (dial.cum[starts] >= dial.size * lv) & (
            dial.total - dial.cum[starts] >= dial.size * (len(goal) - lv)
        )
        room &= stops - starts >= dial.min_labels
        for i in np.flatnonzero(room & np.isnan(fam[0])):
            fam[:, i] = dial.familiarities(int(starts[i]))
        err = np.where(room, np.abs(fam[0] - target), np.inf)
        if bound is not None:
            err[err > bound] = np.inf
        if lv == 0:
            cost, prev = err, np.full(starts.size, -1)
        else:
            apart = fam[:under, :, None] - fam[:under, None, :] >= min_gap
            ok = (stops[:, None] <= starts[None, :]) & apart.all(axis=0)
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


def _why_models(dial: Dial, levels: Sequence[str], starts: Sequence[int], min_gap: float) -> str:
    """Why levels the build's model alone places do not do: their gaps under each model."""
    fams = np.array([dial.familiarities(s) for s in starts]).T  # (models, levels)
    pairs = [f"{a}/{b}" for a, b in pairwise(levels)]
    gaps = "; ".join(
        f"{name} "
        + ", ".join(f"{p} {round(g, 3) + 0.0:.3f}" for p, g in zip(pairs, -np.diff(f), strict=True))
        for name, f in zip(dial.models, fams, strict=True)
    )
    return (
        f"levels of {dial.size:,} mentions placed by {dial.models[0]} alone are not "
        f"{min_gap:g} apart under every model (gaps: {gaps})"
    )


def choose(
    ranking: Ranking,
    sims_zd: np.ndarray | Sequence[np.ndarray],
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
    models: Sequence[str] = (),
) -> tuple[Dial, list[Placement]]:
    """The levels' windows at `size` mentions each, or (size None) at the largest size from
    K (or `smallest`, if larger) up at which `place` places them (`_largest`): every target
    within `tolerance`, consecutive levels at least `min_gap` apart under every model.

    Raises:
        Unreachable: naming the largest size the corpus gives, or the Familiarity range the
            sizes tried reach.
    """
    mats = [sims_zd] if isinstance(sims_zd, np.ndarray) else list(sims_zd)
    top = largest_size(ranking, len(levels), 1)
    floor = max(smallest, k) if size is None else size
    if top < floor:
        raise Unreachable(_too_big(ranking, len(levels), size, floor, top, k), 0.0, 0.0)
    ranked = [ranked_sims(m, ranking) for m in mats]
    tried: dict[int, Unreachable] = {}  # size -> why it did not place

    def at(size: int) -> tuple[Dial, list[Placement]] | None:
        """The levels placed at `size`, or None (the reason kept in `tried`)."""
        dial = Dial(
            ranking,
            ranked,
            size,
            k=k,
            weighting=weighting,
            min_labels=min_labels,
            ranked=True,
            models=models,
        )
        try:
            return dial, place(dial, levels, targets, min_gap, tolerance)
        except Unreachable as e:
            tried[size] = e
            return None

    found = at(size) if size is not None else _largest(at, top, floor)
    if found is None:
        raise _refusal(tried, levels, targets, min_gap, tolerance, several=len(ranked) > 1)
    return found


def _largest(
    at: Callable[[int], tuple[Dial, list[Placement]] | None], top: int, floor: int
) -> tuple[Dial, list[Placement]] | None:
    """The largest size in [floor, top] found to place the levels (`at`): `top`, else sizes
    falling by `SIZE_STEP` until one places, then bisection between it and the last that did
    not, until they are within `SIZE_PRECISION` of each other."""
    size, found, failed = top, at(top), None
    while found is None and size > floor:
        failed, size = size, max(floor, int(size * SIZE_STEP))
        found = at(size)
    while found is not None and failed is not None:
        if failed - size <= max(1, failed * SIZE_PRECISION):
            break
        mid = (size + failed) // 2
        got = at(mid)
        size, found, failed = (mid, got, failed) if got else (size, found, mid)
    return found


def _refusal(
    tried: dict[int, Unreachable],
    levels: Sequence[str],
    targets: Sequence[float] | None,
    min_gap: float,
    tolerance: float,
    several: bool,
) -> Unreachable:
    """Why no size tried placed the levels (`tried`: size -> its reason; `several`: more
    than one model)."""
    if len(tried) == 1:
        return next(iter(tried.values()))
    low = min(e.low for e in tried.values())
    high = max(e.high for e in tried.values())
    sizes = f"{min(tried):,} to {max(tried):,}"
    if targets is None:
        wanted = f"at least {min_gap:g} apart"
    else:
        asked = ", ".join(f"{lv} {t:.3f}" for lv, t in zip(levels, targets, strict=True))
        wanted = (
            f"at {asked} (each within {tolerance:g}, consecutive levels at least {min_gap:g} apart)"
        )
    detail = ""
    if several:  # each model's gaps, at the largest size one model places
        wanted += " under every model"
        alone = [n for n, e in tried.items() if e.alone]
        if alone:
            detail = f" ({tried[max(alone)]})"
    return Unreachable(
        f"no level size gives disjoint {'/'.join(levels)} levels {wanted}: levels of "
        f"{sizes} mentions reach Familiarity {low:.3f} to {high:.3f} on this corpus{detail}",
        low,
        high,
    )


def _too_big(ranking: Ranking, n: int, size: int | None, floor: int, top: int, k: int) -> str:
    asked = f"{size:,}" if size is not None else f"at least {floor:,}"
    if size is None and floor == k:
        asked += " (K)"
    return (
        f"{n} disjoint levels of {asked} mentions need more usable mentions than the corpus "
        f"has ({int(ranking.usable.sum()):,}, at most K = {k:,} of a label"
        + (f"; the largest size that fits is {top:,}" if top else "")
        + ")"
    )
