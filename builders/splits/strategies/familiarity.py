"""The `familiarity` strategy (METHOD.md section 8): the training labels ranked by what they
add to Familiarity, then levels of one size placed as windows of that ranking so that their
Familiarity falls from low to high by at least --min-gap (or meets --targets) under the build's
model and every check model, measured again on the rows the levels write.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from builders.defaults import LEVELS, MIN_GAP, TARGET_TOLERANCE
from builders.deferred import np
from builders.errors import (
    CannotBuild,
    InvalidValue,
    opt,
    options_that_help,
)
from builders.hub.plots import dial_png
from builders.shift.coverage import Ranking, familiarity_ranking
from builders.shift.embedder import canonical_name
from builders.shift.report import LabelTable
from builders.splits.config import BuildResult, SplitConfig, as_tuple
from builders.splits.dial import Dial, Placement, Unreachable, choose, union_macro
from builders.splits.fitting import equal_sizes, fit, table_counts
from builders.splits.levels import Level, bound_share, check_levels
from builders.splits.strategies.base import (
    Group,
    Options,
    Placed,
    Strategy,
    check_level_mentions,
    named,
)
from builders.store.subsets import Selection


@dataclass(frozen=True)
class FamiliarityOptions(Options):
    """The Familiarity asked of each level (in `levels` order), the mentions of every level
    (None: the largest size that gives the levels asked for) and the smallest gap between
    consecutive levels."""

    targets: tuple[float, ...] | None = None
    level_mentions: int | None = None
    min_gap: float = MIN_GAP

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", as_tuple("targets", self.targets, float))


class Familiarity(Strategy):
    """Levels placed by their Familiarity: equal in size, ordered by construction."""

    name = "familiarity"
    Options = FamiliarityOptions
    purpose = "of the familiarity strategy (levels placed by Familiarity)"
    always_named = ("min_gap", "max_label_share")
    label_share = 0.3  # the shared corpora's levels hold 13-26% of one label (METHOD.md s. 4)

    def foreign(self, owner: Strategy, given: list[str]) -> str:
        return (
            f"{opt('strategy', 'familiarity')} places levels of equal size by their Familiarity "
            f"(METHOD.md section 8); {named(given)} {owner.purpose}: leave them out, or "
            f"choose one of those strategies"
        )

    def check(self, cfg: SplitConfig) -> None:
        if not 0 <= cfg.options.min_gap < 1:
            raise InvalidValue(f"{opt('min_gap')} must be in [0, 1), got {cfg.options.min_gap}")
        check_level_mentions(cfg)
        if cfg.options.targets is not None:
            _check_targets(cfg, cfg.options.targets)

    def size_remedy(self) -> str:
        return f"{opt('level_mentions')} (another size), "

    def place(self, g: Group) -> Placed:
        """The levels placed, fitted and measured on what they write; placed again where a
        gap or target is missed there, refused where no placement keeps them (METHOD.md
        section 8, "On what is written"; README: "or refuses with each model's gaps")."""
        store, cfg, table, m, stage, checks = g.store, g.cfg, g.table, g.m, g.stage, g.checks
        sims = [np.ascontiguousarray(m.T), *(np.ascontiguousarray(c.T) for c in checks.values())]
        order = _familiarity_levels(cfg, table, m)
        stage(f"ranking {len(table.labels):,} labels by what they add to Familiarity")
        # once: every size tried places windows over this one ranking
        ranking = familiarity_ranking(m, table.mentions, cfg.metric.k, cfg.metric.weighting)
        gap, size = cfg.options.min_gap, cfg.options.level_mentions
        rounds: list[tuple[float, float, int, Placed]] = []  # (shortfall, gap, planned size, ...)
        for _ in range(PLACE_TRIES):
            if len(rounds) >= PLACE_ROUNDS or size == 0:
                break
            try:
                found = _by_familiarity(cfg, table, ranking, order, sims, stage, checks, gap, size)
                scores, cuts, levels, extra = found
                check_levels(levels, table, cfg, self.size_remedy())
            except CannotBuild:
                if not rounds:
                    raise
                if cfg.options.level_mentions is not None:
                    break  # the size is given and a wider gap does not place: keep the best
                size = _smaller(cfg, size)  # this size does not place: a step smaller
                continue
            stage("choosing each level's sentences")
            fitted = equal_sizes(store, cfg, table, [fit(store, cfg, table, lv) for lv in levels])
            short = _gap_shortfall(cfg, table, sims, fitted)
            planned = int(levels[0].size or 0)
            rounds.append((short, gap, planned, Placed("familiarity", scores, cuts, fitted, extra)))
            if short <= 0:
                break
            if cfg.options.level_mentions is not None:
                if cfg.options.targets is not None:
                    break  # a given size and targets: no wider gap meets them
                gap += short + 0.002  # the same size, windows further apart
            size = _smaller(cfg, planned)
            stage(f"the written levels miss {_promise(cfg)} by {short:.3f}: placing again")
        kept = min(range(len(rounds)), key=lambda i: rounds[i][0])  # the first of the best
        if rounds[kept][0] > 0:
            raise _missed(cfg, table, sims, checks, rounds, kept)
        _note_rounds(cfg, rounds, kept)
        return rounds[kept][3]

    def promised_gap(self, cfg: SplitConfig) -> float | None:
        return cfg.options.min_gap

    def size_text(self, res: BuildResult) -> str:
        """The levels' size as the rows hold it: one size is planned, and the last sentence
        of a label kept in part may pass it by a few mentions."""
        planned = res.subsets[0].selection["level_mentions"]
        low, high = min(s.mentions for s in res.subsets), max(s.mentions for s in res.subsets)
        if low == high == planned:
            return f"levels of {planned:,} mentions"
        written = f"{low:,}" if low == high else f"{low:,}-{high:,}"
        return f"levels of {written} mentions, {planned:,} planned"

    def selection_text(self, sel: dict[str, Any]) -> str:
        first, last = sel["mentions"]
        target = f", target {sel['target']:g}" if sel.get("target") is not None else ""
        n = sel["capped_labels"]
        return (
            f"ranking mentions {first:,}-{last:,} ({sel['level_mentions']:,} a level, "
            f"{n:,} label{'' if n == 1 else 's'} capped at {sel['label_cap']:,}){target}"
        )

    def plot(self, res: BuildResult, level: str, title: str) -> bytes:
        windows = {lv: (p.offset, p.offset + p.size, p.familiarity) for lv, p in res.cuts.items()}
        targets = {lv: p.target for lv, p in res.cuts.items()}
        written = {s.level: s.familiarity.union_macro for s in res.subsets}
        return dial_png(
            res.curve, windows, level=level, title=title, targets=targets, written=written
        )


def _check_targets(cfg: SplitConfig, targets: tuple[float, ...]) -> None:
    """One Familiarity per level, in the levels' order, falling by the gap."""
    order = [lv for lv in LEVELS if lv in cfg.levels]
    if list(cfg.levels) != order:
        raise InvalidValue(
            f"{opt('levels', ','.join(cfg.levels))} with {opt('targets')}: name the levels in "
            f"the order {','.join(order)}"
        )
    if len(targets) != len(cfg.levels):
        raise InvalidValue(
            f"{opt('targets')} gives {len(targets)} values for {len(cfg.levels)} levels "
            f"({','.join(cfg.levels)}): give one Familiarity per level, in that order"
        )
    if not all(0 <= t <= 1 for t in targets):
        raise InvalidValue(f"{opt('targets')} must lie in [0, 1], got {_shown(targets)}")
    for (a, ta), (b, tb) in pairwise(zip(cfg.levels, targets, strict=True)):
        if ta - tb < cfg.options.min_gap:
            raise InvalidValue(
                f"{opt('targets', _shown(targets))}: {a} ({ta:g}) must be at least "
                f"{opt('min_gap', f'{cfg.options.min_gap:g}')} above {b} ({tb:g})"
            )


