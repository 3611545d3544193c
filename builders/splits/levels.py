"""The levels of a build: size-matched cuts, the checks every build keeps, and its verdicts.

    levels = match_levels(cuts, scores, table, strategy, "mentions")   (or take the cuts as they are)
    check_levels(levels, table, cfg)        disjoint and big enough, or refused before writing
    verdicts(full, subsets)                 does Familiarity fall low > medium > high? ...

METHOD.md section 4 ("Guarantees every build keeps").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations, pairwise
from typing import Any

import numpy as np

from builders.defaults import LEVELS
from builders.errors import BuildersError
from builders.shift.report import LabelTable
from builders.shift.scoring import SelectionResult
from builders.splits.config import SplitConfig, SubsetResult

#: Why a low level may sit below the full corpus (said in every verdict and card).
LOW_BELOW_FULL = (
    "Familiarity takes each benchmark label's most similar training mentions: the full corpus "
    "holds close matches for every benchmark label, a level only those of its own labels, so "
    "a small low-shift level can score below the full corpus (the paper's NuNER entropy low "
    "split has 0.806, against more than 0.88 for all of NuNER)."
)


@dataclass
class Level:
    """The labels one level keeps: whole labels (`mask`), and with size matching perhaps one
    more label of which only the first sentences (in corpus order) up to `cap` mentions."""

    level: str
    mask: np.ndarray
    selection: dict[str, Any]
    partial: tuple[int, int] | None = None  # (label index, mention cap)

    def labels(self, table: LabelTable) -> list[str]:
        """The labels kept whole."""
        return [lab for lab, keep in zip(table.labels, self.mask, strict=True) if keep]

    def kept(self, table: LabelTable) -> list[str]:
        """Every label the level keeps mentions of (the partial one too), by label text."""
        extra = [table.labels[self.partial[0]]] if self.partial else []
        return sorted([*self.labels(table), *extra])

    def selected_mask(self) -> np.ndarray:
        mask = self.mask.copy()
        if self.partial is not None:
            mask[self.partial[0]] = True
        return mask

    def n_labels(self) -> int:
        return int(self.mask.sum()) + (self.partial is not None)

    def mentions(self, table: LabelTable) -> int:
        return int(table.mentions[self.mask].sum()) + (self.partial[1] if self.partial else 0)


def from_cuts(
    cuts: Mapping[str, SelectionResult], levels: Sequence[str], profile: str
) -> list[Level]:
    """The quantile cuts as they fall."""
    return [Level(lv, cuts[lv].mask, {**cuts[lv].to_dict(), "profile": profile}) for lv in levels]


def _ranking(level: str, scores: np.ndarray, strategy: str) -> np.ndarray:
    """Label indices from the level's own end of the score ranking (ties by label text).

    Low shift starts from the labels closest to the benchmarks (max: highest score; entropy:
    lowest), high shift from the other end, medium from the median outwards."""
    index = np.arange(scores.size)
    if level == "medium":
        key = np.abs(scores - np.quantile(scores, 0.5, method="linear"))
    else:
        easy_first = -scores if strategy == "max" else scores
        key = easy_first if level == "low" else -easy_first
    return np.lexsort((index, key))


def match_levels(
    levels: list[Level], scores: np.ndarray, table: LabelTable, strategy: str, mode: str
) -> list[Level]:
    """Cut every level to the smallest level's size (`labels` or `mentions`), each drawing its
    labels in score order from its own end of the ranking, inside its own cut.

    With `mentions`, the last label drawn may be partial: its first sentences in corpus
    order, up to the mentions still missing (so the levels agree within one sentence).
    """
    if mode == "none":
        return levels
    sizes = [lv.n_labels() if mode == "labels" else lv.mentions(table) for lv in levels]
    target = min(sizes)
    out = []
    for lv in levels:
        order = [i for i in _ranking(lv.level, scores, strategy) if lv.mask[i]]
        mask = np.zeros_like(lv.mask)
        partial = None
        if mode == "labels":
            mask[order[:target]] = True
        else:
            cum = np.cumsum(table.mentions[order])
            whole = int(np.searchsorted(cum, target, side="right"))
            mask[order[:whole]] = True
            got = int(cum[whole - 1]) if whole else 0
            if got < target:
                partial = (order[whole], target - got)
        selection = {**lv.selection, "matched": mode, "matched_to": int(target)}
        out.append(Level(lv.level, mask, selection, partial))
    return out


def check_levels(levels: list[Level], table: LabelTable, cfg: SplitConfig) -> None:
    """Refuse (before anything is written) levels that share labels or are too small.

    Raises:
        BuildersError: naming each problem with its numbers and the options that would help.
    """
    problems = []
    # The paper protocol lets a label qualify for two levels; its verdicts report the overlap.
    pairs = combinations(levels, 2) if cfg.protocol != "paper" else []
    for a, b in pairs:
        shared = sorted(set(a.kept(table)) & set(b.kept(table)))
        if shared:
            shown = ", ".join(shared[:8]) + (
                f" and {len(shared) - 8} more" if len(shared) > 8 else ""
            )
            problems.append(
                f"the {a.level} and {b.level} levels share {len(shared)} labels ({shown})"
            )
    for lv in levels:
        n, m = lv.n_labels(), lv.mentions(table)
        if n < cfg.min_labels or m < cfg.min_mentions:
            problems.append(
                f"the {lv.level} level has {n:,} labels and {m:,} mentions "
                f"(at least {cfg.min_labels:,} and {cfg.min_mentions:,} wanted)"
            )
    if problems:
        raise BuildersError(
            f"{cfg.source}: {len(table.labels):,} labels cannot give disjoint "
            f"{'/'.join(lv.level for lv in levels)} levels of the size wanted: "
            + "; ".join(problems)
            + ". Nothing was written. Options that help: --low-quantile, --high-quantile and "
            "--medium-band (wider cuts), --min-labels and --min-mentions (smaller levels), "
            "--levels (fewer levels)"
        )


@dataclass
class Verdicts:
    """What a build's numbers say about its levels (every build reports these).

    Attributes:
        falls: per benchmark and `union`: each level's Familiarity, easy to hard, and whether
            it falls strictly from level to level.
        shares: per level, its share of the full corpus's labels and mentions.
        overlap: per pair of levels, how many labels they share (zero by construction).
        versus_full: per level, its union Familiarity and the full corpus's.
        failed: one sentence per check that fails (the card's Limitations).
        notes: what to keep in mind reading the numbers (e.g. a low level below the full
            corpus, which is expected of a small low level).
    """

    falls: dict[str, dict[str, Any]] = field(default_factory=dict)
    shares: dict[str, dict[str, float]] = field(default_factory=dict)
    overlap: dict[str, int] = field(default_factory=dict)
    versus_full: dict[str, dict[str, float]] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "falls": self.falls,
            "shares": self.shares,
            "overlap": self.overlap,
            "versus_full": self.versus_full,
            "failed": self.failed,
            "notes": self.notes,
        }


def verdicts(
    full: SubsetResult, subsets: list[SubsetResult], labels: Mapping[str, set[str]]
) -> Verdicts:
    """The verdicts of a build: order of Familiarity, shares, overlap, levels vs full corpus.

    Args:
        labels: level -> the labels it keeps.
    """
    v = Verdicts()
    subs = sorted(subsets, key=lambda s: LEVELS.index(s.level))
    benches = ["union", *full.familiarity.per_benchmark]
    for name in benches:
        values = {s.level: _fam(s, name) for s in subs}
        v.falls[name] = {
            "values": values,
            "falls": all(a > b for a, b in pairwise(values.values())),
        }
    if len(subs) > 1:
        v.failed += _order_failures(v.falls, [s.level for s in subs])
    for s in subs:
        v.shares[s.level] = {
            "labels": s.labels / full.labels,
            "mentions": s.mentions / full.mentions,
        }
        v.versus_full[s.level] = {
            "familiarity": s.familiarity.union_macro,
            "full": full.familiarity.union_macro,
        }
    for a, b in combinations(subs, 2):
        v.overlap[f"{a.level}/{b.level}"] = len(labels[a.level] & labels[b.level])
    for pair, n in v.overlap.items():
        if n:
            v.failed.append(f"The {pair.replace('/', ' and ')} levels share {n} labels.")
    low = next((s for s in subs if s.level == "low"), None)
    if low is not None and low.familiarity.union_macro < full.familiarity.union_macro:
        v.notes.append(
            f"The low-shift level's Familiarity ({low.familiarity.union_macro:.3f}) is below the "
            f"full corpus's ({full.familiarity.union_macro:.3f}). {LOW_BELOW_FULL}"
        )
    return v


def _order_failures(falls: dict[str, dict[str, Any]], levels: list[str]) -> list[str]:
    order = " > ".join(levels)
    out = []
    if not falls["union"]["falls"]:
        shown = ", ".join(f"{lv} {x:.3f}" for lv, x in falls["union"]["values"].items())
        out.append(
            f"Familiarity does not fall {order} over the union of the benchmarks' labels "
            f"({shown}): the levels' names promise more than their numbers show."
        )
    bad = [b for b, f in falls.items() if b != "union" and not f["falls"]]
    if bad:
        shown = "; ".join(
            f"{b} " + ", ".join(f"{x:.3f}" for x in falls[b]["values"].values()) for b in bad
        )
        out.append(
            f"Familiarity does not fall {order} on {len(bad)} of {len(falls) - 1} benchmarks: "
            f"{shown}."
        )
    return out


def _fam(sub: SubsetResult, name: str) -> float:
    rep = sub.familiarity
    return rep.union_macro if name == "union" else rep.per_benchmark[name].familiarity
