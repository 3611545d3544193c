"""What a split build is asked for (`SplitConfig`) and what it gives (`BuildResult`).

These types sit below the code that uses them: `pipeline` fills them, `subsets` writes them,
the scenarios and the command line read them.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from builders import __version__
from builders.defaults import (
    DEFAULT_STRATEGY,
    LEVELS,
    MIN_LEVEL_LABELS,
    MIN_LEVEL_MENTIONS,
    NGRAM,
)
from builders.deferred import np, pa
from builders.errors import ConflictingOptions, InvalidValue, opt
from builders.labels import union_labels
from builders.shift.models import canonical_name
from builders.shift.report import FamiliarityReport, LabelTable
from builders.shift.specs import EmbeddingSpec, MetricSpec, flat, split_flat
from builders.splits.strategies import NAMES, every, strategy

#: Parameters a recorded command always names.
_ALWAYS = ("strategy", "model", "k", "temperature", "weighting", "seed", "protocol")
#: The parameters in their flat spelling (the specs' fields among the others), in the order
#: build.json's `config`, `--json` and a recorded command have always had; a field added to a
#: spec comes after them.
FLAT_ORDER = (
    "source", "strategy", "levels", "benchmarks", "model", "k", "temperature", "weighting",
    "low_quantile", "high_quantile", "medium_band", "profile", "per_benchmark", "keep_misc",
    "seed", "min_labels", "min_mentions", "match", "protocol", "label_map", "leakage",
    "decontaminate", "ngram", "backend", "precision", "targets", "min_gap", "level_mentions",
    "check_model", "max_label_share",
)  # fmt: skip


@dataclass(frozen=True)
class SplitConfig:
    """Everything that determines a build; written into every output and card.

    How labels are embedded (`embedding`), how Familiarity and the scores are read (`metric`)
    and the strategy's own options (`options`: its `Strategy.Options`, None for its defaults)
    are one spec each; `from_dict` takes them in their flat spelling (`model`, `k`,
    `min_gap`, ...), as a scenarios file and build.json have them, and `to_dict` gives that
    spelling (every strategy's options, another's at their defaults). Sequences may be given as
    lists (as a scenarios file has them); they are kept as tuples.
    """

    source: str
    strategy: str = DEFAULT_STRATEGY
    levels: tuple[str, ...] = LEVELS
    benchmarks: tuple[str, ...] = ()
    embedding: EmbeddingSpec = EmbeddingSpec()
    metric: MetricSpec = MetricSpec()
    per_benchmark: bool = False
    keep_misc: bool = False
    min_labels: int = MIN_LEVEL_LABELS
    min_mentions: int = MIN_LEVEL_MENTIONS
    label_map: str | None = None
    leakage: bool = True
    decontaminate: bool = False
    ngram: int = NGRAM
    #: Other embedding models whose Familiarity of the same levels is reported beside; the
    #: `familiarity` strategy keeps its gaps under each (a single name is taken as one).
    check_model: tuple[str, ...] = ()
    #: The most of a level's mentions one label may hold (None: the strategy's default,
    #: `label_share_bound`; 1: no bound). The default given by value is kept as None, so that
    #: a build asked for it by name (as a recorded command asks) records what a default one does.
    max_label_share: float | None = None
    options: Any = None

    def __post_init__(self) -> None:
        for name in ("levels", "benchmarks"):
            object.__setattr__(self, name, as_tuple(name, getattr(self, name)))
        if self.benchmarks in (("all",), ()):
            object.__setattr__(self, "benchmarks", ())
        object.__setattr__(self, "check_model", _models(self.check_model))
        if self.strategy not in NAMES:
            raise InvalidValue(f"unknown strategy {self.strategy!r}. Valid: {', '.join(NAMES)}")
        own = strategy(self.strategy)
        if self.options is None:
            object.__setattr__(self, "options", own.Options())
        elif not isinstance(self.options, own.Options):
            raise InvalidValue(
                f"{type(self.options).__name__} given for strategy {self.strategy!r}, which "
                f"takes {own.Options.__name__}"
            )
        bad = [lv for lv in self.levels if lv not in LEVELS]
        if bad or not self.levels:
            raise InvalidValue(
                f"unknown level {bad[0] if bad else ''!r}. Valid: {', '.join(LEVELS)}"
            )
        if self.min_labels < 1 or self.min_mentions < 1:
            raise InvalidValue(
                f"{opt('min_labels')} and {opt('min_mentions')} must be >= 1, got {self.min_labels} and "
                f"{self.min_mentions}"
            )
        if self.ngram < 1:
            raise InvalidValue(f"{opt('ngram')} must be >= 1, got {self.ngram}")
        if self.max_label_share is not None and not 0 < self.max_label_share <= 1:
            raise InvalidValue(
                f"{opt('max_label_share')} must be in (0, 1], got {self.max_label_share}"
            )
        if self.max_label_share is not None and _bound(self.max_label_share) == _bound(
            own.label_share
        ):  # the default spelt out: recorded as left at it, so both build the same bytes
            object.__setattr__(self, "max_label_share", None)
        self._check_models()
        # another strategy's options cannot be in `options` (checked above): only what a
        # strategy claims of the specs (`protocol`) can be set against this one
        own.refuse_foreign({**self.embedding.to_dict(), **self.metric.to_dict()}, every())
        own.check(self)

    def _check_models(self) -> None:
        """Check models other than the build's own and each other (as the cache names them)."""
        seen = {canonical_name(self.embedding.model): f"the build's own {opt('model')}"}
        for name in self.check_model:
            if canonical_name(name) in seen:
                raise InvalidValue(
                    f"{opt('check_model', name)} is {seen[canonical_name(name)]}: name another one"
                )
            seen[canonical_name(name)] = "named twice"

    @property
    def label_share_bound(self) -> float | None:
        """The share of a level's mentions one label may hold at most (None: unbounded):
        `max_label_share`, else the strategy's default (`Strategy.label_share`)."""
        share = self.max_label_share
        return _bound(strategy(self.strategy).label_share if share is None else share)

    def always_named(self) -> tuple[str, ...]:
        """The parameters a recorded command names even at their defaults."""
        return (*_ALWAYS, *strategy(self.strategy).always_named)

    def command_line(self) -> str:
        """The `build-splits` command that asks for this config: the method's parameters
        always (a later default cannot change what it rebuilds), every other parameter that is
        not at its default, each spelt as the option of the same name."""
        args = ["build-splits", "--source", self.source]
        defaults = SplitConfig.defaults()
        for name, value in self.to_dict().items():
            if name == "max_label_share" and value is None:  # as it applies: a default too
                value = self.label_share_bound
                if value is None:
                    continue
            if name == "source" or (value == defaults[name] and name not in self.always_named()):
                continue
            option = "--" + name.replace("_", "-")
            if isinstance(value, bool):
                args.append(option if value else "--no-" + name.replace("_", "-"))
            elif name in ("levels", "benchmarks", "targets"):
                args += [option, ",".join(str(v) for v in value)]
            elif name == "check_model":  # repeated, one model each
                args += [x for v in value for x in (option, v)]
            elif isinstance(value, tuple):
                args += [option, *(str(v) for v in value)]
            else:
                args += [option, str(value)]
        return shlex.join(args)

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Every parameter but the source with its default, in the flat spelling (what a
        scenario may set)."""
        given = {f.name: f.default for f in fields(cls) if f.name not in ("source", "options")}
        return flat({**given, **_option_defaults()}, FLAT_ORDER)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> SplitConfig:
        """A config from its parameters by name: flat (`model`, `k`, `min_gap`, ... as
        `to_dict`, a scenarios file and build.json spell them) or with the specs whole
        (`embedding`, `metric`, `options`). Another strategy's options are dropped at their
        defaults (build.json spells them all) and refused at any other value."""
        out = split_flat(values, ("embedding", "metric"))
        given = {k: out.pop(k) for k in _option_defaults() if k in out}
        name = out.get("strategy", DEFAULT_STRATEGY)
        if given and "options" in out:
            raise ConflictingOptions(
                f"options= and {', '.join(sorted(given))}= both given: set them in the options"
            )
        if name in NAMES and "options" not in out:  # an unknown name is refused by the config
            own = strategy(name)
            own.refuse_foreign(given, every())
            mine = {f.name for f in fields(own.Options)}
            out["options"] = own.Options(**{k: v for k, v in given.items() if k in mine})
        return cls(**out)

    def to_dict(self) -> dict[str, Any]:
        """Every parameter, flat and in `FLAT_ORDER` (build.json's `config`)."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "options"}
        return flat({**values, **_option_defaults(), **self.options.to_dict()}, FLAT_ORDER)


def _bound(share: float | None) -> float | None:
    """A label share as it bounds a level (None and 1 alike: no bound)."""
    return None if share is None or share >= 1 else share


@cache
def _option_defaults() -> Mapping[str, Any]:
    """Every strategy's options at their defaults, flat (a key two strategies own is one);
    read-only, as it is computed once."""
    return MappingProxyType({k: v for s in every() for k, v in s.Options().to_dict().items()})


def as_tuple(name: str, value: Any, cast: Any = None) -> Any:
    """A sequence setting as a tuple (None kept): a list as a scenarios file has it, or a
    comma-separated string as the command line has it; each value through `cast`."""
    if isinstance(value, str):
        value = [x.strip() for x in value.split(",") if x.strip()]
    if value is None or cast is None:
        return value if value is None else tuple(value)
    return tuple(_cast(cast, name, v) for v in value)


def _cast(cast: Any, name: str, value: Any) -> Any:
    try:
        return cast(value)
    except (TypeError, ValueError):
        raise InvalidValue(f"{opt(name)}: {value!r} is not a number") from None


def _models(value: Any) -> tuple[str, ...]:
    """Check models as a tuple: None or "" (no model), a name (as older build.json files and
    scenarios have it), or a list of names."""
    if not value:
        return ()
    return (value,) if isinstance(value, str) else tuple(str(v) for v in value)


@dataclass
class SubsetResult:
    """One subset (or the full corpus, level `full`): its counts and its Familiarity."""

    name: str
    level: str
    strategy: str
    selection: dict[str, Any]
    sentences: int
    mentions: int
    labels: int
    familiarity: FamiliarityReport
    path: str | None = None
    rows: pa.Table | None = field(default=None, repr=False)
    #: Where the rows are when `rows` is None: a build that writes its folders writes each
    #: level's rows as they come (then they are its folder's parquet file).
    rows_file: Path | None = field(default=None, repr=False)
    label_counts: dict[str, int] = field(default_factory=dict, repr=False)
    #: The same set's Familiarity under each of the build's `check_model`s, in order.
    checks: list[FamiliarityReport] = field(default_factory=list)
    #: A level's `sentences_shared`, `effective_labels` and `largest_label`, from what it
    #: wrote (`builders.splits.composition`); None for the full corpus.
    composition: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "name": self.name,
            "level": self.level,
            "strategy": self.strategy,
            "selection": self.selection,
            "sentences": self.sentences,
            "mentions": self.mentions,
            "labels": self.labels,
            "familiarity": self.familiarity.to_dict(),
            **(self.composition or {}),
        }
        if self.checks:
            out["check_familiarity"] = [c.to_dict() for c in self.checks]
        return out