def _shown(values: tuple[float, ...]) -> str:
    return ",".join(f"{v:g}" for v in values)


#: Levels whose written rows miss a gap or target are placed again (METHOD.md section 8): at
#: most this many placements written in all...
PLACE_ROUNDS = 8
#: ...and at most this many placements tried (those that do not place count too).
PLACE_TRIES = 24
#: ...each size this share of the one before (sizes that do not place are stepped past).
RETRY_STEP = 0.95


def _promise(cfg: SplitConfig) -> str:
    """What the written levels must keep: the gap, and with --targets the targets too."""
    gap = opt("min_gap", f"{cfg.options.min_gap:g}")
    if cfg.options.targets is None:
        return gap
    return f"{opt('targets', _shown(cfg.options.targets))} (within {TARGET_TOLERANCE:g}) or {gap}"


def _missed(
    cfg: SplitConfig,
    table: LabelTable,
    sims: list[np.ndarray],
    checks: Mapping[str, np.ndarray],
    rounds: list[tuple[float, float, int, Placed]],
    kept: int,
) -> CannotBuild:
    """The refusal where no placement's written levels keep the promise: the best one's
    Familiarity and gaps under every model, and the settings that help."""
    fitted = rounds[kept][3].fitted
    models = [canonical_name(cfg.embedding.model), *checks]
    figures = []
    for model, union in zip(models, _written_unions(cfg, table, sims, fitted), strict=True):
        levels = ", ".join(f"{lv.level} {f:.3f}" for (lv, _), f in zip(fitted, union, strict=True))
        gaps = ", ".join(f"{a - b:.3f}" for a, b in pairwise(union))
        figures.append(f"{model}: {levels}" + (f" (gaps {gaps})" if gaps else ""))
    written = fitted[0][1].mentions
    n = len(rounds)
    tried = "the one placement tried" if n == 1 else f"each of the {n} placements tried"
    return CannotBuild(
        f"{cfg.source}: the levels written miss {_promise(cfg)} in {tried}; the "
        f"closest, levels of {written:,} mentions ({rounds[kept][2]:,} planned), gives "
        f"{'; '.join(figures)}. Nothing was written. {_remedy()}"
    )


