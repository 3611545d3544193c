"""The familiarity ranking: training labels ordered by what they add to Familiarity.

    ranking = familiarity_ranking(sims_dz, counts, k=1000, weighting="zipf")
    ranking.order          label indices, the most familiar-making first
    ranking.usable         mentions a level may take of each label: min(c_d, K)

METHOD.md section 8: a lazy greedy on the gain of G(S) = mean_z sum_{k<=K} w_k s_(k)(z) / W(K)
per usable mention, over the labels the corpus's Familiarity reads, then the other labels by
their `max` score. Ties go by label index (the table is sorted by label text). Each gain is
computed over runs of equal similarity, in the evaluation labels the label could still enter.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from builders.deferred import np
from builders.errors import InvalidValue
from builders.shift.familiarity import WEIGHTINGS, cumulative_weights

#: A gain below this (per label, on a [0, 1] scale) is rounding noise: the label adds nothing.
_NO_GAIN = 1e-12
#: Significant digits of a gain per mention that the ranking compares (ties: label index).
_DIGITS = 10


@dataclass(frozen=True)
class Ranking:
    """Labels from the most to the least familiar-making: `order` (label indices, those
    without mentions left out), and per label index its `usable` mentions min(c_d, K), the
    `gain` of G per mention when the greedy took it (0 in the tail) and its `best` (`max`)
    similarity; `greedy` labels at the front of `order` are the greedy's."""

    order: np.ndarray
    usable: np.ndarray
    gain: np.ndarray
    greedy: int
    best: np.ndarray

    @property
    def position(self) -> np.ndarray:
        """Per label index, its place in `order` (-1 for labels left out)."""
        pos = np.full(self.usable.size, -1, dtype=np.int64)
        pos[self.order] = np.arange(self.order.size)
        return pos


def _key(ratio: float) -> float:
    """A gain per mention to 10 significant digits: gains equal but for rounding compare
    equal, so that ties go by label index."""
    if ratio <= 0:
        return 0.0
    return round(ratio, _DIGITS - 1 - math.floor(math.log10(ratio)))


