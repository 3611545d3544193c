"""The levels of a build: size-matched cuts, the checks every build keeps, and its verdicts.

    levels = match_levels(levels, scores, table, familiar_high, "mentions")   (or as they are)
    check_levels(levels, table, cfg)        disjoint and big enough, or refused before writing
    verdicts(full, subsets)                 does Familiarity fall low > medium > high? ...

METHOD.md section 4 ("Guarantees every build keeps").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from itertools import combinations, pairwise
from typing import Any

from builders.defaults import LEVELS
from builders.deferred import np
from builders.errors import CannotBuild, opt, options_that_help
from builders.shift.report import FamiliarityReport, LabelTable
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
    """The labels one level keeps: whole (`mask`) or in part (`caps`: label index -> mentions,
    cut by keeping fewer of its sentences, never fewer mentions of the sentences kept).
    `order` and `take`, for levels cut to a size (familiarity windows, `--match mentions`):
    the labels in the order the level takes them and the mentions it takes of each, the plan
    `realised` fits to the size counted on what the level writes."""

    level: str
    mask: np.ndarray
    selection: dict[str, Any]
    caps: dict[int, int] = field(default_factory=dict)
    order: np.ndarray | None = field(default=None, repr=False)
    take: np.ndarray | None = field(default=None, repr=False)
    size: int | None = None  # the mentions it is cut to (None: `take` summed)

    @classmethod
    def taking(
        cls,
        level: str,
        order: np.ndarray,
        take: np.ndarray,
        table: LabelTable,
        selection: dict[str, Any],
    ) -> Level:
        """A level taking `take[i]` mentions of label `order[i]`: whole where that is all the
        corpus has, capped otherwise (labels taking nothing are left out)."""
        mask = np.zeros(len(table.labels), dtype=bool)
        caps = {}
        for i, n in zip(order.tolist(), take.tolist(), strict=True):
            if n >= table.mentions[i]:
                mask[i] = True
            elif n > 0:
                caps[int(i)] = int(n)
        return cls(level, mask, selection, caps, np.asarray(order), np.asarray(take))

    def realised(self, whole: list[int], caps: dict[int, int]) -> Level:
        """The level with these labels whole and these capped (a level fitted to its size on
        what it writes), its order, plan and `selection` as they are."""
        mask = np.zeros_like(self.mask)
        mask[whole] = True
        return Level(self.level, mask, self.selection, dict(caps), self.order, self.take, self.size)

    def labels(self, table: LabelTable) -> list[str]:
        """The labels kept whole."""
        return [lab for lab, keep in zip(table.labels, self.mask, strict=True) if keep]

    def capped(self, table: LabelTable) -> dict[str, int]:
        """The labels kept in part, by label text, with their mention caps."""
        return {table.labels[i]: cap for i, cap in sorted(self.caps.items())}

    def kept(self, table: LabelTable) -> list[str]:
        """Every label the level keeps mentions of (the capped ones too), by label text."""
        return sorted([*self.labels(table), *self.capped(table)])

    def selected_mask(self) -> np.ndarray:
        mask = self.mask.copy()
        mask[list(self.caps)] = True
        return mask

    def n_labels(self) -> int:
        return int(self.mask.sum()) + len(self.caps)

    def mentions(self, table: LabelTable) -> int:
        return int(table.mentions[self.mask].sum()) + sum(self.caps.values())


def bound_share(level: Level, table: LabelTable, share: float | None) -> Level:
    """The level with no label planned at more than `share` of its mentions (METHOD.md
    section 4, `--max-label-share`): a level cut to a size takes at most `share` of it of
    any label; any other caps its largest labels at the one count `x` with `x = share *
    (its mentions with labels capped at x)`. Fewer than 1 / `share` labels: left as it is."""
    if share is None:
        return level
    selection = {**level.selection, "max_label_share": share}
    if level.take is not None and level.order is not None:
        size = level.size if level.size is not None else int(level.take.sum())
        cap = max(int(share * size), 1)
        over = level.take > cap
        if not over.any() or level.order.size * share < 1:  # nothing over, or no cut meets it
            return replace(level, selection=selection)
        selection["share_capped"] = int(over.sum())
        take = np.minimum(level.take, cap)
        caps = {i: min(n, cap) for i, n in level.caps.items()}
        mask = level.mask.copy()
        for i in np.flatnonzero(mask & (table.mentions > cap)):
            mask[i], caps[int(i)] = False, cap
        return Level(level.level, mask, selection, caps, level.order, take, size)
    index = np.flatnonzero(level.selected_mask())
    counts = np.array([level.caps.get(int(i), int(table.mentions[i])) for i in index])
    water = _water_level(counts, share)
    if water is None or counts.max(initial=0) <= water:
        return replace(level, selection=selection)
    mask, caps = level.mask.copy(), dict(level.caps)
    for j, n in zip(index.tolist(), counts.tolist(), strict=True):
        if n > water:
            mask[j], caps[j] = False, water
    selection["share_capped"] = int((counts > water).sum())
    return replace(level, mask=mask, caps=caps, selection=selection)


def _water_level(counts: np.ndarray, share: float) -> int | None:
    """The largest mention cap `x` with `x <= share * sum(min(counts, x))`: labels over it
    capped at it hold at most `share` of the level each (None: fewer labels than 1/share)."""
    c = np.sort(counts)[::-1].astype(np.float64)
    rest = np.cumsum(c[::-1])[::-1]  # rest[j]: sum of c[j:]
    for j in range(c.size):  # j labels capped (all of them: no cap meets the bound)
        if j * share >= 1:
            return None
        x = share * rest[j] / (1 - j * share)
        if c[j] <= x:
            return int(x)
    return None


def from_cuts(
    cuts: Mapping[str, SelectionResult], levels: Sequence[str], profile: str
) -> list[Level]:
    """The quantile cuts as they fall."""
    return [Level(lv, cuts[lv].mask, {**cuts[lv].to_dict(), "profile": profile}) for lv in levels]


def _ranking(level: str, scores: np.ndarray, familiar_high: bool) -> np.ndarray:
    """Label indices from the level's own end of the score ranking (ties by label text): low
    from the labels closest to the benchmarks, high from the other end, medium from the median."""
    index = np.arange(scores.size)
    if level == "medium":
        key = np.abs(scores - np.quantile(scores, 0.5, method="linear"))
    else:
        easy_first = -scores if familiar_high else scores
        key = easy_first if level == "low" else -easy_first
    return np.lexsort((index, key))


def match_levels(
    levels: list[Level], scores: np.ndarray, table: LabelTable, familiar_high: bool, mode: str
) -> list[Level]:
    """Cut every level to the smallest level's size (`labels` or `mentions`), each drawing its
    labels in score order from its own end of the ranking, inside its own cut (with
    `mentions` the last label drawn may be kept in part)."""
    if mode == "none":
        return levels
    sizes = [lv.n_labels() if mode == "labels" else lv.mentions(table) for lv in levels]
    target = min(sizes)
    out = []
    for lv in levels:
        order = np.array([i for i in _ranking(lv.level, scores, familiar_high) if lv.mask[i]], int)
        selection = {**lv.selection, "matched": mode, "matched_to": int(target)}
        if mode == "labels":
            mask = np.zeros_like(lv.mask)
            mask[order[:target]] = True
            out.append(Level(lv.level, mask, selection))
            continue
        counts = table.mentions[order]
        cum = np.cumsum(counts)
        stop = int(np.searchsorted(cum, target, side="left")) + 1
        take = counts[:stop].copy()
        take[-1] -= int(cum[stop - 1]) - target
        out.append(Level.taking(lv.level, order[:stop], take, table, selection))
    return out


def check_levels(levels: list[Level], table: LabelTable, cfg: SplitConfig, remedy: str) -> None:
    """Refuse (`CannotBuild`, before anything is written) levels that share labels or are
    too small (`remedy`: the strategy's options that would help, first in the message)."""
    problems = []
    # The paper protocol lets a label qualify for two levels; its verdicts report the overlap.
    pairs = combinations(levels, 2) if cfg.metric.protocol != "paper" else []
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
                f"the {lv.level} level has {n:,} label{'' if n == 1 else 's'} and {m:,} "
                f"mention{'' if m == 1 else 's'} "
                f"(at least {cfg.min_labels:,} and {cfg.min_mentions:,} wanted)"
            )
    if problems:
        raise CannotBuild(
            f"{cfg.source}: {len(table.labels):,} labels cannot give disjoint "
            f"{'/'.join(lv.level for lv in levels)} levels of the size wanted: "
            + "; ".join(problems)
            + f". Nothing was written. {options_that_help()}: "
            + remedy
            + f"{opt('min_labels')} and {opt('min_mentions')} (smaller levels), "
            + f"{opt('levels')} (fewer levels)"
            + (
                f", {opt('max_label_share')} (a looser bound)"
                if any(lv.selection.get("share_capped") for lv in levels)
                else ""
            )
        )


