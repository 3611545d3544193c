"""What a split build is asked for (`SplitConfig`) and what it gives (`BuildResult`).

These types sit below the code that uses them: `pipeline` fills them, `subsets` writes them,
the scenarios and the command line read them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
import pyarrow as pa

from builders import __version__
from builders.defaults import (
    DEFAULT_BACKEND,
    DEFAULT_MODEL,
    DEFAULT_PRECISION,
    DEFAULT_STRATEGY,
    LEVELS,
    SEED,
    STRATEGIES,
    TEMPERATURE,
    WEIGHTING,
    WEIGHTINGS,
    K,
)
from builders.errors import BuildersError
from builders.labels import union_labels
from builders.shift.report import FamiliarityReport, LabelTable
from builders.shift.runtime import check_choice
from builders.shift.scoring import SelectionResult


@dataclass(frozen=True)
class SplitConfig:
    """Everything that determines a build; written into every output and card.

    Sequences may be given as lists (as a scenarios file has them); they are kept as tuples.
    """

    source: str
    strategy: str = DEFAULT_STRATEGY
    levels: tuple[str, ...] = LEVELS
    benchmarks: tuple[str, ...] = ()
    model: str = DEFAULT_MODEL
    k: int = K
    temperature: float = TEMPERATURE
    weighting: str = WEIGHTING
    low_q: float | None = None
    high_q: float | None = None
    medium_q: tuple[float, float] | None = None
    profile: str | None = None
    per_benchmark: bool = False
    keep_misc: bool = False
    seed: int = SEED
    backend: str = DEFAULT_BACKEND
    precision: str = DEFAULT_PRECISION

    def __post_init__(self) -> None:
        for name in ("levels", "benchmarks", "medium_q"):
            value = getattr(self, name)
            if isinstance(value, str):  # a comma-separated list, as the command line has it
                value = [x.strip() for x in value.split(",") if x.strip()]
            if value is not None:
                object.__setattr__(self, name, tuple(value))
        if self.benchmarks in (("all",), ()):
            object.__setattr__(self, "benchmarks", ())
        if self.strategy not in STRATEGIES:
            raise BuildersError(
                f"unknown strategy {self.strategy!r}. Valid: {', '.join(STRATEGIES)}"
            )
        bad = [lv for lv in self.levels if lv not in LEVELS]
        if bad or not self.levels:
            raise BuildersError(
                f"unknown level {bad[0] if bad else ''!r}. Valid: {', '.join(LEVELS)}"
            )
        if self.weighting not in WEIGHTINGS:
            raise BuildersError(
                f"unknown weighting {self.weighting!r}. Valid: {', '.join(WEIGHTINGS)}"
            )
        check_choice(self.backend, self.precision)
        if self.k < 1:
            raise BuildersError(f"--k must be >= 1, got {self.k}")
        if self.temperature <= 0:
            raise BuildersError(f"temperature must be > 0, got {self.temperature}")

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Every parameter but the source with its default (what a scenario may set)."""
        return {f.name: f.default for f in fields(cls) if f.name != "source"}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "level": self.level,
            "strategy": self.strategy,
            "selection": self.selection,
            "sentences": self.sentences,
            "mentions": self.mentions,
            "labels": self.labels,
            "familiarity": self.familiarity.to_dict(),
        }


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
    cuts: dict[str, SelectionResult] = field(repr=False)
    embedded_new: int = 0

    def selected(self, level: str) -> list[str]:
        """The training labels a level keeps."""
        mask = self.cuts[level].mask
        return [lab for lab, keep in zip(self.table.labels, mask, strict=True) if keep]

    @property
    def eval_labels(self) -> tuple[str, ...]:
        return union_labels(self.benchmarks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "toolkit_version": __version__,
            "config": self.config.to_dict(),
            "profile": self.profile,
            "eval_labels": list(self.eval_labels),
            "embedded_new": self.embedded_new,
            "full": self.full.to_dict(),
            "subsets": [{**s.to_dict(), "path": s.path} for s in self.subsets],
        }