def _smaller(cfg: SplitConfig, size: int | None) -> int:
    """The next size a re-placement tries: `RETRY_STEP` of `size`, or 0 (stop) at a size
    given by --level-mentions (kept) or below the least a level may have."""
    if cfg.options.level_mentions is not None:
        return cfg.options.level_mentions
    smaller = int((size or 0) * RETRY_STEP)
    return smaller if smaller >= max(cfg.min_mentions, cfg.metric.k) else 0


def _note_rounds(
    cfg: SplitConfig, rounds: list[tuple[float, float, int, Placed]], kept: int
) -> None:
    """Records on the kept levels the gap they were placed with (where widened) and the
    plans tried and not kept (each plan's size, gap and shortfall on its written levels)."""
    others = [
        {"planned": planned, "min_gap": round(gap, 6), "shortfall": round(short, 6)}
        for i, (short, gap, planned, _) in enumerate(rounds)
        if i != kept
    ]
    gap = rounds[kept][1]
    for lv, _ in rounds[kept][3].fitted:
        if gap != cfg.options.min_gap:
            lv.selection = {**lv.selection, "placed_with_gap": round(gap, 6)}
        if others:
            lv.selection["plans_not_kept"] = others
            if cfg.options.level_mentions is None and kept > 0:
                lv.selection["size"] = "stepped"


def _gap_shortfall(
    cfg: SplitConfig,
    table: LabelTable,
    sims: list[np.ndarray],
    fitted: list[tuple[Level, Selection]],
) -> float:
    """By how much the written levels miss what they promise (0 or less: nothing): their
    smallest gap (union macro, any model) short of --min-gap, or with --targets a level's
    Familiarity (the build's model) further from its target than the tolerance."""
    unions = _written_unions(cfg, table, sims, fitted)
    gaps = [a - b for union in unions for a, b in pairwise(union)]
    worst = max((cfg.options.min_gap - g for g in gaps), default=-1.0)
    for f, target in zip(unions[0], cfg.options.targets or (), strict=False):
        worst = max(worst, abs(f - target) - TARGET_TOLERANCE)
    return worst


def _written_unions(
    cfg: SplitConfig,
    table: LabelTable,
    sims: list[np.ndarray],
    fitted: list[tuple[Level, Selection]],
) -> list[list[float]]:
    """Each model's (the build's first) union macro of each written level, as the dial
    computes a window's."""
    written = []
    for _, chosen in fitted:
        counts = table_counts(table, chosen)
        cols = np.flatnonzero(counts)  # labels by text: ties by label text, as everywhere
        written.append((cols, counts[cols]))
    k, weighting = cfg.metric.k, cfg.metric.weighting
    return [
        [union_macro(np.maximum(s[:, c], 0), n, k, weighting) for c, n in written] for s in sims
    ]