@dataclass
class Verdicts:
    """What a build's numbers say about its levels (every build reports these; METHOD.md
    section 4): per benchmark and `union` whether Familiarity `falls` level to level, each
    level's `shares` of the corpus, label `overlap`, union Familiarity `versus_full`, `gaps`,
    `sizes` (with their `spread`), the same under each `check` model, one sentence per check
    `failed` (the card's Limitations) and `notes` for reading the numbers."""

    falls: dict[str, dict[str, Any]] = field(default_factory=dict)
    shares: dict[str, dict[str, float]] = field(default_factory=dict)
    overlap: dict[str, int] = field(default_factory=dict)
    versus_full: dict[str, dict[str, float]] = field(default_factory=dict)
    gaps: dict[str, float] = field(default_factory=dict)
    sizes: dict[str, Any] = field(default_factory=dict)
    check: list[dict[str, Any]] | None = None
    failed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def verdicts(
    full: SubsetResult,
    subsets: list[SubsetResult],
    labels: Mapping[str, set[str]],
    *,
    min_gap: float | None = None,
    order_remedy: str | None = None,
) -> Verdicts:
    """The verdicts of a build (`labels`: level -> the labels it keeps; `min_gap`: the gap
    the strategy promises; `order_remedy`: its pointer where the order fails)."""
    v = Verdicts()
    subs = sorted(subsets, key=lambda s: LEVELS.index(s.level))
    v.falls = _falls(full.familiarity, [(s.level, s.familiarity) for s in subs])
    if len(subs) > 1:
        v.failed += _order_failures(v.falls, [s.level for s in subs])
        if v.failed and order_remedy:  # a pointer, not a failed check
            v.notes.append(order_remedy)
    v.failed += _gaps_and_sizes(v, subs, min_gap)
    v.failed += _targets_missed(subs)
    for s in subs:
        v.shares[s.level] = {
            "labels": s.labels / full.labels,
            "mentions": s.mentions / full.mentions,
        }
        v.versus_full[s.level] = {
            "familiarity": s.familiarity.union_macro,
            "full": full.familiarity.union_macro,
        }
    v.failed += _shares_over(subs)
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