@dataclass
class BuildResult:
    """One group's build: every level's subset and the full corpus, before or after writing."""

    config: SplitConfig
    profile: str
    benchmarks: dict[str, tuple[str, ...]]
    full: SubsetResult
    subsets: list[SubsetResult]
    table: LabelTable = field(repr=False)
    scores: np.ndarray = field(repr=False)
    #: Per level, what chose it: a quantile cut (`SelectionResult`) or, for the
    #: `familiarity` strategy, a window of the ranking (`splits.dial.Placement`).
    cuts: dict[str, Any] = field(repr=False)
    levels: list[Any] = field(default_factory=list, repr=False)  # splits.levels.Level
    verdicts: Any = None  # splits.levels.Verdicts
    embedded_new: int = 0
    #: `builders.splits.leakage.leakage_record`: {full, levels, decontaminated}, or None.
    leakage: dict[str, Any] | None = None
    #: `builders.splits.provenance.provenance`: source as read, model, toolkit, recipe.
    provenance: dict[str, Any] | None = None
    #: Every benchmark the build was asked for, resolved (`all` spelt out).
    all_benchmarks: tuple[str, ...] = ()
    #: `familiarity` strategy: the ranking's per-label columns (rank, gain, max) for
    #: scores.parquet, and the Familiarity of windows along it ([mention offset, value]).
    ranking: dict[str, np.ndarray] | None = field(default=None, repr=False)
    curve: list[tuple[int, float]] = field(default_factory=list, repr=False)
    #: Seconds each phase of the build took (`similarities`, `placement`, `rows`, `measure`,
    #: then `write` and `total`: `splits.pipeline.build`); never written to a file or `--json`
    #: (a build's bytes do not depend on the machine), logged at DEBUG for
    #: scripts/bench_splits.py.
    timings: dict[str, float] = field(default_factory=dict, repr=False, compare=False)

    def config_dict(self) -> dict[str, Any]:
        """The config as asked, with its benchmarks resolved to their names."""
        names = list(self.all_benchmarks or self.benchmarks)
        return {**self.config.to_dict(), "benchmarks": names}

    def selected(self, level: str) -> list[str]:
        """The training labels a level keeps (whole, and a size-matched level's partial one)."""
        lv = next(x for x in self.levels if x.level == level)
        return list(lv.kept(self.table))

    @property
    def eval_labels(self) -> tuple[str, ...]:
        return union_labels(self.benchmarks)

    def leakage_of(self, level: str) -> dict[str, Any] | None:
        """build.json's `leakage` of one level: the full corpus's, the subset's, what was dropped."""
        if self.leakage is None:
            return None
        return {
            "full": self.leakage["full"],
            "subset": self.leakage["levels"][level],
            "decontaminated": self.leakage["decontaminated"],
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "toolkit_version": __version__,
            "config": self.config_dict(),
            "profile": self.profile,
            "eval_labels": list(self.eval_labels),
            "embedded_new": self.embedded_new,
            "full": self.full.to_dict(),
            "subsets": [{**s.to_dict(), "path": s.path} for s in self.subsets],
            "verdicts": self.verdicts.to_dict() if self.verdicts is not None else None,
            "leakage": self.leakage,
            "provenance": self.provenance,
        }
