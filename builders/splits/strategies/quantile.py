"""The paper's strategies, `entropy` and `max` (METHOD.md sections 2-4): every training label
scored against the benchmark labels (softmax entropy at T, or max similarity), the scores cut
at the paper's quantiles for the corpus's profile, each cut a level; `--match` cuts every level
to one size in score order. They promise no order: a build whose order fails points to the
`familiarity` strategy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from builders.defaults import DEFAULT_PROTOCOL, MATCH_MODES, SCORE_SYMBOLS
from builders.deferred import np
from builders.errors import ConflictingOptions, InvalidValue, opt
from builders.hub.plots import histogram_png
from builders.labels import union_labels
from builders.shift.scoring import (
    SelectionResult,
    SelectionRule,
    default_rule,
    entropy_scores,
    max_scores,
    paper_scores,
    profile_for,
    select,
    select_pooled,
)
from builders.sources import source_profiles
from builders.splits.config import BuildResult, SplitConfig, as_tuple
from builders.splits.fitting import equal_sizes, fit
from builders.splits.levels import bound_share, check_levels, from_cuts, match_levels
from builders.splits.strategies.base import Group, Options, Placed, Strategy

#: Named sources whose quantile profile is fixed by the paper, whatever their label count.
SOURCE_PROFILES = source_profiles()  # the registry says which corpus uses which profile

#: Said when a build's levels do not fall in order (the quantile strategies promise no order).
ORDER_REMEDY = (
    "`--strategy familiarity` places levels of equal size by their Familiarity, so that it "
    "falls from level to level by construction (METHOD.md section 8)."
)


@dataclass(frozen=True)
class QuantileOptions(Options):
    """The cuts (None: the profile's, METHOD.md section 3), the profile (None: the source's or
    the one its label count gives) and `match` (cut every level to one size)."""

    low_quantile: float | None = None
    high_quantile: float | None = None
    medium_band: tuple[float, float] | None = None
    profile: str | None = None
    match: str = "none"

    def __post_init__(self) -> None:
        object.__setattr__(self, "medium_band", as_tuple("medium_band", self.medium_band))
        if self.match not in MATCH_MODES:
            raise InvalidValue(f"unknown match {self.match!r}. Valid: {', '.join(MATCH_MODES)}")


class Quantile(Strategy):
    """A paper strategy: one score per label (per label and benchmark under the paper
    protocol), cut at quantiles."""

    Options = QuantileOptions
    claims: ClassVar[Mapping[str, Any]] = {"protocol": DEFAULT_PROTOCOL}
    purpose = "of the quantile strategies (entropy, max)"
    order_remedy = ORDER_REMEDY

    def __init__(self, name: str, symbol: str, familiar_high: bool):
        self.name = name
        self.symbol = symbol  # the score's name on the plot's axis
        self.familiar_high = familiar_high  # the labels closest to the benchmarks score high

    def size_remedy(self) -> str:
        return (
            f"{opt('low_quantile')}, {opt('high_quantile')} and {opt('medium_band')} (wider cuts), "
        )

    def place(self, g: Group) -> Placed:
        """The profile, every label's score, the cuts and the levels, fitted."""
        store, cfg, table = g.store, g.cfg, g.table
        rule = selection_rule(cfg, len(table.labels))
        protocol = f"{cfg.strategy}, {cfg.metric.protocol} protocol"
        g.stage(f"scoring ({protocol}) against {g.m.shape[1]} labels")
        scores, cuts = self._score_and_cut(g, rule)
        levels = from_cuts(cuts, cfg.levels, rule.profile)
        levels = match_levels(levels, scores, table, self.familiar_high, cfg.options.match)
        levels = [bound_share(lv, table, cfg.label_share_bound) for lv in levels]
        check_levels(levels, table, cfg, self.size_remedy())
        g.stage("choosing each level's sentences")
        fitted = equal_sizes(store, cfg, table, [fit(store, cfg, table, lv) for lv in levels])
        return Placed(rule.profile, scores, dict(cuts), fitted)

    def _score_and_cut(
        self, g: Group, rule: SelectionRule
    ) -> tuple[np.ndarray, dict[str, SelectionResult]]:
        """Our protocol: one score per label against the union, cut at its quantiles. The
        paper's: one score per (label, benchmark), cut at the pooled quantiles, a label kept
        if it qualifies for any benchmark (scores of shape (D, B))."""
        cfg = g.cfg
        if cfg.metric.protocol != "paper":
            t = cfg.metric.temperature
            scores = max_scores(g.m) if self.familiar_high else entropy_scores(g.m, t)
            return scores, select(scores, cfg.strategy, rule)
        evals = union_labels(g.benchmarks)
        cols = [np.array([evals.index(z) for z in labels]) for labels in g.benchmarks.values()]
        rows = paper_scores(g.m, cols, cfg.strategy, cfg.metric.temperature)
        return rows, select_pooled(rows, cfg.strategy, rule)

    def check(self, cfg: SplitConfig) -> None:
        if cfg.metric.protocol == "paper" and cfg.options.match != "none":
            raise ConflictingOptions(
                f"{opt('match')} needs one score per label; the paper protocol scores every "
                f"(label, benchmark) pair: use {opt('protocol', 'ours')} with {opt('match')}"
            )
        if cfg.options.match != "none" and cfg.label_share_bound is not None:
            raise ConflictingOptions(
                f"{opt('max_label_share', f'{cfg.max_label_share:g}')} with "
                f"{opt('match', cfg.options.match)}: {opt('match')} cuts "
                "every level to the smallest one's size in score order, and the bound would "
                "shrink the levels it caps again below it; use one of the two"
            )

    def selection_text(self, sel: dict[str, Any]) -> str:
        return f"{sel['side']} q{sel['quantiles']} = " + ", ".join(
            f"{t:.4g}" for t in sel["thresholds"]
        )

    def plot(self, res: BuildResult, level: str, title: str) -> bytes:
        return histogram_png(
            res.scores.ravel(),
            {lv: list(c.thresholds) for lv, c in res.cuts.items()},
            self.symbol,
            level=level,
            title=title,
            sides={lv: c.side for lv, c in res.cuts.items()},
        )


def selection_rule(cfg: SplitConfig, n_labels: int) -> SelectionRule:
    """The paper's quantiles for the source's profile, with the config's overrides."""
    o = cfg.options
    profile = o.profile or SOURCE_PROFILES.get(cfg.source) or profile_for(n_labels)
    return default_rule(profile, cfg.strategy).with_overrides(
        o.low_quantile, o.high_quantile, o.medium_band
    )


ENTROPY = Quantile("entropy", " ".join(SCORE_SYMBOLS["entropy"]), familiar_high=False)
MAX = Quantile("max", " ".join(SCORE_SYMBOLS["max"]), familiar_high=True)