def _shares_over(subs: list[SubsetResult]) -> list[str]:
    """Levels whose largest label holds more of their written mentions than the bound
    (`--max-label-share`) they were planned under."""
    out = []
    for s in subs:
        bound = s.selection.get("max_label_share")
        largest = (s.composition or {}).get("largest_label")
        if bound is None or not largest or largest["share"] <= bound:
            continue
        why = (
            f"it has {s.labels} labels"
            if s.labels * bound < 1
            else "its mentions in the sentences kept for the level's other labels are kept"
        )
        out.append(
            f"The {s.level} level's largest label, {largest['label']}, holds "
            f"{largest['share']:.1%} of its mentions, more than --max-label-share {bound:g} "
            f"({why})."
        )
    return out


#: How far apart in mentions the levels of a `familiarity` build may be (METHOD.md section 8).
SIZE_SPREAD = 0.01


def _gaps_and_sizes(v: Verdicts, subs: list[SubsetResult], min_gap: float | None) -> list[str]:
    """Fill the gaps and sizes of `v`; with `min_gap` (a `familiarity` build) also say which
    gap is short and whether the sizes differ by more than `SIZE_SPREAD`."""
    failed = []
    for a, b in pairwise(subs):
        gap = a.familiarity.union_macro - b.familiarity.union_macro
        v.gaps[f"{a.level}/{b.level}"] = gap
        if min_gap is not None and gap < min_gap:
            failed.append(
                f"The {a.level} and {b.level} levels are {gap:.3f} apart, less than the "
                f"{min_gap:g} asked."
            )
    sizes = [s.mentions for s in subs]
    largest = max(sizes, default=0)
    spread = (largest - min(sizes)) / largest if largest else 0.0
    v.sizes = {"mentions": {s.level: s.mentions for s in subs}, "spread": spread}
    if min_gap is not None and spread > SIZE_SPREAD:
        failed.append(f"The levels' sizes differ by {spread:.1%}, more than {SIZE_SPREAD:.0%}.")
    return failed