def _by_familiarity(
    cfg: SplitConfig,
    table: LabelTable,
    ranking: Ranking,
    order: list[str],
    sims: list[np.ndarray],
    stage: Callable[[str], None],
    checks: dict[str, np.ndarray],
    min_gap: float,
    size: int | None,
) -> tuple[np.ndarray, dict[str, Any], list[Level], dict[str, Any]]:
    """The levels' windows over the ranking, the gaps kept under every model (`sims`: the
    (Z, D) similarities, the build's model's first). Returns the per-label gains (the
    scores), each level's window, the levels, and the BuildResult fields it adds (the
    ranking's columns and the Familiarity along it)."""
    targets = cfg.options.targets
    asked = "" if targets is None else " at Familiarity " + ", ".join(f"{t:g}" for t in targets)
    stage(f"placing {'/'.join(order)} levels{asked}")
    models = [canonical_name(cfg.embedding.model), *checks]
    try:
        dial, placed = choose(
            ranking,
            sims,
            order,
            targets=targets,
            min_gap=min_gap,
            tolerance=TARGET_TOLERANCE,
            size=size,
            smallest=cfg.min_mentions,
            k=cfg.metric.k,
            weighting=cfg.metric.weighting,
            min_labels=cfg.min_labels,
            models=models,
        )
    except Unreachable as e:
        raise e.reworded(f"{cfg.source}: {e}. Nothing was written. {_remedy()}") from None
    why = " (the largest that gives them)"
    if cfg.options.level_mentions:
        why = " (--level-mentions)"
    elif size is not None:
        why = " (smaller: a larger size's written levels fell short)"
    stage(f"levels of {dial.size:,} mentions each{why}")
    after = [p.start for p in placed[1:]] + [len(ranking.order)]
    levels = [
        _level(p, table, dial, cfg, ranking, until) for p, until in zip(placed, after, strict=True)
    ]
    columns = {"rank": ranking.position, "gain": ranking.gain, "max": ranking.best}
    curve = [(int(dial.cum[s]), f) for s, f in sorted(dial.evaluated().items())]
    return ranking.gain, {p.level: p for p in placed}, levels, {"ranking": columns, "curve": curve}


def _familiarity_levels(cfg: SplitConfig, table: LabelTable, m: np.ndarray) -> list[str]:
    """The levels asked for, easy to hard (windows are placed in that order), once the corpus
    is known to have labels enough and there are evaluation labels to place them by."""
    order = [lv for lv in LEVELS if lv in cfg.levels]
    need = len(order) * cfg.min_labels
    if len(table.labels) < need:
        raise CannotBuild(
            f"{cfg.source}: {len(table.labels):,} labels cannot give {len(order)} disjoint "
            f"levels of at least {cfg.min_labels} labels each ({need} labels needed; "
            f"{opt('min_labels')} sets the least, {opt('levels')} fewer levels). Nothing was "
            "written."
        )
    if m.shape[1] == 0:
        raise CannotBuild(f"{cfg.source}: the benchmarks have no labels to place levels by")
    return order


def _remedy() -> str:
    """The settings that help where no placement keeps the gaps."""
    return (
        f"{options_that_help()}: {opt('targets')} (other values), {opt('level_mentions')} "
        f"(another size), {opt('min_gap')} (a smaller gap), {opt('levels')} (fewer levels), "
        f"or {opt('strategy', 'entropy|max')}"
    )


#: How far past its window a level may reach for labels to fill its size on what it writes
#: (its window's last labels may hold more mentions than the room they were planned for), as
#: a share of its size; never into another level's window.
SPARE = 0.5


def _level(
    placed: Placement,
    table: LabelTable,
    dial: Dial,
    cfg: SplitConfig,
    ranking: Ranking,
    until: int,
) -> Level:
    """A window as a level: labels taken whole, and the others capped at what it takes; its
    order goes on past the window (up to `until`, the next window's start, and `SPARE` of its
    size) with labels not in any window, which `fit` takes only where the window's own
    labels leave room."""
    selection = {
        **placed.to_dict(),
        "level_mentions": dial.size,
        "size": "given" if cfg.options.level_mentions else "largest",
        "label_cap": cfg.metric.k,
        "capped_labels": int((placed.take < table.mentions[placed.labels]).sum()),
        "min_gap": cfg.options.min_gap,
        "tolerance": TARGET_TOLERANCE if cfg.options.targets is not None else None,
    }
    if placed.checks:
        selection["planned_check_familiarity"] = dict(
            zip(dial.models[1:], placed.checks, strict=True)
        )
    spare = ranking.order[placed.stop : until]
    usable = ranking.usable[spare]
    spare = spare[: int(np.searchsorted(np.cumsum(usable), SPARE * dial.size)) + 1]
    level = Level.taking(placed.level, placed.labels, placed.take, table, selection)
    level.order = np.concatenate([placed.labels, spare])
    level.take = np.concatenate([placed.take, ranking.usable[spare]])
    level.size = dial.size
    return bound_share(level, table, cfg.label_share_bound)


FAMILIARITY = Familiarity()
