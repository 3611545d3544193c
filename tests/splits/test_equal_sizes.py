"""Levels of one size, bounded on what they write: a level that writes fewer mentions than it
was planned at is bounded again (--max-label-share) at the size it writes. The newcomer
review found a `familiarity` high level planned at 1,515 mentions with one label capped at
454 (0.3 of 1,515) that wrote 1,044: that label held 43.5% of it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from builders.shift.report import LabelTable
from builders.splits import SplitConfig, fitting
from builders.splits.levels import Level, bound_share
from builders.store.draws import Selection

TABLE = LabelTable.from_counts({"a": 2000, "b": 300, "c": 300, "d": 200})


def _level(name: str, size: int) -> Level:
    """A level cut to `size` over every label of TABLE, bounded at 0.3 of it."""
    take = np.array([size, 300, 300, 200], dtype=np.int64)
    level = Level(name, np.zeros(4, dtype=bool), {}, {}, np.arange(4), take, size)
    return bound_share(level, TABLE, 0.3)


def _fake_fit(store: object, cfg: SplitConfig, table: LabelTable, level: Level):  # type: ignore[no-untyped-def]
    """What `fit` writes: each label's planned mentions, none past the level's size."""
    assert level.take is not None and level.size is not None
    counts = {lab: int(n) for lab, n in zip(table.labels, level.take.tolist(), strict=True)}
    total = sum(counts.values())
    if total > level.size:  # the last label kept in part
        counts["d"] -= total - level.size
    return level, Selection(counts)


@pytest.fixture
def fake_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fitting, "fit", _fake_fit)


def test_a_level_writing_less_than_planned_is_bounded_at_what_it_writes(fake_fit: None) -> None:
    cfg = SplitConfig("x", "familiarity")
    planned = _level("high", 1515)
    assert planned.take is not None and int(planned.take[0]) == 454  # 0.3 of 1,515
    wrote = (planned, Selection({"a": 454, "b": 300, "c": 300, "d": 200}))  # 1,254 < 1,515
    other = _fake_fit(None, cfg, TABLE, _level("low", 1254))
    levels = fitting.equal_sizes(None, cfg, TABLE, [other, wrote])  # type: ignore[arg-type]
    for lv, chosen in levels:
        assert lv.take is not None
        # the fixed point: a = 0.3 * (a + 800), so a = 342 of 1,142 mentions
        assert chosen.counts["a"] <= 0.3 * chosen.mentions * (1 + fitting.EQUAL_WITHIN) + 1
    sizes = [chosen.mentions for _, chosen in levels]
    assert max(sizes) <= min(sizes) * (1 + fitting.EQUAL_WITHIN)
    assert 1140 <= min(sizes) < 1254


def test_no_bound_no_refit(fake_fit: None) -> None:
    cfg = SplitConfig("x", "familiarity", max_label_share=1.0)  # 1: no bound
    level = replace(_level("high", 1515), take=np.array([454, 300, 300, 200]))
    wrote = (level, Selection({"a": 454, "b": 300, "c": 300, "d": 200}))
    assert fitting.equal_sizes(None, cfg, TABLE, [wrote]) == [wrote]  # type: ignore[arg-type]