def _targets_missed(subs: list[SubsetResult]) -> list[str]:
    """The levels whose Familiarity, measured on the rows they keep, misses its target."""
    out = []
    for s in subs:
        target, tolerance = s.selection.get("target"), s.selection.get("tolerance")
        if target is None or tolerance is None:
            continue
        if abs(s.familiarity.union_macro - target) > tolerance:
            out.append(
                f"The {s.level} level's Familiarity ({s.familiarity.union_macro:.3f}) misses "
                f"its target {target:g} by more than {tolerance:g}."
            )
    return out


def check_verdicts(
    v: Verdicts,
    full: SubsetResult,
    subsets: list[SubsetResult],
    *,
    min_gap: float | None = None,
) -> None:
    """Add each check model's figures to `v`: does the order hold under it too, and (with
    `min_gap`, a `familiarity` build) are consecutive levels that far apart under it?"""
    subs = sorted(subsets, key=lambda s: LEVELS.index(s.level))
    if len(full.checks) == 0 or any(len(s.checks) != len(full.checks) for s in subs):
        return
    v.check = []
    for i, rep in enumerate(full.checks):
        falls = _falls(rep, [(s.level, s.checks[i]) for s in subs])
        model = rep.model
        holds = bool(falls["union"]["falls"] and v.falls["union"]["falls"])
        values = list(falls["union"]["values"].items())
        gaps = {f"{a}/{b}": x - y for (a, x), (b, y) in pairwise(values)}
        v.check.append({"model": model, "falls": falls, "gaps": gaps, "holds": holds})
        if len(subs) > 1 and not falls["union"]["falls"]:
            shown = ", ".join(f"{lv} {x:.3f}" for lv, x in values)
            v.failed.append(
                f"Under the check model {model}, Familiarity does not fall "
                f"{' > '.join(s.level for s in subs)} over the union ({shown}): the order holds "
                "for the build's model only."
            )
        for pair, gap in gaps.items():
            if min_gap is not None and gap < min_gap:
                v.failed.append(
                    f"Under the check model {model}, the {pair.replace('/', ' and ')} levels "
                    f"are {gap:.3f} apart, less than the {min_gap:g} asked."
                )


def _falls(
    full: FamiliarityReport, reports: Sequence[tuple[str, FamiliarityReport]]
) -> dict[str, dict[str, Any]]:
    """Per benchmark and `union`: each level's Familiarity and whether it falls strictly."""
    out = {}
    for name in ["union", *full.per_benchmark]:
        values = {lv: _value(rep, name) for lv, rep in reports}
        out[name] = {
            "values": values,
            "falls": all(a > b for a, b in pairwise(values.values())),
        }
    return out


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


def _value(rep: FamiliarityReport, name: str) -> float:
    return rep.union_macro if name == "union" else rep.per_benchmark[name].familiarity
