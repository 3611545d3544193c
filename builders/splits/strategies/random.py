"""The `random` strategy (METHOD.md section 8, the paper's random label shift): a control whose
levels are disjoint seeded random draws of whole labels, of one size (by default the size a
`familiarity` build of the same corpus writes), and whose Familiarity is whatever it comes out:
not ordered by shift.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from builders.defaults import SCORE_SYMBOLS
from builders.deferred import np
from builders.errors import ConflictingOptions, opt
from builders.hub.plots import histogram_png
from builders.shift.scoring import max_scores
from builders.splits.config import BuildResult, SplitConfig
from builders.splits.fitting import fit
from builders.splits.levels import Level, check_levels
from builders.splits.strategies import strategy
from builders.splits.strategies.base import Group, Options, Placed, Strategy, check_level_mentions


@dataclass
class Draw:
    """A level's draw: the permutation's seed, the size asked and why, what it took."""

    level: str
    seed: int
    level_mentions: int
    size: str  # "familiarity": a familiarity build's written size; "given": --level-mentions
    labels: int
    mentions: int

    def to_dict(self) -> dict[str, Any]:
        return {"draw": "random", **self.__dict__}


@dataclass(frozen=True)
class RandomOptions(Options):
    """The mentions of every level (None: the size a `familiarity` build writes)."""

    level_mentions: int | None = None


class Random(Strategy):
    """Levels of seeded random labels: the control with no order by shift."""

    name = "random"
    Options = RandomOptions
    purpose = "of the random strategy (levels of labels drawn at random)"
    order_remedy = (
        "The random strategy's levels are a control: their labels are drawn at random, so "
        "their Familiarity is not ordered by construction (METHOD.md section 8)."
    )

    def check(self, cfg: SplitConfig) -> None:
        if cfg.max_label_share is not None:
            raise ConflictingOptions(
                f"{opt('max_label_share')} caps labels, and {opt('strategy', 'random')} keeps "
                "every label of a level whole: leave it out"
            )
        check_level_mentions(cfg)

    def size_remedy(self) -> str:
        return f"{opt('level_mentions')} (a larger size), "

    def place(self, g: Group) -> Placed:
        """Labels in a seeded permutation, dealt whole to each level in turn while they fit
        its room, so the levels differ in size by less than one label."""
        cfg, table, stage = g.cfg, g.table, g.stage
        size, rule = cfg.options.level_mentions, "given"
        if size is None:
            stage("the size a familiarity build of the corpus writes")
            twin = replace(cfg, strategy="familiarity", options=None)
            fam = strategy("familiarity").place(replace(g, cfg=twin))
            size, rule = min(chosen.mentions for _, chosen in fam.fitted), "familiarity"
        stage(f"drawing {len(cfg.levels)} levels of {size:,} mentions (seed {cfg.metric.seed})")
        free = np.ones(len(table.labels), dtype=bool)
        counts = table.mentions.tolist()
        order = np.random.default_rng(cfg.metric.seed).permutation(len(counts)).tolist()
        levels, cuts = [], {}
        for lv in cfg.levels:
            room, mask = size, np.zeros(len(table.labels), dtype=bool)
            for i in order:
                if free[i] and counts[i] <= room:
                    mask[i], free[i], room = True, False, room - counts[i]
                    if room == 0:
                        break
            draw = Draw(lv, cfg.metric.seed, size, rule, int(mask.sum()), size - room)
            levels.append(Level(lv, mask, draw.to_dict()))
            cuts[lv] = draw
        check_levels(levels, table, cfg, self.size_remedy())
        stage("choosing each level's sentences")
        fitted = [fit(g.store, cfg, table, lv) for lv in levels]
        return Placed("random", max_scores(g.m), cuts, fitted)

    def size_text(self, res: BuildResult) -> str:
        low, high = min(s.mentions for s in res.subsets), max(s.mentions for s in res.subsets)
        return f"random levels of {low:,}{f'-{high:,}' if high > low else ''} mentions"

    def selection_text(self, sel: dict[str, Any]) -> str:
        return (
            f"{sel['labels']:,} labels drawn at random (seed {sel['seed']}), "
            f"{sel['mentions']:,} of {sel['level_mentions']:,} mentions ({sel['size']} size)"
        )

    def plot(self, res: BuildResult, level: str, title: str) -> bytes:
        return histogram_png(res.scores, {}, " ".join(SCORE_SYMBOLS["max"]), title=title)


RANDOM = Random()
