"""What a `familiarity` build's written levels must keep, and its refusal where they do not:
the gap (--min-gap) under every model, and with --targets each level's Familiarity within
the tolerance of its target (the build's model). The figures are given (`_written_unions`
stubbed), so each branch is checked without a build."""

from __future__ import annotations

import numpy as np
import pytest

import builders.splits.strategies.familiarity as familiarity
from builders.defaults import TARGET_TOLERANCE
from builders.shift.report import LabelTable
from builders.splits import SplitConfig
from builders.splits.levels import Level
from builders.splits.strategies.base import Placed
from builders.splits.strategies.familiarity import FamiliarityOptions
from builders.store.draws import Selection

TABLE = LabelTable.from_counts({"a": 10, "b": 10})


def _written(monkeypatch: pytest.MonkeyPatch, *unions: list[float]) -> None:
    monkeypatch.setattr(familiarity, "_written_unions", lambda *a: [list(u) for u in unions])


def _shortfall(cfg: SplitConfig) -> float:
    return familiarity._gap_shortfall(cfg, TABLE, [], [])


def test_a_level_off_its_target_is_a_shortfall(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = SplitConfig(
        "x", "familiarity", levels=("low", "high"), options=FamiliarityOptions(targets=(0.63, 0.5))
    )
    _written(monkeypatch, [0.6, 0.5])  # the gap holds, low is 0.03 off its target
    assert _shortfall(cfg) == pytest.approx(0.03 - TARGET_TOLERANCE)
    _written(monkeypatch, [0.62, 0.5])  # within the tolerance
    assert _shortfall(cfg) <= 0


def test_the_targets_are_the_build_models_a_check_models_gap_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = SplitConfig(
        "x", "familiarity", levels=("low", "high"), options=FamiliarityOptions(targets=(0.6, 0.5))
    )
    _written(monkeypatch, [0.6, 0.5], [0.9, 0.88])  # the check model's gap is 0.03 short
    assert _shortfall(cfg) == pytest.approx(cfg.options.min_gap - 0.02)


def _rounds(n: int, levels: tuple[str, ...]) -> list[tuple[float, float, int, Placed]]:
    fitted = [
        (Level(lv, np.ones(2, dtype=bool), {}, {}), Selection({"a": 5, "b": 4})) for lv in levels
    ]
    placed = Placed("familiarity", np.zeros(2), {}, fitted)
    return [(0.01 * (i + 1), 0.05, 10 - i, placed) for i in range(n)]


def test_one_level_off_its_target_is_refused_without_gaps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = SplitConfig(
        "x", "familiarity", levels=("high",), options=FamiliarityOptions(targets=(0.5,))
    )
    _written(monkeypatch, [0.55])
    refused = familiarity._missed(cfg, TABLE, [], {}, _rounds(1, ("high",)), 0)
    text = str(refused)
    assert "miss --targets 0.5 (within 0.02) or --min-gap 0.05 in the one placement" in text
    assert "levels of 9 mentions (10 planned)" in text
    assert "high 0.550." in text and "gaps" not in text


def test_the_refusal_names_every_placement_and_model(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = SplitConfig("x", "familiarity", levels=("low", "high"))
    _written(monkeypatch, [0.6, 0.58], [0.7, 0.69])
    checks = {"check/model": np.zeros((2, 2))}
    text = str(familiarity._missed(cfg, TABLE, [], checks, _rounds(3, ("low", "high")), 0))
    assert "in each of the 3 placements tried" in text
    assert "low 0.600, high 0.580 (gaps 0.020); check/model: low 0.700, high 0.690" in text
