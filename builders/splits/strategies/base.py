"""The protocol every splitting strategy follows (`Strategy`), and what placing returns.

A strategy owns, in its one module: its options (`Options`, nested in `SplitConfig.options`;
another strategy's given a value are refused), the levels it places (`place`), the gap they
promise, the default bound on a label's share of a level, and how its levels are described in
the printed table and drawn in `scores.png`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from builders.deferred import np
from builders.errors import ConflictingOptions, opt

if TYPE_CHECKING:
    from builders.shift.report import LabelTable
    from builders.splits.config import BuildResult, SplitConfig
    from builders.splits.levels import Level
    from builders.store import Store
    from builders.store.subsets import Selection


@dataclass(frozen=True)
class Group:
    """What a strategy places one benchmark group's levels from: `benchmarks` (name -> its
    labels), `m` (training x evaluation similarities), `checks` (each check model's `m`) and
    `stage` (says what is being done)."""

    store: Store
    cfg: SplitConfig
    table: LabelTable
    benchmarks: dict[str, tuple[str, ...]]
    m: np.ndarray
    stage: Callable[[str], None]
    checks: dict[str, np.ndarray]


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


@dataclass(frozen=True)
class Options:
    """A strategy's own options (a strategy with none has these), in their flat spelling."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Strategy:
    """A way of choosing label-shift levels (`builders.splits.strategies` lists them)."""

    #: The name the `strategy` setting and a repo folder's config use.
    name: str = ""
    #: Its options: `SplitConfig.options` holds one, read from the flat keys of its fields.
    Options: ClassVar[type[Options]] = Options
    #: Fields of the build's specs that only this strategy may change: field -> default
    #: (`protocol` for the quantile strategies).
    claims: ClassVar[Mapping[str, Any]] = {}
    #: What its own options are for, after "is an option" / "are options": `of the quantile
    #: strategies (entropy, max)`.
    purpose: str = ""
    #: Parameters a recorded command names even at their defaults, beside the method's own.
    always_named: tuple[str, ...] = ()
    #: The default most of a level's mentions one label may hold (None: no bound).
    label_share: float | None = None
    #: A pointer printed when the levels' order fails (None: the strategy promises it).
    order_remedy: str | None = None

    def owned(self) -> dict[str, Any]:
        """Every setting this strategy alone may change, flat: field -> default."""
        return {**self.Options().to_dict(), **self.claims}

    def refuse_foreign(self, given: Mapping[str, Any], others: list[Strategy]) -> None:
        """Refuse settings (flat: `given`) of another strategy set to other than their default
        (`others`: every registered strategy; one two strategies own, `level_mentions`, is
        each's)."""
        mine = self.owned()
        for other in others:
            theirs = [
                opt(k) for k, d in other.owned().items() if k not in mine and given.get(k, d) != d
            ]
            if theirs:
                raise ConflictingOptions(self.foreign(other, theirs))

    def foreign(self, owner: Strategy, given: list[str]) -> str:
        """Why options of `owner` are refused here."""
        return f"{named(given)} {owner.purpose}: use {opt('strategy', owner.name)}"

    def size_remedy(self) -> str:
        """What `check_levels` suggests first when levels come out too small (the settings,
        as the surface in force names them, each with why, and a trailing `, `)."""
        return ""

    def check(self, cfg: SplitConfig) -> None:
        """This strategy's own options, checked together."""

    def place(self, g: Group) -> Placed:
        """The levels of one benchmark group, fitted to what they write."""
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


def check_level_mentions(cfg: SplitConfig) -> None:
    """A level size asked for (`level_mentions`) no smaller than the smallest level allowed."""
    size = cfg.options.level_mentions
    if size is not None and size < cfg.min_mentions:
        raise ConflictingOptions(
            f"{opt('level_mentions', size)} is below {opt('min_mentions', cfg.min_mentions)}"
        )


def named(options: list[str]) -> str:
    """Options named as a sentence's subject: `--match is an option`, `--a, --b are options`."""
    return f"{', '.join(options)} {'is an option' if len(options) == 1 else 'are options'}"