class _TopK:
    """Every evaluation label's first K positions over the labels taken so far, as runs of
    equal similarity (one run per label: its value and the positions it holds, descending),
    and the gain of G a new label would bring. Positions past the runs hold 0."""

    def __init__(self, n_eval: int, k: int, weighting: str):
        self.k = k
        self.cum = cumulative_weights(k, weighting)  # W(n), n = 0..K
        self.norm = n_eval * self.cum[k]
        self.value = np.zeros((n_eval, 8))  # runs, descending; unused runs hold 0 positions
        self.count = np.zeros((n_eval, 8), dtype=np.int64)
        self.kth = np.zeros(n_eval)  # the K-th position's value (0 until K are held)

    def _rows(self, s: np.ndarray) -> np.ndarray:
        """The evaluation labels whose first K positions `s` would enter."""
        return np.flatnonzero(s > self.kth)

    def _enter(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows `s` would enter, their runs' start positions, and its first position."""
        rows = self._rows(s)
        cnt = self.count[rows]
        start = np.cumsum(cnt, axis=1) - cnt
        p = np.where(self.value[rows] >= s[rows, None], cnt, 0).sum(axis=1)
        return rows, start, p

    def gain(self, s: np.ndarray, a: int) -> float:
        """G(S + d) - G(S) for a label with similarities `s` and `a` mentions (a <= K)."""
        rows, start, p = self._enter(s)
        if rows.size == 0:
            return 0.0
        k, cum, sr = self.k, self.cum, s[rows]
        added = sr * (cum[np.minimum(p + a, k)] - cum[p])
        stop = start + self.count[rows]
        below = self.value[rows] < sr[:, None]  # runs that move down a places
        before = cum[stop] - cum[start]
        after = cum[np.minimum(stop + a, k)] - cum[np.minimum(start + a, k)]
        moved = np.where(below, self.value[rows] * (before - after), 0.0).sum(axis=1)
        return float((added - moved).sum()) / self.norm

    def take(self, s: np.ndarray, a: int) -> None:
        """Insert the label's run into every row it enters, keeping the first K positions."""
        rows = self._rows(s)
        if rows.size == 0:
            return
        n_runs = (self.count[rows] > 0).sum(axis=1)
        if n_runs.max() + 1 > self.value.shape[1]:
            grow = self.value.shape[1]
            self.value = np.pad(self.value, ((0, 0), (0, grow)))
            self.count = np.pad(self.count, ((0, 0), (0, grow)))
        width = self.value.shape[1]
        slot = (self.value[rows] >= s[rows, None]) & (self.count[rows] > 0)
        at = slot.sum(axis=1)[:, None]  # the new run's index in each row
        j = np.arange(width)[None, :]
        src = np.maximum(j - 1, 0)
        old_v, old_c = self.value[rows], self.count[rows]
        shift_v = np.take_along_axis(old_v, np.broadcast_to(src, old_v.shape), 1)
        shift_c = np.take_along_axis(old_c, np.broadcast_to(src, old_c.shape), 1)
        value = np.where(j < at, old_v, np.where(j == at, s[rows, None], shift_v))
        count = np.where(j < at, old_c, np.where(j == at, a, shift_c))
        begin = np.cumsum(count, axis=1) - count  # keep the first K positions only
        count = np.clip(self.k - begin, 0, count)
        value = np.where(count > 0, value, 0.0)
        self.value[rows], self.count[rows] = value, count
        full = count.sum(axis=1) >= self.k
        last = np.maximum((count > 0).sum(axis=1) - 1, 0)
        self.kth[rows] = np.where(full, value[np.arange(rows.size), last], 0.0)


def contributors(sims_dz: np.ndarray, usable: np.ndarray, k: int) -> np.ndarray:
    """The labels that hold one of the first K positions of some evaluation label over the
    whole corpus (ties at the K-th value all count): the only labels Familiarity reads."""
    d, z = sims_dz.shape
    keep = np.zeros(d, dtype=bool)
    live = np.flatnonzero(usable > 0)
    if live.size == 0 or z == 0:
        return np.flatnonzero(keep)
    s = sims_dz[live].T  # (Z, D live)
    kk = min(k, live.size)
    idx = np.argpartition(-s, kk - 1, axis=1)[:, :kk] if kk < live.size else None
    for row in range(z):
        cand = idx[row] if idx is not None else np.arange(live.size)
        vals = s[row, cand]
        order = np.lexsort((cand, -vals))
        cand, vals = cand[order], vals[order]
        before = np.cumsum(usable[live[cand]]) - usable[live[cand]]
        inside = (before < k) & (vals > 0)
        if inside.any():
            kth = vals[inside].min()
            keep[live[cand[inside]]] = True
            keep[live[(s[row] == kth) & (kth > 0)]] = True
    return np.flatnonzero(keep)


def familiarity_ranking(
    sims_dz: np.ndarray, counts: np.ndarray, k: int = 1000, weighting: str = "zipf"
) -> Ranking:
    """The familiarity ranking (module docstring) of training labels with sims (D, Z) in
    [0, 1] and `counts` mentions, for Familiarity's `k` and `weighting`."""
    if weighting not in WEIGHTINGS:
        raise InvalidValue(f"unknown weighting {weighting!r}. Valid: {', '.join(WEIGHTINGS)}")
    sims = np.asarray(sims_dz)
    c = np.asarray(counts, dtype=np.int64)
    if sims.ndim != 2 or sims.shape[0] != c.size:
        raise InvalidValue(f"sims_dz must have shape (D, Z) with D = {c.size}, got {sims.shape}")
    usable = np.minimum(c, k)
    top = _TopK(sims.shape[1], k, weighting)
    live = contributors(sims, usable, k)
    s = {int(d): row for d, row in zip(live, sims[live].astype(np.float64), strict=True)}
    # Gains against the empty set: upper bounds of every later gain (G is submodular).
    first = {d: row.sum() * top.cum[usable[d]] / top.norm for d, row in s.items()}
    taken, gain = _greedy(top, s, usable, first)
    left = usable > 0
    left[np.array(taken, dtype=np.int64)] = False
    rest = np.flatnonzero(left)  # `np.setdiff1d`'s, without its two sorts
    best = sims.max(axis=1).astype(np.float64) if sims.shape[1] else np.zeros(c.size)
    rest = rest[np.lexsort((rest, -best[rest]))]
    order = np.concatenate([np.array(taken, dtype=np.int64), rest])
    return Ranking(order=order, usable=usable, gain=gain, greedy=len(taken), best=best)


def _greedy(
    top: _TopK, s: dict[int, np.ndarray], usable: np.ndarray, first: dict[int, float]
) -> tuple[list[int], np.ndarray]:
    """The lazy greedy: labels in the order taken, and each one's gain per mention.

    The heap holds (-gain per mention, label) with gains that can only have fallen since
    (submodularity); a label whose fresh gain still leads (ties: the smaller index) is taken.
    """
    heap = [(-_key(g / usable[d]), d) for d, g in first.items() if g > _NO_GAIN]
    heapq.heapify(heap)
    gain = np.zeros(usable.size)
    taken: list[int] = []
    while heap:
        _, d = heapq.heappop(heap)
        g = top.gain(s[d], int(usable[d]))
        if g <= _NO_GAIN:
            continue  # adds nothing now, and never will: it goes to the tail
        entry = (-_key(g / usable[d]), d)
        if heap and heap[0] < entry:
            heapq.heappush(heap, entry)
            continue
        top.take(s[d], int(usable[d]))
        gain[d] = g / usable[d]
        taken.append(d)
    return taken, gain
