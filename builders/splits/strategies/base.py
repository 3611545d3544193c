"""The protocol every splitting strategy follows (`Strategy`), and what placing returns.

A strategy owns, in its one module: the options only it reads (refused with any other
strategy), the levels it places (`place`: scores, cuts and the levels fitted to what they
write), the gap its levels promise, the default bound on a label's share of a level, and how
its levels are described in the printed table and drawn in `scores.png`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from builders.deferred import np
from builders.errors import ConflictingOptions, opt

if TYPE_CHECKING:
    from builders.shift.report import LabelTable
    from builders.splits.config import BuildResult, SplitConfig
    from builders.splits.levels import Level
    from builders.store import Store
    from builders.store.subsets import Selection


@dataclass
class Placed:
    """A strategy's levels for one benchmark group: the profile it names, every label's
    score, each level's cut (or window), the levels with the sentences each keeps, and the
    `BuildResult` fields it adds (e.g. the familiarity ranking and curve)."""

    profile: str
    scores: np.ndarray
    cuts: dict[str, Any]
    fitted: list[tuple[Level, Selection]]
    extra: dict[str, Any] = field(default_factory=dict)


class Strategy:
    """A way of choosing label-shift levels (`builders.splits.strategies` lists them)."""

    #: The name the `strategy` setting and a repo folder's config use.
    name: str = ""
    #: `SplitConfig` fields this strategy reads and others refuse (one two strategies read,
    #: `level_mentions`, is refused by neither): field -> default.
    options: ClassVar[Mapping[str, Any]] = {}
    #: What those options do, for the refusal of them under another strategy
    #: ("targets place levels by Familiarity: use the familiarity strategy").
    #: What its own options are for, after "is an option" / "are options": `of the quantile
    #: strategies (entropy, max)`.
    purpose: str = ""
    #: Parameters a recorded command names even at their defaults, beside the method's own.
    always_named: tuple[str, ...] = ()
    #: The default most of a level's mentions one label may hold (None: no bound).
    label_share: float | None = None
    #: A pointer printed when the levels' order fails (None: the strategy promises it).
    order_remedy: str | None = None

    def validate(self, cfg: SplitConfig, others: list[Strategy]) -> None:
        """Refuse options that belong to another strategy (`others`: every registered
        strategy), then check this one's own."""
        for other in others:  # an option two strategies own (--level-mentions) is each's
            theirs = {k: v for k, v in other.options.items() if k not in self.options}
            given = changed(cfg, theirs)
            if given:
                raise ConflictingOptions(self.foreign(other, given))
        self.check(cfg)

    def foreign(self, owner: Strategy, given: list[str]) -> str:
        """Why options of `owner` are refused here."""
        return f"{named(given)} {owner.purpose}: use {opt('strategy', owner.name)}"

    def size_remedy(self) -> str:
        """What `check_levels` suggests first when levels come out too small (the settings,
        as the surface in force names them, each with why, and a trailing `, `)."""
        return ""

    def check(self, cfg: SplitConfig) -> None:
        """This strategy's own options, checked together."""

    def place(
        self,
        store: Store,
        cfg: SplitConfig,
        table: LabelTable,
        group: dict[str, tuple[str, ...]],
        m: np.ndarray,
        stage: Callable[[str], None],
        checks: dict[str, np.ndarray],
    ) -> Placed:
        """The levels of one benchmark group (`m`: training x evaluation similarities;
        `checks`: each check model's), fitted to what they write."""
        raise NotImplementedError

    def promised_gap(self, cfg: SplitConfig) -> float | None:
        """The Familiarity gap consecutive levels promise (None: no gap is promised)."""
        return None

    def size_text(self, res: BuildResult) -> str:
        """How the levels' sizes came about, for the printed table's title."""
        return f"{res.profile} profile"

    def selection_text(self, sel: dict[str, Any]) -> str:
        """How a level was chosen, in one printed line."""
        raise NotImplementedError

    def plot(self, res: BuildResult, level: str, title: str) -> bytes:
        """The config's `scores.png`."""
        raise NotImplementedError


def changed(cfg: SplitConfig, options: Mapping[str, Any]) -> list[str]:
    """The options given a value other than their default, as the surface in force names
    them (read in the config's flat spelling: `protocol` is its metric's)."""
    given = cfg.to_dict()
    return [opt(name) for name, default in options.items() if given[name] != default]


def named(options: list[str]) -> str:
    """Options named as a sentence's subject: `--match is an option`, `--a, --b are options`."""
    return f"{', '.join(options)} {'is an option' if len(options) == 1 else 'are options'}"
